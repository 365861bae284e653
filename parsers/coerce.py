"""Rows decoded from log JSON into typed tables, whatever types the JSON had.

A field that torch writes as a string may be a list in a damaged or future log, an integer may
be beyond 64 bits, a count may be `true`. The table builders collect such fields into rows;
`typed_frame` makes the table of `schema` from them: a value of a type the column cannot hold
becomes null (a string column takes it as text), never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import polars as pl

_INT_BITS = {pl.Int8: 8, pl.Int16: 16, pl.Int32: 32, pl.Int64: 64}


def typed_frame(rows: list[dict[str, Any]], schema: Mapping[str, pl.DataType], *, strict: bool = True) -> pl.DataFrame:
    """The DataFrame of `rows` (dicts) with exactly `schema` (a missing key is null).
    `strict=False`: what polars converts by itself ("3" into an integer column) is converted
    first; only what it cannot convert is coerced."""
    if not rows:
        return pl.DataFrame(schema=dict(schema))
    try:
        return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=dict(schema), strict=strict)
    except (pl.exceptions.PolarsError, TypeError, ValueError, OverflowError):
        fixed = [{k: coerce(r.get(k), t) for k, t in schema.items()} for r in rows]
        return pl.DataFrame(fixed, schema=dict(schema), strict=False)


def coerce(value: Any, dtype: pl.DataType) -> Any:
    """`value` as a value of a column of `dtype` (None when it cannot be one)."""
    if value is None:
        return None
    if dtype == pl.String:
        return value if type(value) is str else as_text(value)
    bits = next((b for t, b in _INT_BITS.items() if dtype == t), None)
    if bits is not None:
        ok = type(value) is int and -(1 << (bits - 1)) <= value < 1 << (bits - 1)
        return value if ok else None
    if dtype == pl.Float64 or dtype == pl.Float32:
        if type(value) in (int, float):
            try:
                return float(value)
            except OverflowError:
                return None
        return None
    if dtype == pl.Boolean:
        return value if type(value) is bool else None
    if isinstance(dtype, pl.List):
        if type(value) is not list:
            return None
        return [coerce(v, dtype.inner) for v in value]
    return value


def as_text(value: Any) -> str:
    """A decoded JSON value as text (JSON for lists and objects)."""
    if type(value) is str:
        return value
    try:
        return orjson.dumps(value, default=repr).decode()
    except TypeError:  # an integer beyond 64 bits
        return str(value)
