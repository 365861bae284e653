"""How the judgement scales with ranks: `build_report` (every analyzer, `judge`, `head_lines`)
over a run's tables copied to 2,048 / 4,096 / 8,192 / 16,384 ranks (issue 46).

    python bench/scale_judge.py [EXPORTS] [--sizes 2048,4096,8192,16384] [--profile N]

EXPORTS (default /tmp/d46/r2048): a directory of per-host exports (`traceview export`) of one
run, read with traceview.load. For k times its ranks, every table but the graph tables the
summary does not read (all but `guards`) and the index events are concatenated k times, copy i with `rank` offset
by i * ranks and each `file` renamed (copy i's files are `c{i}_` + the name), and the inputs'
trace files likewise (so the head line counts every rank). Each size runs in a process of its
own: the seconds of build_report (wall and CPU: the machine may be shared), the peak RSS while it runs (sampled every 5 ms), the process's
peak RSS, the size of the report's JSON (what `summary --json` prints) and the
growth per rank between the smallest and each larger size.
`--profile N`: cProfile of build_report at N ranks instead (top 40 by cumulative time).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class _Peak:
    """The largest RSS seen while the block runs (a sampling thread)."""

    def __enter__(self) -> _Peak:
        self.peak = _rss_mb()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss_mb())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss_mb())


UNREAD = ("graphs", "graph_nodes", "kernels", "kernel_calls", "provenance", "seq_links")


def scaled_trace(path: str, copies: int):  # -> Trace
    """The trace of `path` with its ranks copied `copies` times (see the module docstring)."""
    import polars as pl

    import traceview
    from traceview.trace import TABLES, Trace

    base = traceview.load(path)
    n = len(base.ranks)
    # the summary reads `guards` (the recompiles' causes), none of the other graph tables
    tables = {name: base.table(name) for name in TABLES if name not in UNREAD}
    index = base.index_events()

    def copied(df: pl.DataFrame) -> pl.DataFrame:
        if copies == 1:
            return df
        frames = []
        for i in range(copies):
            cols = []
            if "rank" in df.columns:
                cols.append((pl.col("rank") + i * n).cast(df.schema["rank"]))
            if "file" in df.columns and i:
                cols.append(pl.col("file").str.replace(r"([^/]*)$", f"c{i}_$1"))
            frames.append(df.with_columns(cols) if cols else df)
        return pl.concat(frames)

    tables = {name: copied(df) for name, df in tables.items()}
    index = copied(index)
    inp = base.inputs
    if inp is not None and copies > 1:
        traces = [
            dataclasses.replace(t, path=t.path if not i else str(Path(t.path).with_name(f"c{i}_{Path(t.path).name}")),
                                rank=None if t.rank is None else t.rank + i * n)
            for i in range(copies) for t in inp.traces
        ]
        inp = dataclasses.replace(inp, traces=traces)
    return Trace.from_tables(tables, inputs=inp, index=lambda: index), n * copies


def one(path: str, ranks: int, base_ranks: int) -> dict[str, Any]:
    import orjson

    from traceview.output.report import build_report

    trace, got = scaled_trace(path, ranks // base_ranks)
    assert got == ranks, (got, ranks)
    before = _rss_mb()
    with _Peak() as peak:
        t, cpu = time.perf_counter(), time.process_time()
        report = build_report(trace)
        seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    with _Peak() as json_peak:
        t = time.perf_counter()
        data = orjson.dumps(report, option=orjson.OPT_INDENT_2)  # what `summary --json` writes
        dumps = time.perf_counter() - t
    built = [name for name in UNREAD if trace.is_loaded(name)]
    assert not built, f"build_report read {built}: copy them too"
    return {
        "ranks": ranks, "seconds": seconds, "cpu_s": cpu, "rss_before_mb": before, "peak_mb": peak.peak,
        "process_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "findings": len(report["findings"]), "head": report["head"], "json_mb": len(data) / 2**20, "dumps_s": dumps,
        "json_peak_mb": json_peak.peak,
        "biggest": sorted(((len(orjson.dumps(v)) / 2**20, k) for k, v in report.items()), reverse=True)[:3],
    }


def profile(path: str, ranks: int, base_ranks: int) -> None:
    import cProfile
    import pstats

    from traceview.output.report import build_report

    trace, _ = scaled_trace(path, ranks // base_ranks)
    pr = cProfile.Profile()
    pr.enable()
    build_report(trace)
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(40)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("exports", nargs="?", default="/tmp/d46/r2048")
    ap.add_argument("--sizes", default="2048,4096,8192,16384")
    ap.add_argument("--profile", type=int)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a size, in this process
    ap.add_argument("--base", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one or args.profile:
        import traceview

        base = args.base or len(traceview.load(args.exports).ranks)
        if args.profile:
            profile(args.exports, args.profile, base)
            return 0
        print(json.dumps(one(args.exports, args.one, base)))
        return 0
    import traceview

    base = len(traceview.load(args.exports).ranks)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        out = subprocess.run([sys.executable, __file__, args.exports, "--one", str(size), "--base", str(base)],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        rows.append(r)
        first = rows[0]
        growth = ""
        if r is not first:
            dr = r["ranks"] - first["ranks"]
            growth = (f"\n        growth {1000 * (r['seconds'] - first['seconds']) / dr:.3f} ms/rank "
                      f"(CPU {1000 * (r['cpu_s'] - first['cpu_s']) / dr:.3f}), "
                      f"{(r['peak_mb'] - first['peak_mb']) / dr:.4f} MB/rank (peak during build_report)")
        print(f"{r['ranks']:6d} ranks: build_report {r['seconds']:6.2f} s ({1000 * r['seconds'] / r['ranks']:.3f} ms/rank; "
              f"CPU {r['cpu_s']:.2f} s), "
              f"RSS {r['rss_before_mb']:.0f} -> peak {r['peak_mb']:.0f} MB (process peak {r['process_peak_mb']:.0f} MB), "
              f"{r['findings']} findings; its JSON {r['json_mb']:.1f} MB in {r['dumps_s']:.2f} s, peak {r['json_peak_mb']:.0f} MB "
              f"(largest: {', '.join(f'{k} {mb:.1f} MB' for mb, k in r['biggest'])}){growth}", flush=True)
    print("head:", rows[-1]["head"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
