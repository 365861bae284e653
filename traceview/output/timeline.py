"""`traceview timeline PATH -o compile_trace.json`: every rank's compiles on one time axis.

Chrome Trace Event format (JSON object form), for Perfetto (ui.perfetto.dev) and
chrome://tracing: one process per rank (per input file when a rank has several, e.g. two runs),
named by metadata events. Each piece of each compile (the compile account's pieces,
`piece_rows`: the forward, every backward piece, the part left open) is a complete ("X") event
on the process's "compiles" track; a piece left open (the job ended, or the capture does,
while it compiled) runs to the capture's last timestamp, its args saying so (`unfinished`:
"interrupted when the job ended" / "never ended", `phase`, `to`: what that timestamp is). A
compile with no time logged (no metrics, not open) is an instant ("i") event. The compile phases
of its `chromium_event`s (`dynamo`, `inductor_compile`, autotuning, ...) are "X" events on the
"phases" tracks. Every event's args carry the compile id and the compiled function. A phase
whose end was never logged (the process died while compiling) is an instant ("i") event: its
length is not known, and is not made up. The capture's end is an instant on each process, its
args the rank's state then (the rank account: compiling, waiting, running, idle).

Events that overlap without nesting (a backward compile logged inside another compile's
span, clocks of different records) go to another track of the process, so that every track
nests properly, as the format requires.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from traceview.analyze.accounts.compiles import OPEN, compile_account, compile_pieces, job_ended
from traceview.analyze.accounts.ranks import rank_account
from traceview.analyze.unfinished import capture_end
from traceview.analyze.wording import STATUS_WORDS, rank_end_text, unfinished_text
from traceview.trace import Trace

PIECE_ROWS_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String, "rank": pl.Int32, "compile_id": pl.String, "occurrence": pl.Int32, "label": pl.String,
    "function": pl.String, "filename": pl.String, "line": pl.Int32, "piece": pl.String, "index": pl.Int32,
    "pieces": pl.Int32, "start_us": pl.Int64, "dur_us": pl.Int64, "seconds": pl.Float64, "status": pl.String,
    "phase": pl.String, "open": pl.Boolean, "compile_status": pl.String, "compile_seconds": pl.Float64,
    "forward_s": pl.Float64, "recompile_reason": pl.String, "process": pl.Int64, "process_label": pl.String,
    "offset_s": pl.Float64,
}


def piece_rows(trace: Trace) -> pl.DataFrame:
    """Every piece of every compile on the run's time axis, for the pictures (the page's
    timeline, the Chrome trace): the compile account's pieces
    (traceview.analyze.accounts.compiles.compile_pieces), each with its compile's name and
    place, `piece` ("forward", "backward", "compiled autograd", ...), `index` (which backward
    piece, in log order) of `pieces` (the compile's backward pieces), `start_us`, `dur_us`
    (`seconds`, the account's, in us; a piece left open runs to the capture's last
    timestamp), `status` (the piece's: finished, failed, interrupted, never_ended, unknown),
    `phase` (where an open piece was), `open`, and its compile's `compile_status`,
    `compile_seconds` (the account's status and seconds) and `recompile_reason`. A compile
    with a start but no piece (no time logged: unknown, or failed before its metrics timed
    it) is one `forward` row with `dur_us` null and its compile's status. `process` and `process_label` name the rank (a rank with several input
    files has one process per file); `offset_s` counts from the first piece's start. Sorted by start."""
    acc = compile_account(trace)
    pieces = compile_pieces(trace)
    if acc.is_empty():
        return pl.DataFrame(schema=PIECE_ROWS_SCHEMA)
    keys = ["file", "compile_id", "occurrence"]
    meta = acc.select(
        *keys, "function", "filename", "line", pl.col("backward_pieces").alias("pieces"),
        pl.col("status").alias("compile_status"), pl.col("seconds").alias("compile_seconds"), "forward_s",
    )
    reasons = trace.compiles.select(*keys, "recompile_reason") if trace.compiles.height else None
    drawn = pieces.with_columns(
        pl.col("start").dt.epoch("us").alias("start_us"),
        (pl.col("end").dt.epoch("us") - pl.col("start").dt.epoch("us")).clip(lower_bound=0).alias("dur_us"),
        pl.col("status").is_in(OPEN).alias("open"),
    ).filter(pl.col("start_us").is_not_null())
    # a finished piece is as long as the account says (a forward: its metrics' compile time)
    drawn = drawn.with_columns(
        pl.when(pl.col("open") | pl.col("seconds").is_null()).then(pl.col("dur_us"))
        .otherwise((pl.col("seconds") * 1e6).round().cast(pl.Int64).clip(lower_bound=0)).alias("dur_us")
    )
    # compiles with a start and no piece: no time logged (no metrics, or failed untimed; not open)
    bare = acc.filter(pl.col("start").is_not_null()).join(pieces.select(keys).unique(), on=keys, how="anti", nulls_equal=True)
    bare = bare.select(
        "rank", "file", "compile_id", "occurrence", "label", pl.lit("forward").alias("piece"), pl.lit(0, pl.Int32).alias("index"),
        pl.col("start").dt.epoch("us").alias("start_us"), pl.lit(None, pl.Int64).alias("dur_us"),
        pl.lit(None, pl.Float64).alias("seconds"), "status", pl.lit(None, pl.String).alias("phase"),
        pl.lit(False).alias("open"),
    )
    cols = ["rank", "file", "compile_id", "occurrence", "label", "piece", "index", "start_us", "dur_us", "seconds",
            "status", "phase", "open"]
    rows = pl.concat([drawn.select(cols), bare.select(cols)], how="vertical_relaxed")
    rows = rows.join(meta, on=keys, how="left", nulls_equal=True, maintain_order="left")
    if reasons is not None:
        rows = rows.join(reasons.unique(keys, keep="first"), on=keys, how="left", nulls_equal=True, maintain_order="left")
    else:
        rows = rows.with_columns(pl.lit(None, pl.String).alias("recompile_reason"))
    rows = rows.sort("start_us", pl.col("piece") != "forward", "index", maintain_order=True)
    processes = processes_of(trace)
    pid = [processes[(r, f)][0] for r, f in zip(rows["rank"].to_list(), rows["file"].to_list(), strict=True)]
    first = rows["start_us"].min() if rows.height else 0
    rows = rows.with_columns(
        pl.Series("process", pid, dtype=pl.Int64),
        pl.Series("process_label", [processes[(r, f)][1] for r, f in zip(rows["rank"].to_list(), rows["file"].to_list(), strict=True)],
                  dtype=pl.String),
        ((pl.col("start_us") - first) / 1e6).alias("offset_s"),
    )
    return rows.select([pl.col(k).cast(v) for k, v in PIECE_ROWS_SCHEMA.items()])


def processes_of(trace: Trace) -> dict[tuple[int | None, str], tuple[int, str]]:
    """(rank, file) -> (process id, label) for every file with a compile, a phase or a record
    of its own (the rank account's files: a rank that compiled nothing still has a row)."""
    ranks = pl.DataFrame([{"rank": e["rank"], "file": e["file"]} for e in rank_account(trace)],
                         schema={"rank": pl.Int32, "file": pl.String})
    others = pl.concat([trace.spans.select("rank", "file"), compile_account(trace).select("rank", "file"), ranks],
                       how="vertical_relaxed")
    processes = _processes(trace.compiles, others)
    labels = _process_labels(processes)
    return {k: (pid, labels[pid]) for k, pid in processes.items()}


def timeline_end(trace: Trace) -> dict[str, Any] | None:
    """Where the pictures' time axis ends and what is said there: {"at_us" (the capture's
    last timestamp, epoch us: a piece left open is drawn to it), "what" (its record), "ended"
    (whether the capture shows the job ending: a stop, a crash), "ranks" (file -> the rank's
    state then, the rank account's entry, with "text": `rank_end_text`)}; None for a capture
    without a timestamp."""
    end = capture_end(trace)
    if end is None or end.get("at") is None:
        return None
    ranks = {e["file"]: {**e, "text": rank_end_text(e)} for e in rank_account(trace)}
    return {
        "at_us": round(end["at"].replace(tzinfo=datetime.timezone.utc).timestamp() * 1e6),
        "what": end.get("what") or "", "ended": job_ended(trace), "ranks": ranks,
    }


def piece_name(r: dict[str, Any]) -> str:
    """Which piece a row of `piece_rows` is: "forward", "backward", "backward 2 of 4" (one of
    the compile's finished backward pieces), "compiled autograd"."""
    if r["piece"] == "backward" and (r.get("pieces") or 0) > 1 and not r.get("open"):
        return f"backward {(r.get('index') or 0) + 1} of {r['pieces']}"
    return str(r["piece"])


def piece_text(r: dict[str, Any]) -> str:
    """A piece as a tooltip or an event's name says it: "forward 1.181s", "backward 2 of 4
    0.022s", "forward interrupted when the job ended (in inductor code_gen): 58.39s to the
    capture's end", "forward: no time logged"."""
    name = piece_name(r)
    if r.get("open"):
        secs = f": {r['seconds']:.3f}s to the capture's end" if r.get("seconds") is not None else ""
        return f"{name} {unfinished_text(r['status'], r.get('phase'))}{secs}"
    if r.get("dur_us") is None or r.get("seconds") is None:
        return f"{name}: {STATUS_WORDS['unknown']}" + (" (failed)" if r.get("status") == "failed" else "")
    return f"{name} {r['seconds']:.3f}s" + (" (failed)" if r.get("status") == "failed" else "")


def timeline_events(trace: Trace) -> list[dict[str, Any]]:
    """The trace's compiles (each piece of each, `piece_rows`), compile phases and the
    capture's end as Chrome Trace Events (metadata first)."""
    compiles = trace.compiles.select("file", "rank", "compile_id", "occurrence", "function")
    spans = _spans_with_function(trace.spans, compiles)
    procs = processes_of(trace)
    processes = {k: pid for k, (pid, _) in procs.items()}
    events: list[dict[str, Any]] = []
    # per process and track kind: each track's stack of open events' ends
    lanes: dict[tuple[int, str], list[list[int]]] = {}
    body: list[dict[str, Any]] = []
    end = timeline_end(trace)
    for row in piece_rows(trace).iter_rows(named=True):
        pid = row["process"]
        args = _args(row)
        args.update(status=row["status"], compile_status=row["compile_status"], piece=row["piece"],
                    compile_seconds=row["compile_seconds"])
        if row["piece"] == "backward":
            args.update(index=row["index"], pieces=row["pieces"])
        if row["filename"]:
            args["source"] = f"{row['filename']}:{row['line']}"
        name = f"compile {row['label']} {row['function'] or '?'}"
        name += "" if row["piece"] == "forward" else f" {piece_name(row)}"
        if row["open"]:
            args.update(unfinished=unfinished_text(row["status"]), phase=row["phase"], seconds=row["seconds"],
                        to=f"the capture's last timestamp ({end['what']})" if end else "the capture's last timestamp")
            name += f" ({unfinished_text(row['status'])})"
        dur = row["dur_us"]
        if dur is None:  # no metrics: the compile's length is unknown
            lanes.setdefault((pid, "compiles"), [])
            body.append(_instant(name + " (no compilation_metrics)", "compile", row["start_us"], pid, 0, args))
            continue
        tid = _lane(lanes.setdefault((pid, "compiles"), []), row["start_us"], dur, base=0)
        body.append(_complete(name, "compile", row["start_us"], dur, pid, tid, args))
    phase_rows = spans.filter(pl.col("start_us").is_not_null()).sort("start_us", pl.col("duration_s").neg())
    for row in phase_rows.iter_rows(named=True):
        pid = processes[(row["rank"], row["file"])]
        args = _args(row)
        if row["duration_s"] is None:
            lanes.setdefault((pid, "phases"), [])
            body.append(_instant(f"{row['name']} (no end logged)", row["cat"] or "phase", row["start_us"], pid, 100, args))
            continue
        tid = _lane(lanes.setdefault((pid, "phases"), []), row["start_us"], _us(row["duration_s"]), base=100)
        body.append(_complete(row["name"], row["cat"] or "phase", row["start_us"], _us(row["duration_s"]), pid, tid, args))
    if end is not None:
        # the capture's end on each rank's compiles track, with the rank's state then
        for (rank, file), pid in processes.items():
            state = end["ranks"].get(file) or {}
            args = {"rank": rank, "file": file, "what": end["what"], "state": state.get("state"), "text": state.get("text") or None}
            if state.get("behind"):
                args["behind"] = state["behind"]
            if state.get("idle_s") is not None:
                args["idle_s"] = state["idle_s"]
            lanes.setdefault((pid, "compiles"), [])
            body.append(_instant("capture ends" + (f": {state['text']}" if state.get("text") else ""), "end", end["at_us"], pid, 0, args))
    for (_, _), (pid, label) in procs.items():
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
    for (pid, kind), stacks in sorted(lanes.items()):
        base = 0 if kind == "compiles" else 100
        for i in range(max(len(stacks), 1)):
            name = kind if i == 0 else f"{kind} ({i + 1})"
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": base + i, "args": {"name": name}})
    return events + body


def write_timeline(trace: Trace, out: str | os.PathLike[str]) -> tuple[Path, int]:
    """Write the timeline to `out` atomically (a temporary sibling renamed into place);
    returns the path and the number of non-metadata events."""
    events = timeline_events(trace)
    data = orjson.dumps({"traceEvents": events, "displayTimeUnit": "ms"})
    return write_atomically(out, data), sum(1 for e in events if e["ph"] != "M")


def write_atomically(out: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `out` through a temporary sibling renamed into place (a reader never
    sees half a file; an interrupted write leaves none); the file gets the umask's mode."""
    path = Path(out)
    parent = path.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _spans_with_function(spans: pl.DataFrame, compiles: pl.DataFrame) -> pl.DataFrame:
    """Each phase with the function of its compile: the compile of that id and occurrence
    in that file (spans.occurrence, from log order: a compile id used again after a
    torch._dynamo.reset() is another compile)."""
    s = spans.select("file", "rank", "compile_id", "occurrence", "name", "cat", "start_us", "duration_s")
    s = s.with_columns(pl.col("start_us").cast(pl.Int64))
    c = compiles.filter(pl.col("compile_id").is_not_null()).select("file", "compile_id", "occurrence", "function")
    return s.join(c, on=["file", "compile_id", "occurrence"], how="left", maintain_order="left")


def _processes(compiles: pl.DataFrame, spans: pl.DataFrame) -> dict[tuple[int | None, str], int]:
    """A process id per (rank, file): the rank itself when the rank has one file, else
    numbers past the highest rank (Perfetto sorts processes by id)."""
    keys = pl.concat([compiles.select("rank", "file"), spans.select("rank", "file")], how="vertical_relaxed").unique()
    keys = keys.sort("rank", "file", nulls_last=True)
    per_rank = keys.group_by("rank").len()
    single = {r for r, n in per_rank.iter_rows() if r is not None and n == 1}
    top = max([r for r in keys["rank"].to_list() if r is not None], default=-1)
    out: dict[tuple[int | None, str], int] = {}
    extra = top + 1
    for rank, file in keys.iter_rows():
        if rank in single:
            out[(rank, file)] = int(rank)
        else:
            out[(rank, file)] = extra
            extra += 1
    return out


def _process_labels(processes: dict[tuple[int | None, str], int]) -> dict[int, str]:
    """Each process's name: "rank R", with its file's name when the rank has several."""
    out = {}
    for (rank, file), pid in processes.items():
        label = f"rank {rank}" if rank is not None else "process without a rank"
        if sum(1 for r, _ in processes if r == rank) > 1:
            label += f" ({Path(file).name})"
        out[pid] = label
    return out


def _lane(stacks: list[list[int]], start: int, dur: int, *, base: int) -> int:
    """The first track whose open events this one nests in or follows (events come in
    start order, longer first); a new track when none. `stacks`: each track's stack of
    open events' ends."""
    end = start + dur
    for i, stack in enumerate(stacks):
        while stack and stack[-1] <= start:
            stack.pop()
        if not stack or end <= stack[-1]:
            stack.append(end)
            return base + i
    stacks.append([end])
    return base + len(stacks) - 1


def _us(seconds: float) -> int:
    return max(round(seconds * 1e6), 0)


def _args(row: dict[str, Any]) -> dict[str, Any]:
    return {"compile_id": row["compile_id"], "occurrence": row.get("occurrence"), "function": row["function"], "rank": row["rank"], "file": row["file"]}


def _complete(name: str, cat: str, ts: int, dur: int, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "cat": cat, "ph": "X", "ts": int(ts), "dur": dur, "pid": pid, "tid": tid, "args": args}


def _instant(name: str, cat: str, ts: int, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "cat": cat, "ph": "i", "s": "t", "ts": int(ts), "pid": pid, "tid": tid, "args": args}


def longest_phases(
    trace: Trace, row: dict[str, Any], limit: int = 4
) -> list[tuple[str, float]]:
    """The longest chromium phases inside one row of `piece_rows` (same file, rank and
    compile id, within its start and length), leaving out the spans that are the whole
    compile (`dynamo`, `entire_frame_compile`, `compile_attempt_N`, ...): where its time went.
    Nested phases are listed each (`backend_compile` holds `create_aot_dispatcher_function`)."""
    start, dur = row.get("start_us"), row.get("dur_us")
    if start is None or not dur:
        return []
    rank = row.get("rank")
    sp = trace.spans.filter(
        (pl.col("file") == row.get("file"))
        & (pl.col("rank").is_null() if rank is None else pl.col("rank") == rank)
        & (pl.col("compile_id") == row.get("compile_id"))
        & pl.col("duration_s").is_not_null()
        & (pl.col("start_us") >= start - 0.05 * dur)  # `dynamo` starts a little before the metrics' start
        & (pl.col("start_us") <= start + dur)
        & (pl.col("duration_s") * 1e6 < 0.95 * dur)
        & ~pl.col("name").str.starts_with("compile_attempt_")  # a wrapper of the whole attempt
    )
    top = sp.group_by("name").agg(pl.col("duration_s").sum()).sort("duration_s", descending=True).head(limit)
    return [(n, float(d)) for n, d in top.iter_rows()]
