"""Where a row came from, and which one counts when a fact was logged twice.

Every fact, graph and kernel row says its `source`: `"trace"` (a TORCH_TRACE envelope) or
`"text"` (a TORCH_LOGS record). A run captured both ways logs most facts twice; the rule,
here and nowhere else: for each key (a compile, a graph break site, a kernel, ...) the
trace's rows win, and the text log's rows count only for keys the trace lacks (the trace
is structured and complete where it has a fact; the text log has facts the trace never
carries, e.g. seq_nr annotations, and captures of runs without TORCH_TRACE).

A TORCH_COMPILE_DEBUG=1 run folder (parsers.debugdir) is text of the same process: when a
TORCH_TRACE log of that process (same pid) is among the inputs (`covering_trace`), the trace
wins for what it holds: Dynamo's messages, and each graph folder whose AOT graph's wrapper the
trace has (`parsers.debugdir.held_aot_ids`; torch writes both from the same compile); only the
graph folders it lacks (a trace cut short) are read. Otherwise the folder's files are text-log
records like any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

TRACE = "trace"
TEXT = "text"


def prefer_trace(df: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """`df` without the text-log rows of any key that has a trace row (row order kept; null
    keys match each other). `keys` = () treats the whole frame as one key."""
    if df.height == 0 or "source" not in df.columns:
        return df
    from_trace = pl.col("source") == TRACE
    has_trace = from_trace.any().over(list(keys)) if keys else from_trace.any()
    return df.filter(from_trace | ~has_trace)


def covering_trace(pid: int | None, trace_pids: Mapping[str, int | None]) -> str | None:
    """The trace log (path) of the process `pid` among `trace_pids` (path -> pid), which a
    TORCH_COMPILE_DEBUG folder of that process yields to; None when there is none."""
    if pid is None:
        return None
    return next((path for path, p in trace_pids.items() if p == pid), None)
