"""`traceview watch PATH… [TEXT_LOG…]`: a job's compiles as they happen.

It starts with a digest of what is already there (the summary's own head, from the report's
typed findings: traceview.output.report). What is there (the backlog: each file's complete
records, traceview.live.tail.Tail.backlog) is read as `summary` reads it, by the loading path
(traceview.ingest: its worker processes, the parse cache and the cached findings document), and
its tables are handed to the live tables (traceview.live.tables.LiveTables.seed); the watch
goes on from where that parse ended. Then it prints one line per event as it lands (traceview.live.events), and, while a
compile runs longer than `busy_after_s`, what each busy rank is compiling and for how long: on
a terminal one status line kept at the bottom and rewritten, elsewhere a `busy` line every
`busy_every_s`. `--json`: one JSON object per line (the digest as `{"event": "digest", …}`).

A compile's time is the log's (the summary's: up to the capture's last timestamp); the
watcher's clock adds to it only while a followed file grew within QUIET_S. Silent longer, a
compile is a `quiet` line ("no record for N s"), never running; once the capture shows the job
ended (a stop from outside, a crash: judged as `summary` judges them), an `ended` event says
how, with the summary's own findings, and no compile is called running (docs/watch.md,
"Whose clock").

Files are watched with watchfiles (inotify and its peers) and, on a network file system
(NFS, Lustre, GPFS, CIFS, sshfs: another host's writes raise no local events) or when asked
(`poll=True`), by polling: the followed files' sizes are looked at every 0.3 s (not
watchfiles' polling, which compares modification times in whole seconds). Every second the
followed files are checked all the same, so an event missed costs a second, not the event. Cost grows with the bytes added
(traceview.live.tail, traceview.live.tables). Ctrl-C ends it cleanly, with a last line of
what was seen.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import orjson

from parsers.discover import InputError, Inputs, TraceFile
from traceview.errors import UserError, debugging
from traceview.live.tail import Tail
from traceview.printable import printable

if TYPE_CHECKING:  # (imported when used: polars comes after the backlog's parse workers start)
    from traceview.analyze.finding import Finding
    from traceview.ingest.loading import LoadOptions
    from traceview.live.events import Deriver, Event
    from traceview.live.tables import LiveTables

NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "fuse.sshfs", "9p", "ceph", "fuse.glusterfs")
BUSY_AFTER_S = 5.0
BUSY_EVERY_S = 15.0
# the job is demonstrably alive while a followed file grew within this long: only then does the
# watcher's clock add to a compile's time from the log's clock (docs/watch.md, "Whose clock")
QUIET_S = 10.0
# lines that may end the job (a launcher's stop lines, an uncaught traceback) are judged once
# the logs were quiet this long (the launcher's last lines in), or this long after they landed
END_QUIET_S = 2.0
END_WAIT_S = 5.0
# the findings that say how a job ended, and those said with them (what each rank was inside;
# a collective timeout, which says why the crash behind it happened)
ENDING_KINDS = ("stop", "crash")
ENDED_WITH = ("timeout", "stop", "crash", "unfinished")
POLL_S = 0.4  # how often the files are looked at when polling
# the least time between two looks: writes of many ranks coalesce into one parse (each look
# pays a fixed cost; 48 ranks each writing a record a second would wake it ~50 times a second)
MIN_STEP_S = 0.4


def network_fs(path: str) -> str | None:
    """The file system type of `path` when it is a network one (Linux /proc/mounts)."""
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = "", None
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        mnt = parts[1].replace("\\040", " ")
        if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
            best, kind = mnt, parts[2]
    return kind if kind in NETWORK_FS else None


# what a trace record that may make an event has in its header: a compile's records carry its
# frame id or compiled-autograd id; a frameless compile ends with a compilation_metrics
_EVENT_MARKS = (b'"frame_id"', b'"compiled_autograd_id"', b'"compilation_metrics"')


def makes_events(kind: str, data: bytes) -> bool:
    """Whether new records may make an event (else they can wait: a trace log's runtime
    records); a text log's records are few and all worth a look."""
    return kind != "trace" or any(m in data for m in _EVENT_MARKS)


@dataclass
class Watch:
    """One watch: the inputs, what was read of them, what was said."""

    paths: list[str]
    extra_logs: list[str] = field(default_factory=list)
    out: TextIO = sys.stdout
    json_lines: bool = False
    busy_after_s: float = BUSY_AFTER_S
    busy_every_s: float = BUSY_EVERY_S
    settle_s: float = 1.0
    status_line: bool | None = None  # a rewritten status line (default: on a terminal, without --json)
    prefix: str = ""  # before every line (`traceview run`: among the program's own output)
    tail: Tail = field(init=False)
    _tables: LiveTables | None = field(default=None, init=False, repr=False)
    _deriver: Deriver | None = field(default=None, init=False, repr=False)
    counts: Counter = field(default_factory=Counter)
    last_line_at: float = 0.0  # monotonic time the newest records landed
    _busy: list[Event] = field(default_factory=list)
    _busy_said: float = 0.0
    _busy_stale: bool = True
    stepped_at: float = 0.0  # monotonic time of the last step
    _status_shown: bool = False
    _said_digest: bool = False
    ended: list[Finding] | None = None  # the findings that say the job ended (stop, crash), once it did
    _ended_keys: set[str] = field(default_factory=set)  # those said
    _end_since: float | None = None  # lines that may end the job landed then: judged soon (_check_end)
    _end_calm_until: float = 0.0  # a traceback that ended nothing: the next are judged after this
    _end_backoff: float = END_WAIT_S
    _ended_line: str = ""
    _sections: bool = True  # an `ended` event's text form: the summary's sections under its line
    # the capture's last timestamp (ISO) and when it landed (time.monotonic): where the log's
    # clock hands over to the watcher's
    _clock: tuple[str | None, float] = (None, 0.0)

    def __post_init__(self) -> None:
        self.tail = Tail(list(self.paths), list(self.extra_logs), settle_s=self.settle_s, wanted=makes_events)
        if self.status_line is None:
            self.status_line = not self.json_lines and bool(getattr(self.out, "isatty", lambda: False)())

    @property
    def tables(self) -> LiveTables:
        """Everything read so far (created on first use: it imports polars)."""
        if self._tables is None:
            from traceview.live.tables import LiveTables

            self._tables = LiveTables()
        return self._tables

    @property
    def deriver(self) -> Deriver:
        if self._deriver is None:
            from traceview.live.events import Deriver

            self._deriver = Deriver()
        return self._deriver

    # ------------------------------------------------------------------------------ the steps
    def start(self, *, digest: bool = True) -> None:
        """Read what is there (the backlog, with the loading path) and print the digest
        (`digest`): the summary's head first, then, once the backlog's events are known (said
        already: they were there), the files watched and the compiles running. Without the
        digest (`traceview run`: its summary follows), an `ended` event is its line alone."""
        self._sections = digest
        self.tail.scan()
        ends = {path: end for path, end in self.tail.backlog().items() if end > 0}
        if ends:
            try:
                opts, inputs = self._backlog_inputs(ends)
                from traceview.output.findings_document import findings_document

                data, trace = findings_document(opts, inputs)
                report = orjson.loads(data)
                if digest:
                    self._digest(report, files=len(ends))
                if trace is None:  # the findings were cached: the tables are too (memory-mapped)
                    from traceview.ingest.loading import load_trace

                    trace = load_trace(opts, inputs)
            except (InputError, OSError) as exc:  # a log cut or replaced while it was parsed
                if debugging():
                    raise
                self._start_by_chunks(digest=digest)
                self._note(f"the logs changed while they were read ({exc}); read again, chunk by chunk")
                return
            self.tables.seed(trace)
            lines = dict(trace.stats.select("file", "lines").iter_rows())
            for path, end in ends.items():
                self.tail.take(path, end, lines.get(path) or 0)
            # the newest records landed when the files were last written, not when the watch began
            self.last_line_at = self.tail.last_growth() or time.monotonic()
            self.deriver.events(trace, quiet=True)
            self._ended_by(report, say=digest, digest=True)
        elif digest:
            self._digest(None, files=0)
        if digest and ends and not self.json_lines:
            self._watching(report)

    def _start_by_chunks(self, *, digest: bool) -> None:
        """Read what is there chunk by chunk, as what lands later is read (when the loading
        path could not read it: a log rewritten meanwhile)."""
        for chunks in self.tail.drain():
            self.tables.add(chunks)
        self.last_line_at = self.tail.last_growth() or time.monotonic()
        trace = self.tables.trace()
        self.deriver.events(trace, quiet=True)
        if digest:
            files = len(self.tables.files())
            report = None
            if files:
                from traceview.output.report import build_report

                trace.inputs = self._inputs()
                report = build_report(trace)
            if not self._said_digest:  # (said already when the tables could not be opened after it)
                self._digest(report, files=files)
            if report is not None:
                self._ended_by(report, say=True, digest=True)
            if files and not self.json_lines:
                self._watching(report)

    def _backlog_inputs(self, ends: dict[str, int]) -> tuple[LoadOptions, Inputs]:
        """The loading path's options and inputs for the backlog: the followed files, each up
        to `ends` (its complete records). As discovery lists them when it finds the same files
        (then a finished job's parse and findings are `summary`'s, cached alike)."""
        from traceview.ingest.loading import LoadOptions, discover_inputs

        first, *rest = [*self.paths, *self.extra_logs]
        opts = LoadOptions.of(first, logs=rest, prestart=True)
        kinds = {p: self.tail.files[p].kind for p in ends}
        try:
            inputs: Inputs | None = discover_inputs(opts)
        except InputError:
            inputs = None
        if inputs is not None:
            inputs.traces = [t for t in inputs.traces if t.path in ends]
            inputs.text_logs = [p for p in inputs.text_logs if p in ends]
            if {*inputs.trace_paths} != {p for p, k in kinds.items() if k == "trace"} or {*inputs.text_logs} != {
                p for p, k in kinds.items() if k != "trace"
            }:
                inputs = None  # discovery sees them otherwise: as followed
        if inputs is None:
            inputs = self._inputs(only=ends)
        for t in inputs.traces:
            t.size = ends[t.path]
        inputs.limits = {p: n for p, n in ends.items() if not self.tail.files[p].compressed}
        return opts, inputs

    def step(self, *, now: float | None = None, everything: bool = False) -> list[Event]:
        """Read what landed, print its events and the busy ranks; returns the events
        (`everything`: a record being written too, Tail.poll)."""
        now = time.monotonic() if now is None else now
        self.stepped_at = time.monotonic()
        touched: dict[str, set[str | None]] = {}
        for chunks in self.tail.drain(now=now, everything=everything):
            for c in chunks:
                if c.restarted:
                    self.deriver.forget(c.path, c.rank)
            for path, ids in self.tables.add(chunks).items():
                touched.setdefault(path, set()).update(ids)
        events: list[Event] = []
        if touched:
            self.last_line_at = now
            try:
                events = self.deriver.events(self.tables.trace(touched))
            except Exception as exc:  # what one look could not derive costs that look, not the watch
                if debugging():
                    raise
                self._note(f"could not derive the events of {len(touched)} log(s) ({type(exc).__name__}: {exc}); going on")
            self._busy_stale = True
            for e in events:
                self._say(e)
            seen, self.deriver.end_seen = self.deriver.end_seen, None
            if seen == "stop" or (seen is not None and now >= self._end_calm_until):
                self._end_since = now if self._end_since is None else self._end_since
            if self.ended is not None and any(e.kind == "compile_start" for e in events):
                self.ended = None  # a compile began after the end: the job (or a restart of it) runs again
                self._note("a compile began after the job ended: following it as running again")
        try:
            self._check_end(now, everything=everything)
        except Exception as exc:
            if debugging():
                raise
            self._end_since = None
            self._note(f"could not judge how the job ended ({type(exc).__name__}: {exc})")
        try:
            self._show_busy(now)
        except Exception as exc:
            if debugging():
                raise
            self._busy, self._busy_stale = [], False
            self._note(f"could not tell what the busy ranks do ({type(exc).__name__}: {exc})")
        return events

    def quiet_s(self, now: float | None = None) -> float | None:
        """How long no followed file has grown (the watcher's clock; None: no file yet)."""
        grew = self.tail.last_growth()
        if grew is None:
            return None
        return max(0.0, (time.monotonic() if now is None else now) - grew)

    def _check_end(self, now: float, *, everything: bool = False) -> None:
        """Lines that may end the job landed: once the logs were quiet END_QUIET_S (the
        launcher's last lines in), END_WAIT_S after they landed, or at the end (`everything`),
        judge the whole capture as `summary` does and say how the job ended, if it did."""
        if self._end_since is None:
            return
        quiet = self.quiet_s(now) or 0.0
        if not (everything or quiet >= END_QUIET_S or now - self._end_since >= END_WAIT_S):
            return
        self._end_since = None
        if self._ended_by(self._capture_report(), say=True):
            self._end_backoff = END_WAIT_S
        else:  # (a traceback the program caught and printed: the next, a while later)
            self._end_calm_until = now + self._end_backoff
            self._end_backoff = min(self._end_backoff * 2, 300.0)

    def _capture_report(self) -> dict[str, Any]:
        """`summary`'s report of the followed files as they are now: by the loading path (its
        worker processes, the parse cache, the cached findings document: memory bounded as
        `summary`'s), else, when a file changes under it, from the tables read so far."""
        ends = {path: end for path, end in self.tail.backlog().items() if end > 0}
        try:
            opts, inputs = self._backlog_inputs(ends)
            from traceview.output.findings_document import findings_document

            data, _trace = findings_document(opts, inputs)
            return orjson.loads(data)
        except (InputError, OSError):
            if debugging():
                raise
        from traceview.output.report import build_report

        trace = self.tables.trace()
        trace.inputs = self._inputs()
        return build_report(trace)

    def _ended_by(self, report: dict[str, Any], *, say: bool, digest: bool = False) -> bool:
        """The report's findings that say the job ended (a stop, a crash), said (`say`) as the
        summary says them, with what each rank was inside: an `ended` event (each once; with
        the `digest`: the backlog's, said without a time of its own). Whether it ended."""
        from traceview.analyze.finding import findings_of

        findings = findings_of(report)
        ends = [f for f in findings if f.kind in ENDING_KINDS]
        if not ends:
            return False
        self.ended = ends
        new = [f for f in ends if f.key not in self._ended_keys]
        self._ended_keys.update(f.key for f in ends)
        if not new or not say:
            return True
        from traceview.analyze.judge import head_lines
        from traceview.live.events import Event
        from traceview.output.summary import render_sections

        shown = [f for f in findings if f.kind in ENDED_WITH]
        words = head_lines(shown, report)[0].removeprefix("findings: ")  # the head line's words for these
        first = next((e for f in ends for e in f.evidence), None)
        stops = [{k: st.get(k) for k in ("kind", "signal", "target", "by", "at", "ranks")} for st in report.get("stops") or []]
        for st in stops:
            st["ranks"] = [{k: v for k, v in r.items() if k != "file"} for r in st["ranks"] or []]
        self._ended_line = f"the job ended: {words}"
        e = Event("ended", None, None, self._ended_line, first.file if first else None, first.lineno if first else None,
                  {"stops": stops, "findings": [f.to_json() for f in shown],
                   "_block": render_sections(report, shown, width=_width(self.out)) if self._sections else None,
                   "_untimed": digest})
        self._say(e)
        return True

    def finish(self) -> None:
        """The last line: what was seen."""
        self._clear_status()
        said = ", ".join(f"{n} {k}" for k, n in sorted(self.counts.items()))
        if self.json_lines:
            self._write(orjson.dumps({"event": "stopped", "counts": dict(self.counts),
                                      "bytes_parsed": self.tables.bytes_parsed}).decode())
        else:
            self._write(f"stopped: {said or 'no events'}; {self.tables.bytes_parsed / 1e6:.1f} MB read")

    # ------------------------------------------------------------------------------ output
    def _digest(self, report: dict[str, Any] | None, *, files: int) -> None:
        """The summary's head of `report` (None: no logs yet)."""
        self._said_digest = True
        if report is None:
            waiting = ", ".join(self.paths)
            if self.json_lines:
                self._write(orjson.dumps({"event": "digest", "files": 0, "compiles": 0, "text": f"waiting for logs in {waiting}"}).decode())
            else:
                self._write(f"traceview watch: no logs yet in {printable(waiting)}; waiting (Ctrl-C ends)")
            return
        from traceview.analyze.finding import findings_of
        from traceview.output.summary import render_head

        findings = findings_of(report)  # the summary's list: its head is the digest
        head = render_head(report)
        if self.json_lines:
            counts: dict[str, int] = {}
            for f in findings:
                counts[f.kind] = counts.get(f.kind, 0) + 1
            quiet = self.quiet_s()
            ended = any(f.kind in ENDING_KINDS for f in findings)
            self._write(orjson.dumps({
                "event": "digest", "files": files, "compiles": report["compiles"], "ranks": report["ranks"],
                "findings": [{"kind": f.kind, "severity": f.severity, "claim": f.claim, "key": f.key} for f in findings],
                "finding_counts": counts, "text": head,
                # the job: "ended" (a stop or a crash: an `ended` line follows), "quiet" (no file
                # grew for QUIET_S), "alive"; and its compiles begun, not ended
                "state": "ended" if ended else "quiet" if quiet is not None and quiet >= QUIET_S else "alive",
                "unfinished": len(report.get("unfinished_compiles") or []),
            }, default=str).decode())
            return
        self._write(head)

    def _watching(self, report: dict[str, Any] | None) -> None:
        """The digest's last line: the files watched, and the job's state: ended (said above),
        its compiles running, or not ended with no record for a while (docs/watch.md)."""
        files = len(self.tables.files())
        line = f"watching {files} log file{'s' if files != 1 else ''}"
        opened = len((report or {}).get("unfinished_compiles") or []) or len(self.deriver.open_ids())
        state, quiet = self._state()
        if state == "ended":
            line = f"{self._ended_line}; {line}"
        elif opened:
            n = f"{opened} compile{'s' if opened != 1 else ''}"
            if state == "quiet":
                from traceview.live.events import wall_text

                line += f"; {n} not ended, no record for {wall_text(quiet or 0.0)}"
            else:
                line += f"; {n} running"
        self._write(line + "; Ctrl-C ends")

    def _state(self, now: float | None = None) -> tuple[str, float | None]:
        """("ended" | "quiet" | "alive", seconds since a followed file grew)."""
        quiet = self.quiet_s(now)
        if self.ended is not None:
            return "ended", quiet
        return ("quiet" if quiet is not None and quiet >= QUIET_S else "alive"), quiet

    def _inputs(self, only: dict[str, int] | None = None) -> Inputs:
        """What is followed (`only`: these files), as discovery would list it (the digest's
        file counts)."""
        traces, texts = [], []
        for f in self.tail.files.values():
            if only is not None and f.path not in only:
                continue
            if f.kind == "trace":
                size = os.path.getsize(f.path) if os.path.exists(f.path) else 0
                traces.append(TraceFile(f.path, f.rank, "", 0.0, size))
            else:
                texts.append(f.path)
        return Inputs(root=self.paths[0] if self.paths else "", traces=traces, text_logs=texts,
                      stray=sorted(self.tail.stray.items()), runs=1)

    def _note(self, text: str) -> None:
        self._clear_status()
        if self.json_lines:
            self._write(orjson.dumps({"event": "note", "text": text}).decode())
        else:
            self._write(f"traceview: {printable(text)}")

    def _say(self, e: Event) -> None:
        self.counts[e.kind] += 1
        self._clear_status()
        block = e.data.pop("_block", None)  # the summary's sections, after the line (text only)
        # said with the digest: its sections under the summary's head, its line the digest's last
        untimed = e.data.pop("_untimed", False)
        if self.json_lines:
            self._write(orjson.dumps(e.json(), default=str).decode())
        elif untimed:
            self._write(block.rstrip("\n") if block else e.line())
        else:
            self._write(f"{time.strftime('%H:%M:%S')} {e.line()}")
            if block:
                self._write(block.rstrip("\n"))

    def _show_busy(self, now: float) -> None:
        """The open compiles: while the job is alive (a followed file grew within QUIET_S),
        each compile's time from the log's clock (the summary's: its first record to the
        capture's last timestamp) plus the watcher's since the newest records landed; once
        nothing grew for QUIET_S, the log's figure and how long nothing was written ("no record
        for N s"), never "running"; after the job ended (or while lines that may end it are
        judged), nothing: the `ended` event said what each rank was inside."""
        ids = self.deriver.open_ids()
        if not ids or self.ended is not None or self._end_since is not None:
            self._busy = []
            self._clear_status()
            return
        if self._busy_stale:
            # the open compiles' ids on every rank: the ranks that finished them (a rank behind
            # the others), and every text log's newest records: the capture's last timestamp
            # is the one `summary` ends an open compile's time at
            opened = {path: set(ids) for path in self.tables.traces}
            from traceview.live.events import busy

            self._busy = busy(self.tables.trace(opened, newest_text=True))
            self._busy_stale = False
            end = next((b.data["_end"] for b in self._busy if b.data.get("_end")), None)
            if end != self._clock[0]:  # the capture's last timestamp moved: it landed with the newest records
                self._clock = (end, self.last_line_at)
        state, quiet = self._state(now)
        since = max(0.0, now - self.last_line_at)
        if state == "quiet":
            self._show_quiet(now, quiet or 0.0)
            return
        # the log's figure, and the watcher's clock from when the log's last timestamp landed
        # (records without one, a program's own output, keep the job alive, not the log's clock)
        lines = [(b, b.data["seconds"] + max(0.0, now - self._clock[1])) for b in self._busy]
        lines = [(b, running) for b, running in lines if running >= self.busy_after_s]
        if not lines:
            self._clear_status()
            return
        if self.status_line:
            status = " | ".join(f"{'rank ' + str(b.rank) + ' ' if b.rank is not None else ''}[{b.compile_id}] "
                                f"{'in ' + b.data['phase'] if b.data.get('phase') else 'compiling'} for {running:.0f}s"
                                for b, running in lines)
            self._status(f"busy: {status}")
            return
        if now - self._busy_said < self.busy_every_s:
            return
        self._busy_said = now
        from traceview.live.events import Event, busy_line

        for b, running in lines:
            e = Event("busy", b.rank, b.compile_id, busy_line(b, running), b.file, b.lineno,
                      {**{k: v for k, v in b.data.items() if not k.startswith("_")}, "running_s": round(running, 3),
                       "since_last_line_s": round(since, 1)})
            self._say(e)

    def _show_quiet(self, now: float, quiet: float) -> None:
        """The open compiles once nothing was written for QUIET_S: `quiet` lines."""
        from traceview.live.events import Event, quiet_line, wall_text

        if not self._busy:
            self._clear_status()
            return
        if self.status_line:
            status = " | ".join(f"{'rank ' + str(b.rank) + ' ' if b.rank is not None else ''}[{b.compile_id}] "
                                f"{'in ' + b.data['phase'] if b.data.get('phase') else 'compiling'} "
                                f"{b.data['seconds']:.0f}s up to it" for b in self._busy)
            self._status(f"no record for {wall_text(quiet)}: {status}")
            return
        if now - self._busy_said < self.busy_every_s:
            return
        self._busy_said = now
        for b in self._busy:
            data = {k: v for k, v in b.data.items() if not k.startswith("_") and k != "running_s"}
            self._say(Event("quiet", b.rank, b.compile_id, quiet_line(b, quiet), b.file, b.lineno,
                            {**data, "no_record_s": round(quiet, 1)}))

    def _status(self, text: str) -> None:
        """The status line at the bottom of a terminal, rewritten."""
        width = _columns(self.out)
        self.out.write("\r\x1b[2K" + printable(text)[: max(20, width - 1)])
        self.out.flush()
        self._status_shown = True

    def _clear_status(self) -> None:
        if self._status_shown:
            self.out.write("\r\x1b[2K")
            self._status_shown = False

    def _write(self, line: str) -> None:
        if self.prefix:
            line = "\n".join(self.prefix + x for x in line.split("\n"))
        self.out.write(line + "\n")
        self.out.flush()



def _width(out: TextIO) -> int:
    """The width the summary's sections are wrapped to: the terminal's, else the summary's 80."""
    return _columns(out) if bool(getattr(out, "isatty", lambda: False)()) else 80


def _columns(out: TextIO) -> int:
    try:
        return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 100


def _changes(roots: list[str], *, polling: bool, stop: threading.Event, interval_s: float) -> Iterator[bool]:
    """Yields at least every `interval_s` (True: something changed on disk, or unknown)."""
    existing = [r for r in roots if os.path.exists(r)]
    if not existing:
        while not stop.is_set():
            time.sleep(interval_s)
            yield True
        return
    if polling:
        # our own look every POLL_S: Tail.poll compares each file's size, to the byte.
        # watchfiles' polling (notify's PollWatcher, watchfiles 1.3.0) compares modification
        # times in whole seconds: a second append within the same second raised no change
        # and waited for the 1 s look (measured by bench/bench.py --watch)
        while not stop.wait(min(interval_s, POLL_S)):
            yield True
        return
    try:
        import watchfiles
    except ImportError:  # pragma: no cover - a dependency; kept working without it
        watchfiles = None  # type: ignore[assignment]
    if watchfiles is None:
        while not stop.wait(interval_s):
            yield True
        return
    watch_roots = sorted({r if os.path.isdir(r) else os.path.dirname(os.path.abspath(r)) for r in existing})
    for changes in watchfiles.watch(
        *watch_roots, watch_filter=None, debounce=200, step=30, stop_event=stop,
        rust_timeout=int(interval_s * 1000), yield_on_timeout=True, raise_interrupt=True,
    ):
        yield bool(changes)
        if stop.is_set():
            return


def watch(
    paths: list[str],
    *,
    extra_logs: list[str] | None = None,
    json_lines: bool = False,
    poll: bool = False,
    out: TextIO | None = None,
    stop: threading.Event | None = None,
    interval_s: float = 1.0,
    on_step: Callable[[Watch], None] | None = None,
    status_line: bool | None = None,
    digest: bool = True,
    prefix: str = "",
) -> int:
    """Run `traceview watch` until Ctrl-C or `stop` is set; returns the exit code. When `stop`
    is set, what was written up to then is read to its end first (`traceview run`: the
    program has exited, its last records are whole)."""
    for p in [*paths, *(extra_logs or [])]:
        if not os.path.exists(p) and not os.path.isdir(os.path.dirname(os.path.abspath(p)) or "."):
            raise UserError(f"{p}: no such file or directory (nor its parent directory)")
    stop = stop or threading.Event()
    w = Watch(list(paths), list(extra_logs or []), out=out or sys.stdout, json_lines=json_lines,
              status_line=status_line, prefix=prefix)
    polling = poll or any(network_fs(p if os.path.exists(p) else os.path.dirname(os.path.abspath(p))) for p in paths)
    interrupted = threading.Event()
    restore = _catch_interrupts(interrupted)
    try:
        w.start(digest=digest)
        for _changed in _changes(list(paths) + list(extra_logs or []), polling=polling, stop=stop, interval_s=interval_s):
            if stop.is_set() or interrupted.is_set():
                break
            wait = MIN_STEP_S - (time.monotonic() - w.stepped_at)
            if wait > 0 and stop.wait(wait):
                break
            w.step()
            if on_step is not None:
                on_step(w)
        if stop.is_set() and not interrupted.is_set():
            w.step(everything=True)  # the writer is gone: its last lines are all there is
    except KeyboardInterrupt:
        pass
    finally:
        restore()
        w.finish()
    return 0


def _catch_interrupts(flag: threading.Event) -> Callable[[], None]:
    """Ctrl-C, SIGTERM and SIGHUP end the watch even when their KeyboardInterrupt is raised
    where Python only reports it: in a finalizer the garbage collector runs (the backlog's
    tables freed right after the digest; the interrupt was lost, and the watch went on). Each
    also sets `flag`, which the loop looks at every second, and such a report is not printed.
    In the main thread only (where handlers run; `traceview run` watches from another);
    returns what puts the previous handlers back."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum: int, frame: object) -> None:
        flag.set()
        raise KeyboardInterrupt

    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # (a job started with Ctrl-C ignored keeps it so)
            old[sig] = signal.signal(sig, interrupt)
    hook = sys.unraisablehook

    def unraisable(u: Any) -> None:
        if not (flag.is_set() and u.exc_type is KeyboardInterrupt):
            hook(u)

    sys.unraisablehook = unraisable

    def restore() -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        sys.unraisablehook = hook

    return restore
