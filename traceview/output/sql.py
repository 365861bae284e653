"""`traceview sql PATH "SELECT ..."`: DuckDB over a Trace's tables.

Every table of `traceview.trace.TABLES` is a DuckDB view of the same name, registered from
Arrow (DuckDB scans the Arrow buffers polars holds; nothing is copied into DuckDB). A table is
only built when the query names it (`compiles` does not need `graph_nodes`). DuckDB is an
optional extra (`pip install traceview[sql]`); without it the command says so in one line.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from typing import Any

from traceview.errors import UserError
from traceview.trace import TABLES, Trace

FORMATS = ("table", "csv", "json")


class SqlError(UserError):
    """DuckDB is missing, or the query failed (shown as one line)."""


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]


def check_available() -> None:
    """Raise SqlError (one line, how to install it) when DuckDB is not installed."""
    _duckdb()


def _duckdb():  # -> the duckdb module
    try:
        import duckdb
    except ImportError:
        raise SqlError("traceview sql needs DuckDB: pip install 'traceview[sql]' (or: pip install duckdb)") from None
    return duckdb


def tables_named(query: str) -> list[str]:
    """The traceview tables `query` mentions (as whole words), in TABLES order."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query)}
    return [name for name in TABLES if name in words]


def run_query(trace: Trace, query: str) -> QueryResult:
    """Run `query` with every table it names as a view; SqlError (one line) when it fails."""
    duckdb = _duckdb()
    con = duckdb.connect(":memory:")
    try:
        for name in tables_named(query):
            con.register(name, trace.table(name).to_arrow())
        try:
            cur = con.execute(query)
        except duckdb.Error as exc:
            raise SqlError(f"query failed: {' '.join(str(exc).split())}") from None
        if cur.description is None:  # a statement without a result (e.g. SET)
            return QueryResult([], [])
        columns = [d[0] for d in cur.description]
        return QueryResult(columns, cur.fetchall())
    finally:
        con.close()


def render(result: QueryResult, fmt: str) -> str:
    """The rows as an aligned text table, CSV (with a header) or JSON (a list of row objects)."""
    if fmt == "json":
        import orjson

        rows = [dict(zip(result.columns, r)) for r in result.rows]
        return orjson.dumps(rows, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str).decode() + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(result.columns)
        w.writerows(["" if v is None else v for v in r] for r in result.rows)
        return buf.getvalue()
    return _text_table(result)


def _cell(v: Any) -> str:
    """One value on one line, control characters shown escaped (log text is data)."""
    s = "" if v is None else str(v)
    return s.encode("unicode_escape").decode("ascii") if not s.isprintable() else s


def _text_table(result: QueryResult) -> str:
    cells = [[_cell(v) for v in r] for r in result.rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(result.columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(result.columns, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    lines.append(f"({len(cells)} row{'s' if len(cells) != 1 else ''})")
    return "\n".join(lines) + "\n"
