"""A collective that timed out because another rank was compiling (issue 45, class 7).

A process group's collective waits for every rank to enqueue it. When one rank is inside a
compile (a recompile for a shape only it saw, max-autotune's benchmarking), the others wait
at their next collective; when the wait runs past the process group's timeout, the collective
times out on the ranks that waited: NCCL's watchdog (`WorkNCCL(SeqNum=13, OpType=ALLREDUCE,
..., Timeout(ms)=30000) ran for 30091 milliseconds before timing out`) dumps the flight
recorder and aborts the process (SIGABRT); gloo raises from the collective's wait (`Timed out
waiting 10000ms for recv operation to complete`). The launcher then stops the rank that was
still compiling. Read alone, that is a "distributed desync"; read with the compile account, it
is the compile.

The facts (parsers.timeouts, parsers.flight_recorder, the compile and rank accounts):

* the timeout: which rank, which collective (sequence number, op, size), the timeout, when
  it fired (the watchdog's own line; gloo's exception has no time: the launcher's report of
  that rank's failure) and so when the collective began (that time less the timeout);
* each rank's last enqueued and completed collective: the flight recorder's dumps (one file
  per rank, found beside the logs), else NCCL's dump-signal lines, else the watchdog's status
  line of the rank that timed out;
* the compile on another rank that covers the wait: the compile account's compile of that
  rank open while the collective waited (begun before the timeout fired, not ended before the
  collective began), the longest such, when it covered at least half of the wait and that rank
  had not enqueued the collective (where the dumps or NCCL's lines say); its cause (the
  account's one cause), its seconds, and max-autotune's share of it (the autotuning rows of
  that compile). Otherwise no compile explains the timeout and the crash's words stand.

How sure: the timeout and the sequence numbers are what torch wrote (certain); that the compile
caused it is read from the time it covered (likely), firmer when the flight recorder shows that
rank never enqueued the collective.
"""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path
from typing import Any

import polars as pl

from parsers.flight_recorder import collectives as fr_collectives
from parsers.timeouts import timeouts_from_text
from traceview.analyze.accounts.compiles import compile_account, stop_lines
from traceview.analyze.accounts.ranks import rank_account
from traceview.analyze.per_trace import once
from traceview.analyze.unfinished import capture_end
from traceview.trace import Trace

_TIMED_OUT = ("watchdog", "gloo", "gloo_barrier")


def timeout_lines(trace: Trace) -> pl.DataFrame:
    """The capture's timeout lines (parsers.timeouts), read once."""
    def build() -> pl.DataFrame:
        ts = trace.log_records["ts"].drop_nulls() if trace.log_records.height else None
        year = ts.min().year if ts is not None and ts.len() else None
        return timeouts_from_text(trace.log_records, trace.other_lines, year=year)
    return once(trace, name="timeout_lines", build=build)


def flight_recorder(trace: Trace) -> list[dict[str, Any]]:
    """The flight recorder's dumps found among the inputs (parsers.flight_recorder), by rank."""
    def build() -> list[dict[str, Any]]:
        paths = list(getattr(trace.inputs, "flight_recorder", None) or []) if trace.inputs is not None else []
        dumps = [d for d in (fr_collectives(p) for p in paths) if d is not None]
        return sorted(dumps, key=lambda d: (d["rank"] is None, d["rank"] or 0, d["file"]))
    return once(trace, name="flight_recorder", build=build)


def _nearest(dumps: list[dict[str, Any]], file: str) -> list[dict[str, Any]]:
    """The dumps of the run a log belongs to: those nearest it in the directory tree (a
    directory of several runs holds several sets), one per rank."""
    if not dumps:
        return []
    here = Path(file).resolve().parent.parts

    def shared(d: dict[str, Any]) -> int:
        there = Path(d["file"]).resolve().parent.parts
        n = 0
        for a, b in zip(here, there):
            if a != b:
                break
            n += 1
        return n

    best = max(shared(d) for d in dumps)
    out: dict[Any, dict[str, Any]] = {}
    for d in dumps:
        if shared(d) == best:
            out.setdefault(d["rank"], d)
    return list(out.values())


def _fired_at(trace: Trace, row: dict[str, Any]) -> tuple[_dt.datetime | None, str]:
    """When the timeout fired: the line's own time, else the launcher's report of that rank's
    failure, else the capture's end."""
    if row["ts"] is not None:
        return row["ts"], "the timeout's line"
    stops = stop_lines(trace)
    if stops.height:
        mine = stops.filter((pl.col("kind") == "child_exit") & (pl.col("rank") == row["rank"]) & pl.col("ts").is_not_null())
        if mine.height:
            return mine["ts"][0], "the launcher's report of its failure"
        timed = stops.filter(pl.col("ts").is_not_null() & (pl.col("ts_from") == "record"))
        if timed.height:
            return timed["ts"][0], "the launcher's first line after it"
    end = capture_end(trace)
    return (end["at"], "the capture's last timestamp") if end else (None, "")


def _autotune_of(autotuning: list[dict[str, Any]], rank: Any, compile_id: str) -> dict[str, Any]:
    ops = [a for a in autotuning if a.get("rank") == rank and a.get("compile_id") == compile_id]
    secs = sum(float(a.get("precompile_s") or 0.0) + float(a.get("benchmark_s") or 0.0) for a in ops)
    return {"ops": len(ops), "seconds": round(secs, 3), "choices": sum(int(a.get("choices") or 0) for a in ops)}


def _culprit(account: pl.DataFrame, waited: list[int], began: _dt.datetime, fired: _dt.datetime) -> dict[str, Any] | None:
    """The compile of a rank that did not time out, open while the collective waited (the
    longest overlap)."""
    others = account.filter(
        pl.col("rank").is_not_null() & ~pl.col("rank").is_in(waited) & pl.col("start").is_not_null() & (pl.col("start") <= fired)
        & (pl.col("end").is_null() | (pl.col("end") >= began))
    )
    best, overlap = None, 0.0
    for c in others.iter_rows(named=True):
        end = c["end"] or fired
        o = (min(end, fired) - max(c["start"], began)).total_seconds()
        if o > overlap:
            best, overlap = c, o
    if best is None or overlap <= 0:
        return None
    return {**best, "overlap_s": round(overlap, 3)}


def collective_timeouts(trace: Trace, *, autotuning: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One entry per capture whose collective timed out (see the module doc): rank (the first
    to say so), ranks (every rank whose timeout line names the same collective), backend,
    kind (watchdog / gloo / gloo_barrier), seq, op, numel, timeout_s, ran_s, fired_at (ISO),
    fired_from, began_at, by_rank (each rank's last enqueued / completed collective: source
    "flight recorder" or "dump signal"), pending (the timed-out rank's collectives enqueued and
    not completed, from its dump), culprit (the other rank's compile that covered the wait:
    rank, compile_id, occurrence, function, filename, line, cause, status, open_part, phase,
    seconds, compiling_s (its time up to the timeout), started_before_s (how long before the
    collective began it started), autotune {ops, seconds, choices}, ended_by) or None, ended
    (each rank's end, the rank account's), certainty, evidence, file, lineno.
    `autotuning`: the report's autotuning rows (compile_time.autotuning)."""
    lines = timeout_lines(trace)
    if lines.is_empty():
        return []
    timed = lines.filter(pl.col("kind").is_in(_TIMED_OUT))
    if timed.is_empty():
        return []
    account = compile_account(trace)
    ranks = {r["rank"]: r for r in rank_account(trace)}
    dumps = flight_recorder(trace)
    out = []
    for (file,), part in timed.group_by(["file"], maintain_order=True):
        first = part.sort("lineno").row(0, named=True)
        rank = first["rank"]
        # every rank that timed out on the same collective (all the ranks that waited, on a larger job)
        same = part.filter(pl.col("seq").eq_missing(first["seq"]) & pl.col("rank").is_not_null())
        waited = sorted(set(same["rank"].to_list()) | ({rank} if rank is not None else set()))
        fired, fired_from = _fired_at(trace, first)
        timeout_s = first["timeout_ms"] / 1000 if first["timeout_ms"] is not None else None
        ran_s = first["ran_ms"] / 1000 if first["ran_ms"] is not None else timeout_s
        began = fired - _dt.timedelta(seconds=ran_s) if fired is not None and ran_s is not None else None
        by_rank: dict[int, dict[str, Any]] = {}
        for d in _nearest(dumps, file):
            st = next(iter(d["status"].values()), None) if d["status"] else None
            if d["rank"] is not None and st:
                by_rank[d["rank"]] = {"last_enqueued": st.get("last_enqueued_collective"),
                                      "last_completed": st.get("last_completed_collective"),
                                      "source": "flight recorder", "file": d["file"]}
        for kind, source in (("dump_signal", "dump signal"), ("pg_status", "watchdog's status line")):
            for s in lines.filter((pl.col("file") == file) & (pl.col("kind") == kind)).iter_rows(named=True):
                if s["rank"] is not None and s["rank"] not in by_rank:
                    by_rank[s["rank"]] = {"last_enqueued": s["last_enqueued"], "last_completed": s["last_completed"],
                                          "source": source, "file": file, "lineno": s["lineno"]}
        pending = []
        mine = next((d for d in _nearest(dumps, file) if d["rank"] == rank), None)
        if mine is not None:
            pending = [{"seq": e["seq"], "op": e["op"], "state": e["state"], "input_sizes": e["input_sizes"]}
                       for e in mine["entries"] if e["state"] != "completed" and not e["p2p"]]
        op = first["op"]
        if op in ("send", "recv") and pending:
            op = pending[0]["op"]  # gloo says only its transport's direction; the dump names the collective
        culprit = None
        if began is not None and fired is not None and rank is not None:  # whose wait it was, or no "other rank"
            c = _culprit(account, waited, began, fired)
            enq = by_rank.get(c["rank"]) if c is not None else None
            if c is not None and (c["overlap_s"] < 0.5 * (ran_s or 0.0) or (
                    enq is not None and first["seq"] is not None and enq["last_enqueued"] is not None
                    and enq["last_enqueued"] >= first["seq"])):
                c = None  # it covered too little of the wait, or that rank had enqueued the collective: not why
            if c is not None:
                culprit = {k: c.get(k) for k in ("rank", "compile_id", "occurrence", "label", "function", "filename", "line",
                                                  "cause", "cause_kind", "status", "open_part", "phase", "seconds", "overlap_s")}
                culprit["compiling_s"] = round((fired - c["start"]).total_seconds(), 3)
                culprit["started_before_s"] = round((began - c["start"]).total_seconds(), 3)
                culprit["autotune"] = _autotune_of(autotuning or [], c["rank"], c["compile_id"])
                culprit["ended_by"] = (ranks.get(c["rank"]) or {}).get("ended_by")
                culprit["enqueued"] = by_rank.get(c["rank"])
        certainty = "likely"
        evidence = f"{file.rsplit('/', 1)[-1]}:{first['lineno']}: {first['text'][:200]}"
        if culprit is not None:
            evidence += (f"; rank {culprit['rank']}'s compile covered {culprit['overlap_s']:.1f}s of the "
                         f"{ran_s:.1f}s wait (its records' times)")
            seq, enq = first["seq"], (culprit.get("enqueued") or {}).get("last_enqueued")
            if seq is not None and enq is not None and enq < seq:
                evidence += f"; rank {culprit['rank']} never enqueued collective {seq} (its last: {enq}, {culprit['enqueued']['source']})"
        out.append({
            "rank": rank, "ranks": waited, "backend": first["backend"], "kind": first["kind"], "seq": first["seq"], "op": op,
            "numel": first["numel_in"], "timeout_s": timeout_s, "ran_s": ran_s,
            "fired_at": fired.isoformat() if fired is not None else None, "fired_from": fired_from,
            "began_at": began.isoformat() if began is not None else None,
            "by_rank": [{"rank": r, **v} for r, v in sorted(by_rank.items())], "pending": pending,
            "culprit": culprit, "ended_by": (ranks.get(rank) or {}).get("ended_by"),
            "certainty": certainty, "evidence": evidence, "file": file, "lineno": first["lineno"],
            "text": first["text"],
        })
    return out


# Inductor's words when it skips an autotuning choice (torch/_inductor/select_algorithm.py):
# Triton's OutOfResources (a config needs more shared memory than the GPU has), else a runtime
# or compilation error of that choice
_OUT_OF_RESOURCE = re.compile(r"out of resource: (?P<what>\w+)(?: Required: (?P<req>\d+) Hardware limit: ?(?P<lim>\d+))?")
_SKIPPED = re.compile(r"for benchmark choice")
_CHOICE = re.compile(r"for benchmark choice (\S+?)\(([^,)\s]+)")


def skipped_choices(trace: Trace) -> list[dict[str, Any]]:
    """Autotuning choices Inductor skipped, by reason, from the text log's lines (one row per
    reason): reason ("out of resource: shared memory" for Triton's OutOfResources), count
    (distinct choices per rank), ranks, required / limit (the largest a skipped config
    needed, and the GPU's limit, where torch says them)."""
    parts = [df.select("rank", "lineno", "text") for df in (trace.other_lines, trace.log_records) if df.height]
    if not parts:
        return []
    hits = pl.concat(parts).filter(pl.col("text").str.contains(_SKIPPED.pattern))
    out: dict[str, dict[str, Any]] = {}
    seen: set[tuple] = set()
    for r in hits.iter_rows(named=True):
        for text in r["text"].split("\n"):
            if not _SKIPPED.search(text):
                continue
            m = _OUT_OF_RESOURCE.search(text)
            choice = _CHOICE.search(text)
            if choice is None:
                continue  # `Runtime error during autotuning ... Ignoring this choice`: the same choice again, unnamed
            reason = ("out of resource: shared memory" if m and (m.group("req") or m.group("what") == "triton_mm")
                      else f"out of resource: {m.group('what')}" if m else "an error benchmarking it")
            key = (r["rank"], reason, choice.group(2))
            if key in seen:
                continue
            seen.add(key)
            row = out.setdefault(reason, {"reason": reason, "count": 0, "ranks": [], "required": None, "limit": None})
            row["count"] += 1
            if r["rank"] is not None and r["rank"] not in row["ranks"]:
                row["ranks"].append(r["rank"])
            if m and m.group("req"):
                row["required"] = max(row["required"] or 0, int(m.group("req")))
                row["limit"] = int(m.group("lim"))
    return sorted(out.values(), key=lambda x: -x["count"])
