"""Worker process of the parse pipeline: `python -m traceview.worker.process`.

Reads one job per line on stdin (JSON: the name of a function in traceview.worker.jobs and its
arguments), runs it, and answers one line per job on stdout (`{"ok": true, "value": ...}` or
`{"error": "..."}`). Started by `traceview.ingest.scheduler.run_jobs` with a plain subprocess rather than
multiprocessing, so that a user script calling `traceview.load` needs no `__main__` guard.
"""

from __future__ import annotations

import os
import sys

import orjson


def main() -> int:
    from traceview import timing

    t = timing.now()
    from traceview.ingest.scheduler import timed_call
    from traceview.worker.jobs import WORKER_FUNCTIONS

    timing.mark("worker imports", t)
    from traceview.errors import first_line

    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        job = orjson.loads(line)
        try:
            fn = WORKER_FUNCTIONS.get(job["fn"])
            if fn is None:
                raise ValueError(f"not a worker function: {job['fn']}")
            answer = {"ok": True, "value": timed_call(fn, job["args"])}
        except Exception as exc:  # reported to the parent, which raises it there
            answer = {"error": f"{type(exc).__name__}: {first_line(exc)}"}
        out.write(orjson.dumps(answer) + b"\n")
        out.flush()
    timing.mark_peak_rss()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # no interpreter teardown (~0.06 s with polars loaded): the parent waits for this exit
    os._exit(code)
