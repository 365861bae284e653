"""Parse cache: a parsed trace's tables as Arrow IPC files, memory-mapped on reopen.

Kept in `$TRACEVIEW_CACHE_DIR`, else `$XDG_CACHE_HOME/traceview`, else `~/.cache/traceview`;
never inside the input directory. An entry is keyed by the inputs' absolute paths, sizes and
mtimes, the options that change what is loaded, and the schema version, so a changed or
touched input is parsed again. `traceview cache clear` removes every entry; old entries beyond
`MAX_ENTRIES` are removed when a new one is written.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import orjson
import polars as pl

from parsers.discover import Inputs, discover
from traceview.schema import SCHEMA_VERSION
from traceview.trace import BASE_TABLES, DERIVED_TABLES, Trace, load_inputs

MAX_ENTRIES = 16
PARSER_VERSION = "1"  # bump when parsing changes what the tables hold


def cache_dir() -> Path:
    """Where cached traces are kept."""
    env = os.environ.get("TRACEVIEW_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "traceview"


def cache_key(inputs: Inputs) -> str:
    h = hashlib.sha256()
    h.update(f"schema={SCHEMA_VERSION};parser={PARSER_VERSION}".encode())
    for p in [*inputs.trace_paths, *inputs.text_logs]:
        st = os.stat(p)
        h.update(f"\0{os.path.abspath(p)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()[:32]


def load_cached(
    path: str,
    *,
    latest: bool = False,
    logs: list[str] | None = None,
    jobs: int | None = None,
    use_cache: bool = True,
) -> Trace:
    """Load `path`, from the cache when its inputs are unchanged; otherwise parse and cache."""
    inputs = discover(path, latest=latest, extra_logs=logs)
    if not use_cache:
        return load_inputs(inputs, jobs=jobs)
    entry = cache_dir() / cache_key(inputs)
    if (entry / "done").exists():
        try:
            trace = _read_entry(entry, inputs)
            os.utime(entry / "done")
            return trace
        except (OSError, pl.exceptions.PolarsError, ValueError):
            shutil.rmtree(entry, ignore_errors=True)
    trace = load_inputs(inputs, jobs=jobs)
    trace._cache_entry = entry  # type: ignore[attr-defined]
    return trace


def save_cache(trace: Trace) -> None:
    """Write the trace's base tables and the derived tables computed so far (best effort)."""
    entry: Path | None = getattr(trace, "_cache_entry", None)
    if entry is None:
        return
    tmp: Path | None = None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
        names = list(BASE_TABLES) + [n for n in DERIVED_TABLES if n in trace.__dict__]
        for name in names:
            getattr(trace, name).write_ipc(tmp / f"{name}.arrow", compression="uncompressed")
        (tmp / "tables.json").write_bytes(orjson.dumps(names))
        (tmp / "done").touch()
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        os.rename(tmp, entry)
        _prune(entry.parent)
    except OSError:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _read_entry(entry: Path, inputs: Inputs) -> Trace:
    names = orjson.loads((entry / "tables.json").read_bytes())
    tables = {n: pl.read_ipc(entry / f"{n}.arrow", memory_map=True) for n in names}
    return Trace.from_tables(tables, inputs=inputs)


def _prune(root: Path) -> None:
    entries = sorted(
        (p for p in root.iterdir() if (p / "done").exists()), key=lambda p: (p / "done").stat().st_mtime
    )
    for p in entries[:-MAX_ENTRIES]:
        shutil.rmtree(p, ignore_errors=True)


def clear_cache() -> int:
    """Remove every cached trace; returns how many were removed."""
    root = cache_dir()
    if not root.exists():
        return 0
    n = 0
    for p in root.iterdir():
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
            n += 1
    return n
