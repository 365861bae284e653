"""Where `traceview export` spends its time: one part's export step by step, in one process.

    python bench/export_profile.py /tmp/traceview-bench/inputs/rank48_500mb --files 6 --repeat 3

Takes the first N files (`--files`, default 6: the size of one of the 48-rank export's parts)
of a directory of rank logs, parses them into a part as `traceview export` does (one
process, polars on one thread, as a worker runs), exports that part once to warm up, then
`--repeat` more times, and prints the fastest run's milliseconds per step: reading the
payloads back from the logs and checking their md5 (`hydrate`), building each graph table,
labelling, writing each table's rank-partitioned parquet files, and the rest. Every step's
share of the part and its cost per file. For the whole command's timeline (parse, merge, the
parts in the workers, what follows), run `python bench/timeline.py traceview export
--no-cache DIR -o OUT`.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("POLARS_MAX_THREADS", "1")  # as in a worker process
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


# what traceview.ingest.graph_tables.build_graph_tables writes into a part (graphs last: its
# presence marks the part as done)
BUILT = ("seq_links", "guards", "graph_nodes", "kernels", "kernel_calls", "provenance", "checks", "payload_problems", "graphs")


def _wrap(mod: Any, name: str, label: str, acc: dict[str, float]) -> None:
    """Replace `mod.name` by a version that adds its time to acc[label]."""
    fn: Callable[..., Any] = getattr(mod, name)

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[label] = acc.get(label, 0.0) + time.perf_counter() - t

    setattr(mod, name, timed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", type=Path, help="a directory of trace logs (rank files)")
    ap.add_argument("--files", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import parsers.facts as facts
    import parsers.graphs as graphs
    import parsers.seq_links as seq
    import parsers.torch_trace as torch_trace
    import traceview.ingest.graph_tables as graph_tables
    import traceview.output.export.parts as export_parts
    from parsers.discover import discover
    from traceview.ingest.parts import part_dirs
    from traceview.ingest.pipeline import parse_to_dir

    acc: dict[str, float] = {}
    for name in ("build_graphs", "build_graph_nodes", "build_kernels", "build_kernel_calls", "build_provenance"):
        _wrap(graphs, name, f"build {name.removeprefix('build_')}", acc)
    _wrap(facts, "guards_from_trace", "build guards", acc)
    _wrap(seq, "seq_links", "build seq_links", acc)
    _wrap(torch_trace, "hydrate", "hydrate (read payloads, md5)", acc)
    _wrap(graph_tables, "replace_table", "keep the md5 checks in the parse dir", acc)
    _wrap(export_parts, "labelled", "label compiles", acc)
    _wrap(export_parts, "conform", "conform to schema", acc)
    write = export_parts.write_rank_partitions

    def write_timed(df: Any, table_dir: Path, part_name: str) -> None:
        t = time.perf_counter()
        write(df, table_dir, part_name)
        key = f"write {table_dir.name}"
        acc[key] = acc.get(key, 0.0) + time.perf_counter() - t

    export_parts.write_rank_partitions = write_timed  # type: ignore[assignment]

    files = sorted(p for p in args.input.iterdir() if p.is_file())[: args.files]
    work = Path(tempfile.mkdtemp(prefix="export-profile-"))
    try:
        src = work / "in"
        src.mkdir()
        for f in files:
            (src / f.name).symlink_to(f.resolve())
        parse_to_dir(discover(str(src)), work / "parsed", jobs=1)
        parts = part_dirs(work / "parsed")
        export_parts.export_part(str(parts[0]), str(work / "warm"))
        best: tuple[float, dict[str, float]] | None = None
        for i in range(args.repeat):
            acc.clear()
            for p in parts:  # the graph tables are built again each time
                for f in p.glob("*.arrow"):
                    if f.stem in BUILT:
                        f.unlink()
            t = time.perf_counter()
            for p in parts:
                export_parts.export_part(str(p), str(work / f"out{i}"))
            total = time.perf_counter() - t
            if best is None or total < best[0]:
                best = (total, dict(acc))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert best is not None
    total, steps = best
    mb = sum(f.stat().st_size for f in files) / 1e6
    print(f"{len(files)} files, {mb:.0f} MB, {len(parts)} part(s): export_part {total * 1000:.0f} ms "
          f"({total * 1000 / len(files):.1f} ms per file), fastest of {args.repeat}")
    steps["other (reading parts, grouping, Python)"] = total - sum(steps.values())
    for name, s in sorted(steps.items(), key=lambda kv: -kv[1]):
        print(f"  {name:42s} {s * 1000:7.1f} ms  {100 * s / total:5.1f}%  {s * 1000 / len(files):6.1f} ms/file")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
