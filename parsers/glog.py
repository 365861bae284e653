"""The glog prefix every torch log line starts with: `L MMDD HH:MM:SS.ffffff PID path:line] `.

What is decided about it once, for trace logs and text logs alike. (The prefix regexes still
live in parsers.tracelog, parsers.textlog and parsers.discover; see docs/notes of issue 17.)

glog prints no year: a record's year is the year of its file's last modification, or the
year before when the record's month comes after the modification's month (a log written
across New Year, modified in January, holds December records of the year before).
"""

from __future__ import annotations

import datetime as _dt

import polars as pl


def year_and_month(mtime: float | None) -> tuple[int, int]:
    """The year and month of a file's mtime (now when there is none), in local time as glog
    writes them."""
    d = _dt.datetime.fromtimestamp(mtime if mtime is not None else _dt.datetime.now().timestamp())
    return d.year, d.month


def timestamp(md: pl.Expr, time: pl.Expr, year: pl.Expr | int, month: pl.Expr | int) -> pl.Expr:
    """The record's time from the prefix's `MMDD` and `HH:MM:SS.ffffff` and the file's mtime
    year and month (see the module doc); null where the prefix does not parse."""
    year_e = pl.lit(year) if isinstance(year, int) else year
    month_e = pl.lit(month) if isinstance(month, int) else month
    mon = md.str.slice(0, 2).cast(pl.Int32, strict=False)
    yr = pl.when(mon > month_e).then(year_e - 1).otherwise(year_e).cast(pl.String)
    return pl.concat_str(yr, md, pl.lit(" "), time).str.strptime(pl.Datetime("us"), "%Y%m%d %H:%M:%S%.f", strict=False)
