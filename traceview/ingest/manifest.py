"""The manifest.json of a traceview export: its mark, and finding exports on disk.

Import-light (no polars): traceview.ingest.loading asks whether a path is an export before it
decides how to load it, and the command line has not imported polars yet then.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from parsers.discover import Inputs

# In every manifest.json traceview writes: a directory is an export (to read, or to replace)
# only when its manifest has it.
EXPORT_MARKER = "traceview export 7f3c9a1e"
MANIFEST = "manifest.json"


def read_manifest(directory: str | os.PathLike[str]) -> dict | None:
    """The manifest of the export in `directory` (None: no manifest with traceview's mark)."""
    try:
        manifest = orjson.loads((Path(directory) / MANIFEST).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(manifest, dict) or manifest.get("written_by") != EXPORT_MARKER:
        return None
    return manifest


def export_dirs(path: str | os.PathLike[str]) -> list[Path]:
    """The traceview exports at `path`: `path` itself when it is one, else the exports
    directly inside it (one per host, e.g. `run/host-017/`), in name order; empty when
    `path` holds none (then it is a directory of logs, or a log)."""
    p = Path(path)
    if not p.is_dir():
        return []
    if read_manifest(p) is not None:
        return [p]
    try:
        children = sorted(c for c in p.iterdir() if c.is_dir() and not c.name.startswith("."))
    except OSError:
        return []
    return [c for c in children if read_manifest(c) is not None]


def beside_exports(path: str | os.PathLike[str], exports: list[Path]) -> list[Path]:
    """What a directory of exports holds besides them (log files, other directories): not
    read, so listed as skipped, never dropped silently. Empty when `path` is an export."""
    p = Path(path)
    if not p.is_dir() or read_manifest(p) is not None:
        return []
    names = {e.name for e in exports}
    try:
        return sorted(c for c in p.iterdir() if not c.name.startswith(".") and c.name not in names)
    except OSError:
        return []


def inputs_of_exports(roots: list[Path], manifests: list[dict], *, where: str | None = None) -> Inputs:
    """The inputs of several exports as one: every export's trace files, text logs and stray
    files (as the host that exported them named them), `where` (default: the first export)
    as the root. An export that left runs out (`--latest`) says so in `dropped_runs`."""
    from parsers.debugdir import DebugRun, GraphFolder
    from parsers.discover import Inputs, TraceFile

    merged = Inputs(root=where or str(roots[0]))
    for manifest in manifests:
        inp = manifest.get("inputs") or {}
        for t in inp.get("trace_files") or []:
            merged.traces.append(
                TraceFile(path=t["path"], rank=t.get("rank"), start="", mtime=0.0, size=t.get("bytes") or 0, run=t.get("run") or 0)
            )
        merged.text_logs.extend(inp.get("text_logs") or [])
        merged.stray.extend((s["path"], s["why"]) for s in inp.get("stray_files") or [])
        merged.dropped_runs.extend(inp.get("left_out_by_latest") or [])
        merged.runs = max(merged.runs, inp.get("runs") or 0)
        for r in inp.get("debug_runs") or []:
            merged.debug_runs.append(DebugRun(**{**r, "graphs": [GraphFolder(**g) for g in r.get("graphs") or []]}))
    if where is not None:
        why = "beside the exports, not read (export it too)"
        merged.stray.extend((str(c), why) for c in beside_exports(where, roots))
    return merged
