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
        if stop:
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
            short=stop_words(st["kind"], st.get("target") or "", st.get("signal") or ""),
        ))
    return out


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
        for r in st["compiling_ranks"]:
            out.setdefault(r, set()).update(x["compile_id"] for x in st.get("compiles") or [])
    return out


def _stalls(report: dict[str, Any]) -> list[Finding]:
    """Ranks held at a collective while another compiled alone (analyze.stalls); the rank
    divergence it is (the lone compiles) and the recompile behind it are said here, once."""
    out = []
    for s in report.get("rank_stalls") or []:
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
        refs = [CompileRef(r, x["compile_id"]) for r in s["compiling_ranks"] for x in s.get("compiles") or []]
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


def _crashes(report: dict[str, Any], paths: Paths) -> list[Finding]:
    out = []
    for c in report.get("crashes") or []:
        where = f"at {c['function'] or '?'} ({paths.show(c['filename'], c['line'])})" if c.get("filename") else "at ?"
        cc = c.get("compile")
        if cc:  # raised compiling: the compile, named as every line names it
            where = f"compiling {bracketed(cc['compile_id'], cc.get('occurrence'), cc.get('attempts'))} {code_label(cc, paths.show)}"
        claim = (f"{rank_prefix(c['rank'])}{c['exc_type']} {where}: "
                 f"{CATEGORY_WORDS.get(c['category'], c['category'])}" + ("" if cc else f", raised in {c['raised_in']}"))
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
        lines.append(("next:", c["next_step"]))
        ref = CompileRef(c["rank"], cc["compile_id"], cc.get("occurrence"), cc.get("attempts")) if cc else None
        out.append(Finding(
            "crash", "act", claim, lines, next_step=c["next_step"], certainty=c.get("certainty") or "certain",
            ranks=[c["rank"]], compiles=[ref] if ref else [], target=ref, evidence=_ev(c), facet=c.get("category"), key=f"crash:{c['rank']}:{c['exc_type']}:{c.get('filename')}:{c.get('line')}",
        ))
    return out


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
    behind = [s for s in storms for d in report.get("rank_divergence") or [] if recompile_behind(d, s)]
    # a recompile made on some ranks only while the others waited: the stall is its finding
    behind += [s for s in storms if s.get("stall") and set((s.get("compile_ids") or [])[1:]) <= alone.get(s["rank"], set())]
    out = []
    for s, ranks in group_ranks([s for s in storms if not any(s is b for b in behind)], storm_key):
        expected = bool(s.get("expected"))
        fixed = not expected and bool(s.get("fixed_later"))  # the run applied the fix after a reset
        kind = "expected" if expected else "fixed" if fixed else ("storm" if s.get("is_storm") else "recompile")
        line, lines = _storm_lines(s, paths, optim)
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
    out = []
    for g in report.get("graph_breaks") or []:
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
    fails = [
        f for f in report.get("failures") or []
        if not any(storm_failure(s, f) and recompiled_repeatedly(s) for s in storms)
        and not any(g.get("frame_skipped") and break_failure(g, f) for g in breaks)
    ]
    out = []
    # the same failure on many ranks, or of many compiles, is one finding (findings.group_failures)
    for f, franks, same in group_failures(fails):
        ft = f" ({f['fail_type']})" if f.get("fail_type") else ""
        claim = (f"{ranks_text(franks)}{_failed_ids(same)} {code_label(f, paths.show)}: "
                 f"{CATEGORY_WORDS.get(f['category'], f['category'])}{ft}")
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
        ref = CompileRef(f["rank"], f["compile_id"], f.get("occurrence"), f.get("attempts"))
        out.append(Finding(
            "failure", "act", claim, lines, more, next_step=f["next_step"], certainty=f.get("certainty") or "certain",
            ranks=ranks, compiles=[CompileRef(x["rank"], x["compile_id"], x.get("occurrence"), x.get("attempts")) for x in same],
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
        for r in st["waiting_ranks"]:
            waited.setdefault(r, set()).update(x["compile_id"] for x in st.get("compiles") or [])

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


def _slow(report: dict[str, Any], paths: Paths) -> list[Finding]:
    ct = report.get("compile_time") or {}
    out = []
    for t, ranks in slow_compiles(report):
        secs = sorted(r["seconds"] for r in ct.get("top") or [] if r["compile_id"] == t["compile_id"]
                      and r.get("occurrence") == t.get("occurrence") and r["rank"] in ranks)
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
        _compiled_nothing(report) + _stops(report, paths) + _stalls(report) + _unfinished(report, paths)
        + _collectives(report, paths) + _crashes(report, paths) + _divergence(report)
        + _storms(report, paths, recompiles) + _failures(report, paths) + _cudagraphs(report)
        + _graph_breaks(report, paths) + _max_autotune(report) + _slow(report, paths)
        + _debug_unfinished(report)
    )
    return ranked(found)  # the one order (Finding.rank_key)


# ------------------------------------------------------------------------- the head line
def _noun(kind: str) -> str:
    """What the head line counts of a kind (KIND_WORDS' noun; a kind without one: its title's
    findings)."""
    w = KIND_WORDS[kind]
    return w.noun or f"{w.title.lower()} finding"


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
            if oom == len(fs):  # said as memory, not as a crash of the program's logic
                found.append("out of device memory" + (f" in {len(fs)} processes" if len(fs) > 1 else ""))
            else:
                found.append("the program crashed" if len(fs) == 1 else f"{len(fs)} processes crashed")
        elif kind in ("stop", "compiled_nothing"):
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
            found.append(plural(sum(f.count for f in fs), _noun("failure")))
        elif kind == "cudagraphs":
            found.append(plural(len(fs), _noun("cudagraphs")))
        elif kind == "autotune":
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
    if breaks:
        out.append(f"expected: {plural(len(breaks), 'graph break')} of DDP's own wrapper (nothing of yours to avoid)")
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
    counts = {d["pid"]: d["graphs"] for d in debug}
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


def stop_verdict(
    kind: str, sig: str, target: str, by: str, states: list[dict[str, Any]], at: Any
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

