"""Trace files -> tables: the entry points (one file, several as one batch, bytes already
read, a piece of a big file)."""

from __future__ import annotations

import os

import polars as pl

from parsers.gzipped import is_gzip
from parsers.torch_trace.problems import file_changed
from parsers.torch_trace.scanning import scan_bytes, scan_gzip
from parsers.torch_trace.tables import ParsedFile, build_tables, empty_tables


def parse_trace_bytes(
    data: bytes,
    file: str,
    *,
    mtime: float | None = None,
    size: int | None = None,
    line_offset: int = 0,
    lazy: bool = False,
    byte_offset: int = 0,
) -> ParsedFile:
    """Parse the bytes of one TORCH_TRACE log (already decompressed), or of a piece of one
    that starts at a record: `line_offset` is the number of lines before the piece.

    `lazy` (what traceview.ingest.pipeline uses): only the payloads in SUMMARY_PAYLOAD_ARTIFACTS
    are read, and chromium events are decoded into `ParsedFile.chromium` (CHROMIUM_SCHEMA)
    without being copied; every other payload is null, and the events carry
    the byte range of their payload lines in the file (`payload_start`, `payload_end`, plus
    `byte_offset` for a piece) for `hydrate` to read later. md5 is not checked then
    (`payload_ok` and `stats.md5_mismatch` are null until `hydrate(..., verify=True)`). A file
    whose bytes had to be changed (CRLF, invalid UTF-8) is parsed in full all the same."""
    scan = scan_bytes(data, file, mtime=mtime, size=size, line_offset=line_offset, lazy=lazy, byte_offset=byte_offset)
    return build_tables([scan], lazy=lazy)


def parse_trace_pieces(pieces: list[tuple[bytes, str, float | None, int, int]], *, lazy: bool = False) -> ParsedFile:
    """Several pieces of trace logs (each `(data, file, mtime, line_offset, byte_offset)`,
    starting at a record; of one file or of several) parsed as one batch: each table built
    once for all of them (traceview.live parses what landed in every followed log at once)."""
    scans = [
        scan_bytes(data, file, mtime=mtime, size=len(data), line_offset=line_offset, lazy=lazy, byte_offset=byte_offset)
        for data, file, mtime, line_offset, byte_offset in pieces
    ]
    return build_tables(scans, lazy=lazy) if scans else empty_tables()


def read_trace_files(paths: list[str], *, lazy: bool = False, ends: list[int | None] | None = None) -> ParsedFile:
    """Parse several trace files into one set of tables (what reading them one by one and
    concatenating gives, with each table operation done once for all of them: for small
    files that fixed cost is most of a parse). `ends`: per file, how many bytes of it to
    read (None: all; a log being written, read up to its last complete record; a gzip log
    is read whole)."""
    scans = []
    for i, path in enumerate(paths):
        end = ends[i] if ends else None
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if is_gzip(fh):
                scans.append(scan_gzip(fh, str(path), st, lazy=lazy))
                continue
            size = st.st_size if end is None else end
            data = fh.read(size)
        scan = scan_bytes(data, str(path), mtime=st.st_mtime, size=size, lazy=lazy)
        if len(data) != size:
            scan.problems = file_changed(scan.problems, str(path), int(scan.stats["lines"]), size, len(data))  # type: ignore[call-overload]
        scans.append(scan)
    return build_tables(scans, lazy=lazy)


def read_trace_file(path: str | os.PathLike[str], *, lazy: bool = False) -> ParsedFile:
    """Parse one trace file (plain or gzip; `lazy`: see parse_trace_bytes, ignored for gzip,
    whose payloads cannot be read in place later)."""
    return read_trace_files([str(path)], lazy=lazy)


def read_trace(
    paths: list[str | os.PathLike[str]] | str | os.PathLike[str], *, jobs: int | None = None
) -> ParsedFile:
    """Parse trace files one after another and concatenate their tables (`jobs` is accepted
    for compatibility; parallel parsing lives in traceview.ingest.pipeline)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = [str(p) for p in paths]
    if not files:
        return empty_tables()
    parts = [read_trace_file(f) for f in files]
    return ParsedFile(
        events=pl.concat([p.events for p in parts], rechunk=False),
        strings=pl.concat([p.strings for p in parts]),
        stats=pl.concat([p.stats for p in parts]),
        problems=pl.concat([p.problems for p in parts]),
    )
