"""The summary: findings first, most important first, as a JSON-able dict and as text.

`build_report` is the versioned JSON schema documented in docs/report.md; `render_text` lays it
out for an 80-column terminal. Every line of text passes through `printable` before it is
printed: log text is data (an ANSI escape shows as `^[`, a `[bold]` stays literal).
"""

from __future__ import annotations

import re
import textwrap
from collections import Counter
from typing import Any

import polars as pl

from parsers.code_location import whose
from parsers.compile_ids import label as id_label
from parsers.compile_ids import sort_key, text_occurrence_expr
from parsers.compiles import STATUSES
from parsers.frameless import is_frameless, kind_label
from parsers.tracebacks import uncaught_from_text
from traceview.analyze import compile_time as ct
from traceview.analyze.code_objects import describe
from traceview.analyze.collectives import collective_mismatches
from traceview.analyze.compile_facts import asserts_text, compile_facts
from traceview.analyze.crashes import CATEGORY_WORDS as CRASH_WORDS
from traceview.analyze.crashes import crash_findings
from traceview.analyze.cudagraphs import (
    cudagraph_counts,
    cudagraph_findings,
    recordings_per_function,
)
from traceview.analyze.divergence import rank_divergence
from traceview.analyze.failures import failures
from traceview.analyze.findings import (
    after_resets,
    code_label,
    divergence_key,
    failure_key,
    group_ranks,
    per_rank_key,
    ranks_text,
    slow_compile_key,
    storm_key,
)
from traceview.analyze.hotspots import graph_break_hotspots
from traceview.analyze.optimizer import compiled_optimizer_findings, scheduler_wrapper_advice
from traceview.analyze.storms import recompile_storms
from traceview.analyze.unfinished import unfinished_compiles
from traceview.printable import one_line, printable
from traceview.trace import Trace
from traceview.versions import REPORT_SCHEMA_VERSION


def _rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    return df.with_columns(pl.col(pl.Datetime).dt.to_string()).to_dicts()


def _round(df: pl.DataFrame, digits: int = 3) -> pl.DataFrame:
    return df.with_columns(pl.col(pl.Float64).round(digits))


def ranks_of(trace: Trace) -> list[int]:
    """Ranks present in any input (trace files, text-log prefixes, compiles); empty without."""
    cols = [
        df.select(pl.col("rank").cast(pl.Int64))
        for df in (trace.stats, trace.log_records, trace.compiles)
        if "rank" in df.columns
    ]
    if not cols:
        return []
    return sorted(int(x) for x in pl.concat(cols)["rank"].drop_nulls().unique().to_list())


def _use_optimizer_fix(storms: list[dict[str, Any]], optimizer: list[dict[str, Any]]) -> None:
    """An optimizer step's lr causes get the compiled-optimizer fix (a tensor lr), not the
    generic float advice (which promises a dynamic float after one recompile)."""
    by_code = {(o["rank"], o["function"], o["filename"], o["line"]): o for o in optimizer}
    for s in storms:
        o = by_code.get((s["rank"], s["function"], s["filename"], s["line"]))
        if o is None:
            continue
        for c in s["causes"]:
            if o["lr_source"] in (c.get("source") or "") or o["lr_source"] in (c.get("guard") or ""):
                c["fix"] = o["fix"]


def _with_scheduler_advice(hotspots: list[dict[str, Any]], trace: Trace) -> list[dict[str, Any]]:
    """The LR scheduler's step wrapper (gb0007 at `opt.step()`) gets its advice, not Dynamo's
    "avoid calling the function `Adam.step`"."""
    advice = scheduler_wrapper_advice(trace)
    for g in hotspots:
        a = advice.get((g["filename"], g["line"], g["function"]))
        if a is not None:
            g["advice"] = a
    return hotspots


class _CodeObjects:
    """Each code object described once (analyze.code_objects), for every row that names it."""

    def __init__(self, trace: Trace, storms: list[dict[str, Any]]) -> None:
        self._trace = trace
        self._seen = {(s["rank"], s["function"], s["filename"], s["line"]): s["code"] for s in storms if s.get("code")}

    def add(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for r in rows:
            k = (r.get("rank"), r.get("function"), r.get("filename"), r.get("line"))
            if k not in self._seen:
                self._seen[k] = describe(self._trace, rank=k[0], function=k[1], filename=k[2], line=k[3])
            r["code"] = self._seen[k]
        return rows

def _frameless_compiles(compiles: pl.DataFrame) -> list[dict[str, Any]]:
    """The compiles without a Dynamo frame (torch.export + AOTInductor): parsers.frameless."""
    rows = compiles.filter(pl.col("compile_kind").fill_null("dynamo") != "dynamo").select(
        "rank", "compile_id", "compile_kind", pl.col("compile_kind").map_elements(kind_label, return_dtype=pl.String).alias("what"),
        "status", pl.col("total_time_s").round(3).alias("seconds"), "inductor_compile_time_s", "code_gen_time_s", "file", "metrics_lineno",
    )
    return _rows(_round(rows))


def build_report(trace: Trace) -> dict[str, Any]:
    """The whole summary as plain data (see docs/report.md for the schema)."""
    compiles = trace.compiles
    uncaught = uncaught_from_text(trace.other_lines, trace.log_records)  # read by both: once
    collectives = collective_mismatches(trace)
    fails = failures(trace, uncaught=uncaught)
    crashes = crash_findings(trace, uncaught=uncaught, collectives=collectives)
    per_rank = (
        compiles.group_by("rank")
        .agg(
            pl.len().alias("compiles"),
            *[(pl.col("status") == s).sum().alias(s) for s in STATUSES],
            pl.col("total_time_s").sum().round(3).alias("compile_time_s"),
        )
        .sort("rank", nulls_last=False)
    )
    # a compile id used again after torch._dynamo.reset() is another compile
    logged_ids = (
        trace.log_records.filter(pl.col("compile_id").is_not_null())
        .with_columns(text_occurrence_expr().alias("occurrence"))
        .select("rank", "compile_id", "occurrence")
        .unique()
    )
    inp = trace.inputs
    problems = trace.problems
    storms = recompile_storms(trace)
    codes = _CodeObjects(trace, storms)
    optimizer = compiled_optimizer_findings(trace, storms=storms)
    _use_optimizer_fix(storms, optimizer)
    report: dict[str, Any] = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "ranks": ranks_of(trace),
        "compiles": compiles.height,
        "compile_ids_in_text_logs": logged_ids.height,
        "frameless_compiles": _frameless_compiles(compiles),
        "recompiles": storms,
        "compiled_optimizer": optimizer,
        "graph_breaks": _with_scheduler_advice(graph_break_hotspots(trace), trace),
        "failures": [
            {**{k: v for k, v in r.items() if k != "headline"}, "reason": r["headline"], "reason_full": r["reason"]}
            for r in _rows(fails)
        ],
        "crashes": crashes,
        "unfinished_compiles": unfinished_compiles(trace),
        "compile_time": {
            "total_s": round(float(compiles["total_time_s"].fill_null(0).sum()), 3),
            "phases_s": ct.phase_totals(trace),
            "top": codes.add(_rows(_round(ct.top_compiles(trace)))),
            "by_function": codes.add(_rows(_round(ct.by_function(trace).head(10)))),
            "spans": _rows(_round(ct.span_totals(trace))),
            "autotuning": _rows(_round(ct.autotuning(trace), 6)),
        },
        "cache": ct.cache_summary(trace),
        "cudagraphs": {
            **cudagraph_counts(trace),
            "findings": cudagraph_findings(trace),
            "functions": recordings_per_function(trace),
        },
        "facts": compile_facts(trace),
        "rank_divergence": _rows(rank_divergence(trace)),
        "collectives": collectives,
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
            "files": _rows(trace.stats),
            "problems": problems.height,
            "problem_counts": dict(sorted(Counter(problems["problem"].to_list()).items())) if problems.height else {},
            "problem_examples": _rows(problems.head(20)),
        },
    }
    return report


# ---------------------------------------------------------------------------------- text
_CATEGORY_WORDS = {
    "graph_break": "graph break",
    "backend_compiler_failure": "backend compiler failure",
    "recompile_limit": "recompile limit",
    "internal_dynamo_error": "internal Dynamo error",
    "export_guard_data_dependent": "export / guard / data-dependent error",
    "user_exception": "user exception",
    "accuracy": "accuracy failure",
    "user_error": "error in your code (fails in eager too)",
    "constraint_violation": "constraint violation",
    "other": "other failure",
    **CRASH_WORDS,
}


def clean_line(text: Any) -> str:
    """One line of log text made safe to print: control characters visible, no tabs/newlines."""
    return printable(str(text if text is not None else "")).replace("\t", " ").replace("\n", " ")



class _Paths:
    """Short, unambiguous names for the files of a report: module-relative for torch's, a
    library's and Python's code (parsers.code_location), else the shortest path suffix no other
    user file shares."""

    def __init__(self, report: dict[str, Any]) -> None:
        names: set[str] = set()
        for s in report["recompiles"]:
            names.add(s.get("filename") or "")
        for g in report["graph_breaks"]:
            names.update((g.get("filename") or "", g.get("frame_filename") or ""))
        for f in report["failures"] + report.get("crashes", []):
            names.add(f.get("filename") or "")
        for t in report["compile_time"]["top"] + report["compile_time"]["by_function"]:
            names.add(t.get("filename") or "")
        facts = report.get("facts") or {}
        for f in facts.get("specializations", []) + facts.get("unbacked_symbols", []):
            names.add(f.get("user_file") or "")
        names.discard("")
        self._short: dict[str, str] = {}
        for s in report["recompiles"]:
            names.add(((s.get("code") or {}).get("call_site") or {}).get("filename") or "")
        for t in report["compile_time"]["top"] + report["compile_time"]["by_function"]:
            names.add(((t.get("code") or {}).get("call_site") or {}).get("filename") or "")
        names.discard("")
        local = [n for n in names if whose(n).is_user]
        for n in names:
            if not whose(n).is_user:
                self._short[n] = whose(n).shown
                continue
            parts = n.split("/")
            for k in range(1, len(parts) + 1):
                suffix = "/".join(parts[-k:])
                # another file with this suffix; not the same file written with a shorter
                # prefix (a text log's `wt/x/train.py` for the trace's `/work/wt/x/train.py`)
                if not any(
                    o != n and (o == suffix or o.endswith("/" + suffix)) and not (o.endswith("/" + n) or n.endswith("/" + o))
                    for o in local
                ):
                    self._short[n] = suffix
                    break
            else:
                self._short[n] = n

    def code(self, row: dict[str, Any]) -> str:
        """A compiled code object as its user knows it (findings.code_label)."""
        return code_label(row, self.show)

    def show(self, filename: str | None, line: Any = None) -> str:
        if not filename:
            return "?"
        s = self._short.get(filename, filename)
        return f"{s}:{line}" if line is not None else s


def _rank(r: Any) -> str:
    return "" if r is None else f"rank {r} "


def seconds_text(seconds: Any) -> str:
    """Seconds as every view writes them: 2 decimals below 100 s."""
    v = float(seconds or 0.0)
    return f"{v:.2f}s" if v < 100 else f"{v:.0f}s"



def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


class _Text:
    def __init__(self, width: int) -> None:
        self.width = width
        self.lines: list[str] = []

    def add(self, text: str = "", indent: str = "", rest: str | None = None) -> None:
        """Add `text` wrapped to the width: first line after `indent`, the others after `rest`."""
        text = clean_line(text)
        if not text:
            self.lines.append(indent.rstrip())
            return
        self.lines.extend(
            textwrap.wrap(
                text,
                width=self.width,
                initial_indent=indent,
                subsequent_indent=rest if rest is not None else indent + "    ",
                break_long_words=True,
                break_on_hyphens=False,
            )
        )

    def label(self, label: str, text: str, indent: str = "    ") -> None:
        """`label: text` with continuation lines aligned under the text."""
        self.add(f"{label} {clean_line(text)}", indent, indent + " " * (len(label) + 1))

    def heading(self, text: str) -> None:
        self.lines.append("")
        self.add(text, "", "  ")


def render_text(report: dict[str, Any], *, width: int = 80) -> str:
    """The summary for a terminal, most important first; no line longer than `width`."""
    w = max(width, 60)
    t = _Text(w)
    paths = _Paths(report)
    storms = report["recompiles"]
    gbs = report["graph_breaks"]
    fails = report["failures"]
    div = report["rank_divergence"]
    ranks = report["ranks"]
    inp = report["inputs"]
    nfiles = len(inp["trace_files"]) + len(inp["text_logs"])
    crashes = report.get("crashes") or []
    text_only = report["compiles"] == 0 and (
        report.get("compile_ids_in_text_logs", 0) > 0 or (inp["text_logs"] and not inp["trace_files"])
    )
    if text_only:
        head = f"traceview: {_plural(report['compile_ids_in_text_logs'], 'compile id')} in the text log"
    else:
        head = f"traceview: {report['compiles']} compiles"  # tests of other commands read this form
    head += f" on {_plural(len(ranks), 'rank')}" if ranks else ""
    head += f" from {_plural(nfiles, 'log file')}"
    if inp.get("runs") and inp["runs"] > 1:
        head += f" ({inp['runs']} runs; --latest keeps the newest)"
    t.add(head, "", "    ")
    t.lines.append("=" * min(max(len(x) for x in t.lines), w))
    found = []
    unfinished = report.get("unfinished_compiles") or []
    coll = (report.get("collectives") or {}).get("mismatches") or []
    if coll:
        found.append(f"collectives do not match across ranks ({ranks_text(sorted({r for m in coll for r in m['ranks']})).strip()})")
    if crashes:
        found.append("the program crashed" if len(crashes) == 1 else f"{len(crashes)} processes crashed")
    if unfinished:
        behind = sum(1 for u in unfinished if u["behind"])
        found.append(_plural(len(unfinished), "unfinished compile") + (f" ({behind} behind the other ranks: likely hang)" if behind else ""))
    act = [s for s in storms if not s.get("expected") and not s.get("fixed_later")]
    expected = [s for s in storms if s.get("expected")]
    fixed = [s for s in storms if not s.get("expected") and s.get("fixed_later")]
    if act:
        limit = sum(1 for s in act if s["hit_recompile_limit"])
        code_objects = {(s["function"], s["filename"], s["line"]) for s in act}
        on = f" on {_plural(len({s['rank'] for s in act}), 'rank')}" if len(act) > len(code_objects) else ""
        found.append(
            _plural(len(code_objects), "recompiling function") + on + (f" ({limit} hit the limit)" if limit else "")
        )
    if gbs:
        eager = sum(1 for g in gbs if g["frame_skipped"])
        found.append(_plural(len(gbs), "graph break") + (f" ({eager} sent a whole frame to eager)" if eager else ""))
    if fails:
        found.append(_plural(len(fails), "failed compile"))
    cgf = report.get("cudagraphs", {}).get("findings", [])
    if cgf:
        found.append(_plural(len(cgf), "CUDA-graph finding"))
    if div:
        found.append(_plural(len(div), "diverging rank") + f" ({ranks_text([d['rank'] for d in div]).strip()})")
    none = "none that needs action" if expected or fixed else "none (no recompiles, graph breaks or failures)"
    t.add("findings: " + (", ".join(found) if found else none), "", "    ")
    if expected:
        n = len({(s["function"], s["filename"], s["line"]) for s in expected})
        t.add(f"expected: {_plural(n, 'function')} recompiled by design (nothing to fix)", "", "    ")
    if fixed:
        n = len({(s["function"], s["filename"], s["line"]) for s in fixed})
        t.add(f"fixed: {_plural(n, 'function')} recompiled, then compiled once after the run applied the fix", "", "    ")
    if text_only:
        # cache lookups are in a text log with TORCH_LOGS=torch._inductor.codecache (FACTS)
        what = "compile times or status" if report["cache"].get("from_text_log") else "compile times, cache or status"
        t.add(f"text log only: no {what} (add the TORCH_TRACE directory)", "", "    ")

    if unfinished:
        _render_unfinished(t, paths, unfinished)
    waits = (report.get("collectives") or {}).get("waits") or []
    execution = (report.get("collectives") or {}).get("execution") or []
    if coll or waits or execution:
        t.heading("COLLECTIVES  " + ("the ranks do not issue the same collectives" if coll else
                                     "ranks waited for another's compile" if waits else "the ranks ran different compiled graphs"))
        for m in coll:
            t.add(m["message"], "  ", "      ")
            t.label("next:", m["next_step"])
        for w in waits:
            t.add(w["message"] + " (estimated from the compile times)", "  ", "      ")
        for e in execution:
            t.add(e["message"], "  ", "      ")
    unknown = (report.get("collectives") or {}).get("unknown") or []
    if coll and unknown:
        u = unknown[0]
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        t.add(f"rank {u['rank']}'s [{u['compile_id']}] schedule is unknown{more}: {u['why']}", "  ", "      ")
    if crashes:
        t.heading("CRASHED  the program ended with an uncaught error")
        for c in crashes:
            where = f"{c['function'] or '?'} ({paths.show(c['filename'], c['line'])})" if c.get("filename") else "?"
            t.add(
                f"{_rank(c['rank'])}{c['exc_type']} at {where}: "
                f"{_CATEGORY_WORDS.get(c['category'], c['category'])}, raised in {c['raised_in']}",
                "  ",
                "      ",
            )
            if c.get("code"):
                t.add(c["code"], "    ", "      ")
            if c.get("called_from"):
                cf = c["called_from"]
                code = f": {cf['code']}" if cf.get("code") else ""
                t.add(f"called from {cf['function']} ({paths.show(cf['filename'], cf['line'])}){code}", "    ", "      ")
            if c.get("kernel"):
                t.add(f"failing kernel: {c['kernel']}", "    ", "      ")
            t.add(c["message"] or "", "    ", "      ")
            de = c.get("distributed_error")
            if de and de["line"] not in (c.get("message") or ""):
                t.label("error:", de["line"])
            if c.get("certainty") != "certain":
                t.label("how sure:", f"{c['certainty']} ({c.get('evidence') or 'indirect evidence'})")
            t.label("next:", c["next_step"])

    optim = {(o["rank"], o["function"], o["filename"], o["line"]): o for o in report.get("compiled_optimizer", [])}
    if act:
        _render_storms(t, paths, act, "RECOMPILES", "most costly first", optim)
    if fixed:
        _render_storms(t, paths, fixed, "RECOMPILES FIXED LATER", "the run applied the fix after torch._dynamo.reset()", optim)
    if expected:
        _render_storms(t, paths, expected, "EXPECTED RECOMPILES", "nothing to fix", optim)
    if gbs:
        total = sum(g["count"] for g in gbs)
        t.heading(f"GRAPH BREAKS  {len(gbs)} distinct, {total} in all, most impact first")
        for g in gbs[:10]:
            gb = f" [{g['gb_id']}]" if g.get("gb_id") else ""
            where = f"{ranks_text(g['ranks'])}{g['count']}x" if g["ranks"] else f"{g['count']}x"
            # the break's line, not the compiled frame's first line (Frames shows that one): said
            starts = (
                f" (its frame starts at line {g['frame_line']})"
                if g.get("frame_line") is not None and g.get("frame_function") == g.get("function")
                and g.get("frame_filename") == g.get("filename") and g["frame_line"] != g.get("line")
                else ""
            )
            t.add(f"{paths.show(g['filename'], g['line'])} in {g['function'] or '?'}{starts}{gb}, {where}", "  ", "      ")
            t.add(one_line(g["reason"], 400), "    ", "      ")
            if g.get("explanation") and g["explanation"] != g["reason"]:
                src = " (torch's graph-break registry)" if g.get("explanation_from") == "registry" else ""
                t.label("why:", one_line(g["explanation"], 300) + src)
            if g["frame_skipped"]:
                frame = f"{g.get('frame_function') or '?'} ({paths.show(g.get('frame_filename'), g.get('frame_line'))})"
                why = f": {g['frame_skipped_why']}" if g.get("frame_skipped_why") else ""
                t.add(f"WHOLE FRAME RAN EAGERLY: {frame}{why}", "    ", "      ")
                if g.get("advice"):
                    t.label("fix:", g["advice"])
            elif g.get("advice"):
                # torch's hint that names a config setting is the fix
                t.label("fix:" if g.get("config_fix") else "hint:", g["advice"])
        if len(gbs) > 10:
            t.add(f"… {len(gbs) - 10} more (--json lists all)", "  ")
    if fails:
        t.heading(f"FAILED COMPILES  {len(fails)}, most serious first")
        # the same failure on many ranks is shown once, with its ranks
        fgroups = group_ranks(fails, failure_key)
        for f, franks in fgroups[:10]:
            ft = f" ({f['fail_type']})" if f.get("fail_type") else ""
            t.add(
                f"{ranks_text(franks)}[{id_label(f['compile_id'], f.get('occurrence'), f.get('attempts'))}] {f.get('function') or '?'} "
                f"({paths.show(f['filename'], f['line'])}): {_CATEGORY_WORDS.get(f['category'], f['category'])}{ft}",
                "  ",
                "      ",
            )
            t.add(f["reason"] or "", "    ", "      ")
            if f.get("occurrence") and f["occurrence"] > 1:
                t.add(
                    f"(#{f['occurrence']}: compile id {f['compile_id']} was used again in this process after "
                    "an earlier compile with that id ended: torch._dynamo.reset() restarts the ids)",
                    "    ",
                    "      ",
                )
            if f.get("certainty") and f["certainty"] != "certain":
                t.label("how sure:", f"{f['certainty']} ({f.get('evidence') or 'indirect evidence'})")
            t.label("next:", f["next_step"])
        if len(fgroups) > 10:
            t.add(f"… {len(fgroups) - 10} more (--json lists all)", "  ")
    if cgf or report.get("cudagraphs", {}).get("cudagraphified_compiles"):
        _render_cudagraphs(t, report["cudagraphs"])
    if div:
        if len(report["ranks"]) == 2 and None not in report["ranks"]:  # no majority of two: said so
            t.heading(f"RANK DIVERGENCE  the 2 ranks compiled differently (rank {report['ranks'][1]} shown against rank {report['ranks'][0]})")
        else:
            t.heading(f"RANK DIVERGENCE  {_plural(len(div), 'rank')} {'differs' if len(div) == 1 else 'differ'} from the majority")
        dgroups = group_ranks(div, divergence_key)  # 1,000 ranks that differ alike: one line
        for d, ranks in dgroups[:16]:
            t.add(f"{ranks_text(ranks).strip()}: {d['detail']}", "  ", "    ")
        if len(dgroups) > 16:
            t.add(f"… {len(dgroups) - 16} more (--json lists all)", "  ")
    _render_facts(t, report, paths)
    _render_time(t, report, paths, text_only)
    _render_ranks_and_inputs(t, report)
    return "\n".join(t.lines) + "\n"


def _render_cudagraphs(t: _Text, cg: dict[str, Any]) -> None:
    found = cg["findings"]
    if not cg["text_log_rows"]:
        t.heading(f"CUDA GRAPHS  {_plural(cg['cudagraphified_compiles'], 'compile')} handed to CUDA graphs (reduce-overhead)")
        t.add("whether they were graphed is not in the trace: add TORCH_LOGS=cudagraphs to see the code left out "
              "of CUDA graphs and why, the graphs recorded per shape, and the re-records", "  ", "  ")
        if not found:
            return
    else:
        t.heading(
            f"CUDA GRAPHS  {_plural(len(found), 'finding') if found else 'nothing to fix'}; "
            f"{_plural(cg['recorded_graphs'], 'graph')} recorded, "
            f"{cg['non_cudagraphable_partitions']} of {_plural(cg['partitions'], 'partition')} not cudagraphable"
        )
    for f in found[:10]:
        t.add(f"{ranks_text([f['rank']])}{f['headline']}", "  ", "      ")
        t.label("fix:", f["fix"])
    if len(found) > 10:
        t.add(f"… {len(found) - 10} more (--json lists all)", "  ")
    funcs = cg.get("functions") or []
    if funcs:
        per = ", ".join(f"{ranks_text([r['rank']])}{r['function'] or '?'} {r['graphs']}" for r in funcs[:6])
        more = f", … {len(funcs) - 6} more" if len(funcs) > 6 else ""
        t.label("graphs per function:", per + more, "  ")


def _render_unfinished(t: _Text, paths: _Paths, unfinished: list[dict[str, Any]]) -> None:
    """Compiles that began and never logged their metrics (analyze.unfinished)."""
    t.heading("UNFINISHED COMPILES  begun, no compilation_metrics: killed, hung or still running when the log ends")
    for u in unfinished[:8]:
        where = f" in {u['phase']}" if u.get("phase") else ""
        inner = f" (innermost open span: {u['innermost_span']})" if u.get("innermost_span") and u["innermost_span"] != u.get("phase") else ""
        running = f" for {seconds_text(u['running_s'])} up to the log's last line" if u.get("running_s") is not None else ""
        t.add(
            f"{_rank(u['rank'])}[{id_label(u['compile_id'], u.get('occurrence'))}] {paths.code(u)}{where}{running}{inner}",
            "  ",
            "      ",
        )
        done = [o for o in u.get("others") or [] if o.get("finished_before_s") is not None]
        if done:
            first = min(o["finished_before_s"] for o in done)
            t.label("others:", f"{ranks_text([o['rank'] for o in done]).strip()} finished [{u['compile_id']}], "
                    f"{seconds_text(first)} or more before the log's last line")
        if u.get("behind"):
            nxt = (
                "a likely hang: this rank is behind the others, which wait for it in their next collective. "
                f"py-spy dump --pid <rank {u['rank']}'s pid> shows where it is; TORCH_COMPILE_DEBUG=1 on a rerun "
                "keeps the compile's inputs"
            )
        else:
            nxt = (
                "if the job still runs, the compile is in progress; if it hangs, py-spy dump --pid <pid> shows "
                "where; TORCH_COMPILE_DEBUG=1 on a rerun keeps this compile's inputs"
            )
        t.label("next:", nxt)
    if len(unfinished) > 8:
        t.add(f"… {len(unfinished) - 8} more (--json lists all)", "  ")


def _render_storms(
    t: _Text, paths: _Paths, storms: list[dict[str, Any]], title: str, order: str, optim: dict[tuple, dict[str, Any]]
) -> None:
    """One block per recompiling function: the count, then one line per primary cause with its
    fix (secondary failed guards are counted, not listed)."""
    groups = group_ranks(storms, storm_key)
    # a function that recompiled differently on two rank groups is two blocks, one function
    functions = {(s["function"], s["filename"], s["line"]) for s in storms}
    t.heading(f"{title}  {_plural(len(functions), 'function')}, {order}")
    for s, rs in groups[:8]:
        line = f"{ranks_text(rs)}{paths.code(s)}{after_resets(s.get('epoch'))}: {s['compiles']} compiles"
        failed = (s.get("failed_compiles") or 0) - (1 if s.get("limit_compile_id") else 0)
        if failed > 0:
            line += f" ({failed} failed)"
        if s["compile_seconds"]:
            line += f", {seconds_text(s['compile_seconds'])}"
        if s["hit_recompile_limit"]:
            lim = f" ({s['recompile_limit']})" if s.get("recompile_limit") else ""
            at = f" at [{s['limit_compile_id']}]" if s.get("limit_compile_id") else ""
            line += f"; HIT THE RECOMPILE LIMIT{lim}{at}, runs eagerly from then on"
        if s.get("forced_dynamic_false"):
            line += "; compiled with dynamic=False"
        t.add(line, "  ", "      ")
        code = s.get("code") or {}
        if code.get("per_instance") is not None and code.get("module_class"):
            cls = code["module_class"].rsplit(".", 1)[-1]
            t.label("shared:", (
                f"no: torch guards the object itself (ID_MATCH on self), so each {cls} compiles on its own"
                if code["per_instance"] else
                f"one code object for every {cls}; torch guards the class, not the object, so the instances share "
                "each compile while their guarded values match"
            ))
        opt = optim.get((s["rank"], s["function"], s["filename"], s["line"]))
        if opt:  # the compiled-optimizer + LR-scheduler pattern: one cause, the float lr
            t.label("cause:", f"{opt['headline']} ({opt['explanation']})")
            t.label("fix:  ", opt["fix"])
            continue
        for c in s["causes"][:3]:
            tag = "expected: " if c.get("expected") and not s.get("expected") else ""
            sure = " (likely: read indirectly)" if c.get("certainty") == "likely" else ""
            t.label("cause:", f"{tag}{c['text']}, {_plural(c['count'], 'recompile')}{sure}")
            t.label("fix:  ", c["fix"])
        if len(s["causes"]) > 3:
            t.add(f"… {len(s['causes']) - 3} more causes (--json lists all)", "    ")
        if s.get("secondary_guards"):
            t.add(
                f"({_plural(s['secondary_guards'], 'more failed guard')} against older cache entries, "
                f"secondary: one primary cause per recompile is counted)",
                "    ",
                "      ",
            )
        if not s["causes"]:
            t.label("cause:", "no failed guard logged (TORCH_LOGS=recompiles_verbose prints them)")
    if len(groups) > 8:
        t.add(f"… {len(groups) - 8} more (--json lists all)", "  ")


def unbacked_line(u: dict[str, Any], show: Any, *, with_compile: bool = True) -> str:
    """One FACTS line for a group of unbacked symbols (compile_facts.unbacked_symbols):
    `[1/0] u0-u3: data-dependent sizes from torch.nonzero at moe.py:30 (code); runtime asserts:
    each >= 0; graph break at moe.py:31: Data-dependent branching (gb0170)`. `show`: the
    report's short path of (filename, line); `with_compile`: lead with the rank and compile id
    (not where the compile is shown already: the TUI's compile detail)."""
    head = f"{_rank(u.get('rank'))}[{id_label(u['compile_id'], u.get('occurrence'))}] " if with_compile else ""
    head += u["symbols_text"]
    op = u.get("op") or "a data-dependent op"
    what = "sizes" if len(u["symbols"]) > 1 else "size"
    if u.get("user_line") is None:
        if u.get("created_by") == "backend":
            return f"{head}: data-dependent {what} from {op}, re-created by the backend re-tracing the graph (no user line of their own)"
        return f"{head}: data-dependent {what} from {op} (the log names no user line)"
    code = f" ({u['user_code']})" if u.get("user_code") else ""
    line = f"{head}: data-dependent {what} from {op} at {show(u['user_file'], u['user_line'])}{code}"
    if a := asserts_text(u["symbols"], u.get("asserts") or []):
        line += f"; runtime asserts: {a}"
    for b in u.get("graph_breaks") or []:
        gb = f" ({b['gb_id']})" if b.get("gb_id") else ""
        line += f"; graph break at {show(b['filename'], b['line'])}: {one_line(b.get('reason') or '?', 120)}{gb}"
    return line


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def ddp_split_line(d: dict[str, Any]) -> str:
    """One FACTS line for a DDPOptimizer split (compile_facts.ddp_splits)."""
    sizes = d["param_bytes"]
    per = ", ".join("?" if b is None else _mib(b) for b in sizes)
    who = f" on {ranks_text(d['ranks']).strip()}" if ranks_text(d["ranks"]) else ""
    return (
        f"DDPOptimizer split [{d['compile_id']}]{who} into {_plural(d['submodules'], 'submodule')} at the gradient-bucket "
        f"boundaries (parameters per submodule, in graph order: {per}); each submodule is compiled on its own"
    )


def _render_facts(t: _Text, report: dict[str, Any], paths: _Paths) -> None:
    """How torch compiled: not problems by themselves, but they explain the rest."""
    f = report.get("facts") or {}
    lines: list[str] = []
    for sp in f.get("specializations", []):
        at = f" at {paths.show(sp['user_file'], sp['user_line'])}" if sp.get("user_file") else ""
        code = f" ({sp['user_code']})" if sp.get("user_code") else ""
        lines.append(
            f"[{sp['compile_id']}] {sp.get('source') or sp['symbol']} specialized to {sp['value']}{at}{code}: "
            f"a dynamic dimension forced to a constant ({sp['reason']}); "
            + ("the exported program accepts only this size" if is_frameless(sp["compile_id"]) else "another size will recompile")
        )
    for d in f.get("export_dims", []):
        if d.get("specialized_to") is not None:
            continue  # said above
        at = f", exported at {paths.show(d['user_file'], d['user_line'])}" if d.get("user_file") else ""
        lines.append(
            f"[{d['compile_id']}] export: {d.get('source') or d['symbol']} is dynamic ({d['symbol']}, range {d.get('range') or '?'}, "
            f"traced with {d.get('example')}){at}: the compiled program accepts any size in that range"
        )
    for u in f.get("unbacked_symbols", []):
        lines.append(unbacked_line(u, paths.show))
    for p in f.get("pgo", []):
        if p["action"] == "get":
            dyn = f": starts with {p['detail']}" if p.get("detail") and "?" in p["detail"] else ""
            lines.append(
                f"[{p['compile_id']}] PGO profile read ({p.get('where') or 'local'} code state){dyn}: this run "
                "starts with the dimensions an earlier run found dynamic, so it recompiles less"
            )
        else:
            lines.append(f"[{p['compile_id']}] PGO profile written" + (f" ({p['detail']})" if p.get("detail") else ""))
    cag = f.get("compiled_autograd_graphs", [])
    if cag:
        ids = ", ".join(g["id"] + (f" (compiled as {', '.join(g['compiles'])})" if g["compiles"] else "") for g in cag)
        lines.append(f"{_plural(len(cag), 'compiled-autograd graph')} (backward captured by compiled autograd): {ids}")
    for h in f.get("higher_order_ops", []):
        n = f" x{h['count']}" if h["count"] > 1 else ""
        lines.append(f"[{h['compile_id']}] higher-order op {h['op']}{n} in the captured graph")
    for d in f.get("ddp_splits", []):
        lines.append(ddp_split_line(d))
    bypass = {(c["cache"], c["reason"]) for c in f.get("cache_events", []) if c["event"] == "bypass"}
    for cache, why in sorted(bypass, key=str):
        name = {"fx_graph": "FX graph", "aot_autograd": "AOTAutograd"}.get(cache, cache)
        lines.append(f"{name} cache bypassed: {why or 'no reason logged'}: every run compiles this graph from scratch (make it cacheable if compile time matters)")
    # lookups a text log gave (the trace has none of them): what COMPILE TIME cannot show
    # for a text log alone; counted once with the trace's (compile_time.cache_counts)
    by_compile = (report.get("cache") or {}).get("text_log_by_compile") or []
    for cache in ("fx_graph", "aot_autograd"):
        mine = [c for c in by_compile if c["cache"] == cache]
        if not mine:
            continue
        n = {e: sum(c["count"] for c in mine if c["event"] == e) for e in ("hit", "miss", "bypass")}
        ids = []
        for e, word in (("hit", "hit"), ("miss", "missed"), ("bypass", "bypassed")):
            cids = sorted({c["compile_id"] or "?" for c in mine if c["event"] == e}, key=sort_key)
            if cids:
                ids.append(f"{word} in {', '.join(cids[:6])}" + (f" … {len(cids) - 6} more" if len(cids) > 6 else ""))
        name = {"fx_graph": "FX graph", "aot_autograd": "AOTAutograd"}[cache]
        by = f" / {n['bypass']} bypasses" if n["bypass"] else ""
        lines.append(f"{name} cache (text log): {n['hit']} hits / {n['miss']} misses{by} ({'; '.join(ids)})")
    if not lines:
        return
    t.heading("FACTS  how torch compiled (not problems by themselves)")
    for line in lines[:16]:
        t.add(line, "  ", "      ")
    if len(lines) > 16:
        t.add(f"… {len(lines) - 16} more (--json lists all)", "  ")


def _of_which(ph: dict[str, Any]) -> str:
    """What of Inductor's time went to codegen and autotuning, as parts that do not overlap
    (autotuning during codegen is said to be part of it), so they never add up to more than
    Inductor's time: " (of which codegen 8.97s, 4.89s of it autotuning)"."""
    codegen, at = ph.get("codegen") or 0, ph.get("autotuning") or 0
    in_cg = min(ph.get("autotuning_in_codegen") or 0, at)
    inner = []
    if codegen:
        inner.append(f"codegen {seconds_text(codegen)}" + (f", {seconds_text(in_cg)} of it autotuning" if seconds_text(in_cg) != seconds_text(0) else ""))
    rest = at - in_cg if codegen else at
    if seconds_text(rest) != seconds_text(0):
        inner.append(f"autotuning {seconds_text(rest)}" + (" outside codegen" if codegen else ""))
    return f" (of which {', '.join(inner)})" if inner else ""


def _compile_name(r: dict[str, Any], paths: _Paths) -> str:
    """`function (place)` of a Dynamo compile; what a compile without a frame was."""
    if r.get("compile_kind") not in (None, "dynamo") and not r.get("function"):
        return kind_label(r["compile_kind"])
    return paths.code(r)


def _render_time(t: _Text, report: dict[str, Any], paths: _Paths, text_only: bool) -> None:
    ctime = report["compile_time"]
    if report["compiles"] == 0 and not ctime["autotuning"]:
        return
    unfinished = report.get("unfinished_compiles") or []
    head = f"COMPILE TIME  {seconds_text(ctime['total_s'])} in all" if not text_only else "COMPILE TIME  (not in a text log)"
    if unfinished:
        head += f" ({_plural(len(unfinished), 'unfinished compile')} not counted)"
    t.heading(head)
    ph = ctime["phases_s"]
    if ctime["total_s"]:
        parts = [f"dynamo {seconds_text(ph['dynamo'])}"]
        if ph["inductor"]:
            parts.append(f"aot {seconds_text(ph.get('aot', 0))}")
            parts.append(f"inductor {seconds_text(ph['inductor'])}" + _of_which(ph))
        else:
            parts.append(f"backend {seconds_text(ph['aot+backend'])}")
        if ph["backward"]:
            bwd_at = ph.get("backward_autotuning") or 0
            parts.append(f"backward {seconds_text(ph['backward'])}" + (f" (of which autotuning {seconds_text(bwd_at)})" if bwd_at else ""))
        t.label("phases:", ", ".join(parts), "  ")
    if ph.get("runtime_autotuning"):
        t.label("autotune:", f"{seconds_text(ph['runtime_autotuning'])} at run time (first calls of compiled kernels; not compile time)", "  ")
    if ctime["top"]:
        t.add("slowest compiles:", "  ")
        top = group_ranks(ctime["top"], slow_compile_key)
        for r, rks in top[:5]:
            t.add(
                f"{seconds_text(r['seconds']):>7}  {ranks_text(rks)}[{id_label(r['compile_id'], r.get('occurrence'), r.get('attempts'))}] {_compile_name(r, paths)}",
                "    ",
                "              ",
            )
    multi = [b for b in ctime["by_function"] if b["compiles"] > 1][:3]
    if multi:
        t.add("functions compiled more than once:", "  ")
        for b in multi:
            t.add(
                f"{seconds_text(b['seconds']):>7}  {_rank(b['rank'])}{paths.code(b)} in {b['compiles']} compiles",
                "    ",
                "              ",
            )
    for a in ctime["autotuning"][:4]:
        dt = re.sub(r"torch\.", "", a.get("dtypes") or "")
        dt = ", ".join(sorted(set(x.strip() for x in dt.split(",") if x.strip())))
        text = f"{a['op']}({a.get('shape') or '?'})" + (f" {dt}" if dt else "")
        if a.get("choices"):
            text += f": {a['choices']} choices"
        if a.get("best_kernel"):
            text += f", best {a['best_kernel']} {a['best_ms']:.4f} ms"
            if a.get("best_triton_kernel") and a["best_triton_kernel"] != a["best_kernel"]:
                text += f" (best Triton {a['best_triton_kernel']} {a['best_triton_ms']:.4f} ms)"
        secs = [f"{k} {seconds_text(a[c])}" for k, c in (("precompile", "precompile_s"), ("benchmark", "benchmark_s")) if a.get(c) is not None]
        if secs:
            text += "; " + ", ".join(secs)
        if a.get("failed_choices"):
            text += f", {_plural(a['failed_choices'], 'choice')} failed"
        t.label("autotune:", text, "  ")
    if len(ctime["autotuning"]) > 4:
        t.add(f"… {len(ctime['autotuning']) - 4} more autotuned ops (--json lists all)", "    ")
    cache = report["cache"]
    if any(cache[k] for k in ("fx_graph_hits", "fx_graph_misses", "aot_autograd_hits", "aot_autograd_misses")):
        def ratio(r: Any) -> str:
            return f" ({r * 100:.0f}% hits)" if r is not None else ""

        t.label(
            "cache:",
            f"FX graph {cache['fx_graph_hits']} hits / {cache['fx_graph_misses']} misses{ratio(cache['fx_graph_hit_ratio'])}, "
            f"AOTAutograd {cache['aot_autograd_hits']} hits / {cache['aot_autograd_misses']} misses"
            f"{ratio(cache['aot_autograd_hit_ratio'])}",
            "  ",
        )


def _render_ranks_and_inputs(t: _Text, report: dict[str, Any]) -> None:
    inp = report["inputs"]
    if report["per_rank"]:
        t.heading("PER RANK")
        # ranks that compiled the same way share a line
        groups = group_ranks(report["per_rank"], per_rank_key)
        for r, rks in groups[:12]:
            label = "process" if r["rank"] is None else ranks_text(rks).strip()
            each = " each" if len(rks) > 1 else ""
            status = ", ".join(f"{r[k]} {k.replace('_', ' ')}" for k in STATUSES if r[k])
            t.add(f"{label}: {r['compiles']} compiles ({status}), {seconds_text(r['compile_time_s'])}{each}", "  ", "    ")
        if len(groups) > 12:
            t.add(f"… {len(groups) - 12} more groups of ranks (--json lists every rank)", "  ")
    parse = report["parse"]
    files = parse["files"]
    t.heading("INPUT")
    env = sum(f.get("envelopes") or 0 for f in files)
    recs = sum(f.get("records") or 0 for f in files)
    mb = sum(f.get("bytes") or 0 for f in files) / 1e6
    line = f"{_plural(len(files), 'file')}, {mb:.1f} MB, {env} envelopes"
    if recs:
        line += f", {recs} text-log records"
    t.add(line, "  ")
    if parse["problems"]:
        by_kind = parse.get("problem_counts") or {}
        damaged = sorted(
            {f["file"] for f in files if f.get("truncated_tail")}
            | {p["file"] for p in parse["problem_examples"] if p["problem"] in ("gzip_damaged", "file_changed")}
        )
        t.add(
            "problems: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in by_kind.items())
            + f" ({parse['problems']} rows in the problems table)"
            + (f"; damaged or cut: {', '.join(clean_line(d) for d in damaged[:3])}" if damaged else ""),
            "  ",
        )
    for s in inp["stray_files"][:10]:
        why = clean_line(s["why"])
        room = max(t.width - len(why) - len("  skipped : "), 20)
        path = clean_line(s["path"])
        path = path if len(path) <= room else "…" + path[-(room - 1) :]
        t.add(f"skipped {path}: {why}", "  ")
    if inp["left_out_by_latest"]:
        t.add(f"--latest left out {_plural(len(inp['left_out_by_latest']), 'file')} of older runs", "  ")


def render_origin(chains: list[Any]) -> str:
    """`traceview origin` output: one block per chain (several when the name is ambiguous)."""
    if not chains:
        return "no match: no kernel, node or seq_nr of that name in this trace\n"
    out = []
    if len(chains) > 1:
        out.append(f"{len(chains)} chains, best first (the name is ambiguous or maps to several lines: narrow with --compile-id/--rank)")
    guesses = sum(1 for ch in chains if ch.confidence == "name_match")
    if guesses:
        out.append(f"{guesses} of them NOT EXACT (op names in the kernel's name only): check them against the kernel's code")
    for ch in chains:
        out.append("")
        where = f"rank {ch.rank} " if ch.rank is not None else ""
        out.append(printable(f"{where}[{ch.compile_id}] ({ch.source})"))
        for label, value in ch.steps():
            out.append(printable(f"  {label:>16}: {value}"))
    return "\n".join(out) + "\n"
