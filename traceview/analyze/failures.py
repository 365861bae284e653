"""Failure triage: each failed compile in the category people triage by, with the next step."""

from __future__ import annotations

import polars as pl

CATEGORIES = (
    "graph_break",
    "backend_compiler_failure",
    "recompile_limit",
    "internal_dynamo_error",
    "export_guard_data_dependent",
    "user_exception",
    "other",
)

NEXT_STEPS: dict[str, str] = {
    "graph_break": (
        "Fix or avoid the unsupported construct at the user line (the hint says how); "
        "TORCH_LOGS=graph_breaks prints every break with its user stack, and "
        "torch.compile(fullgraph=True) stops at the first one."
    ),
    "backend_compiler_failure": (
        "Ablate the backend: retry with torch.compile(backend='eager'), then 'aot_eager', then "
        "'aot_eager_decomp_partition' to find the failing stage; minify with "
        "TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4 python <script> and run the "
        "repro it writes (TORCHDYNAMO_REPRO_AFTER=dynamo if 'aot_eager' fails too)."
    ),
    "recompile_limit": (
        "The frame hit torch._dynamo.config.recompile_limit and now runs eagerly: see the "
        "recompile storm for this function (TORCH_LOGS=recompiles_verbose lists every failed "
        "guard) and remove the cause before raising the limit."
    ),
    "internal_dynamo_error": (
        "An internal error in Dynamo: rerun with TORCHDYNAMO_VERBOSE=1 TORCH_LOGS=+dynamo for "
        "the full traceback; minify with TORCHDYNAMO_REPRO_AFTER=dynamo python <script> and "
        "report the repro to pytorch/pytorch."
    ),
    "export_guard_data_dependent": (
        "A guard on a data-dependent value or an export constraint failed: TORCH_LOGS=+dynamic "
        "shows where the guard was added; use torch._check()/torch._check_is_size() or mark "
        "the value unbacked; for export, torch.export.draft_export lists every such issue."
    ),
    "user_exception": (
        "The compiled function raised an exception of its own; Dynamo ran the frame eagerly "
        "and the exception reached the caller. Fix the exception; nothing to tune in compile."
    ),
    "other": (
        "Rerun with TORCHDYNAMO_VERBOSE=1 TORCH_LOGS=+dynamo,graph_breaks,recompiles for the "
        "full story of this compile."
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


def categorize(fail_type: str | None, fail_reason: str | None) -> str:
    """The triage category of one failure (see CATEGORIES)."""
    ft = fail_type or ""
    reason = (fail_reason or "").lower()
    if "recompile limit" in reason or "recompile_limit" in reason or "cache_size_limit" in reason:
        return "recompile_limit"
    if "BackendCompilerFailed" in ft or "backend='" in reason or "backend compiler failed" in reason:
        return "backend_compiler_failure"
    if any(t in ft for t in _DATA_DEP) or "data-dependent" in reason or "data dependent" in reason:
        return "export_guard_data_dependent"
    if "observed exception" in reason or "ObservedException" in ft or "ObservedUserStopIteration" in ft:
        return "user_exception"
    if ft == "Unsupported" or ft.endswith(".Unsupported") or "graph break" in reason:
        return "graph_break"
    if any(t in ft for t in _INTERNAL):
        return "internal_dynamo_error"
    return "other"


def failures(compiles: pl.DataFrame) -> pl.DataFrame:
    """One row per failed compile: category and next step, keeping rank/compile_id/file/lineno."""
    failed = compiles.filter(pl.col("status") == "failed")
    if failed.height == 0:
        return pl.DataFrame(
            schema={
                "rank": pl.Int32,
                "compile_id": pl.String,
                "function": pl.String,
                "category": pl.String,
                "fail_type": pl.String,
                "reason": pl.String,
                "filename": pl.String,
                "line": pl.Int32,
                "next_step": pl.String,
                "file": pl.String,
                "lineno": pl.Int64,
            }
        )
    cats = [categorize(t, r) for t, r in failed.select("fail_type", "fail_reason").iter_rows()]
    return failed.select(
        "rank",
        "compile_id",
        "function",
        pl.Series("category", cats, dtype=pl.String),
        "fail_type",
        pl.col("fail_reason").alias("reason"),
        pl.coalesce("fail_user_filename", "filename").alias("filename"),
        pl.coalesce("fail_user_line", "line").alias("line"),
        pl.Series("next_step", [NEXT_STEPS[c] for c in cats], dtype=pl.String),
        "file",
        pl.coalesce("metrics_lineno", "lineno").alias("lineno"),
    )
