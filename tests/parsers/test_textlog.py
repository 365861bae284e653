"""parsers.textlog on real TORCH_LOGS captures (gpu/ traces and the CPU fixtures)."""

from __future__ import annotations

import datetime as dt
import gzip
import re
from pathlib import Path

import polars as pl
import pytest

from parsers.textlog import LOG_RECORDS_SCHEMA, OTHER_LINES_SCHEMA, STATS_SCHEMA, read_text_log
from tests.conftest import FIXTURES, GPU, needs_shared

TRAIN = GPU / "train_dynamic" / "torch_logs.txt"


def fixture_log(name: str) -> Path:
    path = FIXTURES / name / "torch_logs.txt"
    if not path.exists():
        pytest.fail(f"fixture {name} is missing: fixtures/make_fixtures.py makes it")
    return path


@pytest.fixture(scope="module")
def train():
    return read_text_log(TRAIN)


@needs_shared
def test_schemas(train):
    assert train.records.schema == LOG_RECORDS_SCHEMA
    assert train.other_lines.schema == OTHER_LINES_SCHEMA
    assert train.stats.schema == STATS_SCHEMA
    assert train.log_records is train.records


@needs_shared
def test_train_dynamic_counts(train):
    st = train.stats.row(0, named=True)
    assert st["lines"] == 21019
    assert st["records"] == 1778
    assert st["record_lines"] == 21017
    assert st["other_lines"] == 2
    assert st["continuation_lines"] == 0
    assert st["legacy_continuation"] is False
    assert st["invalid_utf8"] is False and st["truncated_tail"] is False
    # The two program lines: a Python UserWarning printed on stderr between records.
    assert train.other_lines["lineno"].to_list() == [887, 888]
    assert "UserWarning: TensorFloat32 tensor cores" in train.other_lines["text"][0]
    assert train.other_lines["text"][1] == "  warnings.warn("
    # Every line is either part of a record or an other line.
    assert train.records["lines"].sum() + train.other_lines.height == st["lines"]


@needs_shared
def test_train_dynamic_first_record_is_the_graph_break(train):
    r = train.records.row(0, named=True)
    assert (r["lineno"], r["end_lineno"], r["lines"], r["contiguous"]) == (1, 35, 35, True)
    assert r["artifact"] == "graph_breaks"
    assert (r["level"], r["pid"], r["rank"]) == ("V", 433, None)
    assert (r["src_file"], r["src_line"]) == ("torch/_dynamo/symbolic_convert.py", 5127)
    assert (r["compile_id"], r["trace_id"], r["frame_id"], r["frame_compile_id"]) == (
        "0/0", "[0/0]", 0, 0,
    )
    assert r["attempt"] == 0 and r["compiled_autograd_id"] is None
    ts = r["ts"]
    assert (ts.month, ts.day, ts.time()) == (11, 21, dt.time(12, 38, 35, 377000))
    mtime = dt.datetime.fromtimestamp(TRAIN.stat().st_mtime)
    assert ts.year == (mtime.year if mtime.month >= 11 else mtime.year - 1)
    lines = r["text"].split("\n")
    assert len(lines) == 35
    assert lines[0] == "Graph break in user code at /home/user/gptdemo/gpt.py:49"
    assert lines[2] == ""  # the empty message line keeps its place
    assert lines[-2] == "    torch._dynamo.graph_break()"
    # contiguous: line k of text is file line lineno + k
    raw = TRAIN.read_text().split("\n")
    assert raw[r["lineno"] - 1 + 33].endswith(lines[33])


@needs_shared
def test_attempt_and_artifacts(train):
    recs = train.records
    g = recs.filter((pl.col("trace_id") == "[2/0_1]") & (pl.col("artifact") == "guards"))
    assert g["compile_id"].unique().to_list() == ["2/0"]
    assert g["attempt"].unique().to_list() == [1]
    assert g["frame_id"].unique().to_list() == [2]
    # GUARDS: header, the tree, the latency line: three records (three torch source lines)
    assert g["src_line"].to_list() == [4204, 3911, 3947]
    assert g["text"][1].split("\n")[:3] == ["", "TREE_GUARD_MANAGER:", "+- RootGuardManager"]
    assert g["text"][2] == "Guard eval latency = 21.21 us"
    # A non-artifact warning of logger torch._dynamo inside compile 2/0.
    w = recs.filter(pl.col("lineno") == 2509).row(0, named=True)
    assert (w["level"], w["artifact"], w["trace_id"]) == ("W", None, "[2/0]")
    assert w["text"].startswith("Profiler record function")
    by_artifact = dict(recs.group_by("artifact").len().iter_rows())
    assert by_artifact["recompiles"] == 1
    assert by_artifact["graph_breaks"] == 3


@needs_shared
def test_record_without_compile_id():
    tl = read_text_log(GPU / "reduce_overhead" / "torch_logs.txt")
    r = tl.records.filter(pl.col("text").str.starts_with("Recording cudagraph tree for graph"))
    row = r.row(0, named=True)
    assert row["artifact"] == "cudagraphs"
    assert row["compile_id"] is None and row["trace_id"] is None and row["attempt"] is None
    # cudagraph_trees writes the compile id into the message, after the artifact tag
    warm = tl.records.filter(pl.col("text").str.starts_with("[0/0] Running warmup"))
    assert warm.height == 1 and warm["compile_id"][0] is None
    assert tl.stats["other_lines"][0] == 2


@needs_shared
def test_error_record_with_traceback():
    tl = read_text_log(GPU / "max_autotune" / "torch_logs.txt")
    r = tl.records.row(0, named=True)
    assert (r["level"], r["lineno"], r["end_lineno"], r["artifact"]) == ("E", 1, 16, None)
    assert r["text"].split("\n")[1] == "Traceback (most recent call last):"
    assert r["text"].split("\n")[-1].startswith("RuntimeError: No valid triton configs.")
    # The autotuning table is printed, not logged.
    other = tl.other_lines["text"].to_list()
    assert "Autotune Choices Stats:" in other
    assert any(t.startswith("AUTOTUNE addmm(512x4096, 512x1024, 1024x4096)") for t in other)


def test_multirank_prefixes():
    tl = read_text_log(fixture_log("multirank"))
    recs = tl.records
    assert tl.stats["other_lines"][0] == 0
    gb = recs.filter(pl.col("artifact") == "graph_breaks")
    assert sorted(gb["rank"].to_list()) == [0, 1]
    assert gb["trace_id"].unique().to_list() == ["[1/0]"]
    assert gb["pid"].n_unique() == 2
    assert all(t.startswith("Graph break in user code at ") for t in gb["text"])
    assert not any("[rank" in t for t in gb["text"])
    rc = recs.filter(pl.col("artifact") == "recompiles").row(0, named=True)
    assert (rc["rank"], rc["trace_id"]) == (1, "[0/1]")


def test_interleaved_ranks_stay_one_record_each(tmp_path):
    # Real lines of the multirank fixture, reordered to alternate rank 1 and rank 0 line by
    # line (what two processes writing to one stderr can produce).
    lines = fixture_log("multirank").read_text().splitlines()
    r1 = [x for x in lines if x.startswith("[rank1]:") and "__graph_breaks" in x]
    r0 = [x for x in lines if x.startswith("[rank0]:") and "__graph_breaks" in x]
    mixed = [x for pair in zip(r1, r0) for x in pair]
    p = tmp_path / "interleaved.txt"
    p.write_text("\n".join(mixed) + "\n")
    tl = read_text_log(p)
    assert tl.records.height == 2
    assert tl.records["lines"].to_list() == [len(r1), len(r0)]
    assert tl.records["contiguous"].to_list() == [False, False]
    orig = read_text_log(fixture_log("multirank")).records
    for rank in (0, 1):
        a = tl.records.filter(pl.col("rank") == rank)["text"][0]
        b = orig.filter((pl.col("rank") == rank) & (pl.col("artifact") == "graph_breaks"))
        assert a == b["text"][0]


def test_program_traceback_is_other_lines():
    tl = read_text_log(fixture_log("backend_error"))
    other = tl.other_lines["text"].to_list()
    assert other[0] == "Traceback (most recent call last):"
    assert 'RuntimeError: planted backend failure' in other
    assert tl.records.height == 1
    assert tl.records["artifact"][0] == "graph_breaks"
    assert tl.records["lineno"][0] == tl.other_lines.height + 1


@needs_shared
def test_gzip_same_as_plain(tmp_path):
    gz = tmp_path / "torch_logs.txt.gz"
    gz.write_bytes(gzip.compress(TRAIN.read_bytes()))
    a = read_text_log(TRAIN)
    b = read_text_log(gz)
    assert a.records.drop("file", "ts").equals(b.records.drop("file", "ts"))
    assert b.stats["bytes"][0] == gz.stat().st_size
    assert b.records["file"][0] == str(gz)


@needs_shared
def test_legacy_unprefixed_continuations(tmp_path):
    # Derived from the real train_dynamic log: the prefix is removed from every line that
    # repeats the prefix of the line before it, which is how torch < 2.2 printed multi-line
    # messages (only the first line prefixed).
    prefix = re.compile(
        r"^(?:\[rank\d+\]:)?[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^\]]+:\d+\]"
        r"(?: \[[!\d/_]+\])?(?: \[__[^\]\s]+\])? ?"
    )
    out, prev = [], None
    for line in TRAIN.read_text().splitlines():
        m = prefix.match(line)
        out.append(line[m.end():] if m and m.group(0) == prev else line)
        prev = m.group(0) if m else None
    legacy = tmp_path / "legacy.txt"
    legacy.write_text("\n".join(out) + "\n")

    modern = read_text_log(TRAIN)
    tl = read_text_log(legacy)
    st = tl.stats.row(0, named=True)
    assert st["legacy_continuation"] is True
    assert st["continuation_lines"] == 19239
    cols = ["lineno", "end_lineno", "lines", "compile_id", "trace_id", "artifact", "text"]
    assert tl.records.select(cols).equals(modern.records.select(cols))
    # the Python warning after a graph-break record is still program output
    assert tl.other_lines["lineno"].to_list() == [887, 888]
    # forcing the modern rule turns every continuation line into an other line
    forced = read_text_log(legacy, continuation="prefixed")
    assert forced.stats["other_lines"][0] == 19239 + 2
    # and the auto rule keeps modern logs modern
    assert read_text_log(TRAIN, continuation="auto").stats["legacy_continuation"][0] is False


@needs_shared
def test_bad_input_never_fatal(tmp_path):
    # Hand-made broken file: the first lines of a real record with invalid UTF-8 bytes and a
    # CR added, a garbage line with a NUL, and a truncated last line without newline.
    good = TRAIN.read_bytes().split(b"\n")[:4]
    data = (
        good[0] + b"\xff\xfe\n"
        + good[1] + b"\r\n"
        + good[2] + b"\n"
        + b"\x00garbage \x80 line\n"
        + good[3][:40]
    )
    p = tmp_path / "broken.txt"
    p.write_bytes(data)
    tl = read_text_log(p)
    st = tl.stats.row(0, named=True)
    assert st["invalid_utf8"] is True and st["truncated_tail"] is True
    assert st["lines"] == 5 and st["legacy_continuation"] is False
    assert tl.records.height == 1
    text = tl.records["text"][0].split("\n")
    assert text[0].endswith("gpt.py:49\ufffd\ufffd")
    assert text[1].startswith("Graph Break Reason:") and not text[1].endswith("\r")
    assert text[2] == ""
    assert tl.other_lines["lineno"].to_list() == [4, 5]
    assert tl.other_lines["text"][0] == "\x00garbage \ufffd line"

    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    e = read_text_log(empty)
    assert e.records.height == 0 and e.other_lines.height == 0
    assert e.records.schema == LOG_RECORDS_SCHEMA
    assert e.stats["lines"][0] == 0

    binary = tmp_path / "binary.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    b = read_text_log(binary)
    assert b.records.height == 0 and b.stats["invalid_utf8"][0] is True
