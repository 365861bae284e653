"""The summary: findings first, most important first, as a JSON-able dict and as text.

`build_report` is the versioned JSON schema documented in docs/report.md; `render_text` lays it
out for an 80-column terminal. All log text passes through `printable` before it is printed.
"""

from __future__ import annotations

import textwrap
from typing import Any

import polars as pl

from traceview.analyze import compile_time as ct
from traceview.analyze.divergence import rank_divergence
from traceview.analyze.failures import failures
from traceview.analyze.hotspots import graph_break_hotspots
from traceview.analyze.storms import recompile_storms
from traceview.schema import REPORT_SCHEMA_VERSION
from traceview.textutil import one_line, printable
from traceview.trace import Trace


def _rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    return df.with_columns(pl.col(pl.Datetime).dt.to_string()).to_dicts()


def build_report(trace: Trace) -> dict[str, Any]:
    """The whole summary as plain data (see docs/report.md for the schema)."""
    compiles = trace.compiles
    storms = recompile_storms(trace)
    hotspots = graph_break_hotspots(trace)
    fails = failures(compiles)
    top = ct.top_compiles(compiles)
    per_rank = (
        compiles.group_by("rank")
        .agg(
            pl.len().alias("compiles"),
            *[(pl.col("status") == s).sum().alias(s) for s in ("ok", "failed", "graph_break_restarts", "empty_graph", "no_metrics")],
            pl.col("total_time_s").sum().round(3).alias("compile_time_s"),
        )
        .sort("rank", nulls_last=False)
    )
    stats = trace.stats
    inp = trace.inputs
    problems = trace.problems
    report: dict[str, Any] = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "ranks": trace.ranks,
        "compiles": compiles.height,
        "recompile_storms": storms,
        "graph_breaks": hotspots,
        "failures": [
            {**r, "reason": one_line(r["reason"], 300), "reason_full": r["reason"]} for r in _rows(fails)
        ],
        "compile_time": {
            "total_s": round(float(compiles["total_time_s"].fill_null(0).sum()), 3),
            "phases_s": ct.phase_totals(compiles),
            "top": _rows(top.with_columns(pl.col("seconds").round(3))),
            "by_function": _rows(ct.by_function(compiles).head(10).with_columns(pl.col("seconds").round(3))),
            "spans": _rows(ct.span_totals(trace.spans).with_columns(pl.col("seconds").round(3))),
        },
        "cache": ct.cache_summary(compiles),
        "rank_divergence": _rows(rank_divergence(compiles, trace.graph_breaks)),
        "per_rank": _rows(per_rank),
        "inputs": {
            "root": inp.root if inp else None,
            "trace_files": [
                {"path": t.path, "rank": t.rank, "run": t.run, "bytes": t.size} for t in (inp.traces if inp else [])
            ],
            "text_logs": inp.text_logs if inp else [],
            "stray_files": [{"path": p, "why": w} for p, w in (inp.stray if inp else [])],
            "runs": inp.runs if inp else None,
            "left_out_by_latest": inp.dropped_runs if inp else [],
        },
        "parse": {
            "files": _rows(stats),
            "problems": problems.height,
            "problem_examples": _rows(problems.head(20)),
        },
    }
    return report


# ---------------------------------------------------------------------------------- text
def _wrap(text: str, width: int, indent: str = "    ") -> list[str]:
    return textwrap.wrap(printable(text), width=width, initial_indent=indent, subsequent_indent=indent) or [indent]


def _rank(r: Any) -> str:
    return "" if r is None else f"rank {r} "


def _group_ranks(items: list[dict[str, Any]], key: Any) -> list[tuple[dict[str, Any], list[Any]]]:
    """Findings that are the same on several ranks, shown once with the list of ranks."""
    groups: dict[Any, tuple[dict[str, Any], list[Any]]] = {}
    for it in items:
        k = key(it)
        if k in groups:
            groups[k][1].append(it["rank"])
        else:
            groups[k] = (it, [it["rank"]])
    return list(groups.values())


def _ranks(ranks: list[Any]) -> str:
    rs = sorted(r for r in ranks if r is not None)
    if not rs:
        return ""
    if len(rs) == 1:
        return f"rank {rs[0]} "
    if rs == list(range(rs[0], rs[-1] + 1)):
        return f"ranks {rs[0]}-{rs[-1]} "
    return f"ranks {','.join(map(str, rs))} "


def _loc(filename: str | None, line: Any) -> str:
    if not filename:
        return "?"
    short = filename if len(filename) <= 48 else "…" + filename[-47:]
    return f"{short}:{line}" if line is not None else short


def render_text(report: dict[str, Any], *, width: int = 80) -> str:
    """The summary for a terminal, most important first."""
    w = max(width, 60)
    out: list[str] = []
    add = out.append
    ranks = report["ranks"]
    inp = report["inputs"]
    nfiles = len(inp["trace_files"]) + len(inp["text_logs"])
    head = f"traceview: {report['compiles']} compiles"
    head += f" on {len(ranks)} ranks" if ranks else ""
    head += f" from {nfiles} log file{'s' if nfiles != 1 else ''}"
    if inp.get("runs") and inp["runs"] > 1:
        head += f" ({inp['runs']} runs; --latest keeps the newest)"
    add(head)
    add("=" * min(len(head), w))

    storms = report["recompile_storms"]
    if storms:
        add("")
        groups = _group_ranks(
            storms, lambda s: (s["function"], s["filename"], s["line"], s["compiles"], s["hit_recompile_limit"],
                               tuple((c["kind"], c["count"]) for c in s["causes"]))
        )
        add(f"RECOMPILES ({len(groups)} functions)")
        for s, ranks in groups[:8]:
            limit = "  HIT RECOMPILE LIMIT" if s["hit_recompile_limit"] else ""
            add(f"  {_ranks(ranks)}{printable(s['function'] or '?')} {_loc(s['filename'], s['line'])}: "
                f"{s['compiles']} compiles, {s['compile_seconds']:.1f}s{limit}")
            for c in s["causes"][:3]:
                out.extend(_wrap(f"cause: {c['text']} ({c['count']}x)", w, "    "))
                out.extend(_wrap(f"fix: {c['fix']}", w, "      "))
    gbs = report["graph_breaks"]
    if gbs:
        add("")
        total = sum(g["count"] for g in gbs)
        add(f"GRAPH BREAKS ({len(gbs)} distinct, {total} in all)")
        for g in gbs[:10]:
            skip = "  FRAME FELL BACK TO EAGER" if g["frame_skipped"] else ""
            gb = f" [{g['gb_id']}]" if g.get("gb_id") else ""
            add(f"  {g['count']}x {_loc(g['filename'], g['line'])} in {printable(g['function'] or '?')}{gb}{skip}")
            out.extend(_wrap(one_line(g["reason"], 400), w, "      "))
            if g["frame_skipped"] and g.get("frame_function"):
                out.extend(_wrap(f"frame {g['frame_function']} ({_loc(g['frame_filename'], g['frame_line'])}) runs eagerly: "
                                 "move the break out of the loop or fix its cause", w, "      "))
    fails = report["failures"]
    if fails:
        add("")
        add(f"FAILED COMPILES ({len(fails)})")
        for f in fails[:10]:
            add(f"  {_rank(f['rank'])}[{f['compile_id']}] {printable(f.get('function') or '?')} "
                f"{_loc(f['filename'], f['line'])}: {f['category']} ({printable(f['fail_type'] or '')})")
            out.extend(_wrap(f["reason"] or "", w, "      "))
            out.extend(_wrap("next: " + f["next_step"], w, "      "))
    div = report["rank_divergence"]
    if div:
        add("")
        add(f"RANK DIVERGENCE ({len(div)} ranks differ from the majority)")
        for d in div[:16]:
            out.extend(_wrap(f"rank {d['rank']}: {d['detail']}", w, "  "))
    ctime = report["compile_time"]
    add("")
    add(f"COMPILE TIME {ctime['total_s']:.1f}s in all")
    for t in ctime["top"][:5]:
        add(f"  {t['seconds']:7.2f}s  {_rank(t['rank'])}[{t['compile_id']}] {printable(t['function'] or '?')} "
            f"{_loc(t['filename'], t['line'])}")
    cache = report["cache"]
    if cache["fx_graph_hits"] or cache["fx_graph_misses"] or cache["aot_autograd_hits"] or cache["aot_autograd_misses"]:
        add(f"  cache: FX graph {cache['fx_graph_hits']} hits / {cache['fx_graph_misses']} misses, "
            f"AOTAutograd {cache['aot_autograd_hits']} hits / {cache['aot_autograd_misses']} misses")
    add("")
    add("PER RANK")
    for r in report["per_rank"]:
        label = f"rank {r['rank']}" if r["rank"] is not None else "process"
        status = ", ".join(f"{r[k]} {k.replace('_', ' ')}" for k in ("ok", "failed", "graph_break_restarts", "empty_graph", "no_metrics") if r[k])
        add(f"  {label}: {r['compiles']} compiles ({status}), {r['compile_time_s']:.1f}s")
    parse = report["parse"]
    files = parse["files"]
    add("")
    add("INPUT")
    env = sum(f.get("envelopes") or 0 for f in files)
    recs = sum(f.get("records") or 0 for f in files)
    mb = sum(f.get("bytes") or 0 for f in files) / 1e6
    line = f"  {len(files)} files, {mb:.1f} MB, {env} envelopes"
    if recs:
        line += f", {recs} text-log records"
    add(line)
    bad = {k: sum(f.get(k) or 0 for f in files) for k in ("non_envelope_lines", "bad_json", "md5_mismatch", "unknown_kinds")}
    if any(bad.values()) or parse["problems"]:
        add("  problems: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in bad.items() if v)
            + f" ({parse['problems']} rows in the problems table)")
    for s in inp["stray_files"][:10]:
        add(f"  skipped {printable(s['path'])}: {s['why']}")
    if inp["left_out_by_latest"]:
        add(f"  --latest left out {len(inp['left_out_by_latest'])} files of older runs")
    return "\n".join(_fit(line, w) for line in out) + "\n"


def _fit(line: str, width: int) -> str:
    """Wrap a line that is too long, continuing it indented under itself."""
    if len(line) <= width:
        return line
    indent = " " * (len(line) - len(line.lstrip(" ")) + 4)
    return "\n".join(
        textwrap.wrap(line, width=width, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False)
    )


def render_origin(chains: list[Any]) -> str:
    """`traceview origin` output: one block per chain (several when the name is ambiguous)."""
    if not chains:
        return "no match\n"
    out = []
    if len(chains) > 1:
        out.append(f"{len(chains)} chains (the name is ambiguous or maps to several lines: narrow with --compile-id/--rank)")
    for ch in chains:
        out.append("")
        where = f"rank {ch.rank} " if ch.rank is not None else ""
        out.append(printable(f"{where}[{ch.compile_id}] ({ch.source})"))
        for label, value in ch.steps():
            out.append(printable(f"  {label:>16}: {value}"))
    return "\n".join(out) + "\n"
