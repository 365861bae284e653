"""Failure triage: each failed compile in the category people triage by, with the next step.

Failed compiles come from `compilation_metrics` (`fail_type` / `fail_reason`). A text log
without a trace still shows three kinds of failure: the recompile-limit warning, a graph break
that made Dynamo skip the whole frame, and the `WON'T CONVERT` warning of
`suppress_errors=True`; those are added when no trace row covers them.

The categories are the ones PyTorch's developers triage by (graph break / Unsupported, backend
compiler failure, recompile limit, accuracy, internal Dynamo error, export and guard errors),
plus the user's own errors torch reports as compile failures: a fake-tensor error
(TorchRuntimeError "RuntimeError when making fake tensor call": the code fails in eager too), a
constraint violation (a dim marked dynamic that the code specializes), an exception the
compiled function raised. Each row says how sure it is (`certainty`): `certain` when a record
says so, `likely` when it is read from indirect evidence (`evidence` says which).
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from parsers.code_location import is_torch
from parsers.compile_ids import TEXT_START, sort_key, text_occurrence_expr
from parsers.tracebacks import tracebacks_from_text, uncaught_from_text, wont_convert_from_text
from traceview.analyze.registry import config_fix
from traceview.trace import Trace

CATEGORIES = (
    "graph_break",
    "compile_worker_died",
    "backend_compiler_failure",
    "recompile_limit",
    "accuracy",
    "internal_dynamo_error",
    "user_error",
    "constraint_violation",
    "export_guard_data_dependent",
    "export_data_dependent",
    "user_exception",
    "other",
)

# Order of failures in the report: what breaks the program or hides a torch bug first.
SEVERITY = (
    "export_data_dependent",
    "accuracy",
    "compile_worker_died",
    "backend_compiler_failure",
    "internal_dynamo_error",
    "user_error",
    "constraint_violation",
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
    "code_filename": pl.String,  # the compiled code object's file and first line (filename/line:
    "code_line": pl.Int32,  # where it failed, the user's line where known)
    "next_step": pl.String,
    "source": pl.String,
    "file": pl.String,
    "lineno": pl.Int64,
    "occurrence": pl.Int32,
    "attempts": pl.Int32,
    "certainty": pl.String,
    "evidence": pl.String,
    "testing_only_config": pl.String,  # torch's test-only settings the compile's config turned on
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
    "compile_worker_died": (
        "The compile was lost to the host killing one of Inductor's compile worker processes (as the "
        "kernel's OOM killer does), not to the model: check the host's memory limits and the OOM killer "
        "(dmesg, the job's memory limit; compile workers hold memory of their own); compile with fewer "
        "workers (TORCHINDUCTOR_COMPILE_THREADS=4, say), or with TORCHINDUCTOR_COMPILE_THREADS=1 to compile "
        "in-process (no worker to lose; an error in the compile itself then shows with its own traceback)."
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
    "export_data_dependent": (
        "torch.export traces with fake tensors, which have shapes but no values: a Python `if` on a "
        "tensor (or on `.item()`, or on a size only the data decides, like torch.nonzero's) cannot be "
        "captured. Rewrite it as data: torch.cond(pred, true_fn, false_fn, (x,)) keeps both branches "
        "in the graph, torch.where(cond, a, b) selects elementwise; where the value is only checked, "
        "torch._check(...) tells export what holds. torch.export.draft_export(model, args) lists every "
        "such problem of the model in one run, each with its line. Your code runs fine in eager: not a "
        "torch.compile or Dynamo bug."
    ),
    "accuracy": (
        "The compiled code gives wrong results: run the minifier script torch wrote "
        "(minifier_launcher.py, its path is in the log) for a small repro; "
        "TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4 python <script> checks accuracy "
        "after AOTAutograd (Inductor), REPRO_AFTER=dynamo for a custom backend."
    ),
    "user_error": (
        "A bug in your code, not in torch.compile: Dynamo ran the operation on fake tensors and "
        "it failed, so it fails in eager too (check by removing torch.compile or with "
        "torch.compiler.set_stance('force_eager')). Fix the shapes/dtypes at the user line."
    ),
    "constraint_violation": (
        "A dim you marked dynamic (mark_dynamic, or an export Dim) was specialized to a constant "
        "by the code at the user line: if you're using mark_dynamic, remove it or use "
        "torch._dynamo.maybe_mark_dynamic; for export, use Dim.AUTO / Dim.STATIC or apply the "
        "suggested fix the message gives; or remove the branch on the size."
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
    "UserError",
    "PendingUnbackedSymbolNotFound",
)
_FAKE_TENSOR = "runtimeerror when making fake tensor call"
_FAKE_SHAPES = re.compile(r"size=\(([^)]*)\)")
_FAKE_GOT = re.compile(r"got (\w+)\((['\"])(.*?)\2\)", re.S)
_USER_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)$', re.M)
_YOU_MARKED = re.compile(r"^\s*- (You marked .*)$", re.M)
_SUGGESTED = re.compile(r"Suggested fixes:\s*\n((?:[ \t]+\S.*\n?)+)")
_GB = re.compile(r"\b(gb\d{4})\b")
# torch's words for control flow or a concrete value that needs a tensor's data (torch 2.13:
# symbolic_convert.py gb0170 "Data-dependent branching" and its "with non-constant __bool__"
# form; symbolic_shapes.py `_make_data_dependent_error`: "Could not guard on data-dependent
# expression", "Could not extract specialized integer from data-dependent expression"; older
# Dynamo: "Dynamic control flow is not supported")
_DATA_DEPENDENT = re.compile(
    r"Data-dependent branching|Could not guard on data-dependent expression|"
    r"Could not extract specialized integer from data-dependent expression|Dynamic control flow is not supported",
    re.I,
)
# a frame of torch.export itself (torch/export/, torch/_export/)
EXPORT_PATH = re.compile(r"torch[/\\]_?export[/\\]")
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
        or "RecompileError" in ft  # torch._dynamo.config.error_on_recompile=True
    ):
        return "recompile_limit"
    if "AccuracyError" in (fail_reason or ""):
        return "accuracy"
    if worker_died(fail_reason):
        return "compile_worker_died"
    if (
        "BackendCompilerFailed" in ft
        or "InductorError" in ft  # torch 2.13 raises Inductor's failures as InductorError
        or reason.startswith("backend='")
        or "backend compiler failed" in reason
    ):
        return "backend_compiler_failure"
    if "observed exception" in reason or "ObservedException" in ft or "ObservedUserStopIteration" in ft:
        return "user_exception"
    if "accuracy failed" in reason:
        return "accuracy"
    if ("TorchRuntimeError" in ft or not ft) and reason.startswith(_FAKE_TENSOR):
        return "user_error"
    if "ConstraintViolationError" in ft or reason.startswith("constraints violated"):
        return "constraint_violation"
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


# torch's words when a compile worker process died under a compile (torch/_inductor/async_compile.py
# `wait`: a Triton/C++ kernel's worker; concurrent.futures' BrokenProcessPool: the SubprocPool's
# worker, e.g. TORCHINDUCTOR_FX_COMPILE_MODE=SUBPROCESS; subproc_pool.py: the pool's sidecar gone)
_WORKER_DIED = re.compile(
    r"A compilation subprocess exited unexpectedly|BrokenProcessPool|"
    r"A process in the process pool was terminated abruptly|A child process terminated abruptly, the process pool is not usable|"
    r"Attempting to use a closed pool"
)


def worker_died(reason: str | None) -> bool:
    """Whether a failure's message is torch's for a compile worker process that died (see _WORKER_DIED)."""
    return bool(_WORKER_DIED.search(reason or ""))


def _how_far(r: dict[str, Any]) -> str:
    """How far a compile lost to a dead worker got, from its compilation_metrics' times."""

    def f(key: str) -> float:
        v = r.get(key)
        return float(v) if isinstance(v, (int, float)) else 0.0

    dynamo, backend, inductor = f("dynamo_time_s"), f("backend_compile_time_s"), f("inductor_compile_time_s")
    if not inductor:
        return ""
    aot = max(backend - inductor, 0.0)
    return (f"Lost after Dynamo {dynamo:.2f}s, AOTAutograd {aot:.2f}s and {inductor:.2f}s in Inductor, whose "
            "worker died. ")
def data_dependent(fail_type: str | None, reason: str | None) -> bool:
    """Whether a failure is torch's data-dependent error: a branch or a concrete value that
    needs a tensor's data (see _DATA_DEPENDENT; GuardOnDataDependentSymNode whatever its text)."""
    return bool(_DATA_DEPENDENT.search(reason or "")) or "GuardOnDataDependentSymNode" in (fail_type or "")


def user_frame_of(reason: str | None) -> tuple[str, int, str, str] | None:
    """The innermost frame of the user's code a torch error names in its message ("User
    stack:" / "from user code:"): (filename, line, function, source line); None without one."""
    frames = [m for m in _USER_FRAME.finditer(reason or "") if not is_torch(m.group(1))]
    if not frames:
        return None
    m = frames[-1]
    return m.group(1), int(m.group(2)), m.group(3), m.group(4).strip()


def detail_of(category: str, reason: str | None) -> str | None:
    """What the message says that matters for its category: the fake tensors' shapes and
    the eager error of a user error; the `You marked …` line and the suggested fixes of a
    constraint violation."""
    text = reason or ""
    if category == "user_error":
        shapes = _FAKE_SHAPES.findall(text)
        got = _FAKE_GOT.search(text)
        parts = []
        if shapes:
            parts.append("shapes " + " and ".join(f"[{s}]" for s in shapes))
        if got:
            parts.append(f"{got.group(1)}: {got.group(3)}")
        return "; ".join(parts) or None
    if category == "constraint_violation":
        parts = [m.group(1).strip() for m in _YOU_MARKED.finditer(text)]
        sug = _SUGGESTED.search(text)
        if sug:
            parts.append("suggested fix: " + "; ".join(x.strip() for x in sug.group(1).splitlines() if x.strip()))
        return " ".join(parts) or None
    return None


def fullgraph_likely(fail_type: str | None, fail_reason: str | None, graph_breaks: int | None, attempts: int | None) -> bool:
    """Whether a failed compile is a graph break under fullgraph=True (indirect: Unsupported
    with no dynamo_graph_break_reason artifact and no restart attempt; without fullgraph,
    Dynamo logs the break and restarts, or skips the frame with a logged reason)."""
    return (
        categorize(fail_type, fail_reason) == "graph_break"
        and not (graph_breaks or 0)
        and (attempts or 1) <= 1
    )


_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Warning)\b.*")
_CXX_ERROR = re.compile(r"^(?P<file>\S+?):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<msg>.+)$")
_CXX_SOURCE = re.compile(r"^\d+ \|\s*(?P<code>.*\S)")
_PATH = re.compile(r"(?:/[^\s/:]+)+/([^\s/:]+)")


def headline(reason: str | None, width: int = 300) -> str:
    """The decisive line of a failure reason: its first line; a first line that ends with ':'
    (`backend='x' raised:`) takes the next line with it; one that only wraps the error
    (`Failed to import <module>` then `SyntaxError: ...`, `C++ compile error` then the
    compiler's output) takes the error that decides it: the exception line, the compiler's
    first `error:` line with the source line it quotes. Paths in the added part are cut to
    their file name."""
    lines = [s.strip() for s in (reason or "").strip().split("\n") if s.strip()]
    if not lines:
        return ""
    out = lines[0]
    if out.endswith(":") and len(lines) > 1:
        out = f"{out} {lines[1]}"
    elif "Failed to import" in out and len(lines) > 1 and _EXC_LINE.match(lines[1]):
        out = _PATH.sub(lambda m: m.group(1), out) + f": {lines[1]}"
    elif "C++ compile error" in out:
        for i, ln in enumerate(lines):
            if m := _CXX_ERROR.match(ln):
                src = next((c["code"] for x in lines[i + 1 : i + 3] if (c := _CXX_SOURCE.match(x))), None)
                where = f"{m['file'].rsplit('/', 1)[-1]}:{m['line']}"
                out = f"{out}: {where}: error: {m['msg']}" + (f" (`{src}`)" if src else "")
                break
    return out if len(out) <= width else out[: width - 1] + "…"


def next_step(category: str, fail_type: str | None, reason: str | None, *, in_loop: bool = False) -> str:
    """What to do next for one failure (NEXT_STEPS, made specific where the reason allows)."""
    step = NEXT_STEPS[category]
    if category == "recompile_limit" and "RecompileError" in (fail_type or ""):
        step = (
            "torch._dynamo.config.error_on_recompile=True turned this recompile into an error: "
            "the reason names the guard that failed; fix that cause (see the recompile of this "
            "function), or turn error_on_recompile off if the recompile is expected."
        )
    if category == "graph_break" and in_loop:
        fix = config_fix("\n".join(ln for ln in (reason or "").split("\n") if ln.strip().startswith("Hint:")))
        step = (
            (f"{fix} (torch's hint) removes this break. Otherwise: " if fix else "")
            + "The break is inside a loop, where Dynamo cannot resume, so the whole frame ran "
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


def failures(trace: Trace, *, caught: bool = True, uncaught: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per failed compile (SCHEMA): category and next step, keeping
    rank/compile_id/file/lineno, most severe first.

    The trace's failed compiles, then what a text log shows for compiles the trace does not
    have: recompile-limit warnings and skipped frames (the `limit_hits` and
    `graph_break_records` fact tables). With `caught` (the default) also the errors that did
    not stop the program: `WON'T CONVERT` warnings (suppress_errors=True) and the torch.compile errors the program
    caught and printed (each given the compile id, and its occurrence, of the last log record
    before it); `traceview diff` compares failures without them. `uncaught`: the trace's
    parsers.tracebacks.uncaught_from_text when the caller has it already (crash_findings
    reads it too; it is not cheap on a long capture)."""
    wont_convert = printed = None
    if caught:
        if uncaught is None:
            uncaught = uncaught_from_text(trace.other_lines, trace.log_records)
        printed = tracebacks_from_text(trace.other_lines).join(
            uncaught.select("file", "lineno"), on=["file", "lineno"], how="anti"
        )
        wont_convert = wont_convert_from_text(trace.log_records)
    exported = export_files(trace)
    rows = _failure_rows(
        trace.compiles,
        limit_hits=trace.limit_hits,
        graph_breaks=trace.graph_break_records,
        wont_convert=wont_convert,
        printed=printed,
        log_records=trace.log_records if caught else None,
        exported=exported,
    )
    partial = _partial_exports(trace, exported)
    if not partial:
        return rows
    return pl.concat([rows, pl.DataFrame(partial, schema=SCHEMA)]).sort(
        pl.col("category").replace_strict({c: i for i, c in enumerate(SEVERITY)}, return_dtype=pl.Int32), maintain_order=True
    )


def export_files(trace: Trace) -> set[str]:
    """The trace files that ran torch.export: a failed Dynamo compile whose compilation_metrics
    named no code object (strict export writes its failure with compile id and co_name null,
    parsers.frameless `attach_unnamed_metrics`), strict export's root module
    (`L['self']._modules['_export_root']` in a describe_source), or a Python stack through
    torch.export's own files (its file names are interned by `str` records: non-strict export,
    draft_export)."""
    out: set[str] = set()
    c = trace.compiles
    if c.height:
        nameless = c.filter((pl.col("status") == "failed") & pl.col("function").is_null() & (pl.col("compile_kind") == "dynamo"))
        out |= set(nameless["file"].to_list())
    ev = trace.index_events()
    if ev.height:
        # the two kinds first: the patterns are searched in their records only, not in every event
        marks = ev.filter(pl.col("kind").is_in(["describe_source", "str"])).filter(
            ((pl.col("kind") == "describe_source") & pl.col("metadata").str.contains("_export_root", literal=True))
            | ((pl.col("kind") == "str") & pl.col("metadata").str.contains(EXPORT_PATH.pattern))
        )
        out |= set(marks["file"].to_list())
    return out


def _partial_exports(trace: Trace, exported: set[str]) -> list[dict]:
    """Non-strict exports that stopped partway, from the trace alone: torch logs the graph
    make_fx had traced (`make_fx_fail_partial`, no compile id) and neither compilation_metrics
    nor the exception (that is in stderr). Where the export made a data-dependent value
    (create_unbacked_symbol with the user's line) since the previous such record, that is very
    likely what stopped it: a branch or a concrete value on it (category export_data_dependent,
    `likely`); otherwise the export failed for a reason the trace does not hold (`other`)."""
    from parsers.facts import unbacked_symbols_from_trace

    ev = trace.index_events()
    if ev.is_empty() or not exported:
        return []
    parts = ev.filter(
        (pl.col("kind") == "artifact") & (pl.col("name") == "make_fx_fail_partial") & pl.col("compile_id").is_null()
        & pl.col("file").is_in(list(exported))
    ).sort("file", "lineno")
    if parts.height == 0:
        return []
    unb = unbacked_symbols_from_trace(ev)
    unb = unb.filter(pl.col("compile_id").is_null() & (pl.col("created_by") == "export")) if unb.height else unb
    rows: list[dict] = []
    prev: dict[str, int] = {}
    for p in parts.iter_rows(named=True):
        since = prev.get(p["file"], 0)
        prev[p["file"]] = p["lineno"]
        mine = unb.filter((pl.col("file") == p["file"]) & (pl.col("lineno") > since) & (pl.col("lineno") < p["lineno"])) if unb.height else unb
        row = {
            "rank": p["rank"], "compile_id": None, "function": None, "fail_type": None, "gb_id": None,
            "filename": None, "line": None, "code_filename": None, "code_line": None, "source": "trace_partial",
            "file": p["file"], "lineno": p["lineno"], "occurrence": None, "attempts": None, "certainty": "likely",
            "testing_only_config": None,
        }
        if mine.height:
            last = mine.sort("lineno").row(-1, named=True)
            syms = ", ".join(dict.fromkeys(mine["symbol"].to_list()))
            base = re.split(r"[/\\]", last["user_file"] or "?")[-1]
            where = f"{base}:{last['user_line']}" if last["user_line"] is not None else "an unknown line"
            code = f" `{last['user_code'].strip()}`" if last.get("user_code") else ""
            reason = (
                f"Non-strict torch.export stopped tracing right after it made the data-dependent value {syms} "
                f"({last['op'] or 'a value read from a tensor'}) at {where}{code}: the graph traced so far "
                "(make_fx_fail_partial) ends there, and the trace logs no exception (it is in the program's stderr)"
            )
            row.update({
                "function": last["user_function"], "category": "export_data_dependent", "reason": reason,
                "headline": headline(reason), "filename": last["user_file"], "line": last["user_line"],
                "next_step": NEXT_STEPS["export_data_dependent"],
                "evidence": (f"make_fx_fail_partial with no compilation_metrics, after create_unbacked_symbol {syms} at {where}; "
                             "the exception itself is not in the trace"),
            })
        else:
            reason = ("Non-strict torch.export stopped tracing (make_fx_fail_partial: the graph traced so far); "
                      "the trace logs no exception (it is in the program's stderr)")
            row.update({
                "category": "other", "reason": reason, "headline": headline(reason),
                "next_step": ("Read the exception in the program's stderr (TORCH_LOGS text or the traceback); "
                              "torch.export.draft_export(model, args) lists every problem of the export in one run."),
                "evidence": "make_fx_fail_partial with no compilation_metrics; the exception is not in the trace",
            })
        rows.append(row)
    return rows


def _failure_rows(
    compiles: pl.DataFrame,
    *,
    limit_hits: pl.DataFrame | None = None,
    graph_breaks: pl.DataFrame | None = None,
    wont_convert: pl.DataFrame | None = None,
    printed: pl.DataFrame | None = None,
    log_records: pl.DataFrame | None = None,
    exported: set[str] | None = None,
) -> pl.DataFrame:
    """`failures` over the tables: `wont_convert` is parsers.tracebacks.wont_convert_from_text,
    `printed` parsers.tracebacks.tracebacks_from_text without the uncaught traceback,
    `exported` the trace files that ran torch.export (`export_files`): a data-dependent failure
    there is export's (export_data_dependent), not a graph break under fullgraph."""
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
        step = next_step(cat, r["fail_type"], r["fail_reason"], in_loop=(r["rank"], r["compile_id"]) in in_loop)
        certainty, evidence = "certain", None
        filename = r["fail_user_filename"] or r["filename"]
        line = r["fail_user_line"] if r["fail_user_line"] is not None else r["line"]
        function = r["function"]
        uf = user_frame_of(r["fail_reason"])
        if r["fail_user_line"] is None and uf is not None:
            filename, line = uf[0], uf[1]  # the message's user stack, not the def line
        # strict torch.export's Dynamo compile: torch 2.13 names no code object (a torch.compile
        # failure always does); a torch that logs its dynamo_start has torch.export on that stack
        by_export = r["function"] is None or any(EXPORT_PATH.search(str(fr)) for fr in r.get("user_stack") or [])
        if exported and r["file"] in exported and by_export and data_dependent(r["fail_type"], r["fail_reason"]):
            cat = "export_data_dependent"  # torch.export on a value only the data decides, not fullgraph
            step = NEXT_STEPS[cat]
            if function is None and uf is not None:
                function = uf[2]  # strict export names no code object: the user's function that failed
        if r.get("suppress_errors"):
            step = (
                "torch._dynamo.config.suppress_errors=True hid this failure: the frame runs eagerly "
                "on every call (the WON'T CONVERT warning), nothing of it is compiled. Fix the cause, "
                "then turn suppress_errors off to see failures. " + step
            )
        elif cat == "graph_break" and fullgraph_likely(r["fail_type"], r["fail_reason"], r["graph_breaks"], r["attempts"]):
            certainty = "likely"
            evidence = "Unsupported with no dynamo_graph_break_reason and no restart: fullgraph=True"
            step = (
                "Under fullgraph=True (likely: the compile failed as Unsupported with no logged graph "
                "break and no restart) the break raised to the caller; nothing ran eagerly. Fix the "
                "construct at the user line (the hint says how), or drop fullgraph=True to let Dynamo "
                "split the graph there."
                + (f" {m.group(1)}: https://meta-pytorch.github.io/compile-graph-break-site/gb/{m.group(1)}.html" if m else "")
            )
        if cat == "compile_worker_died":
            step = _how_far(r) + step
        detail = detail_of(cat, r["fail_reason"])
        testing = r.get("testing_only_config")  # a fault injection: the judge says the config asked for it
        rows.append(
            {
                "rank": r["rank"],
                "compile_id": r["compile_id"],
                "function": function,
                "category": cat,
                "fail_type": r["fail_type"],
                "reason": r["fail_reason"],
                "headline": headline(r["fail_reason"]) + (f" ({detail})" if detail else ""),
                "gb_id": m.group(1) if m else None,
                "filename": filename,
                "line": line,
                "code_filename": r["filename"],
                "code_line": r["line"],
                "next_step": step,
                "source": "trace",
                "file": r["file"],
                "lineno": r["metrics_lineno"] if r["metrics_lineno"] is not None else r["lineno"],
                "occurrence": r["occurrence"],
                "attempts": r["attempts"],
                "certainty": certainty,
                "evidence": evidence,
                "testing_only_config": testing,
            }
        )
    known = set(compiles.select("rank", "compile_id").iter_rows())
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
                    "code_filename": r["filename"],
                    "code_line": r["line"],
                    "next_step": NEXT_STEPS["recompile_limit"],
                    "source": "text",
                    "file": r["file"],
                    "lineno": r["lineno"],
                    "occurrence": None,
                    "certainty": "certain",
                    "evidence": None,
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
                    "occurrence": None,
                    "certainty": "certain",
                    "evidence": None,
                }
            )
    if wont_convert is not None and wont_convert.height:
        traced = {(r["rank"], r["function"]) for r in failed.select("rank", "function").iter_rows(named=True)}
        for r in wont_convert.sort("file", "lineno").iter_rows(named=True):
            if (r["rank"], r["function"]) in traced:
                continue  # the trace's failed compile of the same function
            short = (r["exc_type"] or "").rsplit(".", 1)[-1] or None
            reason = r["message"] or ""
            cat = categorize(short, reason)
            detail = detail_of(cat, reason)
            rows.append(
                {
                    "rank": r["rank"],
                    "compile_id": r["compile_id"],
                    "function": r["function"],
                    "category": cat,
                    "fail_type": short,
                    "reason": reason,
                    "headline": headline(reason) + (f" ({detail})" if detail else ""),
                    "gb_id": (m.group(1) if (m := _GB.search(reason)) else None),
                    "filename": r["filename"],
                    "line": r["line"],
                    "code_filename": r["filename"],
                    "code_line": r["line"],
                    "next_step": (
                        "WON'T CONVERT: torch._dynamo.config.suppress_errors=True ran this frame eagerly "
                        "(every call, nothing compiled) instead of raising. Fix the cause, then turn "
                        "suppress_errors off to see failures. " + next_step(cat, short, reason)
                    ),
                    "source": "text",
                    "file": r["file"],
                    "lineno": r["lineno"],
                    "occurrence": None,
                    "certainty": "certain",
                    "evidence": None,
                }
            )
    if printed is not None and printed.height and log_records is not None:
        rows.extend(_printed_rows(printed, log_records, failed))
    order = {c: i for i, c in enumerate(SEVERITY)}
    rows.sort(key=lambda r: (order[r["category"]], r["rank"] if r["rank"] is not None else -1, sort_key(r["compile_id"])))
    return pl.DataFrame(rows, schema=SCHEMA)


_COMPILE_ERROR = re.compile(r"^torch\.(?:_dynamo\.exc|_inductor\.exc)\.|ConstraintViolationError$")


def _printed_rows(printed: pl.DataFrame, log_records: pl.DataFrame, failed: pl.DataFrame) -> list[dict]:
    """Failed compiles from tracebacks of torch.compile errors the program printed (see
    `failures`); the compile is the one of the last log record before the traceback, the
    function the one its `Step 1: torchdynamo start tracing` line names."""
    recs = (
        log_records.filter(pl.col("compile_id").is_not_null())
        .with_columns(text_occurrence_expr().alias("occurrence"))
        .sort("file", "lineno")
    )
    starts = recs.filter(pl.col("text").str.starts_with(TEXT_START))
    traced = {(r["rank"], r["compile_id"], r["occurrence"]) for r in failed.select("rank", "compile_id", "occurrence").iter_rows(named=True)}
    # without a compile id before it (no TORCH_LOGS=dynamo), a printed traceback is a traced
    # failure when it is the same error on the same rank: the program caught the exception
    # torch raised for that compile and printed it (fixtures/backend_error)
    traced_errors = {
        (r["rank"], r["fail_type"], (r["fail_reason"] or "").strip())
        for r in failed.select("rank", "fail_type", "fail_reason").iter_rows(named=True)
    }
    rows = []
    for p in printed.filter(pl.col("exc_type").str.contains(_COMPILE_ERROR.pattern)).iter_rows(named=True):
        before = recs.filter((pl.col("file") == p["file"]) & (pl.col("lineno") < p["lineno"])).tail(1)
        cid = occ = function = filename = line = None
        if before.height:
            cid, occ = before["compile_id"][0], before["occurrence"][0]
            st = starts.filter((pl.col("file") == p["file"]) & (pl.col("compile_id") == cid) & (pl.col("occurrence") == occ)).head(1)
            if st.height:
                m = re.match(r"^(\S+) (.+):(\d+)\s*$", st["text"][0][len(TEXT_START):].split("\n", 1)[0])
                if m:
                    function, filename, line = m.group(1), m.group(2), int(m.group(3))
        if (p["rank"], cid, occ) in traced:
            continue
        short = p["exc_type"].rsplit(".", 1)[-1]
        reason = p["message"] or ""
        if cid is None and (p["rank"], short, reason.strip()) in traced_errors:
            continue
        cat = categorize(short, reason)
        detail = detail_of(cat, reason)
        uf = user_frame_of(reason)
        m = _GB.search(reason)
        rows.append(
            {
                "rank": p["rank"],
                "compile_id": cid,
                "function": function,
                "category": cat,
                "fail_type": short,
                "reason": reason,
                "headline": headline(reason) + (f" ({detail})" if detail else ""),
                "gb_id": m.group(1) if m else None,
                "filename": uf[0] if uf else filename,
                "line": uf[1] if uf else line,
                "code_filename": filename,
                "code_line": line,
                "next_step": next_step(cat, short, reason),
                "source": "text",
                "file": p["file"],
                "lineno": p["lineno"],
                "occurrence": occ,
                "certainty": "certain" if cid is not None else "likely",
                "evidence": None if cid is not None else "a printed traceback with no compile id logged before it",
            }
        )
    return rows
