"""The parse's on-disk part format: a directory of Arrow IPC files per part, and how they
are read back.

A workdir (a parse cache entry or a temporary directory) holds `parts.json` (the part
format version and the parts' names, in input order), one directory per part with a file
`<table>.arrow` per table (uncompressed, so that reading memory-maps it; an empty small
table is left out), and `merged/` with each small table of all parts in one file. A part is a
batch of small trace logs, a piece of a big one (`stats_piece.arrow`; its events are read
through the whole-file part, whose `pieces.json` names the pieces and their line offsets),
or a text log. The graph tables (`graphs.arrow` last: it marks them done), the payload md5
checks (`checks.arrow`, `payload_problems.arrow`) are added to a part later, zstd-compressed
(see traceview.ingest.graph_tables).

Who writes parts: traceview.ingest.pipeline (plans the parse) and the worker jobs; who reads them:
traceview.ingest.pipeline.Parts (a Trace's part store) and traceview.output.export.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import polars as pl

from parsers.schemas import empty_table
from traceview.versions import PART_FORMAT_VERSION

PART_TABLES = (
    "events",
    "strings",
    "stats",
    "problems",
    "log_records",
    "other_lines",
    "compiles",
    "spans",
    "recompiles",
    "graph_break_records",
    "limit_hits",
    "annotations",
)


# Tables small enough to keep as one file per trace (everything but records and payloads).
SMALL_TABLES = tuple(n for n in PART_TABLES if n not in ("events", "log_records", "other_lines"))


def write_part(outdir: Path, tables: dict[str, pl.DataFrame], extra: dict[str, bytes] | None = None) -> None:
    """Write a part's tables (an empty small table is left out: readers treat a missing one
    as empty, and every file costs a read when the parts are merged)."""
    tmp = Path(tempfile.mkdtemp(prefix=".part-", dir=outdir.parent))
    for name, df in tables.items():
        if df.height == 0 and name in SMALL_TABLES and name != "stats":
            continue
        df.write_ipc(tmp / f"{name}.arrow", compression="uncompressed")
    for name, data in (extra or {}).items():
        (tmp / name).write_bytes(data)
    os.rename(tmp, outdir)


def shift_lines(df: pl.DataFrame, lines: int) -> pl.DataFrame:
    """`df` with its line numbers `lines` further down the file."""
    if not lines:
        return df
    return df.with_columns(pl.col(c) + lines for c in ("lineno", "end_lineno") if c in df.columns)


def replace_table(path: Path, df: pl.DataFrame, compression: str = "uncompressed") -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    df.write_ipc(tmp, compression=compression)  # type: ignore[arg-type]
    os.rename(tmp, path)


def part_events(part: Path) -> pl.DataFrame:
    """The events of one part as parsed (payloads of SUMMARY_PAYLOAD_ARTIFACTS only, the
    others' byte ranges in `payload_start`/`payload_end`)."""
    if (part / "stats_piece.arrow").exists():  # a piece of a big file: its whole-file part has them
        return empty_table("events")
    if (part / "pieces.json").exists():  # the whole-file part of a big file: all its pieces
        meta = orjson.loads((part / "pieces.json").read_bytes())
        return pl.concat(
            [shift_lines(read_ipc(part.parent / p / "events.arrow"), off) for p, off in zip(meta["pieces"], meta["line_offsets"])],
            rechunk=False,
        )
    return read_or_empty(part, "events")


def hydrated_events(part: Path) -> pl.DataFrame:
    """The events of one part with every payload (read from the input files), and
    `payload_ok` as checked by `_graph_tables` when it has run."""
    return with_checks(_hydrate(part_events(part)), payload_checks(part))


def _hydrate(index: pl.DataFrame) -> pl.DataFrame:
    from parsers.torch_trace import hydrate

    return hydrate(index)[0]


def event_chunks(part: Path, *, verify: bool = False) -> Iterator[pl.DataFrame]:
    """The events of one part with every payload, in line order, in chunks of about
    GROUP_BYTES of payload (a big file's payloads are never all in memory at once).
    `verify`: check every payload's md5 here (for when the graph tables, which check them
    too, are being built at the same time); else `payload_ok` as `_graph_tables` found it."""
    from parsers.torch_trace import hydrate

    index = part_events(part)
    if index.height == 0:
        return
    checks = None if verify else payload_checks(part)  # read once for all the chunks
    size = (pl.col("payload_end") - pl.col("payload_start")).fill_null(0)
    chunk = (size.cum_sum() // GROUP_BYTES).alias("_chunk")
    for (_,), sub in index.with_columns(chunk).group_by("_chunk", maintain_order=True):
        events = hydrate(sub.drop("_chunk"), verify=verify)[0]
        yield events if verify else with_checks(events, checks)


def payload_checks(part: Path) -> pl.DataFrame | None:
    """The md5 checks `_graph_tables` made of a part's payloads (None before it has run)."""
    f = part / "checks.arrow"
    return read_ipc(f) if f.exists() else None


def with_checks(events: pl.DataFrame, checks: pl.DataFrame | None) -> pl.DataFrame:
    """`events` with `payload_ok` as `checks` found it."""
    if checks is not None and events.height:
        events = events.join(checks, on=["file", "lineno"], how="left", suffix="_checked", maintain_order="left").with_columns(
            pl.coalesce("payload_ok_checked", "payload_ok").alias("payload_ok")
        ).drop("payload_ok_checked")
    return events


GROUP_BYTES = 32 * 1024 * 1024  # payload bytes held in memory at once when building graph tables


def file_groups(index: pl.DataFrame) -> list[list[str]]:
    """The files of a part in groups of about GROUP_BYTES of payload, in order."""
    if index.height == 0:
        return [[]]
    # a part's non-empty events come from a lazy parse: they always carry the byte ranges
    sizes = (
        index.group_by("file", maintain_order=True)
        .agg((pl.col("payload_end") - pl.col("payload_start")).sum().alias("b"))
        .rows()
    )
    groups: list[list[str]] = [[]]
    total = 0
    for file, b in sizes:
        if groups[-1] and total + (b or 0) > GROUP_BYTES:
            groups.append([])
            total = 0
        groups[-1].append(file)
        total += b or 0
    return groups


def read_part_table(part: Path, name: str) -> pl.DataFrame | None:
    """Table `name` of one part as a user sees it (None when the part has none): events with
    their payloads, problems with those found when the payloads were checked."""
    if name == "events":
        return hydrated_events(part) if part in event_parts(part.parent) else None
    f = part / f"{name}.arrow"
    df = read_ipc(f) if f.exists() else None
    if name == "problems" and (part / "payload_problems.arrow").exists():
        extra = read_ipc(part / "payload_problems.arrow")
        df = extra if df is None else merge_problems([df, extra])
    return df


def merge_problems(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Problems of several sources, a (file, line, problem) found twice kept once."""
    df = pl.concat([f for f in frames if f.height] or frames[:1], how="vertical_relaxed")
    return df.unique(["file", "lineno", "problem"], keep="first", maintain_order=True).sort("file", "lineno")


def input_bytes(part: Path) -> int:
    """The size of the input a part was parsed from: what its graph tables and export cost
    grows with (its own files are a fraction of it: a lazy parse keeps no payloads). A piece
    of a big file counts its own files only: its file's whole-file part does that work."""
    stats = part / "stats.arrow"
    if not stats.exists():
        return sum(f.stat().st_size for f in part.glob("*.arrow"))
    df = read_ipc(stats)
    return int(df["bytes"].sum() or 0) if "bytes" in df.columns else stats.stat().st_size


def read_ipc(path: Path) -> pl.DataFrame:
    """Memory-mapped read of one IPC file (string columns stay views into the mapping);
    pyarrow's reader, which takes a third of the time polars' does for the small tables a
    summary reads by the dozen."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as src:
        table = pa.ipc.open_file(src).read_all()
    df = pl.from_arrow(table, rechunk=False)
    assert isinstance(df, pl.DataFrame)
    return df


def read_or_empty(part: Path, name: str) -> pl.DataFrame:
    """Table `name` of one part (`write_part` leaves an empty small table out)."""
    f = part / f"{name}.arrow"
    return read_ipc(f) if f.exists() else empty_table(name)


def part_dirs(workdir: Path) -> list[Path]:
    meta = orjson.loads((workdir / "parts.json").read_bytes())
    return [workdir / p for p in meta["parts"]]


def concat_table(workdir: Path, name: str) -> pl.DataFrame:
    frames = [read_ipc(f) for p in part_dirs(workdir) if (f := p / f"{name}.arrow").exists()]
    nonempty = [f for f in frames if f.height] or frames[:1] or [empty_table(name)]
    if len(nonempty) == 1:
        return nonempty[0]
    return pl.concat(nonempty, how="diagonal_relaxed", rechunk=False)


def lazy_concat(workdir: Path, name: str) -> Callable[[], pl.DataFrame]:
    """A loader for one table over every part (memory-mapped, opened when first called)."""
    if name == "events":
        return lambda: all_events(workdir)
    if name == "problems":
        return lambda: all_problems(workdir)
    merged = workdir / "merged" / f"{name}.arrow"
    if merged.exists():
        return lambda: read_ipc(merged)
    return lambda: concat_table(workdir, name)


def event_parts(workdir: Path) -> list[Path]:
    """Parts whose events `part_events` gives (a big file's whole-file part, not its pieces)."""
    return [
        p
        for p in part_dirs(workdir)
        if (p / "pieces.json").exists() or ((p / "events.arrow").exists() and not (p / "stats_piece.arrow").exists())
    ]


def _events_of_parts(workdir: Path, read: Callable[[Path], pl.DataFrame]) -> pl.DataFrame:
    frames = [read(p) for p in event_parts(workdir)]
    frames = [f for f in frames if f.height] or [empty_table("events")]
    return frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed", rechunk=False)


def all_events(workdir: Path) -> pl.DataFrame:
    return _events_of_parts(workdir, hydrated_events)


def all_problems(workdir: Path) -> pl.DataFrame:
    merged = workdir / "merged" / "problems.arrow"
    base = read_ipc(merged) if merged.exists() else concat_table(workdir, "problems")
    extra = [read_ipc(f) for p in part_dirs(workdir) if (f := p / "payload_problems.arrow").exists()]
    return merge_problems([base, *extra]) if any(e.height for e in extra) else base


def index_events(workdir: Path) -> pl.DataFrame:
    """The events as parsed: payloads of SUMMARY_PAYLOAD_ARTIFACTS only (see parsers.torch_trace)."""
    return _events_of_parts(workdir, part_events)


def merge_small_tables(workdir: Path) -> None:
    """One file per small table, so that opening a many-rank trace reads a handful of files."""
    out = workdir / "merged"
    if out.exists():
        return
    tmp = Path(tempfile.mkdtemp(prefix=".merged-", dir=workdir))
    parts = part_dirs(workdir)
    for name in PART_TABLES:
        if name in SMALL_TABLES:
            df = concat_table(workdir, name)
        elif not any((p / f"{name}.arrow").exists() for p in parts):
            df = empty_table(name)  # e.g. no text log: an empty table, opened without a parser import
        else:
            continue
        if name == "stats":
            df = _stats_order(df)
        df.write_ipc(tmp / f"{name}.arrow", compression="uncompressed")
    os.rename(tmp, out)


def _stats_order(stats: pl.DataFrame) -> pl.DataFrame:
    front = [c for c in ("file", "format") if c in stats.columns]
    return stats.select(front + [c for c in stats.columns if c not in front])

def write_part_list(workdir: Path, names: list[str]) -> None:
    """Write `parts.json`: the part format version and the parts of `workdir`, in order."""
    (workdir / "parts.json").write_bytes(orjson.dumps({"format": PART_FORMAT_VERSION, "parts": names}))
