"""The account of each rank's time: what each rank (each trace file) was doing when the capture ends.

Read from the compile account (traceview.analyze.accounts.compiles) and the rank's own records:

* **compiling**: one of its compiles is open at the end (never ended or interrupted): which
  compile, which part and phase, since when, for how long (to the capture's last timestamp);
  `others_s` is how long the ranks that finished the same compile (and part) took for it;
* **waiting**: every compile of its own had ended and its log went quiet while another rank was
  still inside a compile that began before this rank's last record: it ran on to its next
  collective and waits there for that rank (`behind`), for about `idle_s` (from its last record
  to the capture's end: an upper bound, since it ran its compiled code for a while first). No
  record shows the wait itself: likely, not certain;
* **running**: its last records are a compiled graph's run-time spans left open (Triton's
  CachingAutotuner benchmarking a kernel's configs at its first call), no compile open;
* **idle**: no compile open and no other rank compiling: no record for `idle_s` before the end
  (torch logged nothing more: it ran, or hung, outside compilation).

And how each rank ended, where the capture says: `ended_by` from the launcher's lines for its
pid ("killed by SIGKILL", "SIGTERM from torchrun", "exit code -11 (SIGSEGV)"), `crashed` the
uncaught exception of its rank (its type); neither: the log just ends (finished, or still
running). The stop (analyze.stops) says them with what stopped the job.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from parsers.stops import ended_by, who_ended
from traceview.analyze.accounts.compiles import OPEN, compile_account, stop_lines, uncaught
from traceview.analyze.per_trace import once
from traceview.analyze.unfinished import RUN_TIME_SPANS, capture_end
from traceview.trace import Trace


def rank_account(trace: Trace) -> list[dict[str, Any]]:
    """One entry per trace file, by rank: rank, pid, file, last_at (its last record's time),
    compile_s (its compiles' seconds, from the compile account), compiles_done_at (when its
    last ended compile ended), end_at (the capture's last timestamp), state ("compiling",
    "waiting", "running", "idle", "unknown"), idle_s (end_at - last_at), and by state:
    compile (compile_id, occurrence, part, phase, started, running_s, others_s) for
    compiling; behind (the ranks it waits for) for waiting; running (compile_id, span) for
    running; and ended_by, crashed (how it ended, where the capture says; see the module doc).
    Do not change what it returns."""
    return once(trace, name="rank_account", build=lambda: _account(trace))


RANK_TABLE_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32, "pid": pl.Int32, "file": pl.String, "state": pl.String, "last_at": pl.Datetime("us"),
    "end_at": pl.Datetime("us"), "idle_s": pl.Float64, "compile_s": pl.Float64, "compiles_done_at": pl.Datetime("us"),
    "compile_id": pl.String, "occurrence": pl.Int32, "part": pl.String, "phase": pl.String, "running_s": pl.Float64,
    "behind": pl.List(pl.Int32), "ended_by": pl.String, "crashed": pl.String,
}


def rank_table(trace: Trace) -> pl.DataFrame:
    """The rank account as a table (RANK_TABLE_SCHEMA; docs/tables.md): one row per trace file,
    the open compile's columns filled for a compiling rank, `behind` for a waiting one."""
    rows = []
    for e in rank_account(trace):
        c = e.get("compile") or {}
        rows.append({
            **{k: e.get(k) for k in ("rank", "pid", "file", "state", "last_at", "end_at", "idle_s", "compile_s", "compiles_done_at")},
            "compile_id": c.get("compile_id") or (e.get("running") or {}).get("compile_id"), "occurrence": c.get("occurrence"),
            "part": c.get("part"), "phase": c.get("phase") or (e.get("running") or {}).get("span"),
            "running_s": c.get("running_s"), "behind": e.get("behind"), "ended_by": e.get("ended_by"),
            "crashed": e.get("crashed"),
        })
    return pl.DataFrame(rows, schema=RANK_TABLE_SCHEMA)


def _endings(trace: Trace) -> dict[Any, str]:
    """pid -> how the launcher says that process ended (parsers.stops.ended_by, each text log's
    lines): "killed by SIGKILL", "SIGTERM from torchrun", "exit code -11 (SIGSEGV)"."""
    stops = stop_lines(trace)
    out: dict[Any, str] = {}
    for _, rows_df in stops.group_by("file", maintain_order=True) if stops.height else []:
        rows = rows_df.to_dicts()
        who = who_ended(rows)
        for pid in {r["pid"] for r in rows if r.get("pid") is not None}:
            said = ended_by(who, pid)
            if said is not None:
                out.setdefault(pid, said)
    return out


def _account(trace: Trace) -> list[dict[str, Any]]:
    ev = trace.index_events()
    if ev.is_empty():
        return []
    acc = compile_account(trace)
    end_of = capture_end(trace)
    end_at = end_of["at"] if end_of else None
    per = (
        ev.group_by("file")
        .agg(pl.col("rank").drop_nulls().first(), pl.col("pid").drop_nulls().first(), pl.col("ts").max().alias("last_at"))
        .sort("rank", "file", nulls_last=True)
    )
    endings = _endings(trace)
    crashed = {r: e for r, e in uncaught(trace).select("rank", "exc_type").iter_rows()} if uncaught(trace).height else {}
    open_rows = acc.filter(pl.col("status").is_in(OPEN)) if acc.height else acc
    finished = acc.filter(pl.col("status").is_in(("finished", "failed"))) if acc.height else acc
    out: list[dict[str, Any]] = []
    for f in per.iter_rows(named=True):
        mine = acc.filter(pl.col("file") == f["file"]) if acc.height else acc
        done = mine.filter(pl.col("status").is_in(("finished", "failed"))) if mine.height else mine
        idle = (end_at - f["last_at"]).total_seconds() if end_at is not None and f["last_at"] is not None else None
        entry: dict[str, Any] = {
            "rank": f["rank"], "pid": f["pid"], "file": f["file"], "last_at": f["last_at"],
            "compile_s": round(float(mine["seconds"].fill_null(0.0).sum()), 3) if mine.height else 0.0,
            "compiles_done_at": done["end"].max() if done.height else None,
            "end_at": end_at, "idle_s": round(idle, 3) if idle is not None else None,
            # how it ended, where the capture says: the launcher's line for its pid, else an
            # uncaught exception of its rank (None: the log just ends)
            "ended_by": endings.get(f["pid"]),
            "crashed": crashed.get(f["rank"]),
        }
        opened = open_rows.filter(pl.col("file") == f["file"]) if open_rows.height else open_rows
        if opened.height:
            o = opened.sort("seconds", descending=True, nulls_last=True).row(0, named=True)
            entry["state"] = "compiling"
            entry["compile"] = {
                "compile_id": o["compile_id"], "occurrence": o["occurrence"], "part": o["open_part"], "phase": o["phase"],
                "started": o["open_since"] or o["start"], "status": o["status"],
                # the open part's own time (a backward left open: the forward had ended before it)
                "running_s": None if o["seconds"] is None else round(
                    o["seconds"] - ((o["forward_s"] or 0.0) if o["open_part"] == "backward" else 0.0), 3),
                "others_s": _others_s(finished, o),
            }
        out.append(entry)
    compiling = [e for e in out if e.get("state") == "compiling"]
    running = _running(trace)
    for e in out:
        if e.get("state") == "compiling":
            continue
        behind = [
            c["rank"] for c in compiling
            if c["file"] != e["file"] and e["last_at"] is not None and c["compile"]["started"] is not None
            and c["compile"]["started"] <= e["last_at"]
        ]
        if behind:
            e.update(state="waiting", behind=behind)
        elif e["file"] in running:
            e.update(state="running", running=running[e["file"]])
        else:
            e["state"] = "idle" if e["idle_s"] is not None else "unknown"
    return out


def _others_s(finished: pl.DataFrame, o: dict[str, Any]) -> list[dict[str, Any]]:
    """How long each other rank that finished the same compile took for the part left open."""
    if finished.is_empty():
        return []
    same = finished.filter(
        (pl.col("compile_id") == o["compile_id"]) & (pl.col("file") != o["file"])
        & ((pl.col("function") == o["function"]) if o["function"] is not None else pl.lit(True))
    )
    col = "backward_s" if o["open_part"] == "backward" else "forward_s"
    return [
        {"rank": r, "seconds": round(s, 3)}
        for r, s in same.select("rank", col).iter_rows() if s is not None
    ]


def _running(trace: Trace) -> dict[str, dict[str, Any]]:
    """file -> the run-time span a compiled graph left open (its compile id, the span's name)."""
    sp = trace.spans
    if sp.is_empty():
        return {}
    opened = sp.filter(pl.col("duration_s").is_null() & (pl.col("ph") == "B") & pl.col("name").str.starts_with(RUN_TIME_SPANS[0]))
    out: dict[str, dict[str, Any]] = {}
    for r in opened.sort("lineno").iter_rows(named=True):
        out[r["file"]] = {"compile_id": r["compile_id"], "span": r["name"], "started": r["start"]}
    return out


def hung(s: dict[str, Any]) -> float | None:
    """For a rank state "compiling": the longest time another rank took for the same compile
    (and part) when this rank has been inside it far longer (5x, and 10 s more): a hang, not a
    slow compile; else None."""
    others = [o["seconds"] for o in s.get("others_s") or [] if o.get("seconds") is not None]
    running = s.get("running_s")
    if not others or running is None:
        return None
    slowest = max(others)
    return slowest if running >= 5 * slowest and running - slowest >= 10 else None
