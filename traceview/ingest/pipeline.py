"""Parse inputs into a directory of parts and open it: plans the parse and opens the result.

Small trace logs are parsed in batches (one part per batch), a big one in pieces (one part
per piece plus one for the whole file; `split_points` cuts it at record starts), a text log
on its own; above PARALLEL_MIN_BYTES the jobs run in worker processes and in this one
(traceview.ingest.scheduler). What a job does: traceview.ingest.parse_jobs (a worker also derives the
tables the summary needs: `compiles`, `spans`, `recompiles`, `graph_break_records`, `limit_hits`,
`annotations`); what it writes: traceview.ingest.parts (uncompressed Arrow IPC per part and table;
nothing large travels between processes). Guards, graphs, kernels and seq_nr links
(GRAPH_TABLES) are built per part later, on demand (UI, export: traceview.ingest.graph_tables).
Trace logs are parsed lazily (parsers.torch_trace.parse_trace_bytes): the parts hold no
payload text, which `events` reads from the input files when it is opened. Opening
memory-maps the parts (`open_dir`, `Parts`). The workdir is the parse cache entry (see
`traceview.ingest.cache`) or a temporary dir; traceview.ingest.loading is the way in.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path

import polars as pl

from parsers.discover import Inputs
from parsers.glog import HEAD, as_bytes, plain
from parsers.gzipped import is_gzip
from traceview import timing
from traceview.ingest.graph_tables import ensure_graph_tables
from traceview.ingest.parse_jobs import (
    finish_trace_file,
    process_debug_run,
    process_text_log,
    process_trace_chunk,
    process_trace_files,
)
from traceview.ingest.parts import (
    PART_TABLES,
    index_events,
    lazy_concat,
    merge_small_tables,
    part_dirs,
    write_part_list,
)
from traceview.ingest.scheduler import Job, run_jobs
from traceview.ingest.worker_pool import HEAVY_PARALLEL_MIN_BYTES, PARALLEL_MIN_BYTES
from traceview.trace import GRAPH_TABLES, Trace

CHUNK_BYTES = 32 * 1024 * 1024  # a trace log this big is parsed in pieces, in parallel
BATCH_MIN_BYTES = 4 * 1024 * 1024  # smaller trace logs are parsed together, up to BATCH_MAX_BYTES
# a batch pays a fixed ~20 ms for its table operations; a lazy parse holds no payloads, so
# big batches cost little memory
BATCH_MAX_BYTES = 96 * 1024 * 1024


_RECORD_START = re.compile(as_bytes(plain(HEAD)))


def split_points(path: str, pieces: int, size: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of `pieces` byte ranges of a trace log (of its first `size` bytes), each
    starting at a record header; the boundaries are found by reading a little around each cut."""
    size = os.path.getsize(path) if size is None else size
    bounds = [0]
    with open(path, "rb") as fh:
        for i in range(1, pieces):
            pos = max(i * size // pieces, bounds[-1])
            fh.seek(pos)
            window = fh.read(1 << 20)
            p = window.find(b"\n")
            while p != -1 and not _RECORD_START.match(window[p + 1 : p + 64]):
                p = window.find(b"\n", p + 1)
            if p == -1 or pos + p + 1 >= size:
                continue  # no record start within 1 MiB of the cut: the piece grows
            bounds.append(pos + p + 1)
    bounds.append(size)
    return list(itertools.pairwise(bounds))


def parse_to_dir(
    inputs: Inputs, workdir: Path, *, jobs: int | None = None, heavy: bool = False
) -> None:
    """Parse every input of `inputs` into `workdir` (parts already there are kept; a file
    named in `inputs.limits`, only its first bytes); `heavy`: more work follows (export), so
    worker processes are worth starting for less input."""
    workdir.mkdir(parents=True, exist_ok=True)
    workers = jobs or os.cpu_count() or 1
    parts: list[str] = []
    todo: list[Job] = []
    finish: list[Job] = []
    limits = inputs.limits
    sizes = {p: limits[p] if p in limits else os.path.getsize(p) for p in [*inputs.trace_paths, *inputs.text_logs]}
    small = [p for p in inputs.trace_paths if not (workers > 1 and sizes[p] >= CHUNK_BYTES and not is_gzip(p))]
    parallel = workers > 1 and sum(sizes.values()) >= (HEAVY_PARALLEL_MIN_BYTES if heavy else PARALLEL_MIN_BYTES)
    batches = _batches(small, sizes, workers if parallel else 1, even=heavy)
    for i, b in enumerate(batches):
        out = workdir / f"t{i:05d}"
        parts.append(out.name)
        if not out.exists():
            args = (b, str(out), [limits.get(p) for p in b]) if limits else (b, str(out))
            todo.append((process_trace_files, args, sum(sizes[p] for p in b)))
    for i, path in enumerate(p for p in inputs.trace_paths if p not in small):
        # a big file is parsed in pieces on all cores, then finished as a whole
        out = workdir / f"b{i:05d}"
        pieces = split_points(path, max(workers, -(-sizes[path] // CHUNK_BYTES)), sizes[path])
        names = [f"{out.name}p{k:04d}" for k in range(len(pieces))]
        parts += [*names, out.name]
        for name, (a, b) in zip(names, pieces):
            if not (workdir / name).exists():
                todo.append((process_trace_chunk, (path, a, b, str(workdir / name)), b - a))
        if not out.exists():
            finish.append((finish_trace_file, ([str(workdir / n) for n in names], str(out)), sizes[path]))
    for i, path in enumerate(inputs.text_logs):
        out = workdir / f"x{i:05d}"
        parts.append(out.name)
        if not out.exists():
            args = (path, str(out), limits[path]) if path in limits else (path, str(out))
            todo.append((process_text_log, args, sizes[path]))
    for i, run in enumerate(inputs.debug_runs):
        # a TORCH_COMPILE_DEBUG run folder, one part (its files are small)
        out = workdir / f"d{i:05d}"
        parts.append(out.name)
        if not out.exists():
            todo.append((process_debug_run, (run.path, str(out), run.covered_by, inputs.text_logs), 0))
    run_jobs(todo, jobs, min_bytes=HEAVY_PARALLEL_MIN_BYTES if heavy else PARALLEL_MIN_BYTES)
    run_jobs(finish, jobs, min_bytes=0, isolate=True)
    write_part_list(workdir, parts)
    t = timing.now()
    merge_small_tables(workdir)
    timing.mark("merge", t)


def _batches(paths: list[str], sizes: dict[str, int], workers: int, *, even: bool = False) -> list[list[str]]:
    """Small trace logs in batches, in order. A batch pays a fixed cost (its table
    operations), so batches are big, but shrink as the input runs out (guided
    self-scheduling): the last ones are small, so that the processes finish together even
    though they start at different times. Sizes: a quarter of what is left per process,
    between a twelfth of the total per process (or BATCH_MIN_BYTES) and BATCH_MAX_BYTES;
    for one process, BATCH_MAX_BYTES. `even`: all about a quarter of the total per process
    (an export's batches are also its export jobs: a job holds its batch's graph tables, so
    smaller ones keep a worker's peak memory down, ~400 MB on the 48-rank benchmark)."""
    left = sum(sizes[p] for p in paths)
    floor = max(left // (workers * 6), BATCH_MIN_BYTES)
    quarter = min(max(left // (workers * 4), BATCH_MIN_BYTES), BATCH_MAX_BYTES)

    def target() -> int:
        if workers == 1:
            return BATCH_MAX_BYTES
        return quarter if even else min(max(left // (workers * 2), floor), BATCH_MAX_BYTES)

    batches: list[list[str]] = []
    batch: list[str] = []
    size = 0
    limit = target()
    for p in paths:
        if batch and size + sizes[p] > limit:
            batches.append(batch)
            batch, size = [], 0
            limit = target()
        batch.append(p)
        size += sizes[p]
        left -= sizes[p]
    if batch:
        batches.append(batch)
    return batches


class Parts:
    """The parsed parts in one directory, as a Trace's part store (traceview.trace.PartStore)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def build_graph_tables(self, *, jobs: int | None = None) -> None:
        ensure_graph_tables(self.workdir, jobs=jobs)

    def table(self, name: str) -> Callable[[], pl.DataFrame]:
        return lazy_concat(self.workdir, name)

    def index_events(self) -> pl.DataFrame:
        return index_events(self.workdir)


def open_dir(workdir: Path, inputs: Inputs | None = None) -> Trace:
    """A Trace over the parts in `workdir`; each table is opened (memory-mapped) on first use."""
    names = PART_TABLES + tuple(n for n in GRAPH_TABLES if all((p / "graphs.arrow").exists() for p in part_dirs(workdir)))
    return Trace({n: lazy_concat(workdir, n) for n in names}, inputs=inputs, parts=Parts(workdir))


def load_parsed(
    inputs: Inputs, workdir: Path | None = None, *, jobs: int | None = None, heavy: bool = False
) -> Trace:
    """Parse `inputs` (into `workdir`, or a temporary directory removed with the Trace)."""
    tmp = None
    if workdir is None:
        tmp = Path(tempfile.mkdtemp(prefix="traceview-"))
        workdir = tmp
    try:
        parse_to_dir(inputs, workdir, jobs=jobs, heavy=heavy)
        trace = open_dir(workdir, inputs)
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    if tmp is not None:
        # the files are memory-mapped: on Linux they stay readable after removal
        weakref.finalize(trace, shutil.rmtree, tmp, True)
    return trace
