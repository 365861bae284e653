"""Parse cache: a parsed trace's tables as Arrow IPC files, memory-mapped on reopen.

Kept in `$TRACEVIEW_CACHE_DIR`, else `$XDG_CACHE_HOME/traceview`, else `~/.cache/traceview`;
never inside the input directory. An entry is keyed by the inputs' paths (absolute and as
given), sizes and mtimes (and the part read of a log being written: `Inputs.limits`), the
options that change what is loaded, and the schema version, so a changed or touched input is
parsed again. `traceview cache clear` removes every entry; old entries beyond
`MAX_ENTRIES` are removed when a new one is written.

Beside an entry's tables, its **findings document**: the report (`build_report`: the typed
findings and the figures the views show) as JSON, named by `versions.code_version()`, so a
second `summary`, `summary --json`, `report` or `open` reads the judgement instead of making it
again, and a changed traceview judges again. Written atomically; an unreadable one is a miss.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from parsers.discover import Inputs
from traceview.versions import PARSER_VERSION, SCHEMA_VERSION, code_version

if TYPE_CHECKING:  # this module is imported before polars (see traceview.ingest.worker_pool)
    from traceview.trace import Trace

MAX_ENTRIES = 16


def cache_dir() -> Path:
    """Where cached traces are kept."""
    env = os.environ.get("TRACEVIEW_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "traceview"


def is_cached(inputs: Inputs) -> bool:
    """Whether the cache holds a finished entry for these inputs."""
    return (cache_dir() / cache_key(inputs) / "done").exists()


def cache_key(inputs: Inputs) -> str:
    h = hashlib.sha256()
    h.update(f"schema={SCHEMA_VERSION};parser={PARSER_VERSION}".encode())
    for p in [*inputs.trace_paths, *inputs.text_logs, *inputs.debug_files]:
        st = os.stat(p)
        # the path as given too: the tables hold file names as given (a relative and an
        # absolute open of one file would otherwise share an entry naming the files one way)
        h.update(f"\0{os.path.abspath(p)}\0{p}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        limit = inputs.limits.get(p)
        if limit is not None and limit != st.st_size:  # a part of the file (a log being written)
            h.update(f"\0limit={limit}".encode())
    return h.hexdigest()[:32]


def load_cached(inputs: Inputs, *, jobs: int | None = None, heavy: bool = False) -> Trace:
    """The Trace of `inputs` from the cache when they are unchanged; otherwise parsed into a
    new cache entry (without a writable cache directory: parsed into a temporary one).
    traceview.ingest.loading.load_trace is the way in; this is its cache half."""
    import polars as pl

    from traceview.ingest.pipeline import load_parsed, open_dir, parse_to_dir

    def unreadable() -> tuple[type[BaseException], ...]:  # evaluated only when one is raised
        import pyarrow as pa

        return (OSError, pl.exceptions.PolarsError, pa.ArrowException, ValueError, KeyError)

    root = cache_dir()
    entry = root / cache_key(inputs)
    if (entry / "done").exists():
        try:
            trace = open_dir(entry, inputs)
            os.utime(entry / "done")
            return trace
        except unreadable():
            shutil.rmtree(entry, ignore_errors=True)
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    except OSError:  # no writable cache: parse without one
        return load_parsed(inputs, jobs=jobs, heavy=heavy)
    try:
        parse_to_dir(inputs, tmp, jobs=jobs, heavy=heavy)
        (tmp / "done").touch()
        shutil.rmtree(entry, ignore_errors=True)
        try:
            os.rename(tmp, entry)
        except OSError:  # another traceview cached the same inputs meanwhile: use that one
            if not (entry / "done").exists():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _prune(root)
    return open_dir(entry, inputs)


def _document(inputs: Inputs) -> Path:
    return cache_dir() / cache_key(inputs) / f"findings-{code_version()}.json"


def read_findings_document(inputs: Inputs) -> bytes | None:
    """The cached findings document of `inputs` (JSON bytes), or None: no finished parse entry,
    no document written by this code, or not readable."""
    try:
        return _document(inputs).read_bytes()
    except OSError:
        return None


def write_findings_document(inputs: Inputs, data: bytes) -> None:
    """Keep the findings document beside the parse entry of `inputs` (only where that entry is
    finished: a document never outlives its tables); written atomically, older ones removed."""
    try:
        path = _document(inputs)  # stats the inputs: one gone since (an export's logs) is no entry
        if not (path.parent / "done").exists():
            return
        fd, tmp = tempfile.mkstemp(prefix=".findings-", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        for old in path.parent.glob("findings-*.json"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:  # a read-only cache: the next run judges again
        pass


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
