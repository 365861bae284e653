"""The rules that exist once (issue 17): compile ids and their order, which of a fact's two
sources counts, a guard source in the user's terms, the year of a glog record."""

from __future__ import annotations

import datetime as dt

import polars as pl

from parsers.compile_ids import (
    CompileId,
    compile_id_expr,
    compile_number,
    frame_group,
    frame_of,
    label,
    parse,
    sort_exprs,
    sort_key,
    trace_id_expr,
    with_attempt,
)
from parsers.facts import user_name
from parsers.glog import timestamp, year_and_month
from parsers.sources import prefer_trace
from parsers.torch_trace import read_trace
from tests.conftest import FIXTURES

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


def _ids_of(fields: list[tuple[int | None, int | None, int | None, int | None]]) -> pl.DataFrame:
    """compile_id and trace_id of envelope fields (compiled_autograd_id, frame_id,
    frame_compile_id, attempt) as the events table builds them."""
    df = pl.DataFrame(
        fields,
        schema={"compiled_autograd_id": pl.Int32, "frame_id": pl.Int32, "frame_compile_id": pl.Int32, "attempt": pl.Int32},
        orient="row",
    )
    return df.with_columns(compile_id_expr().alias("compile_id")).with_columns(trace_id_expr().alias("trace_id"))


def test_the_id_expressions_write_what_parse_reads() -> None:
    # each form torch writes, with the attempt, and "3/-" (a frame without a compile number)
    forms = ["3/1", "3/1_2", "10/12", "!0", "!2_1", "!0/3/1", "!0/3/1_1", "3/-", "3/-_1"]
    parsed = [parse(t) for t in forms]
    assert None not in parsed
    got = _ids_of([(c.compiled_autograd, c.frame, c.compile, c.attempt) for c in parsed])
    assert got["trace_id"].to_list() == [f"[{t}]" for t in forms]
    assert got["compile_id"].to_list() == [t.split("_")[0] for t in forms]
    # the Python side writes the same strings, and parse reads them back into the same fields
    assert got["compile_id"].to_list() == [c.compile_id for c in parsed]
    assert [with_attempt(c.compile_id, c.attempt) for c in parsed] == forms
    assert [parse(t) for t in got["trace_id"]] == parsed
    assert [label(t) for t in got["compile_id"]] == [c.compile_id for c in parsed]


def test_the_id_expressions_without_a_frame() -> None:
    got = _ids_of([(None, None, None, None), (None, None, None, 2), (None, None, 4, 0), (0, None, 4, 0)])
    assert got["compile_id"].to_list() == [None, None, None, "!0"]
    assert got["trace_id"].to_list() == [None, None, None, "[!0]"]
    # torch never writes a compiled-autograd id with a frame but no compile number: the
    # expression gives null where CompileId.compile_id writes "!0/3/-" (kept: parsed tables
    # are cached under their PARSER_VERSION; see compile_id_expr)
    assert _ids_of([(0, 3, None, 0)])["compile_id"].to_list() == [None]
    assert CompileId(frame=3, compile=None, compiled_autograd=0).compile_id == "!0/3/-"


def test_the_events_ids_read_back_into_their_own_fields() -> None:
    # real torch traces: plain compiles and recompiles, and compiled autograd (`!0/1/0`, a gzip log)
    files = [*(FIXTURES / "recompiles" / "trace").glob("*.log"), *(FIXTURES / "corpus" / "compiled_autograd" / "trace").glob("*")]
    ev = read_trace(files).events.filter(pl.col("compile_id").is_not_null())
    rows = ev.select("compile_id", "trace_id", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt").rows()
    assert len(rows) > 100
    assert any(r[2] is not None and r[3] is not None for r in rows)  # !N/F/C ids are there
    assert any(r[2] is None for r in rows) and any(r[5] for r in rows)  # plain ids, and an attempt
    for cid, tid, ca, fid, fcid, attempt in rows:
        assert parse(cid) == CompileId(fid, fcid, ca), cid
        assert parse(tid) == CompileId(fid, fcid, ca, attempt or 0), tid


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


def test_glog_rank_prefixes_of_torch_and_torchrun() -> None:
    """The rank before a record: torch's `[rankN]:`, torchrun --tee's `[<role><local rank>]:`,
    or both (the global rank wins); the same in Python's re and in polars (no lookahead)."""
    import re

    from parsers.glog import HEAD

    lines = {
        "I1123 11:57:52.767000 30233 torch/_dynamo/x.py:1] m": None,
        "[rank3]:W1123 11:57:52.767000 30233 torch/_dynamo/x.py:1] m": "3",
        "[default1]:I1123 11:57:52.767000 30233 torch/_dynamo/x.py:1] m": "1",
        "[default0]:[rank0]:V1123 11:57:53.368000 30232 torch/_dynamo/x.py:1] m": "0",
        "[trainer12]:[rank7]:E1123 11:57:53.368000 30232 torch/_dynamo/x.py:1] m": "7",
    }
    py = {line: re.match(HEAD, line) for line in lines}
    assert {line: m and m["rank"] for line, m in py.items()} == lines
    assert all(m is not None and m["level"] == line.split("]:")[-1][0] for line, m in py.items())
    got = pl.Series(list(lines)).str.extract_groups(HEAD).struct.field("rank").to_list()
    assert got == list(lines.values())


def test_torchrun_tee_capture_keeps_the_ranks_apart() -> None:
    """fixtures/torchrun_tee: a real `torchrun --tee 3` run, both ranks' records in one capture
    (`[default1]:` before init_process_group, `[default0]:[rank0]:` after) with the same compile
    ids. Each rank is its own process: rank 0 compiled `scale` 3 times, rank 1 twice (planted),
    from the text log alone and from the trace alone; a rank's `[0/0]` is not another
    occurrence of the other rank's."""
    import traceview
    from traceview.analyze.storms import recompile_storms

    from ..conftest import FIXTURES

    text = traceview.load(FIXTURES / "torchrun_tee" / "torch_logs.txt")
    lr = text.log_records.filter(pl.col("compile_id").is_not_null())
    # every record of a pid carries that pid's rank
    assert lr.group_by("pid").agg(pl.col("rank").n_unique())["rank"].to_list() == [1, 1]
    assert sorted(lr["rank"].unique().to_list()) == [0, 1]
    for t in (text, traceview.load(FIXTURES / "torchrun_tee" / "trace")):
        got = {s["rank"]: (s["function"], s["epoch"], s["compiles"], s["recompiles"]) for s in recompile_storms(t)}
        assert got == {0: ("scale", 1, 3, 2), 1: ("scale", 1, 2, 1)}


def test_two_ranks_have_no_majority() -> None:
    """fixtures/torchrun_tee: rank 0 compiled 0/2, rank 1 did not. With two ranks neither is
    "most ranks": the summary names the reference rank instead."""
    import traceview
    from traceview.output.report import build_report
    from traceview.output.summary import render_text

    from ..conftest import FIXTURES

    report = build_report(traceview.load(FIXTURES / "torchrun_tee" / "trace"))
    [d] = report["rank_divergence"]
    assert (d["rank"], d["detail"]) == (1, "lacks 0/2 that rank 0 compiles")
    # one root cause, one finding: rank 1 lacks it because rank 0 compiled it alone while rank 1
    # waited, which the stall says (issue 44)
    text = render_text(report, width=400)
    assert "rank 1 waited ~0.10s at its next collective while rank 0 recompiled [0/2] scale" in text
    assert "RANK DIVERGENCE" not in text
    assert "most ranks" not in text and "majority" not in text
