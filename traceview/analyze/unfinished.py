"""Unfinished compiles: a compile that began and did not end.

Two kinds. A Dynamo compile that began (`dynamo_start`) and has no `compilation_metrics`
(torch logs a compile's metrics when it ends, failed or not). And a compile that has no
`dynamo_start` of its own but whose chromium spans were begun and not ended: the backward,
compiled lazily at the first `.backward()` after the forward's `compilation_metrics` (its
records carry the forward's compile id; it ends with `bwd_compilation_metrics`), a
compiled-autograd graph (`!0`), any compile id with open spans outside a Dynamo compile that
is still open. Either was still running when its rank's log stopped: the job was killed
mid-compile, is hung in it, or is still running (a log read while the job runs). Where it
was is the innermost chromium span begun and not ended ("inductor code_gen, in
Scheduler.fused_nodes", "autotuning addmm(512x4096, 512x1024, 1024x4096)": the shapes are the
open autotuning span's own `autotune_shape`), and how long it had been running is the time
from its first record to the capture's last timestamp, in whichever file it is (a text log's
launcher lines, written when the job was stopped, count): `last_line_from` says which.
On several ranks, a rank still in a compile the others finished long before is behind them: a
likely hang (the others wait for it in their next collective).

How sure: the log cannot tell killed from hung from still running; the finding says what the
log shows (the phase, the time up to the last timestamp) and calls a rank behind the others a
*likely* hang (analyze.stops says who stopped the job, where the capture shows it). Open spans
are never counted as finished anywhere (compile_time counts ended spans only).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import polars as pl

from parsers.compile_ids import sort_key
from traceview.analyze.code_objects import describe
from traceview.analyze.per_trace import once
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


# spans a compiled graph opens when it runs, under its compile id (torch/_inductor/runtime/
# triton_heuristics.py: the first call of a kernel benchmarks its configs): run time, not a compile
RUN_TIME_SPANS: tuple[str, ...] = ("CachingAutotuner.",)

# the top span of a compile that has no dynamo_start of its own, and what it compiles
_SPAN_PARTS: tuple[tuple[str, str], ...] = (
    ("entire_backward_compile", "backward"),
    ("compile_fx.<locals>.bw_compiler", "backward"),
    ("compiled_autograd", "compiled autograd"),
)


def capture_end(trace: Trace) -> dict[str, Any] | None:
    """The capture's last timestamp, in whichever file it is: {"at" (datetime), "file",
    "lineno", "what"}; a text log's records count (a launcher's lines written when the job
    was stopped come after every rank's last trace record)."""
    best: dict[str, Any] | None = None
    ev = trace.index_events()
    if ev.height and ev["ts"].drop_nulls().len():
        r = ev.filter(pl.col("ts") == pl.col("ts").max()).sort("lineno").row(-1, named=True)
        rank = f"rank {r['rank']}'s trace" if r["rank"] is not None else "the trace"
        best = {"at": r["ts"], "file": r["file"], "lineno": r["lineno"], "what": f"{rank}: {r['kind'] or 'record'}"}
    recs = trace.log_records
    if recs.height and recs["ts"].drop_nulls().len():
        r = recs.filter(pl.col("ts") == pl.col("ts").max()).sort("lineno").row(-1, named=True)
        if best is None or r["ts"] > best["at"]:
            text = (r["text"] or "").split("\n", 1)[0].strip()
            best = {"at": r["ts"], "file": r["file"], "lineno": r["lineno"], "what": f"the text log: {text[:100]}"}
    return best


def unfinished_compiles(trace: Trace) -> list[dict[str, Any]]:
    """One entry per compile that began and did not end (see the module doc): rank,
    compile_id, occurrence, part (None: a Dynamo compile; "backward": the backward of the
    compile id compiled lazily; "compiled autograd"; "spans": another compile seen only by
    its open spans), function, filename, line, code (analyze.code_objects), phase (the known
    phases open, the innermost a person knows, with the operation autotuned), autotuning
    ({op, shapes, what, open_s, precompile_s, done} of the open autotuning span, or None;
    `_progress` says how far it got), innermost_span, open_spans, started,
    running_s (first record to the capture's last timestamp), last_line_at, last_line_from
    ({file, lineno, what}: where that timestamp is), others (ranks that finished the same
    compile, with how long before the last timestamp), behind (a likely hang: other ranks
    finished this compile, this rank did not), pid, file, lineno. A rank hung in a compile
    writes nothing more itself: its running time runs to the capture's last timestamp."""
    return copy.deepcopy(once(trace, name="unfinished_compiles", build=lambda: _unfinished(trace)))


def _unfinished(trace: Trace) -> list[dict[str, Any]]:
    c = trace.compiles
    spans = trace.spans
    opened_all = spans.filter(pl.col("duration_s").is_null() & (pl.col("ph") == "B") & pl.col("compile_id").is_not_null())
    if c.is_empty() and opened_all.is_empty():
        return []
    # a Dynamo compile (it has a frame; a compiled-autograd graph `!0` has no metrics of its own)
    open_rows = c.filter((pl.col("status") == "no_metrics") & pl.col("frame_id").is_not_null()) if c.height else c
    if open_rows.is_empty() and opened_all.is_empty():
        return []
    ev = trace.index_events().select("file", "lineno", "ts", "compile_id")
    end_of = capture_end(trace)
    end = end_of["at"] if end_of else None
    where_end = {k: end_of[k] for k in ("file", "lineno", "what")} if end_of else None
    with_metrics = set(c.filter(pl.col("status") != "no_metrics")["file"].to_list()) if c.height else set()
    payloads = _payloads(trace, opened_all)
    out = []
    dynamo_keys = set()
    for r in open_rows.iter_rows(named=True):
        dynamo_keys.add((r["file"], r["compile_id"], r["occurrence"] or 1))
        mine = ev.filter((pl.col("file") == r["file"]) & (pl.col("compile_id") == r["compile_id"]) & (pl.col("lineno") >= (r["lineno"] or 0)))
        started = mine["ts"].min() if mine.height else None
        opened = opened_all.filter(
            (pl.col("file") == r["file"]) & (pl.col("compile_id") == r["compile_id"])
            & (pl.col("occurrence").fill_null(1) == (r["occurrence"] or 1))
        ).sort("lineno")
        if opened.is_empty() and r["file"] not in with_metrics:
            # a log whose torch writes no compilation_metrics at all (older releases) says nothing
            # of whether this compile ended: not called unfinished without an open span
            continue
        others = _others(c, r, end)
        out.append(_entry(trace, r, None, opened, started, end, where_end, others, payloads))
    # compiles without a dynamo_start of their own: open spans outside an open Dynamo compile
    groups = opened_all.with_columns(pl.col("occurrence").fill_null(1)).group_by("file", "rank", "compile_id", "occurrence")
    for (file, rank, cid, occ), opened in groups:
        if (file, cid, occ) in dynamo_keys:
            continue
        opened = opened.sort("lineno")
        names = opened["name"].to_list()
        part = next((label for span, label in _SPAN_PARTS if span in names), None)
        if part is None:
            part = "compiled autograd" if str(cid).startswith("!") else "spans"
        fwd = c.filter((pl.col("file") == file) & (pl.col("compile_id") == cid)) if c.height else c
        fwd = fwd.filter(pl.col("occurrence").fill_null(1) == occ) if fwd.height > 1 else fwd
        if fwd.height and fwd["metrics_lineno"][0] is not None:
            # spans begun before the compile's metrics are its own wrappers (torch logs the
            # metrics inside its outermost span, which ends just after): the compile ended
            opened = opened.filter(pl.col("lineno") > fwd["metrics_lineno"][0])
            if opened.is_empty():
                continue
            names = opened["name"].to_list()
            part = next((label for span, label in _SPAN_PARTS if span in names), part)
        if part == "spans" and all(n.startswith(RUN_TIME_SPANS) for n in names):
            # a compiled graph's first call benchmarking its kernels' configs (Triton's
            # CachingAutotuner, at run time): the rank was running the compile, not compiling
            continue
        base = fwd.row(0, named=True) if fwd.height else {
            "rank": rank, "compile_id": cid, "occurrence": occ, "function": None, "filename": None, "line": None,
            "pid": None, "file": file, "lineno": None,
        }
        base = {**base, "lineno": int(opened["lineno"].min())}
        others = _span_others(spans, file, cid, names[0], base.get("function"), c, end)
        out.append(_entry(trace, base, part, opened, opened["start"].min(), end, where_end, others, payloads))
    out.sort(key=lambda u: (not u["behind"], -(u["running_s"] or 0.0), u["rank"] if u["rank"] is not None else -1, sort_key(u["compile_id"])))
    return out


def _payloads(trace: Trace, opened: pl.DataFrame) -> dict[tuple[str, int], str]:
    """(file, lineno) -> the chromium payload of the open autotuning spans (their args say
    what is autotuned)."""
    tune = opened.filter(pl.col("name").str.ends_with("_autotuning") | pl.col("name").str.ends_with("_precompiling"))
    if tune.is_empty():
        return {}
    ev = trace.index_events()
    hit = ev.join(tune.select("file", "lineno"), on=["file", "lineno"], how="semi")
    if "payload_start" in hit.columns:  # events of a lazy parse: read just these payloads
        from parsers.torch_trace import hydrate

        hit, _ = hydrate(hit)
    return {(f, n): p for f, n, p in hit.select("file", "lineno", "payload").iter_rows() if p}


def _autotuning(
    opened: pl.DataFrame, payloads: dict[tuple[str, int], str], spans: pl.DataFrame, end: Any
) -> dict[str, Any] | None:
    """The innermost open autotuning span: the op and the shapes its args name, and how far
    it got (`_progress`)."""
    tune = opened.filter(pl.col("name").str.ends_with("_template_autotuning") | pl.col("name").str.ends_with("_template_precompiling"))
    if tune.is_empty():
        return None
    last = tune.row(-1, named=True)
    op = last["name"].rsplit("_template_", 1)[0]
    shapes = None
    try:
        args = json.loads(payloads.get((last["file"], last["lineno"])) or "{}").get("args") or {}
        shapes = args.get("autotune_shape") or args.get("autotune_shape_hinted")
    except (ValueError, AttributeError):
        shapes = None
    what = "precompiling" if last["name"].endswith("_precompiling") else "autotuning"
    return {"op": op, "shapes": shapes if isinstance(shapes, str) else None, "what": what,
            **_progress(last, op, what, opened, spans, end)}


def _progress(last: dict[str, Any], op: str, what: str, opened: pl.DataFrame, spans: pl.DataFrame, end: Any) -> dict[str, Any]:
    """How far the open autotuning got, as the trace shows it: open_s (its open span's time up
    to the capture's last timestamp), precompile_s (its choices' precompiling span, ended
    just before it began; None while precompiling or where none was logged), and done (the
    autotunings of the same compile part that ended before it: [{op, seconds}], in order).
    Which choice it was benchmarking is not in the trace (no record per choice)."""
    start = last["start"]
    open_s = round((end - start).total_seconds(), 3) if start is not None and end is not None else None
    top = opened["start"].min() if opened.height else None  # where this compile part began
    mine = spans.filter(
        (pl.col("file") == last["file"]) & (pl.col("compile_id") == last["compile_id"])
        & pl.col("duration_s").is_not_null() & (pl.col("lineno") < last["lineno"])
        & (pl.col("start") >= top if top is not None else pl.lit(True))
    )
    precompile_s = None
    if what == "autotuning":
        pre = mine.filter(pl.col("name") == f"{op}_template_precompiling").sort("lineno")
        if pre.height:
            precompile_s = round(float(pre["duration_s"][-1]), 3)
    done = mine.filter(pl.col("name").str.ends_with("_template_autotuning")).sort("lineno")
    return {
        "open_s": open_s, "precompile_s": precompile_s,
        "done": [{"op": n.rsplit("_template_", 1)[0], "seconds": round(float(d), 3)} for n, d in done.select("name", "duration_s").iter_rows()],
    }


def _entry(
    trace: Trace, r: dict[str, Any], part: str | None, opened: pl.DataFrame, started: Any, end: Any,
    where_end: dict[str, Any] | None, others: list[dict[str, Any]], payloads: dict[tuple[str, int], str],
) -> dict[str, Any]:
    names = opened["name"].to_list()
    if opened.height and opened["start"].min() is not None:
        started = min(started, opened["start"].min()) if started is not None else opened["start"].min()
    running = (end - started).total_seconds() if started is not None and end is not None else None
    known = [label for span, label in _PHASES if span in names]
    innermost = names[-1] if names else None
    phase = known[-1] if known else None  # the innermost phase a person knows
    if phase in ("code_gen", "waiting for kernel compiles"):
        phase = f"inductor {phase}"
    tune = _autotuning(opened, payloads, trace.spans, end)
    if tune is not None:
        shapes = f"({tune['shapes']})" if tune["shapes"] else ""
        phase = f"{tune['what']} {tune['op']}{shapes}" + (f" ({phase})" if phase else "")
    return {
        "rank": r["rank"], "compile_id": r["compile_id"], "occurrence": r["occurrence"], "part": part,
        "function": r["function"], "filename": r["filename"], "line": r["line"],
        "code": describe(trace, rank=r["rank"], function=r["function"], filename=r["filename"], line=r["line"],
                         compile_ids=[r["compile_id"]]),
        "phase": phase, "autotuning": tune, "innermost_span": innermost, "open_spans": names,
        "started": started.isoformat() if started is not None else None,
        "running_s": round(running, 3) if running is not None else None,
        "last_line_at": end.isoformat() if end is not None else None,
        "last_line_from": where_end,
        "others": others, "behind": bool(others),
        "pid": r.get("pid"), "file": r["file"], "lineno": r["lineno"],
    }


def _span_others(
    spans: pl.DataFrame, file: str, cid: str, top: str, function: str | None, c: pl.DataFrame, end: Any
) -> list[dict[str, Any]]:
    """The other files (ranks) where the same compile's same top span ended, with how long
    before the capture's last timestamp."""
    done = spans.filter(
        (pl.col("file") != file) & (pl.col("compile_id") == cid) & (pl.col("name") == top) & pl.col("duration_s").is_not_null()
    )
    if function is not None and c.height:
        same = c.filter((pl.col("compile_id") == cid) & (pl.col("function") == function))["file"].to_list()
        done = done.filter(pl.col("file").is_in(same))
    out = []
    for o in done.iter_rows(named=True):
        fin = None
        if o["start"] is not None and end is not None:
            fin = round(end.timestamp() - (o["start"].timestamp() + o["duration_s"]), 3)
        out.append({"rank": o["rank"], "finished_before_s": fin})
    return sorted(out, key=lambda o: (o["rank"] is None, o["rank"]))


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
