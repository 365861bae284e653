"""Graph-break hotspots: every break grouped by reason and user source line, ranked by impact.

The breaks are the `graph_breaks` table's rows (parsers.facts.graph_breaks: each break once,
told by a graph-break message, a restart reason or a failed compile), so its row count is the
summary's "N in all":

* the graph-break messages (trace `dynamo_graph_break_reason` artifacts and the text log's
  `graph_breaks` records; the trace row wins when both logged the same break);
* the `restart_reasons` of `compilation_metrics`, for compiles whose break left no message
  (older torch versions, TORCH_TRACE without the artifact);
* failed compiles (`fail_type` Unsupported) with no break message: the frame fell back to
  eager, unless fullgraph=True raised the break (judged here).

A distinct list (one row per reason and line) with how often it happened across compiles and
ranks, the graph-break registry id, the function, and whether the whole frame fell back to
eager (a break inside a loop, an exception, a break Dynamo could not resume from).
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from parsers.code_location import brief, is_torch, whose
from traceview.analyze.ddp import WRAPPER_BREAK_EXPLANATION, wrapper_break
from traceview.analyze.failures import fullgraph_likely
from traceview.analyze.findings import ADDRESS
from traceview.analyze.registry import config_fix, has_placeholders, registry_entry
from traceview.trace import Trace

HOTSPOT_SCHEMA_KEYS = (
    "reason",
    "gb_id",
    "filename",
    "line",
    "function",
    "count",
    "ranks",
    "compile_ids",
    "frame_skipped",
    "frame_skipped_why",
    "frame_function",
    "frame_filename",
    "frame_line",
    "reason_line",
    "hint",
    "explanation",
    "explanation_from",
    "advice",
    "config_fix",
    "expected",
    "wrapper_break",
    "fixed_later",
    "origin",
    "rank",
    "compile_id",
    "file",
    "lineno",
)

_LOOP_GB = "gb7000"
_EXCEPTION_GB = "gb0088"

ROW_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32,
    "compile_id": pl.String,
    "occurrence": pl.Int32,
    "filename": pl.String,
    "line": pl.Int32,
    "function": pl.String,
    "reason": pl.String,
    "reason_line": pl.String,
    "gb_id": pl.String,
    "hint": pl.String,
    "explanation": pl.String,
    "debug_context": pl.String,
    "frame_skipped": pl.Boolean,
    "inner_reason": pl.String,
    "inner_gb_id": pl.String,
    "skipped_function": pl.String,
    "skipped_filename": pl.String,
    "skipped_line": pl.Int32,
    "origin": pl.String,
    "file": pl.String,
    "lineno": pl.Int64,
}


def graph_break_rows(trace: Trace) -> pl.DataFrame:
    """All graph-break observations (the `graph_breaks` table: messages, restart reasons,
    failures, each break once), with the frame (code object) each happened in."""
    gb = trace.graph_breaks
    rows = gb.select(
        *[(pl.col(c) if c in gb.columns else pl.lit(None)).cast(t).alias(c) for c, t in ROW_SCHEMA.items()]
    )
    comp = trace.compiles.select(
        "file",
        "compile_id",
        "occurrence",
        pl.col("function").alias("_ffn"),
        pl.col("filename").alias("_ffile"),
        pl.col("line").alias("_fline"),
        pl.col("status").alias("_status"),
        pl.col("fail_type").alias("_fail_type"),
        ((pl.col("graph_breaks").fill_null(0) == 0) & (pl.col("attempts").fill_null(1) <= 1)).alias("_fullgraph"),
    )
    rows = rows.join(comp, on=["file", "compile_id", "occurrence"], how="left", nulls_equal=True)
    rows = _failure_frames(rows, trace.compiles)
    # a compile that failed as Unsupported ran its whole frame eagerly (unless fullgraph=True
    # raised it: analyze.failures.fullgraph_likely; the break rows from its metrics say so)
    failed_here = (
        (pl.col("_status") == "failed")
        & pl.col("_fail_type").fill_null("").str.contains("Unsupported")
        & ~(pl.col("_fullgraph").fill_null(False) & (pl.col("origin") == "failure"))
    )
    skipped = pl.col("frame_skipped").fill_null(False) | failed_here.fill_null(False)
    return rows.with_columns(
        skipped.alias("frame_skipped"),
        # the frame: the compile's code object, or the `frame skipped:` line of the text log
        pl.coalesce("_ffn", "skipped_function").alias("frame_function"),
        pl.coalesce("_ffile", "skipped_filename").alias("frame_filename"),
        pl.coalesce("_fline", "skipped_line").alias("frame_line"),
    ).drop("_ffn", "_ffile", "_fline", "_status", "_fail_type", "_fullgraph")


def _failure_frames(rows: pl.DataFrame, compiles: pl.DataFrame) -> pl.DataFrame:
    """`frame_skipped` of the breaks that ended a failed compile (origin `failure`, null in the
    table): the frame ran eagerly unless fullgraph=True raised the break to the caller
    (analyze.failures.fullgraph_likely)."""
    failure = rows["origin"] == "failure"
    if not failure.any():
        return rows
    status = {
        (r["file"], r["compile_id"], r["occurrence"]): not fullgraph_likely(r["fail_type"], r["fail_reason"], r["graph_breaks"], r["attempts"])
        for r in compiles.select("file", "compile_id", "occurrence", "fail_type", "fail_reason", "graph_breaks", "attempts").iter_rows(named=True)
    }
    skipped = [
        status.get((f, c, o)) if is_failure else s
        for f, c, o, s, is_failure in zip(rows["file"], rows["compile_id"], rows["occurrence"], rows["frame_skipped"], failure)
    ]
    return rows.with_columns(pl.Series("frame_skipped", skipped, dtype=pl.Boolean))


def _why(frame_skipped: bool, reason: str | None, gb_id: str | None, inner_reason: str | None, inner_gb: str | None) -> str | None:
    if not frame_skipped:
        return None
    if inner_gb == _LOOP_GB or "loop" in (inner_reason or "").lower():
        return "graph break inside a loop"
    if gb_id == _EXCEPTION_GB or (reason or "").lower().startswith("observed exception"):
        return "exception raised inside the compiled function"
    return "Dynamo could not resume after the break"


def _explain_from_registry(r: dict[str, Any]) -> None:
    """The explanation the log carries (torch fills the registry's fields in), else the
    installed torch's registry entry for the gb id; the registry's hints where the log has
    none (older torch, a restart reason or a failure without hints)."""
    if r.get("gb_id") == "gb0025" and is_torch(r.get("filename")):
        r["explanation"] = None  # "User-inserted graph break": torch's own, said by the advice
    entry = registry_entry(r.get("gb_id"), r.get("reason"))
    r["explanation_from"] = "log" if r.get("explanation") else None
    if entry is None:
        return
    if not r.get("explanation") and entry["explanation"] and not has_placeholders(entry["explanation"]):
        r["explanation"] = entry["explanation"]
        r["explanation_from"] = "registry"
    if not r.get("hint"):
        hints = [h for h in entry["hints"] if not has_placeholders(h)]
        r["hint"] = "\n".join(hints) or None


_SKIPPED_TORCH_FN = re.compile(r"qualname: (?P<fn>[\w.<>]+),.*skip reason: (?P<why>[^\n]*)", re.S)
_ISSUE_HINT = re.compile(r"^Please (?:report|file) an issue", re.I)


def _torch_skipped(r: dict[str, Any]) -> tuple[str, str] | None:
    """(qualname, skip reason) when the break is a call into a function torch itself marks as
    not traceable (gb0007/gb0008 with a skip reason naming torch's files)."""
    m = _SKIPPED_TORCH_FN.search(r.get("debug_context") or "")
    if m is None:
        return None
    why = m["why"].strip()
    if "MOD_SKIPLIST" in why or is_torch(why) or re.search(r"[/\\]torch[/\\]", why):
        return m["fn"], why
    return None


def _hint_advice(hint: str | None) -> str | None:
    """The first hint, plus a later one that names a torch._dynamo.config setting (the
    print/logging one of gb0059); "please report an issue" lines left out."""
    lines = [x.strip() for x in (hint or "").split("\n") if x.strip() and not _ISSUE_HINT.match(x.strip())]
    if not lines:
        return None
    extra = next((x for x in lines[1:] if "torch._dynamo.config." in x), None)
    return lines[0] + (f" {extra}" if extra else "")


def _advice(why: str | None, hint: str | None, function: str | None, r: dict[str, Any] | None = None) -> str | None:
    if why == "graph break inside a loop":
        fix = config_fix(hint)
        first = (
            f"{fix} (torch's hint), which removes this break; otherwise: "
            if fix
            else ""
        )
        return first + (
            "Dynamo cannot resume inside a loop, so the whole frame runs eagerly: move the "
            "break out of the loop (or remove it), or compile the loop body on its own "
            f"(torch.compile each block) instead of {function or 'the frame'}"
        )
    if why == "exception raised inside the compiled function":
        return "the frame raised an exception of its own and ran eagerly: fix the exception (see failed compiles)"
    if r is not None and is_torch(r["filename"]):
        frame = r.get("frame_function")
        origin = f", reached from {frame}" if frame else ""
        if r.get("gb_id") == "gb0025":
            optim = " (torch.optim splits every optimizer step this way)" if "/optim/" in (r["filename"] or "") else ""
            return (
                f"torch's own code calls torch._dynamo.graph_break() here on purpose{origin}{optim}: "
                "not a bug in your code; compile around it rather than into it if the split costs too much"
            )
        called = f" ({r['call_site']})" if r.get("call_site") else ""
        return f"the break is inside torch's own code{origin}: look at the user line that calls into it{called}"
    if r is not None and (skipped := _torch_skipped(r)):
        fn, reason = skipped
        return (
            f"torch marks `{fn}` as not traceable ({reason.split(' (', 1)[0]}): torch's decision, not "
            f"code of yours to avoid; the graph splits at this call. Compile the model (or the "
            f"step) without it if the split costs too much"
        )
    hinted = _hint_advice(hint)
    if r is not None and (lib := whose(r["filename"])).owner == "library":
        frame = r.get("frame_function")
        origin = f", reached from {frame}" if frame else ""
        where = (
            f"the break is inside the {lib.package} library's code ({lib.shown}{origin}), not a line of yours "
            f"to edit: look at what your code passes into it"
            + (f" at {r['call_site']}" if r.get("call_site") else "")
            + ", or compile around that call"
        )
        return f"{where}. {hinted[:1].upper()}{hinted[1:]}" if hinted else where
    return hinted


def _call_sites(trace: Trace) -> dict[tuple, str]:
    """(file, compile_id) -> the user's line that entered the compiled frame, as shown: `train.py:41`
    (the compiles table's call_* columns, parsers.code_location.call_site)."""
    c = trace.compiles
    if c.is_empty() or "call_filename" not in c.columns:
        return {}
    out: dict[tuple, str] = {}
    for f, cid, fn, ln in c.filter(pl.col("call_filename").is_not_null()).select(
        "file", "compile_id", "call_filename", "call_line"
    ).iter_rows():
        out.setdefault((f, cid), f"{brief(fn)}:{ln}")
    return out


def graph_break_hotspots(trace: Trace) -> list[dict[str, Any]]:
    """Distinct graph breaks, most impact first: breaks that sent a whole frame back to eager,
    then observations x ranks; breaks in user code before breaks inside torch; the breaks a
    wrapper makes by design (DDP's: `expected`, analyze.ddp) last."""
    rows = graph_break_rows(trace)
    if rows.height == 0:
        return []
    rows = rows.sort("file", "lineno")
    grouped = (
        rows.with_columns(
            pl.coalesce("filename", "frame_filename").alias("filename"),
            # one fact whatever object's address the reason names (findings.same_text)
            pl.col("reason").str.replace_all(ADDRESS, "0x…").alias("_fact"),
        )
        .group_by("_fact", "filename", "line", maintain_order=True)
        .agg(
            pl.col("reason").first(),
            pl.col("gb_id").drop_nulls().first(),
            pl.col("function").drop_nulls().first(),
            pl.len().alias("count"),
            pl.col("rank").drop_nulls().unique().sort().alias("ranks"),
            pl.col("compile_id").drop_nulls().unique().sort().alias("compile_ids"),
            pl.col("frame_skipped").any().alias("frame_skipped"),
            pl.col("frame_function").drop_nulls().first(),
            pl.col("frame_filename").drop_nulls().first(),
            pl.col("frame_line").drop_nulls().first(),
            pl.col("reason_line").drop_nulls().first(),
            pl.col("hint").drop_nulls().first(),
            pl.col("explanation").drop_nulls().first(),
            pl.col("debug_context").drop_nulls().first(),
            pl.col("inner_reason").drop_nulls().first(),
            pl.col("inner_gb_id").drop_nulls().first(),
            pl.col("origin").first(),
            pl.col("rank").first(),
            pl.col("compile_id").first(),
            pl.col("file").first(),
            pl.col("lineno").first(),
        )
        .with_columns(
            (pl.col("count") * pl.col("ranks").list.len().clip(1)).alias("_impact"),
        )
    )
    # breaks in user code before breaks inside torch (parsers.code_location: torch by module)
    torch_files = [f for f in grouped["filename"].drop_nulls().unique().to_list() if is_torch(f)]
    grouped = grouped.with_columns(pl.col("filename").is_in(torch_files).fill_null(False).alias("_in_torch")).sort(
        ["frame_skipped", "_impact", "_in_torch", "filename", "line"],
        descending=[True, True, False, False, False],
        nulls_last=True,
    )
    sites = _call_sites(trace)
    out = []
    for r in grouped.iter_rows(named=True):
        r["call_site"] = sites.get((r["file"], r["compile_id"]))
        why = _why(r["frame_skipped"], r["reason"], r["gb_id"], r["inner_reason"], r["inner_gb_id"])
        r["frame_skipped_why"] = why
        _explain_from_registry(r)
        r["advice"] = _advice(why, r["hint"], r["frame_function"], r)
        # torch's hint names a config setting as the fix (the summary says `fix:`), unless the
        # advice is traceview's own (torch's code, a function torch does not trace)
        r["config_fix"] = config_fix(r["hint"]) if r["advice"] and config_fix(r["advice"]) else None
        # DDP's own breaks (torch.compile(DDP(model))): the wrapper's design, not the user's to avoid
        r["wrapper_break"] = None if r["frame_skipped"] else wrapper_break(r)
        r["expected"] = r["wrapper_break"] is not None
        if r["expected"]:
            r["advice"], r["config_fix"] = WRAPPER_BREAK_EXPLANATION, None
        out.append({k: r.get(k) for k in HOTSPOT_SCHEMA_KEYS})
    _mark_fixed_later(trace, out, rows)
    # what needs action first: the expected breaks after the others, in their own order
    return [g for g in out if not g["expected"]] + [g for g in out if g["expected"]]


# the config settings torch's hints name as a break's fix that the compiles table records
_FIX_COLUMNS = {
    "torch._dynamo.config.capture_scalar_outputs = True": "capture_scalar_outputs",
    "torch._dynamo.config.capture_dynamic_output_shape_ops = True": "capture_dynamic_output_shape_ops",
}


def _mark_fixed_later(trace: Trace, groups: list[dict[str, Any]], rows: pl.DataFrame) -> None:
    """A config fix the run applied itself: the break's hint names a setting
    (`torch._dynamo.config.capture_scalar_outputs = True`, ...), and later in the same
    process (after torch._dynamo.reset(): Dynamo compiles a code object again only then) the
    break's frame compiled with that setting on (its compilation_metrics' dynamo_config) and
    with no break at the break's line from then on. Such a break gets `fixed_later`
    {setting, compile_id, occurrence, compiles, file, lineno}: the fix worked, it is no longer
    the user's to make."""
    c = trace.compiles
    if c.is_empty() or not all(col in c.columns for col in _FIX_COLUMNS.values()):
        return
    for g in groups:
        g["fixed_later"] = None
        col = _FIX_COLUMNS.get(g.get("config_fix") or "")
        if col is None or g.get("expected") or not g.get("frame_function"):
            continue
        mine = rows.filter(pl.coalesce("filename", "frame_filename").eq_missing(g["filename"]) & pl.col("line").eq_missing(g["line"]))
        for file in mine["file"].unique().to_list():
            seen = mine.filter(pl.col("file") == file)["lineno"].max()
            later = c.filter(
                (pl.col("file") == file) & (pl.col("function") == g["frame_function"])
                & (pl.col("filename") == g["frame_filename"]) & (pl.col("line") == g["frame_line"])
                & (pl.col("lineno") > seen)
            ).sort("lineno")
            if later.is_empty() or not later[col].fill_null(False).all() or later["status"].is_in(["failed"]).any():
                continue
            first = later.row(0, named=True)
            g["fixed_later"] = {
                "setting": g["config_fix"], "compile_id": first["compile_id"], "occurrence": first["occurrence"],
                "compiles": later.height, "function": first["function"], "file": file,
                "lineno": first["metrics_lineno"] if first["metrics_lineno"] is not None else first["lineno"],
            }
            break
