"""Write parts as parquet, part by part, in worker processes: what `traceview export` does for
a many-rank trace (hive-partitioned by rank), and the parquet conventions export uses for
every table (PARQUET_OPTIONS, `conform`, `write_rank_partitions`)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from parsers.compile_ids import with_labels
from traceview.ingest.graph_tables import build_graph_tables
from traceview.ingest.parts import (
    PART_TABLES,
    event_chunks,
    event_parts,
    input_bytes,
    part_dirs,
    read_part_table,
)
from traceview.ingest.scheduler import run_jobs
from traceview.ingest.worker_pool import HEAVY_PARALLEL_MIN_BYTES
from traceview.trace import BASE_TABLES, GRAPH_TABLES, table_schema

# Tables written part by part by `export_part` (stats is written whole: its columns differ
# between trace and text parts).
EXPORT_PART_TABLES = tuple(n for n in PART_TABLES if n != "stats") + GRAPH_TABLES


NULL_RANK_DIR = "__HIVE_DEFAULT_PARTITION__"


def conform(df: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """`df` with exactly the columns of `schema`, in its order and types (missing ones null)."""
    return df.select(
        [pl.col(c).cast(t) if c in df.columns else pl.lit(None, dtype=t).alias(c) for c, t in schema.items()]
    )


def labelled(part: Path, name: str, df: pl.DataFrame | None, compiles: pl.DataFrame | None = None) -> pl.DataFrame | None:
    """A part's table `df` with the `label` column a Trace gives it (traceview.trace.table_schema),
    from the part's own compiles (a part holds whole files; `compiles`: them, already read)."""
    if df is None or name in BASE_TABLES or "compile_id" not in df.columns:
        return df
    if compiles is None:
        compiles = read_part_table(part, "compiles")
    return with_labels(df, compiles if compiles is not None else pl.DataFrame(schema=table_schema("compiles")))


def export_part(partdir: str, outdir: str) -> dict[str, int]:
    """Worker: write one part's tables as hive-partitioned parquet files (by rank) under
    `outdir`, building its graph tables first if the part has none yet (events and graph
    tables a group of files at a time; the graph tables it builds go to the export only, the
    part keeps what the md5 checks found: see build_graph_tables). Returns row counts."""
    part = Path(partdir)
    out = Path(outdir)
    rows: dict[str, int] = {}
    compiles = read_part_table(part, "compiles")  # the labels of every table's compiles, read once
    if compiles is None:
        compiles = pl.DataFrame(schema=table_schema("compiles"))

    def write(name: str, df: pl.DataFrame | None, file_name: str) -> None:
        if df is None or df.height == 0:
            return
        df = conform(labelled(part, name, df, compiles), table_schema(name))  # type: ignore[arg-type]
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
        built = build_graph_tables(part, sink, keep=False)  # events a group at a time: only they hold payloads
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
    for rows in run_jobs(todo, jobs, min_bytes=HEAVY_PARALLEL_MIN_BYTES, here=False):
        for k, v in (rows or {}).items():
            total[k] = total.get(k, 0) + v
    return total
