"""The command line: summary, export round trip, and bad input as one line and a non-zero exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import traceview
from tests.conftest import FIXTURES, PEER, needs_shared
from tests.helpers_graphs import raw_envelopes
from traceview.cli import main
from traceview.output.export import read_export, write_export


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "traceview", *args], capture_output=True, text=True, env=e, timeout=300
    )


def test_summary_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(FIXTURES / "multirank" / "trace"), "--json", "--no-cache"]) == 0
    rep = json.loads(capsys.readouterr().out)
    for key in (
        "schema_version",
        "ranks",
        "compiles",
        "recompiles",
        "graph_breaks",
        "failures",
        "compile_time",
        "cache",
        "rank_divergence",
    ):
        assert key in rep
    assert rep["ranks"] == [0, 1]
    # compiles: distinct (file, frame id, compile number) among the envelopes, read from the
    # raw files by the tests' own reader, not by the code that built the report
    ids = {
        (f.name, e["env"]["frame_id"], e["env"].get("frame_compile_id"))
        for f in (FIXTURES / "multirank" / "trace").glob("*.log")
        for e in raw_envelopes(f)
        if e["env"].get("frame_id") is not None
    }
    assert rep["compiles"] == len(ids)
    assert sum(r["compiles"] for r in rep["per_rank"]) == len(ids)
    assert {r["rank"]: r["compiles"] for r in rep["per_rank"]} == {
        rank: sum(1 for f, *_ in ids if f"rank_{rank}_" in f) for rank in (0, 1)
    }


def test_summary_text_fits_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(FIXTURES / "recompiles"), "--width", "80", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "RECOMPILES" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_export_round_trip(tmp_path: Path) -> None:
    t = traceview.load(FIXTURES / "training" / "trace")
    write_export(t, tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["traceview_schema_version"] == traceview.SCHEMA_VERSION
    back = read_export(tmp_path / "out")
    for name in ("events", "stats", "problems", "strings", "compiles", "spans"):
        assert back.table(name).equals(t.table(name)), name
    # graph and kernel text keep their exact bytes
    assert back.events["payload"].to_list() == t.events["payload"].to_list()
    for name, col in (("graphs", "text"), ("kernels", "code")):
        assert t.table(name).height > 0, name
        assert back.table(name)[col].to_list() == t.table(name)[col].to_list(), name
    # a kernel's code is the exact slice of the output-code payload it came from
    code = t.kernels.filter(t.kernels["kind"] == "cpp")["code"][0]
    assert code in t.events.filter(t.events["kind"] == "inductor_output_code")["payload"][0]


def test_export_partitioned_by_rank_round_trip(tmp_path: Path) -> None:
    t = traceview.load(FIXTURES / "multirank" / "trace")
    write_export(t, tmp_path / "out")
    assert (tmp_path / "out" / "events" / "rank=0").is_dir()
    assert (tmp_path / "out" / "events" / "rank=1").is_dir()
    back = read_export(tmp_path / "out")
    assert back.events.equals(t.events)
    lazy = pl.scan_parquet(tmp_path / "out" / "events", hive_partitioning=True)
    assert lazy.filter(pl.col("rank") == 1).select(pl.len()).collect().item() == t.events.filter(
        pl.col("rank") == 1
    ).height


def test_export_replaces_an_earlier_export(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["export", str(FIXTURES / "simple" / "trace"), "-o", str(out), "--no-cache"]) == 0
    first = (out / "manifest.json").read_text()
    assert main(["export", str(FIXTURES / "training" / "trace"), "-o", str(out), "--no-cache"]) == 0
    assert (out / "manifest.json").read_text() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary left behind


def _interrupt_the_nth_table_write(monkeypatch: pytest.MonkeyPatch, n: int) -> list[str]:
    """Make the `n`th parquet table written raise KeyboardInterrupt (Ctrl-C in the middle
    of an export); returns the tables written before it."""
    import pyarrow.parquet as pq

    real = pq.write_table
    written: list[str] = []

    def write_table(table, where, *a, **kw):
        if len(written) + 1 == n:
            raise KeyboardInterrupt
        written.append(Path(where).name)
        return real(table, where, *a, **kw)

    monkeypatch.setattr(pq, "write_table", write_table)
    return written


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_an_interrupted_export_leaves_the_old_one_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    assert main(["export", str(FIXTURES / "simple" / "trace"), "-o", str(out), "--no-cache"]) == 0
    before = _tree(out)
    written = _interrupt_the_nth_table_write(monkeypatch, 4)
    assert main(["export", str(FIXTURES / "training" / "trace"), "-o", str(out), "--no-cache"]) == 130
    assert len(written) == 3  # it was interrupted mid-way, after three tables
    assert _tree(out) == before  # the earlier export, byte for byte
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary left behind


def test_an_interrupted_first_export_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    written = _interrupt_the_nth_table_write(monkeypatch, 4)
    assert main(["export", str(FIXTURES / "training" / "trace"), "-o", str(out), "--no-cache"]) == 130
    assert len(written) == 3
    assert list(tmp_path.iterdir()) == []  # neither the target nor a temporary directory


def test_export_refuses_foreign_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    assert main(["export", str(FIXTURES / "simple" / "trace"), "-o", str(out), "--no-cache"]) == 2
    assert (out / "precious.txt").read_text() == "keep me"
    assert "not a traceview export" in capsys.readouterr().err


def _assert_one_line_error(r: subprocess.CompletedProcess[str], needle: str) -> None:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("traceview: error: ")
    assert needle in lines[0]
    assert "Traceback" not in r.stderr


def test_bad_inputs(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    _assert_one_line_error(run_cli("summary", str(missing)), str(missing))
    empty = tmp_path / "empty"
    empty.mkdir()
    _assert_one_line_error(run_cli("summary", str(empty)), "empty directory")
    notraces = tmp_path / "notraces"
    notraces.mkdir()
    (notraces / "readme.txt").write_text("hello\n")
    _assert_one_line_error(run_cli("summary", str(notraces)), "no TORCH_TRACE or TORCH_LOGS logs")
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    _assert_one_line_error(run_cli("summary", str(binary)), "binary file")
    empty_file = tmp_path / "empty.log"
    empty_file.write_text("")
    _assert_one_line_error(run_cli("export", str(empty_file), "-o", str(tmp_path / "o")), "empty file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file(tmp_path: Path) -> None:
    f = tmp_path / "dedicated_log_torch_trace_x.log"
    f.write_text("x")
    f.chmod(0)
    _assert_one_line_error(run_cli("summary", str(f)), str(f))


def test_unreadable_file_as_root(tmp_path: Path) -> None:
    # root reads through permissions, so an unreadable file is made with a directory in its place
    f = tmp_path / "dedicated_log_torch_trace_x.log"
    f.mkdir()
    (f / "inner").write_text("x")
    r = run_cli("summary", str(f / "inner"))
    _assert_one_line_error(r, str(f / "inner"))


@needs_shared
def test_summary_subprocess_on_multi_rank() -> None:
    r = run_cli("summary", str(PEER / "multi_rank_runtime"))
    assert r.returncode == 0, r.stderr
    assert "2 runs" in r.stdout
    assert "ranks 5-6" in r.stdout  # ranks that differ alike are one line


def test_timing_lines_only_when_asked() -> None:
    # the console entry point leaves through os._exit: the output must still be complete
    trace = str(FIXTURES / "multirank" / "trace")
    plain = run_cli("summary", "--no-cache", trace)
    assert plain.returncode == 0 and plain.stderr == ""
    assert plain.stdout.rstrip().splitlines()[-1].strip().startswith(tuple("0123456789"))
    assert "INPUT" in plain.stdout
    timed = run_cli("summary", "--no-cache", trace, env={"TRACEVIEW_TIMING": "1"})
    assert timed.returncode == 0 and timed.stdout == plain.stdout
    steps = [line.split()[2] for line in timed.stderr.splitlines()]
    assert all(line.startswith("traceview-timing ") for line in timed.stderr.splitlines())
    assert {"start", "process_trace_files", "merge", "report", "exit"} <= set(steps)
