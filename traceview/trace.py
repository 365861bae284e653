"""The `Trace` model: every table of one input, as polars DataFrames.

A Trace is built from tables that are given (parsed parts, a cache entry, an export) or
built on first use from other tables (`compiles` from `events`, `seq_links` from
`graph_nodes` and `annotations`, ...). Given tables may be callables, so that a large table
(`events`, memory-mapped per input file) is only opened when something asks for it: the
summary of a cached trace never touches the payloads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import polars as pl

from parsers.compile_ids import with_labels
from parsers.sources import prefer_trace

if TYPE_CHECKING:
    from parsers.discover import Inputs

BASE_TABLES = ("events", "strings", "stats", "problems", "log_records", "other_lines")
DERIVED_TABLES = (
    "compiles",
    "spans",
    "recompiles",
    "graph_breaks",
    "graph_break_records",
    "guards",
    "limit_hits",
    "annotations",
    "graphs",
    "graph_nodes",
    "kernels",
    "kernel_calls",
    "provenance",
    "seq_links",
    "cudagraphs",
    "collectives",
    "graph_execution",
    "ddp_splits",
)
TABLES = BASE_TABLES + DERIVED_TABLES
FACT_TABLES = ("recompiles", "graph_break_records", "limit_hits", "annotations")
# Built on demand (the UI, export): guard trees and graph text are not needed for the summary.
GRAPH_TABLES = ("guards", "graphs", "graph_nodes", "kernels", "kernel_calls", "provenance", "seq_links")

TableSource = pl.DataFrame | Callable[[], pl.DataFrame]


class PartStore(Protocol):
    """The parsed parts behind a Trace (traceview.ingest.pipeline.Parts: a parse cache entry or a
    temporary directory), for what a Trace cannot build from its tables alone."""

    workdir: Path

    def build_graph_tables(self, *, jobs: int | None = None) -> None:
        """Build the GRAPH_TABLES of every part (in worker processes)."""

    def table(self, name: str) -> Callable[[], pl.DataFrame]:
        """A loader of table `name` over every part."""

    def index_events(self) -> pl.DataFrame:
        """The events as parsed (the summary's payloads only)."""


def _fact(name: str, t: Trace) -> pl.DataFrame:
    """One fact table: the trace's rows, then the text log's (each row says its `source`)."""
    from parsers import facts

    if name == "annotations":  # seq_nr is only in the text log
        trace_side = pl.DataFrame(schema=facts.SCHEMAS["annotations"])
    elif name == "graph_break_records":
        trace_side = facts.graph_breaks_from_trace(t.events)
    else:
        trace_side = getattr(facts, f"{name}_from_trace")(t.events, t.compiles)
    if t.log_records.height == 0:
        return trace_side
    text_side = (facts.graph_breaks_from_text if name == "graph_break_records" else getattr(facts, f"{name}_from_text"))(t.log_records)
    return pl.concat([trace_side, text_side], how="vertical_relaxed")


# A run logged both to a trace and to a text log describes each wrapper (and each compile's
# seq links) twice: these tables keep the trace's rows of each key, the text log's only where
# the trace has none (parsers.sources).
_FACT_KEYS = {
    "kernels": ["rank", "compile_id", "graph"],
    "kernel_calls": ["rank", "compile_id", "graph"],
    "seq_links": ["rank", "compile_id"],
}


def one_row_per_fact(name: str, df: pl.DataFrame) -> pl.DataFrame:
    """Table `name` with each fact once (see _FACT_KEYS); other tables unchanged."""
    keys = _FACT_KEYS.get(name)
    return df if keys is None else prefer_trace(df, keys)


def _deduplicated(name: str, load: Callable[[], pl.DataFrame]) -> Callable[[], pl.DataFrame]:
    return lambda: one_row_per_fact(name, load())


def _build(name: str, t: Trace) -> pl.DataFrame:
    """Build a derived table from the tables it depends on."""
    if name == "compiles":
        from parsers.compiles import build_compiles

        return build_compiles(t.events, t.strings)
    if name == "spans":
        from parsers.compiles import build_spans

        return build_spans(t.events)
    if name == "cudagraphs":
        from parsers.cudagraphs import cudagraphs_from_text, cudagraphs_from_trace

        return pl.concat([cudagraphs_from_trace(t.compiles, t.spans), cudagraphs_from_text(t.log_records)])
    if name in FACT_TABLES:
        return _fact(name, t)
    if name == "graph_breaks":  # one row per break, of the records of both sources
        from parsers.facts import graph_breaks

        return graph_breaks(t.graph_break_records, t.compiles)
    if name in ("collectives", "graph_execution", "ddp_splits"):
        from parsers.collectives import build_collectives, build_ddp_splits, build_graph_execution

        # their payloads are parse-time ones (parsers.kinds): the events' index holds them
        build = {"collectives": build_collectives, "graph_execution": build_graph_execution}.get(name, build_ddp_splits)
        return build(t.index_events())
    if name == "guards":
        from parsers.facts import guards_from_text, guards_from_trace

        return pl.concat([guards_from_trace(t.events), guards_from_text(t.log_records)], how="vertical_relaxed")
    from parsers import graphs as g

    if name == "graphs":
        return g.build_graphs(t.events, t.log_records)
    if name == "graph_nodes":
        return g.build_graph_nodes(t.graphs)
    if name == "kernels":
        return one_row_per_fact(name, g.build_kernels(t.events, t.log_records))
    if name == "kernel_calls":
        return one_row_per_fact(name, g.build_kernel_calls(t.events, t.log_records))
    if name == "provenance":
        return g.build_provenance(t.events)
    if name == "seq_links":
        from parsers.seq_links import seq_links

        return one_row_per_fact(name, seq_links(t.graph_nodes, t.annotations))
    raise KeyError(f"no table named {name!r}; tables: {', '.join(TABLES)}")


class Trace:
    """All tables of one trace (one or more ranks, trace logs and/or text logs).

    Every name in `TABLES` is an attribute holding a polars DataFrame.
    """

    events: pl.DataFrame
    strings: pl.DataFrame
    stats: pl.DataFrame
    problems: pl.DataFrame
    log_records: pl.DataFrame
    other_lines: pl.DataFrame
    compiles: pl.DataFrame
    spans: pl.DataFrame
    recompiles: pl.DataFrame
    graph_breaks: pl.DataFrame
    graph_break_records: pl.DataFrame
    guards: pl.DataFrame
    limit_hits: pl.DataFrame
    annotations: pl.DataFrame
    graphs: pl.DataFrame
    graph_nodes: pl.DataFrame
    kernels: pl.DataFrame
    kernel_calls: pl.DataFrame
    provenance: pl.DataFrame
    seq_links: pl.DataFrame
    cudagraphs: pl.DataFrame
    collectives: pl.DataFrame
    graph_execution: pl.DataFrame
    ddp_splits: pl.DataFrame

    def __init__(
        self,
        tables: Mapping[str, TableSource],
        *,
        inputs: Inputs | None = None,
        parts: PartStore | None = None,
        index: Callable[[], pl.DataFrame] | None = None,
    ) -> None:
        missing = [n for n in BASE_TABLES if n not in tables]
        if missing:
            raise ValueError(f"Trace needs the base tables; missing: {', '.join(missing)}")
        self._sources: dict[str, TableSource] = dict(tables)
        self._tables: dict[str, pl.DataFrame] = {}
        self._index: pl.DataFrame | None = None  # see index_events
        self._kept: dict[str, object] = {}  # see keep: results derived from the tables
        self._index_loader = index  # index_events of a trace read from tables (an export)
        self._summary: dict[str, Callable[[], pl.DataFrame] | pl.DataFrame] = {}  # see summary_table
        self._rank_reader: Callable[[str, int | None], pl.DataFrame] | None = None  # see rank_rows
        self.inputs = inputs
        self.parts = parts  # the parsed parts (cache entry) behind the tables, if any
        self.workdir: Path | None = parts.workdir if parts is not None else None

    def table(self, name: str) -> pl.DataFrame:
        """The table called `name` (built or opened on first use)."""
        df = self._tables.get(name)
        if df is None:
            if name not in TABLES:
                raise KeyError(f"no table named {name!r}; tables: {', '.join(TABLES)}")
            src = self._sources.get(name)
            df = _build(name, self) if src is None else (src() if callable(src) else src)
            if name not in BASE_TABLES:  # the records keep their own trace_id
                df = with_labels(df, df if name == "compiles" else self.compiles)
            self._tables[name] = df
        return df

    def is_loaded(self, name: str) -> bool:
        """Whether the table has been opened or built already."""
        return name in self._tables

    def provide(self, name: str, source: TableSource) -> None:
        """Replace how a table is obtained (e.g. tables built in parallel by the pipeline);
        when the table had been read, what was derived from the tables (keep) is derived again
        on next use (a table not read yet fed nothing)."""
        self._sources[name] = source
        if self._tables.pop(name, None) is not None:
            self._kept.clear()

    def keep(self, name: str, build: Callable[[], object]) -> object:
        """`build()`'s result, computed the first time `name` is asked of this Trace and kept
        until one of its tables is replaced (provide): an analysis several readers share
        (traceview.analyze.per_trace)."""
        if name not in self._kept:
            self._kept[name] = build()
        return self._kept[name]

    def tables(self) -> dict[str, pl.DataFrame]:
        """Every table, derived ones computed."""
        return {name: self.table(name) for name in TABLES}

    @property
    def ranks(self) -> list[int]:
        """Ranks present (empty for a single process without ranks)."""
        parts = [df.select("rank") for df in (self.stats, self.log_records) if "rank" in df.columns]
        r = pl.concat(parts, how="vertical_relaxed")["rank"]
        return sorted(int(x) for x in r.drop_nulls().unique().to_list())

    def ensure_graph_tables(self, *, jobs: int | None = None) -> None:
        """Build guards, graph and kernel tables of every parsed part in parallel worker
        processes (kept in the parse cache), instead of one after another on first use."""
        if self.parts is None or all(self.is_loaded(n) for n in GRAPH_TABLES):
            return
        self.parts.build_graph_tables(jobs=jobs)
        for name in GRAPH_TABLES:
            if not self.is_loaded(name):
                # parts are built one file (trace or text log) at a time: deduplicate here
                self.provide(name, _deduplicated(name, self.parts.table(name)))
        # the payloads' md5 was checked on the way: events and problems now say so
        for name in ("events", "problems"):
            if self.is_loaded(name):
                self.provide(name, self.parts.table(name))

    def index_events(self) -> pl.DataFrame:
        """`events` as parsed, cheap to open: only the payloads the summary reads (chromium
        events, recompile reasons, graph-break reasons; parsers.kinds.SUMMARY_PAYLOAD_*) are
        filled when the trace came from parsed parts or an export; otherwise the `events`
        table itself."""
        if self.is_loaded("events") or (self.parts is None and self._index_loader is None):
            return self.events
        if self._index is None:
            self._index = self.parts.index_events() if self.parts is not None else self._index_loader()  # type: ignore[misc]
        return self._index

    def provide_summary(self, name: str, source: Callable[[], pl.DataFrame]) -> None:
        """Give a table the summary reads in the smaller form an export's digest holds
        (traceview.ingest.digest: `guards`, the guard rows it reads; `cache_lookups` and
        `cache_components`, the cache keys with each list of components once)."""
        self._summary[name] = source

    def summary_table(self, name: str) -> pl.DataFrame | None:
        """The summary's form of a table (provide_summary), None when none was given."""
        src = self._summary.get(name)
        if callable(src):
            src = self._summary[name] = src()
        return src

    def provide_rank_reader(self, read: Callable[[str, int | None], pl.DataFrame]) -> None:
        """Give how to read one rank's rows of a table without opening the table (exports: that
        rank's files alone; see rank_rows)."""
        self._rank_reader = read

    def rank_rows(self, name: str, rank: int | None) -> pl.DataFrame:
        """Table `name`'s rows of one rank (None: the processes without a rank): a detail the
        summary reads for one rank (a crash's kernel calls), read from that rank's files alone
        when the trace comes from exports and the table is not open yet."""
        if self._rank_reader is not None and not self.is_loaded(name):
            return self._rank_reader(name, rank)
        df = self.table(name)
        if "rank" not in df.columns:
            return df
        return df.filter(pl.col("rank").is_null() if rank is None else pl.col("rank") == rank)

    def summary_guards(self) -> pl.DataFrame | None:
        """The guards the summary reads without building the guards table: the guards table
        when it is loaded, else an export digest's guard rows (traceview.ingest.digest), else
        None (the analyzers read them from the compile's own payload)."""
        if self.is_loaded("guards"):
            return self.guards
        return self.summary_table("guards")

    @classmethod
    def from_tables(
        cls, tables: Mapping[str, TableSource], inputs: Inputs | None = None, index: Callable[[], pl.DataFrame] | None = None
    ) -> Trace:
        """A Trace over tables computed before (export, cache); `index`: a loader of the events
        with only the payloads the summary reads (see index_events), when it is cheaper than
        the `events` table."""
        return cls(tables, inputs=inputs, index=index)


def table_schema(name: str) -> pl.Schema:
    """The columns of table `name` as a Trace gives it: the parser's schema, and `label` for
    the tables with a compile id (parsers.compile_ids.with_labels) other than the records."""
    from parsers.schemas import table_schema as parsed

    schema = parsed(name)
    if name not in BASE_TABLES and "compile_id" in schema and "label" not in schema:
        schema = pl.Schema({**schema, "label": pl.String})
    return schema


def _table_property(name: str) -> property:
    return property(lambda self: self.table(name), doc=f"The `{name}` table (see docs/tables*.md).")


for _name in TABLES:
    setattr(Trace, _name, _table_property(_name))

