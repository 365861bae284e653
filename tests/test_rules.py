"""The rules that exist once (issue 17): compile ids and their order, which of a fact's two
sources counts, a guard source in the user's terms, the year of a glog record."""

from __future__ import annotations

import datetime as dt

import polars as pl

from parsers.compile_ids import (
    CompileId,
    compile_number,
    frame_group,
    frame_of,
    parse,
    sort_exprs,
    sort_key,
)
from parsers.facts import user_name
from parsers.glog import timestamp, year_and_month
from parsers.sources import prefer_trace

# every form torch writes (torch/_guards.py CompileId.__str__ / TraceId.__str__), shuffled
IDS = ["!1", "10/0", "0/1", "!0/3/1", "2/0", "0/0", "3/-", "0/1_1", "!0", "!0/1/0", "9/2"]


def test_parse_every_form() -> None:
    assert parse("3/1") == CompileId(frame=3, compile=1)
    assert parse("[7/0_1]") == CompileId(frame=7, compile=0, attempt=1)
    assert parse("!0") == CompileId(frame=None, compile=None, compiled_autograd=0)
    assert parse("!0/3/1") == CompileId(frame=3, compile=1, compiled_autograd=0)
    assert parse("3/-") == CompileId(frame=3, compile=None)
    assert [parse(s) for s in ("", None, "x", "3", "/3/1", "3/1/2")] == [None] * 6
    assert [parse(s).compile_id for s in ("3/1_2", "!0/3/1", "!0", "3/-")] == ["3/1", "!0/3/1", "!0", "3/-"]


def test_frame_and_compile_number_of_a_compiled_autograd_id() -> None:
    # "!0/3/1" is frame 3's compile 1; the old storms helpers read frame 0 and compile 3 from it
    assert (frame_of("!0/3/1"), compile_number("!0/3/1")) == (3, 1)
    assert (frame_of("!0"), compile_number("!0")) == (None, None)
    assert (frame_of("12/4"), compile_number("12/4")) == (12, 4)
    assert [frame_group(s) for s in ("12/4", "!0/3/1", "!2")] == ["12", "!0", "!2"]


def test_one_order_of_compile_ids() -> None:
    expected = ["0/0", "0/1", "0/1_1", "2/0", "3/-", "9/2", "10/0", "!0", "!0/1/0", "!0/3/1", "!1"]
    assert sorted(IDS, key=sort_key) == expected
    # the polars form sorts a column the same way, unparsable text last
    df = pl.DataFrame({"compile_id": [*IDS, "junk", None]})
    assert df.sort(sort_exprs())["compile_id"].to_list() == [*expected, None, "junk"]


def test_prefer_trace_keeps_text_rows_only_where_the_trace_has_none() -> None:
    df = pl.DataFrame(
        {
            "rank": [0, 0, None, None, 1, 1],
            "compile_id": ["0/0", "0/0", None, None, "1/0", "1/0"],
            "source": ["text", "trace", "text", "trace", "text", "text"],
            "n": [1, 2, 3, 4, 5, 6],
        }
    )
    assert prefer_trace(df, ["rank", "compile_id"])["n"].to_list() == [2, 4, 5, 6]
    assert prefer_trace(df.filter(pl.col("rank") == 1), ())["n"].to_list() == [5, 6]
    assert prefer_trace(df, ())["n"].to_list() == [2, 4]


def test_user_name_of_a_guard_source() -> None:
    assert user_name("L['x']") == "x"
    assert user_name("L['x'].size()[1]") == "x.size()[1]"
    assert user_name("G['cfg'].scale") == "cfg.scale"
    assert user_name("len(L['xs'])") == "len(xs)"
    assert user_name(None) == ""


def test_glog_year_comes_from_the_mtime_and_wraps_at_new_year() -> None:
    jan = dt.datetime(2025, 1, 3, 12, 0).timestamp()
    assert year_and_month(jan) == (2025, 1)
    df = pl.DataFrame({"md": ["1231", "0102", "bad!"], "time": ["23:59:59.000001", "00:00:01.500000", "x"]})
    ts = df.select(timestamp(pl.col("md"), pl.col("time"), *year_and_month(jan)).alias("ts"))["ts"].to_list()
    assert ts == [dt.datetime(2024, 12, 31, 23, 59, 59, 1), dt.datetime(2025, 1, 2, 0, 0, 1, 500000), None]
