"""The tables of a batch of scanned trace files (`ParsedFile`): each table operation done
once for all of them (for small files that fixed cost is most of a parse)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from parsers.compile_ids import compile_id_expr, trace_id_expr
from parsers.glog import timestamp
from parsers.kinds import is_known_kind
from parsers.torch_trace.scanning import Scan, add_chromium_fields
from parsers.torch_trace.schemas import (
    CHROMIUM_FIELDS,
    CHROMIUM_SCHEMA,
    EVENTS_SCHEMA,
    INDEX_SCHEMA,
    PROBLEMS_SCHEMA,
    STATS_SCHEMA,
    STRINGS_SCHEMA,
)


@dataclass
class ParsedFile:
    """The tables of one trace file."""

    events: pl.DataFrame
    strings: pl.DataFrame
    stats: pl.DataFrame
    problems: pl.DataFrame
    chromium: pl.DataFrame | None = None  # decoded chromium events (lazy parse only)


# ALIGNED: every column of a batch's tables in one chunk. The per-file columns come in one
# chunk per file (a gzip log's in one per piece), the per-row ones (file, year) in one; polars
# 2.1 panics on `pl.format` over a frame whose columns are chunked differently ("assertion
# failed: i < self.len()"), which a directory of two runs' logs, one with a frameless compile,
# reached. Rechunking copies the batch's small columns once (the lazy parse holds no payloads).


def build_tables(scans: list[Scan], *, lazy: bool) -> ParsedFile:
    """The tables of the scanned files, each table operation done once for all of them."""
    prefix = scans[0].prefix if len(scans) == 1 else pl.concat([s.prefix for s in scans])
    raw = pl.DataFrame(
        {
            "file": pl.Series(_per_row(scans, "file"), dtype=pl.String),
            "file_rank": pl.Series(_per_row(scans, "file_rank"), dtype=pl.Int32),
            "_year": pl.Series(_per_row(scans, "year"), dtype=pl.Int32),
            "_month": pl.Series(_per_row(scans, "month"), dtype=pl.Int32),
            "prefix_rank": prefix["prefix_rank"],
            "level": prefix["level"],
            "md": prefix["md"],
            "time": prefix["time"],
            "pid": prefix["pid"],
            "src_file": prefix["src"],
            "src_line": prefix["srcline"],
            **{c: _cat_series([s.columns[c] for s in scans]) for c in scans[0].columns},
        }
    ).rechunk()  # (see ALIGNED)
    if lazy:
        raw = raw.with_columns(pl.col("payload_start", "payload_end").replace(-1, None))
    kinds_seen = {kd for s in scans for kd in s.kinds}
    events = (
        raw.with_columns(compile_id_expr().alias("compile_id"))
        .with_columns(
            (pl.col("lineno") + pl.col("n_payload")).alias("end_lineno"),
            # the file name's rank_N wins: it is what the user sees and what tlparse uses
            pl.coalesce(
                pl.col("file_rank"),
                pl.col("rank"),
                pl.col("prefix_rank").cast(pl.Int32, strict=False),
            ).alias("rank"),
            pl.col("pid").cast(pl.Int32, strict=False),
            pl.col("src_line").cast(pl.Int32, strict=False),
            timestamp(pl.col("md"), pl.col("time"), pl.col("_year"), pl.col("_month")).alias("ts"),
            pl.col("kind").is_in(sorted(k for k in kinds_seen if is_known_kind(k))).alias("known_kind"),
            trace_id_expr().alias("trace_id"),
            pl.when(pl.col("n_payload") > 0).then(pl.col("block")).otherwise(None).alias("payload"),
        )
    )
    # A file named without its rank (opened before init_process_group: torch names it when it
    # writes its first record) holds records without `rank` before the process group was up and
    # with it after: one process writes one file, so its records' one rank is the file's.
    known = pl.col("rank").drop_nulls()
    events = events.with_columns(
        pl.when(pl.col("rank").is_null() & (known.n_unique().over("file") == 1))
        .then(known.first().over("file"))
        .otherwise(pl.col("rank"))
        .alias("rank")
    )
    # the same columns whether or not each file of a lazy parse could be read lazily
    schema = {**EVENTS_SCHEMA, **INDEX_SCHEMA} if lazy else EVENTS_SCHEMA
    events = events.select([pl.col(c).cast(t) for c, t in schema.items()])

    per_file = (
        events.group_by("file")
        .agg(
            pl.col("rank").drop_nulls().first().alias("rank"),
            pl.col("pid").drop_nulls().first().alias("pid"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts").max().alias("last_ts"),
        )
        .rows_by_key("file", unique=True)
        if events.height
        else {}
    )
    stats = pl.DataFrame(
        [
            {
                "file": s.file,
                **s.stats,
                **dict(zip(("rank", "pid", "first_ts", "last_ts"), per_file.get(s.file) or (s.file_rank, None, None, None))),
            }
            for s in scans
        ],
        schema=STATS_SCHEMA,
    )
    problems = pl.concat([s.problems for s in scans])
    strings = pl.concat([s.strings for s in scans])
    chromium = None
    if lazy:
        base = np.cumsum([0] + [s.stats["envelopes"] for s in scans[:-1]])  # type: ignore[operator]
        rows = np.concatenate([s.chromium_rows + b for s, b in zip(scans, base)])
        keys = events.select("file", "rank", "lineno", "compile_id")
        chromium = (keys[rows] if len(rows) else keys.clear()).with_columns(
            _cat_series([s.chromium[c] for s in scans]) for c in CHROMIUM_FIELDS
        ).select([pl.col(c).cast(t) for c, t in CHROMIUM_SCHEMA.items()]).rechunk()
    return ParsedFile(events=events, strings=strings, stats=stats, problems=problems, chromium=chromium)


def _per_row(scans: list[Scan], attr: str) -> list:
    """A per-file value repeated for each kept envelope of the file."""
    out: list = []
    for s in scans:
        out.extend([getattr(s, attr)] * s.stats["envelopes"])  # type: ignore[operator]
    return out


def _cat_series(parts: list[pl.Series]) -> pl.Series:
    return parts[0] if len(parts) == 1 else pl.concat(parts, rechunk=False)


def empty_tables() -> ParsedFile:
    """The four tables with their schemas and no rows."""
    return ParsedFile(
        events=pl.DataFrame(schema=EVENTS_SCHEMA),
        strings=pl.DataFrame(schema=STRINGS_SCHEMA),
        stats=pl.DataFrame(schema=STATS_SCHEMA),
        problems=pl.DataFrame(schema=PROBLEMS_SCHEMA),
    )


def decode_chromium(events: pl.DataFrame) -> pl.DataFrame:
    """The chromium table (CHROMIUM_SCHEMA) of `events` whose chromium events' payloads are
    read (`hydrate`), decoded as a lazy parse decodes it: for a parse's events kept without it
    (a Trace's parts hold the tables derived from it; traceview.live.tables needs it again)."""
    ch = events.filter((pl.col("kind") == "chromium_event") & pl.col("payload").is_not_null())
    rows: list[int] = []
    cols: dict[str, list] = {k: [] for k in CHROMIUM_FIELDS}
    for i, payload in enumerate(ch["payload"].to_list()):
        add_chromium_fields(i, payload, rows, cols)
    keys = ch.select("file", "rank", "lineno", "compile_id")[rows]
    return keys.with_columns(pl.Series(c, cols[c]) for c in CHROMIUM_FIELDS).select(
        [pl.col(c).cast(t) for c, t in CHROMIUM_SCHEMA.items()]
    )
