"""TORCH_COMPILE_DEBUG=1 folders: what torch writes there, read into log records.

With `TORCH_COMPILE_DEBUG=1` torch writes, under `<root>/torch_compile_debug/` (root: the
working directory, or `$TORCH_COMPILE_DEBUG_DIR`), one folder per process
`run_<YYYY_MM_DD_HH_MM_SS_ffffff>-pid_<pid>/` (torch/_dynamo/utils.py `_get_debug_dir`) holding:

* `torchdynamo/debug.log`: what the `torch._dynamo` loggers print while a frame compiles,
  formatted `%(message)s` (no glog prefix: no level, time, compile id or rank). Only what
  TORCH_LOGS enables (graph_breaks, recompiles, +dynamo) or warnings reach it; often empty.
* `torchinductor/<model>__<aot id>_<forward|backward|inference>_<n>.<counter>/`, one per
  Inductor compile of an AOT graph (torch/_inductor/debug.py `DebugContext`; the name is
  `get_aot_graph_name()`, the counter DebugContext's): `fx_graph_readable.py` (the graph
  Inductor received), `fx_graph_runnable.py` (the same as a repro script),
  `fx_graph_transformed.py` (after Inductor's FX passes), `ir_pre_fusion.txt`,
  `ir_post_fusion.txt`, `output_code.py` (the wrapper with its kernels: written last, so a
  folder without it is a compile that failed or was stopped), `debug.log`/`info.log` (when
  `config.trace.debug_log`/`info_log`: `[file.py:N LEVEL] message` lines), provenance json.
  Older torch wrote them under `aot_torchinductor/` and named the AOT graph
  `model__0_forward_1`; the parts of the name are the same.
* `torchinductor/aot_<model>___<n>_debug.log`: AOTAutograd's log (same line format).
* `tlparse/`: torch >= 2.12 (PR 175433) writes the TORCH_TRACE log here when TORCH_TRACE is
  unset; discovery reads it as a trace.

The folder counter and the aot id are not compile ids. What ties a graph folder to its compile
id: the warning torch prints on stderr when the folder is closed,
`W... [2/0] model__3_forward_4 debug trace: <path>` (torch/_inductor/debug.py, always printed:
a stderr capture given beside the folder has it, with the rank); without it the compile id is
unknown (said so).

The files become log records (`parsers.textlog.LOG_RECORDS_SCHEMA`) so that the text-log
readers (graph breaks, recompiles) and the graph and kernel tables (`parsers.graphs`) read
them as they read a TORCH_LOGS capture: a message of `debug.log` is a record with no prefix
fields; a graph file is one record whose `artifact` says which file it is (DEBUG_ARTIFACTS),
`text` its content, `compile_id` the tie (null when none).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parsers.glog import PREFIX, TEXT_TAGS, as_bytes, renamed

if TYPE_CHECKING:
    import polars as pl

# torch/_dynamo/utils.py: "run_" + strftime("%Y_%m_%d_%H_%M_%S_%f") + "-pid_" + pid
RUN_DIR_RE = re.compile(
    r"^run_(?P<y>\d{4})_(?P<mo>\d\d)_(?P<d>\d\d)_(?P<h>\d\d)_(?P<mi>\d\d)_(?P<s>\d\d)_(?P<us>\d{6})-pid_(?P<pid>\d+)$"
)
# torch/_functorch/_aot_autograd/logging_utils.py get_aot_graph_name() + DebugContext's ".N"
GRAPH_DIR_RE = re.compile(
    r"^(?P<model>\w+?)__(?P<aot>\d+)_(?P<part>forward|backward|inference)_(?P<nth>\d+)(?:\.(?P<counter>\d+))?$"
)
AOT_LOG_RE = re.compile(r"^aot_\w+?___\d+_debug\.log$")
DEBUG_ROOT = "torch_compile_debug"
INDUCTOR_DIRS = ("torchinductor", "aot_torchinductor")
# graph-folder files read into records: artifact name of each
DEBUG_ARTIFACTS = {
    "fx_graph_readable.py": "debug_fx_graph_readable",
    "fx_graph_transformed.py": "debug_fx_graph_transformed",
    "fx_graph_runnable.py": "debug_fx_graph_runnable",
    "output_code.py": "debug_output_code",
}
# the graphs among them (parsers.graphs); the others are whole files (the wrapper, the repro)
DEBUG_GRAPH_ARTIFACTS = ("debug_fx_graph_readable", "debug_fx_graph_transformed")
# `[file.py:123 LEVEL] message` (debug.py's file handlers of Inductor and AOTAutograd)
_BRACKET_LINE = re.compile(r"^\[[^\]\s]+:\d+ [A-Z]+\] ")
# messages of torch._dynamo that debug.log holds without a prefix: where a record starts
_GB_HEADER = re.compile(r"^Graph break (?:\(user stack suppressed due to duplicate graph break\) )?in user code at ")
_RECOMPILE = re.compile(r"^Recompiling function ")
# stderr: `... [2/0] model__3_forward_4 debug trace: /abs/.../model__3_forward_4.3`
_TIE_RE = re.compile(
    as_bytes(
        "^" + renamed(PREFIX, src_file="_sf", src_line="_sl", pid="_pid") + TEXT_TAGS
        + r" (?P<name>\S+) debug trace: (?P<path>[^\r\n]+?)\r?$"
    ),
    re.M,
)


@dataclass
class GraphFolder:
    """One Inductor compile's folder."""

    path: str
    aot_id: str  # "3_forward", as the wrapper's `# AOT ID`
    files: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        """Inductor wrote its wrapper (output_code.py is written last)."""
        return "output_code.py" in self.files


@dataclass
class DebugRun:
    """One process's `run_*-pid_N` folder."""

    path: str
    pid: int | None
    dynamo_log: str | None = None
    graphs: list[GraphFolder] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)  # aot_*_debug.log, a folder's debug.log/info.log
    covered_by: str | None = None  # a TORCH_TRACE log of the same process (parsers.sources)
    run: int = 0  # which run of the job(s) in the directory (parsers.discover)

    @property
    def started(self) -> float | None:
        """When the process made the folder (its name's time, local), in seconds."""
        return run_started(Path(self.path).name)

    @property
    def files(self) -> list[str]:
        out = [self.dynamo_log] if self.dynamo_log else []
        out += self.logs
        for g in self.graphs:
            out += [str(Path(g.path) / f) for f in g.files]
        return out


def run_started(name: str) -> float | None:
    """The time in a run folder's name (seconds since the epoch, local time), None if none."""
    import datetime as dt

    m = RUN_DIR_RE.match(name)
    if not m:
        return None
    return dt.datetime(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]), int(m["us"])).timestamp()


def is_run_dir(p: Path) -> bool:
    """Whether `p` is a `run_<time>-pid_<pid>` folder of TORCH_COMPILE_DEBUG."""
    return bool(RUN_DIR_RE.match(p.name)) and p.is_dir()


def find_run_dirs(root: Path, depth: int = 3) -> list[Path]:
    """The run folders at or under `root` (the folder itself, `torch_compile_debug/`, the
    directory holding it, ... up to `depth` levels down), sorted."""
    if is_run_dir(root):
        return [root]
    out: list[Path] = []
    for dirpath, dirnames, _ in os.walk(root):
        d = Path(dirpath)
        level = len(d.parts) - len(root.parts)
        keep = []
        for name in sorted(dirnames):
            if name.startswith("."):
                continue
            if RUN_DIR_RE.match(name):
                out.append(d / name)
            elif level + 1 < depth:
                keep.append(name)
        dirnames[:] = keep
    return sorted(out)


def read_run_dir(path: Path) -> DebugRun:
    """What a run folder holds (nothing is read but the listing)."""
    m = RUN_DIR_RE.match(path.name)
    run = DebugRun(str(path), int(m["pid"]) if m else None)
    log = path / "torchdynamo" / "debug.log"
    if log.is_file():
        run.dynamo_log = str(log)
    for sub in INDUCTOR_DIRS:
        base = path / sub
        if not base.is_dir():
            continue
        for entry in sorted(_listing(base) or [], key=lambda e: e.name):
            if entry.is_file() and AOT_LOG_RE.match(entry.name):
                run.logs.append(str(entry))
            elif entry.is_dir() and (gm := GRAPH_DIR_RE.match(entry.name)):
                listed = _listing(entry)
                if listed is None:  # a folder that cannot be listed tells nothing: left out
                    continue
                files = sorted(f.name for f in listed if f.is_file())
                run.graphs.append(GraphFolder(str(entry), f"{gm['aot']}_{gm['part']}", files))
                run.logs += [str(entry / f) for f in ("debug.log", "info.log") if f in files]
    # in the order Inductor made them (DebugContext's counter), then by name
    run.graphs.sort(key=lambda g: (_counter(g.path), g.path))
    return run


def _listing(d: Path) -> list[Path] | None:
    try:
        return list(d.iterdir())
    except OSError:
        return None


def _counter(path: str) -> int:
    m = GRAPH_DIR_RE.match(Path(path).name)
    return int(m["counter"]) if m and m["counter"] else -1


def graph_folder_of(path: str) -> re.Match[str] | None:
    """The name parts of the graph folder a file is in (None: not in one)."""
    return GRAPH_DIR_RE.match(Path(path).parent.name)


def debug_ties(text_logs: list[str], pid: int | None = None) -> dict[str, tuple[int | None, str, str]]:
    """Graph folder name -> (rank, compile id, trace id) from the `debug trace:` warnings of
    the stderr captures (of process `pid` when given: the run folder's)."""
    out: dict[str, tuple[int | None, str, str]] = {}
    for log in text_logs:
        try:
            data = _read(log)
        except OSError:
            continue
        if b" debug trace: " not in data:
            continue
        for m in _TIE_RE.finditer(data):
            if (pid is not None and int(m["_pid"]) != pid) or not m["tid"]:
                continue
            folder = Path(m["path"].decode("utf-8", "replace")).name
            tid = m["tid"].decode()
            rank = int(m["rank"]) if m["rank"] else None
            out[folder] = (rank, re.sub(r"_\d+$", "", tid), f"[{tid}]")
    return out


# a TORCH_TRACE wrapper record and its payload's first line: `\t# AOT ID: ['3_forward']`
_TRACE_WRAPPER_RE = re.compile(rb'\] \{"inductor_output_code": [^\n]*\n\t# AOT ID: \[\'([^\']+)\'\]')


def held_aot_ids(trace_path: str) -> set[str]:
    """The AOT graphs whose wrapper a TORCH_TRACE log holds (`inductor_output_code`, by its
    `# AOT ID`): a graph folder of the same process with one of these ids is the trace's
    already (parsers.sources)."""
    try:
        data = _read(trace_path)
    except OSError:
        return set()
    return {m.group(1).decode("utf-8", "replace") for m in _TRACE_WRAPPER_RE.finditer(data)}


def _read(path: str) -> bytes:
    from parsers.gzipped import is_gzip, read_all

    with open(path, "rb") as fh:
        if is_gzip(fh):
            return read_all(fh)[0]
        return fh.read()


def split_dynamo_log(text: str) -> list[tuple[int, int, str]]:
    """The messages of a `torchdynamo/debug.log` (`%(message)s` lines, no prefix): (first
    line, last line, text). A message starts at a line that is not indented; a graph-break
    message runs on (its reason title and `User code traceback:` are not indented either)
    until its traceback ends or another graph break or recompile starts."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out: list[tuple[int, int, str]] = []
    start: int | None = None
    in_gb = False
    gb_done = False

    def close(end: int) -> None:
        if start is not None:
            body = lines[start:end]
            while body and not body[-1].strip():
                body.pop()
            if body:
                out.append((start + 1, start + len(body), "\n".join(body)))

    for i, line in enumerate(lines):
        header = bool(_GB_HEADER.match(line) or _RECOMPILE.match(line))
        top = bool(line) and not line[0].isspace()
        if header or start is None or (top and (not in_gb or gb_done)):
            if not line.strip() and start is None:
                continue
            close(i)
            start, in_gb, gb_done = i, bool(_GB_HEADER.match(line)), False
            continue
        # the traceback ends a break's message; a duplicate's (user stack suppressed) has none
        if in_gb and (line.startswith("User code traceback:")
                      or ("For more details about this graph break" in line and "suppressed" in lines[start])):
            gb_done = True
    close(len(lines))
    return out


def _bracket_messages(text: str) -> list[tuple[int, int, str]]:
    """Messages of a `[file.py:N LEVEL] message` log: a message starts at such a line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out: list[tuple[int, int, str]] = []
    start = None
    for i, line in enumerate([*lines, "[end:0 END] "]):
        if _BRACKET_LINE.match(line) or i == len(lines):
            if start is not None:
                out.append((start + 1, i, "\n".join(lines[start:i])))
            start = i
    return [o for o in out if o[2].strip()]


def _artifact_of(msg: str) -> str | None:
    """The TORCH_LOGS artifact a prefix-less message belongs to, by its grammar."""
    if _GB_HEADER.match(msg):
        return "graph_breaks"
    if _RECOMPILE.match(msg):
        return "recompiles_verbose" if "\n    guard 0 failures:" in msg else "recompiles"
    return None


def _norm(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").split("\n")).strip()


def logged_with_prefix(text_logs: list[str], pid: int | None) -> set[str]:
    """The messages the stderr captures among `text_logs` hold for process `pid` (normalized
    text): `debug.log` repeats them without prefix, and the capture's record (compile id,
    rank, time) is the one that counts."""
    if not text_logs or pid is None or not any(_may_hold_pid(p, pid) for p in text_logs):
        return set()
    import polars as pl

    from parsers.textlog import read_text_log

    out: set[str] = set()
    for path in text_logs:
        try:
            recs = read_text_log(path).records
        except OSError:
            continue
        for t in recs.filter(pl.col("pid") == pid)["text"].to_list():
            out.add(_norm(t))
    return out


def _may_hold_pid(path: str, pid: int) -> bool:
    try:
        return f" {pid} ".encode() in _read(path)
    except OSError:
        return False


def debug_records(run: DebugRun, ties: dict[str, tuple[int | None, str, str]] | None = None,
                  elsewhere: set[str] | None = None, held: set[str] | None = None) -> pl.DataFrame:
    """The log records of a run folder: one per message of its logs (but those in `elsewhere`:
    logged_with_prefix), one per graph file (DEBUG_ARTIFACTS); a graph file's compile id from
    `ties` (debug_ties), else null. `held`: the folder's process has a TORCH_TRACE log among
    the inputs, which holds these AOT graphs (held_aot_ids) and Dynamo's messages: only the
    graph folders it lacks are read (parsers.sources)."""
    import polars as pl

    from parsers.textlog import LOG_RECORDS_SCHEMA

    ties = ties or {}
    elsewhere = elsewhere or set()
    rows: list[dict[str, Any]] = []

    def add(file: str, first: int, last: int, text: str, artifact: str | None, tie: tuple | None = None) -> None:
        rank, cid, tid = tie if tie else (None, None, None)
        rows.append({
            "file": file, "lineno": first, "end_lineno": last, "lines": last - first + 1, "contiguous": True,
            "rank": rank, "pid": run.pid, "compile_id": cid, "trace_id": tid,
            "artifact": artifact, "text": text,
        })

    if run.dynamo_log and held is None:
        for first, last, msg in split_dynamo_log(_text(run.dynamo_log) or ""):
            if _norm(msg) not in elsewhere:
                add(run.dynamo_log, first, last, msg, _artifact_of(msg))
    for log in run.logs if held is None else []:
        folder = graph_folder_of(log)
        tie = ties.get(Path(log).parent.name) if folder else None
        for first, last, msg in _bracket_messages(_text(log) or ""):
            add(log, first, last, msg, None, tie)
    for g in run.graphs:
        if held is not None and g.aot_id in held:
            continue
        tie = ties.get(Path(g.path).name)
        for name, artifact in DEBUG_ARTIFACTS.items():
            if name in g.files:
                f = str(Path(g.path) / name)
                text = _text(f)
                if text is not None and text.strip():
                    add(f, 1, max(text.count("\n"), 1), text.rstrip("\n"), artifact, tie)
    df = pl.DataFrame(rows, schema={k: LOG_RECORDS_SCHEMA[k] for k in (
        "file", "lineno", "end_lineno", "lines", "contiguous", "rank", "pid", "compile_id", "trace_id", "artifact", "text")})
    missing = [c for c in LOG_RECORDS_SCHEMA.names() if c not in df.columns]
    df = df.with_columns([pl.lit(None, dtype=LOG_RECORDS_SCHEMA[c]).alias(c) for c in missing])
    # a tied record: its frame ids and attempt as the text log's records carry them
    tid = pl.col("trace_id").str.extract_groups(r"^\[(?P<_f>\d+)/(?P<_c>\d+)(?:_(?P<_a>\d+))?\]$")
    df = df.with_columns(tid.alias("_t")).unnest("_t").with_columns(
        pl.col("_f").cast(pl.Int32).alias("frame_id"),
        pl.col("_c").cast(pl.Int32).alias("frame_compile_id"),
        pl.when(pl.col("trace_id").is_not_null()).then(pl.col("_a").cast(pl.Int32).fill_null(0)).alias("attempt"),
    )
    return df.select(LOG_RECORDS_SCHEMA.names()).cast(dict(LOG_RECORDS_SCHEMA))


def _text(path: str) -> str | None:
    """A file's text (bytes that are not UTF-8 replaced); None when it cannot be read (removed
    or unreadable since the folder was listed: the rest of the folder is still read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return None
