"""The glog prefix every torch log line starts with: `L MMDD HH:MM:SS.ffffff PID path:line] `.

What is decided about it once, for trace logs and text logs alike: its grammar (the regexes
every reader of torch logs matches, as str for polars and `re`, as bytes for raw file heads)
and its year.

The grammar is written once, as text with named groups; the variants a reader needs are made
from that text: `plain` (no groups, faster where only the match counts), `renamed` (a reader's
own column names), `as_bytes` (the same text, for bytes).

glog prints no year: a record's year is the year of its file's last modification, or the
year before when the record's month comes after the modification's month (a log written
across New Year, modified in January, holds December records of the year before).
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl
# polars is imported where a timestamp is built: discovery (on the start-up path) reads the
# grammar and must not pay for polars.

# The rank prefix before a record (optional): torch's own `[rankN]:` (a process in a process
# group), torchrun's `--tee` prefix `[<role><local rank>]:` (`[default0]:`), or both
# (`[default0]:[rank0]:`, the global rank wins). Then level, MMDD, and time: the first fields,
# enough to tell a record's line from anything else. (No lookahead: polars' regex has none; the
# lazy `??` skips the first bracket only when a second one follows.)
_ROLE = r"[A-Za-z_][A-Za-z_.-]*"  # no digits: the rank's digits follow unambiguously (linear time)
# `tag`: the last bracket's name: `rank` where torch wrote it (the global rank), a torchrun role
# (`default`) where torchrun did (its number is the local rank: the rank only on one node);
# `local`: torchrun's local rank where both are there.
RANK = r"(?:\[" + _ROLE + r"(?P<local>\d+)\]:)??\[(?P<tag>" + _ROLE + r")(?P<rank>\d+)\]:"
HEAD = r"(?:" + RANK + r")?(?P<level>[VIWEC])(?P<md>\d{4}) (?P<time>\d\d:\d\d:\d\d\.\d{6})"
# The whole prefix up to and with its `]`: HEAD, thread id (glog's pid), `path:line`. A record's
# message starts after the `] ` that follows.
PREFIX = HEAD + r" +(?P<pid>\d+) (?P<src_file>[^\]]+):(?P<src_line>\d+)\]"

# A cluster launcher's prefix, before everything above, on each line of the output it collects
# from its processes (a text log only: torch writes its trace files itself). One of:
# * Slurm `srun -l` / `--label`: the task id, right-aligned to the width of the largest one, `: `
#   (`3: `, ` 3: ` among 11 or more tasks) — `task`;
# * Open MPI `mpirun --tag-output`: `[jobid,rank]<stdout>:` (`<stderr>:`, `<stddiag>:`), a space
#   may follow (4.1.4, run here, writes none; newer versions, PRRTE-based, are read the same) — `mpi_rank`;
# * MPICH / Intel MPI `mpiexec -l` (`-prepend-rank`): `[rank] ` — `pmi_rank`;
# * a host name (pdsh and the launchers built on it, DeepSpeed's), or host and rank, then `: `
#   (`node-017: `, `node-017:3: `) — `host`, `host_rank`.
# The launcher's number is its process index: the rank where the program is launched once per
# rank, not where it starts torchrun (then it is the node's index).
_HOST = r"[A-Za-z][A-Za-z0-9_.-]*"
LAUNCHER_FORMS = {
    "srun": r" *(?P<task>\d+): ",
    "mpirun": r"\[\d+,(?P<mpi_rank>\d+)\]<std(?:out|err|diag)>: ?",
    "mpiexec": r"\[(?P<pmi_rank>\d+)\] ",
    "host": r"(?P<host>" + _HOST + r")(?::(?P<host_rank>\d+))?: ",
}
# each form's group that says it is there
LAUNCHER_MARKS = {"srun": "task", "mpirun": "mpi_rank", "mpiexec": "pmi_rank", "host": "host"}


def launcher(forms: list[str] | None = None, hosts: list[str] | None = None) -> str:
    """The launcher prefix of the `forms` named (all when None); `hosts`: the host form only
    for these host names (a line that is no record is taken for prefixed only by a launcher
    and a host its file's records show: `RuntimeError: ...` is a message, not a host)."""
    alts = []
    for name, pat in LAUNCHER_FORMS.items():
        if forms is not None and name not in forms:
            continue
        if name == "host" and hosts is not None:
            pat = r"(?P<host>" + "|".join(re.escape(h) for h in hosts) + r")(?::(?P<host_rank>\d+))?: "
        alts.append(pat)
    return r"(?:" + "|".join(alts) + r")"


LAUNCHER = launcher()
# The launcher's groups that give a rank (the host alone does not).
LAUNCHER_RANKS = ("task", "mpi_rank", "pmi_rank", "host_rank")
# The same, for a text log's line: a launcher's prefix (optional), then torch's.
TEXT_HEAD = r"(?:" + LAUNCHER + r")?" + HEAD
TEXT_PREFIX = r"(?:" + LAUNCHER + r")?" + PREFIX


def line_ranks(forms: list[str] | None = None, hosts: list[str] | None = None) -> str:
    """What comes before the text of any line of a text log (a record's or not): the launcher's
    prefix (of `forms`, see `launcher`; none when `forms` is empty), then torchrun's and
    torch's (each optional; as a whole it may match nothing)."""
    lead = r"(?P<launcher>" + launcher(forms, hosts) + r")?" if forms is None or forms else ""
    return lead + r"(?:" + RANK + r")?"
# What torch's text-log formatter adds after the prefix (text logs only): ` [trace id]` and
# ` [__artifact]`.
TEXT_TAGS = r"(?: \[(?P<tid>!?\d+(?:/\d+){0,2}(?:_\d+)?)\])?(?: \[__(?P<artifact>[^\]\s]+)\])?"

_NAMED_GROUP = re.compile(r"\(\?P<(\w+)>")


def plain(pattern: str) -> str:
    """`pattern` without its named groups (each becomes a non-capturing group)."""
    return _NAMED_GROUP.sub("(?:", pattern)


def renamed(pattern: str, **names: str) -> str:
    """`pattern` with its groups renamed (`renamed(PREFIX, rank="prefix_rank")`)."""
    unknown = set(names) - set(_NAMED_GROUP.findall(pattern))
    if unknown:
        raise ValueError(f"no group {sorted(unknown)} in the pattern")
    return _NAMED_GROUP.sub(lambda m: f"(?P<{names.get(m.group(1), m.group(1))}>", pattern)


def as_bytes(pattern: str) -> bytes:
    """The same pattern, for matching bytes (the grammar is ASCII)."""
    return pattern.encode("ascii")


def year_and_month(mtime: float | None) -> tuple[int, int]:
    """The year and month of a file's mtime (now when there is none), in local time as glog
    writes them."""
    d = _dt.datetime.fromtimestamp(mtime if mtime is not None else _dt.datetime.now().timestamp())
    return d.year, d.month


def timestamp(md: pl.Expr, time: pl.Expr, year: pl.Expr | int, month: pl.Expr | int) -> pl.Expr:
    """The record's time from the prefix's `MMDD` and `HH:MM:SS.ffffff` and the file's mtime
    year and month (see the module doc); null where the prefix does not parse."""
    import polars as pl

    year_e = pl.lit(year) if isinstance(year, int) else year
    month_e = pl.lit(month) if isinstance(month, int) else month
    mon = md.str.slice(0, 2).cast(pl.Int32, strict=False)
    yr = pl.when(mon > month_e).then(year_e - 1).otherwise(year_e).cast(pl.String)
    return pl.concat_str(yr, md, pl.lit(" "), time).str.strptime(pl.Datetime("us"), "%Y%m%d %H:%M:%S%.f", strict=False)
