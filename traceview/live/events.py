"""What the records that just landed mean: one event per compile started or finished,
recompile (with its cause), graph break (with the user's line), failure (with its category)
and crash, in the analyzers' words; what each busy rank is compiling now, at the log's figure
(busy_line, quiet_line: traceview.live.watch adds its own clock only while the job is alive);
and whether what landed may end the job (Deriver.end_seen: the watch then judges it).

The events of a chunk are derived from a Trace over the compiles it touched (each frame's every
compile: traceview.live.tables), by the analyzers every other view uses (the compiles table,
analyze.storms, analyze.hotspots, analyze.failures, analyze.crashes, analyze.unfinished). Each
event has a key; an event already said is not said again when a later chunk derives it once
more (a compile's row is derived again when its metrics land).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from parsers.code_location import brief
from parsers.compile_ids import bracketed, compile_number, sort_key
from parsers.compile_ids import label as id_label
from parsers.stops import stops_from_text
from traceview.analyze.code_objects import describe
from traceview.analyze.crashes import crash_findings
from traceview.analyze.failures import categorize, failures, headline, next_step
from traceview.analyze.findings import code_label, compile_outcome, ranks_text
from traceview.analyze.hotspots import graph_break_rows
from traceview.analyze.storms import recompile_storms
from traceview.analyze.unfinished import unfinished_compiles
from traceview.analyze.wording import seconds_text
from traceview.output.summary import clean_line
from traceview.trace import Trace

KINDS = ("compile_start", "compile_end", "backward_end", "recompile", "graph_break", "failure", "crash", "busy", "quiet", "ended")

# what in a text log may end the job (with parsers.stops' launcher and scheduler lines): a fatal
# signal, a KeyboardInterrupt, a launcher's SignalException; an uncaught traceback (one the
# program caught and printed ends nothing). traceview.live.watch then judges the whole capture
# as `summary` does
_STOP_MARKS = ("Fatal Python error: ", "KeyboardInterrupt", "SignalException")
_TRACEBACK = "Traceback (most recent call last):"


@dataclass
class Event:
    """One thing that happened, as a line (`text`, without the rank) and as data (`data`, the
    JSON line's fields besides kind, rank and compile_id)."""

    kind: str
    rank: int | None
    compile_id: str | None
    text: str
    file: str | None = None
    lineno: int | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else ""
        return f"{who:<8}{self.text}" if who else self.text

    def json(self) -> dict[str, Any]:
        return {"event": self.kind, "rank": self.rank, "compile_id": self.compile_id, "text": self.text,
                "file": self.file, "lineno": self.lineno, **self.data}


def _where(filename: Any, line: Any = None) -> str:
    """A place as the summary writes it (parsers.code_location.brief)."""
    if not filename:
        return "?"
    return f"{brief(filename)}:{line}" if line is not None else brief(filename)


def _code(row: dict[str, Any]) -> str:
    return clean_line(code_label(row, _where))


def _has_backward(row: dict[str, Any]) -> bool:
    """Whether a compile logged a backward of its own worth a figure (bwd_compilation_metrics,
    not 0.00s)."""
    return seconds_text(row.get("bwd_compile_time_s") or 0.0) != seconds_text(0.0)


def _cid(row: dict[str, Any]) -> str:
    return bracketed(row["compile_id"], row.get("occurrence"), row.get("attempts"))


@dataclass
class Deriver:
    """Turns Traces of what just landed into events, each said once."""

    seen: set[tuple] = field(default_factory=set)
    open_compiles: set[tuple] = field(default_factory=set)  # (file, compile id, occurrence) begun, not ended
    # (file, compile id) with a chromium span begun and not ended: a part compiled without a
    # dynamo_start of its own (a backward compiled lazily) is open while its spans are
    open_spans: set[tuple] = field(default_factory=set)
    # lines that may end the job landed: "stop" (a launcher's or scheduler's stop lines, a
    # crash), "traceback" (a traceback, a fatal signal: maybe one the program caught); the
    # watch judges the whole capture and clears it
    end_seen: str | None = None
    _pending_keys: list[tuple] = field(default_factory=list)  # said by the events being derived

    def events(self, trace: Trace, *, quiet: bool = False) -> list[Event]:
        """The events `trace` holds that were not said yet (`quiet`: mark them said, return none:
        what was there before the watch began)."""
        out: list[Event] = []
        self._spans(trace)
        out += self._compiles(trace, quiet=quiet)
        out += self._recompiles(trace)
        out += self._graph_breaks(trace)
        out += self._failures(trace)
        out += self._crashes(trace)
        if not quiet:
            seen = "stop" if any(e.kind == "crash" for e in out) else _may_end(trace)
            if seen is not None and self.end_seen != "stop":
                self.end_seen = seen
        # in the order they were logged (per file: a chunk's ranks each in turn)
        order = {k: i for i, k in enumerate(KINDS)}
        out.sort(key=lambda e: (e.file or "", e.lineno if e.lineno is not None else 0, order[e.kind]))
        for e in out:
            e.data.pop("_key", None)
        self.seen.update(self._pending_keys)
        self._pending_keys = []
        return [] if quiet else out

    def forget(self, file: str, rank: int | None) -> None:
        """A log that starts over (the job started again): its events may be said again."""
        self.seen = {k for k in self.seen if k[1] != file and not (k[0] in ("recompile", "break", "failure") and k[1] == rank)}
        self.open_compiles = {k for k in self.open_compiles if k[0] != file}
        self.open_spans = {k for k in self.open_spans if k[0] != file}

    def open_ids(self) -> set[str | None]:
        """The compile ids begun and not ended (a Dynamo compile, or a part of one)."""
        return {cid for _file, cid, _occ in self.open_compiles} | {cid for _file, cid in self.open_spans}

    def _spans(self, trace: Trace) -> None:
        """Which compiles `trace` touched have spans open (a Trace over a chunk holds each
        touched compile's every record: what it says of them is the whole story)."""
        sp = trace.spans
        if sp.is_empty():
            return
        sp = sp.filter(pl.col("compile_id").is_not_null())
        for k in sp.select("file", "compile_id").unique().iter_rows():
            self.open_spans.discard(k)
        opened = sp.filter(pl.col("duration_s").is_null() & (pl.col("ph") == "B"))
        if opened.is_empty():
            return
        # torch logs a compile's compilation_metrics inside its outermost `dynamo` span, which
        # ends just after: a look between the two finds the compile ended, not open
        c = trace.compiles
        ended = c.filter(pl.col("status") != "no_metrics").select("file", "compile_id") if c.height else None
        per = opened.group_by("file", "compile_id").agg((pl.col("name") != "dynamo").any().alias("inner"))
        if ended is not None and ended.height:
            done = ended.unique().with_columns(pl.lit(True).alias("ended"))
            per = per.join(done, on=["file", "compile_id"], how="left")
            per = per.filter(pl.col("inner") | pl.col("ended").is_null())
        self.open_spans.update(per.select("file", "compile_id").iter_rows())

    def _new(self, key: tuple) -> bool:
        if key in self.seen or key in self._pending_keys:
            return False
        self._pending_keys.append(key)
        return True

    # ------------------------------------------------------------------------------- compiles
    def _compiles(self, trace: Trace, *, quiet: bool = False) -> list[Event]:
        out = []
        c = trace.compiles
        if c.is_empty():
            return out
        for r in c.sort("file", "lineno").iter_rows(named=True):
            k = (r["file"], r["compile_id"], r["occurrence"])
            if r["frame_id"] is None and r.get("compile_kind") is None:
                continue  # a compiled-autograd graph: said with its compile
            start_key, end_key, bwd_key = ("start", *k), ("end", *k), ("backward", *k)
            if quiet:  # what was there before the watch: only the keys its lines would have
                self._new(start_key)
                if r["status"] == "no_metrics":
                    self.open_compiles.add(k)
                    continue
                self.open_compiles.discard(k)
                if self._new(end_key) and compile_outcome(r) in ("failed", "eager"):
                    self._new(("failure", r["rank"], r["compile_id"]))
                if _has_backward(r):
                    self._new(bwd_key)
                continue
            if start_key in self.seen and end_key in self.seen and (not _has_backward(r) or bwd_key in self.seen):
                continue  # said whole before (a chunk touching its frame derives it again)
            r["code"] = describe(trace, rank=r["rank"], function=r["function"], filename=r["filename"], line=r["line"],
                                 compile_ids=[r["compile_id"]])
            if self._new(start_key):
                called = ""  # the user's line that called it (said by code_label for code not the user's)
                if r.get("call_filename") and (r["code"].get("owner") == "user" or not r.get("function")):
                    called = f", called at {_where(r['call_filename'], r['call_line'])}"
                # a frame's name is in its dynamo_start stack, except a resume function's
                # (named by its metrics, when it ends)
                what = f" {_code(r)}" if r.get("function") else " a frame (its name comes with its metrics)"
                out.append(self._ev("compile_start", r, f"{_cid(r)} compiling{what}{called}", start_key,
                                    function=r["function"], filename=r["filename"], line=r["line"]))
            if r["status"] == "no_metrics":
                self.open_compiles.add(k)
                continue
            self.open_compiles.discard(k)
            with_backward = _has_backward(r)
            if with_backward and end_key in self.seen and self._new(bwd_key):
                # a backward compiled lazily at the first backward call, after the forward's
                # metrics were said: the compile's total is now the summary's (forward + backward)
                fwd, bwd = r.get("compile_time_s") or 0.0, r["bwd_compile_time_s"]
                text = (f"{_cid(r)} backward compiled in {seconds_text(bwd)}: {_code(r)}; "
                        f"{seconds_text(r.get('total_time_s'))} in all (forward {seconds_text(fwd)} + backward {seconds_text(bwd)})")
                out.append(self._ev("backward_end", r, text, bwd_key, seconds=r.get("total_time_s"), forward_s=fwd,
                                    backward_s=bwd, function=r["function"], filename=r["filename"], line=r["line"]))
            if not self._new(end_key):
                continue
            if with_backward:
                self._new(bwd_key)  # said with its end
            outcome = compile_outcome(r)
            secs = r.get("total_time_s")
            took = f" in {seconds_text(secs)}" if secs is not None else ""
            if with_backward and secs is not None:
                # said at once with its backward (the log was read after both): the parts labelled
                took = f" in {seconds_text(secs)} (forward {seconds_text(r.get('compile_time_s') or 0.0)} + backward {seconds_text(r['bwd_compile_time_s'])})"
            data: dict[str, Any] = {"outcome": outcome, "seconds": secs, "function": r["function"],
                                    "filename": r["filename"], "line": r["line"]}
            if outcome in ("failed", "eager"):
                self._new(("failure", r["rank"], r["compile_id"]))  # a text log beside says it again
                cat = categorize(r.get("fail_type"), r.get("fail_reason"))
                what = "fell back to eager" if outcome == "eager" else "failed"
                text = f"{_cid(r)} {what}{took}: {cat}: {clean_line(headline(r.get('fail_reason'), 160))}"
                data.update(category=cat, next_step=next_step(cat, r.get("fail_type"), r.get("fail_reason")))
            else:
                # a restart's id is the summary's ([0/0_1]), said with the id its start and
                # break were said with ([0/0]: torch logs attempt 0 under it)
                restarted = f"compiled (restarted after the graph break of {bracketed(r['compile_id'], r.get('occurrence'))})" if id_label(r["compile_id"], r.get("occurrence"), r.get("attempts")) != r["compile_id"] else "compiled (restarted after a graph break)"
                said = {"ok": "compiled", "restarted": restarted, "empty": "nothing to compile (empty graph)"}
                text = f"{_cid(r)} {said.get(outcome, outcome)}{took}: {_code(r)}"
            out.append(self._ev("compile_end", r, text, end_key, **data))
        return out

    # ------------------------------------------------------------------------------ recompiles
    def _recompiles(self, trace: Trace) -> list[Event]:
        out = []
        if trace.compiles.is_empty() and trace.log_records.is_empty():
            return out
        for s in recompile_storms(trace):
            for cause in s["causes"]:
                for cid in cause["compile_ids"]:
                    if not cid or (compile_number(cid) or 0) == 0:
                        continue
                    key = ("recompile", s["rank"], s.get("epoch"), cid)
                    if not self._new(key):
                        continue
                    row = {**s, "compile_id": cid}
                    text = f"{bracketed(cid)} recompile of {_code(row)}: {clean_line(cause['text'])}"
                    out.append(Event("recompile", s["rank"], cid, text, cause.get("file"), cause.get("lineno"),
                                     {"_key": key, "cause": cause["text"], "cause_kind": cause["kind"],
                                      "expected": cause["expected"], "fix": cause["fix"], "certainty": cause["certainty"],
                                      "function": s["function"], "filename": s["filename"], "line": s["line"]}))
        return out

    # ---------------------------------------------------------------------------- graph breaks
    def _graph_breaks(self, trace: Trace) -> list[Event]:
        out = []
        if trace.graph_breaks.is_empty() and trace.compiles.is_empty():
            return out
        rows = graph_break_rows(trace)
        for r in rows.sort("file", "lineno").iter_rows(named=True):
            # by what the break is, not where it was read: a trace and a text log beside it
            # say the same break
            key = ("break", r["rank"], r["compile_id"], r["filename"], r["line"])
            if not self._new(key) or r.get("origin") == "failure":
                continue  # a failure's break is said with the failure
            at = _where(r["filename"], r["line"]) if r.get("filename") else "?"
            frame = f" in {r['frame_function']} ({_where(r['frame_filename'], r['frame_line'])})" if r.get("frame_function") else ""
            skipped = "; the whole frame runs eagerly" if r.get("frame_skipped") else ""
            reason = clean_line(r.get("reason") or headline(r.get("reason_line"), 160))
            cid = bracketed(r["compile_id"], r.get("occurrence")) if r.get("compile_id") else "[?]"
            out.append(Event("graph_break", r["rank"], r["compile_id"], f"{cid} graph break at {at}{frame}: {reason}{skipped}",
                             r["file"], r["lineno"],
                             {"_key": key, "user_filename": r["filename"], "user_line": r["line"], "reason": r.get("reason"),
                              "gb_id": r.get("gb_id"), "frame_skipped": r.get("frame_skipped")}))
        return out

    # -------------------------------------------------------------------- failures, crashes
    def _failures(self, trace: Trace) -> list[Event]:
        """Failures a compile's end does not say: a text log's (no trace compile behind them)."""
        out = []
        if trace.log_records.is_empty() and trace.other_lines.is_empty():
            return out
        traced = set(trace.compiles.select("file").unique()["file"].to_list()) if not trace.compiles.is_empty() else set()
        f = failures(trace)
        for r in f.iter_rows(named=True):
            if r["file"] in traced:
                continue
            key = ("failure", r["rank"], r["compile_id"]) if r.get("compile_id") else ("failure", r["file"], r["lineno"])
            if not self._new(key):
                continue
            cid = f"{bracketed(r['compile_id'], r.get('occurrence'), r.get('attempts'))} " if r.get("compile_id") else ""
            text = f"{cid}failure: {r['category']}: {clean_line(r.get('headline') or '')}"
            out.append(Event("failure", r["rank"], r.get("compile_id"), text, r["file"], r["lineno"],
                             {"_key": key, "category": r["category"], "next_step": r["next_step"], "function": r.get("function"),
                              "filename": r.get("filename"), "line": r.get("line")}))
        return out

    def _crashes(self, trace: Trace) -> list[Event]:
        out = []
        if trace.other_lines.is_empty():
            return out
        for c in crash_findings(trace):
            key = ("crash", c.get("file"), c.get("lineno"))
            if not self._new(key):
                continue
            what = clean_line(c.get("headline") or c.get("exception") or c.get("category") or "crash")
            at = f" at {_where(c['filename'], c.get('line'))}" if c.get("filename") else ""
            out.append(Event("crash", c.get("rank"), c.get("compile_id"), f"crash{at}: {what}", c.get("file"), c.get("lineno"),
                             {"_key": key, "category": c.get("category"), "next_step": c.get("next_step")}))
        return out

    def _ev(self, kind: str, r: dict[str, Any], text: str, key: tuple, **data: Any) -> Event:
        # a compile starts at its first record, ends at its metrics
        lineno = r["lineno"] if kind == "compile_start" else (r.get("metrics_lineno") or r["lineno"])
        return Event(kind, r["rank"], r["compile_id"], text, r["file"], lineno, {"_key": key, **data})


def _may_end(trace: Trace) -> str | None:
    """Whether what landed holds a line that may end the job: "stop" (a launcher's or a
    scheduler's stop lines: parsers.stops), "traceback" (a traceback, a fatal signal, a
    KeyboardInterrupt: uncaught, or caught and printed by the program), else None."""
    recs, other = trace.log_records, trace.other_lines
    if recs.is_empty() and other.is_empty():
        return None
    if not stops_from_text(recs, other).is_empty():
        return "stop"
    if other.is_empty():
        return None
    if other["text"].str.contains_any(list(_STOP_MARKS)).any():
        return "stop"
    return "traceback" if other["text"].str.contains(_TRACEBACK, literal=True).any() else None


def busy(trace: Trace) -> list[Event]:
    """What each rank with a compile running is doing and for how long (analyze.unfinished on
    the open compiles: `seconds`, the time up to the capture's last timestamp, the summary's
    figure); busy_line and quiet_line say it at a later time."""
    out = []
    for u in unfinished_compiles(trace):
        where = f" in {u['phase']}" if u.get("phase") else ""
        inner = f" ({u['innermost_span']})" if u.get("innermost_span") and u["innermost_span"] != u.get("phase") else ""
        behind = ""
        done = [o for o in u.get("others") or [] if o.get("finished_before_s") is not None]
        if u.get("behind") and done:
            behind = f"; {ranks_text([o['rank'] for o in done]).strip()} finished it: likely behind the others"
        seconds = u.get("running_s") or 0.0
        part = f"{u['part']} of " if u.get("part") in ("backward", "compiled autograd") else ""
        e = Event("busy", u["rank"], u["compile_id"], "", u["file"], u["lineno"],
                  {"part": u.get("part"), "phase": u.get("phase"), "innermost_span": u.get("innermost_span"), "running_s": round(seconds, 3),
                   "seconds": round(seconds, 3), "behind": u.get("behind"),
                   "_cid": f"{bracketed(u['compile_id'], u.get('occurrence'))}", "_where": f"{where}{inner}",
                   "_what": f": {part}{_code(u)}{behind}", "_end": u.get("last_line_at")})
        e.text = busy_line(e, seconds)
        out.append(e)
    out.sort(key=lambda e: (e.rank if e.rank is not None else -1, sort_key(e.compile_id)))
    return out


def busy_line(e: Event, running_s: float) -> str:
    """A busy event's line for a compile that has been running `running_s`."""
    d = e.data
    return f"{d['_cid']} busy {seconds_text(running_s)}{d['_where']}{d['_what']}"


def quiet_line(e: Event, no_record_s: float) -> str:
    """A busy event's line once no followed file has grown for `no_record_s`: the compile's
    time up to the last record (its `seconds`), and how long nothing was written since; not
    called running (the job may compile silently, hang or be dead: the log cannot tell)."""
    d = e.data
    where = d["_where"] or " compiling"
    return (f"{d['_cid']}{where} for {seconds_text(d['seconds'])} up to the last record, then no record for "
            f"{wall_text(no_record_s)}{d['_what']}")


def wall_text(seconds: float) -> str:
    """A time on the watcher's own clock (how long nothing was written): whole seconds, minutes
    or hours; never a log's figure (those are seconds_text's)."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
