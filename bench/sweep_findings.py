"""Record every input's findings and head line (`summary --json`'s `findings` and `head`), to
compare a change to the analyzers before and after: nothing a user reads may move.

    python bench/sweep_findings.py OUT.json [PATH ...]
    python bench/sweep_findings.py --compare A.json B.json

Without PATHs: every fixture directory (fixtures/*, fixtures/corpus/*, fixtures/gpu/*,
fixtures/cluster/*) and /work/shared/traces/{gpu,peer-tlparse}/* where present. The parse cache
is used (a change to the analyzers does not change a parse); the report is built afresh.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def default_inputs() -> list[str]:
    fx = ROOT / "fixtures"
    dirs = [p for p in sorted(fx.iterdir()) if p.is_dir() and p.name not in ("corpus", "gpu", "cluster")]
    for sub in ("corpus", "gpu", "cluster"):
        dirs += [p for p in sorted((fx / sub).iterdir()) if p.is_dir()]
    for shared in ("/work/shared/traces/gpu", "/work/shared/traces/peer-tlparse"):
        if Path(shared).is_dir():
            dirs += sorted(Path(shared).iterdir())
    return [str(p) for p in dirs]


def record(paths: list[str]) -> dict[str, object]:
    from traceview.ingest.loading import LoadOptions, load_trace
    from traceview.output.report import build_report

    out: dict[str, object] = {}
    for p in paths:
        t = time.perf_counter()
        try:
            trace = load_trace(LoadOptions.of(p, use_cache=True, jobs=1))
            t = time.perf_counter()
            report = orjson.loads(orjson.dumps(build_report(trace)))
            out[p] = {"findings": report["findings"], "head": report["head"]}
        except Exception as exc:  # an input summary refuses: its error is what it prints
            out[p] = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"{time.perf_counter() - t:7.2f}s {p}", file=sys.stderr)
    return out


def compare(a: dict[str, object], b: dict[str, object]) -> int:
    bad = 0
    for p in sorted(set(a) | set(b)):
        if a.get(p) != b.get(p):
            bad += 1
            print(f"DIFFERS: {p}")
    print(f"{len(set(a) | set(b))} inputs, {bad} differ")
    return 1 if bad else 0


def main() -> int:
    if sys.argv[1] == "--compare":
        return compare(orjson.loads(Path(sys.argv[2]).read_bytes()), orjson.loads(Path(sys.argv[3]).read_bytes()))
    paths = sys.argv[2:] or default_inputs()
    Path(sys.argv[1]).write_bytes(orjson.dumps(record(paths), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
