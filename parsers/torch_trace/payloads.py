"""Payload text: cut out of the file's bytes (the tab that starts each line removed), the
few a lazy parse reads at once (`summary_payloads`), the rest read later from the file by
`hydrate` (plain or gzip), and the md5 check of each payload against its `has_payload`."""

from __future__ import annotations

import hashlib
import os
import threading
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
import polars as pl

from parsers.discover import InputError
from parsers.gzipped import GzipStream, is_gzip
from parsers.kinds import (
    SUMMARY_PAYLOAD_ARTIFACTS,
    SUMMARY_PAYLOAD_GRAPH_MARKS,
    SUMMARY_PAYLOAD_KINDS,
)
from parsers.torch_trace.lines import arrow_series, pyarrow_module
from parsers.torch_trace.problems import Problems, problem_frame
from parsers.torch_trace.schemas import EVENTS_SCHEMA, PROBLEMS_SCHEMA

if TYPE_CHECKING:
    import pyarrow as pa


_GRAPH_MARKS = tuple(m.encode() for m in SUMMARY_PAYLOAD_GRAPH_MARKS)


def raw_payload(data: bytes, start: int, end: int) -> bytes:
    """The payload whose lines span data[start:end]: the tab that starts each line removed."""
    block = data[start:end]
    if block[:1] == b"\t":
        block = block[1:]
    return block.replace(b"\n\t", b"\n")


def payload_text(blocks: list[bytes | None], linenos: np.ndarray, problems: Problems) -> pl.Series:
    """String Series of payload bytes; invalid UTF-8 is replaced and recorded."""
    try:
        return pl.Series(blocks, dtype=pl.Binary).cast(pl.String)
    except pl.exceptions.ComputeError:
        return _decode_each(blocks, linenos, problems)


def _decode_each(blocks: list[bytes | None], linenos: np.ndarray, problems: Problems) -> pl.Series:
    """String Series of payload bytes, one by one: invalid UTF-8 is replaced and recorded."""
    out: list[str | None] = []
    for b, ln in zip(blocks, linenos.tolist()):
        if b is None:
            out.append(None)
            continue
        try:
            out.append(b.decode("utf-8"))
        except UnicodeDecodeError as exc:
            problems.add(int(ln), "invalid_utf8", f"payload byte {exc.start}: {b[max(exc.start - 40, 0):exc.start + 40]!r}")
            out.append(b.decode("utf-8", "replace"))
    return pl.Series(out, dtype=pl.String)


def summary_payloads(
    data: bytes,
    kinds: list[str],
    names: list[str | None],
    raw_start: np.ndarray,
    raw_end: np.ndarray,
    n_lines: np.ndarray,
    cand: np.ndarray,
    problems: Problems,
) -> pl.Series:
    """The payloads a lazy parse reads (null for every other envelope)."""
    blocks: list[bytes | None] = [None] * len(kinds)
    rs = raw_start.tolist()
    re_ = raw_end.tolist()
    nl = n_lines.tolist()
    for i, kind in enumerate(kinds):
        if nl[i] and (kind in SUMMARY_PAYLOAD_KINDS or (kind == "artifact" and names[i] in SUMMARY_PAYLOAD_ARTIFACTS)):
            blocks[i] = raw_payload(data, rs[i], re_[i])
        elif nl[i] and kind == "dynamo_output_graph" and any(data.find(m, rs[i], re_[i]) >= 0 for m in _GRAPH_MARKS):
            blocks[i] = raw_payload(data, rs[i], re_[i])
    return payload_text(blocks, cand + 1, problems)


def hydrate(events: pl.DataFrame, *, verify: bool = False) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Events of a lazy parse with every payload read from its file (`events` as
    parse_trace_bytes returns it by default); `verify`: also check each payload's md5
    (`payload_ok`). Returns the events (EVENTS_SCHEMA) and the problems found on the way
    (md5 mismatches, invalid UTF-8). Raises InputChanged when a file is no longer what was
    parsed (shorter than a payload's end)."""
    if "payload_start" not in events.columns:
        return events, pl.DataFrame(schema=PROBLEMS_SCHEMA)
    # the payloads read at parse time too when verifying (their md5 is checked here)
    need = pl.col("payload_start").is_not_null() & (pl.col("payload").is_null() | verify)
    todo = events.with_row_index("_row").filter(need)
    problems: list[pl.DataFrame] = []
    filled: list[pl.DataFrame] = []
    verified = _VERIFIED if verify else None
    # (a snapshot of the values: another thread may add one meanwhile)
    if verified is not None and sum(map(len, list(verified.values()))) > VERIFIED_MAX_BYTES:
        verified.clear()
    for (file,), rows in todo.group_by("file", maintain_order=True):
        probs = Problems()
        payloads = _read_payloads(str(file), rows["payload_start"].to_numpy(), rows["payload_end"].to_numpy(), rows["lineno"].to_numpy(), probs)
        part = rows.select("_row", payloads.alias("_payload"))
        if verify:
            ok, _, _ = check_md5(
                payloads.to_arrow(), np.ones(len(rows), dtype=bool), rows["payload_md5"].to_list(), rows["lineno"].to_numpy(), probs, verified
            )
            part = part.with_columns(pl.Series("_ok", ok, dtype=pl.Boolean))
        filled.append(part)
        problems.append(problem_frame(str(file), probs))
    out = events
    if filled:
        add = pl.concat(filled)
        out = (
            events.with_row_index("_row")
            .join(add, on="_row", how="left", maintain_order="left")
            .with_columns(pl.coalesce("_payload", "payload").alias("payload"))
        )
        if verify:
            out = out.with_columns(pl.coalesce("_ok", "payload_ok").alias("payload_ok"))
    prob = pl.concat(problems) if problems else pl.DataFrame(schema=PROBLEMS_SCHEMA)
    return out.select(list(EVENTS_SCHEMA)), prob


# payloads whose md5 matched, by has_payload, kept across hydrate calls of this process (the
# ranks of one job log the same graphs): an equal payload is good without hashing it again
_VERIFIED: dict[str, bytes] = {}
VERIFIED_MAX_BYTES = 16 << 20


class InputChanged(InputError):
    """A parsed input file changed afterwards (its payloads can no longer be read)."""


def _read_payloads(path: str, start: np.ndarray, end: np.ndarray, linenos: np.ndarray, problems: Problems) -> pl.Series:
    """Payload text (String Series) of the byte ranges [start, end) of `path`: each range's
    lines, the tab that starts each of them removed (invalid UTF-8 replaced and recorded)."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InputChanged(f"{path}: cannot read it any more ({exc.strerror})") from None
    with fh:
        k = len(start)
        if k == 0:
            return pl.Series([], dtype=pl.String)
        need = int(end.max())
        if is_gzip(fh):
            return payload_text(_gzip_payloads(path, fh, start, end), linenos, problems)
        size = os.fstat(fh.fileno()).st_size
        if need > size:
            raise InputChanged(f"{path}: the file changed since it was parsed (now {size} bytes)")
        total = int((end - start).sum())
        # (read, never memory-mapped: a file that shrinks under a mapping kills the process)
        if total < size // 4:  # a few payloads: read them one by one
            blocks = []
            for a, b in zip(start.tolist(), end.tolist()):
                raw = os.pread(fh.fileno(), b - a, a)
                if len(raw) < b - a:
                    raise InputChanged(f"{path}: the file changed while it was read")
                blocks.append(raw_payload(raw, 0, b - a))
            return payload_text(blocks, linenos, problems)
        data = fh.read(need)
        if len(data) < need:
            raise InputChanged(f"{path}: the file changed while it was read")
    # most of the file: every payload's bytes after its first tab, as one Arrow array over the
    # file's buffer; then polars checks UTF-8 and deletes the other line-leading tabs
    pa = pyarrow_module()
    offs = np.empty(2 * k, dtype=np.int64)
    offs[0::2] = start + 1  # a payload's first byte is the tab of its first line
    offs[1::2] = end
    seg = pa.Array.from_buffers(pa.large_binary(), 2 * k - 1, [None, pa.py_buffer(offs), pa.py_buffer(data)])
    raw = arrow_series(seg).gather_every(2)
    del seg
    try:
        text = raw.cast(pl.String)
    except pl.exceptions.ComputeError:
        return _decode_each([raw_payload(data, a, b) for a, b in zip(start.tolist(), end.tolist())], linenos, problems)
    return text.str.replace_all("\n\t", "\n", literal=True)


class _GzipCursor:
    """A forward reader of a gzip file's text by position, kept between `hydrate` calls
    (an export reads a big file's payloads a chunk at a time, in order: one pass)."""

    def __init__(self, path: str, key: tuple) -> None:
        self.key = key
        self.fh = open(path, "rb")
        self.stream = GzipStream(self.fh)
        self.start = 0  # text position of buf[0]
        self.buf = b""

    def read(self, a: int, b: int) -> bytes | None:
        """Text bytes [a, b), a at or after the previous read's start (None: the text ends
        before b)."""
        drop = min(a - self.start, len(self.buf))
        self.buf = self.buf[drop:]
        self.start += drop
        while self.start < a:  # skip forward
            skipped = self.stream.read(min(a - self.start, 1 << 24))
            if not skipped:
                return None
            self.start += len(skipped)
        parts = [self.buf]
        have = len(self.buf)
        while have < b - a:
            more = self.stream.read(max(b - a - have, 1 << 20))
            if not more:
                return None
            parts.append(more)
            have += len(more)
        self.buf = b"".join(parts)
        return self.buf[: b - a]


_GZIP_CURSORS: dict[str, _GzipCursor] = {}
# The cursors are shared by the process's threads (the UI reads payloads while a reload of a
# followed trace builds its tables in another thread): one reader at a time, or two moving one
# cursor read each other's text ("the file changed since it was parsed").
_GZIP_LOCK = threading.Lock()


def _gzip_payloads(path: str, fh: BinaryIO, start: np.ndarray, end: np.ndarray) -> list[bytes | None]:
    """The payloads at text ranges [start, end) of a gzip log (in any order)."""
    with _GZIP_LOCK:
        return _gzip_payloads_locked(path, fh, start, end)


def _gzip_payloads_locked(path: str, fh: BinaryIO, start: np.ndarray, end: np.ndarray) -> list[bytes | None]:
    st = os.fstat(fh.fileno())
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    order = np.argsort(start, kind="stable")
    first = int(start[order[0]])
    cur = _GZIP_CURSORS.get(path)
    if cur is None or cur.key != key or first < cur.start:
        if cur is not None:
            cur.fh.close()
        if len(_GZIP_CURSORS) >= 4:
            _GZIP_CURSORS.pop(next(iter(_GZIP_CURSORS))).fh.close()
        cur = _GZIP_CURSORS[path] = _GzipCursor(path, key)
    blocks: list[bytes | None] = [None] * len(start)
    for i in order.tolist():
        a, b = int(start[i]), int(end[i])
        raw = cur.read(a, b)
        if raw is None:
            raise InputChanged(f"{path}: the file changed since it was parsed (its text is shorter)")
        blocks[i] = raw_payload(raw, 0, b - a)
    return blocks


def check_md5(
    payloads: pa.Array | None,
    has: np.ndarray,
    expected: list[str | None],
    linenos: np.ndarray,
    problems: Problems,
    verified: dict[str, bytes] | None = None,
) -> tuple[list[bool | None], int | None, int]:
    """payload_ok per envelope, hashing the payload bytes in the Arrow buffer (no Python
    strings); `has` marks the envelopes that have payload lines. Without `payloads`, only
    missing payloads are looked for (md5 mismatches: None). `verified` (has_payload ->
    payload bytes whose md5 matched, filled on the way): a payload equal to one of them is
    good without hashing it (ranks log the same graphs; comparing is ~3x cheaper than md5)."""
    n = len(expected)
    ok: list[bool | None] = [None] * n
    if n == 0:
        return ok, (0 if payloads is not None else None), 0
    missing = 0
    for i in np.flatnonzero(~has).tolist():
        if expected[i] is not None:
            missing += 1
            problems.add(int(linenos[i]), "missing_payload", f"has_payload {expected[i]} but no payload lines")
    if payloads is None:
        return ok, None, missing
    bufs = payloads.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[payloads.offset : payloads.offset + n + 1].tolist()
    data = memoryview(bufs[2]) if bufs[2] is not None else memoryview(b"")
    md5 = hashlib.md5
    bad = 0
    for i in np.flatnonzero(has).tolist():
        want = expected[i]
        blob = data[offsets[i] : offsets[i + 1]]
        if verified is not None and want is not None:
            seen = verified.get(want)
            if seen is not None and len(seen) == len(blob) and seen == blob.tobytes():
                ok[i] = True
                continue
        got = md5(blob).hexdigest()
        good = want is not None and got == want
        if good and verified is not None:
            verified[want] = blob.tobytes()  # type: ignore[index]
        ok[i] = good
        if not good:
            bad += 1
            problems.add(int(linenos[i]), "md5_mismatch", f"has_payload {want}, payload md5 {got}")
    return ok, bad, missing
