"""Compile ids: Dynamo's names for one compile, parsed and ordered here and nowhere else.

The forms (torch/_guards.py `CompileId.__str__` and `TraceId.__str__`):

    "3/1"       frame 3 (the 4th code object Dynamo compiled in the process), its compile 1
                (the frame's second compile: one recompile)
    "3/1_2"     the same compile, analysis attempt 2 (a trace id; the `compile_id` columns
                carry no attempt, the `trace_id` columns do, in brackets)
    "!0"        compiled-autograd graph 0
    "!0/3/1"    frame 3, compile 1, compiled while compiled-autograd graph 0 ran
    "3/-"       frame 3 with no compile number in its envelope (parsers.tracelog writes it)

`sort_key` is the one order of compile ids every table, finding and view uses: plain ids
before compiled-autograd ones, then by frame, compile number and attempt, as numbers
("10/0" after "2/0"); anything unparsable last, by its text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A trace id as TORCH_LOGS prints it between brackets (parsers.textlog reads it with this).
TRACE_ID_RE = r"^(?:!(?P<ca>\d+))?/?(?:(?P<fid>\d+)/(?P<fcid>\d+))?(?:_(?P<att>\d+))?$"

_ID = re.compile(r"^(?:!(?P<ca>\d+))?(?:(?(ca)/)(?P<fid>\d+)/(?P<fcid>\d+|-))?(?:_(?P<att>\d+))?$")


@dataclass(frozen=True)
class CompileId:
    """One parsed compile id (None where the id has no such part)."""

    frame: int | None
    compile: int | None
    compiled_autograd: int | None = None
    attempt: int = 0

    @property
    def compile_id(self) -> str:
        """The id as the `compile_id` columns write it (no attempt)."""
        frame = "" if self.frame is None else f"{self.frame}/{'-' if self.compile is None else self.compile}"
        if self.compiled_autograd is None:
            return frame
        return f"!{self.compiled_autograd}" + (f"/{frame}" if frame else "")


def parse(text: str | None) -> CompileId | None:
    """The parts of a compile id or trace id (brackets allowed); None when it is not one."""
    if not text:
        return None
    m = _ID.match(text.strip().removeprefix("[").removesuffix("]"))
    if m is None or (m["ca"] is None and m["fid"] is None):
        return None

    def num(s: str | None) -> int | None:
        return int(s) if s is not None and s != "-" else None

    return CompileId(num(m["fid"]), num(m["fcid"]), num(m["ca"]), int(m["att"] or 0))


def sort_key(text: str | None) -> tuple:
    """The order of compile ids (see the module doc); usable as `sorted(ids, key=sort_key)`."""
    c = parse(text)
    if c is None:
        return (2, -1, -1, -1, 0, text or "")
    return (
        0 if c.compiled_autograd is None else 1,
        -1 if c.compiled_autograd is None else c.compiled_autograd,
        -1 if c.frame is None else c.frame,
        -1 if c.compile is None else c.compile,
        c.attempt,
        "",
    )


def frame_of(text: str | None) -> int | None:
    """The frame id of a compile id ("!0/3/1" -> 3; a compiled-autograd graph alone has none)."""
    c = parse(text)
    return None if c is None else c.frame


def compile_number(text: str | None) -> int | None:
    """Which compile of its frame this is, from 0 ("3/2" -> 2: the frame's third compile)."""
    c = parse(text)
    return None if c is None else c.compile


def frame_group(text: str | None) -> str:
    """What the UI groups a compile under: its frame id, or `!N` for the compiles of
    compiled-autograd graph N ("3/1" -> "3", "!0/3/1" -> "!0")."""
    c = parse(text)
    if c is None:
        return text or ""
    if c.compiled_autograd is not None:
        return f"!{c.compiled_autograd}"
    return str(c.frame)


# sort_key for polars: the same order, as sort columns (Rust's regex has no conditionals)
_ID_COLUMNS = r"^\[?(?:!(?P<ca>\d+))?/?(?:(?P<fid>\d+)/(?P<fcid>\d+|-))?(?:_(?P<att>\d+))?\]?$"


def sort_exprs(column: str = "compile_id") -> list:
    """`sort_key` of a string column as expressions for `DataFrame.sort` (same order)."""
    import polars as pl

    parts = pl.col(column).str.extract_groups(_ID_COLUMNS)
    ca = parts.struct.field("ca").cast(pl.Int64)
    fid = parts.struct.field("fid").cast(pl.Int64)
    parsed = ca.is_not_null() | fid.is_not_null()
    return [
        pl.when(~parsed.fill_null(False)).then(2).when(ca.is_not_null()).then(1).otherwise(0),
        ca.fill_null(-1),
        fid.fill_null(-1),
        parts.struct.field("fcid").cast(pl.Int64, strict=False).fill_null(-1),
        parts.struct.field("att").cast(pl.Int64).fill_null(0),
        pl.when(parsed.fill_null(False)).then(pl.lit("")).otherwise(pl.col(column).fill_null("")),
    ]
