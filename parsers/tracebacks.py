"""Python tracebacks in a TORCH_LOGS capture (stderr): the uncaught exception that ended the
program, a faulthandler dump (`Fatal Python error: Segmentation fault`), and the tracebacks
inside `WON'T CONVERT` warnings (`suppress_errors=True`).

Only reading: which lines, which exception, which frames. What they mean (category, next step)
is traceview.analyze.crashes'.

An uncaught exception is told from a traceback the program printed itself
(`traceback.print_exc()` after catching it) by where it starts: Python's excepthook prints the
whole stack from the script's `<module>` frame (or runpy's, under `python -m`), a caught one
starts at the frame that caught it. It must be the last traceback of the file, and no record
of a compile may follow it (the atexit lines of TORCH_LOGS=dynamo may).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from parsers.glog import RANK

_FRAME = re.compile(r'^ {2}File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in | in )(?P<fn>.+)$')
_START = "Traceback (most recent call last):"
_FATAL = re.compile(r"^Fatal Python error: (?P<what>.+)$")
_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
_TRAILER = "Set TORCHDYNAMO_VERBOSE=1"
_CHAINED = ("The above exception was the direct cause", "During handling of the above exception")
_WONT = re.compile(r"^WON'T CONVERT (?P<fn>\S+) (?P<path>.+) line (?P<line>\d+)\s*$")
# torch prefixes every line a rank writes to stderr with `[rankN]: ` once the process group is
# up (tracebacks included): in a capture of several ranks, their lines interleave.
_RANK_PREFIX = re.compile("^" + RANK)
# torch's own `[rankN]: ` is followed by a space (Python's stderr lines); torchrun --tee's
# `[defaultN]:` is not: a faulthandler dump, written to fd 2 below torch's prefixing, reads
# `[default1]:  File "…", line 99 in call` and keeps its two spaces
_TORCH_RANK_END = re.compile(r"\[rank\d+\]:$")
# torchrun's own error when a child failed; its "Root Cause (first observed failure)" block
# names the rank that failed first
_LAUNCHER_ERROR = "ChildFailedError"
# torch.multiprocessing.spawn: the parent re-raises a child's error as ProcessRaisedException,
# the child's whole traceback inside its message after this line (the index is the rank
# mp.spawn passed to the child)
_SPAWNED = re.compile(r"^-- Process (?P<index>\d+) terminated with the following error:$")
_ROOT_RANK = re.compile(r"Root Cause \(first observed failure\):\s*\n\[\d+\]:\s*\n(?:[^\n]*\n)*?\s*rank\s*:\s*(\d+)")

CRASHES_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String,
    "rank": pl.Int32,
    "lineno": pl.Int64,
    "end_lineno": pl.Int64,
    "kind": pl.String,  # "exception" (uncaught) or "fatal" (faulthandler: a signal)
    "exc_type": pl.String,
    "message": pl.String,
    "frames": pl.List(pl.String),  # "path:line in fn", outermost first
    "sources": pl.List(pl.String),  # the source line under each frame ("" when none)
    "certainty": pl.String,
    "evidence": pl.String,
    # torchrun's first observed failure (its ChildFailedError), for every crash of the capture
    "root_rank": pl.Int32,
}


@dataclass
class Traceback:
    """One traceback as printed: its frames (outermost first) and the exception."""

    lineno: int
    end_lineno: int
    frames: list[tuple[str, int, str, str]] = field(default_factory=list)  # path, line, fn, source
    exc_type: str | None = None
    message: str = ""
    fatal: str | None = None  # faulthandler's "Segmentation fault", ...


def parse_traceback(lines: list[str], first_lineno: int = 1) -> Traceback | None:
    """The first traceback (or faulthandler dump) in `lines`: frames, exception type and its
    whole message (up to torch's `Set TORCHDYNAMO_VERBOSE=1` trailer, a blank line followed by
    an unindented line that is not part of it, or the end)."""
    start = next((i for i, x in enumerate(lines) if x.startswith(_START) or _FATAL.match(x)), None)
    if start is None:
        return None
    tb = Traceback(first_lineno + start, first_lineno + start)
    m = _FATAL.match(lines[start])
    if m:
        tb.fatal = m["what"].strip()
    i = start + 1
    # faulthandler dumps every thread; the crashed one is "Current thread …"
    keep = True
    while i < len(lines):
        x = lines[i]
        if tb.fatal is not None and x.startswith(("Thread 0x", "Current thread")):
            keep = x.startswith("Current thread")
        fm = _FRAME.match(x)
        if fm and not keep:
            i += 1
            continue
        if fm:
            src = lines[i + 1].strip() if i + 1 < len(lines) and lines[i + 1].startswith("    ") else ""
            tb.frames.append((fm["path"], int(fm["line"]), fm["fn"].strip(), src))
            i += 1
            continue
        if tb.fatal is not None:
            if x.startswith("Extension modules:"):
                break
            i += 1
            continue
        if x.startswith("    ") or (x.strip() == "" and not tb.frames):
            i += 1
            continue
        em = _EXC.match(x)
        if em and tb.frames:
            tb.exc_type = em["type"]
            msg = [em["msg"] or ""]
            j = i + 1
            while j < len(lines) and not lines[j].startswith(_TRAILER) and not (
                lines[j].startswith(_START) and not _SPAWNED.match(lines[j - 1].strip())
            ):  # (mp.spawn's message holds the child's traceback)
                if lines[j].strip() == "" and j + 1 < len(lines) and lines[j + 1].startswith(_TRAILER):
                    break
                msg.append(lines[j])
                j += 1
            tb.message = "\n".join(msg).strip()
            i = j
            break
        i += 1
    tb.end_lineno = first_lineno + max(i - 1, start)
    # faulthandler prints the innermost frame first
    if tb.fatal is not None:
        tb.frames.reverse()
    return tb


def _starts_at_top(tb: Traceback) -> bool:
    if not tb.frames:
        return False
    path, _, fn, _ = tb.frames[0]
    return fn == "<module>" or "runpy" in path


def _traceback_at(texts: list[str], linenos: list[int], k: int) -> Traceback | None:
    """The traceback starting at other line `k`: its block is the consecutive other lines
    (a log record in between ends it)."""
    end = k
    while end + 1 < len(texts) and linenos[end + 1] == linenos[end] + 1:
        end += 1
    return parse_traceback(texts[k : end + 1], linenos[k])


PRINTED_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String,
    "rank": pl.Int32,
    "lineno": pl.Int64,
    "exc_type": pl.String,
    "message": pl.String,
    "top_frame": pl.String,  # "path:line in fn" of the outermost frame
}


def tracebacks_from_text(other_lines: pl.DataFrame) -> pl.DataFrame:
    """Every Python traceback of a capture (a chain counts once, as its last traceback), the
    ones a program printed after catching the exception (traceback.print_exc) included."""
    rows: list[dict] = []
    for (file,), part in other_lines.sort("file", "lineno").group_by(["file"], maintain_order=True):
        texts = part["text"].to_list()
        linenos = part["lineno"].to_list()
        ranks = part["rank"].to_list()
        starts = [k for k, x in enumerate(texts) if x.startswith(_START)]
        for n, k in enumerate(starts):
            nxt = starts[n + 1] if n + 1 < len(starts) else None
            if nxt is not None and any(x.startswith(_CHAINED) for x in texts[k:nxt]):
                continue  # chained: the last of the chain stands for it
            tb = _traceback_at(texts, linenos, k)
            if tb is None or tb.exc_type is None:
                continue
            top = tb.frames[0] if tb.frames else None
            rows.append(
                {
                    "file": file,
                    "rank": ranks[k],
                    "lineno": tb.lineno,
                    "exc_type": tb.exc_type,
                    "message": tb.message,
                    "top_frame": f"{top[0]}:{top[1]} in {top[2]}" if top else None,
                }
            )
    return pl.DataFrame(rows, schema=PRINTED_SCHEMA)


def _streams(part: pl.DataFrame) -> list[tuple[int | None, bool, list[str], list[int]]]:
    """A file's other lines as streams: one per rank for the lines torch prefixed `[rankN]: `
    (the prefix taken off; other ranks' lines interleave), and one of the rest (the file's rank,
    or the launcher's own output). Each: (rank, prefixed, texts, line numbers)."""
    by_rank: dict[int, tuple[list[str], list[int]]] = {}
    plain: tuple[list[str], list[int]] = ([], [])
    plain_ranks: set[int] = set()  # the rank of unprefixed lines (a rank's own file), if any
    # lines whose rank a launcher's prefix gave (srun -l, mpirun --tag-output: several ranks in
    # the file, their lines without torch's prefix): each rank's lines are its stream
    launched = part["rank"].drop_nulls().n_unique() > 1
    for text, lineno, rank in zip(part["text"].to_list(), part["lineno"].to_list(), part["rank"].to_list()):
        launched_line = launched and rank is not None
        m = _RANK_PREFIX.match(text)
        if m or launched_line:
            # torch's prefix, or a launcher's (taken off by the reader, its rank in `rank`)
            t, n = by_rank.setdefault(int(m["rank"]) if m else rank, ([], []))
            if m:
                rest = text[m.end():]
                t.append(rest[1:] if rest.startswith(" ") and _TORCH_RANK_END.search(m.group(0)) else rest)
            else:
                t.append(text)
            n.append(lineno)
        else:
            plain[0].append(text)
            plain[1].append(lineno)
            if rank is not None:
                plain_ranks.add(rank)
    out: list[tuple[int | None, bool, list[str], list[int]]] = [
        (r, True, t, n) for r, (t, n) in sorted(by_rank.items())
    ]
    if plain[0]:
        out.append((next(iter(plain_ranks)) if len(plain_ranks) == 1 else None, False, plain[0], plain[1]))
    return out


def _last_uncaught(
    texts: list[str], linenos: list[int], prefixed: bool
) -> Traceback | None:
    """The stream's last traceback (or its faulthandler dump), with real line numbers. A rank's
    lines are consecutive within its stream even where other ranks' lines come between."""
    starts = [
        k for k, x in enumerate(texts)
        if (x.startswith(_START) or _FATAL.match(x)) and not (k and _SPAWNED.match(texts[k - 1]))
    ]  # a child's traceback inside a ProcessRaisedException message is part of that message
    if not starts:
        return None
    # a chain ("The above exception was the direct cause …") ends in its last traceback;
    # a faulthandler dump is the first thing of a dying process
    fatal = [k for k in starts if _FATAL.match(texts[k])]
    k = fatal[0] if fatal else starts[-1]
    if not prefixed:
        return _traceback_at(texts, linenos, k)
    tb = parse_traceback(texts[k:], 0)
    if tb is not None:
        tb.lineno, tb.end_lineno = linenos[k + tb.lineno], linenos[min(k + tb.end_lineno, len(linenos) - 1)]
    return tb


def _spawned_child(tb: Traceback) -> tuple[int, Traceback] | None:
    """(process index, its traceback) of a ProcessRaisedException re-raised by mp.spawn."""
    if not (tb.exc_type or "").endswith("ProcessRaisedException"):
        return None
    lines = tb.message.split("\n")
    for i, x in enumerate(lines):
        m = _SPAWNED.match(x.strip())
        if m:
            child = parse_traceback(lines[i + 1 :])
            if child is not None and child.exc_type is not None:
                return int(m["index"]), child
    return None


def uncaught_from_text(other_lines: pl.DataFrame, log_records: pl.DataFrame) -> pl.DataFrame:
    """The uncaught exception (or fatal signal) that ended each captured process: the last
    traceback of each text file (of each rank's `[rankN]: ` lines, where several ranks write to
    one file) when it starts at the script's top frame and no compile is logged after it (see
    the module doc). torchrun's own ChildFailedError is not a crash of the program when the
    ranks' tracebacks are there: it gives `root_rank`, the rank it saw fail first; alone (the
    ranks' stderr not captured) it is one row of kind `launcher`."""
    rows: list[dict] = []
    if other_lines.height == 0:
        return pl.DataFrame(schema=CRASHES_SCHEMA)
    for (file,), part in other_lines.sort("file", "lineno").group_by(["file"], maintain_order=True):
        found: list[dict] = []
        launcher: dict | None = None
        for rank, prefixed, texts, linenos in _streams(part):
            tb = _last_uncaught(texts, linenos, prefixed)
            if tb is None or (tb.exc_type is None and tb.fatal is None):
                continue
            later = log_records.filter((pl.col("file") == file) & (pl.col("lineno") > tb.lineno))
            if prefixed:
                later = later.filter(pl.col("rank") == rank)
            if tb.fatal is None and (later.filter(pl.col("compile_id").is_not_null()).height or not _starts_at_top(tb)):
                continue  # printed by the program after catching it, or the program went on
            # nothing after it: the end of stderr; log lines after it (TORCH_LOGS=dynamo's atexit
            # summary) leave a program that printed a caught exception from <module> possible
            last = tb.fatal is not None or later.height == 0
            evidence = (
                f"faulthandler: Fatal Python error: {tb.fatal}"
                if tb.fatal
                else "the last traceback of the capture, printed from the script's top frame"
                + (f" (rank {rank}'s [rank{rank}]: lines)" if prefixed else "")
                + ("" if last else ", with log lines after it")
            )
            spawned = _spawned_child(tb) if not prefixed else None
            if spawned is not None:  # the child's own error is the crash; the parent only re-raised it
                rank, child = spawned
                evidence = (
                    f"torch.multiprocessing.spawn re-raised process {rank}'s error (ProcessRaisedException), "
                    "the last traceback of the capture"
                )
                tb = Traceback(tb.lineno, tb.end_lineno, child.frames, child.exc_type, child.message)
            row = {
                "file": file,
                "rank": rank,
                "lineno": tb.lineno,
                "end_lineno": tb.end_lineno,
                "kind": "fatal" if tb.fatal else "exception",
                "exc_type": tb.exc_type or tb.fatal,
                "message": tb.message if tb.exc_type else tb.fatal,
                "frames": [f"{p}:{n} in {fn}" for p, n, fn, _ in tb.frames],
                "sources": [src for *_, src in tb.frames],
                "certainty": "certain" if last else "likely",
                "evidence": evidence,
                "root_rank": None,
            }
            if not prefixed and (tb.exc_type or "").endswith(_LAUNCHER_ERROR):
                launcher = row
            else:
                found.append(row)
        if launcher is not None:
            m = _ROOT_RANK.search(launcher["message"] or "")
            root = int(m.group(1)) if m else None
            if found:
                for row in found:
                    row["root_rank"] = root
            else:
                launcher.update(kind="launcher", rank=None, root_rank=root,
                                evidence="torchrun's ChildFailedError (the ranks' own tracebacks are not in the capture)")
                found.append(launcher)
        rows += found
    return pl.DataFrame(rows, schema=CRASHES_SCHEMA)


WONT_CONVERT_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String,
    "rank": pl.Int32,
    "lineno": pl.Int64,
    "compile_id": pl.String,
    "function": pl.String,
    "filename": pl.String,
    "line": pl.Int32,
    "exc_type": pl.String,
    "message": pl.String,
}


def wont_convert_from_text(log_records: pl.DataFrame) -> pl.DataFrame:
    """`WON'T CONVERT fn path line N` warnings (convert_frame.py, suppress_errors=True: the
    frame runs eagerly) with the exception of the traceback they carry."""
    recs = log_records.filter(pl.col("text").str.starts_with("WON'T CONVERT "))
    rows = []
    for r in recs.iter_rows(named=True):
        lines = (r["text"] or "").split("\n")
        m = _WONT.match(lines[0])
        if not m:
            continue
        tb = parse_traceback(lines[1:])
        rows.append(
            {
                "file": r["file"],
                "rank": r["rank"],
                "lineno": r["lineno"],
                "compile_id": r["compile_id"],
                "function": m["fn"],
                "filename": m["path"],
                "line": int(m["line"]),
                "exc_type": tb.exc_type if tb else None,
                "message": tb.message if tb else None,
            }
        )
    return pl.DataFrame(rows, schema=WONT_CONVERT_SCHEMA)
