"""Unfinished compiles: a compile that began (`dynamo_start`) and has no `compilation_metrics`.

torch logs a compile's metrics when it ends, failed or not; a compile without them was still
running when its rank's log stopped: the job was killed mid-compile, is hung in it, or is
still running (a log read while the job runs). Where it was is the innermost chromium span
begun and not ended ("inductor code_gen, in Scheduler.fused_nodes", "autotuning addmm"), and
how long it had been running is the time from its first record to its rank's last log line.
On several ranks, a rank still in a compile the others finished long before is behind them: a
likely hang (the others wait for it in their next collective).

How sure: the log cannot tell killed from hung from still running; the finding says what the
log shows (the phase, the time up to the last line) and calls a rank behind the others a
*likely* hang. Open spans are never counted as finished anywhere (compile_time counts ended
spans only).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from parsers.compile_ids import sort_key
from traceview.analyze.code_objects import describe
from traceview.trace import Trace

# the phases a person knows, by chromium span name (torch/_dynamo, _functorch, _inductor)
_PHASES: tuple[tuple[str, str], ...] = (
    ("entire_frame_compile", "dynamo"),
    ("bytecode_tracing", "dynamo tracing"),
    ("backend_compile", "backend"),
    ("create_aot_dispatcher_function", "AOTAutograd"),
    ("inductor_compile", "inductor"),
    ("code_gen", "code_gen"),
    ("async_compile.wait", "waiting for kernel compiles"),
)


def unfinished_compiles(trace: Trace) -> list[dict[str, Any]]:
    """One entry per compile without metrics: rank, compile_id, occurrence, function, filename,
    line, code (analyze.code_objects), phase (the known phases open, outermost first, with the
    innermost open span), innermost_span, open_spans, started, running_s (first record to the
    rank's last log line), last_line_at, others (ranks that finished the same compile id, with
    how long before the job's last line), behind (a likely hang: other ranks finished this
    compile, this rank did not), file, lineno. `running_s` runs to the job's last log line
    (the latest of every rank's): a rank hung in a compile writes nothing more itself."""
    c = trace.compiles
    if c.is_empty():
        return []
    # a Dynamo compile (it has a frame; a compiled-autograd graph `!0` has no metrics of its own)
    open_rows = c.filter((pl.col("status") == "no_metrics") & pl.col("frame_id").is_not_null())
    if open_rows.is_empty():
        return []
    ev = trace.index_events().select("file", "lineno", "ts", "compile_id")
    last = ev.group_by("file").agg(pl.col("ts").max().alias("last_ts"))
    last_ts = dict(last.iter_rows())
    job_end = max((v for v in last_ts.values() if v is not None), default=None)
    spans = trace.spans
    with_metrics = set(c.filter(pl.col("status") != "no_metrics")["file"].to_list())
    out = []
    for r in open_rows.iter_rows(named=True):
        mine = ev.filter((pl.col("file") == r["file"]) & (pl.col("compile_id") == r["compile_id"]) & (pl.col("lineno") >= (r["lineno"] or 0)))
        started = mine["ts"].min() if mine.height else None
        sp = spans.filter(
            (pl.col("file") == r["file"]) & (pl.col("compile_id") == r["compile_id"])
            & (pl.col("occurrence").fill_null(1) == (r["occurrence"] or 1))
        )
        opened = sp.filter(pl.col("duration_s").is_null() & (pl.col("ph") == "B")).sort("lineno")
        names = opened["name"].to_list()
        if not names and r["file"] not in with_metrics:
            # a log whose torch writes no compilation_metrics at all (older releases) says nothing
            # of whether this compile ended: not called unfinished without an open span
            continue
        if opened.height and opened["start"].min() is not None:
            started = min(started, opened["start"].min()) if started is not None else opened["start"].min()
        end = max((v for v in (last_ts.get(r["file"]), job_end) if v is not None), default=None)
        running = (end - started).total_seconds() if started is not None and end is not None else None
        known = [label for span, label in _PHASES if span in names]
        autotune = [n for n in names if n.endswith("_template_autotuning") or n.endswith("_template_precompiling")]
        innermost = names[-1] if names else None
        phase = known[-1] if known else None  # the innermost phase a person knows
        if phase in ("code_gen", "waiting for kernel compiles"):
            phase = f"inductor {phase}"
        if autotune:
            phase = f"autotuning {autotune[-1].rsplit('_template_', 1)[0]}" + (f" ({phase})" if phase else "")
        others = _others(c, r, end)
        behind = bool(others)
        out.append(
            {
                "rank": r["rank"], "compile_id": r["compile_id"], "occurrence": r["occurrence"],
                "function": r["function"], "filename": r["filename"], "line": r["line"],
                "code": describe(trace, rank=r["rank"], function=r["function"], filename=r["filename"], line=r["line"],
                                 compile_ids=[r["compile_id"]]),
                "phase": phase, "innermost_span": innermost, "open_spans": names,
                "started": started.isoformat() if started is not None else None,
                "running_s": round(running, 3) if running is not None else None,
                "last_line_at": end.isoformat() if end is not None else None,
                "others": others, "behind": behind,
                "file": r["file"], "lineno": r["lineno"],
            }
        )
    out.sort(key=lambda u: (not u["behind"], -(u["running_s"] or 0.0), u["rank"] if u["rank"] is not None else -1, sort_key(u["compile_id"])))
    return out


def _others(c: pl.DataFrame, r: dict[str, Any], end: Any) -> list[dict[str, Any]]:
    """The other ranks that finished the same compile (id and code object), with how long
    before this rank's last log line they finished it."""
    if r["rank"] is None:
        return []
    done = c.filter(
        (pl.col("rank") != r["rank"]) & (pl.col("compile_id") == r["compile_id"]) & (pl.col("status") != "no_metrics")
        & (pl.col("function") == r["function"] if r["function"] is not None else pl.lit(True))
    )
    out = []
    for o in done.iter_rows(named=True):
        fin = None
        if o["start"] is not None and end is not None:
            finished = o["start"].timestamp() + (o["compile_time_s"] or 0.0)
            fin = round(end.timestamp() - finished, 3)
        out.append({"rank": o["rank"], "finished_before_s": fin})
    return sorted(out, key=lambda o: o["rank"])
