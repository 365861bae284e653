"""Judging: the analyzers' results become one ranked list of typed findings (finding.py).

This is the one place a finding is worded: its claim, its lines (cause, fix, next step, how
sure), its cost and its severity. The summary text, `--json`, the page, the UI, `watch` and
`diff` render what `judge` returns and never word a finding themselves.

`judge(trace, report=...)` reads the report's analyzer sections (build_report's data: storms,
graph breaks, failures, crashes, unfinished compiles, collectives, divergence, CUDA graphs,
compile time) and the trace only for where a view jumps (the recompiles table: the compile
whose guard failed).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import polars as pl

from parsers.compile_ids import bracketed
from parsers.compile_ids import label as id_label
from traceview.analyze.accounts.ranks import hung
from traceview.analyze.compile_time import compile_phases
from traceview.analyze.finding import (
    KIND_WORDS,
    SECTION_OF,
    CompileRef,
    Cost,
    Evidence,
    Finding,
    ranked,
)
from traceview.analyze.findings import (
    after_resets,
    break_failure,
    code_label,
    divergence_key,
    group_failures,
    group_ranks,
    ranks_text,
    recompile_behind,
    recompile_why,
    recompiled_repeatedly,
    slow_compiles,
    storm_failure,
    storm_key,
    text_log_only,
    uncovered_debug_dirs,
)
from traceview.analyze.wording import (
    CACHE_NAMES,
    CATEGORY_WORDS,
    DDP_WRAPPER_WHY,
    Paths,
    injection_words,
    phases_text,
    plural,
    rank_prefix,
    seconds_text,
    stop_words,
)
from traceview.printable import one_line
from traceview.trace import Trace


def _ref(r: dict[str, Any], rank: Any = None) -> CompileRef | None:
    cid = r.get("compile_id")
    if cid is None:
        return None
    return CompileRef(rank if rank is not None else r.get("rank"), str(cid), r.get("occurrence"), r.get("attempts"))


def _ev(r: dict[str, Any], rank: Any = None) -> list[Evidence]:
    if r.get("file") is None:
        return []
    return [Evidence(r.get("file"), r.get("lineno"), rank if rank is not None else r.get("rank"))]


def _on_ranks(ranks: list[Any]) -> list[tuple[str, str]]:
    """A detail line for a finding seen the same way on several ranks."""
    if len([r for r in ranks if r is not None]) < 2:
        return []
    return [("ranks:", f"{ranks_text(ranks).strip()}, the same on each")]


# --------------------------------------------------------------------------- the kinds
def _debug_unfinished(report: dict[str, Any]) -> list[Finding]:
    """An Inductor graph folder of a TORCH_COMPILE_DEBUG run without `output_code.py` (written
    last): that compile did not finish. Not said again where a failure or crash of the report
    names the same compile."""
    named = {(f.get("compile_id")) for f in report.get("failures") or []}
    named |= {(c.get("compile") or {}).get("compile_id") for c in report.get("crashes") or []}
    out = []
    for d in uncovered_debug_dirs(report):
        for u in d.get("unfinished") or []:
            cid = u.get("compile_id")
            base = cid.split("_")[0] if cid else None
            if base is not None and base in named:
                continue
            folder = u.get("path") or f"{d['path']}/{u['folder']}"
            which = f"[{cid}]" if cid else "a compile whose id the folder does not tell"
            claim = f"Inductor did not finish AOT graph {u['aot_id']} ({which}): its TORCH_COMPILE_DEBUG folder has no output_code.py"
            nxt = ("the run's stderr says why (a traceback: give it beside the folder); "
                   f"python {folder}/fx_graph_runnable.py re-runs Inductor on that graph")
            lines = [("folder:", folder),
                     ("means:", "Inductor writes output_code.py last: the compile failed or was stopped (the folder alone does not say which)"),
                     ("next:", nxt)]
            ref = CompileRef(None, base) if base else None
            out.append(Finding(
                "unfinished", "act", claim, lines, next_step=nxt, certainty="likely", facet="debug_dir",
                compiles=[ref] if ref else [], evidence=[Evidence(folder, None, None)], target=ref,
                key=f"unfinished:debug:{folder}", short=f"Inductor did not finish {u['aot_id']}",
            ))
    return out


def _unfinished(report: dict[str, Any], paths: Paths) -> list[Finding]:
    out = []
    for u in report.get("unfinished_compiles") or []:
        where = f" in {u['phase']}" if u.get("phase") else ""
        inner = (f" (innermost open span: {u['innermost_span']})"
                 if u.get("innermost_span") and u["innermost_span"] != u.get("phase") else "")
        running = f" for {seconds_text(u['running_s'])} up to {_end_label(u)}" if u.get("running_s") is not None else ""
        part = f" {u['part']} of" if u.get("part") in ("backward", "compiled autograd") else ""
        claim = (f"{rank_prefix(u['rank'])}{bracketed(u['compile_id'], u.get('occurrence'))}{part} "
                 f"{paths.code(u)}{where}{running}{inner}")
        lines: list[tuple[str, str]] = []
        done = [o for o in u.get("others") or [] if o.get("finished_before_s") is not None]
        if done:
            first = min(o["finished_before_s"] for o in done)
            lines.append(("others:", f"{ranks_text([o['rank'] for o in done]).strip()} finished {bracketed(u['compile_id'], u.get('occurrence'), u.get('attempts'))}, "
                                     f"{seconds_text(first)} or more before the log's last line"))
        if u.get("autotuning"):
            lines.append(("autotuning:", _autotune_progress(u)))
            if tuned := _stopped_autotuning(report, [CompileRef(u["rank"], u["compile_id"], u.get("occurrence"))], step=False):
                lines.append(("max-autotune:", tuned))
        stop = u.get("stopped_by")
        timed = next((t for t in report.get("timeouts") or [] if (c := t.get("culprit")) and c["rank"] == u["rank"]
                      and c["compile_id"] == u["compile_id"] and (c.get("occurrence") or 1) == (u.get("occurrence") or 1)), None)
        if timed is not None:  # the compile a collective timed out behind: one story, told there
            ended = f" ({timed['culprit']['ended_by']})" if timed["culprit"].get("ended_by") else ""
            ws = [r for r in timed.get("ranks") or [timed["rank"]] if r is not None]
            nxt = (f"{'rank ' + str(ws[0]) if len(ws) <= 1 else 'ranks ' + ', '.join(str(r) for r in ws)}: "
                   f"collective timed out waiting for this compile and the launcher stopped this rank{ended}: "
                   "see COLLECTIVE TIMEOUT")
        elif stop:
            ended = f" ({stop['ended_by']})" if stop.get("ended_by") else ""
            nxt = f"stopped from outside while compiling{ended}: see STOPPED"
        elif u.get("behind"):
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
        lines.append(("next:", nxt))
        more = [("phase:", u.get("phase") or "?"), ("open spans:", " > ".join(u.get("open_spans") or []) or "none logged")]
        ref = _ref(u)
        out.append(Finding(
            "unfinished", "act", claim, lines, more, next_step=nxt,
            certainty="likely" if u.get("behind") else "certain", facet="behind" if u.get("behind") else None,
            cost=Cost(seconds=float(u.get("running_s") or 0.0), ranks_stalled=len(done) if u.get("behind") else 0),
            ranks=[u["rank"]], compiles=[ref] if ref else [], code=paths.code(u), evidence=_ev(u),
            target=ref, key=f"unfinished:{u['rank']}:{u['compile_id']}:{u.get('occurrence')}",
        ))
    return out


def _stopped_autotuning(report: dict[str, Any], compiles: list[CompileRef], *, step: bool = True) -> str | None:
    """For a compile that ended inside max-autotune's autotuning: how much of the compile time
    autotuning took and what it bought (MAX-AUTOTUNE's words), with its step unless `step` is
    False; else None."""
    m = (report.get("compile_time") or {}).get("max_autotune") or {}
    hit = [s for s in m.get("stopped_in") or [] for c in compiles
           if s.get("rank") == c.rank and s.get("compile_id") == c.compile_id and s.get("occurrence") in (None, c.occurrence)]
    if not hit:
        return None
    bought, what_next = _max_autotune_words(m)
    return (f"it was max-autotune's autotuning: {seconds_text(m['seconds'])} of {seconds_text(m['compile_s'])} compile "
            f"time went to it, and it bought {bought}" + (f": {what_next}" if step else "") + " (MAX-AUTOTUNE)")


def _autotune_progress(u: dict[str, Any]) -> str:
    """How far an unfinished compile's open autotuning got, as its trace shows it."""
    t = u["autotuning"]
    what = f"{t['op']}({t['shapes']})" if t.get("shapes") else t["op"]
    part = u["part"] if u.get("part") in ("backward", "compiled autograd") else "compile"
    steps = []
    if t.get("precompile_s") is not None:
        steps.append(f"its choices precompiled in {seconds_text(t['precompile_s'])}")
    if t.get("open_s") is not None:
        doing = "benchmarking them" if t["what"] == "autotuning" else "compiling the choices"
        steps.append(f"then {seconds_text(t['open_s'])} {t['what']} ({doing}) up to the last timestamp"
                     if steps else f"{seconds_text(t['open_s'])} {t['what']} ({doing}) up to the last timestamp")
    done = t.get("done") or []
    if done:
        ops = ", ".join(f"{d['op']} {seconds_text(d['seconds'])}" for d in done)
        order = f"after {plural(len(done), 'autotuning')} of this {part} ended ({ops})"
    else:
        order = f"the first autotuning of this {part}"
    return f"{what}: " + ", ".join([*steps, order]) + "; which choice it was on is not logged"


def _end_label(u: dict[str, Any]) -> str:
    """Where an unfinished compile's running time ends: its own log's last line, or the
    capture's last timestamp in another file (a launcher's line in the text log)."""
    src = u.get("last_line_from") or {}
    if not src or src.get("file") == u.get("file"):
        return "the log's last line"
    name = re.split(r"[/\\]", src["file"])[-1]
    return f"the capture's last timestamp ({name}:{src['lineno']}, {one_line(src['what'], 90)})"


def _frame_place(frame: str) -> tuple[str, int | None]:
    """(path, line) of a traceback frame `path:line in fn`."""
    m = re.match(r"^(.*):(\d+) in .*$", frame)
    return (m.group(1), int(m.group(2))) if m else (frame, None)


def _stops(report: dict[str, Any], paths: Paths) -> list[Finding]:
    """Jobs stopped from outside (analyze.stops): who stopped what, when, and each rank's state."""
    out = []
    for st in report.get("stops") or []:
        src = st.get("at_from") or {}
        name = re.split(r"[/\\]", src.get("file") or "")[-1]
        lines: list[tuple[str, str]] = []
        if src:
            lines.append(("when:", f"{name}:{src.get('lineno')}: {one_line(src.get('what') or '', 120)}"))
        seconds = 0.0
        waited, stalled = 0.0, 0  # what the ranks waiting for a stuck one lost
        compiles = []
        for r in st.get("ranks") or []:
            who = f"rank {r['rank']}" if r.get("rank") is not None else "process"
            pid = f" (pid {r['pid']})" if r.get("pid") is not None else ""
            ended = f"; ended: {r['ended_by']}" if r.get("ended_by") else ""
            if r.get("state") == "compiling":
                part = f" {r['part']}" if r.get("part") in ("backward", "compiled autograd") else ""
                phase = f" in {r['phase']}" if r.get("phase") else ""
                run = f" for {seconds_text(r['running_s'])}" if r.get("running_s") is not None else ""
                see = "" if r.get("interrupted_in") else " (UNFINISHED COMPILES)"
                what = f"inside {bracketed(r['compile_id'], r.get('occurrence'))}{part}{phase}{run}{see}"
                seconds = max(seconds, float(r.get("running_s") or 0.0))
                if r.get("compile_id"):
                    compiles.append(CompileRef(r.get("rank"), r["compile_id"], r.get("occurrence")))
            elif r.get("state") == "waiting":
                behind = ", ".join(f"rank {b}" for b in r.get("behind") or [])
                what = (f"waiting for {behind}: its compiles had ended, no record for {seconds_text(r['idle_s'])} "
                        "before the stop (it ran on to its next collective and waits there)")
                waited += float(r.get("idle_s") or 0.0)
                stalled += 1
            elif r.get("state") in ("idle", "running"):
                done = (f", its last compile ended {seconds_text(r['compiles_done_s'])} before"
                        if r.get("compiles_done_s") is not None else "")
                run = r.get("running") or {}
                doing = (f", last seen running {bracketed(run['compile_id'], run.get('occurrence'), run.get('attempts'))} ({run['span']} left open: benchmarking a kernel's "
                         "configs at its first call, not compiling)" if run else "")
                what = f"idle: no record for {seconds_text(r['idle_s'])} before the stop{done}{doing}"
                seconds = max(seconds, float(r.get("idle_s") or 0.0))
            else:
                what = "no record of its own in the capture"
            lines.append(("", f"{who}{pid}: {what}{ended}"))
            if r.get("interrupted_in"):
                lines.append(("interrupted in:", paths.show(*_frame_place(r["interrupted_in"]))))
        if st.get("certainty") != "certain":
            lines.append(("how sure:", f"{st['certainty']} ({st.get('evidence') or 'indirect evidence'})"))
        tuned = _stopped_autotuning(report, compiles)
        first_compile = st["kind"] == "launcher_signal" and _first_compile_everywhere(st.get("ranks") or [])
        if first_compile and (cost := _autotune_cost(report)):
            lines.append(("autotuning:", cost))
        if tuned:  # the stop landed in max-autotune's autotuning: that first, then the limit
            lines.append(("first:", tuned))
        lines.append(("next:", st["next_step"]))
        ranks = [r.get("rank") for r in st.get("ranks") or []]
        out.append(Finding(
            "stop", "act", st.get("head") or st["message"], lines, next_step=st["next_step"],
            certainty=st.get("certainty") or "certain", cost=Cost(seconds=max(seconds, waited), ranks_stalled=stalled),
            ranks=ranks, compiles=compiles,
            evidence=[Evidence(st.get("file"), st.get("lineno"))] if st.get("file") else [],
            facet=st["kind"], target=compiles[0] if compiles else None,
            key=f"stop:{st['kind']}:{st.get('signal')}:{st.get('target')}",
            short=("the time limit ran out inside the first compile (no hang)" if first_compile
                   else stop_words(st["kind"], st.get("target") or "", st.get("signal") or "")),
        ))
    return out


def _autotune_cost(report: dict[str, Any]) -> str | None:
    """What max-autotune's autotuning cost, per rank: GEMMs autotuned, choices benchmarked, the
    choices skipped and why (compile_time.autotuning, compile_time.skipped_choices)."""
    ct = report.get("compile_time") or {}
    rows = ct.get("autotuning") or []
    if not rows:
        return None
    by_rank: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        by_rank.setdefault(r.get("rank"), []).append(r)
    parts = []
    for rank, rs in sorted(by_rank.items(), key=lambda x: (x[0] is None, x[0] or 0)):
        done = [r for r in rs if r.get("best_kernel")]
        secs = sum(float(r.get("precompile_s") or 0.0) + float(r.get("benchmark_s") or 0.0) for r in rs)
        failed = sum(int(r.get("failed_choices") or 0) for r in done)
        who = f"rank {rank}: " if rank is not None else ""
        still = f" (and {len(rs) - len(done)} still autotuning at the stop)" if len(rs) > len(done) else ""
        parts.append(f"{who}{plural(len(done), 'GEMM')} autotuned to the end{still}, "
                     f"{sum(int(r.get('choices') or 0) for r in done)} choices benchmarked ({failed} failed), "
                     f"{seconds_text(secs)} precompiling and benchmarking")
    text = "; ".join(parts)
    for sk in ct.get("skipped_choices") or []:
        need = (f" (a config needed {sk['required']} bytes of shared memory, the GPU has {sk['limit']})"
                if sk.get("required") and sk.get("limit") else "")
        text += f"; skipped: {sk['count']} choices for {sk['reason']}{need}"
    return text


def _compiled_nothing(report: dict[str, Any]) -> list[Finding]:
    """torch.compile applied and no graph reached a backend (analyze.eager_model): first."""
    n = report.get("compiled_nothing")
    if not n:
        return []
    lines: list[tuple[str, str]] = [("why:", n["reason"])]
    if n["certainty"] != "certain":
        lines.append(("how sure:", n["certainty"]))
    lines.append(("fix:", n["next_step"]))
    ref = CompileRef(n.get("rank"), n["compile_id"]) if n.get("compile_id") else None
    return [Finding(
        "compiled_nothing", "act", n["message"], lines, next_step=n["next_step"], certainty=n["certainty"],
        ranks=list(n.get("ranks") or []), evidence=_ev(n), count=int(n.get("compiles") or 0), facet=n.get("why"),
        target=ref, key=f"compiled_nothing:{n.get('why')}", short="torch.compile had no effect (the model ran eagerly)",
    )]


def _stall_ids(report: dict[str, Any]) -> dict[Any, set[str]]:
    """rank -> the compile ids it made alone while others waited (analyze.stalls)."""
    out: dict[Any, set[str]] = {}
    for st in report.get("rank_stalls") or []:
        ids = {x["compile_id"] for x in st.get("compiles") or []}  # once per stall, not per rank
        for r in st["compiling_ranks"]:
            out.setdefault(r, set()).update(ids)
    return out


def _stalls(report: dict[str, Any]) -> list[Finding]:
    """Ranks held at a collective while another compiled alone (analyze.stalls); the rank
    divergence it is (the lone compiles) and the recompile behind it are said here, once."""
    out = []
    told = {(c["rank"], c["compile_id"], t["rank"]) for t in report.get("timeouts") or [] if (c := t.get("culprit"))}
    for s in report.get("rank_stalls") or []:
        # a timeout's (compiling rank, compile id, waiting rank) among the stall's: each timeout
        # looked up in the stall's sets (not every compiling x waiting pair: ranks squared)
        compiling, waiting = set(s["compiling_ranks"]), set(s["waiting_ranks"])
        ids = {x["compile_id"] for x in s.get("compiles") or []}
        if any(r in compiling and cid in ids and w in waiting for r, cid, w in told):
            continue  # the wait ended in a collective timeout: COLLECTIVE TIMEOUT tells it with the timeout's numbers
        lost = f": {seconds_text(s['cost_s'])} lost in all ({s['ranks_stalled']} ranks stalled)" if s["ranks_stalled"] > 1 else ""
        lines: list[tuple[str, str]] = []
        compiled = list(dict.fromkeys(f"{bracketed(x['compile_id'], x.get('occurrence'), x.get('attempts'))} {x.get('function') or '?'} {x['cause']}"
                                      for x in s.get("compiles") or [] if x.get("cause")))
        if len(compiled) > 1:  # one: the claim says it
            lines += [("compiled:", c) for c in compiled]
        if s.get("ddp"):
            lines.append(("DDP:", "shown by " + "; ".join(s["ddp"])))
        lines.append(("how sure:", f"{s['certainty']}: {s['estimate']}"))
        lines.append(("next:", s["next_step"]))
        # each compiling rank's own lone compiles, rank by rank (not every rank with every
        # rank's compile ids: ranks squared, and compiles a rank never made)
        made: dict[Any, list[str]] = {}
        for x in s.get("compiles") or []:
            made.setdefault(x["rank"], []).append(x["compile_id"])
        refs = [CompileRef(r, cid) for r in s["compiling_ranks"] for cid in made.get(r, ())]
        out.append(Finding(
            "stall", "act", s["message"] + lost, lines, next_step=s["next_step"], certainty=s.get("certainty") or "likely",
            cost=Cost(seconds=float(s.get("cost_s") or 0.0), ranks_stalled=int(s["ranks_stalled"]),
                      compiles_wasted=len(s.get("compiles") or [])),
            ranks=list(s["compiling_ranks"]), compiles=refs, target=refs[0] if refs else None,
            key=f"stall:{ranks_text(s['compiling_ranks']).strip()}:{','.join(x['compile_id'] for x in s.get('compiles') or [])}",
            short=(f"{ranks_text(s['waiting_ranks']).strip()} stalled ~{seconds_text(s['seconds'])} while "
                   f"{ranks_text(s['compiling_ranks']).strip()} compiled alone"),
        ))
    return out


def _schedule_words(items: list[dict[str, Any]]) -> str:
    if not items:
        return "no collectives"
    return ", ".join(f"{c['op']} {c['dtype'] or '?'}{c['shape'] if c['shape'] is not None else '[?]'}" for c in items)


def _collectives(report: dict[str, Any], paths: Paths) -> list[Finding]:
    coll = report.get("collectives") or {}
    graphs = {(g["compile_id"], g["graph_index"]): g for g in coll.get("graphs") or []}
    out = []
    for m in coll.get("mismatches") or []:
        more: list[tuple[str, str]] = []
        ids = [(m["compile_id"], m["graph_index"])]
        if m.get("other_compile_id"):
            ids.append((m["other_compile_id"], m["graph_index"]))
        for key in ids:
            for s in (graphs.get(key) or {}).get("schedules") or []:
                more.append((f"{bracketed(key[0])} {ranks_text(s['ranks']).strip()}:", _schedule_words(s["collectives"])))
        if m.get("recompile_reason"):
            more.append(("recompiled:", m["recompile_reason"]))
        rank = m["ranks"][0] if m.get("ranks") else None
        ref = CompileRef(rank, m["compile_id"])
        # the mismatched ranks' compile, then the others' (the same id unless named)
        refs = [CompileRef(r, m["compile_id"]) for r in m.get("ranks") or []]
        refs += [CompileRef(r, m.get("other_compile_id") or m["compile_id"]) for r in m.get("other_ranks") or []]
        out.append(Finding(
            "collectives", "act", m["message"], [("next:", m["next_step"])], more, next_step=m["next_step"],
            cost=Cost(ranks_stalled=len(m.get("other_ranks") or [])), ranks=list(m.get("ranks") or []), compiles=refs,
            facet="mismatch", target=ref, key=f"collectives:{m['compile_id']}:{m['graph_index']}",
        ))
    storms = report.get("recompiles") or []
    for w in coll.get("waits") or []:
        waiting = list(w.get("waiting_ranks") or [])
        # the lone recompile behind the wait is one root cause with it: its cause and fix said here,
        # each cause once with the ranks it holds on, the code object by its one name
        causes: dict[tuple[str, str], list[Any]] = {}
        nxt, name = None, None
        for s in storms:
            if s["rank"] in (w.get("compiling_ranks") or []) and w["compile_id"] in (s.get("compile_ids") or []):
                name = name or paths.code(s)
                if not s.get("stall"):
                    continue
                for c in s.get("causes") or []:
                    if w["compile_id"] in (c.get("compile_ids") or []):
                        causes.setdefault((s["function"] or "?", c["text"]), []).append(s["rank"])
                nxt = nxt or s["stall"]["next_step"]
        lines: list[tuple[str, str]] = [
            ("cause:", f"recompiled on {ranks_text(rs).strip()}: {text}") for (_fn, text), rs in causes.items()]
        if nxt:
            lines.append(("next:", nxt))
        name = name or f"{w.get('function') or '?'} ({paths.show(w.get('filename'), w.get('line'))})"
        miss = " (an FX graph cache miss the others did not have)" if w.get("cache_miss") else ""
        claim = (f"{ranks_text(waiting).strip()} waited ~{seconds_text(w['seconds'])} at the first collective while "
                 f"{ranks_text(w.get('compiling_ranks') or []).strip()} compiled {bracketed(w['compile_id'])} {name}{miss}")
        out.append(Finding(
            "collectives", "act", claim + " (estimated from the compile times)", lines, next_step=nxt, certainty="likely",
            cost=Cost(seconds=float(w.get("seconds") or 0.0) * max(len(waiting), 1), ranks_stalled=len(waiting)),
            ranks=list(w.get("compiling_ranks") or []), facet="wait",
            key=f"collectives:wait:{w['message']}",
            short=(f"{ranks_text(waiting).strip()} waited ~{seconds_text(w.get('seconds'))} at a collective while "
                   f"{ranks_text(list(w.get('compiling_ranks') or [])).strip()} compiled alone"),
        ))
    for e in coll.get("execution") or []:
        out.append(Finding("collectives", "act", e["message"], ranks=list(e.get("ranks") or []), facet="execution",
                           key=f"collectives:execution:{e['message']}"))
    unknown = coll.get("unknown") or []
    if coll.get("mismatches") and unknown:
        u = unknown[0]
        more_n = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        out.append(Finding(
            "collectives", "act", f"rank {u['rank']}'s {bracketed(u['compile_id'], u.get('occurrence'), u.get('attempts'))} schedule is unknown{more_n}: {u['why']}",
            certainty="possible", ranks=[u["rank"]], facet="unknown", key=f"collectives:unknown:{u['rank']}:{u['compile_id']}",
        ))
    return out


# the collective as people say it (NCCL's OpType, the flight recorder's profiling name)
_OP_WORDS = {"allreduce": "all-reduce", "all_reduce": "all-reduce", "broadcast": "broadcast", "allgather": "all-gather",
             "all_gather": "all-gather", "_allgather_base": "all-gather", "reduce_scatter": "reduce-scatter",
             "_reduce_scatter_base": "reduce-scatter", "reducescatter": "reduce-scatter", "barrier": "barrier",
             "alltoall": "all-to-all", "alltoall_base": "all-to-all", "all_to_all": "all-to-all", "send": "send",
             "recv": "recv", "monitoredbarrier": "monitored barrier"}


def _op_words(op: str | None) -> str:
    return _OP_WORDS.get((op or "").lower(), (op or "collective").lower())


def timeout_explained(report: dict[str, Any]) -> dict[tuple[Any, Any], dict[str, Any]]:
    """(file, rank) -> the timeout that a compile on another rank explains (report["timeouts"])."""
    return {(t["file"], r): t for t in report.get("timeouts") or [] if t.get("culprit")
            for r in (t.get("ranks") or [t["rank"]])}


def _timeouts(report: dict[str, Any], paths: Paths) -> list[Finding]:
    """A collective that timed out while another rank compiled (analyze.timeouts): the compile
    named, the collectives each rank had enqueued, how the job ended, the fixes."""
    out = []
    for t in report.get("timeouts") or []:
        c = t.get("culprit")
        if not c:
            continue  # no compile covers the wait: the crash's words (a desync, a lost peer) stand
        op = _op_words(t.get("op"))
        seq = f" {t['seq']}" if t.get("seq") is not None else ""
        backend = (t.get("backend") or "").upper() if t.get("backend") == "nccl" else (t.get("backend") or "")
        limit = f" after {seconds_text(t['timeout_s'])}" if t.get("timeout_s") is not None else ""
        ref = CompileRef(c["rank"], c["compile_id"], c.get("occurrence"))
        code = code_label(c, paths.show)
        why = (f"a recompile: {c['cause']}" if c.get("cause")
               else "its first compile of this code" if str(c.get("compile_id") or "").endswith("/0") else "a compile")
        waited = [r for r in t.get("ranks") or [t["rank"]] if r is not None]
        who = f"rank {waited[0]}'s" if len(waited) <= 1 else f"ranks {', '.join(str(r) for r in waited)}: their"
        what = (f"{backend} collective timed out (its {t.get('op')})" if t.get("op") in ("send", "recv")
                else f"{op} ({backend} collective{seq})")
        tune = c.get("autotune") or {}
        tuned = (f", {seconds_text(tune.get('seconds'))} of it max-autotune benchmarking {plural(tune['ops'], 'GEMM')}"
                 if tune.get("ops") else "")
        claim = (f"{who} {what}{'' if t.get('op') in ('send', 'recv') else ' timed out'}{limit} because rank {c['rank']} was "
                 f"compiling {ref} {code} and had not reached it: {why}{tuned}")
        lines: list[tuple[str, str]] = [("timeout:", one_line(t.get("text") or "", 220))]
        began = c.get("started_before_s") or 0.0
        when = (f"began {seconds_text(began)} before rank {t['rank']}'s collective" if began >= 0
                else f"began {seconds_text(-began)} after rank {t['rank']}'s collective was issued")
        if c.get("status") in ("interrupted", "never_ended"):
            state = (f"still compiling{' in ' + c['phase'] if c.get('phase') else ''} when the job ended "
                     f"({seconds_text(c.get('seconds'))} in all so far)")
        else:
            state = f"it ended after the timeout, {seconds_text(c.get('seconds'))} in all"
        lines.append(("compile:", f"rank {c['rank']} {ref} {when}; {seconds_text(c.get('compiling_s'))} of it when the "
                                  f"timeout fired; {state}"))
        if tune.get("ops"):
            lines.append(("autotuning:", f"max-autotune benchmarked {plural(tune['ops'], 'GEMM')} "
                                         f"({tune.get('choices') or 0} choices) in {ref} on rank {c['rank']}: "
                                         f"{seconds_text(tune.get('seconds'))} of its compile (MAX-AUTOTUNE)"))
        if t.get("by_rank"):
            said = "; ".join(f"rank {b['rank']} enqueued up to {b['last_enqueued']}, completed {b['last_completed']}"
                             for b in t["by_rank"])
            src = ", ".join(sorted({b["source"] for b in t["by_rank"]}))
            lines.append(("collectives:", f"{said} ({src})"))
        if t.get("backend") == "gloo":  # gloo raises the timeout in the program: its traceback ends the rank
            gone = f"{'rank' if len(waited) == 1 else 'ranks'} {', '.join(str(r) for r in waited)}: the timeout's exception, uncaught"
        else:
            gone = f"rank {t['rank']}: {t['ended_by']}" if t.get("ended_by") else None
        ended = [gone, f"rank {c['rank']}: {c['ended_by']}" if c.get("ended_by") else None]
        if any(ended):
            lines.append(("ended:", "; ".join(e for e in ended if e)))
        lines.append(("how sure:", f"{t['certainty']} ({t.get('evidence') or 'indirect evidence'})"))
        worst = max(float(c.get("seconds") or 0.0), float(c.get("compiling_s") or 0.0))
        dim = c.get("cause_kind") == "size"
        step = (
            f"Not a desync and not NCCL: rank {c['rank']}'s compile outlasted the process group's timeout. "
            + ("Give every rank the same shapes (drop_last=True in the DataLoader, or pad the last batch), or make "
               "the varying dimension dynamic on every rank before the first step (torch._dynamo.mark_dynamic, e.g. "
               "mark_dynamic(x, 0) for the batch), so no rank recompiles alone; " if dim else "")
            + "warm up every shape on every rank before training (one step per shape, or a warm "
            "TORCHINDUCTOR_CACHE_DIR / torch.compiler.load_cache_artifacts); or raise the process group's timeout "
            f"above the worst compile (init_process_group(timeout=timedelta(seconds=...)) > {worst:.0f}s here)."
            + (" max-autotune's benchmarking made this compile long: mode='max-autotune-no-cudagraphs' is not "
               "shorter; the default mode does not autotune." if tune.get("ops") else "")
        )
        lines.append(("next:", step))
        out.append(Finding(
            "timeout", "act", claim, lines, next_step=step, certainty=t["certainty"],
            cost=Cost(seconds=float(t.get("ran_s") or 0.0), ranks_stalled=1), ranks=[t["rank"], c["rank"]],
            compiles=[ref], target=ref, evidence=[Evidence(t["file"], t.get("lineno"), t["rank"])],
            facet=t.get("backend"), key=f"timeout:{t['file']}:{t['rank']}:{t.get('seq')}",
            short=(f"{'rank ' + str(waited[0]) if len(waited) <= 1 else 'ranks ' + ', '.join(str(r) for r in waited)}'s "
                   f"{'collective' if t.get('op') in ('send', 'recv') else op} timed out "
                   f"behind rank {c['rank']}'s compile {ref}"),
        ))
    return out


_WHOSE = {
    "launcher": "the kernel launcher",
    "generated": "the code Inductor generated (its kernel, launched on that line)",
    "torch": "torch's own code",
    "program": "your own code",
    "library": "a library's code",
}


def _signal_crash(c: dict[str, Any], paths: Paths) -> Finding:
    """A process killed by a crash signal (analyze.signals): which signal, in which compile's
    generated code and kernel, right after which record, and how sure."""
    sig = c.get("signal") or c.get("exc_type") or "a signal"
    code = f", exit code {c['exit_code']}" if c.get("exit_code") is not None else ""
    ran = c.get("signal_ran") or {}
    inner = c.get("innermost")
    ref = None
    if ran.get("compile_id"):
        where = f"in the generated code of {bracketed(ran['compile_id'], ran.get('occurrence'))} {code_label(ran, paths.show)}"
        ref = CompileRef(c["rank"], ran["compile_id"], ran.get("occurrence"))
    elif inner:
        where = f"in {_WHOSE[inner['whose']]}"
    else:
        where = "where: unknown (no Python stack)"
    many = c.get("signal_ranks") or []
    who = f"{ranks_text(many).strip()} " if many else rank_prefix(c["rank"])
    claim = f"{who}killed by {sig}{code} (no Python error) {where}"
    lines: list[tuple[str, str]] = []
    if ran.get("module"):
        module = re.split(r"[/\\]", ran["module"])[-1]
        stmt = f": {ran['statement']}" if ran.get("statement") else ""
        lines.append(("code:", f"{module}:{ran.get('module_line')} in {ran.get('module_function')}{stmt}"))
        if ran.get("kernel"):
            lines.append(("kernel:", f"{ran['kernel']} (launched on that line of the trace's copy of the generated code)"))
        if not ran.get("compile_id") and ran.get("how"):
            lines.append(("compile:", ran["how"]))
    if inner:
        base = re.split(r"[/\\]", inner["path"])[-1]
        at = f"{base}:{inner['line']} in {inner['function']}"
        lines.append(("died in:", f"{_WHOSE[inner['whose']]} (innermost Python frame: {at})"))
    after = c.get("after")
    if after:
        cid = f"{bracketed(after['compile_id'])}'s " if after.get("compile_id") else ""
        when = str(after.get("ts") or "")[11:23]
        lines.append(("after:", f"the last record torch logged: {cid}{after['kind']}" + (f" at {when}" if when else "")
                      + " (nothing is logged while compiled code runs; the crash came after it)"))
    if c.get("nested"):
        n = c["nested"]
        lines.append(("nested:", f"transformers' generate ({n['generate']}) calls a torch.compile wrapper around another "
                                 f"({n['wrappers']} compile wrappers on the stack)"))
    if not c.get("faulthandler"):
        lines.append(("how sure:", f"certain that it died of {sig} ({c.get('evidence')}); where is unknown: no "
                                   "faulthandler stack in the capture"))
    lines.append(("next:", c["next_step"]))
    short = f"killed by {sig}" + (" in compiled code" if ran.get("compile_id") else "")
    return Finding(
        "crash", "act", claim, lines, next_step=c["next_step"], certainty="certain",
        ranks=list(many) or [c["rank"]], compiles=[ref] if ref else [], target=ref, evidence=_ev(c), facet="signal", short=short,
        key=f"crash:{c['rank']}:{sig}:{ran.get('compile_id')}:{ran.get('module_line')}",
    )


def _crashes(report: dict[str, Any], paths: Paths) -> list[Finding]:
    out = []
    explained = timeout_explained(report)
    for c in report.get("crashes") or []:
        if c.get("signal"):
            f = _signal_crash(c, paths)
            timed = explained.get((c.get("file"), c.get("rank"))) if c.get("signal") == "SIGABRT" else None
            if timed is not None:  # NCCL's watchdog aborts the process whose collective timed out
                cul = timed["culprit"]
                f.claim = (f"{rank_prefix(c['rank'])}killed by SIGABRT: the process group's watchdog took it down after its "
                           f"collective timed out while rank {cul['rank']} compiled [{cul['label'] or cul['compile_id']}] "
                           "(COLLECTIVE TIMEOUT)")
                f.next_step = ("Not a crash of the generated code: the watchdog aborts a process whose collective timed "
                               "out; see COLLECTIVE TIMEOUT for the compile and the fixes.")
                f.lines = [x for x in f.lines if x[0] not in ("how sure:", "next:")] + [("next:", f.next_step)]
                f.short = "aborted by the watchdog after the timeout"
            out.append(f)
            continue
        where = f"at {c['function'] or '?'} ({paths.show(c['filename'], c['line'])})" if c.get("filename") else "at ?"
        cc = c.get("compile")
        if cc:  # raised compiling: the compile, named as every line names it
            where = f"compiling {bracketed(cc['compile_id'], cc.get('occurrence'), cc.get('attempts'))} {code_label(cc, paths.show)}"
        dist_error = c.get("distributed_error") or (c.get("exc_type") or "").rsplit(".", 1)[-1].startswith("Dist")
        timed = explained.get((c.get("file"), c.get("rank"))) if dist_error else None
        words = CATEGORY_WORDS.get(c['category'], c['category'])
        if timed is not None:  # the timeout a compile on another rank explains: said there, not as a desync
            words = (f"its collective timed out while rank {timed['culprit']['rank']} compiled "
                     f"[{timed['culprit']['label'] or timed['culprit']['compile_id']}] (COLLECTIVE TIMEOUT)")
        elif c.get("category") == "distributed_desync" and c.get("consequence_of") is not None:
            # its collective lost a peer that had died: the other rank's death, not a desync
            words = f"its collective lost rank {c['consequence_of']}, which had failed first"
        claim = (f"{rank_prefix(c['rank'])}{c['exc_type']} {where}: "
                 f"{words}" + ("" if cc else f", raised in {c['raised_in']}"))
        if c.get("category") == "stance_refused" and c.get("stance"):
            out.append(_stance_refusal(c, paths))
            continue
        if c.get("category") == "export_data_dependent":  # the verdict first, at the user's line
            place = f"in {c['function'] or '?'} ({paths.show(c['filename'], c['line'])})" if c.get("filename") else "at ?"
            claim = f"{rank_prefix(c['rank'])}{CATEGORY_WORDS['export_data_dependent']} {place} ({c['exc_type']})"
        ran = c.get("ran") if c.get("category") == "out_of_memory" else None
        if c.get("category") == "out_of_memory":
            claim, cc = _memory_claim(c, paths), (ran if ran and ran.get("compile_id") else None)
        lines: list[tuple[str, str]] = []
        if c.get("code") and " ".join(str(c["code"]).split()) not in where:  # the line, unless named with the compile
            lines.append(("", c["code"]))
        if c.get("called_from"):
            cf = c["called_from"]
            code = f": {cf['code']}" if cf.get("code") else ""
            lines.append(("", f"called from {cf['function']} ({paths.show(cf['filename'], cf['line'])}){code}"))
        if c.get("kernel"):
            lines.append(("", f"failing kernel: {c['kernel']}"))
        if ran:
            lines += _memory_lines(c, ran)
        lines.append(("", c["message"] or ""))
        de = c.get("distributed_error")
        if de and de["line"] not in (c.get("message") or ""):
            lines.append(("error:", de["line"]))
        if injected := injection_words((cc or {}).get("testing_only_config")):
            lines.append(("cause:", injected[0]))  # the run's config asked for the failure
        if c.get("certainty") != "certain":
            lines.append(("how sure:", f"{c['certainty']} ({c.get('evidence') or 'indirect evidence'})"))
        step = c["next_step"]
        if timed is not None:
            step = "Not a desync: the collective waited for a rank that was compiling; see COLLECTIVE TIMEOUT for the compile and the fixes."
        lines.append(("next:", step))
        ref = CompileRef(c["rank"], cc["compile_id"], cc.get("occurrence"), cc.get("attempts")) if cc else None
        out.append(Finding(
            "crash", "act", claim, lines, next_step=step, certainty=c.get("certainty") or "certain",
            ranks=[c["rank"]], compiles=[ref] if ref else [], target=ref, evidence=_ev(c), facet=c.get("category"), key=f"crash:{c['rank']}:{c['exc_type']}:{c.get('filename')}:{c.get('line')}",
        ))
    return out


_CHANGED = {"size": "dimension {dim} of {src}", "stride": "stride {dim} of {src}", "dtype": "the dtype of {src}",
            "device": "the device of {src}", "requires_grad": "requires_grad of {src}",
            "ndim": "the number of dimensions of {src}", "value": "{src}"}


def _refused_cause(f: dict[str, Any] | None) -> str:
    """What changed, from the failed guard of the newest cache entry (a recompile's cause)."""
    if f is None:
        return "no cache entry yet: the call needed the first compile of the function"
    what = _CHANGED.get(f.get("kind") or "", "").format(dim=f.get("dim"), src=f.get("guard_source"))
    if what and f.get("expected") and f.get("actual"):
        return f"{what} changed: {f['expected']} -> {f['actual']}"
    if what and f.get("expected"):
        return f"{what} is no longer {f['expected']}, the value every compile was made for"
    return f"the guard `{f.get('guard')}` failed"


def _refused_fix(st: dict[str, Any], f: dict[str, Any] | None) -> str:
    """The fix of a refused recompile: warm up what it refused before the stance, or
    eager_on_recompile (those calls then run eagerly, uncompiled)."""
    eager = "or torch.compiler.set_stance('eager_on_recompile'), which runs such calls eagerly instead of failing"
    fn = st.get("function") or "the function"
    if f is None:
        return (f"call {fn} once, with every input kind it will see, before set_stance('{st.get('stance')}'): "
                f"the stance refuses a first compile too; {eager}")
    kind, src, dim = f.get("kind"), f.get("guard_source"), f.get("dim")
    if kind in ("size", "stride") and src and dim is not None:
        return (f"warm up every shape before set_stance('{st.get('stance')}') (one call of {fn} per shape), or "
                f"torch._dynamo.mark_dynamic({src}, {dim}) before the first call so one graph serves every size; {eager}")
    if kind == "dtype" and src:
        return (f"warm up every dtype before set_stance('{st.get('stance')}') (call {fn} once with {f.get('actual') or 'that'} "
                f"inputs), or cast {src} to {f.get('expected')} before the call; {eager}")
    if kind == "value" and src:
        return (f"warm up every value of {src} before set_stance('{st.get('stance')}'), or pass it as a tensor so a new "
                f"value needs no new graph; {eager}")
    return f"warm up every input kind before set_stance('{st.get('stance')}'); {eager}"


def _stance_refusal(c: dict[str, Any], paths: Paths) -> Finding:
    """set_stance("fail_on_recompile") refused the compile a call needed (the RuntimeError that
    ends the program): what changed (the guard the newest cache entry failed, parsed as a
    recompile's), the recompiles allowed before the stance, the fix."""
    st = c["stance"]
    f = st.get("refused")
    fn = (f"{st['function']} ({paths.show(st.get('filename'), st.get('line'))})" if st.get("function")
          else "a compiled function (torch's message names none)")
    what = "recompile" if f is not None else "first compile"
    claim = (f"{rank_prefix(c['rank'])}torch.compiler.set_stance('{st.get('stance')}') refused a {what} of {fn}: "
             f"{_refused_cause(f)}; the program stopped with {c['exc_type']}")
    lines: list[tuple[str, str]] = []
    if c.get("filename"):
        code = f": {c['code']}" if c.get("code") else ""
        lines.append(("", f"the call at {c.get('function') or '?'} ({paths.show(c['filename'], c['line'])}){code}"))
    failures = st.get("failures") or []
    if f is not None:
        against = f" (against {bracketed(f['failed_against'])}, the newest cache entry)" if f.get("failed_against") else ""
        others = len(failures) - 1
        more = f"; {plural(others, 'older entry', 'older entries')} failed too" if others > 0 else ""
        lines.append(("cause:", f"{f.get('guard')}{against}{more}"))
    allowed = st.get("allowed") or []
    if allowed:
        said = "; ".join(f"{bracketed(a['compile_id'], a.get('occurrence'))} {a['cause']}" for a in allowed)
        lines.append(("allowed:", f"{plural(len(allowed), 'recompile')} before the stance, not the problem: {said}"))
    if st.get("precompiled"):
        lines.append(("", "the message also lists precompiled guards that failed (torch.compiler's precompile cache)"))
    fix = _refused_fix(st, f)
    lines.append(("fix:", fix))
    ref = None
    return Finding(
        "crash", "act", claim, lines, next_step=fix, certainty=c.get("certainty") or "certain",
        ranks=[c["rank"]], compiles=[], target=ref, evidence=_ev(c), facet="stance_refused",
        code=fn, short=f"set_stance('{st.get('stance')}') refused a {what}" + (f" of {st['function']}" if st.get("function") else ""),
        key=f"crash:{c['rank']}:stance:{st.get('function')}:{st.get('line')}",
    )


def _memory_claim(c: dict[str, Any], paths: Paths) -> str:
    """An out-of-memory crash: what was asked and free, in whose code."""
    ran = c.get("ran") or {}
    if ran.get("compile_id"):
        where = f"in the compiled code of {bracketed(ran['compile_id'], ran.get('occurrence'))} {code_label(ran, paths.show)}"
    elif c.get("filename"):
        where = f"at {c['function'] or '?'} ({paths.show(c['filename'], c['line'])}), raised in {c['raised_in']}"
    else:
        where = f"raised in {c['raised_in']}"
    mem = c.get("memory") or {}
    nums = []
    if mem.get("asked"):
        nums.append(f"{mem['asked']['text']} asked")
    if mem.get("free"):
        nums.append(f"{mem['free']['text']} free" + (f" of {mem['capacity']['text']}" if mem.get("capacity") else ""))
    if mem.get("this_process"):
        nums.append(f"this process holds {mem['this_process']['text']}")
    dev = f" ({mem['backend']}{', ' + mem['device'] if mem.get('device') else ''})" if mem.get("backend") else ""
    return (f"{rank_prefix(c['rank'])}{c['exc_type']} {where}: out of device memory{dev}"
            + (f": {', '.join(nums)}" if nums else ""))


def _memory_lines(c: dict[str, Any], ran: dict[str, Any]) -> list[tuple[str, str]]:
    """The generated code's allocation that failed, and the compile's input."""
    lines: list[tuple[str, str]] = []
    module = re.split(r"[/\\]", ran.get("module") or "?")[-1]
    whose = f" (the generated code of {bracketed(ran['compile_id'], ran.get('occurrence'), ran.get('attempts'))})" if ran.get("compile_id") else ""
    buf = ran.get("buffer")
    what = f"{buf['name']}, {buf['shape']} {buf['dtype']}: " if buf else ""
    lines.append(("allocation:", f"{what}{module}:{ran.get('module_line')}{whose}: {ran.get('statement') or '?'}"))
    if ran.get("compile_id") and ran.get("recompile_reason"):
        lines.append(("input:", f"{bracketed(ran['compile_id'], ran.get('occurrence'), ran.get('attempts'))} recompiled for {ran['recompile_reason'].strip()}"
                                + (" (its sizes dynamic since)" if buf and buf.get("symbolic") else "")))
    if not ran.get("compile_id") and ran.get("how"):
        lines.append(("compile:", ran["how"]))
    return lines


def _storm_lines(s: dict[str, Any], paths: Paths, optim: dict[tuple, dict[str, Any]]) -> tuple[str, list[tuple[str, str]]]:
    """A recompiling function's line (count, seconds, limit) and its cause / fix lines."""
    line = f"{paths.code(s)}{after_resets(s.get('epoch'))}: {s['compiles']} compiles"
    failed = (s.get("failed_compiles") or 0) - (1 if s.get("limit_compile_id") else 0)
    if failed > 0:
        line += f" ({failed} failed)"
    if s["compile_seconds"]:
        line += f", {seconds_text(s['compile_seconds'])}"
    if s["hit_recompile_limit"]:
        lim = f" ({s['recompile_limit']})" if s.get("recompile_limit") else ""
        at = f" at {bracketed(s['limit_compile_id'])}" if s.get("limit_compile_id") else ""
        line += f"; HIT THE RECOMPILE LIMIT{lim}{at}, runs eagerly from then on"
    if s.get("forced_dynamic_false"):
        line += "; compiled with dynamic=False"
    lines: list[tuple[str, str]] = []
    if s.get("stall"):
        st = s["stall"]
        lines.append(("cost:", f"{ranks_text(st['waiting_ranks']).strip()} stalled ~{seconds_text(st['seconds'])} "
                               f"meanwhile: on some ranks only, not free ({st.get('section') or 'RANK STALLS'})"))
    code = s.get("code") or {}
    if code.get("per_instance") is not None and code.get("module_class"):
        cls = code["module_class"].rsplit(".", 1)[-1]
        lines.append(("shared:", (
            f"no: torch guards the object itself (ID_MATCH on self), so each {cls} compiles on its own"
            if code["per_instance"] else
            f"one code object for every {cls}; torch guards the class, not the object, so the instances share "
            "each compile while their guarded values match"
        )))
    opt = optim.get((s["rank"], s["function"], s["filename"], s["line"]))
    if opt:  # the compiled-optimizer + LR-scheduler pattern: one cause, the float lr
        lines.append(("cause:", f"{opt['headline']} ({opt['explanation']})"))
        lines.append(("fix:  ", opt["fix"]))
        return line, lines
    for c in s["causes"][:3]:
        tag = "expected: " if c.get("expected") and not s.get("expected") else ""
        sure = " (likely: read indirectly)" if c.get("certainty") == "likely" else ""
        lines.append(("cause:", f"{tag}{c['text']}, {plural(c['count'], 'recompile')}{sure}"))
        lines.append(("fix:  ", c["fix"]))
    if len(s["causes"]) > 3:
        lines.append(("", f"… {len(s['causes']) - 3} more causes (--json lists all)"))
    if s.get("secondary_guards"):
        lines.append(("", f"({plural(s['secondary_guards'], 'more failed guard')} against older cache entries, "
                          "secondary: one primary cause per recompile is counted)"))
    if not s["causes"]:
        lines.append(("cause:", "no failed guard logged (TORCH_LOGS=recompiles_verbose prints them)"))
    return line, lines


def _storm_target(s: dict[str, Any], recompiles: pl.DataFrame | None) -> tuple[CompileRef | None, str | None]:
    """Where a recompile finding jumps: the compile whose guard failed first, and the cache
    entry it failed against (the recompiles table), else the second compile."""
    ids = s.get("compile_ids") or []
    target = CompileRef(s["rank"], ids[1] if len(ids) > 1 else ids[0]) if ids else None
    c = (s.get("causes") or [{}])[0]
    if c.get("guard") and recompiles is not None and recompiles.height:
        hit = recompiles.filter(
            (pl.col("guard") == c["guard"])
            & (pl.col("rank").is_null() if s["rank"] is None else pl.col("rank") == s["rank"])
            # this storm's function (after a reset another one may fail the same guard text)
            & (pl.col("function").is_null() | pl.col("function").eq_missing(s["function"]))
        ).head(1)
        if hit.height:
            occ = hit["occurrence"][0] if "occurrence" in hit.columns else None
            return CompileRef(s["rank"], hit["compile_id"][0], occ), hit["failed_against"][0]
    return target, None


def _resume_of_fixed_break(s: dict[str, Any], report: dict[str, Any]) -> str | None:
    """A recompile of the resume function of a graph break the run fixed later (its config fix
    applied after a reset: hotspots' `fixed_later`): its fix is that one, already applied."""
    m = re.match(r"^torch_dynamo_resume_in_(\w+?)_at_(\d+)$", s.get("function") or "")
    if not m:
        return None
    for g in report.get("graph_breaks") or []:
        fx = g.get("fixed_later")
        if (fx and g.get("function") == m.group(1) and str(g.get("line")) == m.group(2)
                and g.get("filename") == s.get("filename") and fx.get("file") == s.get("file")):
            return (f"this is the resume function of the graph break at line {g['line']} of {g['function']}, whose fix "
                    f"the run applied later ({fx['setting']}, after torch._dynamo.reset()): see GRAPH BREAKS FIXED LATER; "
                    "nothing left to do")
    return None


def _storms(report: dict[str, Any], paths: Paths, recompiles: pl.DataFrame | None) -> list[Finding]:
    storms = report.get("recompiles") or []
    fails = report.get("failures") or []
    optim = {(o["rank"], o["function"], o["filename"], o["line"]): o for o in report.get("compiled_optimizer") or []}
    alone = _stall_ids(report)
    diverging: dict[Any, list[dict[str, Any]]] = {}  # rank -> its divergence rows (recompile_behind: of its rank)
    for d in report.get("rank_divergence") or []:
        diverging.setdefault(d["rank"], []).append(d)
    behind = {id(s) for s in storms if any(recompile_behind(d, s) for d in diverging.get(s["rank"], ()))}
    # a recompile made on some ranks only while the others waited: the stall is its finding
    behind |= {id(s) for s in storms
               if s.get("stall") and set((s.get("compile_ids") or [])[1:]) <= alone.get(s["rank"], set())}
    # a code object's recompiles before set_stance("fail_on_recompile") refused one: the program's
    # warm-up, allowed by it (the refusal is the finding)
    warmed = {(c["rank"], c["stance"]["function"], c["stance"].get("filename")) for c in report.get("crashes") or []
              if c.get("category") == "stance_refused" and c.get("stance") and c["stance"].get("function")}
    out = []
    for s, ranks in group_ranks([s for s in storms if id(s) not in behind], storm_key):
        allowed = any((r, s["function"], s.get("filename")) in warmed or (r, s["function"], None) in warmed for r in ranks)
        expected = bool(s.get("expected")) or allowed
        fixed = not expected and bool(s.get("fixed_later"))  # the run applied the fix after a reset
        kind = "expected" if expected else "fixed" if fixed else ("storm" if s.get("is_storm") else "recompile")
        line, lines = _storm_lines(s, paths, optim)
        if allowed and not s.get("expected"):
            lines = [("allowed:", "before set_stance('fail_on_recompile'), which then refused the next one (CRASHED): "
                                  "the program's warm-up, not the problem"), *lines]
        applied = _resume_of_fixed_break(s, report)
        if applied:  # the break that hands this value over was fixed later in the run
            lines = [(label, applied if label.strip() == "fix:" else text) for label, text in lines]
        more: list[tuple[str, str]] = []
        if not s.get("is_storm") or expected:
            more.append(("why:", recompile_why(s)))
        for c in s.get("causes") or []:
            if c.get("guard"):
                more.append(("failed guard:", c["guard"]))
        more.append(("compile ids:", ", ".join(s.get("compile_ids") or [])))
        nxt = None
        for f in fails:
            if storm_failure(s, f):
                more.append(("limit:", f"{bracketed(f['compile_id'], f.get('occurrence'), f.get('attempts'))} refused at the recompile limit: {one_line(f.get('reason') or '', 200)}"))
                nxt = f["next_step"]
        more += _on_ranks(ranks)
        target, compare = _storm_target(s, recompiles)
        opt = optim.get((s["rank"], s["function"], s["filename"], s["line"]))
        fix = applied or (opt["fix"] if opt else next((c["fix"] for c in s.get("causes") or []), None))
        out.append(Finding(
            kind, "expected" if expected else "fact" if fixed else "act", f"{ranks_text(ranks)}{line}", lines, more,
            next_step=nxt or fix,
            certainty="likely" if any(c.get("certainty") == "likely" for c in s.get("causes") or []) else "certain",
            cost=Cost(seconds=float(s.get("compile_seconds") or 0.0), compiles_wasted=max(int(s["compiles"]) - 1, 0)),
            ranks=ranks, compiles=[CompileRef(r, cid) for r in ranks for cid in (s.get("compile_ids") or [])[:1]],
            code=paths.code(s), evidence=_ev(s), count=int(s["compiles"]), facet="limit" if s["hit_recompile_limit"] else None,
            target=target, compare=compare, view="guards",
            key=f"{kind}:{s['function']}:{s['filename']}:{s['line']}:{s.get('epoch') or 1}:{ranks_text(ranks).strip()}",
        ))
    return out


def _graph_breaks(report: dict[str, Any], paths: Paths) -> list[Finding]:
    fails = report.get("failures") or []
    # strict torch.export's data-dependent failure logs its break too: the failure (or the
    # crash) says it; a break is left out only where all of it is such failures, in its own file
    exported = [f for f in fails if f["category"] == "export_data_dependent" and f.get("compile_id")]
    out = []
    for g in report.get("graph_breaks") or []:
        mine = [f for f in exported if f.get("file") == g.get("file") and f["compile_id"] in (g.get("compile_ids") or [])
                and f.get("rank") in (g.get("ranks") or [None])]
        if mine and len(mine) >= int(g.get("count") or 0):
            continue
        gb = f" [{g['gb_id']}]" if g.get("gb_id") else ""
        ranks = list(g.get("ranks") or [])
        where = f"{ranks_text(ranks)}{g['count']}x" if ranks else f"{g['count']}x"
        # the break's line, not the compiled frame's first line (Frames shows that one): said
        starts = (
            f" (its frame starts at line {g['frame_line']})"
            if g.get("frame_line") is not None and g.get("frame_function") == g.get("function")
            and g.get("frame_filename") == g.get("filename") and g["frame_line"] != g.get("line")
            else ""
        )
        claim = f"{paths.show(g['filename'], g['line'])} in {g['function'] or '?'}{starts}{gb}, {where}"
        wrapper = bool(g.get("expected") and g.get("wrapper_break"))  # a wrapper's own break (analyze.ddp)
        if wrapper:
            claim = f"{g['wrapper_break']} ({paths.show(g['filename'], g['line'])}), {where}"
        lines: list[tuple[str, str]] = [("", one_line(g["reason"], 400))]
        if wrapper:  # one short line; torch's words and the whole why in the details
            lines = [("why:", f"{DDP_WRAPPER_WHY}; nothing of yours to avoid")]
        elif g.get("explanation") and g["explanation"] != g["reason"]:
            src = " (torch's graph-break registry)" if g.get("explanation_from") == "registry" else ""
            lines.append(("why:", one_line(g["explanation"], 300) + src))
        skipped = bool(g["frame_skipped"])
        if skipped:
            frame = f"{g.get('frame_function') or '?'} ({paths.show(g.get('frame_filename'), g.get('frame_line'))})"
            why = f": {g['frame_skipped_why']}" if g.get("frame_skipped_why") else ""
            lines.append(("", f"WHOLE FRAME RAN EAGERLY: {frame}{why}"))
            if g.get("advice"):
                lines.append(("fix:", g["advice"]))
        elif (fx := g.get("fixed_later")) and not g.get("expected"):
            # the run set torch's config fix itself, after a reset: said as applied, not as the fix
            times = "once" if fx["compiles"] == 1 else f"{fx['compiles']} times"
            lines.append(("fixed:", (
                f"applied later in this run: after torch._dynamo.reset(), {fx['setting']} was set and "
                f"{fx['function']} compiled {times} as {bracketed(fx['compile_id'], fx.get('occurrence'))} with no "
                "break at this line: the fix worked, nothing left to do")))
        elif g.get("advice") and not g.get("expected"):  # an expected break's why is in its details
            # torch's hint that names a config setting is the fix
            lines.append(("fix:" if g.get("config_fix") else "hint:", g["advice"]))
        more: list[tuple[str, str]] = [("where:", f"{g['filename'] or '?'}:{g['line']} in {g['function'] or '?'}")]
        if wrapper:
            more += [("reason:", one_line(g["reason"], 400)), ("why:", g.get("advice") or "")]
        message = (g.get("reason_line") or "").removesuffix("Graph break encountered:").strip()
        if message and message != g["reason"]:
            more.append(("message:", message))
        if g.get("hint") and g.get("hint") != g.get("advice"):
            more.append(("hint:", g["hint"]))
        for f in fails:
            if break_failure(g, f):
                more.append(("compile:", f"{bracketed(f['compile_id'], f.get('occurrence'), f.get('attempts'))} fell back to eager ({f.get('fail_type') or '?'})"))
        ids = g.get("compile_ids") or []
        more.append(("gb id:", g.get("gb_id") or "-"))
        more.append(("compile ids:", ", ".join(ids) + (f" on {ranks_text(ranks).strip()}" if ranks_text(ranks) else "")))
        rank = ranks[0] if ranks else None
        fixed = bool(g.get("fixed_later")) and not g.get("expected")
        severity = "expected" if g.get("expected") else "fact" if fixed else "act"
        if fixed:
            more.append(("torch's hint:", g.get("advice") or ""))
        out.append(Finding(
            "graph_break", severity, claim, lines, more, next_step=None if fixed else g.get("advice"),
            cost=Cost(), ranks=ranks, compiles=[CompileRef(rank, c) for c in ids], evidence=_ev(g, rank),
            count=int(g["count"]), facet="frame_skipped" if skipped else None,
            target=CompileRef(rank, ids[0]) if ids else None, abridged=wrapper,
            key=f"graph_break:{g.get('filename')}:{g.get('line')}:{g.get('gb_id')}:{one_line(g['reason'], 120)}",
        ))
    return out


def _failures(report: dict[str, Any], paths: Paths) -> list[Finding]:
    """Failed compiles, but those another finding already tells as its own (one root cause):
    a recompile storm's refusal at the recompile limit, a graph break that sent its frame to
    eager (a break that raised under fullgraph=True stays a failure: the compile failed)."""
    storms = report.get("recompiles") or []
    breaks = report.get("graph_breaks") or []
    # an export the program crashed of is said once, as the crash (the same error)
    exported = {c.get("rank") for c in report.get("crashes") or [] if c.get("category") == "export_data_dependent"}
    fails = [
        f for f in report.get("failures") or []
        if not any(storm_failure(s, f) and recompiled_repeatedly(s) for s in storms)
        and not any(g.get("frame_skipped") and break_failure(g, f) for g in breaks)
        and not (f["category"] == "export_data_dependent" and f.get("rank") in exported)
    ]
    out = []
    # the same failure on many ranks, or of many compiles, is one finding (findings.group_failures)
    for f, franks, same in group_failures(fails):
        ft = f" ({f['fail_type']})" if f.get("fail_type") else ""
        claim = (f"{ranks_text(franks)}{_failed_ids(same)} {code_label(f, paths.show)}: "
                 f"{CATEGORY_WORDS.get(f['category'], f['category'])}{ft}")
        if f["category"] == "export_data_dependent":  # the verdict first, at the user's line
            ids = f" {_failed_ids(same)}" if f.get("compile_id") else ""
            claim = (f"{ranks_text(franks)}{CATEGORY_WORDS['export_data_dependent']} in {f.get('function') or '?'} "
                     f"({paths.show(f['filename'], f['line'])}){ids}{ft}")
        lines: list[tuple[str, str]] = [("", f["reason"] or "")]
        if injected := injection_words(f.get("testing_only_config")):
            lines.append(("cause:", injected[0]))
        if f.get("occurrence") and f["occurrence"] > 1:
            lines.append(("", f"(#{f['occurrence']}: compile id {f['compile_id']} was used again in this process after "
                              "an earlier compile with that id ended: torch._dynamo.reset() restarts the ids)"))
        if f.get("certainty") and f["certainty"] != "certain":
            lines.append(("how sure:", f"{f['certainty']} ({f.get('evidence') or 'indirect evidence'})"))
        lines.append(("next:", f["next_step"]))
        ranks = sorted({r for r in franks if r is not None}) or [None]
        more = [("reason:", f.get("reason_full") or f.get("reason") or "?"), *_on_ranks(ranks)]
        # a non-strict export that stopped partway has no compile id (no compile to open)
        ref = CompileRef(f["rank"], f["compile_id"], f.get("occurrence"), f.get("attempts")) if f.get("compile_id") else None
        out.append(Finding(
            "failure", "act", claim, lines, more, next_step=f["next_step"], certainty=f.get("certainty") or "certain",
            ranks=ranks, compiles=[CompileRef(x["rank"], x["compile_id"], x.get("occurrence"), x.get("attempts")) for x in same if x.get("compile_id")],
            evidence=_ev(f), count=len(same), facet=f["category"], target=ref,
            key=f"failure:{f['compile_id']}:{f.get('occurrence')}:{f['category']}:{ranks_text(franks).strip()}",
        ))
    return out


def _failed_ids(same: list[dict[str, Any]]) -> str:
    """The compile ids of one failure fact: "[0/2]", "[0/0, 0/1]", "[0/0 … 0/3: 4 compiles]"."""
    ids = list(dict.fromkeys(id_label(f["compile_id"], f.get("occurrence"), f.get("attempts")) for f in same))
    if len(ids) <= 3:
        return f"[{', '.join(ids)}]"
    return f"[{ids[0]} … {ids[-1]}: {len(ids)} compiles]"


def _cudagraphs(report: dict[str, Any]) -> list[Finding]:
    out = []
    for c in (report.get("cudagraphs") or {}).get("findings") or []:
        more = [("compile ids:", ", ".join(c["compile_ids"]))]
        more += [("op:", f"{o['op']}: {o['reason']}" + (f" {o['fx']}" if o.get("fx") else "")) for o in c.get("ops") or []]
        ref = CompileRef(c["rank"], c["compile_ids"][0]) if c.get("compile_ids") else None
        out.append(Finding(
            "cudagraphs", "act", f"{ranks_text([c['rank']])}{c['headline']}", [("fix:", c["fix"])], more,
            next_step=c["fix"], ranks=[c["rank"]], compiles=[CompileRef(c["rank"], i) for i in c.get("compile_ids") or []],
            target=ref, key=f"cudagraphs:{c['rank']}:{c['headline']}",
        ))
    return out


def _collective_ids(report: dict[str, Any]) -> dict[Any, set[str]]:
    """rank -> the compile ids it made alone whose collectives do not match the others'
    (analyze.collectives): that finding says the divergence, with the only fix that works
    (a wait at a collective in the lone graph says it too: see _divergence)."""
    out: dict[Any, set[str]] = {}
    for m in (report.get("collectives") or {}).get("mismatches") or []:
        if m.get("other_compile_id"):
            for r in m.get("ranks") or []:
                out.setdefault(r, set()).add(m["compile_id"])
    return out


def _divergence(report: dict[str, Any]) -> list[Finding]:
    div = report.get("rank_divergence") or []
    storms = report.get("recompiles") or []
    alone = _stall_ids(report)
    for r, ids in _collective_ids(report).items():
        alone.setdefault(r, set()).update(ids)
    waited: dict[Any, set[str]] = {}  # rank -> the lone compiles of others it waited for
    for w in (report.get("collectives") or {}).get("waits") or []:  # said by the wait, with its cause
        if w.get("waiting_ranks"):
            for r in w.get("compiling_ranks") or []:
                alone.setdefault(r, set()).add(w["compile_id"])
            for r in w["waiting_ranks"]:
                waited.setdefault(r, set()).add(w["compile_id"])
    for st in report.get("rank_stalls") or []:
        ids = {x["compile_id"] for x in st.get("compiles") or []}
        for r in st["waiting_ranks"]:
            waited.setdefault(r, set()).update(ids)

    def said_elsewhere(d: dict[str, Any]) -> bool:
        """A rank that differs only by compiles it made alone while the others waited, or by the
        others' lone compiles it waited for: the stall or the wait says it."""
        mine = set(d.get("extra_compile_ids") or []) | set(d.get("different") or [])
        lacks = set(d.get("missing_compile_ids") or [])
        return bool(mine | lacks) and mine <= alone.get(d["rank"], set()) and lacks <= waited.get(d["rank"], set())

    div = [d for d in div if not said_elsewhere(d)]
    out = []
    for d, ranks in group_ranks(div, divergence_key):  # 1,000 ranks that differ alike: one finding
        more: list[tuple[str, str]] = []
        for key, label in (("extra_compile_ids", "extra:"), ("missing_compile_ids", "missing:"), ("different", "different:")):
            if d.get(key):
                more.append((label, ", ".join(d[key])))
        # the recompile behind it is one root cause with it: its cause and fix are said here
        lines: list[tuple[str, str]] = []
        fix = None
        for s in storms:
            if recompile_behind(d, s):
                for c in s.get("causes") or []:
                    lines.append(("cause:", f"{s['function'] or '?'} recompiled on rank {s['rank']}: {c['text']}"))
                    lines.append(("fix:", c["fix"]))
                    fix = fix or c["fix"]
                if s.get("forced_dynamic_false"):
                    lines.append(("note:", "compiled with automatic dynamic shapes off (dynamic=False)"))
        cid = (d.get("extra_compile_ids") or d.get("different") or [None])[0]
        target = CompileRef(d["rank"], cid) if cid else None
        out.append(Finding(
            "divergence", "act", f"{ranks_text(ranks).strip()}: {d['detail']}", lines, more, next_step=fix, ranks=ranks,
            compiles=[target] if target else [], evidence=_ev(d), target=target,
            key=f"divergence:{ranks_text(ranks).strip()}:{d['detail']}",
        ))
    return out


def _op_text(o: dict[str, Any]) -> str:
    dt = f" {o['dtypes'].split(',')[0].replace('torch.', '')}" if o.get("dtypes") else ""
    return f"{o['op']}({o['shape']}){dt}" if o.get("shape") else f"{o['op']}{dt}"


def _won_text(o: dict[str, Any]) -> str:
    """One autotuned op and what won it: `mm(512x1024, 1024x4096) float16: mm (ATen) 0.0113 ms,
    best Triton triton_mm_58 0.0120 ms; 25.73s autotuning`."""
    if not o.get("winner"):
        before = f"; {seconds_text(o['seconds'])} of it logged" if o.get("seconds") else ""
        return f"{_op_text(o)}: still autotuning when the log ends, no winner logged{before}"
    ms = f" {o['best_ms']:.4f} ms" if o.get("best_ms") is not None else ""
    tr = (f", best Triton {o['best_triton_kernel']} {o['best_triton_ms']:.4f} ms"
          if o.get("best_triton_kernel") and o.get("best_triton_ms") is not None and o["winner_kind"] != "Triton" else "")
    return f"{_op_text(o)}: {o['winner']} ({o['winner_kind']}){ms}{tr}; {seconds_text(o['seconds'])} autotuning"


def _max_autotune_words(m: dict[str, Any]) -> tuple[str, str]:
    """(what it bought, the step) of max-autotune's autotuning (compile_time.max_autotune)."""
    n, aten = m["finished"], m["aten_won"]
    mode, config = m.get("mode"), m.get("config")
    if mode:  # the mode its cache keys show (compile_time.autotune_mode)
        what = f'mode="{mode}"'
        cg = ('; mode="reduce-overhead" keeps the CUDA graphs mode="max-autotune" adds'
              if mode == "max-autotune" and m.get("triton_choices") else "")
    else:
        what = ("max_autotune=True" if (config or {}).get("max_autotune") else "max_autotune_gemm=True"
                if (config or {}).get("max_autotune_gemm") else
                'max-autotune (mode="max-autotune" / "max-autotune-no-cudagraphs" / max_autotune=True)')
        cg = ('; where mode="max-autotune" was for its CUDA graphs, mode="reduce-overhead" keeps them'
              if config is None and m.get("triton_choices") else "")
    if n and aten == n:
        return (
            f"nothing on this run: ATen's kernel won every op it finished autotuning ({aten} of {n})",
            f"drop {what}: the default mode uses the ATen kernel without autotuning it, saving "
            f"~{seconds_text(m['seconds'])} of compile{cg}",
        )
    if not n:
        return ("nothing known yet: no autotuning finished, so no winner was logged",
                "if the time limit cut it, drop max-autotune or warm the caches before raising the limit")
    kinds: dict[str, int] = {}
    for o in m["ops"]:
        if o.get("winner_kind") and o["winner_kind"] != "ATen":
            kinds[o["winner_kind"]] = kinds.get(o["winner_kind"], 0) + 1
    got = ", ".join(f"{k} kernels for {v}" for k, v in kinds.items())
    rest = f" (ATen's kernel won the other {aten})" if aten else ""
    return (
        f"{got} of the {n} ops it finished{rest}",
        f"keep max-autotune only if those kernels' speed-up is worth ~{seconds_text(m['seconds'])} of compile on "
        "every cold start: reuse it from a warm cache (TORCHINDUCTOR_CACHE_DIR on shared storage, "
        "torch.compiler.save_cache_artifacts / load_cache_artifacts)"
        + ("; where ATen won, autotuning bought nothing" if aten else ""),
    )


def _max_autotune(report: dict[str, Any]) -> list[Finding]:
    """GEMM autotuning (max-autotune) that took most of the compile time, or that a compile
    ended inside (compile_time.max_autotune): its seconds, each op's winner, and whether it
    bought anything."""
    m = (report.get("compile_time") or {}).get("max_autotune")
    if not m or not m.get("dominant"):
        return []
    bought, step = _max_autotune_words(m)
    share = f" ({m['seconds'] / m['compile_s']:.0%})" if m.get("compile_s") else ""
    how = f' (mode="{m["mode"]}")' if m.get("mode") else ""
    claim = (f"max-autotune{how}: {seconds_text(m['seconds'])} of {seconds_text(m['compile_s'])} compile time{share} went to "
             f"autotuning {plural(len(m['ops']), 'GEMM')}; it bought {bought}")
    lines: list[tuple[str, str]] = []
    for s in m.get("stopped_in") or []:
        part = f" {s['part']}" if s.get("part") in ("backward", "compiled autograd") else ""
        what = f"{s['op']}({s['shapes']})" if s.get("shapes") else s["op"]
        lines.append(("ended in:", f"{rank_prefix(s.get('rank'))}{bracketed(s['compile_id'], s.get('occurrence'))}{part} "
                                   f"was autotuning {what} when the log ends (see UNFINISHED COMPILES)"))
    for o in m["ops"][:6]:
        lines.append(("won:", f"{rank_prefix(o.get('rank'))}{bracketed(o['compile_id'], o.get('occurrence'), o.get('attempts'))} {_won_text(o)}"))
    if len(m["ops"]) > 6:
        lines.append(("", f"… {len(m['ops']) - 6} more autotuned ops (--json lists all)"))
    lines.append(("next:", step))
    nothing = bool(m["finished"]) and m["aten_won"] == m["finished"]
    refs = list(dict.fromkeys(CompileRef(o.get("rank"), o["compile_id"]) for o in m["ops"] if o.get("compile_id")))
    return [Finding(
        "autotune", "act" if nothing or m.get("stopped_in") else "fact", claim, lines, next_step=step,
        cost=Cost(seconds=float(m["seconds"])), ranks=sorted({o.get("rank") for o in m["ops"]}, key=lambda r: -1 if r is None else r),
        compiles=refs, target=refs[0] if refs else None, facet="nothing_bought" if nothing else None,
        key="autotune:max-autotune", short=f"max-autotune took {seconds_text(m['seconds'])} of the compile time",
    )]


_ARTIFACT_WORDS = {"inductor": "Inductor (FX graph)", "aot_autograd": "AOTAutograd", "pgo": "PGO", "autotune": "autotune",
                   "precompile": "precompile"}


def _lookups(x: dict[str, Any]) -> str:
    """`FX graph 2 hits / 0 misses, AOTAutograd 1 hit / 0 misses` (what was looked up)."""
    parts = []
    for what, h, m in (("FX graph", x["fx_hits"], x["fx_misses"]), ("AOTAutograd", x["aot_hits"], x["aot_misses"])):
        if h or m:
            parts.append(f"{what} {plural(h, 'hit')} / {plural(m, 'miss', 'misses')}")
    return ", ".join(parts) or "no lookup logged"


def _cache_loads(report: dict[str, Any], paths: Paths) -> list[Finding]:
    """A process that loaded portable cache artifacts (torch.compiler.load_cache_artifacts) before
    compiling: a warm start when every lookup after it hit (a fact), in part when some compiles
    missed them, or nothing served when every lookup missed (both: act)."""
    out = []
    # ranks whose loads read the same (the same artifacts, the same lookups per compile) are one finding
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for ld in (report.get("cache") or {}).get("loaded") or []:
        sig = (tuple(sorted(ld["artifacts"].items())), ld["certainty"], tuple(
            (c["compile_id"], c["fx_hits"], c["fx_misses"], c["aot_hits"], c["aot_misses"]) for c in ld.get("compiles") or []))
        groups.setdefault(sig, []).append(ld)
    for same in groups.values():
        ld = {**same[0], "dynamo_s": max(x.get("dynamo_s") or 0 for x in same),
              "kernel_build_s": max(x.get("kernel_build_s") or 0 for x in same)}
        ranks = [x["rank"] for x in same]
        who = ranks_text(ranks)
        slowest = " on the slowest rank" if len(same) > 1 else ""
        order = list(_ARTIFACT_WORDS)
        arts = ", ".join(f"{n} {_ARTIFACT_WORDS.get(k, k)}" for k, n in sorted(
            ld["artifacts"].items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))) or "its"
        wrote = f"torch.compiler.load_cache_artifacts wrote {arts} entr{'y' if sum(ld['artifacts'].values()) == 1 else 'ies'} into the cache"
        comps = ld.get("compiles") or []
        n = len(comps)
        lines: list[tuple[str, str]] = []
        if not comps:
            severity, facet = "fact", "unused"
            claim = f"{who}loaded cache artifacts: {wrote}; no FX graph or AOTAutograd lookup was logged after it"
            step = "the compiles after the load logged no cache lookup: TORCH_TRACE (or TORCH_LOGS=torch._inductor.codecache) shows them"
        elif not ld["missed"]:
            severity, facet = "fact", "served"
            claim = (f"{who}warm start from loaded cache artifacts: {wrote} before compiling; every lookup "
                     f"after it hit ({_lookups(ld)}, in {plural(n, 'compile')})")
            step = ("`traceview diff` of the run that saved the artifacts and this one says what the load saved, per compile "
                    "and per phase")
        else:
            severity = "act"
            facet = "missed" if not ld["served"] else "partial"
            if ld["served"]:
                claim = (f"{who}warm start from loaded cache artifacts, in part: {plural(ld['missed'], 'compile')} "
                         f"of {n} missed them ({_lookups(ld)}); {wrote}")
                step = ("save the artifacts after a run that compiled every shape, dtype and mode this run needs (or mark the "
                        "varying dimension dynamic), so that the load serves every compile; `traceview diff` of the saving run "
                        "and this one shows which compiles are new")
            else:
                claim = (f"{who}loaded cache artifacts served nothing: every lookup after "
                         f"torch.compiler.load_cache_artifacts missed ({_lookups(ld)}); {wrote}")
                step = ("compile with the torch version, configs and inputs the artifacts were saved with: the cache keys "
                        "differ; `traceview diff` of the saving run and this one names the key component that changed")
        for c in comps:
            if ld["missed"] and not (c["fx_misses"] or c["aot_misses"]):
                continue  # where some missed, the lines name those
            name = f"{bracketed(c['compile_id'], c.get('occurrence'))} {paths.compile_name(c)}" if c.get("function") else bracketed(c["compile_id"])
            state = "missed: compiled from scratch" if (c["fx_misses"] or c["aot_misses"]) else "served"
            lines.append(("", f"{name}: {_lookups(c)} ({state})"))
        if ld.get("dynamo_s") and ld["served"]:
            lines.append(("", f"Dynamo still traced every frame ({seconds_text(ld['dynamo_s'])} in all{slowest}): the artifacts hold "
                              "what comes after Dynamo (AOTAutograd and Inductor)"))
        if ld.get("kernel_build_s"):
            lines.append(("kernels:", f"the compiles the artifacts served built their C++ kernels again "
                                      f"({seconds_text(ld['kernel_build_s'])} of compile_file{slowest}): the artifacts hold the "
                                      "generated code, not the compiled kernels"))
        if ld["certainty"] != "certain":
            lines.append(("how sure:", f"{ld['certainty']}: the trace does not name the call; {ld['how']}, which only a "
                                       "load does (TORCH_LOGS=+torch.compiler._cache names each artifact)"))
        lines.append(("next:" if severity != "act" else "fix:", step))
        cost = Cost(seconds=float(sum(c["dynamo_s"] or 0 for c in comps if c["fx_misses"] or c["aot_misses"])))
        out.append(Finding(
            "cache", severity, claim, lines, next_step=step, certainty=ld["certainty"], cost=cost, ranks=ranks,
            compiles=[CompileRef(r, c["compile_id"], c.get("occurrence")) for r in ranks for c in comps],
            evidence=[Evidence(x.get("file"), x.get("lineno"), x["rank"]) for x in same], facet=facet,
            short=("loaded cache artifacts served nothing" if facet == "missed"
                   else f"loaded cache artifacts missed {plural(ld['missed'], 'compile')}" if facet == "partial" else None),
            key=f"cache:{who.strip()}:{facet}",
        ))
    return out


def _slow(report: dict[str, Any], paths: Paths) -> list[Finding]:
    ct = report.get("compile_time") or {}
    out = []
    top: dict[tuple, list[dict[str, Any]]] = {}  # `top` by compile: each slow compile reads its own rows
    for r in ct.get("top") or []:
        top.setdefault((r["compile_id"], r.get("occurrence")), []).append(r)
    for t, ranks in slow_compiles(report):
        on = set(ranks)  # thousands of ranks: a set, not a list
        secs = sorted(r["seconds"] for r in top.get((t["compile_id"], t.get("occurrence")), ()) if r["rank"] in on)
        lo, hi = (seconds_text(secs[0]), seconds_text(secs[-1])) if secs else ("", "")
        span = f"{lo.rstrip('s')}-{hi}" if lo != hi else seconds_text(t["seconds"])
        ref = CompileRef(t["rank"], t["compile_id"], t.get("occurrence"), t.get("attempts"))
        claim = f"{span} {ranks_text(ranks)}{ref} {paths.compile_name(t)}"
        lines = [("phases:", phases_text(compile_phases(t), backward_pieces=t.get("bwd_pieces")))]
        more = [("all compiles:", f"{seconds_text(ct.get('total_s', 0))} in all"), *_on_ranks(ranks)]
        out.append(Finding(
            "compile_time", "fact", claim, lines, more, cost=Cost(seconds=float(t["seconds"])), ranks=ranks,
            compiles=[CompileRef(r, t["compile_id"], t.get("occurrence")) for r in ranks], code=paths.compile_name(t),
            evidence=_ev(t), target=ref, key=f"compile_time:{t['compile_id']}:{t.get('occurrence')}:{t.get('function')}",
        ))
    return out


def judge(trace: Trace | None, *, report: dict[str, Any]) -> list[Finding]:
    """Every finding of the report's analyzer sections, worded once, ranked once: what needs
    action first by cost, then what is expected, then facts. `trace` (optional) only tells a
    recompile finding which compile to open (its recompiles table)."""
    paths = Paths(report)
    recompiles = None
    if trace is not None:
        try:
            recompiles = trace.recompiles
        except Exception:  # a table missing from an old export: the jump falls back to the second compile
            recompiles = None
    found = (
        _compiled_nothing(report) + _timeouts(report, paths) + _stops(report, paths) + _stalls(report) + _unfinished(report, paths)
        + _collectives(report, paths) + _crashes(report, paths) + _divergence(report)
        + _storms(report, paths, recompiles) + _failures(report, paths) + _cudagraphs(report)
        + _graph_breaks(report, paths) + _cache_loads(report, paths) + _max_autotune(report) + _slow(report, paths)
        + _debug_unfinished(report)
    )
    return ranked(found)  # the one order (Finding.rank_key)


# ------------------------------------------------------------------------- the head line
EXPORT_FAILED = "torch.export failed on control flow that needs a tensor's value"
WORKER_DIED = "a compile worker process was killed (lost to the host, not the model)"

def _noun(kind: str) -> str:
    """What the head line counts of a kind (KIND_WORDS' noun; a kind without one: its title's
    findings)."""
    w = KIND_WORDS[kind]
    return w.noun or f"{w.title.lower()} finding"


def _processes(fs: list[Finding]) -> int:
    """How many processes these crash findings are about: one per rank (a rank's uncaught
    error and the signal that then ended it are one death); a finding without a rank, its own."""
    ranks = {r for f in fs for r in f.ranks if r is not None}
    return len(ranks) + sum(1 for f in fs if not any(r is not None for r in f.ranks))


def head_lines(findings: list[Finding], report: dict[str, Any]) -> list[str]:
    """The head line, computed once and kept in the report (`head`): the `findings:` line
    (what needs action, counted, in the findings' order), then `fixed:` and `expected:` lines,
    then what the input cannot tell. The summary, the page, the UI's header and `watch`'s
    digest print these lines as they are."""
    by: dict[str, list[Finding]] = {}
    for f in findings:
        if f.severity == "act":
            by.setdefault(SECTION_OF.get(f.kind, f.kind), []).append(f)
    found = []
    for kind, fs in by.items():
        if kind == "collectives":
            ms = [f for f in fs if f.facet == "mismatch"]
            if ms:
                found.append(f"collectives do not match across ranks ({ranks_text(sorted({r for f in ms for r in f.ranks if r is not None})).strip()})")
            waits = [f for f in fs if f.facet == "wait"]
            if waits:  # as a stall is said
                found.append((waits[0].short or waits[0].claim) + (f" (and {len(waits) - 1} more)" if len(waits) > 1 else ""))
            if any(f.facet == "execution" for f in fs):
                found.append("the ranks ran different compiled graphs")
            if not (ms or waits or any(f.facet == "execution" for f in fs)):  # never none while one needs action
                found.append(plural(len(fs), _noun("collectives")))
        elif kind == "crash":
            oom = sum(1 for f in fs if f.facet == "out_of_memory")
            refused = [f for f in fs if f.facet == "stance_refused"]
            # the stance's refusal is what ended it: said as that (a launcher's report of the rank
            # that stopped is its consequence, not another crash)
            rest = [f for f in fs if f.facet not in ("stance_refused", "launcher_child_failed")]
            exported = sum(1 for f in fs if f.facet == "export_data_dependent")
            worker = sum(1 for f in fs if f.facet == "compile_worker_died")
            if refused:
                found.append((refused[0].short or refused[0].claim) + (f" (on {len(refused)} processes)" if len(refused) > 1 else ""))
                if rest:
                    found.append("the program crashed" if _processes(rest) == 1 else f"{_processes(rest)} processes crashed")
            elif worker == len(fs):  # the host took a compile worker: said as that, not as the program's crash
                found.append(WORKER_DIED + (f" in {_processes(fs)} processes" if _processes(fs) > 1 else ""))
            elif oom == len(fs):  # said as memory, not as a crash of the program's logic
                found.append("out of device memory" + (f" in {len(fs)} processes" if len(fs) > 1 else ""))
            elif exported == len(fs):  # the verdict, not "a crash"
                found.append(f"{EXPORT_FAILED} (the program crashed)" if len(fs) == 1 else f"{EXPORT_FAILED} in {len(fs)} processes")
            else:
                sig = [f for f in fs if f.facet == "signal"]
                procs = _processes(fs)  # a rank's Python error and the signal that then killed it: one process
                # the ranks whose collectives failed because the signal's rank died: its consequence
                led = {r for f in sig[:1] for r in f.ranks if r is not None}
                after = sorted({c["rank"] for c in report.get("crashes") or []
                                if c.get("consequence_of") in led and c.get("rank") is not None and c["rank"] not in led})
                if sig and procs == _processes(sig[:1]) + len(after):  # one signal's death is every crash here
                    rs = [r for r in sig[0].ranks if r is not None]
                    who = "the program was" if not rs else f"{_ranks_words(rs)} {'was' if len(rs) == 1 else 'were'}"
                    then = f" ({_ranks_words(after)} failed after it)" if after else ""
                    found.append(f"{who} {sig[0].short}{then}")
                else:
                    found.append("the program crashed" if procs == 1 else f"{procs} processes crashed"
                                 + (f" ({rank_prefix(sig[0].ranks[0]).strip() or 'one'} {sig[0].short})" if sig else ""))
        elif kind in ("stop", "compiled_nothing", "timeout"):
            found += [f.short or f.claim for f in fs]
        elif kind == "stall":
            found.append(fs[0].short or fs[0].claim)
            if len(fs) > 1:
                found[-1] += f" (and {len(fs) - 1} more)"
        elif kind == "unfinished":
            behind = sum(1 for f in fs if f.facet == "behind")
            found.append(plural(len(fs), _noun("unfinished")) + (f" ({behind} behind the other ranks: likely hang)" if behind else ""))
        elif kind == "storm":
            codes = {f.code for f in fs}
            nranks = len({r for f in fs for r in f.ranks})
            limit = sum(1 for f in fs if f.facet == "limit")
            on = f" on {plural(nranks, 'rank')}" if nranks > 1 and sum(len(f.ranks) or 1 for f in fs) > len(codes) else ""
            found.append(plural(len(codes), _noun("storm")) + on + (f" ({limit} hit the limit)" if limit else ""))
        elif kind == "graph_break":
            eager = sum(1 for f in fs if f.facet == "frame_skipped")
            found.append(plural(len(fs), _noun("graph_break")) + (f" ({eager} sent a whole frame to eager)" if eager else ""))
        elif kind == "failure":
            exported = sum(f.count for f in fs if f.facet == "export_data_dependent")
            if exported:  # an export is no compile: its verdict
                found.append(EXPORT_FAILED if exported == 1 else f"{EXPORT_FAILED} ({exported} exports)")
            # a compile lost to a dead worker that ended the program: the crash's words said it
            lost = sum(f.count for f in fs if f.facet == "compile_worker_died")
            if lost and not any(f.kind == "crash" and f.facet == "compile_worker_died" for f in findings):
                found.append(WORKER_DIED if lost == 1 else f"{WORKER_DIED} ({lost} compiles lost)")
            if sum(f.count for f in fs) > exported + lost:
                found.append(plural(sum(f.count for f in fs) - exported - lost, _noun("failure")))
        elif kind == "cudagraphs":
            found.append(plural(len(fs), _noun("cudagraphs")))
        elif kind in ("autotune", "cache"):
            found.append(fs[0].short or fs[0].claim)
        elif kind == "divergence":
            ranks = [r for f in fs for r in f.ranks]
            found.append(plural(len(ranks), _noun("divergence")) + f" ({ranks_text(ranks).strip()})")
        else:  # a kind without words of its own here: counted, never left out
            found.append(plural(len(fs), _noun(kind)))
    expected = [f for f in findings if f.severity == "expected"]
    recompiled = {f.code for f in expected if f.kind == "expected"}
    breaks = [f for f in expected if f.kind == "graph_break"]
    fixed = {f.code for f in findings if f.kind == "fixed"}
    fixed_breaks = [f for f in findings if f.kind == "graph_break" and f.severity == "fact"]
    # "no graph breaks" only where there is none: expected and fixed ones are said on their own line
    none = ("none that needs action" if recompiled or fixed or fixed_breaks or breaks
            else "none found (a TORCH_COMPILE_DEBUG folder alone shows neither failures nor recompiles: see below)"
            if uncovered_debug_dirs(report) and not report.get("inputs", {}).get("text_logs")
            else "none (no recompiles, graph breaks or failures)")
    out = ["findings: " + (", ".join(found) if found else none)]
    if fixed:
        out.append(f"fixed: {plural(len(fixed), 'function')} recompiled, then compiled once after the run applied the fix")
    if fixed_breaks:
        out.append(f"fixed: {plural(len(fixed_breaks), 'graph break')}, gone after the run applied torch's config fix")
    if recompiled:
        out.append(f"expected: {plural(len(recompiled), 'function')} recompiled by design (nothing to fix)")
    facts = report.get("facts") or {}
    splits = {(d["compile_id"], d.get("occurrence")): d for d in facts.get("ddp_splits") or []}
    if splits:  # DDPOptimizer's split is by design, and no graph break: said beside DDP's own breaks
        first = next(iter(splits.values()))
        what = (f"{bracketed(first['compile_id'], first.get('occurrence'))} into {plural(first['submodules'], 'submodule')}"
                if len(splits) == 1 else plural(len(splits), "graph"))
        out.append(f"expected: DDPOptimizer split {what} at DDP's gradient buckets (by design, not graph breaks)")
    drafted = facts.get("draft_export_issues") or []
    if drafted:  # draft_export's program works; what it assumed is said as a note, not a failure
        out.append(f"note: draft_export decided {plural(len(drafted), 'data-dependent expression')} from the example input (FACTS)")
    unsplit = facts.get("ddp_unsplit") or []
    if unsplit:
        ids = ", ".join(bracketed(d["compile_id"], d.get("occurrence")) for d in unsplit[:3])
        out.append(f"note: optimize_ddp=False: {ids} compiled as one graph (DDP's all-reduce cannot overlap the compiled backward)")
    if breaks:
        out.append(f"expected: {plural(len(breaks), 'graph break')} of DDP's own wrapper (nothing of yours to avoid)")
    served = [f for f in findings if f.kind == "cache" and f.facet == "served"]
    if served:
        out.append("warm start: every cache lookup hit the artifacts torch.compiler.load_cache_artifacts loaded"
                   + (f" (on {n} processes)" if (n := sum(len(f.ranks) or 1 for f in served)) > 1 else "")
                   + ("" if all(f.certainty == "certain" for f in served) else " (likely: read from the trace's marks)"))
    debug = uncovered_debug_dirs(report)
    if debug:
        out.append(_debug_dirs_line(debug, report))
    elif text_log_only(report):
        # cache lookups are in a text log with TORCH_LOGS=torch._inductor.codecache (FACTS)
        what = "compile times or status" if (report.get("cache") or {}).get("from_text_log") else "compile times, cache or status"
        out.append(f"text log only: no {what} (add the TORCH_TRACE directory)")
    return out


def _debug_dirs_line(debug: list[dict[str, Any]], report: dict[str, Any]) -> str:
    """What TORCH_COMPILE_DEBUG folders read without TORCH_TRACE cannot tell (the head line)."""
    graphs = sum(d["graphs"] for d in debug)
    tied = sum(d["tied"] for d in debug)
    folders = plural(len(debug), "TORCH_COMPILE_DEBUG folder")
    line = f"{folders} without TORCH_TRACE: no compile times, guards, cache or status"
    if not report.get("inputs", {}).get("text_logs"):
        line += "; recompiles, graph breaks and failures only as far as its debug.log holds them (TORCH_LOGS)"
    if graphs:
        if tied == graphs:
            line += f"; {plural(graphs, 'Inductor graph')}, each tied to its compile id by torch's `debug trace:` line on stderr"
        elif tied:
            line += (f"; {tied} of {plural(graphs, 'Inductor graph')} tied to a compile id by torch's `debug trace:` line on stderr, "
                     "the others' frame unknown")
        else:
            line += (f"; {plural(graphs, 'Inductor graph')}, compile ids unknown (the folder counter and the AOT id are not "
                     "compile ids: give the run's stderr beside it)")
    empty = sum(len(d.get("empty") or []) for d in debug)
    if empty:
        line += (f"; {plural(empty, 'empty graph folder')} (Inductor writes none of its debug files for a graph it found "
                 "in the FX graph cache: likely cache hits)")
    counts = {d["pid"]: d["graphs"] + len(d.get("empty") or []) for d in debug}
    if len(debug) > 1 and tied < graphs and len(set(counts.values())) > 1:
        # which rank each process was is unknown here; that they compiled differently is not
        each = ", ".join(f"pid {pid}: {n}" for pid, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        line += (f"; its processes compiled different numbers of Inductor graphs ({each}): one may have "
                 "recompiled alone (which rank is which: the run's stderr)")
    return line + " (rerun with TORCH_TRACE=<dir>)"


# ------------------------------------------------------------------ a stop's words
QUIET_MEANS = ("a rank's last record is the last thing torch logged: it may have been running (not hung) "
               "outside compilation until the stop")

def _ranks_words(ranks: list[Any]) -> str:
    rs = [r for r in ranks if r is not None]
    if not rs:
        return "another rank"
    return ("rank " if len(rs) == 1 else "ranks ") + ", ".join(str(r) for r in rs)


def _rank_words(s: dict[str, Any]) -> str:
    return f"rank {s['rank']}" if s["rank"] is not None else "the process"


def _compile_words(s: dict[str, Any]) -> str:
    part = f" {s['part']}" if s.get("part") in ("backward", "compiled autograd") else ""
    phase = f" in {s['phase']}" if s.get("phase") else ""
    run = f" for {s['running_s']:.1f}s" if s.get("running_s") is not None else ""
    return f"inside {bracketed(s['compile_id'], s.get('occurrence'), s.get('attempts'))}{part}{phase}{run}"


def _first_compile_everywhere(states: list[dict[str, Any]]) -> bool:
    """Every rank inside the first compile of one code object (`N/0`), and each still writing
    records (its last within 30s and a quarter of the compile's time before the stop): a time
    limit shorter than the compile, not a hang."""
    if not states or any(s.get("state") != "compiling" for s in states):
        return False
    ids = {s.get("compile_id") for s in states}
    if len(ids) != 1:
        return False
    cid = next(iter(ids)) or ""
    if not cid.endswith("/0") or any((s.get("occurrence") or 1) != 1 for s in states):
        return False
    for s in states:
        quiet, took = s.get("quiet_s"), float(s.get("compile_s") or s.get("running_s") or 0.0)
        if quiet is None or quiet > 30.0 or quiet > 0.25 * took:
            return False
    return True


def stop_verdict(
    kind: str, sig: str, target: str, by: str, states: list[dict[str, Any]], at: Any, job_s: float | None = None
) -> tuple[str, str, str, str, str | None]:
    """A stop's words (analyze.stops has the facts): (head: what stopped what, and the hang
    behind it; doing: what each rank was doing at the stop; next step; certainty; why it is
    only likely, or None)."""
    compiling = [s for s in states if s.get("state") == "compiling"]
    idle = [s for s in states if s.get("state") in ("idle", "running")]
    when = f" at {at.strftime('%H:%M:%S.%f')[:-3]}" if at is not None else ""
    if kind == "rank_killed":
        head = f"{target} was killed by {sig}{when}" + (f" ({by})" if sig == "SIGKILL" else f": {by}")
        stopped = [s for s in states if (s.get("ended_by") or "").endswith("from torchrun")]
        if stopped:
            head += "; torchrun then stopped " + ", ".join(_rank_words(s) for s in stopped) + f" ({stopped[0]['ended_by'].split()[0]})"
    elif kind == "interrupt":
        head = f"{target} was interrupted{when}: {by}"
    else:
        head = f"{target} received {sig}{when} ({by})"
    parts = []
    for s in states:
        if s.get("state") == "compiling":
            parts.append(f"{_rank_words(s)} was {_compile_words(s)}")
        elif s.get("state") == "waiting":
            parts.append(f"{_rank_words(s)} was waiting for {_ranks_words(s['behind'])} ({s['idle_s']:.1f}s since its last record)")
        elif s.get("state") in ("idle", "running"):
            parts.append(f"{_rank_words(s)} was idle for {s['idle_s']:.1f}s since its last record")
    doing = ("; at the stop " + ", ".join(parts)) if parts else ""
    if compiling:
        s = max(compiling, key=lambda x: x.get("running_s") or 0)
        who = _rank_words(s)
        pid = f"<{who}'s pid>" if s.get("pid") is None else str(s["pid"])
        stuck = [(c, hung(c)) for c in compiling if hung(c) is not None]
        waiting = [w for w in states if w.get("state") == "waiting"]
        if stuck and not (kind == "rank_killed" and sig == "SIGKILL"):
            c, took = max(stuck, key=lambda x: x[0].get("running_s") or 0)
            who = _rank_words(c)
            pid = f"<{who}'s pid>" if c.get("pid") is None else str(c["pid"])
            fast = ", ".join(f"rank {o['rank']} in {o['seconds']:.1f}s" for o in c.get("others_s") or [])
            part = f" {c['part']}" if c.get("part") in ("backward", "compiled autograd") else ""
            lost = sum(w.get("idle_s") or 0.0 for w in waiting)
            head += (f"; {who} hung inside {bracketed(c['compile_id'], c.get('occurrence'), c.get('attempts'))}{part}"
                     + (f" ({c['phase']})" if c.get("phase") else "")
                     + f" for {c.get('running_s') or 0:.1f}s, a compile done elsewhere in {took:.1f}s ({fast})")
            if waiting:
                head += (f"; {_ranks_words([w['rank'] for w in waiting])} waited ~{max(w.get('idle_s') or 0 for w in waiting):.1f}s "
                         f"for it ({lost:.1f}s lost in all)")
            step = (
                f"A hang, not a slow compile: the same compile took {took:.1f}s on the other ranks. While it hangs, "
                f"`py-spy dump --pid {pid}` (with --native for C++ frames) names where {who} is stuck inside "
                f"{bracketed(c['compile_id'], c.get('occurrence'), c.get('attempts'))}{part}; TORCH_COMPILE_DEBUG=1 on a rerun keeps the compile's inputs and "
                "backend='aot_eager' tells whether Inductor is the part that hangs. The ranks that finished it wait "
                "for it at their next collective: nothing to change on them, and a longer time limit would not help."
            )
            return head, doing, step, "likely", (f"that {who} hung is read from the same compile's time on the other ranks, "
                                                   "and that a rank waited from its silence after its last record (a waiting rank writes nothing)")
        first = _first_compile_everywhere(states)
        if first and kind == "launcher_signal":
            ids = ", ".join(sorted({bracketed(c["compile_id"], c.get("occurrence"), c.get("attempts")) for c in compiling}))
            secs = [float(c.get("compile_s") or c.get("running_s") or 0.0) for c in compiling]
            span = f"{min(secs):.0f}s" if round(min(secs)) == round(max(secs)) else f"{min(secs):.0f}-{max(secs):.0f}s"
            where = f"on all {len(compiling)} ranks" if len(compiling) > 1 else ""
            of = f", of the {job_s:.0f}s its logs cover" if job_s else ""
            head += (f"; the time limit ran out inside the first compile {where} ({ids}, {span} of compiling{of}): "
                     "no hang and no distributed (NCCL, gloo) problem, compiling used the time")
            step = (
                "Compile time used the job's time limit: every rank was inside its first compile of the same code, "
                "none behind the others, each still writing records, and no collective had failed. Give it the time "
                "or cut it: warm the caches so the next job skips the compile (TORCHINDUCTOR_CACHE_DIR on shared "
                "storage, torch.compiler.save_cache_artifacts / load_cache_artifacts); under max-autotune, MAX-AUTOTUNE "
                "says what its autotuning cost and bought (the default mode does not autotune); or raise the time "
                "limit above the first compile."
            )
            return head, doing, step, "likely", (
                "no hang: every rank was inside the same first compile, each with a record "
                f"{max(float(c.get('quiet_s') or 0.0) for c in compiling):.1f}s or less before the stop")
        if kind == "rank_killed" and sig == "SIGKILL":
            step = (
                f"A SIGKILLed process writes no traceback: there is none to read. Look for who killed it: the kernel's OOM "
                "killer (`dmesg -T | grep -i -E 'killed process|out of memory'` on that host, `journalctl -k`), or the "
                "scheduler (`sacct -j <job> -o State,ExitCode,MaxRSS`). Compiling takes host memory: "
                "TORCHINDUCTOR_COMPILE_THREADS=1 runs Inductor's compile workers in the process, fewer at once; "
                f"{bracketed(s['compile_id'], s.get('occurrence'), s.get('attempts'))} was in {s.get('phase') or 'a compile'} when it died."
            )
        else:
            step = (
                f"The job was stopped while {who} compiled ({bracketed(s['compile_id'], s.get('occurrence'), s.get('attempts'))}"
                + (f" {s['part']}" if s.get("part") in ("backward", "compiled autograd") else "")
                + f", {s.get('phase') or 'a compile'}, {s.get('running_s') or 0:.1f}s). If the time limit is "
                "shorter than the compile, raise it or warm the caches (TORCHINDUCTOR_CACHE_DIR on shared storage, "
                "torch.compiler.save_cache_artifacts / load_cache_artifacts). If it hangs there, "
                f"`py-spy dump --pid {pid}` while it compiles names the Inductor frame; TORCH_COMPILE_DEBUG=1 "
                "on a rerun keeps the compile's inputs; backend='aot_eager' tells whether Inductor is the part that hangs."
            )
        return head, doing, step, "certain", None
    if kind == "interrupt" and idle:
        where = idle[0].get("interrupted_in")
        head += f"; in {where}" if where else ""
        step = (
            "Interrupted outside torch.compile (the traceback's innermost frame is where): if it seemed hung there, "
            "`py-spy dump --pid <pid>` while it hangs shows every thread."
        )
        return head, doing, step, "certain", None
    if idle and len(idle) == len(states):
        done = [s["compiles_done_s"] for s in idle if s.get("compiles_done_s") is not None]
        fin = f"every compile had finished {min(done):.1f}s before the stop" if done else "no compile was open"
        pids = ", ".join(f"{_rank_words(s)}: {s['pid']}" for s in idle if s.get("pid") is not None)
        head += f"; {fin}: the job hung (or ran) outside compilation"
        step = (
            "torch.compile is not what the job was doing when it was stopped: a collective one rank never reached, "
            "the input pipeline, or the program's own code. While it hangs, `py-spy dump --pid <pid>` of each rank "
            f"({pids}) shows where each waits (--native for a collective's C++ frames); "
            "TORCH_DISTRIBUTED_DEBUG=DETAIL checks that the ranks call the same collectives; NCCL: "
            "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 (the flight recorder) dumps each rank's "
            "last collectives; gloo: init_process_group(timeout=...) shorter than the job's limit makes a hung "
            "collective raise with its name."
        )
        return head, doing, step, "likely", QUIET_MEANS
    step = (
        "The job was stopped from outside; the capture does not say what the processes were doing (no trace "
        "records of theirs). Rerun with TORCH_TRACE set for every rank."
    )
    return head, doing, step, "likely", QUIET_MEANS



# ------------------------------------------------------------------ why a lookup missed the cache
# (traceview.analyze.cache_keys: the key components whose hash differs; words only here)
_AOT_DEBUG = "TORCH_LOGS=+torch._functorch._aot_autograd.autograd_cache"


def _plain(text: str | None) -> str:
    if text is None:
        return "?"
    return one_line(re.sub(r"Size\((\[[^\]]*\])\)", r"\1", text.replace("torch.", "")), 80)


def cache_change_words(c: dict[str, Any]) -> str:
    """One key component that changed (cache_keys.Change.to_json), in words: which input to the
    key, old -> new."""
    kind, item, old, new = c["kind"], c.get("item"), c.get("old"), c.get("new")
    if old is None or new is None:
        return f"{c['component']} {'added to' if old is None else 'gone from'} the key"
    if kind == "inductor_config":
        return f"Inductor config {item}: {_plain(old)} -> {_plain(new)}"
    if kind in ("dynamo_config", "functorch_config"):
        return f"{'Dynamo' if kind == 'dynamo_config' else 'functorch'} config {item}: {_plain(old)} -> {_plain(new)}"
    if kind == "graph":
        removed, added = c.get("removed_lines") or [], c.get("added_lines") or []
        if not removed and not added:
            return "the graph (the same lines in another order)"
        shown = [f"- {one_line(x, 90)}" for x in removed[:2]] + [f"+ {one_line(x, 90)}" for x in added[:2]]
        more = (c.get("lines_changed") or len(removed) + len(added)) - len(shown)
        at = f" (at {', '.join(c['sources'])})" if c.get("sources") else ""
        return "the graph: " + " | ".join(shown) + (f" | ({more} more lines)" if more > 0 else "") + at
    if kind == "example_input":
        fields = c.get("fields") or {}
        if fields:
            return f"example input {item}: " + ", ".join(f"{k} {_plain(a)} -> {_plain(b)}" for k, (a, b) in fields.items())
        return f"example input {item} changed"
    if kind == "torch_version":
        return "torch's version (its source hash) changed"
    if kind in ("triton_version", "cuda_version"):
        return f"{kind.split('_')[0].capitalize()}'s version changed: {_plain(old)} -> {_plain(new)}"
    if kind == "system":
        return "the system changed (device, CUDA, compiler: system_info hash)"
    if kind == "threads":
        # the log does not say which of them set it: both named
        why = (" (the threads torch runs with: OMP_NUM_THREADS=1, which torchrun sets when it starts several processes, "
               "or torch.set_num_threads(1))" if new.strip() == "1"
               else " (the threads torch runs with: OMP_NUM_THREADS or torch.set_num_threads)")
        return f"cpp_runtime_thread_count {_plain(old)} -> {_plain(new)}{why}"
    if kind == "custom_pass":
        return f"custom pass {item}: {_plain(old)} -> {_plain(new)}"
    if kind == "fx_kwargs":
        return f"compile option {item}: {_plain(old)} -> {_plain(new)}"
    if kind == "torch_setting":
        return f"{item}: {_plain(old)} -> {_plain(new)}"
    if kind == "tag":
        return f"cache_key_tag: {_plain(old)} -> {_plain(new)}"
    return f"{c['component']}: {_plain(old)} -> {_plain(new)}"


def _changes_words(e: dict[str, Any], cache: str, *, brief_graph: bool = False) -> str:
    """What differs in a compared pair's keys: its changes, else why none can be said.
    `brief_graph`: a changed graph counted, not quoted (a recompile's graph changes with it)."""
    if e.get("changes"):
        # the graph first: a changed graph changes its inputs too (the rest is counted)
        ch = sorted(e["changes"], key=lambda c: c["kind"] != "graph")
        more = len(ch) - 3
        words = [_graph_count_words(c) if brief_graph and c["kind"] == "graph" else cache_change_words(c) for c in ch[:3]]
        return "; ".join(words) + (f"; and {more} more key inputs (--json)" if more > 0 else "")
    if e.get("logged"):
        return "the keys differ, but no logged component does"
    return "not logged" + (f" (torch logs the AOTAutograd key's components only with {_AOT_DEBUG})" if cache == "aot_autograd" else "")


def _graph_count_words(c: dict[str, Any]) -> str:
    n = c.get("lines_changed") or len(c.get("removed_lines") or []) + len(c.get("added_lines") or [])
    at = f", at {', '.join(c['sources'])}" if c.get("sources") else ""
    return f"the graph ({n} lines changed{at}; --json)" if n else "the graph (the same lines in another order)"


def _graph_words(e: dict[str, Any], show: Callable[[Any, Any], str] | None = None) -> str:
    """The graph's code object as every line names it (findings.code_label, from the row's
    `code`), else its function and place."""
    if show is not None and e.get("code"):
        return code_label(e, show)
    where = f"{e.get('filename') or '?'}:{e.get('line')}" if e.get("line") is not None else (e.get("filename") or "?")
    return f"{e.get('function') or '?'} ({where})"


def cache_key_lines(keys: dict[str, Any], show: Callable[[Any, Any], str] | None = None) -> list[str]:
    """The verdicts beside COMPILE TIME's cache line (build_report's `cache.keys`): ranks whose keys
    for one graph differ (they can never share a cache entry) or that missed a key other ranks
    hit, a graph compiled again that missed, and the caches whose key components were not
    logged."""
    # the same verdict for both caches of one graph is said once: "FX graph and AOTAutograd keys"
    said: dict[str, list[str]] = {}
    unlogged = {c for c, n in (keys.get("not_logged") or {}).items() if n.get("empty") and n["empty"] == n.get("lookups")}
    for e in keys.get("ranks") or []:
        if e["cache"] in unlogged or e["kind"] == "device_index":  # (each rank on its own device: expected)
            continue
        if e["kind"] == "key_differs":
            kinds = {c["kind"] for c in e["changes"]}
            fix = ("the same config on every rank" if kinds & {"inductor_config", "dynamo_config", "functorch_config",
                                                               "custom_pass", "threads"}
                   else "the same code on every rank: no rank-dependent branch or constant in the compiled code" if "graph" in kinds
                   else "the input made rank independent" if "example_input" in kinds
                   else "the same setting on every rank")
            text = (f"{_ranks_words(e['odd_ranks'])}: the {{caches}} of {_graph_words(e, show)} {{differ}} from "
                    f"{_ranks_words(e['common_ranks'])}'s in {_changes_words(e, e['cache'])}; these ranks can never share a "
                    f"cache entry (fix: {fix})")
        else:
            text = (f"{_ranks_words(e['missed'])} missed the {{caches}} of {_graph_words(e, show)} that {_ranks_words(e['hit'])} "
                    "hit: the same key, so the cache was not shared (another cache directory) or was written too late")
        said.setdefault(text, []).append(e["cache"])
    for e in keys.get("repeats") or []:
        if e["cache"] in unlogged:
            continue
        rank = f"rank {e['rank']} " if e.get("rank") is not None else ""
        if e.get("recompile_cause"):  # a recompile: its key changes with the graph it traced anew
            text = (f"{rank}{bracketed(e['compile_id'], e.get('occurrence'))} {_graph_words(e, show)} missed the cache, as its "
                    f"recompile must ({e['recompile_cause']}): its {{caches}} {{differ}} from {bracketed(e['previous'])}'s "
                    # a graph traced anew shifts its inputs' positions: counted, not compared one by one
                    + (f"in the graph and {plural(len(e['changes']) - 1, 'other key input')} (--json)"
                       if any(c["kind"] == "graph" for c in e.get("changes") or [])
                       else f"in {_changes_words(e, e['cache'])}"))
        else:
            text = (f"{rank}{bracketed(e['compile_id'], e.get('occurrence'))} {_graph_words(e, show)} missed the cache again: its "
                    f"{{caches}} {{differ}} from {bracketed(e['previous'])}'s in {_changes_words(e, e['cache'], brief_graph=True)}")
        said.setdefault(text, []).append(e["cache"])
    out = []
    for text, caches in said.items():
        names = [CACHE_NAMES.get(c, c) for c in sorted(set(caches), key=lambda c: (c != "fx_graph", c))]
        text = text.replace("{caches}", " and ".join(names) + (" keys" if len(names) > 1 else " key"))
        out.append(text.replace("{differ}", "differ" if len(names) > 1 else "differs"))
    for cache, n in (keys.get("not_logged") or {}).items():
        name = CACHE_NAMES.get(cache, cache)
        if n.get("bad"):
            out.append(f"{name} key components of {n['bad']} lookups unreadable (see problems: bad_cache_key): not logged")
        if n.get("empty") and n["empty"] == n.get("lookups") and n.get("missed"):  # (said where a miss needs it)
            out.append(f"{name} key components not logged: this torch logs no key components"
                       + (f" for it unless {_AOT_DEBUG}" if cache == "aot_autograd" else ""))
    return out


def cache_pair_words(p: dict[str, Any]) -> str:
    """Why a lookup of B missed against A's lookup of the same graph (analyze.cache_keys.
    diff_lookups), without the cache's name (the diff says which caches)."""
    a = "hit" if p["state_a"] == "hit" else "missed too"
    if p.get("same_key"):
        return f"missed with A's key (A {a}): B's cache did not hold the entry (another cache directory, or evicted)"
    return f"missed (A {a}): {_changes_words(p, p['cache'])}"
