"""Where a row came from, and which one counts when a fact was logged twice.

Every fact, graph and kernel row says its `source`: `"trace"` (a TORCH_TRACE envelope) or
`"text"` (a TORCH_LOGS record). A run captured both ways logs most facts twice; the rule,
here and nowhere else: for each key (a compile, a graph break site, a kernel, ...) the
trace's rows win, and the text log's rows count only for keys the trace lacks (the trace
is structured and complete where it has a fact; the text log has facts the trace never
carries, e.g. seq_nr annotations, and captures of runs without TORCH_TRACE).
"""

from __future__ import annotations

from collections.abc import Sequence

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
