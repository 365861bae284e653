"""Find the logs in what the user points at: a trace file, a text log, or a directory.

A directory may hold TORCH_TRACE logs (one per process), TORCH_LOGS text captures, the flight
recorder's dumps (parsers.flight_recorder), and files that are neither (reported as stray,
never dropped silently). Trace logs are grouped into runs:
a new run starts when a rank (or the rank-less process) appears again, or when a file starts
long after the previous one; `latest=True` keeps the newest run.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from parsers.code_location import TORCH_FILE_BYTES
from parsers.debugdir import DebugRun, find_run_dirs, read_run_dir
from parsers.flight_recorder import looks_like_dump
from parsers.glog import PREFIX, TEXT_HEAD, TEXT_PREFIX, as_bytes, plain
from parsers.gzipped import GzipStream, is_gzip, read_all

TRACE_NAME_RE = re.compile(r"^dedicated_log_torch_trace_(?:rank_(\d+)_?)?.*\.log(?:\.gz)?$")
_PREFIX = as_bytes("^" + plain(PREFIX) + " ")
TRACE_LINE_RE = re.compile(_PREFIX + rb"\{\"")
# a text log's line may carry a cluster launcher's prefix before torch's (parsers.glog.LAUNCHER)
TEXT_LINE_RE = re.compile(as_bytes("^" + plain(TEXT_PREFIX) + " "))
TS_RE = re.compile(as_bytes("^" + TEXT_HEAD))
_RANK_KEY = re.compile(rb', "rank": (\d+)')
RUN_GAP_S = 600.0
_SNIFF = 64 * 1024
_SNIFF_MORE = 8 * 1024 * 1024
_MAX_DEPTH = 3


class InputError(Exception):
    """A problem with the user's input: shown as one line, exit code 2."""


@dataclass
class TraceFile:
    path: str
    rank: int | None
    start: str  # "MMDD HH:MM:SS.ffffff" of the first record ("" when unknown)
    mtime: float
    size: int
    run: int = 0


@dataclass
class Inputs:
    """What was found under the user's path."""

    root: str
    traces: list[TraceFile] = field(default_factory=list)
    text_logs: list[str] = field(default_factory=list)
    stray: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    # the flight recorder's dumps (one file per rank: parsers.flight_recorder), read by the
    # timeout analysis
    flight_recorder: list[str] = field(default_factory=list)
    runs: int = 0
    dropped_runs: list[str] = field(default_factory=list)  # files left out by --latest
    # how many bytes of a file to read (a log being written: its complete records, as
    # traceview.live.watch found them); a file not named here is read whole
    limits: dict[str, int] = field(default_factory=dict)
    # TORCH_COMPILE_DEBUG=1 run folders (parsers.debugdir), read as a whole each
    debug_runs: list[DebugRun] = field(default_factory=list)

    @property
    def trace_paths(self) -> list[str]:
        return [t.path for t in self.traces]

    @property
    def debug_files(self) -> list[str]:
        """The files of the debug run folders (for the parse cache's key)."""
        return [f for r in self.debug_runs for f in r.files]


def _head(path: str, size: int = _SNIFF) -> bytes:
    with open(path, "rb") as fh:
        if is_gzip(fh):
            # what is readable before damage (the parse keeps it too and says where it ends)
            head, damage = read_all(fh, limit=size)
            if not head and damage:
                raise InputError(f"{path}: not a readable gzip file ({damage})")
            return head
        return fh.read(size)


def sniff(path: str) -> tuple[str, str]:
    """Classify a file: ('trace'|'text'|'empty'|'binary'|'other', first timestamp).

    Reads the first 64 KiB; a text file with no torch log line there (a job that printed a
    lot before compiling) is read further, up to 8 MiB, then on in 8 MiB blocks to its first
    torch log line (a many-rank job's stdout). Raises InputError for a gzip file of which
    nothing is readable."""
    head = _head(path)
    if not head.strip():
        return "empty", ""
    # by what parses: a NUL byte among torch log lines (a damaged block) does not make the
    # file binary, only one where no line is a torch log line
    kind, start = _classify(head)
    if kind == "other" and len(head) == _SNIFF:
        more = _head(path, _SNIFF_MORE)
        kind, start = _classify(more)
        if kind == "other" and len(more) == _SNIFF_MORE and b"\x00" not in head[:8192]:
            kind, start = _first_text_line(path)
    if kind == "other" and b"\x00" in head[:8192]:
        return "binary", ""
    return kind, start


_TEXT_LINE_M = re.compile(b"(?m)" + TEXT_LINE_RE.pattern)


def _first_text_line(path: str) -> tuple[str, str]:
    """A text file with no torch log line in its first 8 MiB (a many-rank job's stdout: every
    rank's start-up output first): read on, 8 MiB at a time, to its first torch log line
    ('text' and its timestamp; 'other' when there is none)."""
    with open(path, "rb") as fh:
        blocks = GzipStream(fh).pieces(_SNIFF_MORE) if is_gzip(fh) else iter(lambda: fh.read(_SNIFF_MORE), b"")
        carry = b""
        for block in blocks:
            data = carry + block
            cut = data.rfind(b"\n") + 1
            m = _TEXT_LINE_M.search(data, 0, cut or len(data))
            if m:
                line_end = data.find(b"\n", m.start())
                kind, start = _classify(data[m.start(): line_end if line_end >= 0 else len(data)])
                return ("text" if kind == "other" else kind), start
            carry = data[cut:] if cut else data[-65536:]
    return "other", ""


# A stderr that holds only an uncaught exception's traceback (TORCH_LOGS printed nothing: a
# graph break under fullgraph=True, a backend failure) is a capture too, when torch is in it:
# a frame in torch's own files, or a torch exception type; or a faulthandler dump with one.
_TRACEBACK = re.compile(rb"^(?:Traceback \(most recent call last\):|Fatal Python error: )", re.M)
_TORCH_IN_TRACEBACK = re.compile(
    rb'^(?:  File "' + TORCH_FILE_BYTES + rb'", line \d+|torch\.(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Failed|Unsupported)\b)',
    re.M,
)


_QUOTED = re.compile(rb"^(?:```|~~~|>)", re.M)  # a document quoting a traceback (markdown)
# `traceview run`'s capture of a command a signal ended (its stderr may hold nothing else)
_CAPTURE_EXIT = re.compile(rb"^traceview run: the command exited with \d+ \(SIG[A-Z0-9]+\)$", re.M)


def is_torch_traceback(head: bytes) -> bool:
    """Whether `head` holds a Python traceback (or faulthandler dump) that torch is part of,
    as a process prints it (not quoted in a document: no markdown fence or quote lines)."""
    return bool(_TRACEBACK.search(head)) and bool(_TORCH_IN_TRACEBACK.search(head)) and not _QUOTED.search(head)


def _classify(head: bytes) -> tuple[str, str]:
    """By what most torch log lines in `head` are: trace records or text-log records (one
    damaged trace header, a flipped `{`, reads as a text-log line: the file stays a trace)."""
    trace = text = 0
    start = ""
    for line in head.split(b"\n"):
        if TRACE_LINE_RE.match(line):
            trace += 1
        elif TEXT_LINE_RE.match(line):
            text += 1
        else:
            continue
        if not start and (m := TS_RE.match(line)):
            start = f"{m['md'].decode()} {m['time'].decode()}"
        if trace + text >= 64:  # enough to tell
            break
    kind = "trace" if trace > text else "text" if text else "other"
    if kind == "other" and (is_torch_traceback(head) or _CAPTURE_EXIT.search(head)):
        kind = "text"
    return kind, start


def walk(root: Path) -> list[Path]:
    """The files under a directory that discovery looks at (hidden ones and those deeper than
    _MAX_DEPTH left out), sorted."""
    out: list[Path] = []
    base_depth = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).parts) - base_depth
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")) if depth < _MAX_DEPTH else []
        out.extend(Path(dirpath) / f for f in sorted(filenames) if not f.startswith("."))
    return out


def _secs(start: str) -> float:
    if not start:
        return 0.0
    md, t = start.split(" ")
    h, m, s = t.split(":")
    return ((int(md[:2]) * 31 + int(md[2:])) * 86400) + int(h) * 3600 + int(m) * 60 + float(s)


def _assign_runs(traces: list[TraceFile]) -> int:
    """Number the runs: a new one starts when a rank appears again, or a file starts long
    after the one before. Files without a rank (processes that never joined a process group)
    are one run while they overlap in time — one starts before another's last record: the
    processes of one job (torch.multiprocessing, a launcher) — and a new run where one starts
    after the others ended (the same program run again)."""
    traces.sort(key=lambda t: (_secs(t.start) or t.mtime, t.rank if t.rank is not None else -1))
    run = 0
    seen: set[int | None] = set()
    prev = None
    rankless_end = 0.0  # the last record of this run's files without a rank (0: unknown)
    for t in traces:
        s = _secs(t.start)
        again = t.rank in seen and not (t.rank is None and s and rankless_end and s <= rankless_end)
        if again or (prev is not None and s and prev and s - prev > RUN_GAP_S):
            run += 1
            seen = set()
            rankless_end = 0.0
        seen.add(t.rank)
        t.run = run
        prev = s or prev
        if t.rank is None:
            end = _secs(last_start(t.path))
            rankless_end = max(rankless_end, end) if end else 0.0
    return run + 1 if traces else 0


_TAIL = 256 * 1024


_GZ_TAIL_MAX = 64 << 20


def last_start(path: str) -> str:
    """"MMDD HH:MM:SS.ffffff" of the last record a trace file holds in its last 256 KiB ("" when
    none; a .gz is decompressed, up to 64 MiB: "" beyond)."""
    try:
        with open(path, "rb") as fh:
            if is_gzip(fh):
                data, _ = read_all(fh, limit=_GZ_TAIL_MAX)
                if len(data) >= _GZ_TAIL_MAX:
                    return ""
                tail = data[-_TAIL:]
            else:
                size = os.fstat(fh.fileno()).st_size
                fh.seek(max(0, size - _TAIL))
                tail = fh.read(_TAIL)
    except (OSError, EOFError, ValueError):
        return ""
    for line in reversed(tail.split(b"\n")):
        if line[:1] != b"\t" and (m := TS_RE.match(line)):
            return f"{m['md'].decode()} {m['time'].decode()}"
    return ""


def _seen(f: Path, read: dict[tuple[int, int], str]) -> str | None:
    """The name under which file `f` was met before (None: new, now recorded in `read`)."""
    try:
        st = f.stat()
    except OSError:
        return None
    key = (st.st_dev, st.st_ino)
    if key in read:
        return read[key]
    read[key] = str(f)
    return None


def discover(
    path: str | os.PathLike[str], *, latest: bool = False, extra_logs: list[str] | None = None
) -> Inputs:
    """Find trace logs and text logs under `path` (a file or a directory)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: {_not_a_file(p) or 'no such file or directory'}")
    inputs = Inputs(root=str(path))
    candidates: list[tuple[Path, bool]]
    if p.is_dir():
        # TORCH_COMPILE_DEBUG folders are read as a whole (parsers.debugdir), not file by file
        run_dirs = find_run_dirs(p)
        inside = tuple(str(r) + os.sep for r in run_dirs)
        candidates = [(f, False) for f in walk(p) if not str(f).startswith(inside)]
        _debug_runs(inputs, run_dirs)
    else:
        candidates = [(p, True)]
    candidates += [(Path(x), True) for x in extra_logs or []]
    # a named input that is empty or cannot be read: noted and skipped when other inputs are
    # analysed, the error when nothing else is (an empty text log beside a good trace)
    passed_over: list[tuple[str, str]] = []

    def pass_over(fs: str, why: str) -> None:
        passed_over.append((fs, why))
        inputs.stray.append((fs, why))

    read: dict[tuple[int, int], str] = {}  # each file once: (device, inode) -> as first named
    for f, explicit in candidates:
        fs = str(f)
        why = _not_a_file(f)
        if why is None and (same := _seen(f, read)) is not None:
            # given twice (the same path, another spelling, a link, in a directory and by
            # name): read once, said in the input's notes
            inputs.stray.append((fs, f"the same file as {same}, read once"))
            continue
        if why is not None:
            if explicit:
                raise InputError(f"{fs}: {why}")
            inputs.stray.append((fs, why))
            continue
        if not os.access(f, os.R_OK):
            if explicit:
                pass_over(fs, "permission denied")
                continue
            inputs.stray.append((fs, "unreadable"))
            continue
        try:
            kind, start = sniff(fs)
        except OSError as exc:
            if explicit:
                pass_over(fs, f"cannot read ({exc.strerror or exc})")
                continue
            inputs.stray.append((fs, f"cannot read: {exc.strerror or exc}"))
            continue
        except InputError as exc:  # a gzip file with nothing readable
            if explicit:
                pass_over(fs, str(exc).removeprefix(f"{fs}: "))
                continue
            inputs.stray.append((fs, str(exc).removeprefix(f"{fs}: ")))
            continue
        name_m = TRACE_NAME_RE.match(f.name)
        if name_m and kind == "text":
            kind = "trace"  # torch names its trace files so: glog lines in one are damaged records
        if kind == "trace" or (name_m and kind == "empty"):
            if kind == "empty":
                if explicit:
                    pass_over(fs, "empty trace log (nothing written to it yet)")
                    continue
                inputs.stray.append((fs, "empty trace log"))
                continue
            rank = rank_number(name_m.group(1)) if name_m and name_m.group(1) else rank_in_file(fs)
            st = f.stat()
            inputs.traces.append(TraceFile(fs, rank, start, st.st_mtime, st.st_size))
        elif kind == "text":
            inputs.text_logs.append(fs)
        elif explicit and kind == "empty":
            pass_over(fs, "empty file")
        elif explicit:
            what = {"binary": "a binary file, not a torch log"}.get(
                kind, "not a TORCH_TRACE log or a TORCH_LOGS text log"
            )
            raise InputError(f"{fs}: {what}")
        elif kind in ("binary", "other") and looks_like_dump(_head(fs, 4096)):
            inputs.flight_recorder.append(fs)
        else:
            inputs.stray.append((fs, {"empty": "empty file", "binary": "binary file"}.get(kind, "not a torch log")))
    if passed_over and not inputs.traces and not inputs.text_logs:
        raise InputError(f"{passed_over[0][0]}: {passed_over[0][1]}")
    _covered_debug_runs(inputs)
    inputs.runs = max(_assign_runs(inputs.traces), _assign_debug_runs(inputs.debug_runs))
    if latest and len({t.run for t in inputs.traces}) > 1:
        newest = max(t.run for t in inputs.traces)
        inputs.dropped_runs = [t.path for t in inputs.traces if t.run != newest]
        inputs.traces = [t for t in inputs.traces if t.run == newest]
    if latest and len({r.run for r in inputs.debug_runs}) > 1:
        newest = max(r.run for r in inputs.debug_runs)
        inputs.dropped_runs += [r.path for r in inputs.debug_runs if r.run != newest]
        inputs.debug_runs = [r for r in inputs.debug_runs if r.run == newest]
    inputs.traces.sort(key=lambda t: (t.run, t.rank if t.rank is not None else -1, t.path))
    if not inputs.traces and not inputs.text_logs and not inputs.debug_runs:
        if p.is_dir():
            if not any(True for _ in p.iterdir()):
                raise InputError(f"{path}: empty directory")
            raise InputError(f"{path}: no TORCH_TRACE or TORCH_LOGS logs in this directory")
        raise InputError(f"{path}: not a TORCH_TRACE log or a TORCH_LOGS text log")
    return inputs


def _debug_runs(inputs: Inputs, run_dirs: list[Path]) -> None:
    """The TORCH_COMPILE_DEBUG run folders worth reading; an empty one (nothing written yet,
    or a process that compiled nothing) is noted and skipped."""
    for d in run_dirs:
        try:
            run = read_run_dir(d)
        except OSError as exc:
            inputs.stray.append((str(d), f"TORCH_COMPILE_DEBUG folder, cannot read: {exc.strerror or exc}"))
            continue
        if not run.graphs and not any(_size(f) for f in run.files):
            inputs.stray.append((str(d), "TORCH_COMPILE_DEBUG folder with nothing written in it"))
            continue
        inputs.debug_runs.append(run)


def _assign_debug_runs(runs: list[DebugRun]) -> int:
    """Group TORCH_COMPILE_DEBUG run folders into runs of a job: the processes of one job make
    theirs within moments; a folder made long after the one before (RUN_GAP_S) is another run."""
    runs.sort(key=lambda r: (r.started or 0.0, r.path))
    run, prev = 0, None
    for r in runs:
        s = r.started
        if prev is not None and s is not None and s - prev > RUN_GAP_S:
            run += 1
        r.run = run
        prev = s if s is not None else prev
    return run + 1 if runs else 0


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _covered_debug_runs(inputs: Inputs) -> None:
    """Mark the debug run folders whose process also wrote a TORCH_TRACE log among the inputs
    (the rule: parsers.sources.covering_trace)."""
    if not inputs.debug_runs or not inputs.traces:
        return
    from parsers.sources import covering_trace

    pids = {t.path: trace_pid(t.path) for t in inputs.traces}
    for run in inputs.debug_runs:
        run.covered_by = covering_trace(run.pid, pids)


_PID = re.compile(as_bytes("^" + PREFIX))


def trace_pid(path: str) -> int | None:
    """The process id of a trace log: the glog prefix's of its first record."""
    try:
        head = _head(path)
    except (OSError, InputError):
        return None
    for line in head.split(b"\n", 64)[:64]:
        if m := _PID.match(line):
            return int(m["pid"])
    return None


def trace_rank(path: str) -> int | None:
    """The rank of a trace log: from torch's file name, else from its first `"rank": N` key."""
    m = TRACE_NAME_RE.match(Path(path).name)
    return rank_number(m.group(1)) if m and m.group(1) else rank_in_file(path)


def kind_of(path: str) -> str:
    """What a file found in a directory is, as discovery decides it: 'trace', 'text', 'empty'
    (nothing written yet: it may become either) or 'other' (stray, unreadable included)."""
    f = Path(path)
    if _not_a_file(f) is not None or not os.access(f, os.R_OK):
        return "other"
    try:
        kind, _ = sniff(path)
    except (OSError, InputError):
        return "other"
    if TRACE_NAME_RE.match(f.name) and kind in ("text", "empty"):
        return "trace" if kind == "text" else "empty"
    return kind if kind in ("trace", "text", "empty") else "other"


def _not_a_file(f: Path) -> str | None:
    """Why `f` is not a regular file that can be read (None when it is one): a FIFO would
    block the read, a symbolic link may lead nowhere or to itself."""
    try:
        st = f.stat()
    except OSError as exc:
        if f.is_symlink():
            if exc.errno == errno.ELOOP:
                return "symbolic link loop"
            return f"broken symbolic link (to {os.readlink(f)})"
        return "no such file or directory" if exc.errno == errno.ENOENT else f"cannot read ({exc.strerror or exc})"
    if stat.S_ISREG(st.st_mode):
        return None
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    if stat.S_ISFIFO(st.st_mode):
        return "a FIFO (named pipe), not a regular file"
    return "not a regular file"


def rank_in_file(path: str) -> int | None:
    """The rank of a trace whose file name does not say it: from its first `"rank": N` key.
    A file opened before init_process_group (torch names it at its first record, before the
    rank is known) has records without `rank` first: read on up to 8 MiB for the first."""
    head = _head(path)
    rank = _first_rank(head)
    if rank is None and len(head) == _SNIFF:
        rank = _first_rank(_head(path, _SNIFF_MORE))
    return rank


def _first_rank(head: bytes) -> int | None:
    for line in head.split(b"\n"):  # (one regex over the head was quadratic on some lines)
        at = line.find(b'] {"', 1)
        if at < 0 or line[:1] == b"\t":
            continue
        m = _RANK_KEY.search(line, at + 4)
        if m:
            return rank_number(m.group(1))
    return None


def rank_number(digits: str | bytes) -> int | None:
    """A rank written in a file name or a record; None when it does not fit the 32-bit
    `rank` columns (no real rank does)."""
    n = int(digits)
    return n if n < 1 << 31 else None
