"""Rows decoded from log JSON into typed tables, whatever types the JSON had.

A field that torch writes as a string may be a list in a damaged or future log, an integer may
be beyond 64 bits, a count may be `true`. The table builders collect such fields into rows;
`typed_frame` makes the table of `schema` from them: a value of a type the column cannot hold
becomes null (a string column takes it as text), never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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


# ------------------------------------------------------------------ fields of one record
#
# The analyzers and table builders read a decoded record's fields only through these: a field
# of the type torch writes is returned, a missing or null one is None (or empty), and one of
# another type (a damaged or future log) is None too: the field is lost, never the run.
# A damaged stack frame makes the whole stack unreliable (which frame is the user's can no
# longer be told): `stack_of` raises `DamagedField` and the reader skips that record. The
# parse counts every such field as a `bad_field` problem (`field_problems`), so what a reader
# skips is in the `problems` table.


class DamagedField(ValueError):
    """A field of a record holds a value of a type torch never writes there."""


def json_value(text: str | bytes | None) -> Any:
    """A record's JSON text decoded (None when it is not JSON)."""
    if not text:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def json_object(text: str | bytes | None) -> dict[str, Any]:
    """A record's JSON object ({} when the text is not one)."""
    v = json_value(text)
    return v if type(v) is dict else {}


def text_of(value: Any) -> str | None:
    """A string field (None when missing, null or not a string)."""
    return value if type(value) is str else None


def int_of(value: Any) -> int | None:
    """An integer field (a bool, a float or one beyond 64 bits is None)."""
    return value if type(value) is int and -(1 << 63) <= value < 1 << 63 else None


def float_of(value: Any) -> float | None:
    """A number field, as a float (a bool or a string is None)."""
    if type(value) is float:
        return value
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            return None
    return None


def bool_of(value: Any) -> bool | None:
    """A true/false field."""
    return value if type(value) is bool else None


def list_of(value: Any) -> list[Any]:
    """A list field ([] when missing, null or not a list)."""
    return value if type(value) is list else []


def texts_of(value: Any) -> list[str]:
    """A list-of-strings field: its strings ([] when it is not a list)."""
    return [v for v in list_of(value) if type(v) is str]


@dataclass(frozen=True)
class StackFrame:
    """One frame of a stack torch logs (`{"line", "name", "filename", "loc"}`; the filename
    an interned string's id, or the name itself in older logs)."""

    filename: str | None
    line: int | None
    name: str | None
    loc: str | None


_FRAME_TYPES = {"filename": (int, str), "line": (int,), "name": (str,), "loc": (str,)}


_FRAME_NEEDS = ("filename", "line")  # torch always writes them (a file it cannot name is -1)
_TYPE_WORDS = {(int, str): "a string or an interned id", (int,): "an integer", (str,): "a string"}


def frame_problem(frame: Any) -> str | None:
    """What is wrong with one stack frame as decoded (None when nothing is): a frame that is
    not an object, a field of a type torch never writes, or no filename or line (a frame
    without them cannot be told from its neighbours; `name` and `loc` may be missing)."""
    if type(frame) is not dict:
        return f"a stack frame is not an object: {_short(frame)}"
    for key, types in _FRAME_TYPES.items():
        v = frame.get(key)
        if v is None:
            if key in _FRAME_NEEDS:
                return f"a stack frame has no {key}"
        elif type(v) not in types:
            return f"a stack frame's {key} is not {_TYPE_WORDS[types]}: {_short(v)}"
    return None


def stack_of(value: Any, strings: Mapping[int, str]) -> list[StackFrame]:
    """A stack field's frames, outermost first, with interned file names looked up in
    `strings` (id -> text of the record's file; -1 and an unknown id are None). Missing or
    null: []. Raises DamagedField when the stack or one of its frames is damaged."""
    if value is None:
        return []
    if type(value) is not list:
        raise DamagedField(f"a stack is not a list: {_short(value)}")
    out = []
    for fr in value:
        why = frame_problem(fr)
        if why:
            raise DamagedField(why)
        fname = fr.get("filename")
        out.append(StackFrame(strings.get(fname) if type(fname) is int else fname, fr.get("line"), fr.get("name"), fr.get("loc")))
    return out


# The fields of each record kind that readers above the parse read, with the types torch
# writes (FORMAT.md section 4): "stack" is a list of frames (`frame_problem`).
_STACK = "stack"
RECORD_FIELDS: dict[str, dict[str, Any]] = {
    "dynamo_start": {"stack": _STACK},
    "create_symbol": {"symbol": (str,), "source": (str,), "vr": (str,), "stack": _STACK, "user_stack": _STACK},
    "create_unbacked_symbol": {"symbol": (str,), "vr": (str,), "node_id": (int,), "stack": _STACK, "user_stack": _STACK},
    "symbolic_shape_specialization": {"symbol": (str,), "sources": (list,), "reason": (str,), "stack": _STACK, "user_stack": _STACK},
    "guard_added_fast": {"expr": (str,), "stack": _STACK, "user_stack": _STACK},
    "propagate_real_tensors_provenance": {"stack": _STACK, "user_stack": _STACK},  # (draft_export's: analyze.compile_facts)
    "compilation_metrics": {
        "compile_id": (str,), "co_name": (str,), "co_filename": (str,), "co_firstlineno": (int,),
        "fail_type": (str,), "fail_reason": (str,), "recompile_reason": (str,),
        "entire_frame_compile_time_s": (int, float), "backend_compile_time_s": (int, float),
        "inductor_compile_time_s": (int, float), "start_time_us": (int, float), "duration_us": (int, float),
    },
}


def field_problems(kind: str, meta: Any, extra_stack: Any = None) -> list[str]:
    """The fields of a record of `kind` (its decoded metadata `meta`; `extra_stack`: the
    envelope's own `stack`, written outside a compile) that hold a value of a type torch never
    writes there: one text per field, for the `problems` table (`bad_field`)."""
    out = []
    if extra_stack is not None:
        out += [f"{kind} envelope {w}" for w in _stack_problems(extra_stack)]
    fields = RECORD_FIELDS.get(kind)
    if not fields or type(meta) is not dict:
        return out
    for key, types in fields.items():
        v = meta.get(key)
        if v is None:
            continue
        if types is _STACK:
            out += [f"{kind} {key}: {w}" for w in _stack_problems(v)]
        elif type(v) not in types or (type(v) is int and int_of(v) is None):
            out.append(f"{kind} {key} is not {'a number' if float in types else types[0].__name__}: {_short(v)}")
    return out


def _stack_problems(value: Any) -> list[str]:
    if type(value) is not list:
        return [f"a stack is not a list: {_short(value)}"]
    why = next((w for w in map(frame_problem, value) if w), None)
    return [why] if why else []


def _short(value: Any) -> str:
    """A value as JSON (a string quoted), cut at 80 characters."""
    return (f'"{value}"' if type(value) is str else as_text(value))[:80]
