"""An opt-in timeline of a run, for finding where a command's time goes.

With TRACEVIEW_TIMING=1 in the environment, every process of a run (the command and its
parse workers) writes one line per step on stderr: ``traceview-timing PID STEP START END``,
wall-clock seconds since the epoch. ``bench/timeline.py CMD...`` runs a command that way and
prints the steps relative to its start. Off (the default), a step costs one boolean test.
"""

from __future__ import annotations

import os
import sys
import time

ENABLED = bool(os.environ.get("TRACEVIEW_TIMING"))


def now() -> float:
    """The clock `mark` uses."""
    return time.time()


def mark(step: str, start: float | None = None) -> None:
    """Record `step`: a point in time, or the span from `start` (a `now()`) to now."""
    if ENABLED:
        end = time.time()
        sys.stderr.write(f"traceview-timing {os.getpid()} {step} {end if start is None else start:.4f} {end:.4f}\n")


def mark_peak_rss() -> None:
    """Record this process's peak resident memory so far (a step named `peak RSS N MB`)."""
    if ENABLED:
        import resource

        mark(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")
