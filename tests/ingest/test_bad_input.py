"""Damaged, odd and changing input (issue 14): nothing crashes, no intact record is lost,
no user file is deleted.

The traces are real (fixtures/, torch 2.13); the damage is done by hand in each test (a
flipped byte, a cut, an odd JSON value), as a user's disk, editor or running job would.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import polars as pl
import pytest

import traceview
from parsers.discover import InputError, discover
from parsers.torch_trace import InputChanged, hydrate, read_trace_files, scanning
from tests.conftest import FIXTURES
from traceview.ingest.loading import LoadOptions, load_trace
from traceview.output.export import EXPORT_MARKER, write_export
from traceview.output.report import build_report

SIMPLE = next((FIXTURES / "simple" / "trace").glob("*.log"))
RECOMPILES = next((FIXTURES / "recompiles" / "trace").glob("*.log"))
PREFIX = b"V1122 10:11:12.123000 1234 torch/_dynamo/foo.py:123] "


def records(path: Path) -> list[bytes]:
    """The file cut into records (header line + payload lines)."""
    out: list[bytes] = []
    for line in path.read_bytes().splitlines(keepends=True):
        if line.startswith(b"\t") and out:
            out[-1] += line
        else:
            out.append(line)
    return out


def trace_dir(tmp_path: Path, data: bytes, name: str = "dedicated_log_torch_trace_x.log") -> Path:
    d = tmp_path / "trace"
    d.mkdir(exist_ok=True)
    (d / name).write_bytes(data)
    return d


# ------------------------------------------------------- 2. a file that changes underneath


def test_file_truncated_between_discovery_and_parse(tmp_path: Path) -> None:
    recs = records(RECOMPILES)
    d = trace_dir(tmp_path, b"".join(recs))
    inputs = discover(d)
    f = d / "dedicated_log_torch_trace_x.log"
    cut = len(b"".join(recs[:100])) + 20  # 20 bytes into record 101
    os.truncate(f, cut)
    t = load_trace(LoadOptions.of(d, jobs=1, use_cache=False), inputs)
    assert t.events.height == 100
    assert "truncated_tail" in t.problems["problem"].to_list()
    build_report(t)


SHRINK_DURING_PARSE = textwrap.dedent(
    """
    import os, sys
    import parsers.torch_trace.reading as reading
    path = sys.argv[1]
    scan = reading.scan_bytes
    def shrink_then_scan(data, *a, **k):
        os.truncate(path, 100)  # the job rotated its log while we parse it
        return scan(data, *a, **k)
    reading.scan_bytes = shrink_then_scan
    parsed = reading.read_trace_files([path], lazy=True)
    print(parsed.events.height)
    """
)


def test_file_shrinking_during_the_parse_does_not_kill_the_process(tmp_path: Path) -> None:
    """The bytes are read, not memory-mapped: with a mapping, touching it after the file
    shrank killed the process with SIGBUS (exit -7, no message). In a subprocess, so that a
    regression fails this test instead of killing pytest."""
    f = tmp_path / "dedicated_log_torch_trace_x.log"
    f.write_bytes(RECOMPILES.read_bytes())
    r = subprocess.run([sys.executable, "-c", SHRINK_DURING_PARSE, str(f)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-500:])
    assert int(r.stdout) == len(records(RECOMPILES))  # what was read is parsed


def test_piece_of_a_file_that_shrank_is_a_problem(tmp_path: Path) -> None:
    from traceview.ingest.parse_jobs import process_trace_chunk

    f = tmp_path / "dedicated_log_torch_trace_x.log"
    data = RECOMPILES.read_bytes()
    f.write_bytes(data[: len(data) // 2])  # it was this long when the pieces were planned
    process_trace_chunk(str(f), 0, len(data), str(tmp_path / "part"))
    probs = pl.read_ipc(tmp_path / "part" / "problems.arrow")
    changed = probs.filter(pl.col("problem") == "file_changed")
    assert changed.height == 1 and str(len(data)) in changed["detail"][0]


def test_file_changed_after_the_parse_is_one_error_naming_it(tmp_path: Path) -> None:
    d = trace_dir(tmp_path, RECOMPILES.read_bytes())
    t = traceview.load(d, jobs=1)
    os.truncate(d / "dedicated_log_torch_trace_x.log", 1000)
    with pytest.raises(InputChanged, match=re.escape("dedicated_log_torch_trace_x.log: the file changed")):
        t.events  # noqa: B018 (payloads are read from the file now)


# ------------------------------------------------------------------ 3. export


def test_export_refuses_a_directory_with_a_foreign_manifest(tmp_path: Path) -> None:
    out = tmp_path / "d"
    out.mkdir()
    (out / "manifest.json").write_text("{}")
    (out / "notes.txt").write_text("precious")
    t = traceview.load(FIXTURES / "simple" / "trace", jobs=1)
    with pytest.raises(traceview.errors.ExportError, match=re.escape("not a traceview export")):
        write_export(t, out)
    assert (out / "notes.txt").read_text() == "precious"


def test_export_refuses_its_own_export_with_a_user_file_added(tmp_path: Path) -> None:
    out = tmp_path / "d"
    t = traceview.load(FIXTURES / "simple" / "trace", jobs=1)
    write_export(t, out)
    assert json.loads((out / "manifest.json").read_text())["written_by"] == EXPORT_MARKER
    (out / "notes.txt").write_text("mine")
    with pytest.raises(traceview.errors.ExportError, match=re.escape("also holds notes.txt")):
        write_export(t, out)
    (out / "notes.txt").unlink()
    write_export(t, out)  # its own export alone: replaced


def test_export_directory_gets_the_umask_permissions(tmp_path: Path) -> None:
    t = traceview.load(FIXTURES / "simple" / "trace", jobs=1)
    old = os.umask(0o022)
    try:
        write_export(t, tmp_path / "a")
        os.umask(0o027)
        write_export(t, tmp_path / "b")
    finally:
        os.umask(old)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "b").stat().st_mode & 0o777 == 0o750


def test_export_removes_what_a_killed_export_left(tmp_path: Path) -> None:
    from traceview.output.export import _PARTIAL

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / ".out.tmp-dead"
    stale.mkdir()
    (stale / _PARTIAL).write_text(dead.stdout.strip())
    running = tmp_path / ".out.tmp-running"  # an export still running (this process)
    running.mkdir()
    (running / _PARTIAL).write_text(str(os.getpid()))
    foreign = tmp_path / ".out.tmp-notours"
    foreign.mkdir()
    t = traceview.load(FIXTURES / "simple" / "trace", jobs=1)
    write_export(t, tmp_path / "out")
    assert not stale.exists()
    assert running.exists() and foreign.exists()
    assert not any(p.name.startswith(".out.tmp-") and p not in (running, foreign) for p in tmp_path.iterdir())


# ------------------------------------------------------- 4. odd field types, kept and counted


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (b'"dynamo_start": {"stack": [', b'"dynamo_start": {"stack": true, "x": [', None),
        (b'"dynamo_start": {"stack": [', b'"dynamo_start": {"stack": 1.5, "x": [', None),
        (b'"dynamo_start": {"stack": [', b'"dynamo_start": {"stack": {"": null}, "x": [', None),
        (b'{"artifact": {"name": "torch_version"', b'{"artifact": {"name": ["torch_version"]', "bad_field"),
        (b'"frame_id": 0, "frame_compile_id": 0', b'"rank": 1180591620717411303424, "frame_id": 0, "frame_compile_id": 0', "bad_field"),
        (b'"frame_id": 0, "frame_compile_id": 0', b'"frame_id": {"a": 1}, "frame_compile_id": 0', "bad_field"),
        (b'"has_payload": "', b'"has_payload": 7, "x": "', "bad_field"),
        (b'"ts": 1795265714964013.8', b'"ts": 1e30', None),
    ],
)
def test_odd_field_types_are_kept_and_counted(tmp_path: Path, old: bytes, new: bytes, problem: str | None) -> None:
    data = SIMPLE.read_bytes()
    assert old in data
    d = trace_dir(tmp_path, data.replace(old, new, 1))
    t = traceview.load(d, jobs=1)
    assert t.events.height == len(records(SIMPLE))  # every envelope kept
    kinds = t.problems["problem"].to_list()
    if problem:
        assert problem in kinds
    for name in ("compiles", "spans", "recompiles", "graph_breaks", "guards", "graphs", "kernels", "seq_links"):
        t.table(name)
    json.dumps(build_report(t))  # the report is JSON (a rank beyond 64 bits made --json fail)


def test_nan_infinity_and_lone_surrogates_are_json(tmp_path: Path) -> None:
    """torch writes headers with json.dumps, which writes these; they were bad JSON."""
    data = SIMPLE.read_bytes()
    fields = b'"frame_id": 0, "frame_compile_id": 0, "attempt": 0'
    odd = fields + b', "x": NaN, "y": Infinity, "z": -Infinity, "s": "\\ud800", "big": 1e400'
    d = trace_dir(tmp_path, data.replace(fields, odd))
    t = traceview.load(d, jobs=1)
    assert t.events.height == len(records(SIMPLE))
    assert t.problems.filter(pl.col("problem") == "bad_json").height == 0
    extra = t.events.filter(pl.col("extra").is_not_null())["extra"][0]
    assert json.loads(extra) == {"x": None, "y": None, "z": None, "s": "\ufffd", "big": None}


# -------------------------------------------------------------------- 4, 5, 6. gzip


def test_gzip_cut_off_keeps_everything_before_the_cut(tmp_path: Path) -> None:
    recs = records(RECOMPILES)
    gz = gzip.compress(b"".join(recs))
    d = trace_dir(tmp_path, gz[: 64 * 1024 + 100], "dedicated_log_torch_trace_x.log.gz")
    text = zlib.decompressobj(31).decompress(gz[: 64 * 1024 + 100])
    whole = sum(1 for r in recs if text.startswith(b"".join(recs[: recs.index(r) + 1])))
    t = traceview.load(d, jobs=1)
    assert t.events.height in (whole, whole + 1)  # (+1: the cut record's header is whole)
    assert t.events.height >= 100
    damaged = t.problems.filter(pl.col("problem") == "gzip_damaged")
    assert damaged.height == 1 and "cut off" in damaged["detail"][0]
    assert t.events.filter(pl.col("payload").is_not_null()).height > 50  # payloads read back


def test_gzip_with_damaged_body_keeps_what_precedes_the_damage(tmp_path: Path) -> None:
    data = b"".join(records(RECOMPILES))
    gz = bytearray(gzip.compress(data))
    gz[len(gz) // 2] ^= 0xFF
    d = trace_dir(tmp_path, bytes(gz), "dedicated_log_torch_trace_x.log.gz")
    t = traceview.load(d, jobs=1)
    assert t.events.height > 100
    assert "gzip_damaged" in t.problems["problem"].to_list()


def test_gzip_is_parsed_in_bounded_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A .gz never holds more than a piece of text (plus one record) at a time: what the
    same file uncompressed costs, so a gzip bomb cannot take more (issue: 2 MB -> 2 GiB took
    12.6 GB). Payloads read back from the .gz match their md5."""
    recs = records(RECOMPILES)
    text = b"".join(recs) * 8
    f = tmp_path / "dedicated_log_torch_trace_x.log.gz"
    f.write_bytes(gzip.compress(text, compresslevel=1))
    monkeypatch.setattr(scanning, "GZIP_PIECE", 256 * 1024)
    sizes: list[int] = []
    scan = scanning.scan_bytes

    def spy(data: bytes, *a: object, **k: object) -> object:
        sizes.append(len(data))
        return scan(data, *a, **k)

    monkeypatch.setattr(scanning, "scan_bytes", spy)
    parsed = read_trace_files([str(f)], lazy=True)
    assert len(sizes) > 10 and max(sizes) <= 256 * 1024 + max(map(len, recs))
    assert sum(sizes) == len(text)
    assert parsed.events.height == 8 * len(recs)
    assert parsed.stats.height == 1 and parsed.stats["lines"][0] == text.count(b"\n")
    events, problems = hydrate(parsed.events, verify=True)
    assert events["payload_ok"].drop_nulls().all() and problems.height == 0


def test_one_bad_gz_does_not_fail_the_directory(tmp_path: Path) -> None:
    d = trace_dir(tmp_path, SIMPLE.read_bytes())
    (d / "dedicated_log_torch_trace_bad.log.gz").write_bytes(b"\x1f\x8bnot gzip at all")
    inputs = discover(d)
    assert [Path(p).name for p in inputs.trace_paths] == ["dedicated_log_torch_trace_x.log"]
    (why,) = [w for p, w in inputs.stray if p.endswith("bad.log.gz")]
    assert "not a readable gzip file" in why
    with pytest.raises(InputError, match=re.escape("bad.log.gz: not a readable gzip file")):
        discover(d / "dedicated_log_torch_trace_bad.log.gz")


# ---------------------------------------------------------------------- 5, 7. discovery


def test_an_early_nul_byte_does_not_make_a_trace_binary(tmp_path: Path) -> None:
    data = SIMPLE.read_bytes()
    d = trace_dir(tmp_path, data[:100] + b"\x00" + data[100:])  # in the first header
    t = traceview.load(d, jobs=1)
    assert t.events.height == len(records(SIMPLE)) - 1  # only the damaged record is lost
    assert t.problems["lineno"].to_list() == [1]


def test_special_files_named_like_traces_are_listed_as_skipped(tmp_path: Path) -> None:
    d = trace_dir(tmp_path, SIMPLE.read_bytes())
    os.mkfifo(d / "dedicated_log_torch_trace_fifo.log")
    os.symlink(d / "nowhere", d / "dedicated_log_torch_trace_dangling.log")
    os.symlink(d / "dedicated_log_torch_trace_loop.log", d / "dedicated_log_torch_trace_loop.log")
    inputs = discover(d)
    why = {Path(p).name: w for p, w in inputs.stray}
    assert why["dedicated_log_torch_trace_fifo.log"].startswith("a FIFO")
    assert why["dedicated_log_torch_trace_dangling.log"].startswith("broken symbolic link")
    assert why["dedicated_log_torch_trace_loop.log"] == "symbolic link loop"
    with pytest.raises(InputError, match=re.escape("loop.log: symbolic link loop")):
        discover(d / "dedicated_log_torch_trace_loop.log")
    with pytest.raises(InputError, match=re.escape("fifo.log: a FIFO")):
        discover(d / "dedicated_log_torch_trace_fifo.log")


def test_an_empty_trace_by_name_is_explained(tmp_path: Path) -> None:
    d = trace_dir(tmp_path, b"")
    with pytest.raises(InputError, match=re.escape("x.log: empty trace log")):
        discover(d / "dedicated_log_torch_trace_x.log")


def test_a_payload_that_holds_crlf_keeps_it(tmp_path: Path) -> None:
    """Only a file whose every line ends in CRLF is taken for an editor's conversion."""
    payload = b"line one\r\nline two"
    rec = (
        PREFIX + b'{"artifact": {"name": "crlf_payload", "encoding": "string"}, "has_payload": "'
        + hashlib.md5(payload).hexdigest().encode() + b'"}\n\tline one\r\n\tline two\n'
    )
    d = trace_dir(tmp_path, rec + SIMPLE.read_bytes())
    t = traceview.load(d, jobs=1)
    t.ensure_graph_tables()  # checks every md5
    row = t.events.filter(pl.col("name") == "crlf_payload")
    assert row["payload"].to_list() == ["line one\r\nline two"] and row["payload_ok"].to_list() == [True]
    assert "md5_mismatch" not in t.problems["problem"].to_list()


def test_a_crlf_converted_file_is_read_as_lf(tmp_path: Path) -> None:
    d = trace_dir(tmp_path, SIMPLE.read_bytes().replace(b"\n", b"\r\n"))
    t = traceview.load(d, jobs=1)
    t.ensure_graph_tables()
    assert t.events.height == len(records(SIMPLE))
    assert t.events["payload_ok"].drop_nulls().all()


def test_a_damaged_first_header_does_not_make_a_trace_a_text_log(tmp_path: Path) -> None:
    """A flipped `{` made the first header read as a text-log line, and the whole trace was
    parsed as a text log (0 envelopes): a file is what most of its torch lines are."""
    data = SIMPLE.read_bytes()
    i = data.index(b"{")
    d = trace_dir(tmp_path, data[:i] + b"[" + data[i + 1 :])
    t = traceview.load(d, jobs=1)
    assert t.events.height == len(records(SIMPLE)) - 1
    assert t.problems["problem"].to_list() == ["bad_json"]


def test_a_damaged_gz_text_log_is_a_problem_too(tmp_path: Path) -> None:
    text = (FIXTURES / "recompiles" / "torch_logs.txt").read_bytes()
    gz = gzip.compress(text)
    f = tmp_path / "torch_logs.txt.gz"
    f.write_bytes(gz[: len(gz) // 2])
    t = traceview.load(f, jobs=1)
    assert t.log_records.height > 0
    (row,) = t.problems.filter(pl.col("problem") == "gzip_damaged").to_dicts()
    assert row["file"] == str(f) and "cut off" in row["detail"]


def test_an_export_of_an_older_traceview_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "d"
    t = traceview.load(FIXTURES / "simple" / "trace", jobs=1)
    write_export(t, out)
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["written_by"]  # as traceview wrote it before the mark
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(traceview.errors.ExportError, match="written by an older traceview"):
        write_export(t, out)
