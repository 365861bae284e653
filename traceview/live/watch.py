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
    from traceview.ingest.loading import LoadOptions
    from traceview.live.events import Deriver, Event
    from traceview.live.tables import LiveTables

NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "fuse.sshfs", "9p", "ceph", "fuse.glusterfs")
BUSY_AFTER_S = 5.0
BUSY_EVERY_S = 15.0
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
    _busy_at: float = 0.0  # when _busy was derived
    stepped_at: float = 0.0  # monotonic time of the last step
    _status_shown: bool = False
    _said_digest: bool = False

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
        already: they were there), the files watched and the compiles running."""
        self.tail.scan()
        ends = {path: end for path, end in self.tail.backlog().items() if end > 0}
        if ends:
            try:
                opts, inputs = self._backlog_inputs(ends)
                from traceview.output.findings_document import findings_document

                data, trace = findings_document(opts, inputs)
                if digest:
                    self._digest(orjson.loads(data), files=len(ends))
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
            self.last_line_at = time.monotonic()
            self.deriver.events(trace, quiet=True)
        elif digest:
            self._digest(None, files=0)
        if digest and ends and not self.json_lines:
            self._watching()

    def _start_by_chunks(self, *, digest: bool) -> None:
        """Read what is there chunk by chunk, as what lands later is read (when the loading
        path could not read it: a log rewritten meanwhile)."""
        for chunks in self.tail.drain():
            self.tables.add(chunks)
            if chunks:
                self.last_line_at = time.monotonic()
        trace = self.tables.trace()
        self.deriver.events(trace, quiet=True)
        if digest:
            files = len(self.tables.files())
            if not self._said_digest:  # (said already when the tables could not be opened after it)
                from traceview.output.report import build_report

                trace.inputs = self._inputs()
                self._digest(build_report(trace) if files else None, files=files)
            if files and not self.json_lines:
                self._watching()

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
        try:
            self._show_busy(now)
        except Exception as exc:
            if debugging():
                raise
            self._busy, self._busy_stale = [], False
            self._note(f"could not tell what the busy ranks do ({type(exc).__name__}: {exc})")
        return events

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
            self._write(orjson.dumps({
                "event": "digest", "files": files, "compiles": report["compiles"], "ranks": report["ranks"],
                "findings": [{"kind": f.kind, "severity": f.severity, "claim": f.claim, "key": f.key} for f in findings],
                "finding_counts": counts, "text": head,
            }, default=str).decode())
            return
        self._write(head)

    def _watching(self) -> None:
        """The digest's last line: the files watched, the compiles running."""
        files = len(self.tables.files())
        running = len(self.deriver.open_compiles)
        self._write(f"watching {files} log file{'s' if files != 1 else ''}"
                    + (f"; {running} compile{'s' if running != 1 else ''} running" if running else "")
                    + "; Ctrl-C ends")

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
        if self.json_lines:
            self._write(orjson.dumps(e.json(), default=str).decode())
        else:
            self._write(f"{time.strftime('%H:%M:%S')} {e.line()}")

    def _show_busy(self, now: float) -> None:
        if not self.deriver.open_compiles:
            self._busy = []
            self._clear_status()
            return
        if self._busy_stale:
            # the open compiles' ids on every rank: the ranks that finished them (a rank behind
            # the others) and the job's newest line, as `summary` sees them
            ids: set[str | None] = {cid for _file, cid, _occ in self.deriver.open_compiles}
            opened = {path: set(ids) for path in self.tables.traces}
            from traceview.live.events import busy

            self._busy = busy(self.tables.trace(opened))
            self._busy_at = now
            self._busy_stale = False
        since = now - self.last_line_at
        rows = [b for b in self._busy if (b.data["running_s"] or 0.0) + (now - self._busy_at) >= self.busy_after_s]
        if not rows:
            self._clear_status()
            return
        lines = [(b, b.data["running_s"] + (now - self._busy_at)) for b in rows]
        if self.status_line:
            status = " | ".join(f"{'rank ' + str(b.rank) + ' ' if b.rank is not None else ''}[{b.compile_id}] "
                                f"{'in ' + b.data['phase'] if b.data.get('phase') else 'compiling'} for {running:.0f}s"
                                for b, running in lines)
            width = _columns(self.out)
            status = printable(f"busy: {status}")[: max(20, width - 1)]
            self.out.write("\r\x1b[2K" + status)
            self.out.flush()
            self._status_shown = True
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

    def _clear_status(self) -> None:
        if self._status_shown:
            self.out.write("\r\x1b[2K")
            self._status_shown = False

    def _write(self, line: str) -> None:
        if self.prefix:
            line = "\n".join(self.prefix + x for x in line.split("\n"))
        self.out.write(line + "\n")
        self.out.flush()



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
