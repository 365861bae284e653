"""What landed in the inputs since the last look: new complete records of each log.

A `Tail` follows directories (new files appear: rank files of a job that is starting) and
named files. Each `poll` stats the files it knows and reads only the bytes added since the
last one; the cost grows with the bytes added, never with a file's size.

A writer may be caught mid-record. What is handed on is complete:
- a trace log: whole lines, and the last record only once it is whole: its payload lines'
  md5 matches the header's `has_payload` (torch writes a record with one write, so a record
  that does not match yet is being written);
- a text log: whole lines once the file stopped growing for a moment (a logging handler writes
  a message's lines together; a message cut between two polls would be parsed as two), or, in
  a file that never stops growing, every line before the last record's first line.
A record that never completes (a writer killed mid-write) is handed on after `settle_s`
without growth, so the parse sees, counts and skips it, as it does for any damaged record.

A caller may hand on at once only the records it wants (`wanted`: the watch wants a compile's
records, not the runtime ones between compiles); the others wait for a wanted one, a few seconds
or a MB, and go with it: nothing is dropped, only parsed later in one piece.

A file that shrinks or is replaced (another inode) starts over (`Chunk.restarted`). A
compressed log (.gz) is read once, whole: it is a finished log.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from parsers.discover import kind_of, trace_rank, walk
from parsers.glog import TEXT_PREFIX, as_bytes, plain
from parsers.gzipped import is_gzip

_HAS_PAYLOAD = re.compile(rb'"has_payload": ?"([0-9a-f]{32})"')
_TEXT_RECORD = re.compile(as_bytes("^" + plain(TEXT_PREFIX)), re.M)
MAX_READ = 64 << 20  # the most a poll reads of one file (a backlog is handed on in pieces)
BACK_READ = 4 << 20  # read back from a file's end for its last complete record (more if longer)
DEFER_MAX_S = 5.0
DEFER_MAX_BYTES = 1 << 20
TEXT_MAX_HELD = 1 << 20  # a text log that never stops growing hands on lines past this much


@dataclass
class Chunk:
    """Complete records added to one file: `data` starts at byte `byte_offset`, after
    `line_offset` lines. `restarted`: the file was cut or replaced, everything read of it
    before is void (this chunk starts at its beginning)."""

    path: str
    kind: str  # "trace" or "text"
    rank: int | None
    data: bytes
    byte_offset: int
    line_offset: int
    restarted: bool = False
    compressed: bool = False
    more: bool = False  # more complete records wait behind this chunk (poll again)


@dataclass
class _File:
    path: str
    kind: str
    rank: int | None
    inode: int = -1
    offset: int = 0  # bytes handed on
    lines: int = 0  # lines handed on
    seen_size: int = -1  # size at the previous poll
    grew_at: float = 0.0  # when the size last changed (as the polls saw it: when a wait for more began)
    # when it was last written (time.monotonic): a growth a poll saw, else its mtime when found
    written_at: float = 0.0
    deferred_at: float | None = None  # since when complete records wait (Tail.wanted)
    compressed: bool = False
    done: bool = False  # a compressed log, read


@dataclass
class Tail:
    """Follows `roots` (directories or files) and `extra_logs` (text logs named beside them)."""

    roots: list[str]
    extra_logs: list[str] = field(default_factory=list)
    settle_s: float = 1.0
    # which complete records are worth handing on at once (None: all); the others wait until
    # wanted ones follow, DEFER_MAX_S pass or DEFER_MAX_BYTES gather (runtime records of 48
    # ranks, one a second each, would otherwise cost a parse each)
    wanted: Callable[[str, bytes], bool] | None = None  # (kind, records) -> hand on now
    files: dict[str, _File] = field(default_factory=dict)
    stray: dict[str, str] = field(default_factory=dict)  # not a torch log (checked again if it grows)
    _stray_size: dict[str, int] = field(default_factory=dict)
    _measured: dict[str, tuple[int, int, float]] = field(default_factory=dict)  # by `backlog`: (inode, size, mtime)

    def scan(self) -> list[str]:
        """Look for files not followed yet; returns the paths of the new ones."""
        new = []
        for path in self._candidates():
            if path in self.files:
                continue
            try:
                st = os.stat(path)
            except OSError:
                continue
            size = st.st_size
            if path in self.stray and self._stray_size.get(path) == size:
                continue  # not a log, and unchanged
            named = path in self.extra_logs or path in self.roots
            kind = kind_of(path)
            if kind == "empty":
                continue  # nothing written yet: looked at again
            if kind == "other":
                self.stray[path] = "not a torch log"
                self._stray_size[path] = size
                continue
            if kind == "text" and not named and path not in self.stray and size == 0:
                continue
            self.stray.pop(path, None)
            rank = trace_rank(path) if kind == "trace" else None
            with open(path, "rb") as fh:
                compressed = is_gzip(fh)
            self.files[path] = _File(path, kind, rank, written_at=_monotonic_of(st.st_mtime), compressed=compressed)
            new.append(path)
        return new

    def _candidates(self) -> list[str]:
        out: list[str] = []
        for root in self.roots:
            p = Path(root)
            if p.is_dir():
                out.extend(str(f) for f in walk(p))
            elif p.exists():
                out.append(str(p))
        out.extend(x for x in self.extra_logs if os.path.exists(x))
        return out

    def poll(self, *, rescan: bool = True, now: float | None = None, everything: bool = False) -> list[Chunk]:
        """The complete records added since the last poll, one chunk per file that has some
        (`everything`: all bytes there, a record being written included: the writer is gone, or
        the caller reads all of it anyway)."""
        if rescan:
            self.scan()
        now = time.monotonic() if now is None else now
        chunks = []
        for f in list(self.files.values()):
            c = self._read(f, now, everything)
            if c is not None:
                chunks.append(c)
        return chunks

    def drain(self, *, now: float | None = None, everything: bool = False) -> Iterator[list[Chunk]]:
        """Poll until no file has more waiting (a backlog read in pieces): one list per poll."""
        chunks = self.poll(now=now, everything=everything)
        yield chunks
        while any(c.more for c in chunks):
            chunks = self.poll(rescan=False, now=now, everything=everything)
            yield chunks

    def backlog(self, *, wall_now: float | None = None) -> dict[str, int]:
        """What the followed files hold now, as a parse that reads them whole should take it
        (traceview.live.watch parses it with the loading path): for each file, how many of
        its bytes are complete records, found by reading back from its end (not the whole
        file). A file unchanged for `settle_s` (its mtime) is taken whole, a cut last record
        included; a text log being written, up to its last record's first line; a compressed
        log, whole. `take` then follows each from there. Call `scan` first."""
        wall_now = time.time() if wall_now is None else wall_now
        ends = {}
        for f in self.files.values():
            try:
                st = os.stat(f.path)
            except OSError:
                continue
            settled = f.compressed or wall_now - st.st_mtime >= self.settle_s
            ends[f.path] = st.st_size if settled else self._complete_end(f, st.st_size)
            self._measured[f.path] = (st.st_ino, st.st_size, st.st_mtime)
        return ends

    def _complete_end(self, f: _File, size: int) -> int:
        """How many of the first `size` bytes of a file being written are complete records:
        its last BACK_READ bytes looked at (more when its last record starts before them)."""
        want = BACK_READ
        with open(f.path, "rb") as fh:
            while True:
                lo = max(0, size - want)
                data = os.pread(fh.fileno(), size - lo, lo)
                if lo == 0:
                    return self._complete(f, data, 0.0, False)
                first = data.find(b"\n") + 1  # the look starts at a line
                data, lo = data[first:], lo + first
                cut = data.rfind(b"\n") + 1
                if cut > 0:
                    if f.kind == "trace":
                        from parsers.torch_trace import last_record_start

                        if last_record_start(data[:cut], 0) >= 0:  # the last record starts in it
                            return lo + _trace_complete(data, cut)
                    else:
                        end = _text_complete(data, cut)
                        if end > 0:  # a boundary found inside it (at 0: the record may start before)
                            return lo + end
                want *= 4

    def take(self, path: str, offset: int, lines: int) -> None:
        """Follow `path` from byte `offset` (after `lines` lines): what came before was read
        elsewhere (its backlog). The file is the one `backlog` measured: one replaced since
        starts over at the next poll."""
        f = self.files[path]
        f.inode, f.seen_size, mtime = self._measured.get(path, (-1, -1, time.time()))
        f.offset, f.lines = offset, lines
        f.grew_at = time.monotonic()
        f.written_at = _monotonic_of(mtime)
        f.done = f.compressed

    def last_growth(self) -> float | None:
        """When a followed file last grew (time.monotonic; a file there when the watch began:
        its modification time), as seen by the polls; None while no file is followed."""
        return max((f.written_at for f in self.files.values()), default=None)

    def seek_end(self) -> None:
        """Follow from here on: every file as read up to its present size, without reading it
        (`traceview open` loads it all anyway; only what lands later matters). Line numbers
        of later chunks are unknown (-1)."""
        self.scan()
        for f in self.files.values():
            try:
                st = os.stat(f.path)
            except OSError:
                continue
            f.inode, f.offset, f.seen_size, f.lines = st.st_ino, st.st_size, st.st_size, -1
            f.done = f.compressed

    def _read(self, f: _File, now: float, everything: bool = False) -> Chunk | None:
        if f.done:
            return None
        try:
            st = os.stat(f.path)
        except OSError:
            return None  # gone: what was read of it stays
        restarted = False
        if f.inode not in (-1, st.st_ino) or st.st_size < f.offset:
            f.offset = f.lines = 0
            f.seen_size = -1
            restarted = True
        f.inode = st.st_ino
        if st.st_size != f.seen_size:
            if f.seen_size >= 0 or restarted:  # (the first look at a file: its mtime says when)
                f.written_at = now
            f.seen_size = st.st_size
            f.grew_at = now
        if st.st_size == f.offset and not restarted:
            return None
        if f.compressed:
            from parsers.gzipped import read_all

            with open(f.path, "rb") as fh:
                data, _damage = read_all(fh)
            f.done = True
            return Chunk(f.path, f.kind, f.rank, data, 0, 0, restarted, compressed=True)
        avail = st.st_size - f.offset
        want = MAX_READ
        with open(f.path, "rb") as fh:
            while True:
                # a big backlog (a watch started on a long log) in pieces: memory stays bounded
                data = os.pread(fh.fileno(), min(avail, want), f.offset)
                more = len(data) < avail
                # a piece is cut by us, not by the writer: its last record may go on past it
                settled = not more and (everything or now - f.grew_at >= self.settle_s)
                end = self._complete(f, data, now, settled)
                if end > 0 or not more:
                    break
                want *= 2  # one record longer than a piece: read on until it ends
        if end <= 0:
            return None if not restarted else Chunk(f.path, f.kind, f.rank, b"", 0, 0, True)
        out = data[:end]
        if self.wanted is not None and not settled and not restarted and not more and not self.wanted(f.kind, out):
            f.deferred_at = now if f.deferred_at is None else f.deferred_at
            if now - f.deferred_at < DEFER_MAX_S and end < DEFER_MAX_BYTES:
                return None
        f.deferred_at = None
        chunk = Chunk(f.path, f.kind, f.rank, out, f.offset, f.lines, restarted, more=more)
        f.offset += end
        f.lines += out.count(b"\n") + (0 if out.endswith(b"\n") else 1)
        return chunk

    def _complete(self, f: _File, data: bytes, now: float, settled: bool) -> int:
        """How much of `data` (the bytes after f.offset) is complete records."""
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            # not one whole line: a writer mid-line, or a last line without its newline
            return len(data) if settled else 0
        if settled:
            return len(data)  # nothing more came: take all, a cut record included
        if f.kind == "trace":
            return _trace_complete(data, cut)
        # a text log: every record but the last (a record that another one follows is whole);
        # the last once the file stopped growing for settle_s (above)
        return _text_complete(data, cut)


def _monotonic_of(wall: float) -> float:
    """A wall-clock time (a file's mtime) on the monotonic clock: that many seconds before now
    (a time in the future, a clock skew, is now)."""
    return time.monotonic() - max(0.0, time.time() - wall)


def _text_complete(data: bytes, cut: int) -> int:
    """The end of the whole records of a text log's new whole lines data[:cut]: up to the last
    record's first line. A record is the run of lines with one glog prefix (torch >= 2.2
    prefixes every line of a message; an older torch's unprefixed continuation lines follow
    their record's line): the last prefixed line's run, back to its first line."""
    pos = cut
    last_prefix: bytes | None = None
    start = 0
    while pos > 0:
        q = data.rfind(b"\n", 0, pos - 1) + 1  # the start of the line ending at pos
        m = _TEXT_RECORD.match(data, q, pos)
        if m is not None:
            if last_prefix is None or m.group(0) == last_prefix:
                last_prefix = m.group(0)
                start = q
            else:
                return start
        elif last_prefix is not None and pos - q > 0 and data[q:q + 1] not in (b" ", b"\t"):
            return start  # program output before the last record
        pos = q
        if cut - pos > TEXT_MAX_HELD:  # a record this long, or that much program output: hand it on
            return start if last_prefix is not None else cut
    return start if last_prefix is not None else cut


def _trace_complete(data: bytes, cut: int) -> int:
    """The end of the complete records of a trace log's new whole lines data[:cut]: all of
    them, unless the last record's payload is still being written (its md5 does not match)."""
    # polars: not before the UI's first screen, nor before the watch's parse workers start
    from parsers.torch_trace import last_record_start

    lines = data[:cut]  # (the same object when data ends with its newline)
    start = max(0, last_record_start(lines, 0))  # a chunk starts at a record
    header_end = data.find(b"\n", start)
    m = _HAS_PAYLOAD.search(data, start, header_end)
    if m is None:
        return cut  # no payload: the record is whole with its line
    payload_lines = data[header_end + 1 : cut].split(b"\n")[:-1]
    if not payload_lines:
        return start
    payload = b"\n".join(line[1:] for line in payload_lines)
    return cut if hashlib.md5(payload).hexdigest().encode() == m.group(1) else start
