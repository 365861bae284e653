"""Failure triage: each failed compile in the category people triage by, with the next step.

Failed compiles come from `compilation_metrics` (`fail_type` / `fail_reason`). A text log
without a trace still shows two kinds of failure: the recompile-limit warning and a graph break
that made Dynamo skip the whole frame; those are added when no trace row covers them.
"""

from __future__ import annotations

import re

import polars as pl

from parsers.compile_ids import sort_key

CATEGORIES = (
    "graph_break",
    "backend_compiler_failure",
    "recompile_limit",
    "internal_dynamo_error",
    "export_guard_data_dependent",
    "user_exception",
    "other",
)

# Order of failures in the report: what breaks the program or hides a torch bug first.
SEVERITY = (
    "backend_compiler_failure",
    "internal_dynamo_error",
    "export_guard_data_dependent",
    "recompile_limit",
    "graph_break",
    "other",
    "user_exception",
)

SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32,
    "compile_id": pl.String,
    "function": pl.String,
    "category": pl.String,
    "fail_type": pl.String,
    "reason": pl.String,
    "headline": pl.String,
    "gb_id": pl.String,
    "filename": pl.String,
    "line": pl.Int32,
    "next_step": pl.String,
    "source": pl.String,
    "file": pl.String,
    "lineno": pl.Int64,
}

_MINIFY = (
    "minify: TORCHDYNAMO_REPRO_AFTER={after} TORCHDYNAMO_REPRO_LEVEL=2 python <script> writes "
    "torch_compile_debug/run_*/minifier/minifier_launcher.py, run it for a small repro "
    "(TORCHDYNAMO_REPRO_LEVEL=4 when the compiled code gives wrong results instead)"
)

NEXT_STEPS: dict[str, str] = {
    "graph_break": (
        "Dynamo gave up on the frame and ran it eagerly: fix the construct at the user line "
        "(the graph-break hint says how); TORCH_LOGS=graph_breaks prints each break with its "
        "user stack, fullgraph=True stops at the first."
    ),
    "backend_compiler_failure": (
        "Ablate the backend: torch.compile(backend='eager') (Dynamo only), then 'aot_eager' "
        "(+AOTAutograd), then 'aot_eager_decomp_partition' (+decompositions, partitioner), then "
        "the real backend; the first that fails holds the bug (`traceview ablate -- python "
        "<script>` runs this ladder). "
        + _MINIFY.format(after="dynamo")
        + "; REPRO_AFTER=aot when only Inductor fails."
    ),
    "recompile_limit": (
        "The frame hit torch._dynamo.config.recompile_limit and runs eagerly from now on: fix "
        "the cause in the recompile storm of this function (TORCH_LOGS=recompiles_verbose "
        "lists every failed guard); raise the limit only if the variants are expected."
    ),
    "internal_dynamo_error": (
        "An error inside Dynamo: rerun with TORCHDYNAMO_VERBOSE=1 TORCH_LOGS=+dynamo for the "
        "full traceback; " + _MINIFY.format(after="dynamo") + "; report it to pytorch/pytorch "
        "(torch._dynamo.config.suppress_errors=True runs such frames eagerly meanwhile)."
    ),
    "export_guard_data_dependent": (
        "A guard on a data-dependent value (or an export constraint) failed: TORCH_LOGS=+dynamic "
        "shows where guards are added, TORCHDYNAMO_EXTENDED_DEBUG_GUARD_ADDED='<expr>' the stack "
        "of one; add torch._check(...) / torch._check_is_size(...) on the value or mark it "
        "unbacked; for export, torch.export.draft_export lists every such issue."
    ),
    "user_exception": (
        "The compiled function raised an exception of its own (torch records it as 'Observed "
        "exception'); the frame ran eagerly and the exception reached the caller. Fix the "
        "exception at the user line; nothing to tune in torch.compile."
    ),
    "other": (
        "Rerun with TORCHDYNAMO_VERBOSE=1 TORCH_LOGS=+dynamo,graph_breaks,recompiles for the "
        "full story of this compile; " + _MINIFY.format(after="dynamo") + "."
    ),
}

_INTERNAL = ("InternalTorchDynamoError", "AssertionError", "TorchRuntimeError", "KeyError", "AttributeError")
_DATA_DEP = (
    "GuardOnDataDependentSymNode",
    "DataDependentOutputException",
    "ConstraintViolationError",
    "UserError",
    "PendingUnbackedSymbolNotFound",
)
_GB = re.compile(r"\b(gb\d{4})\b")
_LOOP_GB = "gb7000"
_BACKEND = re.compile(r"backend='([^']+)'")


def categorize(fail_type: str | None, fail_reason: str | None) -> str:
    """The triage category of one failure (see CATEGORIES)."""
    ft = fail_type or ""
    reason = (fail_reason or "").lower()
    if (
        "recompile limit" in reason
        or "recompile_limit" in reason
        or "cache_size_limit" in reason
        or "RecompileLimit" in ft
        or "CacheLimitExceeded" in ft
    ):
        return "recompile_limit"
    if (
        "BackendCompilerFailed" in ft
        or "InductorError" in ft  # torch 2.13 raises Inductor's failures as InductorError
        or reason.startswith("backend='")
        or "backend compiler failed" in reason
    ):
        return "backend_compiler_failure"
    if "observed exception" in reason or "ObservedException" in ft or "ObservedUserStopIteration" in ft:
        return "user_exception"
    if any(t in ft for t in _DATA_DEP):
        return "export_guard_data_dependent"
    if ft == "Unsupported" or ft.endswith(".Unsupported") or "UncapturedHigherOrderOp" in ft:
        return "graph_break"
    if any(t in ft for t in _INTERNAL):
        return "internal_dynamo_error"
    if "data-dependent" in reason or "data dependent" in reason or ("guard" in reason and "export" in reason):
        return "export_guard_data_dependent"
    if "graph break" in reason:
        return "graph_break"
    return "other"


def headline(reason: str | None, width: int = 300) -> str:
    """The first line of a failure reason; a first line that ends with ':' (`backend='x'
    raised:`) takes the next line with it."""
    lines = [s.strip() for s in (reason or "").strip().split("\n") if s.strip()]
    if not lines:
        return ""
    out = lines[0]
    if out.endswith(":") and len(lines) > 1:
        out = f"{out} {lines[1]}"
    return out if len(out) <= width else out[: width - 1] + "…"


def next_step(category: str, fail_type: str | None, reason: str | None, *, in_loop: bool = False) -> str:
    """What to do next for one failure (NEXT_STEPS, made specific where the reason allows)."""
    step = NEXT_STEPS[category]
    if category == "graph_break" and in_loop:
        step = (
            "The break is inside a loop, where Dynamo cannot resume, so the whole frame ran "
            "eagerly: move the break out of the loop or remove it, or compile the loop body on "
            "its own; TORCH_LOGS=graph_breaks prints each break with its user stack."
        )
    if category == "backend_compiler_failure" and "InductorError" in (fail_type or ""):
        step = (
            "Inductor failed while Dynamo and AOTAutograd did not: `traceview repro` on this compile "
            "writes Inductor's input graph (fx_graph_runnable) as a script; backend='aot_eager_decomp_partition' "
            "passing and 'inductor' failing confirms it (`traceview ablate -- python <script>` runs the "
            "ladder). " + _MINIFY.format(after="aot") + "."
        )
    if category == "backend_compiler_failure":
        m = _BACKEND.search(reason or "")
        if m and m.group(1) not in ("inductor", "aot_eager", "eager", "aot_eager_decomp_partition"):
            step = (
                f"'{m.group(1)}' is a custom backend: if backend='eager' and 'aot_eager' compile "
                f"this function, the bug is in '{m.group(1)}' (debug it on the FX graph it "
                f"receives). " + _MINIFY.format(after="dynamo")[0].upper() + _MINIFY.format(after="dynamo")[1:] + "."
            )
    if category == "graph_break":
        m = _GB.search(reason or "")
        if m:
            step += f" {m.group(1)}: https://meta-pytorch.github.io/compile-graph-break-site/gb/{m.group(1)}.html"
    return step


def failures(
    compiles: pl.DataFrame,
    *,
    limit_hits: pl.DataFrame | None = None,
    graph_breaks: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per failed compile: category and next step, keeping rank/compile_id/file/lineno.

    `limit_hits` and `graph_breaks` (the fact tables) add failures a text log shows for
    compiles the trace does not have: recompile-limit warnings and skipped frames."""
    failed = compiles.filter(pl.col("status") == "failed")
    in_loop: set[tuple] = set()
    if graph_breaks is not None and graph_breaks.height:
        loops = graph_breaks.filter(
            (pl.col("inner_gb_id") == _LOOP_GB) | pl.col("inner_reason").fill_null("").str.contains("(?i)loop")
        )
        in_loop = {(r, c) for r, c in loops.select("rank", "compile_id").iter_rows()}
    rows = []
    for r in failed.iter_rows(named=True):
        cat = categorize(r["fail_type"], r["fail_reason"])
        m = _GB.search(r["fail_reason"] or "")
        rows.append(
            {
                "rank": r["rank"],
                "compile_id": r["compile_id"],
                "function": r["function"],
                "category": cat,
                "fail_type": r["fail_type"],
                "reason": r["fail_reason"],
                "headline": headline(r["fail_reason"]),
                "gb_id": m.group(1) if m else None,
                "filename": r["fail_user_filename"] or r["filename"],
                "line": r["fail_user_line"] if r["fail_user_line"] is not None else r["line"],
                "next_step": next_step(cat, r["fail_type"], r["fail_reason"], in_loop=(r["rank"], r["compile_id"]) in in_loop),
                "source": "trace",
                "file": r["file"],
                "lineno": r["metrics_lineno"] if r["metrics_lineno"] is not None else r["lineno"],
            }
        )
    known = {(r["rank"], r["compile_id"]) for r in compiles.select("rank", "compile_id").iter_rows(named=True)}
    if limit_hits is not None and limit_hits.height:
        for r in limit_hits.filter(pl.col("source") != "trace").sort("file", "lineno").iter_rows(named=True):
            if (r["rank"], r["compile_id"]) in known:
                continue
            known.add((r["rank"], r["compile_id"]))
            reason = f"hit config.{r['limit_name'] or 'recompile_limit'} ({r['limit']})"
            if r.get("last_reason"):
                reason += f"\nlast reason: {r['last_reason']}"
            rows.append(
                {
                    "rank": r["rank"],
                    "compile_id": r["compile_id"],
                    "function": r["function"],
                    "category": "recompile_limit",
                    "fail_type": None,
                    "reason": reason,
                    "headline": headline(reason),
                    "gb_id": None,
                    "filename": r["filename"],
                    "line": r["line"],
                    "next_step": NEXT_STEPS["recompile_limit"],
                    "source": "text",
                    "file": r["file"],
                    "lineno": r["lineno"],
                }
            )
    if graph_breaks is not None and graph_breaks.height:
        skipped = graph_breaks.filter((pl.col("source") != "trace") & pl.col("frame_skipped").fill_null(False))
        for r in skipped.sort("file", "lineno").iter_rows(named=True):
            if (r["rank"], r["compile_id"]) in known:
                continue
            known.add((r["rank"], r["compile_id"]))
            reason = r["reason"] or r["reason_line"] or ""
            cat = categorize("Unsupported", reason)
            rows.append(
                {
                    "rank": r["rank"],
                    "compile_id": r["compile_id"],
                    "function": r["skipped_function"] or r["function"],
                    "category": cat,
                    "fail_type": None,
                    "reason": reason,
                    "headline": headline(reason),
                    "gb_id": r["gb_id"],
                    "filename": r["filename"],
                    "line": r["line"],
                    "next_step": next_step(
                        cat, None, f"{reason} {r['gb_id'] or ''}", in_loop=(r["rank"], r["compile_id"]) in in_loop
                    ),
                    "source": "text",
                    "file": r["file"],
                    "lineno": r["lineno"],
                }
            )
    order = {c: i for i, c in enumerate(SEVERITY)}
    rows.sort(key=lambda r: (order[r["category"]], r["rank"] if r["rank"] is not None else -1, sort_key(r["compile_id"])))
    return pl.DataFrame(rows, schema=SCHEMA)
