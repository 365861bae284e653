"""`traceview sql PATH "SELECT ..."`: SQL over a Trace's tables, with polars' own SQL engine
(always installed) or DuckDB (when installed: `pip install traceview[sql]`).

Every table of `traceview.trace.TABLES` is a table of the same name, and so are the accounts
(`compile_account`, `rank_account`: traceview.analyze.accounts, docs/tables.md) and `cache_keys`
(traceview.analyze.cache_keys), registered from Arrow in
DuckDB (it scans the Arrow buffers polars holds; nothing is copied) or given to polars'
SQLContext as the DataFrame itself. A table is only built when the query names it (`compiles`
does not need `graph_nodes`). The engine: `--engine duckdb|polars`; by default DuckDB when it is
installed, else polars. Both give the same columns and rows to the same output formats; their
SQL dialects differ at the edges (DuckDB's is the richer). A query that names a table or a
column that does not exist fails in one line that names what exists.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from typing import Any

from traceview.analyze.accounts.compiles import compile_account
from traceview.analyze.accounts.ranks import rank_table
from traceview.analyze.cache_keys import cache_keys
from traceview.errors import UserError
from traceview.trace import TABLES, Trace

# the accounts every finding reads (one row per compile; per rank), queryable beside the tables
# and each cache lookup's key components (analyze.cache_keys: payloads read when a query names it)
ACCOUNTS = {"compile_account": compile_account, "rank_account": rank_table, "cache_keys": cache_keys}
NAMES = TABLES + tuple(ACCOUNTS)

FORMATS = ("table", "csv", "json")
ENGINES = ("duckdb", "polars")


class SqlError(UserError):
    """DuckDB was asked for and is missing, or the query failed (shown as one line)."""


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]


def duckdb_installed() -> bool:
    try:
        import duckdb  # noqa: F401
    except ImportError:
        return False
    return True


def engine_for(requested: str | None) -> str:
    """The engine to use: the one asked for (SqlError when DuckDB is asked for and missing),
    else DuckDB when it is installed, else polars."""
    if requested == "duckdb" and not duckdb_installed():
        raise SqlError("--engine duckdb needs DuckDB: pip install 'traceview[sql]' (or: pip install duckdb); --engine polars needs nothing more")
    if requested in ENGINES:
        return requested
    return "duckdb" if duckdb_installed() else "polars"


def check_available(engine: str | None = None) -> str:
    """The engine a query will run on (see engine_for), checked before the parse."""
    return engine_for(engine)


def tables_named(query: str) -> list[str]:
    """The traceview tables `query` mentions (as whole words), in TABLES order."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query)}
    return [name for name in NAMES if name in words]


def _table(trace: Trace, name: str) -> Any:
    """Table or account `name` of the trace, as a polars DataFrame."""
    return ACCOUNTS[name](trace) if name in ACCOUNTS else trace.table(name)


def run_query(trace: Trace, query: str, *, engine: str | None = None) -> QueryResult:
    """Run `query` with every table it names; SqlError (one line) when it fails."""
    eng = engine_for(engine)
    names = tables_named(query)
    try:
        return _run_duckdb(trace, query, names) if eng == "duckdb" else _run_polars(trace, query, names)
    except SqlError:
        raise
    except Exception as exc:  # the engines' own errors: one line, with what exists
        raise SqlError(_explain(trace, names, " ".join(str(exc).split()))) from None


def _run_duckdb(trace: Trace, query: str, names: list[str]) -> QueryResult:
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        for name in names:
            con.register(name, _table(trace, name).to_arrow())
        cur = con.execute(query)
        if cur.description is None:  # a statement without a result (e.g. SET)
            return QueryResult([], [])
        columns = [d[0] for d in cur.description]
        return QueryResult(columns, cur.fetchall())
    finally:
        con.close()


def _run_polars(trace: Trace, query: str, names: list[str]) -> QueryResult:
    import polars as pl

    ctx = pl.SQLContext(frames={name: _table(trace, name) for name in names})
    out = ctx.execute(query, eager=True)
    return QueryResult(list(out.columns), out.rows())


_NO_TABLE = re.compile(
    r"(?:relation|table)(?: with name)? ['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]? (?:was not found|does not exist)", re.I
)
_NO_COLUMN = re.compile(
    r"(?:column ['\"]?([A-Za-z_][A-Za-z0-9_.]*)['\"]? (?:not found|is not found)|unable to find column ['\"]?([A-Za-z_][A-Za-z0-9_.]*)"
    r"|Referenced column ['\"]?([A-Za-z_][A-Za-z0-9_.]*)['\"]? not found|invalid column ['\"]?([A-Za-z_][A-Za-z0-9_.]*))",
    re.I,
)


def _explain(trace: Trace, names: list[str], message: str) -> str:
    """The engine's message as one line; for a missing table or column, what exists."""
    m = _NO_TABLE.search(message)
    if m:
        return f"query failed: no table {m.group(1)}; the tables are: {', '.join(NAMES)}"
    m = _NO_COLUMN.search(message)
    if m:
        col = next(g for g in m.groups() if g)
        have = "; ".join(f"{n}: {', '.join(_table(trace, n).columns)}" for n in names) or "none named"
        return f"query failed: no column {col}; the columns of the tables named are {have}"
    return f"query failed: {message}"


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
