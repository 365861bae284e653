"""Every table's schema, by table name, in one place: where each is defined (the parser
that builds the table) and an empty table of it (what a reader gets where a part has none).

The defining module is imported only for the table asked for: an empty `log_records` needs
no trace-log parser.
"""

from __future__ import annotations

import importlib

import polars as pl

# where each table's schema is defined (imported only for the table asked for)
TABLE_SCHEMAS = {
    "seq_links": ("parsers.seq_links", "SEQ_LINKS_SCHEMA"),
    "graphs": ("parsers.graphs", "GRAPHS_SCHEMA"),
    "graph_nodes": ("parsers.graphs", "GRAPH_NODES_SCHEMA"),
    "kernels": ("parsers.graphs", "KERNELS_SCHEMA"),
    "kernel_calls": ("parsers.graphs", "KERNEL_CALLS_SCHEMA"),
    "provenance": ("parsers.graphs", "PROVENANCE_TABLE_SCHEMA"),
    "events": ("parsers.torch_trace.schemas", "EVENTS_SCHEMA"),
    "strings": ("parsers.torch_trace.schemas", "STRINGS_SCHEMA"),
    "stats": ("parsers.torch_trace.schemas", "STATS_SCHEMA"),
    "problems": ("parsers.torch_trace.schemas", "PROBLEMS_SCHEMA"),
    "log_records": ("parsers.textlog", "LOG_RECORDS_SCHEMA"),
    "other_lines": ("parsers.textlog", "OTHER_LINES_SCHEMA"),
    "compiles": ("parsers.compiles", "COMPILES_SCHEMA"),
    "spans": ("parsers.compiles", "SPANS_SCHEMA"),
    "cudagraphs": ("parsers.cudagraphs", "CUDAGRAPHS_SCHEMA"),
    "collectives": ("parsers.collectives", "COLLECTIVES_SCHEMA"),
    "graph_execution": ("parsers.collectives", "GRAPH_EXECUTION_SCHEMA"),
    "ddp_splits": ("parsers.collectives", "DDP_SPLITS_SCHEMA"),
}


def table_schema(name: str) -> pl.Schema:
    """The schema of table `name` (KeyError for a table that does not exist)."""
    if name in TABLE_SCHEMAS:
        module, attr = TABLE_SCHEMAS[name]
        schema = getattr(importlib.import_module(module), attr)
    else:  # recompiles, graph_breaks, limit_hits, annotations, ...
        from parsers import facts

        schema = facts.SCHEMAS[name]
    return pl.Schema(dict(schema))


def empty_table(name: str) -> pl.DataFrame:
    """Table `name` with no rows."""
    return pl.DataFrame(schema=table_schema(name))
