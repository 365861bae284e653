"""What each TORCH_COMPILE_DEBUG=1 run folder among the inputs gave, and what it cannot tell.

A folder (parsers.debugdir) holds one process's Inductor compiles, one graph folder each, and
the messages Dynamo logged (only what TORCH_LOGS enabled). Without that process's TORCH_TRACE
log: no compile times, guards, cache lookups or compile status; a graph folder's compile id is
known only from torch's `debug trace:` warning on stderr (a capture given beside the folder);
a graph folder with files but without `output_code.py` is an Inductor compile that did not
finish (it failed or was stopped: the folder alone does not say which); an empty one is a graph
Inductor found in its FX graph cache (a hit writes no debug file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from traceview.trace import Trace


def debug_dirs(trace: Trace) -> list[dict[str, Any]]:
    """One entry per run folder: `path`, `pid`, `graphs` (graph folders with files), `empty` (graph
    folders Inductor wrote nothing into: name, path, AOT id; an FX graph cache hit), `tied` (of them, with
    a compile id), `ties` (folder name -> compile id), `unfinished` (graph folders without
    output_code.py: name, path, AOT id, compile id when tied), `messages` (records of its
    torchdynamo/debug.log), `from_folder` (graph folders read from the folder: all, or with
    `covered_by`, the same process's TORCH_TRACE log, those whose graph it lacks)."""
    inp = trace.inputs
    runs = getattr(inp, "debug_runs", None) or []
    if not runs:
        return []
    recs = trace.log_records
    out = []
    for run in runs:
        prefix = run.path.rstrip("/\\")
        mine = recs.filter(pl.col("file").str.starts_with(prefix + "/") | pl.col("file").str.starts_with(prefix + "\\"))
        ties: dict[str, str | None] = {}
        for r in mine.filter(pl.col("artifact").str.starts_with("debug_")).select("file", "compile_id", "trace_id").iter_rows(named=True):
            name = Path(r["file"]).parent.name
            if r["compile_id"] is not None or name not in ties:
                ties[name] = r["trace_id"][1:-1] if r["trace_id"] else None
        # a graph folder Inductor wrote nothing into: it made the folder, then found the graph in
        # its FX graph cache (a hit writes no debug file); not a compile that failed
        written = [g for g in run.graphs if g.files]
        names = [Path(g.path).name for g in written]
        messages = mine.filter(pl.col("file") == run.dynamo_log).height if run.dynamo_log else 0
        out.append({
            "path": run.path,
            "pid": run.pid,
            "graphs": len(written),
            "empty": [{"folder": Path(g.path).name, "path": g.path, "aot_id": g.aot_id} for g in run.graphs if not g.files],
            "tied": sum(1 for n in names if ties.get(n)),
            "ties": {n: ties.get(n) for n in names},
            "unfinished": [{"folder": Path(g.path).name, "path": g.path, "aot_id": g.aot_id,
                            "compile_id": ties.get(Path(g.path).name)}
                           for g in written if not g.finished],
            "messages": messages,
            "from_folder": len({n for n in ties}),
            "covered_by": run.covered_by,
        })
    return out
