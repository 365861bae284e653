"""Where compile time went: per compile, per function, per phase; autotuning; cache hits.

Phase seconds come from `compilation_metrics` (Dynamo, backend = AOTAutograd + the backend
compiler, Inductor, codegen, backward). Autotuning is not a metrics field: it is read from the
chromium-event spans Inductor logs while autotuning (`<op>_template_precompiling`,
`<op>_template_autotuning` with the choices' stats, `CachingAutotuner.coordinate_descent_tuning`,
`CachingAutotuner.benchmark_all_configs`, `benchmark_fused_nodes`), overlapping spans merged;
a text log alone gives the `AUTOTUNE op(shapes)` tables Inductor prints.
"""

from __future__ import annotations

import re

import orjson
import polars as pl

from traceview.trace import Trace

PHASES = {
    "dynamo": "dynamo_time_s",
    "aot+backend": "backend_compile_time_s",
    "inductor": "inductor_compile_time_s",
    "codegen": "code_gen_time_s",
    "backward": "bwd_compile_time_s",
}

AUTOTUNE_SPAN = (
    r"(?i)autotun|_template_precompiling$|coordinate_descent_tuning|benchmark_all_configs|"
    r"benchmark_fused_nodes|benchmark_gpu"
)

AUTOTUNE_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32,
    "compile_id": pl.String,
    "op": pl.String,
    "shape": pl.String,
    "dtypes": pl.String,
    "choices": pl.Int64,
    "best_kernel": pl.String,
    "best_ms": pl.Float64,
    "best_triton_kernel": pl.String,
    "best_triton_ms": pl.Float64,
    "precompile_s": pl.Float64,
    "benchmark_s": pl.Float64,
    "failed_choices": pl.Int64,
    "source": pl.String,
    "file": pl.String,
    "lineno": pl.Int64,
}


def _cid(col: str = "compile_id") -> pl.Expr:
    return pl.col(col).str.replace(r"_\d+$", "")


def _autotune_spans(spans: pl.DataFrame) -> pl.DataFrame:
    """The chromium spans of autotuning."""
    return spans.filter(pl.col("name").str.contains(AUTOTUNE_SPAN) & pl.col("duration_s").is_not_null())


def _merged_seconds(spans: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Seconds covered by `spans` per `by` group, overlapping (nested) spans counted once."""
    if spans.height == 0:
        return pl.DataFrame(schema={**{c: spans.schema[c] for c in by}, "seconds": pl.Float64})
    s = (
        spans.select(*by, pl.col("start_us").alias("_s"), (pl.col("start_us") + pl.col("duration_s") * 1e6).alias("_e"))
        .sort([*by, "_s"], nulls_last=True)
        .with_columns(pl.col("_e").cum_max().shift(1).over(by).alias("_prev"))
        .with_columns((pl.col("_prev").is_null() | (pl.col("_s") > pl.col("_prev"))).cast(pl.Int32).cum_sum().over(by).alias("_g"))
        .group_by([*by, "_g"])
        .agg(pl.col("_s").min(), pl.col("_e").max())
        .group_by(by)
        .agg(((pl.col("_e") - pl.col("_s")).sum() / 1e6).alias("seconds"))
    )
    return s


def _autotune_by_compile(spans: pl.DataFrame) -> pl.DataFrame:
    """Autotuning seconds per compile (file, compile_id, occurrence: spans.occurrence, read
    from log order)."""
    a = _autotune_spans(spans).with_columns(_cid())
    return _merged_seconds(a, ["file", "compile_id", "occurrence"]).rename({"seconds": "autotuning_s"})


def top_compiles(trace: Trace, *, n: int = 10) -> pl.DataFrame:
    """The slowest compiles (forward + backward seconds), with their phase seconds: the `n`
    slowest distinct ones (seconds, compile id, function, place), each with every rank on
    which it took exactly as long, so that ranks that compiled alike are all listed rather
    than as many as fit in `n` rows."""
    c, spans = trace.compiles, trace.spans
    if spans.height:
        c = c.join(_autotune_by_compile(spans), on=["file", "compile_id", "occurrence"], how="left")
    else:
        c = c.with_columns(pl.lit(None, dtype=pl.Float64).alias("autotuning_s"))
    ranked = c.filter(pl.col("total_time_s") > 0).sort("total_time_s", descending=True, maintain_order=True)
    # (the occurrence: the second 0/0, after a torch._dynamo.reset(), is another compile)
    same = ["total_time_s", "compile_id", "occurrence", "function", "filename", "line"]
    slowest = ranked.select(same).unique(maintain_order=True).head(n)
    return (
        ranked.join(slowest, on=same, how="semi", nulls_equal=True, maintain_order="left")
        .select(
            "rank",
            "compile_id",
            "occurrence",
            "compile_kind",
            "function",
            "filename",
            "line",
            pl.col("total_time_s").alias("seconds"),
            "dynamo_time_s",
            "backend_compile_time_s",
            "inductor_compile_time_s",
            "code_gen_time_s",
            "bwd_compile_time_s",
            "autotuning_s",
            "file",
            "lineno",
        )
    )


def by_function(trace: Trace, *, frames_only: bool = False) -> pl.DataFrame:
    """Compile seconds per code object and rank, most first. Compiled-autograd graphs (`!N`,
    no code object of their own) are not functions: they are left out. `frames_only`: only
    the compiles of a Dynamo frame outside compiled autograd (frame id set, no `!N`), the
    ones `traceview diff` matches by code object."""
    compiles = trace.compiles
    if frames_only:
        compiles = compiles.filter(pl.col("frame_id").is_not_null() & pl.col("compiled_autograd_id").is_null())
    return _by_function(compiles)


def _by_function(compiles: pl.DataFrame) -> pl.DataFrame:
    if "compiled_autograd_id" in compiles.columns:
        ca_graph = pl.col("compiled_autograd_id").is_not_null() & pl.col("frame_id").is_null()
        compiles = compiles.filter(~ca_graph.fill_null(False))
    if "compile_kind" in compiles.columns:  # a compile without a Dynamo frame has no code object
        compiles = compiles.filter(pl.col("compile_kind").fill_null("dynamo") == "dynamo")
    return (
        compiles.group_by("rank", "function", "filename", "line")
        .agg(pl.len().alias("compiles"), pl.col("total_time_s").sum().alias("seconds"))
        # ties (ranks that compiled alike) in rank order: the same summary every time
        .sort(
            ["seconds", "compiles", "function", "filename", "line", "rank"],
            descending=[True, True, False, False, False, False],
            nulls_last=True,
        )
    )


def phase_totals(trace: Trace) -> dict[str, float]:
    """Seconds per compile phase, summed over compiles. Phases nest: Inductor and autotuning
    are inside aot+backend; `aot` is aot+backend minus Inductor (AOTAutograd and any other
    backend work)."""
    compiles, spans = trace.compiles, trace.spans
    out = {k: round(float(compiles[c].fill_null(0).sum()), 6) for k, c in PHASES.items()}
    aot = (pl.col("backend_compile_time_s") - pl.col("inductor_compile_time_s").fill_null(0)).clip(lower_bound=0)
    out["aot"] = round(float(compiles.select(aot.fill_null(0).sum()).item()), 6) if compiles.height else 0.0
    a = _autotune_spans(spans)
    out["autotuning"] = round(float(_merged_seconds(a, ["file"])["seconds"].sum()), 6) if a.height else 0.0
    return out


def span_totals(trace: Trace, *, n: int = 12) -> pl.DataFrame:
    """Seconds per chromium-event phase name (dynamo, inductor_compile, autotuning, ...)."""
    return (
        trace.spans.filter(pl.col("duration_s").is_not_null())
        .group_by("name")
        .agg(pl.col("duration_s").sum().alias("seconds"), pl.len().alias("count"))
        .sort(["seconds", "name"], descending=[True, False])
        .head(n)
    )


# ----------------------------------------------------------------------- autotuning
def _args(payload: str | None) -> dict:
    try:
        v = orjson.loads(payload or "")
    except orjson.JSONDecodeError:
        return {}
    a = v.get("args") if isinstance(v, dict) else None
    return a if isinstance(a, dict) else {}


def _json(text: object) -> dict:
    if isinstance(text, dict):
        return text
    try:
        v = orjson.loads(text) if isinstance(text, str) else {}
    except orjson.JSONDecodeError:
        return {}
    return v if isinstance(v, dict) else {}


def _f(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _has_template_autotuning(spans: pl.DataFrame) -> bool:
    """Whether the trace logged template autotuning (then `autotuning` reads `events`)."""
    return spans.height > 0 and spans.filter(pl.col("name").str.ends_with("_template_autotuning")).height > 0


def autotuning(trace: Trace) -> pl.DataFrame:
    """One row per autotuned template op (e.g. an addmm under max-autotune): shapes, how many
    choices, the winner and its time, and the seconds spent precompiling and benchmarking.
    From the trace's autotuning spans; from a text log's `AUTOTUNE` tables when there is no
    trace. The payloads (`index_events`) are only read when the spans show template
    autotuning, the text's other lines only when they do not."""
    spans = trace.spans
    if _has_template_autotuning(spans):
        return _autotuning(trace.index_events(), spans)
    return _autotuning(None, spans, trace.other_lines)


def _autotuning(events: pl.DataFrame | None, spans: pl.DataFrame, other_lines: pl.DataFrame | None = None) -> pl.DataFrame:
    at = spans.filter(pl.col("name").str.ends_with("_template_autotuning")) if spans.height else spans
    if at.height and events is not None:
        return _autotuning_from_trace(events, spans, at)
    if other_lines is not None and other_lines.height:
        return _autotuning_from_text(other_lines)
    return pl.DataFrame(schema=AUTOTUNE_SCHEMA)


def _autotuning_from_trace(events: pl.DataFrame, spans: pl.DataFrame, at: pl.DataFrame) -> pl.DataFrame:
    pre = spans.filter(pl.col("name").str.ends_with("_template_precompiling"))
    ends = pl.concat([at.select("file", "end_lineno"), pre.select("file", "end_lineno")]).drop_nulls()
    if "payload_start" in events.columns:  # events as parsed: read just these payloads
        from parsers.torch_trace import hydrate

        wanted = pl.concat([ends.rename({"end_lineno": "lineno"}), at.select("file", "lineno")]).unique()
        events, _ = hydrate(events.join(wanted, on=["file", "lineno"], how="semi"))
    payloads = {
        (f, ln): p
        for f, ln, p in events.join(ends, left_on=["file", "lineno"], right_on=["file", "end_lineno"])
        .select("file", "lineno", "payload")
        .iter_rows()
    }
    begins = {
        (f, ln): p
        for f, ln, p in events.join(at.select("file", "lineno"), on=["file", "lineno"]).select("file", "lineno", "payload").iter_rows()
    }

    def keyed(df: pl.DataFrame, suffix: str) -> pl.DataFrame:
        return df.with_columns(
            pl.col("name").str.replace(suffix + "$", "").alias("op"),
            _cid(),
        ).with_columns(pl.int_range(pl.len()).over(["file", "compile_id", "op"], order_by="lineno").alias("_k"))

    a = keyed(at, "_template_autotuning")
    p = keyed(pre, "_template_precompiling").select(
        "file", "compile_id", "op", "_k", pl.col("duration_s").alias("precompile_s"), pl.col("end_lineno").alias("_pre_end")
    )
    a = a.join(p, on=["file", "compile_id", "op", "_k"], how="left")
    rows = []
    for r in a.sort("file", "lineno").iter_rows(named=True):
        args = {**_args(begins.get((r["file"], r["lineno"]))), **_args(payloads.get((r["file"], r["end_lineno"])))}
        stats = _json(args.get("autotune_choices_stats"))
        pre_meta = _json(_args(payloads.get((r["file"], r["_pre_end"]))).get("metadata"))
        failed = pre_meta.get("exceptions")
        best = _f(stats.get("best_time"))
        best_tr = _f(stats.get("best_triton_time"))
        rows.append(
            {
                "rank": r["rank"],
                "compile_id": r["compile_id"],
                "op": r["op"],
                "shape": args.get("autotune_shape"),
                "dtypes": args.get("autotune_dtypes"),
                "choices": stats.get("num_choices") if isinstance(stats.get("num_choices"), int) else None,
                "best_kernel": stats.get("best_kernel"),
                "best_ms": best,
                "best_triton_kernel": stats.get("best_triton_kernel"),
                "best_triton_ms": best_tr,
                "precompile_s": r["precompile_s"],
                "benchmark_s": r["duration_s"],
                "failed_choices": len(failed) if isinstance(failed, list) else None,
                "source": "trace",
                "file": r["file"],
                "lineno": r["lineno"],
            }
        )
    return pl.DataFrame(rows, schema=AUTOTUNE_SCHEMA)


_AT_HEAD = re.compile(r"^AUTOTUNE (?P<op>\w+)\((?P<shape>.*)\)\s*$")
_AT_DTYPES = re.compile(r"^dtypes: (?P<d>.*)$")
_AT_CHOICE = re.compile(r"^\s+(?P<k>\S+) (?P<ms>[\d.]+) ms (?P<pct>[\d.]+)%")
_AT_TAIL = re.compile(
    r"AUTOTUNE benchmarking takes (?P<bench>[\d.]+) seconds and (?P<pre>[\d.]+) seconds precompiling for (?P<n>\d+) choices"
)


def _autotuning_from_text(other_lines: pl.DataFrame) -> pl.DataFrame:
    cand = other_lines.filter(
        pl.col("text").str.starts_with("AUTOTUNE ")
        | pl.col("text").str.starts_with("dtypes: ")
        | pl.col("text").str.contains(r"^\s+\S+ [\d.]+ ms [\d.]+%")
        | pl.col("text").str.contains("AUTOTUNE benchmarking takes", literal=True)
    ).sort("file", "lineno")
    rows: list[dict] = []
    cur: dict | None = None
    for file, lineno, rank, text in cand.select("file", "lineno", "rank", "text").iter_rows():
        if m := _AT_HEAD.match(text):
            cur = {
                **{k: None for k in AUTOTUNE_SCHEMA},
                "rank": rank,
                "op": m["op"],
                "shape": m["shape"],
                "source": "text",
                "file": file,
                "lineno": lineno,
            }
            rows.append(cur)
        elif cur is None or file != cur["file"]:
            continue
        elif m := _AT_DTYPES.match(text):
            cur["dtypes"] = cur["dtypes"] or m["d"]
        elif m := _AT_CHOICE.match(text):
            if cur["best_kernel"] is None:
                cur["best_kernel"], cur["best_ms"] = m["k"], float(m["ms"])
            if cur["best_triton_kernel"] is None and m["k"].startswith("triton_"):
                cur["best_triton_kernel"], cur["best_triton_ms"] = m["k"], float(m["ms"])
        elif m := _AT_TAIL.search(text):
            cur["benchmark_s"], cur["precompile_s"], cur["choices"] = float(m["bench"]), float(m["pre"]), int(m["n"])
            cur = None
    return pl.DataFrame(rows, schema=AUTOTUNE_SCHEMA)


def cache_summary(trace: Trace) -> dict[str, float | int | None]:
    """FX graph cache and AOTAutograd cache hits and misses, with hit ratios."""
    compiles = trace.compiles
    s = {
        c: int(compiles[c].fill_null(0).sum())
        for c in ("fx_cache_hits", "fx_cache_misses", "aot_cache_hits", "aot_cache_misses", "fx_cache_bypasses", "aot_cache_bypasses")
    }
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
