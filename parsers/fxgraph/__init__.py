"""FX graph text (``GraphModule.print_readable``) -> one row per graph node.

The text is what torch writes for ``dynamo_output_graph``, ``aot_*_graph``,
``before/after_pre_grad_graph``, ``before/after_joint_graph``, ``before_post_grad_graph``,
``inductor_post_grad_graph``, ``optimize_ddp_split_*``, ``compiled_autograd_graph`` in a
TORCH_TRACE, and the ``TRACED GRAPH`` blocks of TORCH_LOGS (``aot_graphs``, ``graph_code``,
``post_grad_graphs``, ...); the grammar is described in :mod:`parsers.fxgraph.reference`.

Only the graph text is read: no analysis here. ``parse_fx_graphs`` parses many texts at once
with polars string kernels (for the big traces); it gives exactly the rows of the line-by-line
parser (``parse_fx_graph_rows``), which it uses for little text and odd lines.

The modules, bottom up (all read lines with :mod:`parsers.lexing`: string literals,
brackets, comments and signature parameters of printed Python, shared with the wrapper-code
and message parsers):

* :mod:`~parsers.fxgraph.dumps`: which payloads are graph texts, the ``TRACED GRAPH`` blocks
  of a text log, and the graph kind of each.
* :mod:`~parsers.fxgraph.reference`: the grammar and the readable line-by-line parser, the
  specification the vectorized parser is tested against.
* :mod:`~parsers.fxgraph.columns`: the vectorized parser (same rows, many texts at once).
* :mod:`~parsers.fxgraph.cache`: the process cache of parsed graphs, and which parser reads
  which text.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from parsers.fxgraph import cache, columns
from parsers.fxgraph.cache import CACHE_MAX_ROWS
from parsers.fxgraph.dumps import (
    GRAPH_KINDS,
    GraphDump,
    graph_kind,
    is_graph_text,
    split_traced_graphs,
)
from parsers.fxgraph.reference import NODE_SCHEMA, parse_rows
from parsers.lexing import split_top_level

__all__ = [
    "CACHE_MAX_ROWS",
    "GRAPH_KINDS",
    "NODE_SCHEMA",
    "GraphDump",
    "graph_kind",
    "is_graph_text",
    "parse_fx_graph",
    "parse_fx_graph_rows",
    "parse_fx_graphs",
    "split_top_level",
    "split_traced_graphs",
]


def parse_fx_graphs(texts: pl.Series | list[str | None]) -> pl.DataFrame:
    """Parse many FX graph texts at once.

    Returns the NODE_SCHEMA columns plus ``graph`` (u32, position of the text in ``texts``),
    sorted by graph then ``order``; the rows of each graph equal ``parse_fx_graph(text)``.
    Little text is parsed graph by graph (the vectorized parser has a fixed cost of a few
    milliseconds); texts with ``include_meta`` blocks always are.
    """
    tx = texts if isinstance(texts, pl.Series) else pl.Series("text", texts, dtype=pl.String)
    if tx.dtype != pl.String:
        tx = tx.cast(pl.String)
    if tx.null_count():
        tx = tx.fill_null("")
    schema = {"graph": pl.UInt32, **NODE_SCHEMA}
    if tx.len() == 0:
        return pl.DataFrame(schema=schema)
    return cache.parse(tx)


def parse_fx_graph_rows(text: str) -> list[dict[str, Any]]:
    """Parse ``print_readable`` text into node rows (dicts with the NODE_SCHEMA keys)."""
    if len(text) < columns.VECTOR_MIN_BYTES:
        return parse_rows(text)
    return parse_fx_graphs([text]).drop("graph").to_dicts()


def parse_fx_graph(text: str) -> pl.DataFrame:
    """Parse one FX graph text into a DataFrame with the NODE_SCHEMA columns."""
    return parse_fx_graphs([text]).drop("graph")
