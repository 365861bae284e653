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
RANK = r"(?:\[" + _ROLE + r"\d+\]:)??\[" + _ROLE + r"(?P<rank>\d+)\]:"
HEAD = r"(?:" + RANK + r")?(?P<level>[VIWEC])(?P<md>\d{4}) (?P<time>\d\d:\d\d:\d\d\.\d{6})"
# The whole prefix up to and with its `]`: HEAD, thread id (glog's pid), `path:line`. A record's
# message starts after the `] ` that follows.
PREFIX = HEAD + r" +(?P<pid>\d+) (?P<src_file>[^\]]+):(?P<src_line>\d+)\]"
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
