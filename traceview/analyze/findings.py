"""Finding identity: when two ranks' findings are the same finding, and how a finding that is
the same on several ranks is shown once with its ranks. Used by the text report and the UI
alike (traceview.output.report, traceview.tui.model), on the rows of `build_report`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from typing import Any

# An object's address in a message (`<function f at 0x7fbd…>`): it differs between processes
# and between objects made alike (a closure per call), never the fact the message states.
ADDRESS = r"0x[0-9a-fA-F]+"
_ADDRESS = re.compile(ADDRESS)


def same_text(text: str | None) -> str | None:
    """A message as facts are compared: its objects' addresses left out (`at 0x…`), so a
    reason that differs only by an address is one fact, counted, with one example text."""
    return _ADDRESS.sub("0x…", text) if text else text


def storm_key(s: dict[str, Any]) -> tuple:
    """What makes two ranks' recompile storms the same finding."""
    return (s["function"], s["filename"], s["line"], s.get("epoch") or 1, s["compiles"], s["hit_recompile_limit"],
            tuple((c["kind"], same_text(c["text"]), c["count"]) for c in s["causes"]))


def failure_fact_key(f: dict[str, Any]) -> tuple:
    """What makes failed compiles one fact: the same code object failing at the same line for
    the same reason (addresses aside), whatever its compile id and rank (a frame that fails on
    every call, each time as a new compile id)."""
    return (f.get("function"), f.get("code_filename") or f["filename"], f["filename"], f["line"], f["category"],
            f.get("fail_type"), same_text(f["reason"]))


def group_failures(fails: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[Any], list[dict[str, Any]]]]:
    """Failed compiles that are one fact (failure_fact_key: across ranks and compile ids):
    (the first, its ranks, every failure of the fact), in order of first appearance."""
    facts: dict[tuple, tuple[dict[str, Any], list[Any], list[dict[str, Any]]]] = {}
    for f in fails:
        k = failure_fact_key(f)
        if k in facts:
            facts[k][1].append(f["rank"])
            facts[k][2].append(f)
        else:
            facts[k] = (f, [f["rank"]], [f])
    return list(facts.values())


def slow_compile_key(r: dict[str, Any]) -> tuple:
    """What makes two ranks' slowest compiles the same line."""
    return (r["seconds"], r["compile_id"], r.get("occurrence"), r["function"], r["filename"], r["line"])


def group_ranks(
    items: list[dict[str, Any]], key: Callable[[dict[str, Any]], Hashable]
) -> list[tuple[dict[str, Any], list[Any]]]:
    """Findings that are the same on several ranks, shown once with the list of ranks (in the
    order of their first appearance; each with its first item)."""
    groups: dict[Any, tuple[dict[str, Any], list[Any]]] = {}
    for it in items:
        k = key(it)
        if k in groups:
            groups[k][1].append(it["rank"])
        else:
            groups[k] = (it, [it["rank"]])
    return list(groups.values())


def per_rank_key(r: dict[str, Any]) -> tuple:
    """What makes two ranks' per-rank lines the same (they compiled alike)."""
    # every key but the rank: the compiles, each status's count (the report's per_rank rows) and the time
    return tuple(v for k, v in r.items() if k != "rank")


def divergence_key(d: dict[str, Any]) -> tuple:
    """What makes two ranks' divergence the same line (they differ from the majority alike)."""
    return (tuple(d["extra_compile_ids"]), tuple(d["missing_compile_ids"]), tuple(d["different"]), d["detail"])


# Pieces of a rank list shown before it is cut ("… 812 ranks in all"): one screen line.
_MAX_RANK_PIECES = 12


def text_log_only(report: dict[str, Any]) -> bool:
    """Whether the report read a text log (TORCH_LOGS) without its trace: no compile metrics,
    so no compile times, cache or status."""
    inp = report.get("inputs") or {}
    return report.get("compiles", 0) == 0 and (
        (report.get("compile_ids_in_text_logs") or 0) > 0 or bool(inp.get("text_logs") and not inp.get("trace_files"))
        or bool(uncovered_debug_dirs(report))
    )


def uncovered_debug_dirs(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The TORCH_COMPILE_DEBUG run folders read without their process's TORCH_TRACE log
    (traceview.analyze.debug_dirs)."""
    return [d for d in (report.get("inputs") or {}).get("debug_dirs") or [] if not d.get("covered_by")]


def after_resets(epoch: int | None) -> str:
    """" after torch._dynamo.reset() #N" for a finding of a later epoch (frame ids restart at a
    reset: parsers.compile_ids.epoch_expr), "" for the first."""
    return f" after torch._dynamo.reset() #{epoch - 1}" if (epoch or 1) > 1 else ""


def ranks_text(ranks: list[Any]) -> str:
    """"rank 3 ", "ranks 0-47 ", "ranks 1,5 ", "ranks 0-99,120-1023 " (runs of three or more
    as ranges; a long list cut, with the count); empty for a process without a rank."""
    rs = sorted({r for r in ranks if r is not None})
    if not rs:
        return ""
    if len(rs) == 1:
        return f"rank {rs[0]} "
    if rs == list(range(rs[0], rs[-1] + 1)):
        return f"ranks {rs[0]}-{rs[-1]} "
    pieces: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        pieces += [f"{rs[i]}-{rs[j]}"] if j - i >= 2 else [str(r) for r in rs[i : j + 1]]
        i = j + 1
    if len(pieces) > _MAX_RANK_PIECES:
        return f"ranks {','.join(pieces[:_MAX_RANK_PIECES])},… ({len(rs)} ranks) "
    return f"ranks {','.join(pieces)} "


# -------------------------------------------------------- what counts as a slow compile
# (the order of findings is traceview.analyze.finding's: KINDS and Finding.rank_key)
SLOW_COMPILE_MIN_S = 1.0  # no compile under this is called slow, whatever the run
SLOW_COMPILE_SHARE = 0.10  # ... and it must take this share of its rank's compile time


def recompiled_repeatedly(s: dict[str, Any]) -> bool:
    """A recompiling function that compiled 3 times or more, or hit the recompile limit: its
    refusal at the limit and its divergence are its own (judge folds them into it). Not the
    report's `is_storm` (analyze.storms), which leaves out one-off recompiles and recompiles
    by design."""
    return bool(s["hit_recompile_limit"]) or s["compiles"] > 2


def storm_failure(s: dict[str, Any], f: dict[str, Any]) -> bool:
    """A failed compile that is the storm's own recompile-limit hit (one root cause)."""
    return (
        f["category"] == "recompile_limit"
        and f["rank"] == s["rank"]
        and f["compile_id"] == s.get("limit_compile_id")
    )


def recompile_behind(d: dict[str, Any], s: dict[str, Any]) -> bool:
    """A recompile (not a storm) that is why rank `d['rank']` diverges: the recompiled ids
    are the compiles that rank has and the others do not."""
    ids = set(d.get("extra_compile_ids") or []) | set(d.get("different") or [])
    return not recompiled_repeatedly(s) and s["rank"] == d["rank"] and bool(ids & set((s.get("compile_ids") or [])[1:]))


def break_failure(g: dict[str, Any], f: dict[str, Any]) -> bool:
    """A failed compile that is this graph break skipping its frame (one root cause: the
    frame fell back to eager because of the break)."""
    ranks = g.get("ranks") or [None]
    return f["category"] == "graph_break" and f["compile_id"] in (g.get("compile_ids") or []) and f["rank"] in ranks


def code_label(row: dict[str, Any], show: Callable[[Any, Any], str]) -> str:
    """A compiled code object as its user knows it (the row's `code`, analyze.code_objects):
    `fn (file:line)` for the user's code; the class, the library or torch's wrapper, and the
    user's call site otherwise. `show(filename, line)` formats a place."""
    code = row.get("code") or {}
    site = code.get("call_site")
    called = ""
    if site and code.get("owner") != "user":
        src = f" `{' '.join(str(site['code']).split())[:100]}`" if site.get("code") else ""
        called = f", called at {show(site['filename'], site['line'])}{src}"
    if code.get("wrapper") == "torch.compile(model)":
        return f"{code.get('label') or row.get('function') or '?'}{called}"
    name = code.get("qualname") or row.get("function") or "?"
    return f"{name} ({show(row.get('filename'), row.get('line'))}){called}"


def compile_key(r: dict[str, Any]) -> tuple:
    """The same compile on several ranks: compile id, occurrence (the second [0/0] after a
    torch._dynamo.reset() is another compile) and code object, whatever its seconds."""
    return (r["compile_id"], r.get("occurrence"), r["function"], r["filename"], r["line"])


def slow_compiles(report: dict[str, Any]) -> list[tuple[dict[str, Any], list[Any]]]:
    """Compiles slow relative to the run: at least SLOW_COMPILE_MIN_S and at least
    SLOW_COMPILE_SHARE of their rank's compile time, on a rank that compiled something else
    too (the only compile of a rank is slow relative to nothing: it is all of its compile
    time, and COMPILE TIME says so); one entry per distinct compile across ranks (its slowest
    rank's row first), slowest first."""
    ct = report.get("compile_time") or {}
    per_rank = {r["rank"]: r.get("compile_time_s") or 0.0 for r in report.get("per_rank") or []}
    compiles = {r["rank"]: r.get("compiles") or 0 for r in report.get("per_rank") or []}
    total = ct.get("total_s") or 0.0
    rows = [
        t for t in ct.get("top") or []
        # a compile still open at the end is the stop's and the unfinished compile's to say
        if t.get("status") not in ("interrupted", "never_ended")
        and t["seconds"] >= SLOW_COMPILE_MIN_S and t["seconds"] >= SLOW_COMPILE_SHARE * per_rank.get(t["rank"], total)
        and compiles.get(t["rank"], report.get("compiles") or 0) > 1
    ]
    # ties by rank: the same order whatever order the inputs came in (one export, or a
    # directory of exports of the ranks' shares)
    rows.sort(key=lambda t: (-t["seconds"], -1 if t["rank"] is None else t["rank"]))
    return group_ranks(rows, compile_key)


def recompile_why(s: dict[str, Any]) -> str:
    """Why a function that compiled twice (not a storm) did so, in a few words."""
    if s.get("forced_dynamic_false"):
        return "dynamic=False: each new size or value compiles again"
    kinds = {(c.get("kind") or "").split(":")[-1] for c in s.get("causes") or []}
    if kinds and kinds <= {"bool"}:
        return "expected: one compile per value of a bool"
    if kinds and kinds <= {"size", "int", "float", "stride"}:
        return "expected: automatic dynamic shapes recompile once"
    if s.get("expected"):  # every cause by design (a flag's values, automatic dynamic shapes, ...)
        return "expected by design: nothing to fix"
    return "one recompile"


# ------------------------------------------------------------- what a compile's status means
# The compiles table's status says what the log shows; the user needs what it means:
# ok; restarted after a graph break (normal: Dynamo compiled the part before the break and
# resumes after it); fell back to eager (a graph break that skipped the whole frame, or the
# recompile limit: the frame runs uncompiled, nothing crashed); failed (an error in Dynamo or
# the backend); empty (no graph to compile); no metrics (the log ends before the compile did).
OUTCOMES = ("ok", "restarted", "eager", "failed", "empty", "no_metrics")
EAGER_CATEGORIES = ("graph_break", "recompile_limit")


def compile_outcome(row: dict[str, Any]) -> str:
    """What a row of the compiles table means (one of OUTCOMES)."""
    status = row.get("status")
    if status == "failed":
        from traceview.analyze.failures import (
            categorize,  # (this module stays importable without polars)
        )

        cat = categorize(row.get("fail_type"), row.get("fail_reason"))
        return "eager" if cat in EAGER_CATEGORIES else "failed"
    return {"ok": "ok", "graph_break_restarts": "restarted", "empty_graph": "empty"}.get(status or "", "no_metrics")
