"""Read gzip-compressed logs as a stream, in bounded pieces, keeping what comes before damage.

`gzip.open(...).read()` holds the whole output (and more, while its buffer grows), raises on
a damaged or cut-off file and so loses everything that was readable before the damage.
Here the output comes in pieces of bounded size; a damaged stream ends the output where
the damage starts and says why (`GzipStream.damage`). Concatenated members are read one
after another, as gzip does.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from typing import BinaryIO

MAGIC = b"\x1f\x8b"
_IN = 1 << 20  # compressed bytes read at a time
_OUT = 1 << 20  # decompressed bytes made by one call (what damage can take back)


class GzipStream:
    """The decompressed bytes of a gzip file, read forward in pieces of at most `size`."""

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh
        self._z = zlib.decompressobj(31)
        self._pending = b""  # compressed input not yet given to the decompressor
        self._eof = False
        self._member_done = False
        self.position = 0  # decompressed bytes returned so far
        self.damage: str | None = None  # why the stream ended early (None: it did not)

    def read(self, size: int) -> bytes:
        """Up to `size` decompressed bytes (b"" at the end, or where damage starts)."""
        out: list[bytes] = []
        want = size
        while want > 0 and not self._eof:
            if self._member_done and not self._next_member():
                break
            if not self._z.unconsumed_tail and not self._pending:
                self._pending = self._fh.read(_IN)
                if not self._pending:
                    self._eof = True
                    self.damage = "the compressed stream is cut off (no end-of-stream marker)"
                    break
            src = self._z.unconsumed_tail or self._pending
            if src is self._pending:
                self._pending = b""
            before = self._z.copy()
            try:
                chunk = self._z.decompress(src, min(want, _OUT))
            except zlib.error as exc:
                # what the failed call decoded before the damage is lost with the
                # exception: decode the same input again in small steps, up to the damage
                out.append(_up_to_damage(before, src, want))
                self.damage = f"the compressed data is damaged ({exc})"
                self._eof = True
                break
            if chunk:
                out.append(chunk)
                want -= len(chunk)
            if self._z.eof:
                self._member_done = True
                self._pending = self._z.unused_data
        data = b"".join(out)
        self.position += len(data)
        return data

    def _next_member(self) -> bool:
        """Start the next member of a concatenated gzip file (False at the end: nothing but
        zero padding follows, or something that is not gzip, which is damage)."""
        data = self._pending
        while True:
            data = data.lstrip(b"\x00")
            if len(data) >= 2:
                break
            more = self._fh.read(_IN)
            if not more:
                if data:
                    self.damage = "data after the end of the compressed stream is not gzip"
                self._eof = True
                return False
            data += more
        if data[:2] != MAGIC:
            self.damage = "data after the end of the compressed stream is not gzip"
            self._eof = True
            return False
        self._z = zlib.decompressobj(31)
        self._member_done = False
        self._pending = data
        return True

    def pieces(self, size: int) -> Iterator[bytes]:
        """The rest of the output in pieces of at most `size` bytes."""
        while True:
            piece = self.read(size)
            if not piece:
                return
            yield piece


def _up_to_damage(z: zlib._Decompress, src: bytes, want: int) -> bytes:
    """What `z` decodes of `src` (at most `want` bytes) before it meets damage: in steps
    that shrink to one byte near it (zlib checks the CRC in the call that ends the data)."""
    got: list[bytes] = []
    n = 0
    step = 4096
    while n < want:
        saved = z.copy()
        try:
            chunk = z.decompress(src, min(step, want - n))
        except zlib.error:
            if step == 1:
                break
            z, step = saved, max(step // 64, 1)
            continue
        if not chunk:
            break
        got.append(chunk)
        n += len(chunk)
        src = z.unconsumed_tail
    return b"".join(got)


def is_gzip(fh: BinaryIO | str | os.PathLike[str]) -> bool:
    """Whether the file starts with the gzip magic number: an open binary file (its position
    is kept) or a path."""
    if isinstance(fh, (str, os.PathLike)):
        with open(fh, "rb") as f:
            return f.read(2) == MAGIC
    at = fh.tell()
    head = fh.read(2)
    fh.seek(at)
    return head == MAGIC


def read_all(fh: BinaryIO, limit: int | None = None) -> tuple[bytes, str | None]:
    """The decompressed bytes (the first `limit` of them) and why the stream ended early."""
    stream = GzipStream(fh)
    parts = []
    left = limit
    for piece in stream.pieces(1 << 24 if left is None else min(left, 1 << 24)):
        parts.append(piece)
        if left is not None:
            left -= len(piece)
            if left <= 0:
                break
    return b"".join(parts), stream.damage
