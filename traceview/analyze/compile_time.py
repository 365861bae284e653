"""Where compile time went: per compile, per function, per phase; autotuning; cache hits.

Phase seconds come from `compilation_metrics` (Dynamo, backend = AOTAutograd + the backend
compiler, Inductor, codegen, backward). Autotuning is not a metrics field: it is read from the
chromium-event spans Inductor logs while autotuning (`<op>_template_precompiling`,
`<op>_template_autotuning` with the choices' stats, `CachingAutotuner.coordinate_descent_tuning`,
`CachingAutotuner.benchmark_all_configs`, `benchmark_fused_nodes`), overlapping spans merged
and counted where they ran: inside a compile's `inductor_compile` span (its Inductor or its
backward phase), or outside every one (run time: a kernel's first calls, not compile time);
a text log alone gives the `AUTOTUNE op(shapes)` tables Inductor prints.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from parsers.coerce import float_of, int_of, json_object, text_of
from parsers.compile_ids import without_attempt_expr
from traceview.analyze.accounts.compiles import compile_account
from traceview.analyze.per_trace import once
from traceview.trace import Trace

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
    return without_attempt_expr(col)


def _autotune_spans(spans: pl.DataFrame) -> pl.DataFrame:
    """The chromium spans of autotuning."""
    return spans.filter(pl.col("name").str.contains(AUTOTUNE_SPAN) & pl.col("duration_s").is_not_null())


INDUCTOR_SPAN = "inductor_compile"  # one Inductor compile of a graph (forward or backward)
CODEGEN_SPAN = "code_gen"  # its codegen (the `code_gen_time_s` of compilation_metrics)


def _windows(spans: pl.DataFrame, compiles: pl.DataFrame) -> pl.DataFrame:
    """The `inductor_compile` spans, each with the compile it belongs to and which phase of
    it: `inductor` (logged before the compile's `compilation_metrics`: its forward, and a
    backward compiled with it; in `inductor_compile_time_s`), `backward` (logged after it: a
    backward compiled at the first backward call; in `bwd_compile_time_s`) or `unfinished`
    (never ended, or of a compile without metrics: a log cut mid-compile; counted nowhere).
    An unended span reaches to the end of time, so what ran inside it is not taken for
    run-time work."""
    w = spans.filter(pl.col("name") == INDUCTOR_SPAN).with_columns(_cid())
    if w.height == 0:
        return pl.DataFrame(schema={"file": pl.String, "compile_id": pl.String, "occurrence": pl.Int32,
                                    "phase": pl.String, "_s": pl.Float64, "_e": pl.Float64})
    m = compiles.select("file", "compile_id", "occurrence", "metrics_lineno")
    return (
        w.join(m, on=["file", "compile_id", "occurrence"], how="left")
        .select(
            "file",
            "compile_id",
            "occurrence",
            pl.when(pl.col("duration_s").is_null() | pl.col("metrics_lineno").is_null())
            .then(pl.lit("unfinished"))
            .when(pl.col("lineno") > pl.col("metrics_lineno"))
            .then(pl.lit("backward"))
            .otherwise(pl.lit("inductor"))
            .alias("phase"),
            pl.col("start_us").alias("_s"),
            (pl.col("start_us") + pl.col("duration_s").fill_null(float("inf")) * 1e6).alias("_e"),
        )
        .filter(pl.col("_s").is_not_null())
    )


def _merged(df: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Intervals `_s`/`_e` per `by` group merged into disjoint ones."""
    return (
        df.sort([*by, "_s"], nulls_last=True)
        .with_columns(pl.col("_e").cum_max().shift(1).over(by).alias("_prev"))
        .with_columns((pl.col("_prev").is_null() | (pl.col("_s") > pl.col("_prev"))).cast(pl.Int32).cum_sum().over(by).alias("_g"))
        .group_by([*by, "_g"])
        .agg(pl.col("_s").min(), pl.col("_e").max())
        .drop("_g")
    )


def _overlap(a: pl.DataFrame, b: pl.DataFrame, on: list[str]) -> pl.DataFrame:
    """Each pair of intervals of `a` and `b` (same `on`) that overlap, with the seconds
    `_o` they share; the columns of `a`, and of `b` suffixed `_b`."""
    j = a.join(b, on=on, how="inner", suffix="_b")
    o = pl.min_horizontal("_e", "_e_b") - pl.max_horizontal("_s", "_s_b")
    return j.with_columns((o / 1e6).alias("_o")).filter(pl.col("_o") > 0)


def _autotune_split(spans: pl.DataFrame, compiles: pl.DataFrame) -> pl.DataFrame:
    """Autotuning seconds by where they ran: one row per (file, compile_id, occurrence,
    phase), with `seconds` and `in_codegen` (the part inside the compile's codegen).
    Autotuning spans (overlaps counted once) are cut by the `inductor_compile` spans
    (_windows): the part inside one is that compile's, in its phase, whatever compile id the
    autotuning span carries; the part outside every one ran at run time (the first calls of
    a compiled kernel: `CachingAutotuner.benchmark_all_configs`, coordinate descent), phase
    `run time`, compile id of the span. Inside an unended `inductor_compile` span: phase
    `unfinished` (counted in no total). Unended autotuning spans are left out."""
    schema = {"file": pl.String, "compile_id": pl.String, "occurrence": pl.Int32, "phase": pl.String,
              "seconds": pl.Float64, "in_codegen": pl.Float64}
    a = _autotune_spans(spans).with_columns(_cid())
    if a.height == 0:
        return pl.DataFrame(schema=schema)
    a = a.select("file", "compile_id", "occurrence", pl.col("start_us").alias("_s"),
                 (pl.col("start_us") + pl.col("duration_s") * 1e6).alias("_e")).filter(pl.col("_s").is_not_null())
    merged = _merged(a.select("file", "_s", "_e"), ["file"])
    w = _windows(spans, compiles)
    w = _merged(w, ["file", "compile_id", "occurrence", "phase"]) if w.height else w  # nested ones once
    inside = _overlap(merged, w, ["file"]).select(
        "file", "compile_id", "occurrence", "phase", pl.max_horizontal("_s", "_s_b").alias("_s"), pl.min_horizontal("_e", "_e_b").alias("_e"), "_o",
    ) if w.height else pl.DataFrame(schema={"file": pl.String, "compile_id": pl.String, "occurrence": pl.Int32,
                                            "phase": pl.String, "_s": pl.Float64, "_e": pl.Float64, "_o": pl.Float64})
    cg = spans.filter((pl.col("name") == CODEGEN_SPAN) & pl.col("duration_s").is_not_null()).select(
        "file", pl.col("start_us").alias("_s"), (pl.col("start_us") + pl.col("duration_s") * 1e6).alias("_e"))
    cg = _merged(cg, ["file"]) if cg.height else cg
    in_cg = (
        _overlap(inside.drop("_o").with_row_index("_i"), cg, ["file"]).group_by("_i").agg(pl.col("_o").sum().alias("in_codegen"))
        if inside.height and cg.height else pl.DataFrame(schema={"_i": pl.UInt32, "in_codegen": pl.Float64})
    )
    inside = inside.with_row_index("_i").join(in_cg, on="_i", how="left")
    by = ["file", "compile_id", "occurrence", "phase"]
    compile_time = inside.group_by(by).agg(pl.col("_o").sum().alias("seconds"), pl.col("in_codegen").fill_null(0).sum())
    # run time: what of each merged interval no window covers, to the compile id of the
    # autotuning spans in it (the kernel's compile)
    covered = inside.group_by("file", "_s", "_e").agg() if inside.height else None
    outside_rows = []
    cover: dict[str, list[tuple[float, float]]] = {}
    if covered is not None:
        for f, s0, e0 in covered.iter_rows():
            cover.setdefault(f, []).append((s0, e0))
    for f, s0, e0 in merged.sort("file", "_s").iter_rows():
        cut = sorted((max(s0, cs), min(e0, ce)) for cs, ce in cover.get(f, []) if cs < e0 and ce > s0)
        pos = s0
        for cs, ce in [*cut, (e0, e0)]:
            if cs > pos:
                outside_rows.append({"file": f, "_s": pos, "_e": cs})
            pos = max(pos, ce)
    out = pl.DataFrame(outside_rows, schema={"file": pl.String, "_s": pl.Float64, "_e": pl.Float64})
    if out.height:
        # the compile id of the autotuning span the run-time piece starts in
        ids = a.sort("file", "_s").select("file", "_s", "compile_id", "occurrence")
        out = out.sort("file", "_s").join_asof(ids, on="_s", by="file", strategy="backward", check_sortedness=False)  # sorted by file, _s
        run = out.group_by("file", "compile_id", "occurrence").agg(((pl.col("_e") - pl.col("_s")).sum() / 1e6).alias("seconds")).with_columns(
            pl.lit("run time").alias("phase"), pl.lit(0.0).alias("in_codegen"))
    else:
        run = pl.DataFrame(schema=schema)
    return pl.concat([compile_time.select(list(schema)), run.select(list(schema))], how="vertical_relaxed").cast(schema)  # type: ignore[arg-type]


def _autotune_by_compile(spans: pl.DataFrame, compiles: pl.DataFrame) -> pl.DataFrame:
    """Autotuning seconds of each compile (file, compile_id, occurrence): the compile-time
    part (_autotune_split: inside its `inductor_compile` spans, forward and backward), not
    the run-time autotuning of its kernels."""
    s = _autotune_split(spans, compiles).filter(pl.col("phase").is_in(["inductor", "backward"]))
    return s.group_by("file", "compile_id", "occurrence").agg(pl.col("seconds").sum().alias("autotuning_s"))


def top_compiles(trace: Trace, *, n: int = 10) -> pl.DataFrame:
    """The slowest compiles (forward + backward seconds), with their phase seconds: the `n`
    slowest distinct ones (seconds, compile id, function, place), each with every rank on
    which it took exactly as long, so that ranks that compiled alike are all listed rather
    than as many as fit in `n` rows."""
    c, spans = accounted_compiles(trace), trace.spans
    if spans.height:
        c = c.join(_autotune_by_compile(spans, c), on=["file", "compile_id", "occurrence"], how="left")
    else:
        c = c.with_columns(pl.lit(None, dtype=pl.Float64).alias("autotuning_s"))
    c_cols = set(c.columns)
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
            "attempts",
            "compile_kind",
            "function",
            "filename",
            "line",
            *[c for c in ("at_run_time", "parent_compile_id", "parent_candidates", "graph_piece", "call_filename", "call_line") if c in c_cols],
            pl.col("total_time_s").alias("seconds"),
            "dynamo_time_s",
            "backend_compile_time_s",
            "inductor_compile_time_s",
            "code_gen_time_s",
            "bwd_compile_time_s",
            *[c for c in ("bwd_pieces",) if c in c_cols],
            "autotuning_s",
            "status",
            "open_part",
            "phase",
            "file",
            "lineno",
        )
    )


def accounted_compiles(trace: Trace) -> pl.DataFrame:
    """The compiles table with each compile's seconds and status from its account
    (analyze.accounts.compiles), kept with the Trace: `total_time_s` is the account's `seconds`
    (every backward piece; a compile still open up to the capture's last timestamp), `status`
    the account's (finished, failed, interrupted, never_ended, unknown) and `table_status` the
    compiles table's own (ok, failed, graph_break_restarts, empty_graph, no_metrics), with the
    open part and its phase. Do not change what it returns."""
    return once(trace, name="accounted_compiles", build=lambda: _accounted(trace))


def _accounted(trace: Trace) -> pl.DataFrame:
    c = trace.compiles.with_columns(pl.col("status").alias("table_status"))
    acc = compile_account(trace)
    if c.is_empty() or acc.is_empty():
        return c.with_columns(pl.lit(None, dtype=pl.String).alias(n) for n in ("status", "open_part", "phase"))
    keys = ["file", "compile_id", "occurrence"]
    a = acc.select(*keys, pl.col("seconds").alias("_seconds"), pl.col("status").alias("_status"), "open_part", "phase")
    return (
        c.join(a, on=keys, how="left", nulls_equal=True)
        .with_columns(pl.coalesce("_seconds", "total_time_s").alias("total_time_s"), pl.col("_status").alias("status"))
        .drop("_seconds", "_status")
    )


def by_function(trace: Trace, *, frames_only: bool = False) -> pl.DataFrame:
    """Compile seconds per code object and rank, most first. Compiled-autograd graphs (`!N`,
    no code object of their own) are not functions: they are left out. A compile without a
    Dynamo frame that Dynamo's compiled code of a code object made at run time (a piecewise
    backend's piece: `parent_candidates`) counts under that code object: its seconds in
    `seconds`, counted in `pieces`, never in `compiles` (it is not a recompile); other compiles
    without a Dynamo frame have no code object and are left out. `frames_only`: only the
    compiles of a Dynamo frame outside compiled autograd (frame id set, no `!N`), the ones
    `traceview diff` matches by code object."""
    compiles = accounted_compiles(trace)
    if frames_only:
        compiles = compiles.filter(pl.col("frame_id").is_not_null() & pl.col("compiled_autograd_id").is_null())
    return _by_function(compiles)


_BY_FUNCTION = ["rank", "function", "filename", "line"]


def _pieces_by_code(compiles: pl.DataFrame, dynamo: pl.DataFrame) -> pl.DataFrame:
    """The run-time pieces (compiles without a Dynamo frame whose parent candidates are known)
    with the code object of their candidates (all compiles of one code object, the one whose
    compiled code ran: parsers.compiles `_with_parents`): the latest compile of the first
    candidate's id in the same file before the piece."""
    empty = pl.DataFrame(schema={"rank": pl.Int32, "function": pl.String, "filename": pl.String, "line": pl.Int32,
                                 "seconds": pl.Float64})
    if "parent_candidates" not in compiles.columns:
        return empty
    pieces = compiles.filter(
        (pl.col("compile_kind").fill_null("dynamo") != "dynamo") & (pl.col("parent_candidates").list.len() > 0)
    )
    if pieces.height == 0:
        return empty
    dyn = dynamo.select("file", "compile_id", "lineno", *_BY_FUNCTION).sort("lineno")
    rows = []
    for r in pieces.iter_rows(named=True):
        cand = dyn.filter((pl.col("file") == r["file"]) & (pl.col("compile_id") == r["parent_candidates"][0])
                          & (pl.col("lineno") < r["lineno"]))
        if cand.height:
            c = cand.row(-1, named=True)
            rows.append({**{k: c[k] for k in _BY_FUNCTION}, "seconds": r["total_time_s"] or 0.0})
    return pl.DataFrame(rows, schema=empty.schema) if rows else empty


def _by_function(compiles: pl.DataFrame) -> pl.DataFrame:
    if "compiled_autograd_id" in compiles.columns:
        ca_graph = pl.col("compiled_autograd_id").is_not_null() & pl.col("frame_id").is_null()
        compiles = compiles.filter(~ca_graph.fill_null(False))
    dynamo = compiles
    if "compile_kind" in compiles.columns:  # a compile without a Dynamo frame has no code object
        dynamo = compiles.filter(pl.col("compile_kind").fill_null("dynamo") == "dynamo")
    own = dynamo.group_by(*_BY_FUNCTION).agg(pl.len().alias("compiles"), pl.col("total_time_s").sum().alias("seconds"))
    made = _pieces_by_code(compiles, dynamo).group_by(*_BY_FUNCTION).agg(
        pl.len().cast(pl.UInt32).alias("pieces"), pl.col("seconds").sum().alias("pieces_s")
    )
    return (
        own.join(made, on=_BY_FUNCTION, how="left", nulls_equal=True)
        .with_columns(
            (pl.col("seconds").fill_null(0.0) + pl.col("pieces_s").fill_null(0.0)).alias("seconds"),
            pl.col("pieces").fill_null(0),
        )
        .drop("pieces_s")
        .select(*_BY_FUNCTION, "compiles", "pieces", "seconds")
        # ties (ranks that compiled alike) in rank order: the same summary every time
        .sort(
            ["seconds", "compiles", "function", "filename", "line", "rank"],
            descending=[True, True, False, False, False, False],
            nulls_last=True,
        )
    )


# ------------------------------------------------------------------- one split of a compile
# A compile's time in phases, each with the phase it is part of: None for the parts of the
# compile's own time (`dynamo`, `aot+backend`, `backward`: they add up to its total_time_s);
# the others are nested inside their parent (they are already counted in it). Siblings inside
# a parent may overlap: `codegen` and `autotuning` share `autotuning_in_codegen`.
PHASE_WITHIN: dict[str, str | None] = {
    "dynamo": None,  # tracing: the frame's compile time outside the backend
    "aot+backend": None,  # the backend: AOTAutograd and the backend compiler (Inductor)
    "aot": "aot+backend",  # ... outside Inductor
    "inductor": "aot+backend",
    "codegen": "inductor",
    "autotuning": "inductor",  # autotuning spans inside the compile's inductor_compile span
    "autotuning_in_codegen": "codegen",  # ... of them inside code_gen
    "backward": None,  # a backward compiled lazily at the first backward call
    "backward_autotuning": "backward",
}
# seconds spent because of compiles but not compiling: a compiled kernel's first calls
RUN_TIME_PHASES = ("runtime_autotuning",)


def compile_phases(row: dict[str, Any], autotuning: dict[str, float] | None = None) -> dict[str, float]:
    """One compile's seconds per phase (PHASE_WITHIN's keys) from its row of the compiles
    table; `autotuning`: its autotuning seconds by where they ran (`inductor`, `in_codegen`,
    `backward`: autotuning_by_phase). A part never exceeds its phase."""

    def f(key: str) -> float:
        v = row.get(key)
        return float(v) if isinstance(v, (int, float)) else 0.0

    at = autotuning or {}
    backend, inductor, codegen, backward = f("backend_compile_time_s"), f("inductor_compile_time_s"), f("code_gen_time_s"), f("bwd_compile_time_s")
    if backend:
        inductor = min(inductor, backend)
    if inductor:
        codegen = min(codegen, inductor)
    tuning = min(at.get("inductor") or 0.0, inductor) if inductor else at.get("inductor") or 0.0
    return {
        "dynamo": f("dynamo_time_s"),
        "aot+backend": backend,
        "aot": max(backend - inductor, 0.0),
        "inductor": inductor,
        "codegen": codegen,
        "autotuning": tuning,
        "autotuning_in_codegen": min(at.get("in_codegen") or 0.0, tuning, codegen) if codegen else 0.0,
        "backward": backward,
        "backward_autotuning": min(at.get("backward") or 0.0, backward) if backward else at.get("backward") or 0.0,
    }


def disjoint_phases(phases: dict[str, float], *, backward: bool = True) -> list[tuple[str, float]]:
    """A compile's phases (compile_phases) as parts that do not overlap, in order, for a bar:
    dynamo, aot (the backend outside Inductor; `backend` without Inductor), inductor (less its
    autotuning), autotuning, backward (`backward`: with it). They add up to the compile's time
    (its forward's without `backward`); zero parts left out."""
    ind = phases.get("inductor") or 0.0
    tuning = min(phases.get("autotuning") or 0.0, ind) if ind else 0.0
    parts = [("dynamo", phases.get("dynamo") or 0.0)]
    if ind:
        parts += [("aot", phases.get("aot") or 0.0), ("inductor", ind - tuning), ("autotuning", tuning)]
    else:
        parts.append(("backend", phases.get("aot+backend") or 0.0))
    if backward:
        parts.append(("backward", phases.get("backward") or 0.0))
    return [(k, v) for k, v in parts if v > 0]


def autotuning_by_phase(trace: Trace) -> dict[tuple[str, str, int], dict[str, float]]:
    """Each compile's compile-time autotuning seconds, (file, compile_id, occurrence) ->
    {`inductor`, `in_codegen`, `backward`} (_autotune_split); empty without spans."""
    if not trace.spans.height:
        return {}
    return _by_phase(_autotune_split(trace.spans, trace.compiles))


def _by_phase(split: pl.DataFrame) -> dict[tuple[str, str, int], dict[str, float]]:
    split = split.filter(pl.col("phase").is_in(["inductor", "backward"]))
    out: dict[tuple[str, str, int], dict[str, float]] = {}
    for file, cid, occ, phase, secs, in_cg in split.select("file", "compile_id", "occurrence", "phase", "seconds", "in_codegen").iter_rows():
        d = out.setdefault((file, cid, occ), {})
        d[phase] = d.get(phase, 0.0) + (secs or 0.0)
        if phase == "inductor":
            d["in_codegen"] = d.get("in_codegen", 0.0) + (in_cg or 0.0)
    return out


_PHASE_COLUMNS = ("file", "compile_id", "occurrence", "dynamo_time_s", "backend_compile_time_s", "inductor_compile_time_s",
                  "code_gen_time_s", "bwd_compile_time_s")


def phase_totals(trace: Trace) -> dict[str, float]:
    """Seconds per phase (PHASE_WITHIN, compile_phases), summed over compiles, and
    `runtime_autotuning`: autotuning outside every compile (a kernel's first calls: not
    compile time). Autotuning is counted where it ran (_autotune_split)."""
    compiles, spans = trace.compiles, trace.spans
    split = _autotune_split(spans, compiles) if spans.height else None
    by_compile = _by_phase(split) if split is not None else {}
    sums = dict.fromkeys(PHASE_WITHIN, 0.0)
    for row in compiles.select(_PHASE_COLUMNS).iter_rows(named=True):
        for k, v in compile_phases(row, by_compile.get((row["file"], row["compile_id"], row["occurrence"]))).items():
            sums[k] += v
    out = {k: round(v, 6) for k, v in sums.items()}
    out["runtime_autotuning"] = round(float(split.filter(pl.col("phase") == "run time")["seconds"].sum()), 6) if split is not None and split.height else 0.0
    return out


def phase_rows(totals: dict[str, float]) -> list[dict[str, Any]]:
    """Phase seconds (phase_totals) as rows that say how they nest: `phase`, `seconds`,
    `within` (the phase it is part of; null: a part of the compiles' own time, and those add
    up to it) and `compile_time` (false: spent at run time)."""
    return [
        {"phase": k, "seconds": v, "within": PHASE_WITHIN.get(k), "compile_time": k not in RUN_TIME_PHASES}
        for k, v in totals.items()
    ]


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
    a = json_object(payload).get("args")
    return a if type(a) is dict else {}


def _json(value: object) -> dict:
    """A field that holds a JSON object, or its text."""
    return value if type(value) is dict else json_object(value if type(value) is str else None)


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
        best = float_of(stats.get("best_time"))
        best_tr = float_of(stats.get("best_triton_time"))
        rows.append(
            {
                "rank": r["rank"],
                "compile_id": r["compile_id"],
                "op": r["op"],
                "shape": text_of(args.get("autotune_shape")),
                "dtypes": text_of(args.get("autotune_dtypes")),
                "choices": int_of(stats.get("num_choices")),
                "best_kernel": text_of(stats.get("best_kernel")),
                "best_ms": best,
                "best_triton_kernel": text_of(stats.get("best_triton_kernel")),
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


# (cache, event) -> the compiles table's column that counts it (parsers.compiles.CACHE_ARTIFACTS)
CACHE_COLUMNS = {
    ("fx_graph", "hit"): "fx_cache_hits",
    ("fx_graph", "miss"): "fx_cache_misses",
    ("fx_graph", "bypass"): "fx_cache_bypasses",
    ("aot_autograd", "hit"): "aot_cache_hits",
    ("aot_autograd", "miss"): "aot_cache_misses",
    ("aot_autograd", "bypass"): "aot_cache_bypasses",
}
_CACHE_COUNTS_SCHEMA = {"rank": pl.Int32, "compile_id": pl.String, "cache": pl.String, "event": pl.String,
                        "count": pl.Int64, "source": pl.String}


def cache_counts(trace: Trace) -> pl.DataFrame:
    """FX graph and AOTAutograd cache lookups per compile: one row per (rank, compile_id,
    cache, event) with its `count` and `source`: the trace's `*_cache_hit/miss/bypass`
    artifacts (the compiles table's columns), and a text log's `fx graph cache hit for key`,
    `AOTAutograd cache miss for key`, `Bypassing … cache` lines (compile_facts.cache_events,
    compile id from the line's `[0/0]`). A run logged both ways has each lookup twice: per
    (rank, compile id, cache) the trace's rows win (parsers.sources.prefer_trace), the text
    log's count for the compiles and caches the trace logged no lookup of."""
    from parsers.sources import TEXT, TRACE, prefer_trace
    from traceview.analyze.compile_facts import cache_events

    c = trace.compiles
    rows = []
    for (cache, event), col in CACHE_COLUMNS.items():
        if c.height and col in c.columns:
            rows.append(c.filter(pl.col(col) > 0).select(
                pl.col("rank").cast(pl.Int32), pl.col("compile_id").cast(pl.String), pl.lit(cache).alias("cache"),
                pl.lit(event).alias("event"), pl.col(col).cast(pl.Int64).alias("count"), pl.lit(TRACE).alias("source")))
    text = [e for e in cache_events(trace) if e["source"] == TEXT]
    if text:
        rows.append(
            pl.DataFrame([{k: e[k] for k in ("rank", "compile_id", "cache", "event")} for e in text],
                         schema={k: _CACHE_COUNTS_SCHEMA[k] for k in ("rank", "compile_id", "cache", "event")})
            .group_by("rank", "compile_id", "cache", "event", maintain_order=True)
            .agg(pl.len().cast(pl.Int64).alias("count"))
            .with_columns(pl.lit(TEXT).alias("source"))
        )
    if not rows:
        return pl.DataFrame(schema=_CACHE_COUNTS_SCHEMA)
    both = pl.concat([r.cast(_CACHE_COUNTS_SCHEMA).select(list(_CACHE_COUNTS_SCHEMA)) for r in rows])  # type: ignore[arg-type]
    return prefer_trace(both, ["rank", "compile_id", "cache"])


def cache_summary(trace: Trace) -> dict[str, Any]:
    """FX graph cache and AOTAutograd cache hits, misses and bypasses (cache_counts: the
    trace's, a text log's where the trace has none), with hit ratios; `from_text_log`: how
    many of them a text log gave, `text_log_by_compile` those per compile (rank, compile_id,
    cache, event, count). `inductor_graphs`: the graphs Inductor compiled where both caches are
    looked up (its `inductor_compile` spans, less AOTInductor's `compile_fx_aot`: torch 2.13
    compile_fx uses no cache in aot_mode); `not_logged`: the caches with no lookup recorded
    although there were such graphs: a cache turned off, a torch that does not log lookups, or
    compiles that ended before torch wrote theirs; the trace alone cannot tell which."""
    counts = cache_counts(trace)
    s = {col: 0 for col in CACHE_COLUMNS.values()}
    for cache, event, n in counts.group_by("cache", "event").agg(pl.col("count").sum()).iter_rows():
        s[CACHE_COLUMNS[(cache, event)]] += int(n)
    fx_total = s["fx_cache_hits"] + s["fx_cache_misses"]
    aot_total = s["aot_cache_hits"] + s["aot_cache_misses"]
    spans = trace.spans
    graphs = 0
    if spans.height:
        graphs = max(spans.filter(pl.col("name") == "inductor_compile").height - spans.filter(pl.col("name") == "compile_fx_aot").height, 0)
    logged = {"fx_graph": fx_total + s["fx_cache_bypasses"], "aot_autograd": aot_total + s["aot_cache_bypasses"]}
    return {
        "fx_graph_hits": s["fx_cache_hits"],
        "fx_graph_misses": s["fx_cache_misses"],
        "fx_graph_bypasses": s["fx_cache_bypasses"],
        "fx_graph_hit_ratio": round(s["fx_cache_hits"] / fx_total, 4) if fx_total else None,
        "aot_autograd_hits": s["aot_cache_hits"],
        "aot_autograd_misses": s["aot_cache_misses"],
        "aot_autograd_bypasses": s["aot_cache_bypasses"],
        "aot_autograd_hit_ratio": round(s["aot_cache_hits"] / aot_total, 4) if aot_total else None,
        "from_text_log": int(counts.filter(pl.col("source") == "text")["count"].sum()),
        "text_log_by_compile": counts.filter(pl.col("source") == "text").drop("source").to_dicts(),
        "inductor_graphs": graphs,
        "not_logged": [c for c, n in logged.items() if graphs and not n],
    }


# ------------------------------------------------------- compiles without a Dynamo frame
def frameless_groups(trace: Trace) -> list[dict[str, Any]]:
    """The compiles without a Dynamo frame (parsers.frameless), grouped by where they came from:
    per rank, the Dynamo compile whose compiled code called Inductor (`parent_compile_id`, from
    the records' Python stack: its backend made them, e.g. a piecewise backend's pieces
    compiled on first use), or the compiles of one code object one of which did
    (`parent_candidates`: which one is not in the log; one candidate where the parent is
    known), or, without either, the line that called Inductor; and whether they ran
    at run time. Each group: how many, their seconds (counted in COMPILE TIME), the pieces of the
    backend's graph with their counts, the compile ids, the evidence (first compile's file and
    metrics line). Most seconds first."""
    c = trace.compiles
    if "compile_kind" not in c.columns:
        return []
    c = c.filter(pl.col("compile_kind").fill_null("dynamo") != "dynamo").sort("file", "lineno")
    groups: dict[tuple, dict[str, Any]] = {}
    for r in c.iter_rows(named=True):
        parent = r.get("parent_compile_id")
        # several candidates: the compiled code of one code object ran, which compile's is unknown
        cands = list(r.get("parent_candidates") or []) if not parent else [parent]
        where = None if cands else (r.get("call_filename"), r.get("call_line"))
        k = (r["rank"], r["compile_kind"], bool(r.get("at_run_time")), parent, tuple(cands), where)
        g = groups.get(k)
        if g is None:
            g = groups[k] = {
                "rank": r["rank"], "compile_kind": r["compile_kind"], "at_run_time": bool(r.get("at_run_time")),
                "parent_compile_id": parent, "parent_candidates": cands,
                "call_filename": r.get("call_filename"), "call_line": r.get("call_line"),
                "call_code": r.get("call_code"), "count": 0, "seconds": 0.0, "pieces": {}, "compile_ids": [],
                "file": r["file"], "lineno": r.get("metrics_lineno") or r["lineno"],
            }
        g["count"] += 1
        g["seconds"] += r["total_time_s"] or 0.0
        g["compile_ids"].append(r["compile_id"])
        if r.get("graph_piece"):
            g["pieces"][r["graph_piece"]] = g["pieces"].get(r["graph_piece"], 0) + 1
    if not groups:
        return []
    parents = trace.compiles.filter(pl.col("compile_kind").fill_null("dynamo") == "dynamo")
    names = {(r["file"], r["compile_id"]): (r["function"], r["filename"], r["line"]) for r in parents.iter_rows(named=True)}
    out = []
    for g in groups.values():
        g["seconds"] = round(g["seconds"], 3)
        fn = names.get((g["file"], g["parent_candidates"][0])) if g["parent_candidates"] else None
        g["parent_function"], g["parent_filename"], g["parent_line"] = fn or (None, None, None)
        out.append(g)
    return sorted(out, key=lambda g: (-g["seconds"], g["rank"] if g["rank"] is not None else -1))


# ------------------------------------------------------------------ max-autotune: cost, winners
# The winner of an autotuning, by its choice's name: Inductor's templates are named for their
# backend (`triton_mm_16`, `cpp_CppMicroGemmFP32Vec_0`, `cuda_cutlass_gemm_3`, `decompose_k_mm`);
# an extern (ATen) kernel has the op's own name (`mm`, `addmm`, `bias_addmm`, `bmm`, `_int_mm`).
_TEMPLATE_KINDS = (("triton_", "Triton"), ("cpp_", "C++ template"), ("cuda_", "CUTLASS"), ("cutlass", "CUTLASS"),
                   ("rocm_", "CK"), ("ck_", "CK"), ("decompose_k", "decompose-K"), ("contiguous_", "contiguous mm"))
# an autotuning dominates when it took at least this share of the compile time
AUTOTUNE_DOMINANT_SHARE = 0.5


_CACHE_KEY_ARTIFACTS = ("fx_graph_cache_miss", "fx_graph_cache_hit", "aotautograd_cache_miss", "aotautograd_cache_hit")
_KEY_CONFIG = re.compile(r"inductor_config\[(max_autotune|max_autotune_gemm|triton\.cudagraphs|coordinate_descent_tuning)\]: (True|False)")


def autotune_config(trace: Trace) -> dict[str, bool] | None:
    """The max-autotune settings Inductor compiled with, as its cache keys list them (the
    components of the first FX graph / AOTAutograd cache record: `inductor_config[max_autotune]:
    True`, with torch.compile's mode applied, which compilation_metrics' `inductor_config` is
    not): `max_autotune`, `max_autotune_gemm`, `triton.cudagraphs`, `coordinate_descent_tuning`;
    None where no such record was logged. Read from the cache keys' components
    (traceview.analyze.cache_keys: the same lookups whichever way the trace was read)."""
    from parsers.cache_keys import CACHE_KEY_ARTIFACTS
    from traceview.analyze.cache_keys import lookups

    lks = lookups(trace)
    for name in _CACHE_KEY_ARTIFACTS:  # FX graph keys list Inductor's config; AOTAutograd's may not
        cache, state = CACHE_KEY_ARTIFACTS[name]
        of_name = [lk for lk in lks if lk.cache == cache and lk.state == state]
        if not of_name:
            continue
        first = min(of_name, key=lambda lk: (lk.file, lk.lineno))
        found = {m[1]: m[2] for c, (_, text) in first.components.items() if (m := _KEY_CONFIG.fullmatch(f"{c}: {text}"))}
        if found:
            return {k: v == "True" for k, v in found.items()}
    return None


def autotune_mode(config: dict[str, bool] | None) -> str | None:
    """torch.compile's mode the settings are (torch._inductor.list_mode_options): "max-autotune"
    (with CUDA graphs), "max-autotune-no-cudagraphs", or None (options set one by one, or not
    known)."""
    if not config or not config.get("max_autotune") or not config.get("coordinate_descent_tuning"):
        return None
    return "max-autotune" if config.get("triton.cudagraphs") else "max-autotune-no-cudagraphs"


def winner_kind(kernel: str | None) -> str | None:
    """Which backend an autotuning's winning choice is (`ATen` for an extern kernel); None
    while no winner was logged (the autotuning never ended)."""
    if not kernel:
        return None
    for prefix, kind in _TEMPLATE_KINDS:
        if kernel.startswith(prefix):
            return kind
    return "ATen"


def max_autotune(
    autotuning_rows: list[dict[str, Any]], total_s: float, unfinished: list[dict[str, Any]], phases: dict[str, float] | None = None,
    top: list[dict[str, Any]] | None = None, config: dict[str, bool] | None = None,
) -> dict[str, Any] | None:
    """What GEMM autotuning (max-autotune's `<op>_template_autotuning`) cost and bought, or None
    where nothing was autotuned. `autotuning_rows`: autotuning's rows (one per autotuned op);
    `total_s`: the compiles' seconds (COMPILE TIME's, from the compile account: an open compile
    up to the capture's last timestamp); `unfinished`: analyze.unfinished's entries (a compile
    cut in autotuning: its open autotuning); `phases`:
    phase_totals (the finished compiles' autotuning, as COMPILE TIME counts it); `top`:
    top_compiles' rows (a compile of at least 1 s that autotuning took at least
    AUTOTUNE_DOMINANT_SHARE of is `dominated`); `config`: autotune_config.

    Returns `seconds` (the finished compiles' autotuning seconds of `phases`, else each op's
    precompiling and benchmarking; plus, of each unfinished compile, its ended autotunings and
    the open one's precompiling and time up to the capture's last timestamp), `compile_s`
    (`total_s`), `dominant` (autotuning took at least AUTOTUNE_DOMINANT_SHARE of it, or of a
    compile (`dominated`), or a compile ended inside autotuning), `ops` (each op: rank, compile
    id, op, shape, dtypes, choices, seconds, winner, winner_kind, best_ms, best_triton_kernel,
    best_triton_ms; winner None while it never ended), `finished` / `open` (ops with and without a winner), `aten_won`
    (the finished ops ATen's kernel won), `triton_choices` (whether Triton templates competed:
    a GPU), `stopped_in` (the unfinished compiles cut inside autotuning: rank, compile id,
    part, op, shapes), `config` and `mode` (autotune_config, autotune_mode)."""
    if not autotuning_rows:
        return None
    ops = []
    for r in autotuning_rows:
        secs = float(r.get("precompile_s") or 0.0) + float(r.get("benchmark_s") or 0.0)
        kind = winner_kind(r.get("best_kernel"))
        ops.append({
            "rank": r.get("rank"), "compile_id": r.get("compile_id"), "op": r.get("op"), "shape": r.get("shape"),
            "dtypes": r.get("dtypes"), "choices": r.get("choices"), "seconds": round(secs, 3),
            "winner": r.get("best_kernel"), "winner_kind": kind, "best_ms": r.get("best_ms"),
            "best_triton_kernel": r.get("best_triton_kernel"), "best_triton_ms": r.get("best_triton_ms"),
        })
    stopped_in = [
        {"rank": u.get("rank"), "compile_id": u.get("compile_id"), "occurrence": u.get("occurrence"), "part": u.get("part"),
         "op": u["autotuning"]["op"], "shapes": u["autotuning"].get("shapes"),
         "running_s": u.get("running_s")}
        for u in unfinished if u.get("autotuning")
    ]
    done = (float(phases.get("autotuning") or 0.0) + float(phases.get("backward_autotuning") or 0.0)) if phases else None
    cut = sum(
        sum(float(d.get("seconds") or 0.0) for d in u["autotuning"].get("done") or [])
        + max(float(u["autotuning"].get("precompile_s") or 0.0), 0.0) + max(float(u["autotuning"].get("open_s") or 0.0), 0.0)
        for u in unfinished if u.get("autotuning")
    )
    seconds = (done if done is not None else sum(o["seconds"] for o in ops)) + cut
    compile_s = float(total_s or 0.0)  # the compile account's: an open compile counted to the capture's end
    finished = [o for o in ops if o["winner"]]
    dominated = [
        {"rank": t.get("rank"), "compile_id": t.get("compile_id"), "occurrence": t.get("occurrence"),
         "seconds": t.get("seconds"), "autotuning_s": t.get("autotuning_s")}
        for t in top or []
        if (t.get("seconds") or 0) >= 1.0 and (t.get("autotuning_s") or 0) >= AUTOTUNE_DOMINANT_SHARE * t["seconds"]
    ]
    return {
        "seconds": round(seconds, 3),
        "compile_s": round(compile_s, 3),
        "dominant": bool(stopped_in) or bool(dominated) or (compile_s > 0 and seconds >= AUTOTUNE_DOMINANT_SHARE * compile_s),
        "dominated": dominated,
        "ops": ops,
        "finished": len(finished),
        "open": len(ops) - len(finished),
        "aten_won": sum(1 for o in finished if o["winner_kind"] == "ATen"),
        "triton_choices": any(o["best_triton_kernel"] or (o["winner_kind"] == "Triton") for o in ops),
        "stopped_in": stopped_in,
        "config": config,
        "mode": autotune_mode(config),
    }
