"""Write an export's digest (traceview.ingest.digest): read back from the export just written,
so that it holds exactly what the summary would read of the full tables."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from traceview.analyze.cache_keys import cache_keys, factorized
from traceview.ingest.digest import (
    DIGEST_DIR,
    DIGEST_TABLES,
    DIGEST_VERSION,
    INDEX,
    slim_index,
    summary_guards,
)
from traceview.ingest.exports import export_ranks, read_exports, read_rows
from traceview.output.export.parts import PARQUET_OPTIONS


def write_digest(root: Path, manifest: dict) -> dict:
    """Write `root/digest/` for the export at `root` (its manifest.json written already, and
    given as `manifest`); the manifest's `digest` entry."""
    trace = read_exports([root], digests=False)
    out = root / DIGEST_DIR
    out.mkdir(exist_ok=True)
    tables: dict[str, dict] = {}

    def write(name: str, df: pl.DataFrame) -> None:
        pq.write_table(df.to_arrow(), out / f"{name}.parquet", **PARQUET_OPTIONS)
        tables[name] = {"path": f"{DIGEST_DIR}/{name}.parquet", "rows": df.height}

    for name in DIGEST_TABLES:
        write(name, trace.table(name))
    write(INDEX, slim_index(trace.index_events()))
    write("summary_guards", read_rows(root, manifest, "guards", summary_guards))
    look, parts = factorized(cache_keys(trace))
    write("cache_lookups", look)
    write("cache_components", parts)
    ranks = sorted(export_ranks(root, manifest), key=lambda r: -1 if r is None else r)
    return {"version": DIGEST_VERSION, "ranks": ranks, "tables": tables}
