"""The `Trace` model: every table of one input, as polars DataFrames.

Base tables come from the parsers (`events`, `strings`, `stats`, `problems`, and the text-log
tables); everything else is derived on first use and kept (`compiles`, `spans`, `recompiles`,
`graph_breaks`, `guards`, `graphs`, `graph_nodes`, `kernels`, `seq_links`, ...).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property

import polars as pl

from parsers.discover import Inputs, discover
from parsers.tracelog import read_trace

BASE_TABLES = ("events", "strings", "stats", "problems", "log_records", "other_lines")
DERIVED_TABLES = (
    "compiles",
    "spans",
    "recompiles",
    "graph_breaks",
    "guards",
    "limit_hits",
    "annotations",
    "graphs",
    "graph_nodes",
    "kernels",
    "seq_links",
)
TABLES = BASE_TABLES + DERIVED_TABLES


@dataclass
class Trace:
    """All tables of one trace (one or more ranks, trace logs and/or text logs)."""

    events: pl.DataFrame
    strings: pl.DataFrame
    stats: pl.DataFrame
    problems: pl.DataFrame
    log_records: pl.DataFrame
    other_lines: pl.DataFrame
    inputs: Inputs | None = None
    _given: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)

    # -- derived tables -------------------------------------------------------------
    def _derived(self, name: str) -> pl.DataFrame | None:
        return self._given.get(name)

    @cached_property
    def compiles(self) -> pl.DataFrame:
        from parsers.compiles import build_compiles

        return self._derived("compiles") if "compiles" in self._given else build_compiles(self.events, self.strings)

    @cached_property
    def spans(self) -> pl.DataFrame:
        from parsers.compiles import build_spans

        return self._given["spans"] if "spans" in self._given else build_spans(self.events)

    @cached_property
    def _facts(self) -> dict[str, pl.DataFrame]:
        from parsers.facts import facts_from_text, facts_from_trace

        tr = facts_from_trace(self.events, self.compiles)
        if self.log_records.height == 0:
            return tr
        tx = facts_from_text(self.log_records)
        return {k: pl.concat([tr[k], tx[k]], how="vertical_relaxed") for k in tr}

    def _fact(self, name: str) -> pl.DataFrame:
        return self._given[name] if name in self._given else self._facts[name]

    @cached_property
    def recompiles(self) -> pl.DataFrame:
        return self._fact("recompiles")

    @cached_property
    def graph_breaks(self) -> pl.DataFrame:
        return self._fact("graph_breaks")

    @cached_property
    def guards(self) -> pl.DataFrame:
        return self._fact("guards")

    @cached_property
    def limit_hits(self) -> pl.DataFrame:
        return self._fact("limit_hits")

    @cached_property
    def annotations(self) -> pl.DataFrame:
        return self._fact("annotations")

    @cached_property
    def graphs(self) -> pl.DataFrame:
        from parsers.graphs import build_graphs

        return self._given["graphs"] if "graphs" in self._given else build_graphs(self.events, self.log_records)

    @cached_property
    def graph_nodes(self) -> pl.DataFrame:
        from parsers.graphs import build_graph_nodes

        return self._given["graph_nodes"] if "graph_nodes" in self._given else build_graph_nodes(self.graphs)

    @cached_property
    def kernels(self) -> pl.DataFrame:
        from parsers.graphs import build_kernels

        return self._given["kernels"] if "kernels" in self._given else build_kernels(self.events, self.log_records)

    @cached_property
    def seq_links(self) -> pl.DataFrame:
        from traceview.analyze.origin import seq_links

        return self._given["seq_links"] if "seq_links" in self._given else seq_links(self.graph_nodes, self.annotations)

    # -- helpers ------------------------------------------------------------------
    @property
    def ranks(self) -> list[int]:
        """Ranks present (empty for a single process without ranks)."""
        r = pl.concat(
            [self.events.select("rank"), self.log_records.select("rank")], how="vertical_relaxed"
        )["rank"]
        return sorted(int(x) for x in r.drop_nulls().unique().to_list())

    def table(self, name: str) -> pl.DataFrame:
        if name not in TABLES:
            raise KeyError(f"no table named {name!r}; tables: {', '.join(TABLES)}")
        return getattr(self, name)

    def tables(self) -> dict[str, pl.DataFrame]:
        """Every table, derived ones computed."""
        return {name: getattr(self, name) for name in TABLES}

    @classmethod
    def from_tables(cls, tables: dict[str, pl.DataFrame], inputs: Inputs | None = None) -> Trace:
        """A Trace over tables that were computed before (export, cache)."""
        base = {k: tables[k] for k in BASE_TABLES}
        given = {k: v for k, v in tables.items() if k in DERIVED_TABLES}
        return cls(**base, inputs=inputs, _given=given)


def _empty_text_tables() -> tuple[pl.DataFrame, pl.DataFrame]:
    from parsers.textlog import LOG_RECORDS_SCHEMA, OTHER_LINES_SCHEMA

    return pl.DataFrame(schema=LOG_RECORDS_SCHEMA), pl.DataFrame(schema=OTHER_LINES_SCHEMA)


def load(
    path: str | os.PathLike[str],
    *,
    latest: bool = False,
    logs: list[str] | None = None,
    jobs: int | None = None,
) -> Trace:
    """Load a TORCH_TRACE directory or file, a TORCH_LOGS text log, or a directory of both.

    `latest` keeps only the newest run when a directory holds several; `logs` adds text logs.
    """
    inputs = discover(path, latest=latest, extra_logs=logs)
    return load_inputs(inputs, jobs=jobs)


def load_inputs(inputs: Inputs, *, jobs: int | None = None) -> Trace:
    """Parse what `discover` found."""
    parsed = read_trace(inputs.trace_paths, jobs=jobs)
    if inputs.text_logs:
        from parsers.textlog import read_text_log

        logs = [read_text_log(p) for p in inputs.text_logs]
        log_records = pl.concat([t.records for t in logs])
        other_lines = pl.concat([t.other_lines for t in logs])
        text_stats = pl.concat([t.stats for t in logs]).with_columns(pl.lit("text").alias("format"))
        stats = pl.concat([parsed.stats.with_columns(pl.lit("trace").alias("format")), text_stats], how="diagonal_relaxed")
    else:
        log_records, other_lines = _empty_text_tables()
        stats = parsed.stats.with_columns(pl.lit("trace").alias("format"))
    return Trace(
        events=parsed.events,
        strings=parsed.strings,
        stats=stats,
        problems=parsed.problems,
        log_records=log_records,
        other_lines=other_lines,
        inputs=inputs,
    )
