"""Export many hosts' logs at once, through any executor (docs/pipeline.md).

`export_hosts` submits one `traceview export` per host directory (or per share of one
directory, `shards=N`: traceview.ingest.shard) to an executor with the concurrent.futures
interface (`submit` returning futures with `result()`): a local ProcessPoolExecutor (the
default), a Dask cluster's `distributed.Client(...).get_executor()`, Ray's
`ray.util.multiprocessing.Pool` wrapped likewise, ... Each task parses its logs and writes its
own export under `output`; `traceview summary OUTPUT/` then reads them as one run. The logs
must be readable where the tasks run (shared storage).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path

from traceview.errors import UserError


def export_one(
    path: str, out_dir: str, shard: tuple[int, int] | None = None, *, latest: bool = False,
    partition_by_rank: bool | None = True, jobs: int | None = 1,
) -> str:
    """`traceview export PATH -o OUT_DIR [--shard K/N]` as a function (the task `export_hosts`
    submits; importable by name in a worker process). Returns the export's directory."""
    from traceview.ingest.loading import LoadOptions, load_trace
    from traceview.output.export import write_export

    trace = load_trace(LoadOptions.of(path, latest=latest, jobs=jobs, use_cache=False, heavy=True, shard=shard))
    return str(write_export(trace, out_dir, partition_by_rank=partition_by_rank, jobs=jobs))


def export_tasks(paths: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str], shards: int = 1) -> list[tuple[str, str, tuple[int, int] | None]]:
    """(input, export directory, share) of every task: one per path, or per share of each
    path with `shards` > 1. One path's exports are `OUTPUT/shard-000`..., several paths'
    `OUTPUT/<name of the path>` (`-shard-000`... with shards)."""
    if shards < 1:
        raise UserError(f"shards={shards}: must be at least 1")
    names = [Path(p).name or str(p) for p in paths]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise UserError(f"two inputs are named {dup}: their exports would share one directory")
    out = Path(output)
    tasks = []
    for p, name in zip(paths, names):
        for k in range(shards):
            if len(paths) == 1:
                sub = f"shard-{k:03d}" if shards > 1 else name
            else:
                sub = f"{name}-shard-{k:03d}" if shards > 1 else name
            tasks.append((str(p), str(out / sub), (k, shards) if shards > 1 else None))
    return tasks


def export_hosts(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    shards: int = 1,
    executor: Executor | None = None,
    latest: bool = False,
    jobs: int | None = 1,
) -> list[Path]:
    """Export every host's logs (`paths`: one directory per host; or one directory split in
    `shards` shares) into `output`, one export per task, the tasks run by `executor` (default:
    a local process pool). Returns the exports' directories; `traceview.load(output)` and
    `traceview summary OUTPUT/` read them as one run. `jobs`: parse processes inside each task
    (1: the executor is the parallelism). A task's error is raised here, after the others end."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    tasks = export_tasks(list(paths), output, shards)
    own = executor is None
    # spawned, not forked: a fork of a process that has run polars' threads can hang
    pool: Executor = executor if executor is not None else ProcessPoolExecutor(
        max_workers=min(len(tasks), os.cpu_count() or 1), mp_context=multiprocessing.get_context("spawn")
    )
    try:
        futures = [
            pool.submit(export_one, src, out, shard, latest=latest, partition_by_rank=True, jobs=jobs)
            for src, out, shard in tasks
        ]
        errors: list[BaseException] = []
        done: list[Path] = []
        for f in futures:
            try:
                done.append(Path(f.result()))
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
        return done
    finally:
        if own:
            pool.shutdown()
