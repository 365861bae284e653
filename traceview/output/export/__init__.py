"""Write a Trace's tables as parquet (+ manifest.json), atomically, and read them back.

Single-process traces get one `<table>.parquet` per table. Multi-rank traces are written as
hive-partitioned datasets (`<table>/rank=<R>/part-*.parquet`), which polars' `scan_parquet`,
DuckDB and Spark read lazily. The output directory appears complete or not at all: everything
is written into a temporary sibling directory that is renamed into place at the end.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import shutil
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import polars as pl
import pyarrow.parquet as pq

from parsers.schemas import empty_table
from traceview.errors import ExportError
from traceview.ingest.digest import DIGEST_DIR
from traceview.ingest.exports import read_export, read_exports
from traceview.ingest.graph_tables import graph_tables_in_workers
from traceview.ingest.manifest import EXPORT_MARKER
from traceview.ingest.parts import event_chunks, part_dirs, read_part_table
from traceview.output.export.digest import write_digest
from traceview.output.export.parts import (
    EXPORT_PART_TABLES,
    PARQUET_OPTIONS,
    conform,
    export_parts,
    labelled,
    write_rank_partitions,
)
from traceview.trace import GRAPH_TABLES, TABLES, Trace, table_schema
from traceview.versions import SCHEMA_VERSION


def _dtype_str(dt: pl.DataType) -> str:
    return str(dt)


def write_export(
    trace: Trace, out_dir: str | os.PathLike[str], *, partition_by_rank: bool | None = None, jobs: int | None = None
) -> Path:
    """Write every table of `trace` to `out_dir` (replacing an earlier traceview export there);
    `jobs`: worker processes (default: every core when there is enough to do)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        why = _not_replaceable(out)
        if why:
            raise ExportError(f"{out}: directory is not empty and is not a traceview export ({why}); choose another -o")
    if trace.inputs is not None:
        for src in [trace.inputs.root, *trace.inputs.trace_paths, *trace.inputs.text_logs, *(r.path for r in trace.inputs.debug_runs)]:
            sp = Path(src).resolve()
            if out.resolve() == sp or sp in out.resolve().parents:
                raise ExportError(f"{out}: refusing to write inside the input {src}")
    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    if partition_by_rank is None:
        partition_by_rank = len(trace.ranks) > 1
    parts = _parts(trace)
    _remove_stale_temporaries(parent, out.name)
    tmp = _make_temporary(parent, out.name)
    try:
        tables_meta = {}
        done: set[str] = set()
        if parts and partition_by_rank:
            # many ranks: every part is written by a worker process, in parallel
            # the graph tables the workers build go to the export only, not also into the parse
            # (cache entry or temporary): the export holds them, and `traceview open` reads an
            # export; a second copy cost up to a fifth of each part's export (docs/performance.md)
            rows = export_parts(trace.workdir, tmp, jobs=jobs)  # type: ignore[arg-type]
            for name in EXPORT_PART_TABLES:
                schema = table_schema(name)
                meta = {"rows": rows.get(name, 0), "columns": {c: _dtype_str(t) for c, t in schema.items()}}
                if rows.get(name):
                    meta["path"] = f"{name}/"
                else:
                    pq.write_table(pl.DataFrame(schema=schema).to_arrow(), tmp / f"{name}.parquet")
                    meta["path"] = f"{name}.parquet"
                tables_meta[name] = meta
                done.add(name)
        elif parts and graph_tables_in_workers(trace.workdir, jobs=jobs):  # type: ignore[arg-type]
            # worker processes build the graph tables (checking every payload's md5) while
            # this one writes the events, checking the md5s itself: a big file's two halves
            # of the work run side by side instead of one after the other
            pool = ThreadPoolExecutor(1)
            built = pool.submit(trace.ensure_graph_tables, jobs=jobs)
            try:
                tables_meta["events"] = _write_events(parts, tmp, bool(partition_by_rank), verify=True)
                built.result()  # its exception, if it raised one
            finally:
                pool.shutdown(wait=False)  # on an error (Ctrl-C too), do not wait for it
            done.add("events")
        else:
            trace.ensure_graph_tables(jobs=jobs)
        for name in TABLES:
            if name in done:
                continue
            if parts and name == "events":
                tables_meta[name] = _write_events(parts, tmp, bool(partition_by_rank), verify=False)
                continue
            if name in GRAPH_TABLES and parts and all((p / f"{name}.arrow").exists() for p in parts):
                # streamed part by part: only one part (a batch of files) is in memory at a
                # time (the whole table is never opened: the graph tables of a big trace
                # are bigger than its events' index)
                schema = table_schema(name)
                tables_meta[name] = _write_parts(parts, name, schema, tmp, bool(partition_by_rank) and "rank" in schema)
                continue
            df = trace.table(name)
            tables_meta[name] = _write_table(df, tmp, name, bool(partition_by_rank) and "rank" in df.columns)
        manifest = {
            "written_by": EXPORT_MARKER,
            "traceview_schema_version": SCHEMA_VERSION,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "inputs": _inputs_meta(trace),
            "partitioned_by_rank": bool(partition_by_rank),
            "tables": tables_meta,
            "stats": trace.stats.with_columns(pl.col(pl.Datetime).dt.to_string()).to_dicts(),
        }
        (tmp / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        # what the summary reads, read back from the tables just written (traceview.ingest.digest)
        manifest["digest"] = write_digest(tmp, manifest)
        (tmp / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        _swap_into_place(tmp, out)
        (out / _PARTIAL).unlink()  # (kept until now: a kill before it leaves a marked temporary)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


# EXPORT_MARKER is in every manifest.json traceview writes: a directory is replaced only
# when its manifest has it and the directory holds nothing the manifest does not list.
# In a temporary export directory while it is written: the writer's pid (a directory whose
# writer is gone was left by a killed export, and is removed by the next one).
_PARTIAL = ".traceview-partial-export"


def _not_replaceable(out: Path) -> str | None:
    """Why the non-empty directory `out` is not an export this one may replace (None: it is)."""
    try:
        manifest = orjson.loads((out / "manifest.json").read_bytes())
    except FileNotFoundError:
        return "no manifest.json"
    except (OSError, orjson.JSONDecodeError):
        return "its manifest.json is not one traceview wrote"
    if not isinstance(manifest, dict) or manifest.get("written_by") != EXPORT_MARKER:
        if isinstance(manifest, dict) and "traceview_schema_version" in manifest:
            return "written by an older traceview, without the mark that makes it safe to replace: remove it first"
        return "its manifest.json is not one traceview wrote"
    tables = manifest.get("tables")
    listed = {"manifest.json", _PARTIAL, DIGEST_DIR}
    for meta in (tables.values() if isinstance(tables, dict) else []):
        if isinstance(meta, dict) and isinstance(meta.get("path"), str):
            listed.add(meta["path"].split("/")[0])
    extra = sorted(p.name for p in out.iterdir() if p.name not in listed)
    if extra:
        return f"it also holds {extra[0]}" + (f" and {len(extra) - 1} more" if len(extra) > 1 else "")
    return None


def _make_temporary(parent: Path, name: str) -> Path:
    """The hidden sibling the export is written into, marked as ours, with the permissions
    a new directory gets (mkdtemp makes it 0700)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=parent))
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o777 & ~mask)
    (tmp / _PARTIAL).write_text(str(os.getpid()))
    return tmp


def _remove_stale_temporaries(parent: Path, name: str) -> None:
    """Remove what killed exports to `name` left: temporaries that carry our mark and whose
    writer is gone."""
    for d in parent.glob(f".{name}.tmp-*"):
        try:
            pid = int((d / _PARTIAL).read_text().strip())
        except (OSError, ValueError):
            continue  # not ours, or not readable: left alone
        if not _alive(pid):
            shutil.rmtree(d, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _inputs_meta(trace: Trace) -> dict:
    inp = trace.inputs
    if inp is None:
        return {}
    return {
        "root": inp.root,
        "trace_files": [{"path": t.path, "rank": t.rank, "run": t.run, "bytes": t.size} for t in inp.traces],
        "text_logs": inp.text_logs,
        "stray_files": [{"path": p, "why": w} for p, w in inp.stray],
        "runs": inp.runs,
        "left_out_by_latest": inp.dropped_runs,
        # TORCH_COMPILE_DEBUG run folders as discovered (parsers.debugdir.DebugRun)
        "debug_runs": [dataclasses.asdict(r) for r in inp.debug_runs],
    }


def _parts(trace: Trace) -> list[Path]:
    if trace.workdir is None or not (trace.workdir / "parts.json").exists():
        return []
    return part_dirs(trace.workdir)


def _write_events(parts: list[Path], tmp: Path, partition: bool, *, verify: bool) -> dict:
    """The events, streamed: a chunk of about GROUP_BYTES of payload at a time."""
    chunks = ((f"{p.name}c{i}", df) for p in parts for i, df in enumerate(event_chunks(p, verify=verify)))
    return _write_frames(chunks, "events", empty_table("events").schema, tmp, partition)


def _write_parts(parts: list[Path], name: str, schema: pl.Schema, tmp: Path, partition: bool) -> dict:
    return _write_frames(((p.name, labelled(p, name, read_part_table(p, name))) for p in parts), name, schema, tmp, partition)


def _write_frames(
    frames: Iterable[tuple[str, pl.DataFrame | None]], name: str, schema: pl.Schema, tmp: Path, partition: bool
) -> dict:
    """Write table `name` from frames that come one at a time (only one is in memory), as
    one file or, `partition`, one file per rank and frame."""
    rows = 0
    writer: pq.ParquetWriter | None = None
    wrote_partition = False
    for frame_name, df in frames:
        if df is None or df.height == 0:
            continue
        df = conform(df, schema)
        rows += df.height
        if partition:
            write_rank_partitions(df, tmp / name, frame_name)
            wrote_partition = True
        else:
            table = df.to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(tmp / f"{name}.parquet", table.schema, **PARQUET_OPTIONS)
            writer.write_table(table)
        del df
    meta = {"rows": rows, "columns": {c: _dtype_str(t) for c, t in schema.items()}}
    if wrote_partition:
        meta["path"] = f"{name}/"
        return meta
    if writer is not None:
        writer.close()
    else:
        pq.write_table(conform(pl.DataFrame(schema=schema), schema).to_arrow(), tmp / f"{name}.parquet")
    meta["path"] = f"{name}.parquet"
    return meta


def _write_table(df: pl.DataFrame, tmp: Path, name: str, partition: bool) -> dict:
    meta = {
        "rows": df.height,
        "columns": {c: _dtype_str(t) for c, t in df.schema.items()},
    }
    if partition and df.height:  # an empty table is one file that still carries its schema
        write_rank_partitions(df, tmp / name, "all")
        meta["path"] = f"{name}/"
    else:
        pq.write_table(df.to_arrow(), tmp / f"{name}.parquet", **PARQUET_OPTIONS)
        meta["path"] = f"{name}.parquet"
    return meta


def _swap_into_place(tmp: Path, out: Path) -> None:
    if not out.exists():
        os.rename(tmp, out)
        return
    trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.resolve().parent))
    os.rename(out, trash / "old")
    try:
        os.rename(tmp, out)
    except OSError:
        os.rename(trash / "old", out)
        raise
    shutil.rmtree(trash, ignore_errors=True)


__all__ = ["read_export", "read_exports", "write_export"]
