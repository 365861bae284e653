"""Graph-break hotspots: every break grouped by reason and user source line, ranked by impact.

A distinct list (one row per reason and line), with how often it happened across compiles and
ranks, the graph-break registry id, the function, and whether the whole frame fell back to
eager (a break inside a loop, "skipping the frame", a fullgraph failure).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceview.trace import Trace


def dedupe_sources(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Rows seen both in the trace and in the text log count once (the trace row is kept)."""
    if df.height == 0 or "source" not in df.columns or df["source"].n_unique() < 2:
        return df
    tr = df.filter(pl.col("source") == "trace")
    tx = df.filter(pl.col("source") != "trace")
    return pl.concat([tr, tx.join(tr.select(keys).unique(), on=keys, how="anti", nulls_equal=True)])


def graph_break_rows(trace: Trace) -> pl.DataFrame:
    """All graph-break observations, trace and text merged without double counting, with the
    frame (code object) each happened in."""
    gb = dedupe_sources(trace.graph_breaks, ["rank", "compile_id", "filename", "line", "reason"])
    comp = trace.compiles.select(
        "file",
        "compile_id",
        pl.col("function").alias("frame_function"),
        pl.col("filename").alias("frame_filename"),
        pl.col("line").alias("frame_line"),
    )
    return gb.join(comp, on=["file", "compile_id"], how="left")


def graph_break_hotspots(trace: Trace) -> list[dict[str, Any]]:
    """Distinct graph breaks, most impact first: frames that fell back to eager, then count x ranks."""
    rows = graph_break_rows(trace)
    if rows.height == 0:
        return []
    grouped = (
        rows.group_by("reason", "filename", "line")
        .agg(
            pl.col("gb_id").drop_nulls().first(),
            pl.col("function").drop_nulls().first(),
            pl.len().alias("count"),
            pl.col("rank").drop_nulls().unique().sort().alias("ranks"),
            pl.col("compile_id").drop_nulls().unique().sort().alias("compile_ids"),
            pl.col("frame_skipped").fill_null(False).any().alias("frame_skipped"),
            pl.col("frame_function").drop_nulls().first(),
            pl.col("frame_filename").drop_nulls().first(),
            pl.col("frame_line").drop_nulls().first(),
            pl.col("reason_line").drop_nulls().first(),
            pl.col("hint").drop_nulls().first(),
            pl.col("file").first(),
            pl.col("lineno").first(),
        )
        .with_columns((pl.col("count") * pl.col("ranks").list.len().clip(1)).alias("_impact"))
        .sort(["frame_skipped", "_impact", "filename", "line"], descending=[True, True, False, False], nulls_last=True)
        .drop("_impact")
    )
    return grouped.to_dicts()
