"""The one way in: paths and options -> discover -> parse cache or parse -> `Trace`.

`load_trace(LoadOptions(...))` is what `traceview summary/export/origin/open/run`, the UI and
the library (`traceview.load`) all call. It finds the inputs (parsers.discover), starts the
parse workers early when a big input will be parsed (before this process imports polars:
their start-up overlaps its own), then opens the parse cache entry of the inputs or parses
them into one (traceview.ingest.cache), or, without the cache, into a temporary directory removed
with the Trace (traceview.ingest.pipeline).

A traceview export (a directory whose manifest.json carries traceview's mark), or a
directory of several exports (one per host: `run/host-017/`), is an input too: its tables are
read instead of parsed, several exports merged into one Trace (traceview.ingest.exports.read_exports).

(The module is not called `load`: `traceview.load` is the library function.)
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from parsers.discover import InputError, Inputs, discover
from traceview.ingest import worker_pool
from traceview.ingest.manifest import export_dirs, inputs_of_exports, read_manifest

if TYPE_CHECKING:  # imported before polars (see traceview.ingest.worker_pool)
    from traceview.trace import Trace


@dataclass(frozen=True)
class LoadOptions:
    """What to load and how.

    `paths`: a TORCH_TRACE directory or file, a TORCH_LOGS text log, or a directory of both;
    more paths are further logs. `logs`: TORCH_LOGS text logs to merge. `latest`: keep only the
    newest run of a directory that holds several. `jobs`: parse processes (default: all
    cores). `use_cache`: read and write the parse cache. `heavy`: more work follows the parse
    (export), so worker processes pay off for less input. `prestart`: start the workers
    before importing polars (the command line: it has not imported polars yet)."""

    paths: tuple[str, ...]
    logs: tuple[str, ...] = ()
    latest: bool = False
    jobs: int | None = None
    use_cache: bool = True
    heavy: bool = False
    prestart: bool = False
    shard: tuple[int, int] | None = None  # (K, N): only the K-th (0-based) of N shares (traceview.ingest.shard)
    # exports: read the digest (what the summary reads, traceview.ingest.digest) instead of the
    # tables; summary, report and diff do, a view of the tables themselves (open, sql, ...) does not
    digests: bool = False

    @classmethod
    def of(cls, path: str | os.PathLike[str] | list | tuple, **kw: object) -> LoadOptions:
        """Options for one path or several (`kw`: the other fields; `logs` any iterable)."""
        paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
        if "logs" in kw:
            kw["logs"] = tuple(str(p) for p in (kw["logs"] or ()))
        return cls(tuple(str(p) for p in paths), **kw)  # type: ignore[arg-type]

    @property
    def all_logs(self) -> list[str]:
        """The text logs (and further traces) given besides the first path."""
        return [*self.paths[1:], *self.logs]

    def with_run(self, run_paths: list[str], text_logs: list[str]) -> LoadOptions:
        """These options for one run of several found in a directory (its trace files, and
        the directory's text logs)."""
        first, *rest = run_paths
        return dataclasses.replace(self, paths=(first,), logs=(*rest, *text_logs), latest=False)


def discover_inputs(opts: LoadOptions) -> Inputs:
    """What `opts` points at (raises parsers.discover.InputError for a bad path)."""
    exports = exports_of(opts)
    if exports:
        manifests = [read_manifest(d) or {} for d in exports]
        return inputs_of_exports(exports, manifests, where=opts.paths[0])
    inputs = discover(opts.paths[0], latest=opts.latest, extra_logs=opts.all_logs)
    if opts.shard is not None:
        from traceview.ingest.shard import shard_inputs

        inputs = shard_inputs(inputs, *opts.shard)
    return inputs


def exports_of(opts: LoadOptions) -> list:  # list[Path]
    """The traceview exports `opts` points at (empty: logs, to be parsed). Exports are read
    as they are: more logs beside them, or `--latest`, are refused rather than ignored."""
    exports = export_dirs(opts.paths[0])
    if exports and opts.all_logs:
        raise InputError(f"{opts.paths[0]}: is a traceview export; more logs cannot be merged into it (export them too)")
    if exports and opts.shard is not None:
        raise InputError(f"{opts.paths[0]}: is a traceview export; --shard splits logs, not exports")
    if exports and opts.latest:
        raise InputError(f"{opts.paths[0]}: is a traceview export; --latest applies when the logs are parsed (export with it)")
    return exports


def load_trace(opts: LoadOptions, inputs: Inputs | None = None) -> Trace:
    """The Trace of `opts` (`inputs`: what `discover_inputs(opts)` found, when the caller
    looked already, e.g. to offer a choice of runs)."""
    from traceview.ingest import cache

    exports = exports_of(opts)
    if exports:
        from traceview.ingest.exports import read_exports

        return read_exports(exports, where=opts.paths[0], digests=opts.digests)
    if inputs is None:
        inputs = discover_inputs(opts)
    cached = opts.use_cache and cache.is_cached(inputs)
    total = sum(t.size for t in inputs.traces) + sum(os.path.getsize(p) for p in inputs.text_logs)
    jobs = worker_pool.parse_processes(total, opts.jobs, heavy=opts.heavy)
    if opts.prestart and not cached:
        prestart_workers(total, jobs, heavy=opts.heavy)
    if not opts.use_cache:
        from traceview.ingest.pipeline import load_parsed

        return load_parsed(inputs, jobs=jobs, heavy=opts.heavy)
    return cache.load_cached(inputs, jobs=jobs, heavy=opts.heavy)


def prestart_workers(total: int, n: int, *, heavy: bool) -> None:
    """Start the parse workers now (`n` processes will parse `total` bytes), when the input is
    big enough for traceview.ingest.pipeline to use them (polars not imported yet: their start-up
    overlaps this process's)."""
    if n > 1 and total >= (worker_pool.HEAVY_PARALLEL_MIN_BYTES if heavy else worker_pool.PARALLEL_MIN_BYTES):
        # this process parses too, so the parse uses n - 1 workers; an export's second
        # phase runs in n workers only, and the last one is best started now, while the
        # parse runs, than after it
        worker_pool.prestart(n if heavy else n - 1)


def load(
    path: str | os.PathLike[str],
    *,
    latest: bool = False,
    logs: list[str] | None = None,
    jobs: int | None = None,
    cache: bool = False,
) -> Trace:
    """Load a TORCH_TRACE directory or file, a TORCH_LOGS text log, or a directory of both;
    or a traceview export, or a directory of exports (one per host), merged into one Trace.

    `latest` keeps only the newest run when a directory holds several; `logs` adds text logs;
    `cache` reads and writes the parse cache (as the command line does). Exports are read
    whole (every table as written; `summary` reads their digests instead)."""
    return load_trace(LoadOptions.of(path, logs=logs or (), latest=latest, jobs=jobs, use_cache=cache))
