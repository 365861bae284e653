"""The summary: findings first, most important first, as a JSON-able dict and as text.

`build_report` is the versioned JSON schema documented in docs/report.md; `render_text` lays it
out for an 80-column terminal. Every line of text passes through `printable` before it is
printed: log text is data (an ANSI escape shows as `^[`, a `[bold]` stays literal).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl

from parsers.compile_ids import kind_label, text_occurrence_expr
from parsers.compiles import STATUSES
from traceview.analyze import compile_time as ct
from traceview.analyze.accounts.compiles import OPEN, compile_account
from traceview.analyze.accounts.compiles import uncaught as uncaught_of
from traceview.analyze.cache_keys import key_verdicts
from traceview.analyze.code_objects import describe, of_compile
from traceview.analyze.collectives import collective_mismatches
from traceview.analyze.compile_facts import compile_facts
from traceview.analyze.crashes import compile_of_crash, crash_findings
from traceview.analyze.cudagraphs import (
    cudagraph_counts,
    cudagraph_findings,
    recordings_per_function,
)
from traceview.analyze.debug_dirs import debug_dirs
from traceview.analyze.divergence import rank_divergence
from traceview.analyze.eager_model import compiled_nothing
from traceview.analyze.failures import failures
from traceview.analyze.hotspots import graph_break_hotspots
from traceview.analyze.judge import cache_key_lines, head_lines, judge
from traceview.analyze.optimizer import compiled_optimizer_findings, scheduler_wrapper_advice
from traceview.analyze.portable_caches import cache_loads
from traceview.analyze.stalls import mark_lone_recompiles, rank_stalls
from traceview.analyze.stops import stop_findings, tie_unfinished
from traceview.analyze.storms import recompile_storms
from traceview.analyze.timeouts import collective_timeouts, skipped_choices
from traceview.analyze.unfinished import unfinished_compiles
from traceview.analyze.wording import Paths, injection_words
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

    def add(self, rows: list[dict[str, Any]], *, place: tuple[str, str] = ("filename", "line")) -> list[dict[str, Any]]:
        """Each row's `code`: its code object's (rank, function and the `place` columns: the
        code object's file and first line), with the call site of the row's own compile when
        it names one (`compile_id`, `occurrence`)."""
        for r in rows:
            k = (r.get("rank"), r.get("function"), r.get(place[0]), r.get(place[1]))
            if k[2] is None and place[0] != "filename":  # not known: any code object of that name in the file
                k = (k[0], k[1], r.get("filename"), None)
            if k not in self._seen:
                self._seen[k] = describe(self._trace, rank=k[0], function=k[1], filename=k[2], line=k[3])
            r["code"] = of_compile(self._seen[k], self._trace, rank=r.get("rank"), compile_id=r.get("compile_id"),
                                   occurrence=r.get("occurrence"))
        return rows

def _frameless_compiles(compiles: pl.DataFrame) -> list[dict[str, Any]]:
    """The compiles without a Dynamo frame (torch.export + AOTInductor): parsers.frameless."""
    rows = compiles.filter(pl.col("compile_kind").fill_null("dynamo") != "dynamo").select(
        "rank", "compile_id", "compile_kind", pl.col("compile_kind").map_elements(kind_label, return_dtype=pl.String).alias("what"),
        "status", pl.col("total_time_s").round(3).alias("seconds"), "inductor_compile_time_s", "code_gen_time_s",
        "at_run_time", "parent_compile_id",
        *(["parent_candidates"] if "parent_candidates" in compiles.columns else []),
        "graph_piece", "call_filename", "call_line", "call_code", "file", "metrics_lineno",
    )
    return _rows(_round(rows))


def build_report(trace: Trace) -> dict[str, Any]:
    """The whole summary as plain data (see docs/report.md for the schema)."""
    compiles = trace.compiles
    uncaught = uncaught_of(trace)  # read by the failures, the crashes, the stops and the accounts: once
    collectives = collective_mismatches(trace)
    fails = failures(trace, uncaught=uncaught)
    crashes = crash_findings(trace, uncaught=uncaught, collectives=collectives)
    unfinished = unfinished_compiles(trace)
    stops = stop_findings(trace, uncaught=uncaught)
    tie_unfinished(stops, unfinished)
    # each compile's status and seconds from its account: a compile left open is counted as
    # interrupted / never ended (not "no metrics") and its time runs to the capture's end
    account = compile_account(trace)
    accounted = ct.accounted_compiles(trace)
    per_rank = (
        accounted.group_by("rank")
        .agg(
            pl.len().alias("compiles"),
            *[((pl.col("table_status") == s) & ~pl.col("status").is_in(OPEN).fill_null(False)).sum().alias(s) for s in STATUSES],
            *[(pl.col("status") == s).sum().alias(s) for s in OPEN],
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
    stalls = rank_stalls(trace, collectives=collectives)
    mark_lone_recompiles(storms, stalls, waits=collectives["waits"])  # on some ranks only: never "nothing to fix"
    phases = ct.phase_totals(trace)
    report: dict[str, Any] = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "ranks": ranks_of(trace),
        "compiles": compiles.height,
        "compile_ids_in_text_logs": logged_ids.height,
        "frameless_compiles": _frameless_compiles(compiles),
        "compiled_nothing": compiled_nothing(trace),
        "recompiles": storms,
        "compiled_optimizer": optimizer,
        "graph_breaks": _with_scheduler_advice(graph_break_hotspots(trace), trace),
        "failures": codes.add([
            {**{k: v for k, v in r.items() if k != "headline"}, "reason": r["headline"], "reason_full": r["reason"],
             # torch's test-only fault injection asked for it: remove the setting, not the minifier
             **({"next_step": inj[1]} if (inj := injection_words(r.get("testing_only_config"))) else {})}
            for r in _rows(fails)
        ], place=("code_filename", "code_line")),
        "crashes": crashes,
        "stops": stops,
        "unfinished_compiles": unfinished,
        "compile_time": {
            "total_s": round(float(account["seconds"].fill_null(0).sum()), 3) if account.height else 0.0,
            "phases_s": phases,
            "phases": ct.phase_rows(phases),
            "top": codes.add(_rows(_round(ct.top_compiles(trace)))),
            "by_function": codes.add(_rows(_round(ct.by_function(trace).head(10)))),
            "spans": _rows(_round(ct.span_totals(trace))),
            "autotuning": _rows(_round(ct.autotuning(trace), 6)),
            # compiles without a Dynamo frame (counted in total_s), by where they came from
            "frameless": ct.frameless_groups(trace),
        },
        # with why the keys of one graph differ (ranks, compiles again): analyze.cache_keys
        "cache": {**ct.cache_summary(trace), "keys": key_verdicts(trace), "loaded": cache_loads(trace)},
        "cudagraphs": {
            **cudagraph_counts(trace),
            "findings": cudagraph_findings(trace),
            "functions": recordings_per_function(trace),
        },
        "facts": compile_facts(trace),
        "rank_divergence": _rows(rank_divergence(trace)),
        "collectives": collectives,
        "rank_stalls": stalls,
        "per_rank": _rows(per_rank),
        "inputs": {
            "root": inp.root if inp else None,
            "trace_files": [
                {"path": t.path, "rank": t.rank, "run": t.run, "bytes": t.size} for t in (inp.traces if inp else [])
            ],
            "text_logs": inp.text_logs if inp else [],
            "stray_files": [{"path": p, "why": w} for p, w in (inp.stray if inp else [])],
            "flight_recorder": list(getattr(inp, "flight_recorder", None) or []) if inp else [],
            "runs": inp.runs if inp else None,
            "left_out_by_latest": inp.dropped_runs if inp else [],
            "debug_dirs": debug_dirs(trace),
        },
        "parse": {
            "files": _rows(trace.stats),
            "problems": problems.height,
            "problem_counts": dict(sorted(Counter(problems["problem"].to_list()).items())) if problems.height else {},
            "problem_examples": _rows(problems.head(20)),
        },
    }
    ctime = report["compile_time"]
    report["timeouts"] = collective_timeouts(trace, autotuning=ctime["autotuning"])
    ctime["skipped_choices"] = skipped_choices(trace) if ctime["autotuning"] else []
    codes.add([t["culprit"] for t in report["timeouts"] if t["culprit"]], place=("filename", "line"))
    ctime["max_autotune"] = ct.max_autotune(ctime["autotuning"], ctime["total_s"], unfinished, phases, ctime["top"],
                                            ct.autotune_config(trace) if ctime["autotuning"] else None)
    for c in report["crashes"]:
        # a crash raised compiling is its compile's failure: named as the failure is
        f = compile_of_crash(c, report["failures"])
        c["compile"] = None if f is None else {k: f.get(k) for k in (
            "compile_id", "occurrence", "attempts", "function", "filename", "line", "code", "testing_only_config")}
        if f is not None and (injection_words(f.get("testing_only_config")) or f.get("category") == "compile_worker_died"):
            # the run's config asked for the failure, or the host took its worker: its step (how far
            # the compile got, and why), not the minifier
            c["next_step"] = f["next_step"]
    keys = report["cache"]["keys"]
    codes.add(keys["ranks"], place=("path", "line"))  # each graph named as every line names its code object
    codes.add(keys["repeats"], place=("path", "line"))
    # a graph compiled again because a guard failed: its key had to change (the account's cause)
    causes = {(a["rank"], a["compile_id"], a["occurrence"] or 1): a["cause"]
              for a in account.select("rank", "compile_id", "occurrence", "cause").iter_rows(named=True) if a["cause"]}
    for e in keys["repeats"]:
        e["recompile_cause"] = causes.get((e["rank"], e["compile_id"], e.get("occurrence") or 1))
    report["cache"]["verdicts"] = cache_key_lines(keys, Paths(report).show)  # judge's words
    findings = judge(trace, report=report)
    report["findings"] = [f.to_json() for f in findings]
    report["head"] = head_lines(findings, report)  # the head line, computed once: every view prints it
    return report
