"""The parse pipeline: worker processes, big files in pieces, the parse cache."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import orjson
import polars as pl
import pytest

import traceview
from parsers.discover import discover
from parsers.gzipped import is_gzip
from tests.conftest import FIXTURES, GPU, needs_shared
from traceview.ingest import graph_tables, parts, pipeline, worker_pool
from traceview.ingest.cache import cache_dir, clear_cache
from traceview.ingest.loading import LoadOptions, load_trace

PIECE_TABLES = ("events", "strings", "problems", "compiles", "spans", "recompiles", "graph_breaks", "limit_hits")


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    keys = [c for c in ("file", "lineno", "compile_id", "name", "id", "kernel_id", "graph_id", "order") if c in df.columns]
    return df.sort(keys, nulls_last=True)


@needs_shared
def test_big_file_in_pieces_equals_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    f = next((GPU / "train_dynamic" / "trace").glob("*.log"))
    whole = pipeline.load_parsed(discover(f), jobs=1)
    monkeypatch.setattr(pipeline, "CHUNK_BYTES", 1_500_000)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", 1)
    pieces = pipeline.load_parsed(discover(f), jobs=2)
    assert len(parts.part_dirs(pieces.workdir)) > 4
    for name in PIECE_TABLES:
        assert _sorted(pieces.table(name)).equals(_sorted(whole.table(name))), name
    assert pieces.stats.equals(whole.stats)
    whole.ensure_graph_tables()
    pieces.ensure_graph_tables()
    for name in ("graphs", "graph_nodes", "kernels", "guards"):
        assert _sorted(pieces.table(name)).equals(_sorted(whole.table(name))), name


def test_big_gzipped_file_is_parsed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # a gzip stream cannot be entered at a byte offset: however big, it is one job, never
    # pieces, and every record of it is an event
    f = max((FIXTURES / "gpu").rglob("dedicated_log_torch_trace_*.log.gz"), key=lambda p: p.stat().st_size)
    assert is_gzip(str(f)) and is_gzip(f)
    monkeypatch.setattr(pipeline, "CHUNK_BYTES", 100_000)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", 1)
    t = pipeline.load_parsed(discover(f), jobs=2)
    assert [p.name for p in parts.part_dirs(t.workdir)] == ["t00000"]
    assert t.events.height == sum(1 for line in gzip.open(f) if not line.startswith(b"\t"))


@needs_shared
def test_big_file_in_pieces_keeps_line_numbers_of_problems(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a hand-broken copy of a real log (bad JSON in a late piece, a cut-off last record): the
    # pieces number their lines from their own start until the file is finished, after which
    # every event and problem has the line number of the whole-file parse
    src = next((GPU / "train_dynamic" / "trace").glob("*.log")).read_bytes()
    lines = src.split(b"\n")
    bad = next(i for i in range(len(lines) * 3 // 4, len(lines)) if lines[i].startswith(b"V") and b'{"' in lines[i])
    lines[bad] = lines[bad].replace(b'{"', b'{"oops', 1).replace(b'"', b"", 2)
    broken = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    broken.write_bytes(b"\n".join(lines)[:-300])
    whole = pipeline.load_parsed(discover(broken), jobs=1)
    monkeypatch.setattr(pipeline, "CHUNK_BYTES", 1_500_000)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", 1)
    pieces = pipeline.load_parsed(discover(broken), jobs=2)
    assert len(parts.part_dirs(pieces.workdir)) > 4
    assert (bad + 1, "bad_json") in whole.problems.select("lineno", "problem").rows()
    assert pieces.problems.equals(whole.problems)
    assert _sorted(pieces.events).equals(_sorted(whole.events))
    assert pieces.events["lineno"].max() == whole.events["lineno"].max() > bad


def test_parallel_workers_equal_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    d = FIXTURES / "multirank"
    here = pipeline.load_parsed(discover(d), jobs=1)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", 1)
    there = pipeline.load_parsed(discover(d), jobs=2)
    for name in ("events", "compiles", "recompiles", "graph_breaks", "log_records", "stats"):
        assert _sorted(there.table(name)).equals(_sorted(here.table(name))), name


def test_load_from_a_script_without_main_guard(tmp_path: Path) -> None:
    # worker processes must not re-import the user's script (multiprocessing's spawn would)
    script = tmp_path / "use_traceview.py"
    script.write_text(
        "import traceview, traceview.ingest.pipeline as p\n"
        "p.PARALLEL_MIN_BYTES = 1\n"
        f"t = traceview.load({str(FIXTURES / 'multirank' / 'trace')!r}, jobs=2)\n"
        "print('compiles', t.compiles.height)\n"
    )
    env = dict(os.environ)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == f"compiles {traceview.load(FIXTURES / 'multirank' / 'trace').compiles.height}"


def test_cache_reuses_and_invalidates(tmp_path: Path) -> None:
    src = next((FIXTURES / "simple" / "trace").glob("*.log"))
    f = tmp_path / src.name
    f.write_bytes(src.read_bytes())
    first = load_trace(LoadOptions.of(f))
    entry = first.workdir
    assert entry is not None and entry.parent == cache_dir()
    again = load_trace(LoadOptions.of(f))
    assert again.workdir == entry  # same inputs: the same entry, nothing parsed
    os.utime(f, (1, 1))  # touched: parsed again into a new entry
    third = load_trace(LoadOptions.of(f))
    assert third.workdir != entry
    assert third.events.drop("ts").equals(first.events.drop("ts"))  # the year comes from the mtime
    assert clear_cache() >= 1
    assert not any(cache_dir().iterdir())


def test_graph_tables_are_stored_compressed(tmp_path: Path) -> None:
    """Graph tables repeat graph text and kernel code: the cache keeps them zstd-compressed,
    and they read back unchanged."""
    trace = pipeline.load_parsed(discover(str(FIXTURES / "training" / "trace")), jobs=1)
    trace.ensure_graph_tables()
    assert trace.workdir is not None
    part = parts.part_dirs(trace.workdir)[0]
    for name in ("graphs", "graph_nodes", "kernels"):
        stored = part / f"{name}.arrow"
        df = parts.read_ipc(stored)
        assert df.height > 0
        df.write_ipc(tmp_path / "plain.arrow", compression="uncompressed")
        assert stored.stat().st_size * 2 < (tmp_path / "plain.arrow").stat().st_size, name
        assert df.equals(pl.read_ipc(tmp_path / "plain.arrow"))


@needs_shared
def test_big_file_export_overlaps_graph_tables_and_events(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a hand-broken copy of a real log: one payload byte changed late in the file, so its
    # md5 no longer matches. A big single file's export writes its events (checking the md5s
    # itself, a chunk at a time) while worker processes build the graph tables; the result
    # must be the export made one step after the other.
    import pyarrow.parquet as pq

    from traceview.output import export

    lines = next((GPU / "train_dynamic" / "trace").glob("*.log")).read_bytes().split(b"\n")
    bad = next(i for i in range(len(lines) * 3 // 4, len(lines)) if lines[i].startswith(b"\t") and b"a" in lines[i])
    lines[bad] = lines[bad].replace(b"a", b"b", 1)
    f = tmp_path / "dedicated_log_torch_trace_rank_0_x.log"
    f.write_bytes(b"\n".join(lines))
    one_by_one = export.read_export(export.write_export(pipeline.load_parsed(discover(f), jobs=1), tmp_path / "a"))

    monkeypatch.setattr(pipeline, "CHUNK_BYTES", 1_500_000)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(pipeline, "HEAVY_PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(graph_tables, "HEAVY_PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(parts, "GROUP_BYTES", 1_000_000)
    overlapped: list[bool] = []
    real = export.graph_tables_in_workers
    monkeypatch.setattr(export, "graph_tables_in_workers", lambda w, **kw: overlapped.append(real(w, **kw)) or overlapped[-1])
    trace = pipeline.load_parsed(discover(f), jobs=2)
    out = export.write_export(trace, tmp_path / "b")
    assert overlapped == [True]
    assert pq.ParquetFile(out / "events.parquet").num_row_groups > 3  # written a chunk at a time
    side_by_side = export.read_export(out)
    for name in ("events", "problems", "graphs", "graph_nodes", "kernels", "guards", "seq_links"):
        assert _sorted(side_by_side.table(name)).equals(_sorted(one_by_one.table(name))), name
    ev = side_by_side.events
    # the envelope whose payload holds the changed line
    owner = ev.filter(pl.col("lineno") < bad + 1, pl.col("payload").is_not_null())["lineno"].max()
    assert ev.filter(~pl.col("payload_ok"))["lineno"].to_list() == [owner]
    assert ("md5_mismatch", owner) in side_by_side.problems.select("problem", "lineno").rows()


def test_graph_and_export_jobs_are_sized_by_their_input() -> None:
    # whether they go to worker processes depends on their size: the input they cover, not
    # the part's own files (for a big trace a fraction of it: a lazy parse keeps no payloads)
    d = FIXTURES / "multirank" / "trace"
    trace = pipeline.load_parsed(discover(d), jobs=1)
    assert trace.workdir is not None
    inputs = sum(f.stat().st_size for f in d.glob("*.log"))
    jobs = graph_tables.graph_jobs(trace.workdir)
    assert jobs and sum(size for _, _, size in jobs) == inputs


def test_parse_processes_follow_the_input_size(monkeypatch: pytest.MonkeyPatch) -> None:
    # a plain parse starts one process per PARALLEL_MIN_BYTES of input (each pays a fixed
    # start-up), up to the cores; an export keeps every core; the user's -j wins
    monkeypatch.setattr(worker_pool, "cpu_count", lambda: 16)
    mb = 1024 * 1024
    assert worker_pool.PARALLEL_MIN_BYTES == 128 * mb
    assert worker_pool.parse_processes(10 * mb, None, heavy=False) == 1
    assert worker_pool.parse_processes(128 * mb, None, heavy=False) == 1
    assert worker_pool.parse_processes(129 * mb, None, heavy=False) == 2
    assert worker_pool.parse_processes(470 * mb, None, heavy=False) == 4
    assert worker_pool.parse_processes(5000 * mb, None, heavy=False) == 16
    assert worker_pool.parse_processes(470 * mb, None, heavy=True) == 16
    assert worker_pool.parse_processes(470 * mb, 3, heavy=False) == 3
    assert worker_pool.parse_processes(10 * mb, 7, heavy=True) == 7


def test_cache_entry_names_files_as_they_were_given(monkeypatch: pytest.MonkeyPatch) -> None:
    # a relative open after an absolute one of the same files must not show the absolute names
    # (the first open's cache entry): the tables name files as given
    monkeypatch.chdir(FIXTURES.parent)
    absolute = load_trace(LoadOptions.of(FIXTURES / "simple" / "trace"))
    relative = load_trace(LoadOptions.of("fixtures/simple/trace"))
    assert absolute.stats["file"].to_list()[0].startswith(str(FIXTURES))
    assert relative.stats["file"].to_list()[0].startswith("fixtures/simple/trace/")


def test_a_worker_runs_only_worker_functions() -> None:
    # the parent names the function; a name that is not a worker job (here a pipeline
    # function that is not one) is refused with an error answer, and the worker goes on
    jobs = [{"fn": "load_parsed", "args": []}, {"fn": "process_graph_tables", "args": ["/nonexistent/part"]}]
    r = subprocess.run(
        [sys.executable, "-m", "traceview.worker.process"],
        input=b"".join(orjson.dumps(j) + b"\n" for j in jobs),
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    answers = [orjson.loads(line) for line in r.stdout.splitlines()]
    assert answers[0] == {"error": "ValueError: not a worker function: load_parsed"}
    assert "error" in answers[1] and "not a worker function" not in answers[1]["error"]
