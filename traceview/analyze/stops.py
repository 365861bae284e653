"""Stopped from outside: who ended the job, when, and what every rank was doing at that moment.

A job stopped by a signal from outside (`timeout`, the scheduler's time limit, a user's
Ctrl-C or kill, the kernel's OOM killer) is never the program's own error. The capture says
so in the launcher's and the system's lines (parsers.stops): torchrun's `Received 15 death
signal` and `Sending process N closing signal SIGTERM`, a rank's `exitcode: -9` (SIGKILL),
mp.spawn's `terminated with signal SIGKILL`, SLURM's `CANCELLED AT … DUE TO TIME LIMIT`, a
`KeyboardInterrupt`. One finding per capture: what stopped what and when (the launcher's own
timestamp, and which line it is), and each rank's state at that moment, as the rank account
has it (analyze.accounts.ranks):

* inside a compile (which compile, forward or backward, which phase, for how long): the job
  was stopped while compiling — one story with the unfinished compile. When the ranks that
  finished the same compile took a fraction of that time (5x less, and 10 s less), the rank
  hung there: the verdict says so, leads with py-spy on that rank, and names what the others
  lost, never "raise the time limit";
* waiting: its compiles had ended and it went quiet while another rank was still inside a
  compile (it ran on to its next collective and waits there for that rank);
* idle since its last record: every compile had finished N s before the stop, so the job hung
  (or ran) outside compilation: a collective a rank never reached, the input pipeline, the
  program's own code (a compiled graph's run-time span left open, Triton benchmarking a
  kernel at its first call, is running, not compiling).

How sure: that the job was stopped is what the launcher wrote (certain). What a rank was doing
is read from its own log: an open compile is certain; "idle since its last record" means torch
logged nothing more, which is a hang outside compilation only when the job was expected to log
again (likely). Who sent the signal to the launcher is not in the log unless SLURM says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from parsers.stops import OUTSIDE_SIGNALS, who_ended
from traceview.analyze.accounts.compiles import compile_account, stop_lines
from traceview.analyze.accounts.ranks import rank_account
from traceview.analyze.judge import stop_verdict
from traceview.analyze.unfinished import capture_end
from traceview.trace import Trace

KILLED = (
    "killed from outside: often the kernel's OOM killer or the scheduler; a killed process writes no traceback"
)


def stop_findings(
    trace: Trace, *, uncaught: pl.DataFrame | None = None
) -> list[dict[str, Any]]:
    """One finding per capture that shows a stop from outside (see the module doc):
    kind ("launcher_signal": the launcher got the signal; "rank_killed": a rank died of one;
    "interrupt": KeyboardInterrupt), signal, target (what got it: "torchrun (pid 7048)", "rank 1
    (pid 12178)"), by (who sent it, as far as the capture says), at (ISO time), at_from ({file,
    lineno, what}: the line that says when), ranks (one per rank, the rank account's: rank, pid,
    state "compiling" / "waiting" / "running" / "idle" / "unknown", ended_by, and for a compile
    its compile_id, part, phase, running_s, others_s; for the others idle_s and compiles_done_s:
    how long before the stop its last record and its last compile ended, and `behind` for a
    waiting rank), head, message, next_step, certainty, evidence, file, lineno.
    `uncaught`: parsers.tracebacks.uncaught_from_text of the trace (KeyboardInterrupt is read
    from it) when the caller has it."""
    stops = stop_lines(trace)
    interrupts: list[dict[str, Any]] = []
    if uncaught is not None and uncaught.height:
        interrupts = [
            r for r in uncaught.iter_rows(named=True)
            if (r["exc_type"] or "").rsplit(".", 1)[-1] == "KeyboardInterrupt"
        ]
    if stops.is_empty() and not interrupts:
        return []
    ranks = rank_account(trace)
    out = []
    for file in sorted(set(stops["file"].to_list()) | {r["file"] for r in interrupts}):
        mine = stops.filter(pl.col("file") == file)
        found = _one(trace, file, mine, [r for r in interrupts if r["file"] == file], ranks)
        if found is not None:
            out.append(found)
    return out


def _where(file: str, lineno: int | None, what: str) -> dict[str, Any]:
    return {"file": file, "lineno": lineno, "what": what}


def _one(
    trace: Trace, file: str, stops: pl.DataFrame, interrupts: list[dict[str, Any]],
    ranks: list[dict[str, Any]],
) -> dict[str, Any] | None:
    rows = stops.to_dicts()
    death = next((r for r in rows if r["kind"] in ("death_signal", "signal_exception")), None)
    timed = next((r for r in rows if r["kind"] == "death_signal"), None)
    slurm = next((r for r in rows if r["kind"] == "slurm_cancel"), None)
    who = who_ended(rows)
    closing, exits, killed = who["closing"], who["exits"], who["killed"]
    spawned = [r for r in rows if r["kind"] == "spawn_signal" and r["signal"] in OUTSIDE_SIGNALS]
    name = Path(file).name
    if death is None and slurm is None and killed is None and not spawned and not interrupts:
        return None  # a rank died of its own error or signal (SIGSEGV, exit 1): analyze.crashes
    # what got the signal, from whom, and when (the launcher's own timestamp)
    if death is not None or slurm is not None:
        kind = "launcher_signal"
        sig = (death or {}).get("signal") or "SIGTERM"
        pid = (death or {}).get("pid")
        target = f"torchrun (pid {pid})" if death is not None else "the job"
        if slurm is not None:
            due = f" due to {slurm['reason'].lower()}" if slurm.get("reason") else ""
            by = f"SLURM cancelled the job{due}"
        else:
            by = "sent from outside torchrun: `timeout`, the scheduler (SLURM sends SIGTERM at the time limit) or a kill"
        first = timed or slurm or death
        at, at_from = first.get("ts"), _where(file, first["lineno"], first["text"])
        key = first
    elif killed is not None:
        kind = "rank_killed"
        sig, pid = killed["signal"], killed["pid"]
        target = f"rank {killed['rank']} (pid {pid})"
        by = KILLED if sig == "SIGKILL" else f"a {sig} from outside torchrun (the scheduler, `timeout` or a kill)"
        # torchrun noticed it: its record (ms) before its failure report (seconds)
        noticed = next((r for r in exits if r["pid"] == pid), None) or next(iter(closing.values()), None) or killed
        at, at_from = noticed.get("ts"), _where(file, noticed["lineno"], noticed["text"])
        key = killed
    elif spawned:
        kind = "rank_killed"
        s = spawned[0]
        sig, pid = s["signal"], None
        target = f"process {s['rank']} of torch.multiprocessing.spawn"
        by = KILLED if sig == "SIGKILL" else f"a {sig} from outside"
        at, at_from, key = None, _where(file, s["lineno"], s["text"]), s
    else:
        kind = "interrupt"
        it = interrupts[0]
        sig, pid = "SIGINT", None
        target = f"rank {it['rank']}" if it.get("rank") is not None else "the program"
        by = "Ctrl-C or a SIGINT (KeyboardInterrupt)"
        at, at_from, key = None, _where(file, it["lineno"], "KeyboardInterrupt"), {"lineno": it["lineno"], "text": "KeyboardInterrupt"}
    if at is None:
        end = capture_end(trace)
        if end is not None:
            at, at_from = end["at"], _where(end["file"], end["lineno"], f"the capture's last timestamp ({end['what']})")
    states = _states(ranks, at, compile_account(trace))
    if kind == "interrupt":
        _interrupted_where(trace, interrupts[0], states)
    # the words are the judge's (analyze.judge.stop_verdict): kept here for `--json`'s stops
    job_s = _job_seconds(trace, at)
    head, doing, step, certainty, why = stop_verdict(kind, sig, target, by, states, at, job_s)
    evidence = f"{name}:{key['lineno']}: {key['text']}" + (f"; {why}" if why else "")
    return {
        "kind": kind, "signal": sig, "target": target, "by": by,
        "at": at.isoformat() if at is not None else None, "at_from": at_from,
        "job_s": job_s,
        "ranks": states, "head": head, "message": head + doing, "next_step": step, "certainty": certainty,
        "evidence": evidence, "file": file, "lineno": key["lineno"],
    }


def _job_seconds(trace: Trace, at: Any) -> float | None:
    """Seconds from the capture's first record (any rank's trace or the text log) to the stop."""
    if at is None:
        return None
    firsts = [df["ts"].drop_nulls().min() for df in (trace.index_events(), trace.log_records)
              if df.height and "ts" in df.columns and df["ts"].drop_nulls().len()]
    return round((at - min(firsts)).total_seconds(), 3) if firsts else None


def tie_unfinished(stops: list[dict[str, Any]], unfinished: list[dict[str, Any]]) -> None:
    """Mark each unfinished compile that a stop interrupted (`stopped_by`: the stop's signal,
    target, time and how this rank ended), so the two findings tell one story."""
    for st in stops:
        for r in st.get("ranks") or []:
            if r.get("state") != "compiling":
                continue
            for u in unfinished:
                if u["file"] == r["file"] and u["compile_id"] == r["compile_id"] and u.get("part") == r.get("part"):
                    u["stopped_by"] = {"signal": st["signal"], "target": st["target"], "at": st["at"], "ended_by": r.get("ended_by")}


def _compile_seconds(account: pl.DataFrame | None, rf: dict[str, Any], c: dict[str, Any]) -> float | None:
    """The open compile's seconds so far, all its parts (the compile account's)."""
    if account is None or account.is_empty():
        return None
    row = account.filter((pl.col("file") == rf["file"]) & (pl.col("compile_id") == c["compile_id"])
                         & (pl.col("occurrence") == (c.get("occurrence") or 1)))
    return round(float(row["seconds"][0]), 3) if row.height and row["seconds"][0] is not None else None


def _states(ranks: list[dict[str, Any]], at: Any, account: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    """Each rank's state at the stop (see stop_findings), as the rank account has it
    (analyze.accounts.ranks): what it was doing, and how it ended from the launcher's lines."""
    out = []
    for rf in ranks:
        rank, pid = rf["rank"], rf["pid"]
        ended = rf.get("ended_by")
        s: dict[str, Any] = {"rank": rank, "pid": pid, "ended_by": ended, "file": rf["file"]}
        state = rf.get("state")
        if state == "compiling":
            c = rf["compile"]
            s.update(state="compiling", compile_id=c["compile_id"], occurrence=c.get("occurrence"),
                     part=None if c.get("part") == "forward" else c.get("part"), phase=c.get("phase"),
                     running_s=c.get("running_s"), started=c["started"].isoformat() if c.get("started") else None,
                     others_s=c.get("others_s") or [], compile_s=_compile_seconds(account, rf, c),
                     quiet_s=round((at - rf["last_at"]).total_seconds(), 3) if at is not None and rf.get("last_at") is not None else None)
        elif state in ("waiting", "running", "idle") and at is not None and rf["last_at"] is not None:
            done = rf.get("compiles_done_at")
            s.update(state=state, idle_s=round((at - rf["last_at"]).total_seconds(), 3),
                     compiles_done_s=round((at - done).total_seconds(), 3) if done is not None else None,
                     last_record_at=rf["last_at"].isoformat())
            if state == "waiting":
                s["behind"] = rf["behind"]
            if state == "running":
                s["running"] = {**rf["running"], "started": None}
        else:
            s.update(state="unknown")
        out.append(s)
    return out


def _interrupted_where(trace: Trace, it: dict[str, Any], states: list[dict[str, Any]]) -> None:
    """A KeyboardInterrupt's traceback says where the process was: `interrupted_in`, its
    innermost frame. Inside a compile when it passes through torch.compile's frames: the
    compile account has that compile as interrupted (analyze.accounts.compiles) and the rank
    account the rank as compiling; else the process was outside compilation."""
    frames = [f.replace("\\", "/") for f in it.get("frames") or []]
    mine = [s for s in states if s.get("rank") == it.get("rank")] or states[:1]
    if not mine or not frames:
        return
    mine[0]["interrupted_in"] = frames[-1]
