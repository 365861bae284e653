"""The graph tables of a part (graphs, graph nodes, kernels, kernel calls, provenance, guards,
seq_nr links: traceview.trace.GRAPH_TABLES), built on demand (UI graph views, export) from
the part's events with every payload, a group of files at a time; the payloads' md5s are
checked on the way. In worker processes when there is enough to do."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from traceview.ingest.parts import (
    concat_table,
    file_groups,
    input_bytes,
    part_dirs,
    part_events,
    read_ipc,
    replace_table,
)
from traceview.ingest.scheduler import Job, in_parallel, run_jobs
from traceview.ingest.worker_pool import HEAVY_PARALLEL_MIN_BYTES


def process_graph_tables(partdir: str) -> None:
    """Worker: build the graph and kernel tables of one part from its events / log records."""
    build_graph_tables(Path(partdir))


GroupSink = Callable[[str, pl.DataFrame, dict[str, pl.DataFrame]], None]


def build_graph_tables(part: Path, on_group: GroupSink | None = None, *, keep: bool = True) -> dict[str, pl.DataFrame]:
    """Build (and write) the graph tables of one part, a group of files at a time (memory
    stays near GROUP_BYTES of payload); the payloads are read and their md5 checked on the
    way (`checks.arrow`, `payload_problems.arrow`). `on_group(name, events, tables)` is called
    for each group with its events (every payload) and graph tables. Returns the tables as
    written (`keep`: into the part too, for the graph views of a later open; a many-rank
    export, which writes them to the export, keeps only what the md5 checks found).

    They are written zstd-compressed: they repeat graph text and kernel code, and the ranks
    of one job repeat each other, so they shrink ~50x (the 48-rank benchmark's cache entry
    after an export: 525 MB -> 86 MB). They are read only for the graph views and export, where
    decompressing them costs less than writing and faulting in the uncompressed bytes."""
    from parsers.facts import guards_from_text, guards_from_trace
    from parsers.graphs import (
        build_graph_nodes,
        build_graphs,
        build_kernel_calls,
        build_kernels,
        build_provenance,
    )
    from parsers.seq_links import seq_links
    from parsers.torch_trace import hydrate

    records = read_ipc(part / "log_records.arrow") if (part / "log_records.arrow").exists() else None
    # forward/backward pairs never span two files, so the links are built per group,
    # against the annotations (seq_nr) of the whole trace
    ann_file = part.parent / "merged" / "annotations.arrow"
    annotations = read_ipc(ann_file) if ann_file.exists() else concat_table(part.parent, "annotations")
    index = part_events(part)
    groups = file_groups(index)
    acc: dict[str, list[pl.DataFrame]] = {}
    for gi, files in enumerate(groups):
        sub = index if len(groups) == 1 else index.filter(pl.col("file").is_in(files))
        events, payload_problems = hydrate(sub, verify=True)
        recs = records if gi == 0 else None
        graphs = build_graphs(events, recs)
        nodes = build_graph_nodes(graphs)
        guards = [guards_from_trace(events)] + ([guards_from_text(recs)] if recs is not None else [])
        tables = {
            "seq_links": seq_links(nodes, annotations),
            "guards": pl.concat(guards, how="vertical_relaxed"),
            "graph_nodes": nodes,
            "kernels": build_kernels(events, recs),
            "kernel_calls": build_kernel_calls(events, recs),
            "provenance": build_provenance(events),
            "checks": events.filter(pl.col("payload_ok").is_not_null()).select("file", "lineno", "payload_ok"),
            "payload_problems": payload_problems,
            "graphs": graphs,  # last: its presence marks the part as done
        }
        if on_group is not None:
            on_group(part.name if len(groups) == 1 else f"{part.name}g{gi}", events, tables)
        del events
        for name, df in tables.items():
            acc.setdefault(name, []).append(df)
    out = {name: frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical_relaxed") for name, frames in acc.items()}
    for name, df in out.items():
        if keep or name in ("checks", "payload_problems"):  # (small: what the md5 checks found)
            replace_table(part / f"{name}.arrow", df, "zstd")
    return out


def graph_jobs(workdir: Path) -> list[Job]:
    todo = []
    for part in part_dirs(workdir):
        if not (part / "graphs.arrow").exists():
            todo.append((process_graph_tables, (str(part),), input_bytes(part)))
    return todo


def ensure_graph_tables(workdir: Path, *, jobs: int | None = None) -> None:
    """Build the graph tables of every part that lacks them (in parallel)."""
    run_jobs(graph_jobs(workdir), jobs, min_bytes=HEAVY_PARALLEL_MIN_BYTES, here=False)


def graph_tables_in_workers(workdir: Path, *, jobs: int | None = None) -> bool:
    """Whether `ensure_graph_tables` has work to do and will do it in worker processes
    (this process is then free meanwhile)."""
    return in_parallel(graph_jobs(workdir), jobs, HEAVY_PARALLEL_MIN_BYTES)
