"""Run jobs, in worker processes when there is enough to do, else in this process.

A job is `(function, args, size in bytes)`; the function is one of the worker jobs
(traceview.worker.jobs), sent to a worker by name (`python -m traceview.worker.process`,
from the pool in traceview.ingest.worker_pool). Biggest first; the results come back in the order
of the jobs. The planners (traceview.ingest.pipeline, traceview.ingest.graph_tables,
traceview.output.export.parts) size the jobs and say from how many bytes processes are worth it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import orjson

from traceview import timing

Job = tuple  # (function, args, size in bytes)


def timed_call(fn: Callable, args: tuple | list) -> object:
    """`fn(*args)`, recorded as a step named after `fn` (see traceview.timing)."""
    t = timing.now()
    result = fn(*args)
    timing.mark(fn.__name__, t)
    return result


def in_parallel(todo: list[Job], jobs: int | None, min_bytes: int) -> bool:
    """Whether `run_jobs` spreads `todo` over processes: more than one job and core, and at least
    `min_bytes` of work in all."""
    return min(jobs or os.cpu_count() or 1, len(todo)) > 1 and sum(j[2] for j in todo) >= min_bytes


class WorkerError(Exception):
    """A worker failed on a job."""


def run_jobs(
    todo: list[Job], jobs: int | None, *, min_bytes: int, isolate: bool = False, here: bool = True
) -> list:
    """Run jobs in parallel when there is enough to do (`min_bytes` of it, see `in_parallel`),
    biggest first: in worker processes and, when `here`, in this one too; else here, one after
    another (`isolate`: in worker processes all the same). Returns the jobs' results in the
    order of `todo`."""
    if not todo:
        return []
    if not isolate and not in_parallel(todo, jobs, min_bytes):
        return [timed_call(fn, args) for fn, args, _ in todo]
    workers = min(jobs or os.cpu_count() or 1, len(todo))
    import queue
    import threading

    from traceview.errors import first_line
    from traceview.ingest import worker_pool as pool

    q: queue.Queue[tuple[int, Job]] = queue.Queue()
    for i in sorted(range(len(todo)), key=lambda i: -todo[i][2]):
        q.put((i, todo[i]))
    results: list = [None] * len(todo)
    errors: list[str] = []

    def drive_here() -> None:
        while not errors:
            try:
                i, (fn, args, _) = q.get_nowait()
            except queue.Empty:
                break
            try:
                results[i] = timed_call(fn, args)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {first_line(exc)} (in {fn.__name__} of {args[0]})")

    def drive() -> None:
        proc = pool.take()
        assert proc.stdin is not None and proc.stdout is not None
        healthy = True
        try:
            while not errors:
                try:
                    i, (fn, args, _) = q.get_nowait()
                except queue.Empty:
                    break
                proc.stdin.write(orjson.dumps({"fn": fn.__name__, "args": list(args)}) + b"\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    healthy = False
                    errors.append(f"worker exited with {proc.wait()} on {fn.__name__}{tuple(args)[:1]}")
                    break
                answer = orjson.loads(line)
                if "error" in answer:
                    errors.append(f"{answer['error']} (in {fn.__name__} of {args[0]})")
                results[i] = answer.get("value")
        except BaseException:
            healthy = False
            raise
        finally:
            if healthy:
                pool.give_back(proc)  # kept for the next jobs of this process (export: parse, then write)
            else:
                proc.stdin.close()
                proc.wait()

    here = here and not isolate
    threads = [threading.Thread(target=drive, daemon=True) for _ in range(workers - here)]
    if here:
        threads.append(threading.Thread(target=drive_here, daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        if errors[0].startswith("InputChanged: "):
            from parsers.torch_trace import InputChanged

            raise InputChanged(errors[0].removeprefix("InputChanged: "))
        raise WorkerError(errors[0])
    return results
