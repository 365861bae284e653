"""The bytes of a trace log -> its lines, record headers and payload blocks, without a
Python object per line: the file is split into lines with numpy, and lines are classified
by their first byte (a TAB starts a payload line, anything else is a record header or a
line that is not one). Invalid UTF-8 is found here, and repaired on the slow path."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from parsers.torch_trace.problems import Problems

if TYPE_CHECKING:
    import pyarrow as pa
# pyarrow is imported where a full parse or a payload read needs it: a lazy parse (what
# the summary runs) does without, which saves ~0.1 s of start-up in every process.


_CHUNK = 1 << 26  # newline search in 64 MiB pieces keeps the temporary mask small


def _newlines(buf: np.ndarray) -> np.ndarray:
    parts = [
        np.flatnonzero(buf[i : i + _CHUNK] == 10) + i for i in range(0, len(buf), _CHUNK)
    ]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def fix_utf8(data: bytes, problems: Problems) -> bytes:
    """Replace invalid UTF-8 and record the lines that had it."""
    for i, line in enumerate(data.split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.add(i, "invalid_utf8", f"byte {exc.start}: {line[:80]!r}")
    return data.decode("utf-8", "replace").encode("utf-8")


@dataclass
class Split:
    """A trace log cut into lines; its record headers (`cand`) and their payloads."""

    n: int
    nlines: int
    truncated: bool
    starts: np.ndarray  # line starts (bytes)
    ends: np.ndarray  # line ends, without the newline
    cand: np.ndarray  # line indices of record headers (every line that is not a payload line)
    n_payload_lines: np.ndarray  # payload lines after each header
    headers: pl.Series  # String, header line per candidate
    payloads: pa.Array | None  # large_string, payload text per candidate (tabs removed, "" when none)
    raw_start: np.ndarray  # byte range of each candidate's payload lines in the input, tabs
    raw_end: np.ndarray  # included (start == end when it has none)
    jsons: list[bytes]  # the header lines again, as bytes


def split_lines(data: bytes, *, lazy: bool = False) -> Split:
    """Lines, headers and payloads of a trace log, without a Python object per line.

    The tab that starts each payload line is deleted from a copy of the buffer, after which
    every payload is one contiguous byte range; headers and payloads are then views into
    that buffer cut at computed offsets (raises ArrowInvalid when the bytes are not UTF-8).
    `lazy`: no payloads and no copy of the buffer, only the headers and the payloads' byte
    ranges in `data` (the payload bytes are not checked for UTF-8 then).
    """
    n = len(data)
    empty = np.empty(0, dtype=np.int64)
    if n == 0:
        none = None if lazy else pyarrow_module().array([], type=pyarrow_module().large_string())
        return Split(0, 0, False, empty, empty, empty, empty, pl.Series([], dtype=pl.String), none, empty, empty, [])
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = _newlines(buf)
    truncated = n > 0 and data[-1] != 10
    nlines = len(nl) + (1 if truncated else 0)
    starts = np.empty(nlines, dtype=np.int64)
    if nlines:
        starts[0] = 0
        starts[1:] = nl[: nlines - 1] + 1
    ends = np.empty(nlines, dtype=np.int64)
    ends[: len(nl)] = nl
    if truncated:
        ends[-1] = n
    nonempty = starts < ends
    first = np.where(nonempty, buf[np.minimum(starts, max(n - 1, 0))], 10) if nlines else starts
    has_tab = first == 9
    is_payload = has_tab.copy()
    # An empty line between two payload lines is an empty payload line that lost its tab
    # (seen in real logs, e.g. tlparse's export.log); anywhere else it is not a record.
    if nlines > 2:
        is_payload[1:-1] |= ~nonempty[1:-1] & has_tab[:-2] & has_tab[2:]
    cand = np.flatnonzero(~is_payload)
    k = len(cand)
    next_cand = np.append(cand[1:], nlines).astype(np.int64)
    n_payload = next_cand - cand - 1
    has_p = n_payload > 0
    first_p = np.minimum(cand + 1, max(nlines - 1, 0))
    last_p = np.maximum(next_cand - 1, 0)
    raw_start = np.where(has_p, starts[first_p], ends[cand]) if k else empty
    raw_end = np.where(has_p, ends[last_p], ends[cand]) if k else empty
    if lazy:
        if not k:
            _check_utf8(data)
            return Split(n, nlines, truncated, starts, ends, cand, n_payload, pl.Series([], dtype=pl.String), None, empty, empty, [])
        # header lines as bytes, then one UTF-8 validation over all of them (polars, not
        # pyarrow.compute: its import alone costs ~50 ms)
        jsons = [data[a:b] for a, b in zip(starts[cand].tolist(), ends[cand].tolist())]
        try:
            headers = pl.Series(jsons, dtype=pl.Binary).cast(pl.String)
        except pl.exceptions.ComputeError as exc:
            raise NotUtf8(str(exc)) from None
        return Split(n, nlines, truncated, starts, ends, cand, n_payload, headers, None, raw_start, raw_end, jsons)
    pa = pyarrow_module()
    tabs = starts[has_tab]
    clean = np.delete(buf, tabs) if len(tabs) else buf.copy()  # never keep the input mapped

    def shift(pos: np.ndarray) -> np.ndarray:
        return pos - np.searchsorted(tabs, pos, side="left")

    hs = shift(starts[cand])
    he = shift(ends[cand])
    ps = np.where(has_p, shift(starts[first_p]), he)
    pe = np.where(has_p, shift(ends[last_p]), he)
    offs = np.empty(4 * k + 1, dtype=np.int64)
    offs[0:-1:4] = hs
    offs[1::4] = he
    offs[2::4] = ps
    offs[3::4] = pe
    offs[-1] = len(clean)
    if k:
        seg = pa.LargeStringArray.from_buffers(
            4 * k, pa.py_buffer(offs), pa.py_buffer(clean), None, 0
        )
        try:
            seg.validate(full=True)
        except pa.ArrowInvalid as exc:
            raise NotUtf8(str(exc)) from None
        headers = seg.take(pa.array(np.arange(0, 4 * k, 4)))
        payloads = seg.take(pa.array(np.arange(2, 4 * k, 4)))
    else:
        _check_utf8(data)
        headers = payloads = pa.array([], type=pa.large_string())
    return Split(
        n, nlines, truncated, starts, ends, cand, n_payload, arrow_series(headers), payloads, raw_start, raw_end,
        headers.cast(pa.large_binary()).to_pylist(),
    )


def pyarrow_module() -> ModuleType:
    """pyarrow, imported when first needed (a lazy parse mostly does without it)."""
    import pyarrow

    return pyarrow


class NotUtf8(ValueError):
    """The bytes are not valid UTF-8."""


def arrow_series(arr: pa.Array) -> pl.Series:
    """A polars Series of an Arrow array (through a table: polars converts a bare array
    with pyarrow.compute, whose import costs ~50 ms)."""
    return pl.from_arrow(pyarrow_module().table({"x": arr}))["x"]  # type: ignore[index]


def _check_utf8(data: bytes) -> None:
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUtf8(str(exc)) from None
