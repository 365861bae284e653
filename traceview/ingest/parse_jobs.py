"""What a worker runs to parse: a batch of small trace logs, a piece of a big one, the
finish of a big one (its per-file tables), a text log; each writes one part
(traceview.ingest.parts). Planned by traceview.ingest.pipeline.parse_to_dir."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import polars as pl

from parsers.schemas import empty_table
from traceview.ingest.parts import read_ipc, read_or_empty, replace_table, shift_lines, write_part

if TYPE_CHECKING:
    from parsers.torch_trace import ParsedFile


def process_trace_files(paths: list[str], outdir: str, ends: list[int | None] | None = None) -> None:
    """Worker: parse a batch of TORCH_TRACE logs and write them as one part. Every table is
    keyed by file, so the derived tables are built once over the batch (small files cost
    a fixed overhead per table operation that a batch pays once). `ends`: the bytes of each
    to read (parsers.discover.Inputs.limits; None: all)."""
    from parsers.torch_trace import read_trace_files

    parsed = read_trace_files(paths, lazy=True, ends=ends)
    tables = {
        "events": parsed.events,
        "strings": parsed.strings,
        "stats": parsed.stats.with_columns(pl.lit("trace").alias("format")),
        "problems": parsed.problems,
        **derive_trace_tables(parsed.events, parsed.strings, _chromium(parsed)),
    }
    write_part(Path(outdir), tables)


def _chromium(parsed: ParsedFile) -> pl.DataFrame:
    """The chromium events a lazy parse decoded (for every file of it, also one it had to
    read in full: gzip, CRLF)."""
    assert parsed.chromium is not None, "a lazy parse decodes the chromium events"
    return parsed.chromium


def derive_trace_tables(ev: pl.DataFrame, strings: pl.DataFrame, chromium: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The tables a trace log's summary needs, from its lazily parsed events (one file or
    several: every table is keyed by file)."""
    from parsers import facts
    from parsers.compiles import build_compiles, build_spans

    compiles = build_compiles(ev, strings, chromium)
    return {
        "compiles": compiles,
        "spans": build_spans(ev, chromium),
        "recompiles": facts.recompiles_from_trace(ev, compiles),
        "graph_break_records": facts.graph_breaks_from_trace(ev),
        "limit_hits": facts.limit_hits_from_trace(ev, compiles),
        "annotations": empty_table("annotations"),
    }


def process_trace_chunk(path: str, start: int, end: int, outdir: str) -> None:
    """Worker: parse bytes [start, end) of a big trace log (a piece that starts at a record).
    Line numbers count from the piece's first line until `finish_trace_file` shifts them."""
    from parsers.torch_trace import file_changed, parse_trace_bytes

    # read, not memory-mapped: the file may shrink meanwhile (a mapping read past its new
    # end kills the process with SIGBUS)
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        data = os.pread(fh.fileno(), end - start, start)
    parsed = parse_trace_bytes(
        data, path, mtime=st.st_mtime, size=end - start, lazy=True, byte_offset=start
    )
    if len(data) < end - start:
        parsed.problems = file_changed(parsed.problems, path, int(parsed.stats["lines"][0]), end - start, len(data))
    write_part(
        Path(outdir),
        {
            "events": parsed.events,
            "strings": parsed.strings,
            "stats_piece": parsed.stats,
            "problems": parsed.problems,
            "chromium": _chromium(parsed),
        },
    )


def finish_trace_file(pieces: list[str], outdir: str) -> None:
    """Worker: the per-file tables of a log parsed in pieces (compiles and spans need the
    whole file: a compile's records and a B/E pair can straddle two pieces). A piece numbers
    its lines from its own start: the lines before it are known only now that all pieces are
    parsed (which spares a counting pass over the file before the parse). Its problems are
    rewritten with the file's line numbers; its events keep theirs, and `pieces.json` holds
    each piece's offset for `part_events` to add when reading them."""
    st = pl.concat([read_ipc(Path(p) / "stats_piece.arrow") for p in pieces])
    offsets = [0, *itertools.accumulate(st["lines"].to_list()[:-1])]
    events, chromium = [], []
    for p, off in zip(pieces, offsets):
        events.append(shift_lines(read_ipc(Path(p) / "events.arrow"), off))
        chromium.append(shift_lines(read_ipc(Path(p) / "chromium.arrow"), off))
        if off and (Path(p) / "problems.arrow").exists():  # rare: most pieces have none
            replace_table(Path(p) / "problems.arrow", shift_lines(read_ipc(Path(p) / "problems.arrow"), off))
    ev = pl.concat(events, rechunk=False)
    strings = pl.concat([read_or_empty(Path(p), "strings") for p in pieces])
    stats = combine_piece_stats(st)
    tables = {
        "stats": stats.with_columns(pl.lit("trace").alias("format")),
        **derive_trace_tables(ev, strings, pl.concat(chromium)),
    }
    # piece names, relative to the workdir (a cache entry is renamed into place after parsing)
    meta = {"pieces": [Path(p).name for p in pieces], "line_offsets": offsets}
    write_part(Path(outdir), tables, {"pieces.json": orjson.dumps(meta)})


def combine_piece_stats(st: pl.DataFrame) -> pl.DataFrame:
    """The stats row of a trace log from the stats of its pieces, in file order."""
    sums = [c for c, t in st.schema.items() if t == pl.Int64 and c != "bytes"]
    return st.select(
        pl.col("file").first(),
        pl.col("bytes").sum(),
        # a column no piece counted (md5_mismatch of a lazy parse) stays null
        *[pl.when(pl.col(c).is_not_null().any()).then(pl.col(c).sum()).alias(c) for c in sums],
        pl.col("truncated_tail").last(),
        pl.col("invalid_utf8").any(),
        pl.col("rank").drop_nulls().first(),
        pl.col("pid").drop_nulls().first(),
        pl.col("first_ts").min(),
        pl.col("last_ts").max(),
    ).select(st.columns)


def process_text_log(path: str, outdir: str, end: int | None = None) -> None:
    """Worker: parse one TORCH_LOGS capture (`end`: its first bytes only) and write its part."""
    from parsers.facts import facts_from_text
    from parsers.textlog import read_text_log

    log = read_text_log(path, end=end)
    tables = {
        "log_records": log.records,
        "other_lines": log.other_lines,
        "stats": log.stats.with_columns(pl.lit("text").alias("format")),
        **{k: v for k, v in facts_from_text(log.records).items() if k != "guards"},
    }
    if log.damage is not None:  # a damaged .gz capture: said where the problems are
        lines = int(log.stats["lines"][0])
        tables["problems"] = pl.DataFrame(
            {"file": [path], "lineno": [lines + 1], "problem": ["gzip_damaged"], "detail": [log.damage]},
            schema=empty_table("problems").schema,
        )
    write_part(Path(outdir), tables)


def process_debug_run(path: str, outdir: str, covered_by: str | None = None, text_logs: list[str] | None = None) -> None:
    """Worker: read one TORCH_COMPILE_DEBUG run folder (parsers.debugdir) into a part: its
    messages and graph files as log records, each graph file tied to its compile id by the
    `debug trace:` lines of the stderr captures among `text_logs` (and a message those captures
    hold with its prefix left to them). A folder whose process's TORCH_TRACE log is among the
    inputs (`covered_by`) gives only the graph folders whose wrapper that trace lacks (a trace
    cut short): the trace wins for what it holds (parsers.sources)."""
    from parsers.debugdir import (
        debug_records,
        debug_ties,
        held_aot_ids,
        logged_with_prefix,
        read_run_dir,
    )
    from parsers.facts import facts_from_text
    from parsers.textlog import STATS_SCHEMA

    run = read_run_dir(Path(path))
    logs = text_logs or []
    held = held_aot_ids(covered_by) if covered_by else None
    elsewhere = logged_with_prefix(logs, run.pid) if run.dynamo_log and held is None else set()
    records = debug_records(run, debug_ties(logs, run.pid), elsewhere, held)
    size = sum(os.stat(f).st_size for f in run.files if os.path.isfile(f))
    stats = pl.DataFrame(
        [{"file": path, "bytes": size, "lines": int(records["lines"].sum() or 0), "records": records.height,
          "record_lines": int(records["lines"].sum() or 0), "continuation_lines": 0, "other_lines": 0,
          "legacy_continuation": False, "invalid_utf8": False, "truncated_tail": False}],
        schema=STATS_SCHEMA,
    )
    tables = {
        "log_records": records,
        "other_lines": empty_table("other_lines"),
        "stats": stats.with_columns(pl.lit("debug_dir").alias("format"), pl.lit(run.pid, dtype=pl.Int32).alias("pid")),
        **{k: v for k, v in facts_from_text(records).items() if k != "guards"},
    }
    write_part(Path(outdir), tables)
