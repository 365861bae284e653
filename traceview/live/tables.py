"""The tables of logs being written, kept up to date chunk by chunk.

Each chunk (traceview.live.tail) is parsed alone, with the loading path's parsers
(`parse_trace_bytes`, lazily, as traceview.ingest parses a piece of a big log; the text-log
parser over the lines added), its line numbers counted from the file's start. Parsing a chunk
costs what its bytes cost; nothing read before is parsed again.

A trace log's events are kept by compile id, so that what a chunk changed can be derived again
from the compiles it touched alone (`trace(touched)`): their frames' every compile (a recompile's
cause compares it with the compiles before it), never the whole log. `trace()` is a `Trace` over
everything read so far, its derived tables built by the same functions as a parsed input's.

What the logs held when the watch began (its backlog) is parsed by the loading path, in its
worker processes (traceview.ingest), and its tables filed here as a chunk's are (`seed`). The
parts keep the tables derived from the chromium events, not the events' decoded fields: those
are decoded from the files for the compiles a look touches, when it first touches them (most
compiles of a long log are never touched again).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from parsers.compile_ids import frame_of
from parsers.compiles import METRICS_KINDS
from parsers.schemas import empty_table
from parsers.textlog import STATS_SCHEMA as TEXT_STATS_SCHEMA
from parsers.textlog import parse_text_bytes
from parsers.torch_trace import (
    CHROMIUM_SCHEMA,
    PROBLEMS_SCHEMA,
    STRINGS_SCHEMA,
    decode_chromium,
    hydrate,
    parse_trace_pieces,
)
from parsers.torch_trace import STATS_SCHEMA as TRACE_STATS_SCHEMA
from traceview.ingest.parse_jobs import combine_piece_stats, derive_trace_tables
from traceview.live.tail import Chunk
from traceview.trace import Trace

Touched = dict[str, set[str | None]]  # trace log -> compile ids a chunk added records to; text log -> {None}


@dataclass
class _TraceLog:
    events: dict[str | None, list[pl.DataFrame]] = field(default_factory=dict)  # by compile id
    chromium: dict[str | None, list[pl.DataFrame]] = field(default_factory=dict)
    strings: list[pl.DataFrame] = field(default_factory=list)
    stats: list[pl.DataFrame] = field(default_factory=list)
    problems: list[pl.DataFrame] = field(default_factory=list)
    frames: dict[Any, set[str]] = field(default_factory=dict)  # frame id -> its compile ids
    # by compile id: the backlog's chromium events, not decoded yet (`seed`)
    undecoded: dict[str | None, pl.DataFrame] = field(default_factory=dict)

    def compact(self) -> None:
        """The per-chunk pieces of the log-wide tables as one each (a long watch adds a piece per
        look: each Trace would concatenate them all again)."""
        if len(self.stats) > 1:
            self.stats = [combine_piece_stats(pl.concat(self.stats))]
        if len(self.strings) > 1:
            self.strings = [pl.concat(self.strings)]
        for table in (self.events, self.chromium):
            outside = table.get(None)
            if outside is not None and len(outside) > 64:  # runtime records: the newest stays apart
                table[None] = [pl.concat(outside[:-1], how="vertical_relaxed"), outside[-1]]


@dataclass
class _TextLog:
    records: list[pl.DataFrame] = field(default_factory=list)
    other_lines: list[pl.DataFrame] = field(default_factory=list)
    stats: list[pl.DataFrame] = field(default_factory=list)
    continuation: str = "auto"  # decided by the first chunk that shows it


@dataclass
class LiveTables:
    """Everything read so far of the followed logs."""

    traces: dict[str, _TraceLog] = field(default_factory=dict)
    texts: dict[str, _TextLog] = field(default_factory=dict)
    bytes_parsed: int = 0
    parse_s: float = 0.0
    last_chunk: dict[str, tuple[pl.DataFrame, pl.DataFrame]] = field(default_factory=dict)  # text log -> its last chunk's records, other lines
    # text log -> its records at its newest timestamp (the capture's last timestamp may be one)
    newest: dict[str, pl.DataFrame] = field(default_factory=dict)

    def add(self, chunks: list[Chunk]) -> Touched:
        """Parse the chunks into the tables; which compiles (and text logs) they touched. The
        trace logs' chunks are parsed as one batch (a poll of 48 growing rank files pays each
        table operation once, not 48 times)."""
        import time

        touched: Touched = {}
        t0 = time.perf_counter()
        pieces = []
        for c in chunks:
            if c.restarted:
                self.traces.pop(c.path, None)
                self.texts.pop(c.path, None)
            if not c.data:
                continue
            self.bytes_parsed += len(c.data)
            if c.kind == "trace":
                pieces.append(c)
            else:
                self._add_text(c)
                touched.setdefault(c.path, set()).add(None)
        if pieces:
            for path, ids in self._add_traces(pieces).items():
                touched.setdefault(path, set()).update(ids)
        self.parse_s += time.perf_counter() - t0
        return touched

    def _add_traces(self, chunks: list[Chunk]) -> Touched:
        """Parse trace chunks (one batch) and file their rows by log and compile id. A log's
        records outside any compile touch it only when they may end one (a frameless
        compile's `compilation_metrics`): runtime records are not looked at again."""
        parsed = parse_trace_pieces([(c.data, c.path, _mtime(c.path), c.line_offset, c.byte_offset) for c in chunks], lazy=True)
        ev = parsed.events
        if any(c.compressed for c in chunks):  # a .gz log: payloads read from its text, not the file
            ev = hydrate(ev)[0]
        chromium = parsed.chromium if parsed.chromium is not None else pl.DataFrame(schema=CHROMIUM_SCHEMA)
        touched: Touched = {}
        for c in chunks:
            self.traces.setdefault(c.path, _TraceLog())
        for (path,), part in parsed.strings.group_by("file"):
            self.traces[path].strings.append(part)
        for (path,), part in parsed.stats.group_by("file"):
            self.traces[path].stats.append(part)
        for (path,), part in parsed.problems.group_by("file"):
            self.traces[path].problems.append(part)
        for (path, cid), part in ev.group_by("file", "compile_id", maintain_order=True):
            log = self.traces[path]
            log.events.setdefault(cid, []).append(part)
            if cid is not None:
                log.frames.setdefault(frame_of(cid), set()).add(cid)
                touched.setdefault(path, set()).add(cid)
            elif part["kind"].is_in(METRICS_KINDS).any():
                touched.setdefault(path, set()).add(None)
        for (path, cid), part in chromium.group_by("file", "compile_id", maintain_order=True):
            self.traces[path].chromium.setdefault(cid, []).append(part)
            if cid is not None:
                touched.setdefault(path, set()).add(cid)
        return touched

    def seed(self, trace: Trace) -> None:
        """Start from `trace`: what the logs held when the watch began (its backlog), parsed by
        the loading path. Its rows are filed by log and compile id as a chunk's are; its
        chromium events are decoded when a look first needs their compile (`_decode`)."""
        import time

        t0 = time.perf_counter()
        stats = trace.stats
        self.bytes_parsed += int(stats["bytes"].fill_null(0).sum())
        for (path,), part in stats.filter(pl.col("format") == "trace").group_by("file", maintain_order=True):
            self.traces.setdefault(path, _TraceLog()).stats.append(part.select(list(TRACE_STATS_SCHEMA)))
        for (path,), part in stats.filter(pl.col("format") == "text").group_by("file", maintain_order=True):
            log = self.texts.setdefault(path, _TextLog())
            log.stats.append(part.select(list(TEXT_STATS_SCHEMA)))
            log.continuation = "unprefixed" if part["legacy_continuation"].any() else "prefixed"
        ev = trace.index_events()
        for (path, cid), part in ev.group_by("file", "compile_id", maintain_order=True):
            log = self.traces.setdefault(path, _TraceLog())
            log.events.setdefault(cid, []).append(part)
            if cid is not None:
                log.frames.setdefault(frame_of(cid), set()).add(cid)
        chromium = ev.filter(pl.col("kind") == "chromium_event")
        for (path, cid), part in chromium.group_by("file", "compile_id", maintain_order=True):
            self.traces[path].undecoded[cid] = part
        for name, attr in (("strings", "strings"), ("problems", "problems")):
            for (path,), part in getattr(trace, name).group_by("file", maintain_order=True):
                if path in self.traces:
                    getattr(self.traces[path], attr).append(part)
        for name, attr in (("log_records", "records"), ("other_lines", "other_lines")):
            for (path,), part in getattr(trace, name).group_by("file", maintain_order=True):
                if path in self.texts:
                    getattr(self.texts[path], attr).append(part)
                    if name == "log_records":
                        self._newest(path, part)
        self.parse_s += time.perf_counter() - t0

    def _decode(self, wanted: list[tuple[_TraceLog, str | None]]) -> None:
        """Decode the backlog's chromium events of these compiles (one read of their payloads)."""
        todo = [(log, cid) for log, cid in wanted if cid in log.undecoded]
        if not todo:
            return
        # (in file order: hydrate reads each file's payloads front to back)
        rows = pl.concat([log.undecoded.pop(cid) for log, cid in todo], how="vertical_relaxed").sort("file", "lineno")
        decoded = decode_chromium(hydrate(rows)[0])
        got = decoded.partition_by("file", "compile_id", as_dict=True, maintain_order=True)
        for (path, cid), part in got.items():
            self.traces[path].chromium.setdefault(cid, []).insert(0, part)  # before what chunks added

    def _add_text(self, c: Chunk) -> None:
        log = self.texts.setdefault(c.path, _TextLog())
        parsed = parse_text_bytes(c.data, c.path, mtime=_mtime(c.path), line_offset=c.line_offset,
                                  continuation=log.continuation)  # type: ignore[arg-type]
        if log.continuation == "auto" and parsed.records.height:
            log.continuation = "unprefixed" if parsed.stats["legacy_continuation"][0] else "prefixed"
        log.records.append(parsed.records)
        log.other_lines.append(parsed.other_lines)
        log.stats.append(parsed.stats)
        self.last_chunk[c.path] = (parsed.records, parsed.other_lines)
        self._newest(c.path, parsed.records)

    def _newest(self, path: str, records: pl.DataFrame) -> None:
        """Keep the text log's records at its newest timestamp, with `records` added."""
        rows = records.filter(pl.col("ts").is_not_null())
        if rows.is_empty():
            return
        old = self.newest.get(path)
        rows = rows if old is None else pl.concat([old, rows], how="vertical_relaxed")
        self.newest[path] = rows.filter(pl.col("ts") == pl.col("ts").max())

    # ------------------------------------------------------------------ Traces over the tables
    def trace(self, touched: Touched | None = None, *, newest_text: bool = False) -> Trace:
        """A Trace over everything read so far, or (`touched`) over the frames of the compiles
        a chunk touched (each frame's every compile) and the text logs' last chunks
        (`newest_text`: every text log's records at its newest timestamp instead, which is all
        the capture's last timestamp needs: analyze.unfinished.capture_end)."""
        ev, chrom, strings, stats, problems = [], [], [], [], []
        records, other, text_stats = [], [], []
        chosen: list[tuple[str, _TraceLog, list[str | None]]] = []
        for path, log in self.traces.items():
            if touched is not None and path not in touched:
                continue
            ids: list[str | None]
            if touched is None:
                ids = list(log.events.keys() | log.chromium.keys())
            else:
                want = {frame_of(c) for c in touched[path] if c is not None}
                ids = sorted({c for f in want for c in log.frames.get(f, ())} | {c for c in touched[path] if c is not None})
                if None in touched[path]:
                    ids.append(None)
            chosen.append((path, log, ids))
        # (a partial Trace takes the records outside any compile of the newest chunk only: the
        # backlog's when no chunk added some since)
        self._decode([(log, cid) for _path, log, ids in chosen for cid in ids
                      if cid is not None or touched is None or not log.chromium.get(None)])
        for _path, log, ids in chosen:
            for cid in ids:
                if cid is None and touched is not None:
                    # records outside any compile: only the newest chunk's (runtime chromium
                    # events, a frameless compile's metrics)
                    ev.extend(log.events.get(None, [])[-1:])
                    chrom.extend(log.chromium.get(None, [])[-1:])
                    continue
                ev.extend(log.events.get(cid, []))
                chrom.extend(log.chromium.get(cid, []))
            log.compact()
            strings.extend(log.strings)
            stats.extend(log.stats)
            problems.extend(log.problems)
        for path, tlog in self.texts.items():
            if touched is not None and newest_text:
                if path in self.newest:
                    records.append(self.newest[path])
            elif touched is not None:
                if path not in touched:
                    continue
                r, o = self.last_chunk.get(path, (None, None))
                if r is not None:
                    records.append(r)
                    other.append(o)
            else:
                records.extend(tlog.records)
                other.extend(tlog.other_lines)
            tlog.stats = [_text_stats(tlog.stats)]  # one row per log, not one per look
            text_stats.append(tlog.stats[0])
        return _trace_of(ev, chrom, strings, stats, problems, records, other, text_stats, partial=touched is not None)

    def files(self) -> list[str]:
        return [*self.traces, *self.texts]


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _text_stats(parts: list[pl.DataFrame]) -> pl.DataFrame:
    st = pl.concat(parts)
    sums = [c for c, t in st.schema.items() if t == pl.Int64]
    return st.select(
        pl.col("file").first(),
        *[pl.col(c).sum() for c in sums],
        pl.col("legacy_continuation").any(),
        pl.col("invalid_utf8").any(),
        pl.col("truncated_tail").last(),
        pl.col("first_ts").min(),
        pl.col("last_ts").max(),
    ).select(st.columns)


def _cat(parts: list[pl.DataFrame], schema: dict | None = None, by: tuple[str, ...] = ("file", "lineno")) -> pl.DataFrame:
    if not parts:
        return pl.DataFrame(schema=schema) if schema is not None else pl.DataFrame()
    df = pl.concat(parts, how="vertical_relaxed")
    return df.sort(list(by)) if by and all(b in df.columns for b in by) else df


# The payloads the events of a chunk are derived from, besides the summary's (parsed with the
# index): the guard trees (analyze.code_objects reads the class of `self` from them).
_CHUNK_PAYLOADS = ("dynamo_cpp_guards_str",)


def _events_loader(events: pl.DataFrame, partial: bool) -> object:
    """The `events` table with its payloads read from the files: all of them, or (`partial`,
    a Trace of what a chunk touched) only _CHUNK_PAYLOADS', which is what its events need: a
    compile's graphs and code are not read again at every chunk."""
    if "payload_start" not in events.columns:
        return events
    if not partial:
        return lambda: hydrate(events)[0]
    wanted = events.with_columns(
        pl.when(pl.col("kind").is_in(_CHUNK_PAYLOADS)).then(pl.col("payload_start")).alias("payload_start")
    )
    return lambda: hydrate(wanted)[0]


def _trace_of(ev, chrom, strings, stats, problems, records, other, text_stats, *, partial: bool) -> Trace:
    from parsers.textlog import LOG_RECORDS_SCHEMA, OTHER_LINES_SCHEMA

    events = _cat(ev)
    if events.is_empty() and not ev:
        events = empty_table("events")
    chromium = _cat(chrom, CHROMIUM_SCHEMA)
    strings_df = _cat(strings, STRINGS_SCHEMA, by=())
    trace_stats = [s.with_columns(pl.lit("trace").alias("format")) for s in stats]
    text_st = [s.with_columns(pl.lit("text").alias("format")) for s in text_stats]
    all_stats = pl.concat([*trace_stats, *text_st], how="diagonal_relaxed") if trace_stats or text_st else empty_table("stats")
    tables: dict[str, Any] = {
        "events": _events_loader(events, partial),
        "strings": strings_df,
        "stats": all_stats,
        "problems": _cat(problems, PROBLEMS_SCHEMA),
        "log_records": _cat(records, LOG_RECORDS_SCHEMA),
        "other_lines": _cat(other, OTHER_LINES_SCHEMA),
    }
    if ev:
        derived = derive_trace_tables(events, strings_df, chromium)
        if records:
            # a text log beside the trace: the fact tables hold both (Trace builds them so)
            derived = {k: v for k, v in derived.items() if k in ("compiles", "spans")}
        tables.update(derived)
    return Trace.from_tables(tables, index=lambda: events)
