"""The account of each compile: one row per compile, read by every finding and view.

A compile is a Dynamo frame's compile on one rank (`compiles`: file, compile id, occurrence),
or a compile seen only by its open spans (a compiled-autograd graph). Its account:

* **pieces**: the forward (Dynamo + the backend: `compilation_metrics`), and every backward
  piece compiled lazily at the first `.backward()` (`bwd_compilation_metrics`: DDPOptimizer
  compiles one per gradient bucket, all under the same compile id); `forward_s`, `backward_s`
  (every piece), `backward_pieces`, `backward_start` / `backward_end` (each piece's, as the
  compiles table read them from its records);
* **start, end, seconds**: the forward's start; the end of its last piece; what it cost in all.
  A compile that never ended runs to the capture's last timestamp (`end` is that timestamp,
  `seconds` its time up to it: the forward's time plus the open backward's, when the backward
  is the part left open);
* **status**: `finished`; `failed` (its metrics carry a failure); `interrupted` (open when
  the capture shows the job ended: a stop from outside, a crash, an interrupt; or the last
  compile of a process whose KeyboardInterrupt traceback passes through torch.compile's
  frames: torch logs that compile's metrics as if it had ended); `never_ended`
  (open, and nothing in the capture says the job ended: hung, killed without a trace, or still
  running); `unknown` (no metrics, in a log whose torch writes none: the log cannot tell).
  `open_part` says which part was open (forward, backward, compiled autograd), `open_since`
  when that part began, and `phase` where in it (traceview.analyze.unfinished reads the open spans);
* **cause**: for a recompile, what differs from the cache entry it otherwise matches: the
  primary failed guard the recompile storms found (analyze.storms.primary_causes), never the
  first failure torch happens to list. `cause_kind` is the guard's kind (size, dtype,
  requires_grad, ...), `cause` its words, `cause_expected` whether torch.compile does it by
  design;
* **name**: the code object's keys (function, filename, line, compile_kind) that
  analyze.code_objects turns into the one name every view shows.
"""

from __future__ import annotations

import datetime
from typing import Any

import polars as pl

from parsers.stops import stops_from_text
from parsers.tracebacks import uncaught_from_text
from traceview.analyze.per_trace import once
from traceview.analyze.storms import primary_causes
from traceview.analyze.unfinished import capture_end, unfinished_compiles
from traceview.trace import Trace

STATUSES = ("finished", "failed", "interrupted", "never_ended", "unknown")
OPEN = ("interrupted", "never_ended")

SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32,
    "file": pl.String,
    "pid": pl.Int32,
    "compile_id": pl.String,
    "occurrence": pl.Int32,
    "label": pl.String,
    "attempts": pl.Int32,
    "function": pl.String,
    "filename": pl.String,
    "line": pl.Int32,
    "compile_kind": pl.String,
    "parent_compile_id": pl.String,
    "at_run_time": pl.Boolean,
    "start": pl.Datetime("us"),
    "end": pl.Datetime("us"),
    "forward_s": pl.Float64,
    "backward_s": pl.Float64,
    "backward_pieces": pl.Int32,
    "backward_start": pl.List(pl.Datetime("us")),
    "backward_end": pl.List(pl.Datetime("us")),
    "seconds": pl.Float64,
    "status": pl.String,
    "open_part": pl.String,
    "open_since": pl.Datetime("us"),
    "phase": pl.String,
    "cause_kind": pl.String,
    "cause_source": pl.String,
    "cause_dim": pl.Int32,
    "cause": pl.String,
    "cause_expected": pl.Boolean,
    "lineno": pl.Int64,
}


def compile_account(trace: Trace) -> pl.DataFrame:
    """One row per compile (SCHEMA; the module doc says what each column means), in the
    compiles table's order, compiles seen only by open spans last."""
    return once(trace, name="compile_account", build=lambda: _account(trace))


PIECES_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32,
    "file": pl.String,
    "compile_id": pl.String,
    "occurrence": pl.Int32,
    "label": pl.String,
    "piece": pl.String,
    "index": pl.Int32,
    "start": pl.Datetime("us"),
    "end": pl.Datetime("us"),
    "seconds": pl.Float64,
    "status": pl.String,
    "phase": pl.String,
}


def compile_pieces(trace: Trace) -> pl.DataFrame:
    """One row per piece of each compile (PIECES_SCHEMA), for the pictures: piece "forward"
    (Dynamo and the backend, or a compile without a frame), "backward" (index: which piece,
    in log order; DDPOptimizer compiles one per gradient bucket) and the part left open, drawn
    to the capture's last timestamp with the compile's status (interrupted, never_ended) and
    phase. A finished piece's status is its compile's."""
    return once(trace, name="compile_pieces", build=lambda: _pieces(trace))


def uncaught(trace: Trace) -> pl.DataFrame:
    """The uncaught exceptions of the trace's text logs (parsers.tracebacks), read once."""
    return once(trace, name="uncaught", build=lambda: uncaught_from_text(trace.other_lines, trace.log_records))


def stop_lines(trace: Trace) -> pl.DataFrame:
    """The launcher's and the system's lines that say a process stopped (parsers.stops), read once."""
    return once(trace, name="stop_lines", build=lambda: stops_from_text(trace.log_records, trace.other_lines))


def job_ended(trace: Trace) -> bool:
    """Whether the capture shows the job ending: a launcher's or the system's stop line, or an
    uncaught exception (a crash, a KeyboardInterrupt)."""
    return bool(stop_lines(trace).height or uncaught(trace).height)


# the phase a compile was in, from a traceback's innermost torch frame
_FRAME_PHASES: tuple[tuple[str, str], ...] = (
    ("compile_to_module", "inductor code_gen"), ("codegen", "inductor code_gen"),
    ("async_compile", "inductor waiting for kernel compiles"), ("select_algorithm", "autotuning"),
    ("compile_fx", "inductor"), ("_aot_autograd", "AOTAutograd"), ("symbolic_convert", "dynamo tracing"),
    ("convert_frame", "dynamo"),
)
_COMPILING = ("torch/_dynamo/convert_frame.py", "torch/_inductor/compile_fx.py", "torch/_functorch/_aot_autograd/")


def interrupted_phase(frames: list[str]) -> str | None:
    """Where a traceback (`path:line in fn` frames, outermost first) was inside torch.compile:
    the phase of its innermost torch frame ("inductor code_gen"; "a compile" when no frame
    names one), or None when it does not pass through torch.compile's frames."""
    frames = [f.replace("\\", "/") for f in frames]
    if not any(any(c in f for c in _COMPILING) for f in frames):
        return None
    return next((label for f in reversed(frames) if "/torch/" in f for key, label in _FRAME_PHASES if key in f), "a compile")


def _interrupted(trace: Trace, rows: list[dict[str, Any]], end_at: Any) -> None:
    """A compile a KeyboardInterrupt stopped (its traceback passes through torch.compile's
    frames): torch logs its compilation_metrics without a failure, as if it had ended, and
    leaves no span open. It is the last compile begun in that rank's trace: interrupted, in
    the phase the traceback names (in place)."""
    for it in uncaught(trace).filter(pl.col("exc_type").str.ends_with("KeyboardInterrupt")).iter_rows(named=True):
        phase = interrupted_phase(it.get("frames") or [])
        if phase is None:
            continue
        mine = [r for r in rows if r["rank"] == it["rank"] and r.get("start") is not None]
        if not mine:
            continue
        last_file = max(mine, key=lambda r: r["start"])["file"]
        last = max((r for r in mine if r["file"] == last_file), key=lambda r: r["start"])
        if last["status"] in ("finished", "failed"):
            last.update(status="interrupted", open_part="forward", open_since=last["start"], phase=phase)


def _backward_pieces(start_us: list[float | None] | None, end_us: list[float | None] | None) -> list[tuple[float, float]]:
    """The (start, end) in epoch seconds of each backward piece whose `bwd_compilation_metrics`
    the compiles table read under this compile (its `bwd_piece_start_us` / `bwd_piece_end_us`),
    in log order; a piece without both times is left out."""
    return [(b / 1e6, e / 1e6) for b, e in zip(start_us or [], end_us or []) if b is not None and e is not None]


def _dt(seconds: float | None) -> datetime.datetime | None:
    if seconds is None:
        return None
    try:
        return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc).replace(tzinfo=None)
    except (OverflowError, OSError, ValueError):
        return None


def _ts(d: Any) -> float | None:
    """A naive UTC datetime (polars' Datetime) as epoch seconds."""
    if d is None:
        return None
    return d.replace(tzinfo=datetime.timezone.utc).timestamp()


def _account(trace: Trace) -> pl.DataFrame:
    c = trace.compiles
    unfinished = unfinished_compiles(trace)
    open_of: dict[tuple[str, str, int], dict[str, Any]] = {}
    for u in unfinished:
        open_of.setdefault((u["file"], u["compile_id"], u.get("occurrence") or 1), u)
    end_of = capture_end(trace)
    end_at = end_of["at"] if end_of else None
    ended = job_ended(trace) if open_of else False
    causes = primary_causes(trace)
    rows: list[dict[str, Any]] = []  # the compiles table's rows: what is worked out per compile
    seen: set[tuple[str, str, int]] = set()
    read = ("rank", "file", "compile_id", "occurrence", "start", "compile_time_s", "bwd_piece_start_us", "bwd_piece_end_us",
            "bwd_compile_time_s", "bwd_pieces", "status", "total_time_s")
    piece_of: list[int] = []  # the backward pieces' rows, start and end
    piece_start: list[datetime.datetime | None] = []
    piece_end: list[datetime.datetime | None] = []
    for r in (c.select(read) if c.height else c.clear()).iter_rows(named=True):
        key = (r["file"], r["compile_id"], r["occurrence"] or 1)
        seen.add(key)
        u = open_of.get(key)
        start = r["start"]
        fwd_s = r["compile_time_s"]
        start_s = _ts(start)
        mine = _backward_pieces(r["bwd_piece_start_us"], r["bwd_piece_end_us"])
        row = {"rank": r["rank"], "file": r["file"], "start": start, "open_since": None}
        row.update(forward_s=fwd_s, backward_s=r["bwd_compile_time_s"], backward_pieces=r["bwd_pieces"],
                   open_part=None, phase=None)
        for b, e in mine:  # each piece's times, made lists at the end (a list per row is slow to build)
            piece_of.append(len(rows))
            piece_start.append(_dt(b))
            piece_end.append(_dt(e))
        if u is not None:
            row["status"] = "interrupted" if ended else "never_ended"
            row["open_part"] = u.get("part") or "forward"
            row["open_since"] = datetime.datetime.fromisoformat(u["started"]) if u.get("started") else None
            row["phase"] = u.get("phase")
            running = u.get("running_s")
            if u.get("part") is None:
                row["seconds"] = running
                if start is None and u.get("started"):
                    row["start"] = datetime.datetime.fromisoformat(u["started"])
            else:
                row["seconds"] = (fwd_s or 0.0) + (running or 0.0)
            row["end"] = end_at
        else:
            raw = r["status"]
            row["status"] = "failed" if raw == "failed" else "unknown" if raw == "no_metrics" else "finished"
            row["seconds"] = None if raw == "no_metrics" else r["total_time_s"]
            ends = [e for _, e in mine]
            if start_s is not None and fwd_s is not None:
                ends.append(start_s + fwd_s)
            row["end"] = _dt(max(ends)) if ends else None
        cause = causes.get((r["rank"], r["compile_id"], r["occurrence"] or 1))
        row.update(
            cause_kind=cause["kind"] if cause else None,
            cause_source=cause["source"] if cause else None,
            cause_dim=cause["dim"] if cause and isinstance(cause["dim"], int) else None,
            cause=cause["text"] if cause else None,
            cause_expected=cause["expected"] if cause else None,
        )
        rows.append(row)
    _interrupted(trace, rows, end_at)
    # compiles seen only by their open spans (a compiled-autograd graph, a compile id with no
    # dynamo_start of its own)
    extra: list[dict[str, Any]] = []
    for key, u in open_of.items():
        if key in seen:
            continue
        extra.append({
            "rank": u["rank"], "file": u["file"], "pid": u.get("pid"), "compile_id": u["compile_id"],
            "occurrence": u.get("occurrence"), "label": u["compile_id"], "function": u.get("function"), "filename": u.get("filename"),
            "line": u.get("line"), "start": datetime.datetime.fromisoformat(u["started"]) if u.get("started") else None,
            "end": end_at, "seconds": u.get("running_s"), "status": "interrupted" if ended else "never_ended",
            "open_part": u.get("part"), "phase": u.get("phase"),
            "open_since": datetime.datetime.fromisoformat(u["started"]) if u.get("started") else None, "lineno": u.get("lineno"), "backward_pieces": 0,
        })
    extra_rows = pl.DataFrame([{k: r.get(k) for k in SCHEMA} for r in extra], schema=SCHEMA) if extra else None
    if not rows:
        return extra_rows if extra_rows is not None else pl.DataFrame(schema=SCHEMA)
    # the columns the compiles table has as they are, the rest column by column from the rows
    pieces = ("backward_start", "backward_end")
    worked = {k: t for k, t in SCHEMA.items() if k not in _AS_IN_COMPILES and k not in pieces}
    out = pl.concat([
        c.select([pl.col(k).cast(t) if k in c.columns else pl.lit(None, dtype=t).alias(k) for k, t in SCHEMA.items()
                  if k in _AS_IN_COMPILES]),
        pl.DataFrame({k: [r.get(k) for r in rows] for k in worked}, schema=worked),
        _piece_lists(len(rows), piece_of, piece_start, piece_end),
    ], how="horizontal").select(list(SCHEMA))
    return out if extra_rows is None else pl.concat([out, extra_rows])


def _piece_lists(n: int, rows: list[int], starts: list[Any], ends: list[Any]) -> pl.DataFrame:
    """`backward_start` and `backward_end` of `n` compiles: row `rows[i]`'s pieces are
    (starts[i], ends[i]), in order; a compile without pieces has empty lists."""
    pieces = pl.DataFrame({"_row": rows, "backward_start": starts, "backward_end": ends},
                          schema={"_row": pl.Int64, "backward_start": SCHEMA["backward_start"].inner,  # type: ignore[attr-defined]
                                  "backward_end": SCHEMA["backward_end"].inner})  # type: ignore[attr-defined]
    lists = pieces.group_by("_row", maintain_order=True).agg("backward_start", "backward_end")
    return (
        pl.DataFrame({"_row": pl.int_range(n, eager=True, dtype=pl.Int64)})
        .join(lists, on="_row", how="left", maintain_order="left")
        .select(pl.col(k).fill_null(pl.lit([], dtype=SCHEMA[k])) for k in ("backward_start", "backward_end"))
    )


# the account's columns that are the compiles table's (the others are worked out per compile)
_AS_IN_COMPILES = frozenset(("rank", "file", "pid", "compile_id", "occurrence", "label", "attempts", "function", "filename",
                             "line", "compile_kind", "parent_compile_id", "at_run_time", "lineno"))


def _pieces(trace: Trace) -> pl.DataFrame:
    acc = compile_account(trace)
    if acc.is_empty():
        return pl.DataFrame(schema=PIECES_SCHEMA)
    rows: list[dict[str, Any]] = []
    for a in acc.iter_rows(named=True):
        base = {k: a[k] for k in ("rank", "file", "compile_id", "occurrence", "label")}
        still_open = a["status"] in OPEN
        fwd_open = still_open and a["open_part"] == "forward"
        if a["start"] is not None and (a["forward_s"] is not None or fwd_open):
            end = a["end"] if fwd_open else _dt((_ts(a["start"]) or 0.0) + (a["forward_s"] or 0.0))
            rows.append({**base, "piece": "forward", "index": 0, "start": a["start"], "end": end,
                         "seconds": a["seconds"] if fwd_open else a["forward_s"],
                         "status": a["status"] if fwd_open else ("failed" if a["status"] == "failed" else "finished"),
                         "phase": a["phase"] if fwd_open else None})
        mine = list(zip(a["backward_start"] or [], a["backward_end"] or []))
        for i, (b, e) in enumerate(mine):
            rows.append({**base, "piece": "backward", "index": i, "start": b, "end": e,
                         "seconds": round((_ts(e) or 0.0) - (_ts(b) or 0.0), 6), "status": "finished", "phase": None})
        if still_open and not fwd_open:
            since = a["open_since"]
            secs = (_ts(a["end"]) - _ts(since)) if a["end"] is not None and since is not None else None  # type: ignore[operator]
            rows.append({**base, "piece": a["open_part"] or "backward", "index": len(mine), "start": since, "end": a["end"],
                         "seconds": secs, "status": a["status"], "phase": a["phase"]})
    return pl.DataFrame(rows, schema=PIECES_SCHEMA) if rows else pl.DataFrame(schema=PIECES_SCHEMA)
