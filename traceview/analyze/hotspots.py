"""Graph-break hotspots: every break grouped by reason and user source line, ranked by impact.

Breaks come from three records, merged without double counting:

* the graph-break messages (trace `dynamo_graph_break_reason` artifacts and the text log's
  `graph_breaks` records; the trace row wins when both logged the same break);
* the `restart_reasons` of `compilation_metrics`, for compiles whose break left no message
  (older torch versions, TORCH_TRACE without the artifact);
* failed compiles (`fail_type` Unsupported) with no break message: the frame fell back to eager.

A distinct list (one row per reason and line) with how often it happened across compiles and
ranks, the graph-break registry id, the function, and whether the whole frame fell back to
eager (a break inside a loop, an exception, a break Dynamo could not resume from).
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from parsers.code_location import brief, is_torch, whose
from parsers.sources import prefer_trace
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
    "origin",
    "rank",
    "compile_id",
    "file",
    "lineno",
)

_GB = re.compile(r"\b(gb\d{4})\b")
# restarts Dynamo does for its own analyses (exc.py: TensorifyScalarRestartAnalysis,
# SpeculationRestartAnalysis), logged as a bare class in restart_reasons
_INTERNAL_RESTART = re.compile(r"^\s*<class 'torch\._dynamo\.exc\.\w*RestartAnalysis'>\s*$")
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


def parse_reason(text: str | None) -> dict[str, Any]:
    """Title, gb id and hints of a graph-break / failure message (restart reason, fail_reason)."""
    lines = [s.strip() for s in (text or "").split("\n")]
    title = next((s for s in lines if s), "")
    if len(title) > 1 and title[0] == title[-1] and title[0] in "'\"":
        title = title[1:-1]
    m = _GB.search(text or "")
    hints = [s[len("Hint:") :].strip() for s in lines if s.startswith("Hint:")]
    expl = next((s[len("Explanation:") :].strip() for s in lines if s.startswith("Explanation:")), None)
    return {
        "reason": title or None,
        "gb_id": m.group(1) if m else None,
        "hint": "\n".join(hints) or None,
        "explanation": expl or None,
    }


def _message_rows(trace: Trace) -> pl.DataFrame:
    gb = prefer_trace(trace.graph_breaks, ["rank", "compile_id", "filename", "line", "reason"])
    return gb.select(
        *[
            (pl.col(c) if c in gb.columns else pl.lit(None)).cast(t).alias(c)
            for c, t in ROW_SCHEMA.items()
            if c != "origin"
        ],
        pl.lit("message").alias("origin"),
    ).select(list(ROW_SCHEMA))


def _compile_rows(trace: Trace, covered: pl.DataFrame) -> pl.DataFrame:
    """Breaks known only from `compilation_metrics`: restart reasons and Unsupported failures
    of compiles that have no graph-break message."""
    comp = trace.compiles.join(covered, on=["file", "compile_id", "occurrence"], how="anti", nulls_equal=True)
    rows: list[dict[str, Any]] = []
    for r in comp.filter(pl.col("restart_reasons").list.len() > 0).iter_rows(named=True):
        for text in r["restart_reasons"]:
            if _INTERNAL_RESTART.search(text or ""):
                continue  # Dynamo re-tracing the frame for its own analysis, not a graph break
            p = parse_reason(text)
            rows.append(
                {
                    "rank": r["rank"],
                    "compile_id": r["compile_id"],
                    "occurrence": r["occurrence"],
                    "filename": r["filename"],
                    "line": None,
                    "function": r["function"],
                    **p,
                    "reason_line": (text or "").strip().split("\n", 1)[0] or None,
                    "frame_skipped": False,
                    "origin": "restart_reason",
                    "file": r["file"],
                    "lineno": r["metrics_lineno"] or r["lineno"],
                }
            )
    failed = comp.filter((pl.col("status") == "failed") & pl.col("fail_type").str.contains("Unsupported"))
    for r in failed.iter_rows(named=True):
        reason = r["fail_reason"] or ""
        low = reason.lower()
        if "recompile limit" in low or "recompile_limit" in low or "cache_size_limit" in low:
            continue  # the limit is a storm, not a break in user code
        p = parse_reason(reason)
        rows.append(
            {
                "rank": r["rank"],
                "compile_id": r["compile_id"],
                "occurrence": r["occurrence"],
                "filename": r["fail_user_filename"] or r["filename"],
                "line": r["fail_user_line"],
                "function": r["function"] if r["fail_user_filename"] in (None, r["filename"]) else None,
                **p,
                "reason_line": reason.strip().split("\n", 1)[0] or None,
                # under fullgraph=True the break raised to the caller: nothing ran eagerly
                "frame_skipped": not fullgraph_likely(r["fail_type"], reason, r["graph_breaks"], r["attempts"]),
                "skipped_function": r["function"],
                "skipped_filename": r["filename"],
                "skipped_line": r["line"],
                "origin": "failure",
                "file": r["file"],
                "lineno": r["metrics_lineno"] or r["lineno"],
            }
        )
    return pl.DataFrame(rows, schema=ROW_SCHEMA)


def graph_break_rows(trace: Trace) -> pl.DataFrame:
    """All graph-break observations (messages, restart reasons, failures) without double
    counting, with the frame (code object) each happened in."""
    msg = _message_rows(trace)
    # compiles whose break has a message: by file and occurrence for trace rows (the second
    # 0/0, after a torch._dynamo.reset(), is another compile), by rank for text rows (every
    # occurrence: a text log without TORCH_LOGS=dynamo does not say which)
    text = msg.filter(pl.col("file").is_in(trace.compiles["file"].implode()).not_())
    by_rank = trace.compiles.join(text.select("rank", "compile_id").unique(), on=["rank", "compile_id"], nulls_equal=True)
    covered = pl.concat([msg.select("file", "compile_id", "occurrence"), by_rank.select("file", "compile_id", "occurrence")]).unique()
    rows = pl.concat([msg, _compile_rows(trace, covered)])
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
    then observations x ranks; breaks in user code before breaks inside torch."""
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
        out.append({k: r[k] for k in HOTSPOT_SCHEMA_KEYS})
    return out
