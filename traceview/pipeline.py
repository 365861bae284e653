"""Parse inputs into a directory of Arrow IPC "parts" and open it, memory-mapped.

Small trace logs are parsed in batches (one part per batch), a big one in pieces (one part
per piece plus one for the whole file), a text log on its own; above PARALLEL_MIN_BYTES the
jobs run in worker processes (`python -m traceview.worker_process`, plain subprocesses) and in this one.
A worker also derives the tables the summary needs (`compiles`, `spans`, `recompiles`,
`graph_breaks`, `limit_hits`, `annotations`) and writes everything as uncompressed Arrow IPC
into `<workdir>/<part>/<table>.arrow` (the part format: traceview.parts); nothing large travels between processes. Guards,
graphs, kernels and seq_nr links (GRAPH_TABLES) are built per part later, on demand (UI,
export). Trace logs are parsed lazily (parsers.tracelog.parse_trace_bytes): the parts hold
no payload text, which `events` reads from the input files when it is opened. Opening
memory-maps the parts. The workdir is the parse cache entry (see `traceview.cache`) or a
temporary dir.
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
from typing import TYPE_CHECKING

import orjson
import polars as pl

from parsers.discover import Inputs
from parsers.glog import HEAD, as_bytes, plain
from parsers.gzipped import is_gzip
from parsers.schemas import empty_table
from traceview import timing
from traceview.parts import (
    PART_TABLES,
    concat_table,
    event_chunks,
    event_parts,
    file_groups,
    index_events,
    input_bytes,
    lazy_concat,
    merge_small_tables,
    part_dirs,
    part_events,
    read_ipc,
    read_or_empty,
    read_part_table,
    replace_table,
    shift_lines,
    write_part,
    write_part_list,
)
from traceview.trace import GRAPH_TABLES, Trace
from traceview.worker_pool import HEAVY_PARALLEL_MIN_BYTES, PARALLEL_MIN_BYTES

if TYPE_CHECKING:
    from parsers.tracelog import ParsedFile

# What `python -m traceview.worker_process` may run.
WORKER_FUNCTIONS = frozenset(
    {
        "process_trace_files",
        "process_trace_chunk",
        "finish_trace_file",
        "process_text_log",
        "process_graph_tables",
        "export_part",
    }
)
# Tables written part by part by `export_part` (stats is written whole: its columns differ
# between trace and text parts).
EXPORT_PART_TABLES = tuple(n for n in PART_TABLES if n != "stats") + GRAPH_TABLES
CHUNK_BYTES = 32 * 1024 * 1024  # a trace log this big is parsed in pieces, in parallel
BATCH_MIN_BYTES = 4 * 1024 * 1024  # smaller trace logs are parsed together, up to BATCH_MAX_BYTES
# a batch pays a fixed ~20 ms for its table operations; a lazy parse holds no payloads, so
# big batches cost little memory
BATCH_MAX_BYTES = 96 * 1024 * 1024


def process_trace_files(paths: list[str], outdir: str) -> None:
    """Worker: parse a batch of TORCH_TRACE logs and write them as one part. Every table is
    keyed by file, so the derived tables are built once over the batch (small files cost
    a fixed overhead per table operation that a batch pays once)."""
    from parsers.tracelog import read_trace_files

    parsed = read_trace_files(paths, lazy=True)
    tables = {
        "events": parsed.events,
        "strings": parsed.strings,
        "stats": parsed.stats.with_columns(pl.lit("trace").alias("format")),
        "problems": parsed.problems,
        **_derive_trace_tables(parsed.events, parsed.strings, _chromium(parsed)),
    }
    write_part(Path(outdir), tables)


def _chromium(parsed: ParsedFile) -> pl.DataFrame:
    """The chromium events a lazy parse decoded (for every file of it, also one it had to
    read in full: gzip, CRLF)."""
    assert parsed.chromium is not None, "a lazy parse decodes the chromium events"
    return parsed.chromium


def _derive_trace_tables(ev: pl.DataFrame, strings: pl.DataFrame, chromium: pl.DataFrame) -> dict[str, pl.DataFrame]:
    from parsers import facts
    from parsers.compiles import build_compiles, build_spans

    compiles = build_compiles(ev, strings)
    return {
        "compiles": compiles,
        "spans": build_spans(ev, chromium),
        "recompiles": facts.recompiles_from_trace(ev, compiles),
        "graph_breaks": facts.graph_breaks_from_trace(ev),
        "limit_hits": facts.limit_hits_from_trace(ev, compiles),
        "annotations": empty_table("annotations"),
    }


def process_trace_chunk(path: str, start: int, end: int, outdir: str) -> None:
    """Worker: parse bytes [start, end) of a big trace log (a piece that starts at a record).
    Line numbers count from the piece's first line until `finish_trace_file` shifts them."""
    from parsers.tracelog import file_changed, parse_trace_bytes

    # read, not memory-mapped: the file may shrink meanwhile (a mapping read past its new
    # end kills the process with SIGBUS)
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        data = os.pread(fh.fileno(), end - start, start)
    parsed = parse_trace_bytes(
        data, path, mtime=st.st_mtime, size=end - start, lazy=True, byte_offset=start
    )
    if len(data) < end - start:
        parsed.problems = file_changed(parsed.problems, path, int(parsed.stats["lines"][0]), end - start, len(data))
    write_part(
        Path(outdir),
        {
            "events": parsed.events,
            "strings": parsed.strings,
            "stats_piece": parsed.stats,
            "problems": parsed.problems,
            "chromium": _chromium(parsed),
        },
    )


def finish_trace_file(pieces: list[str], outdir: str) -> None:
    """Worker: the per-file tables of a log parsed in pieces (compiles and spans need the
    whole file: a compile's records and a B/E pair can straddle two pieces). A piece numbers
    its lines from its own start: the lines before it are known only now that all pieces are
    parsed (which spares a counting pass over the file before the parse). Its problems are
    rewritten with the file's line numbers; its events keep theirs, and `pieces.json` holds
    each piece's offset for `part_events` to add when reading them."""
    st = pl.concat([read_ipc(Path(p) / "stats_piece.arrow") for p in pieces])
    offsets = [0, *itertools.accumulate(st["lines"].to_list()[:-1])]
    events, chromium = [], []
    for p, off in zip(pieces, offsets):
        events.append(shift_lines(read_ipc(Path(p) / "events.arrow"), off))
        chromium.append(shift_lines(read_ipc(Path(p) / "chromium.arrow"), off))
        if off and (Path(p) / "problems.arrow").exists():  # rare: most pieces have none
            replace_table(Path(p) / "problems.arrow", shift_lines(read_ipc(Path(p) / "problems.arrow"), off))
    ev = pl.concat(events, rechunk=False)
    strings = pl.concat([read_or_empty(Path(p), "strings") for p in pieces])
    sums = [c for c, t in st.schema.items() if t == pl.Int64 and c != "bytes"]
    stats = st.select(
        pl.col("file").first(),
        pl.col("bytes").sum(),
        # a column no piece counted (md5_mismatch of a lazy parse) stays null
        *[pl.when(pl.col(c).is_not_null().any()).then(pl.col(c).sum()).alias(c) for c in sums],
        pl.col("truncated_tail").last(),
        pl.col("invalid_utf8").any(),
        pl.col("rank").drop_nulls().first(),
        pl.col("pid").drop_nulls().first(),
        pl.col("first_ts").min(),
        pl.col("last_ts").max(),
    ).select(st.columns)
    tables = {
        "stats": stats.with_columns(pl.lit("trace").alias("format")),
        **_derive_trace_tables(ev, strings, pl.concat(chromium)),
    }
    # piece names, relative to the workdir (a cache entry is renamed into place after parsing)
    meta = {"pieces": [Path(p).name for p in pieces], "line_offsets": offsets}
    write_part(Path(outdir), tables, {"pieces.json": orjson.dumps(meta)})


_RECORD_START = re.compile(as_bytes(plain(HEAD)))


def split_points(path: str, pieces: int) -> list[tuple[int, int]]:
    """(start, end) of `pieces` byte ranges of a trace log, each starting at a record
    header; the boundaries are found by reading a little around each cut."""
    size = os.path.getsize(path)
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


def process_text_log(path: str, outdir: str) -> None:
    """Worker: parse one TORCH_LOGS capture and write its part."""
    from parsers.facts import facts_from_text
    from parsers.textlog import read_text_log

    log = read_text_log(path)
    tables = {
        "log_records": log.records,
        "other_lines": log.other_lines,
        "stats": log.stats.with_columns(pl.lit("text").alias("format")),
        **{k: v for k, v in facts_from_text(log.records).items() if k != "guards"},
    }
    if log.damage is not None:  # a damaged .gz capture: said where the problems are
        lines = int(log.stats["lines"][0])
        tables["problems"] = pl.DataFrame(
            {"file": [path], "lineno": [lines + 1], "problem": ["gzip_damaged"], "detail": [log.damage]},
            schema=empty_table("problems").schema,
        )
    write_part(Path(outdir), tables)


def process_graph_tables(partdir: str) -> None:
    """Worker: build the graph and kernel tables of one part from its events / log records."""
    _graph_tables(Path(partdir))


GroupSink = Callable[[str, pl.DataFrame, dict[str, pl.DataFrame]], None]


def _graph_tables(part: Path, on_group: GroupSink | None = None) -> dict[str, pl.DataFrame]:
    """Build (and write) the graph tables of one part, a group of files at a time (memory
    stays near GROUP_BYTES of payload); the payloads are read and their md5 checked on the
    way (`checks.arrow`, `payload_problems.arrow`). `on_group(name, events, tables)` is called
    for each group with its events (every payload) and graph tables. Returns the tables as
    written.

    They are written zstd-compressed: they repeat graph text and kernel code, and the ranks
    of one job repeat each other, so they shrink ~50x (the 48-rank benchmark's cache entry
    after an export: 525 MB -> 86 MB). They are read only for the graph views and export, where
    decompressing them costs less than writing and faulting in the uncompressed bytes."""
    from parsers.facts import guards_from_text, guards_from_trace
    from parsers.graphs import (
        build_graph_nodes,
        build_graphs,
        build_kernel_calls,
        build_kernels,
        build_provenance,
    )
    from parsers.seq_links import seq_links
    from parsers.tracelog import hydrate

    records = read_ipc(part / "log_records.arrow") if (part / "log_records.arrow").exists() else None
    # forward/backward pairs never span two files, so the links are built per group,
    # against the annotations (seq_nr) of the whole trace
    ann_file = part.parent / "merged" / "annotations.arrow"
    annotations = read_ipc(ann_file) if ann_file.exists() else concat_table(part.parent, "annotations")
    index = part_events(part)
    groups = file_groups(index)
    acc: dict[str, list[pl.DataFrame]] = {}
    for gi, files in enumerate(groups):
        sub = index if len(groups) == 1 else index.filter(pl.col("file").is_in(files))
        events, payload_problems = hydrate(sub, verify=True)
        recs = records if gi == 0 else None
        graphs = build_graphs(events, recs)
        nodes = build_graph_nodes(graphs)
        guards = [guards_from_trace(events)] + ([guards_from_text(recs)] if recs is not None else [])
        tables = {
            "seq_links": seq_links(nodes, annotations),
            "guards": pl.concat(guards, how="vertical_relaxed"),
            "graph_nodes": nodes,
            "kernels": build_kernels(events, recs),
            "kernel_calls": build_kernel_calls(events, recs),
            "provenance": build_provenance(events),
            "checks": events.filter(pl.col("payload_ok").is_not_null()).select("file", "lineno", "payload_ok"),
            "payload_problems": payload_problems,
            "graphs": graphs,  # last: its presence marks the part as done
        }
        if on_group is not None:
            on_group(part.name if len(groups) == 1 else f"{part.name}g{gi}", events, tables)
        del events
        for name, df in tables.items():
            acc.setdefault(name, []).append(df)
    out = {name: frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical_relaxed") for name, frames in acc.items()}
    for name, df in out.items():
        replace_table(part / f"{name}.arrow", df, "zstd")
    return out


NULL_RANK_DIR = "__HIVE_DEFAULT_PARTITION__"


def conform(df: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """`df` with exactly the columns of `schema`, in its order and types (missing ones null)."""
    return df.select(
        [pl.col(c).cast(t) if c in df.columns else pl.lit(None, dtype=t).alias(c) for c, t in schema.items()]
    )


def export_part(partdir: str, outdir: str) -> dict[str, int]:
    """Worker: write one part's tables as hive-partitioned parquet files (by rank) under
    `outdir`, building its graph tables first if the part has none yet (events and graph
    tables a group of files at a time). Returns row counts."""
    part = Path(partdir)
    out = Path(outdir)
    rows: dict[str, int] = {}

    def write(name: str, df: pl.DataFrame | None, file_name: str) -> None:
        if df is None or df.height == 0:
            return
        df = conform(df, empty_table(name).schema)
        rows[name] = rows.get(name, 0) + df.height
        if "rank" not in df.columns:  # e.g. strings: one file per part, no partition directory
            import pyarrow.parquet as pq

            (out / name).mkdir(parents=True, exist_ok=True)
            pq.write_table(df.to_arrow(), out / name / f"part-{file_name}.parquet", **PARQUET_OPTIONS)
        else:
            write_rank_partitions(df, out / name, file_name)

    def sink(name: str, events: pl.DataFrame, tables: dict[str, pl.DataFrame]) -> None:
        write("events", events, name)

    built: dict[str, pl.DataFrame] = {}
    if not (part / "graphs.arrow").exists():
        built = _graph_tables(part, sink)  # events a group at a time: only they hold payloads
    elif part in event_parts(part.parent):
        for i, events in enumerate(event_chunks(part)):
            write("events", events, f"{part.name}c{i}")
    # the graph tables once for the whole part (a parquet write has a fixed cost)
    for t in GRAPH_TABLES:
        write(t, built[t] if t in built else read_part_table(part, t), part.name)
    for name in EXPORT_PART_TABLES:
        if name != "events" and name not in GRAPH_TABLES:
            write(name, read_part_table(part, name), part.name)
    return rows


# zstd; no dictionary encoding (most string columns are near-unique: trying costs ~40% of
# the write time and the files come out bigger); min/max statistics kept for readers' filters
PARQUET_OPTIONS = {"compression": "zstd", "use_dictionary": False}


def write_rank_partitions(df: pl.DataFrame, table_dir: Path, part_name: str) -> None:
    """Write `df` as `table_dir/rank=R/part-<part_name>.parquet`, one file per rank (hive
    style: the rank lives in the directory name, a null rank in NULL_RANK_DIR). (pyarrow's
    dataset writer does this in one call, but its first call in a process costs ~0.3 s.)"""
    import pyarrow.parquet as pq

    for (rank,), sub in df.group_by("rank", maintain_order=True):
        d = table_dir / f"rank={NULL_RANK_DIR if rank is None else rank}"
        d.mkdir(parents=True, exist_ok=True)
        pq.write_table(sub.drop("rank").to_arrow(), d / f"part-{part_name}.parquet", **PARQUET_OPTIONS)


def export_parts(workdir: Path, outdir: Path, *, jobs: int | None = None) -> dict[str, int]:
    """Write every part's tables under `outdir` in parallel; total rows per table."""
    todo = []
    for part in part_dirs(workdir):
        todo.append((export_part, (str(part), str(outdir)), input_bytes(part)))
    total: dict[str, int] = {}
    # not in this process: the payloads of a part would stay in its memory (peak RSS)
    for rows in _run(todo, jobs, min_bytes=HEAVY_PARALLEL_MIN_BYTES, here=False):
        for k, v in (rows or {}).items():
            total[k] = total.get(k, 0) + v
    return total


def _graph_jobs(workdir: Path) -> list[Job]:
    todo = []
    for part in part_dirs(workdir):
        if not (part / "graphs.arrow").exists():
            todo.append((process_graph_tables, (str(part),), input_bytes(part)))
    return todo


def ensure_graph_tables(workdir: Path, *, jobs: int | None = None) -> None:
    """Build the graph tables of every part that lacks them (in parallel)."""
    _run(_graph_jobs(workdir), jobs, min_bytes=HEAVY_PARALLEL_MIN_BYTES, here=False)


def graph_tables_in_workers(workdir: Path, *, jobs: int | None = None) -> bool:
    """Whether `ensure_graph_tables` has work to do and will do it in worker processes
    (this process is then free meanwhile)."""
    return _in_parallel(_graph_jobs(workdir), jobs, HEAVY_PARALLEL_MIN_BYTES)


Job = tuple  # (function, args, size in bytes)


def timed_call(fn: Callable, args: tuple | list) -> object:
    """`fn(*args)`, recorded as a step named after `fn` (see traceview.timing)."""
    t = timing.now()
    result = fn(*args)
    timing.mark(fn.__name__, t)
    return result


def _in_parallel(todo: list[Job], jobs: int | None, min_bytes: int) -> bool:
    """Whether `_run` spreads `todo` over processes: more than one job and core, and at least
    `min_bytes` of work in all."""
    return min(jobs or os.cpu_count() or 1, len(todo)) > 1 and sum(j[2] for j in todo) >= min_bytes


class WorkerError(Exception):
    """A worker failed on a job."""


def _run(
    todo: list[Job], jobs: int | None, *, isolate: bool = False, min_bytes: int | None = None, here: bool = True
) -> list:
    """Run jobs in parallel when there is enough to do, biggest first: in worker processes and,
    when `here`, in this one too; else here, one after another (`isolate`: in worker
    processes all the same). Returns the jobs' results in the order of `todo`."""
    if not todo:
        return []
    if not isolate and not _in_parallel(todo, jobs, PARALLEL_MIN_BYTES if min_bytes is None else min_bytes):
        return [timed_call(fn, args) for fn, args, _ in todo]
    workers = min(jobs or os.cpu_count() or 1, len(todo))
    import queue
    import threading

    from traceview import worker_pool as pool
    from traceview.errors import first_line

    q: queue.Queue[tuple[int, Job]] = queue.Queue()
    for i in sorted(range(len(todo)), key=lambda i: -todo[i][2]):
        q.put((i, todo[i]))
    results: list = [None] * len(todo)
    errors: list[str] = []

    def drive_here() -> None:
        while not errors:
            try:
                i, (fn, args, _) = q.get_nowait()
            except queue.Empty:
                break
            try:
                results[i] = timed_call(fn, args)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {first_line(exc)} (in {fn.__name__} of {args[0]})")

    def drive() -> None:
        proc = pool.take()
        assert proc.stdin is not None and proc.stdout is not None
        healthy = True
        try:
            while not errors:
                try:
                    i, (fn, args, _) = q.get_nowait()
                except queue.Empty:
                    break
                proc.stdin.write(orjson.dumps({"fn": fn.__name__, "args": list(args)}) + b"\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    healthy = False
                    errors.append(f"worker exited with {proc.wait()} on {fn.__name__}{tuple(args)[:1]}")
                    break
                answer = orjson.loads(line)
                if "error" in answer:
                    errors.append(f"{answer['error']} (in {fn.__name__} of {args[0]})")
                results[i] = answer.get("value")
        except BaseException:
            healthy = False
            raise
        finally:
            if healthy:
                pool.give_back(proc)  # kept for the next jobs of this process (export: parse, then write)
            else:
                proc.stdin.close()
                proc.wait()

    here = here and not isolate
    threads = [threading.Thread(target=drive, daemon=True) for _ in range(workers - here)]
    if here:
        threads.append(threading.Thread(target=drive_here, daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        if errors[0].startswith("InputChanged: "):
            from parsers.tracelog import InputChanged

            raise InputChanged(errors[0].removeprefix("InputChanged: "))
        raise WorkerError(errors[0])
    return results


def parse_to_dir(
    inputs: Inputs, workdir: Path, *, jobs: int | None = None, heavy: bool = False
) -> None:
    """Parse every input of `inputs` into `workdir` (parts already there are kept); `heavy`:
    more work follows (export), so worker processes are worth starting for less input."""
    workdir.mkdir(parents=True, exist_ok=True)
    workers = jobs or os.cpu_count() or 1
    parts: list[str] = []
    todo: list[Job] = []
    finish: list[Job] = []
    sizes = {p: os.path.getsize(p) for p in [*inputs.trace_paths, *inputs.text_logs]}
    small = [p for p in inputs.trace_paths if not (workers > 1 and sizes[p] >= CHUNK_BYTES and not is_gzip(p))]
    parallel = workers > 1 and sum(sizes.values()) >= (HEAVY_PARALLEL_MIN_BYTES if heavy else PARALLEL_MIN_BYTES)
    batches = _batches(small, sizes, workers if parallel else 1, even=heavy)
    for i, b in enumerate(batches):
        out = workdir / f"t{i:05d}"
        parts.append(out.name)
        if not out.exists():
            todo.append((process_trace_files, (b, str(out)), sum(sizes[p] for p in b)))
    for i, path in enumerate(p for p in inputs.trace_paths if p not in small):
        # a big file is parsed in pieces on all cores, then finished as a whole
        out = workdir / f"b{i:05d}"
        pieces = split_points(path, max(workers, -(-sizes[path] // CHUNK_BYTES)))
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
            todo.append((process_text_log, (path, str(out)), sizes[path]))
    _run(todo, jobs, min_bytes=HEAVY_PARALLEL_MIN_BYTES if heavy else None)
    _run(finish, jobs, isolate=True)
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
