"""The process cache of parsed FX graphs, and the choice of parser for each text.

:func:`parse` serves :func:`parsers.fxgraph.parse_fx_graphs`: a call with many texts looks
each text up in this process's cache first (an export parses the graphs of many files, one
group at a time, and the ranks of a job log the same graphs); the texts not seen before are
parsed by :func:`parse_uncached`, which parses each distinct text of the call once, with the
vectorized parser (:mod:`parsers.fxgraph.columns`) or, for little text and ``include_meta``
blocks, the reference parser (:mod:`parsers.fxgraph.reference`). Cached or not, the rows are
the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from parsers.fxgraph import columns
from parsers.fxgraph.reference import NODE_SCHEMA, parse_rows

__all__ = ["CACHE_MAX_ROWS", "cached_texts", "clear", "parse", "parse_uncached"]

# Parsed graphs of this process by text (two 64-bit hashes and the length: a collision is
# out of reach), for the many calls of one export: the ranks of a job log the same graphs.
_CACHE: dict[tuple[int, int, int], pl.DataFrame] = {}
_CACHE_ROWS = [0]
CACHE_MAX_ROWS = 100_000  # about 20-30 MB of parsed nodes
_CACHE_MIN_TEXTS = 8  # fewer texts: assembling from the cache costs more than it saves


def parse(tx: pl.Series) -> pl.DataFrame:
    """parse_fx_graphs of texts (no nulls, at least one): through the cache when there are
    enough of them."""
    if tx.len() >= _CACHE_MIN_TEXTS:
        return _parse_cached(tx)
    return parse_uncached(tx)


def clear() -> None:
    """Empty the process cache."""
    _CACHE.clear()
    _CACHE_ROWS[0] = 0


def cached_texts() -> int:
    """How many distinct texts the process cache holds."""
    return len(_CACHE)


def _parse_cached(tx: pl.Series) -> pl.DataFrame:
    keys = list(zip(tx.hash(11).to_list(), tx.hash(23).to_list(), tx.str.len_bytes().to_list()))
    if _CACHE_ROWS[0] > CACHE_MAX_ROWS:  # over budget: start again (before looking anything up)
        _CACHE.clear()
        _CACHE_ROWS[0] = 0
    new: dict[tuple[int, int, int], int] = {}
    for i, k in enumerate(keys):
        if k not in _CACHE and k not in new:
            new[k] = i
    if new:
        parsed = parse_uncached(tx.gather(list(new.values())))
        by_graph = parsed.partition_by("graph", as_dict=True, include_key=False)
        empty = parsed.clear().drop("graph")
        for j, k in enumerate(new):
            rows = by_graph.get((j,), empty)
            _CACHE[k] = rows
            _CACHE_ROWS[0] += rows.height
    frames = [_CACHE[k] for k in keys]
    graph = np.repeat(np.arange(len(frames), dtype=np.uint32), [f.height for f in frames])
    # one chunk per column: polars 2.1's element-wise string kernels (str.contains with a
    # column pattern) panic on columns of many small chunks
    return pl.concat(frames).select(pl.Series("graph", graph, dtype=pl.UInt32), *NODE_SCHEMA).rechunk()


def parse_uncached(tx: pl.Series) -> pl.DataFrame:
    """parse_fx_graphs without the cache."""
    if tx.len() > 1:
        # a trace often logs the same graph text twice (pre_grad before/after, joint
        # before/after, ...): parse each distinct text once, then repeat its rows
        first = pl.DataFrame({"t": tx, "i": np.arange(tx.len())}).select(
            pl.col("i").first().over("t"))["i"].to_numpy()
        uniq = np.flatnonzero(first == np.arange(tx.len()))
        if len(uniq) < tx.len():
            nodes = _parse_distinct(tx.gather(uniq))
            k_of = np.searchsorted(uniq, first)  # graph -> position of its text in uniq
            cnt = np.bincount(nodes["graph"].to_numpy(), minlength=len(uniq))
            start = np.concatenate([[0], np.cumsum(cnt)[:-1]])
            idx = np.concatenate([np.arange(start[k], start[k] + cnt[k]) for k in k_of])
            return nodes[idx].with_columns(
                pl.Series("graph", np.repeat(np.arange(tx.len()), cnt[k_of]), dtype=pl.UInt32))
    return _parse_distinct(tx)


def _parse_distinct(tx: pl.Series) -> pl.DataFrame:
    """parse_fx_graphs of texts (no nulls): vectorized, or line by line for little text."""
    schema = {"graph": pl.UInt32, **NODE_SCHEMA}
    if (tx.str.len_bytes().sum() or 0) < columns.VECTOR_MIN_BYTES:
        slow = np.ones(tx.len(), dtype=bool)
    else:
        slow = tx.str.contains('"""', literal=True).to_numpy()
    parts: list[pl.DataFrame] = []
    fast_idx = np.flatnonzero(~slow)
    if len(fast_idx):
        sub = tx if len(fast_idx) == tx.len() else tx.gather(fast_idx)
        parts.append(columns.parse_many(sub, fast_idx))
    slow_idx = np.flatnonzero(slow)
    if len(slow_idx):
        cols: dict[str, list[Any]] = {k: [] for k in schema}
        slow_texts = tx.to_list() if len(slow_idx) == tx.len() else tx.gather(slow_idx).to_list()
        for gi, text in zip(slow_idx.tolist(), slow_texts):
            rows = parse_rows(text)
            cols["graph"].extend([gi] * len(rows))
            for k in NODE_SCHEMA:
                cols[k].extend([r[k] for r in rows])
        parts.append(pl.DataFrame(cols, schema=schema))
    out = pl.concat(parts) if len(parts) > 1 else parts[0]
    if len(slow_idx) and len(fast_idx):
        out = out.sort("graph", maintain_order=True)
    return out

