"""Worker processes for the parse pipeline, without heavy imports.

`traceview.ingest.scheduler.run_jobs` drives `python -m traceview.worker.process` subprocesses. Starting one costs
about a quarter of a second (importing polars and pyarrow), so the command line starts them
(`prestart`) before it imports anything heavy itself when it knows that a big, uncached
input is about to be parsed: the workers' start-up then overlaps the main process's.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
from pathlib import Path

# A parse process pays a fixed start-up (imports, and its first batch's warm-up: ~0.5 s of CPU
# on this project's 2-core machine, ~1 s on a 16-core GPU host): below this much input no
# worker is started, and a plain parse (summary, open, diff) starts one process per this much
# input, up to the cores: on a 16-core host, a cold summary of 470 MB of rank logs took
# 1.87-1.88 s with 4 processes, 1.91-2.02 s with 8 and 2.04-2.12 s with 16 (twice the CPU time
# of 4); of 1.9 GB, 2.87-3.04 s with 14 or 16 and 2.87 s with 8 (docs/performance.md, How).
# An export (heavy) does several times more work per byte and keeps every core.
PARALLEL_MIN_BYTES = 128 * 1024 * 1024
# graph tables and export cost several times the parse per byte: workers pay off sooner
HEAVY_PARALLEL_MIN_BYTES = 24 * 1024 * 1024

_ready: list[subprocess.Popen] = []


def _env() -> dict[str, str]:
    # one thread per worker process: the processes already use every core
    env = {**os.environ, "POLARS_MAX_THREADS": "1", "RAYON_NUM_THREADS": "1"}
    # polars' allocator (jemalloc) keeps freed pages for 0.5-1 s (polars' defaults); a worker
    # frees big tables group after group, so it gives pages back after 0.1 s. Measured on the
    # 48-rank export: worker peak RSS ~470 -> 410-450 MB for ~0.3 s more system time; with
    # 0 ms the peak is ~380 MB but page faults cost ~1 s.
    env["_RJEM_MALLOC_CONF"] = "dirty_decay_ms:100,muzzy_decay_ms:0"
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def spawn() -> subprocess.Popen:
    """A new worker process (jobs on its stdin, answers on its stdout)."""
    return subprocess.Popen(
        [sys.executable, "-m", "traceview.worker.process"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_env()
    )


def prestart(n: int) -> None:
    """Start `n` workers now, for `take` to hand out later (the pipeline uses one fewer
    than it has cores: this process works too). Unused ones exit when this process does
    (their stdin closes)."""
    while len(_ready) < n:
        _ready.append(spawn())


def take() -> subprocess.Popen:
    """A prestarted worker if one is still alive, else a new one."""
    while _ready:
        proc = _ready.pop(0)
        if proc.poll() is None:
            return proc
    return spawn()


def give_back(proc: subprocess.Popen) -> None:
    """Keep an idle worker for the next `take`."""
    _ready.append(proc)


@atexit.register
def _close_all() -> None:
    """Let idle workers finish and wait for them (so that their resource usage is counted
    with this process's, and none outlives it)."""
    while _ready:
        proc = _ready.pop()
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()


def parse_processes(total_bytes: int, jobs: int | None, *, heavy: bool) -> int:
    """How many processes parse `total_bytes` of input: `jobs` when the user chose, every core
    for heavy work (export), else one per PARALLEL_MIN_BYTES, between 1 and the cores."""
    if jobs:
        return jobs
    if heavy:
        return cpu_count()
    return max(1, min(cpu_count(), -(-total_bytes // PARALLEL_MIN_BYTES)))


def cpu_count() -> int:
    """Cores this process may use."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1
