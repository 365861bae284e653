"""The TORCH_TRACE parser on real logs: lossless envelopes, counts, md5, interning, bad bytes."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
from pathlib import Path

import orjson
import polars as pl
import pytest

from parsers.compiles import build_compiles
from parsers.discover import InputError, discover
from parsers.torch_trace import read_trace, read_trace_file
from tests.conftest import FIXTURES, GPU, PEER, SHARED, needs_shared, shared_inputs

PREFIX = re.compile(r"^(\[rank\d+\]:)?[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^\]]+:\d+\] ")


def all_trace_files() -> list[Path]:
    files = sorted(FIXTURES.glob("*/trace/*.log"))
    if SHARED.is_dir():
        files += sorted(p for p in PEER.rglob("*") if p.is_file() and p.stat().st_size)
        files += sorted(GPU.glob("*/trace/*.log"))
    return files


def independent_envelopes(path: Path) -> list[tuple[int, str, str | None]]:
    """(lineno, kind, payload) per envelope, by a plain line loop and the stdlib json module."""
    out: list[tuple[int, str, list[str] | None]] = []
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        text = fh.read().replace("\r\n", "\n")
    for i, line in enumerate(text.split("\n"), start=1):
        if line.startswith("\t"):
            if out and out[-1][2] is not None:
                out[-1][2].append(line[1:])
            continue
        if line == "" and out and out[-1][2]:
            out[-1][2].append("")  # an empty payload line that lost its tab
            continue
        m = PREFIX.match(line)
        if not m:
            if out:
                out[-1] = (out[-1][0], out[-1][1], None)
            continue
        try:
            d = json.loads(line[m.end():])
        except ValueError:
            continue
        if isinstance(d, dict) and d:
            out.append((i, next(iter(d)), []))
    return [(ln, k, "\n".join(p) if p else None) for ln, k, p in out]


@pytest.mark.parametrize("path", all_trace_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_envelope_is_a_row(path: Path) -> None:
    got = read_trace_file(path)
    want = independent_envelopes(path)
    assert got.events.height == len(want)
    assert got.events["lineno"].to_list() == [w[0] for w in want]
    assert got.events["kind"].to_list() == [w[1] for w in want]
    assert got.stats["envelopes"].item() == len(want)
    # payload text is byte-exact for every payload whose md5 checks out
    ok = got.events.filter(pl.col("payload_ok").fill_null(False))
    for lineno, payload, md5 in ok.select("lineno", "payload", "payload_md5").iter_rows():
        assert hashlib.md5(payload.encode()).hexdigest() == md5, lineno


@needs_shared
@pytest.mark.parametrize("path", shared_inputs(), ids=lambda p: str(p.relative_to(SHARED)))
def test_every_shared_input_loads(path: Path) -> None:
    import traceview

    if path.is_file() and path.stat().st_size == 0:
        with pytest.raises(InputError, match="empty file"):
            traceview.load(path)
        return
    t = traceview.load(path)
    assert t.events.height + t.log_records.height > 0
    t.compiles  # noqa: B018  (derived tables build without an exception)
    t.spans  # noqa: B018


@needs_shared
def test_corrupted_json_keeps_good_envelopes_and_reports_line() -> None:
    good = read_trace_file(PEER / "simple.log")
    bad = read_trace_file(PEER / "simple_corrupted_json.log")
    # the corruption removes one line ("},") from the payload of the envelope at line 13
    assert bad.events.height == good.events.height == 76
    assert bad.problems.select("lineno", "problem").rows() == [(13, "md5_mismatch")]
    assert bad.stats["md5_mismatch"].item() == 1
    row = bad.events.filter(pl.col("lineno") == 13)
    assert row["payload_ok"].item() is False
    assert row["kind"].item() == "chromium_event"
    assert bad.events.filter(pl.col("lineno") != 13)["payload_ok"].drop_nulls().all()


def test_invalid_utf8_loads(tmp_path: Path) -> None:
    # Hand-made broken input: a real fixture log with two invalid bytes put into one payload line.
    src = next((FIXTURES / "simple" / "trace").glob("*.log"))
    lines = src.read_bytes().split(b"\n")
    idx = next(i for i, ln in enumerate(lines) if ln.startswith(b"\t"))
    lines[idx] = lines[idx] + b"\xff\xfe"
    broken = tmp_path / "dedicated_log_torch_trace_broken.log"
    broken.write_bytes(b"\n".join(lines))
    got = read_trace_file(broken)
    base = read_trace_file(src)
    assert got.events.height == base.events.height
    assert got.stats["invalid_utf8"].item() is True
    assert got.problems.filter(pl.col("problem") == "invalid_utf8")["lineno"].to_list() == [idx + 1]
    assert got.problems.filter(pl.col("problem") == "md5_mismatch").height == 1


def test_gzip_equals_plain(tmp_path: Path) -> None:
    src = next((FIXTURES / "training" / "trace").glob("*.log"))
    gz = tmp_path / (src.name + ".gz")
    gz.write_bytes(gzip.compress(src.read_bytes()))
    a = read_trace_file(src).events.drop("file")
    b = read_trace_file(gz).events.drop("file")
    assert a.equals(b)


@needs_shared
def test_crlf_log_checks_md5() -> None:
    # tlparse's multi_rank_logs rank 1 has CRLF line ends; torch hashed the LF text
    p = read_trace_file(PEER / "multi_rank_logs" / "dedicated_log_torch_trace_rank_1.log")
    assert p.stats["md5_mismatch"].item() == 0
    assert p.events["payload_ok"].drop_nulls().all()


def test_unknown_kind_is_kept_and_counted(tmp_path: Path) -> None:
    # Hand-modified input: one real envelope renamed to an event kind no torch version writes.
    src = next((FIXTURES / "simple" / "trace").glob("*.log"))
    text = src.read_text()
    text = text.replace('{"dynamo_start": ', '{"brand_new_event_kind": ', 1)
    f = tmp_path / "dedicated_log_torch_trace_unknown.log"
    f.write_text(text)
    p = read_trace_file(f)
    row = p.events.filter(pl.col("kind") == "brand_new_event_kind")
    assert row.height == 1
    assert row["known_kind"].item() is False
    assert "stack" in orjson.loads(row["metadata"].item())
    assert p.stats["unknown_kinds"].item() == 1
    assert p.events.filter(pl.col("kind") != "brand_new_event_kind")["known_kind"].all()


def test_compile_id_forms() -> None:
    # the trace ids built from the envelopes' fields are the ones torch itself printed in the
    # text log of the same run (glog prefix, then `[0/0_1]`), attempts included
    p = read_trace(sorted((FIXTURES / "graph_breaks" / "trace").glob("*.log")))
    text = (FIXTURES / "graph_breaks" / "torch_logs.txt").read_text()
    printed = set(re.findall(r"^[VIWEC]\d{4} [\d:.]+ +\d+ [^\]]+\] (\[[!\d/_]+\])", text, re.M))
    assert {"[0/0_1]", "[4/0_1]", "[7/1]"} <= printed
    assert set(p.events["trace_id"].drop_nulls().unique()) == printed
    # the compile id is the trace id without its attempt, the attempt a column of its own
    rows = p.events.filter(pl.col("trace_id") == "[4/0_1]").select("compile_id", "attempt", "frame_id", "frame_compile_id")
    assert rows.unique().rows() == [("4/0", 1, 4, 0)]


@needs_shared
def test_compiled_autograd_ids() -> None:
    # tlparse's comp_metrics.log has compiled autograd ids in the trace of old torch versions
    files = [p for p in PEER.glob("*.log") if "compiled_autograd_id" in p.read_text(errors="replace")]
    assert files, "expected a peer log with compiled_autograd_id"
    for f in files:
        ev = read_trace_file(f).events.filter(pl.col("compiled_autograd_id").is_not_null())
        for ca, fid, fc, cid in ev.select("compiled_autograd_id", "frame_id", "frame_compile_id", "compile_id").unique().iter_rows():
            assert cid == (f"!{ca}/{fid}/{fc}" if fid is not None else f"!{ca}")


@needs_shared
def test_string_interning_is_per_file() -> None:
    # Each rank file interns its own ids; a user stack must resolve with its own file's table.
    d = PEER / "multi_rank_runtime"
    p = read_trace(sorted(d.glob("*.log")))
    comp = build_compiles(p.events, p.strings)
    for f in sorted(d.glob("*.log")):
        own: dict[int, str] = {}
        first_stack: list[str] | None = None
        for line in f.read_text().splitlines():
            if line.startswith("\t") or "] {" not in line:
                continue
            env = json.loads(line.split("] ", 1)[1])
            if "str" in env:
                own[env["str"][1]] = env["str"][0]
            if "dynamo_start" in env and first_stack is None:
                first_stack = [own[fr["filename"]] for fr in env["dynamo_start"]["stack"]]
        got = comp.filter(pl.col("file") == str(f)).sort("lineno")["user_stack"][0].to_list()
        assert [g.split(":")[0] for g in got] == first_stack


@needs_shared
def test_compile_ids_match_tlparse() -> None:
    expected = json.loads((Path(__file__).parent / "data" / "tlparse_compile_ids.json").read_text())
    checked = 0
    for rel, exp in expected["inputs"].items():
        path = SHARED / rel
        if not path.exists() or path.stat().st_size == 0:
            continue
        try:
            kind = discover(path)
        except InputError:
            continue
        p = read_trace(kind.trace_paths)
        ids = p.events.filter(pl.col("trace_id").is_not_null())["trace_id"].unique().to_list()
        got = sorted(i.strip("[]") for i in ids)
        assert got == sorted(exp["compile_ids"]), rel
        # and the compiles table has one row per compile id without the attempt, per
        # occurrence: an id used again after torch._dynamo.reset() (a new dynamo_start after
        # the id's compilation_metrics) is another compile (issue 13 class 1)
        comp = build_compiles(p.events, p.strings)
        # a compile without a Dynamo frame (AOTInductor) is in tlparse's no-compile-id bucket,
        # in its directory unknown_<line of its compilation_metrics> (parsers.frameless)
        frameless = comp.filter(pl.col("compile_id").str.starts_with("unknown_"))
        null_metrics = p.events.filter((pl.col("kind") == "compilation_metrics") & pl.col("compile_id").is_null())
        assert set(frameless["compile_id"]) <= {f"unknown_{n}" for n in null_metrics["lineno"]}, rel
        comp = comp.filter(~pl.col("compile_id").str.starts_with("unknown_"))
        assert sorted(comp["compile_id"].unique().to_list()) == sorted({c.split("_")[0] for c in exp["compile_ids"]}), rel
        starts = p.events.filter(pl.col("kind") == "dynamo_start").group_by("compile_id").len()
        for cid, n in starts.iter_rows():
            assert sorted(comp.filter(pl.col("compile_id") == cid)["occurrence"].to_list()) == list(range(1, n + 1)), (rel, cid)
        checked += 1
    assert checked >= 30


@needs_shared
def test_multi_run_directory_is_reported() -> None:
    # tlparse's multi_rank_runtime holds ranks 0-4 of one run and ranks 5-6 of another (other day)
    inp = discover(PEER / "multi_rank_runtime")
    assert inp.runs == 2
    newest = discover(PEER / "multi_rank_runtime", latest=True)
    assert sorted(t.rank for t in newest.traces) == [5, 6]
    assert len(newest.dropped_runs) == 5


@needs_shared
def test_stray_files_are_reported_not_dropped(tmp_path: Path) -> None:
    inp = discover(PEER / "multi_rank_messy_input")
    assert sorted(t.rank for t in inp.traces) == [0, 1]
    assert sorted(Path(p).name for p, _ in inp.stray) == ["another.log", "some_other_file.txt"]


def test_input_directory_is_not_modified(tmp_path: Path) -> None:
    import traceview
    from traceview.output.export import write_export

    d = tmp_path / "in"
    shutil.copytree(FIXTURES / "multirank" / "trace", d)
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in d.iterdir()}
    t = traceview.load(d)
    write_export(t, tmp_path / "out")
    after = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in d.iterdir()}
    assert before == after


def test_empty_file_is_an_empty_table(tmp_path: Path) -> None:
    f = tmp_path / "dedicated_log_torch_trace_empty.log"
    f.write_bytes(b"")
    p = read_trace_file(f)
    assert p.events.height == 0
    assert p.stats["lines"].item() == 0
    assert p.problems.height == 0


def test_two_runs_one_with_a_frameless_compile_parse_as_one_batch() -> None:
    """A piecewise backend's frameless compile (run-time metrics with no compile id) beside
    another run's log in one batch: each file's columns come in chunks of their own (a gzip
    log's one per piece), and polars 2.1 panicked on `pl.format` over such a frame. The batch's
    compiles are each file's own, as when parsed alone."""
    from parsers.torch_trace import read_trace_files

    piecewise = str(next((FIXTURES / "corpus" / "piecewise_backend" / "trace").glob("*.log*")))
    other = str(next((FIXTURES / "corpus" / "aoti_export" / "trace").glob("*.log*")))
    both = read_trace_files([other, piecewise], lazy=True)
    assert all(n == 1 for n in both.events.n_chunks("all"))
    together = build_compiles(both.events, both.strings, both.chromium)
    for path in (piecewise, other):
        alone = read_trace_files([path], lazy=True)
        mine = together.filter(pl.col("file") == path)
        assert mine["compile_id"].to_list() == build_compiles(alone.events, alone.strings, alone.chromium)["compile_id"].to_list()
    assert together.filter(pl.col("file") == piecewise)["compile_id"].str.starts_with("unknown_").any()
