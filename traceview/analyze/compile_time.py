"""Where compile time went: per compile, per function, per phase; cache hits and misses."""

from __future__ import annotations

import polars as pl

PHASES = {
    "dynamo": "dynamo_time_s",
    "aot+backend": "backend_compile_time_s",
    "inductor": "inductor_compile_time_s",
    "codegen": "code_gen_time_s",
    "backward": "bwd_compile_time_s",
}


def top_compiles(compiles: pl.DataFrame, n: int = 10) -> pl.DataFrame:
    """The slowest compiles (forward + backward seconds)."""
    return (
        compiles.filter(pl.col("total_time_s") > 0)
        .sort("total_time_s", descending=True)
        .head(n)
        .select(
            "rank",
            "compile_id",
            "function",
            "filename",
            "line",
            pl.col("total_time_s").alias("seconds"),
            "dynamo_time_s",
            "backend_compile_time_s",
            "inductor_compile_time_s",
            "code_gen_time_s",
            "bwd_compile_time_s",
            "file",
            "lineno",
        )
    )


def by_function(compiles: pl.DataFrame) -> pl.DataFrame:
    """Compile seconds per code object and rank, most first."""
    return (
        compiles.group_by("rank", "function", "filename", "line")
        .agg(pl.len().alias("compiles"), pl.col("total_time_s").sum().alias("seconds"))
        .sort("seconds", "compiles", descending=True)
    )


def phase_totals(compiles: pl.DataFrame) -> dict[str, float]:
    """Seconds per compile phase, summed over compiles (phases overlap: inductor is inside aot)."""
    return {k: round(float(compiles[c].fill_null(0).sum()), 6) for k, c in PHASES.items()}


def span_totals(spans: pl.DataFrame, n: int = 12) -> pl.DataFrame:
    """Seconds per chromium-event phase name (dynamo, inductor_compile, autotuning, ...)."""
    return (
        spans.filter(pl.col("duration_s").is_not_null())
        .group_by("name")
        .agg(pl.col("duration_s").sum().alias("seconds"), pl.len().alias("count"))
        .sort("seconds", descending=True)
        .head(n)
    )


def cache_summary(compiles: pl.DataFrame) -> dict[str, float | int | None]:
    """FX graph cache and AOTAutograd cache hits and misses, with hit ratios."""
    s = {c: int(compiles[c].fill_null(0).sum()) for c in ("fx_cache_hits", "fx_cache_misses", "aot_cache_hits", "aot_cache_misses", "fx_cache_bypasses", "aot_cache_bypasses")}
    fx_total = s["fx_cache_hits"] + s["fx_cache_misses"]
    aot_total = s["aot_cache_hits"] + s["aot_cache_misses"]
    return {
        "fx_graph_hits": s["fx_cache_hits"],
        "fx_graph_misses": s["fx_cache_misses"],
        "fx_graph_bypasses": s["fx_cache_bypasses"],
        "fx_graph_hit_ratio": round(s["fx_cache_hits"] / fx_total, 4) if fx_total else None,
        "aot_autograd_hits": s["aot_cache_hits"],
        "aot_autograd_misses": s["aot_cache_misses"],
        "aot_autograd_bypasses": s["aot_cache_bypasses"],
        "aot_autograd_hit_ratio": round(s["aot_cache_hits"] / aot_total, 4) if aot_total else None,
    }
