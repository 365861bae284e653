"""Record every input's findings and head line (`summary --json`'s `findings` and `head`), and a
digest of its whole report and compile account, to compare a change to the analyzers before
and after: nothing a user reads may move.

    python bench/sweep_findings.py OUT.json [PATH ...]
    python bench/sweep_findings.py --compare A.json B.json

Without PATHs: every fixture directory (fixtures/*, fixtures/corpus/*, fixtures/gpu/*,
fixtures/cluster/*) and /work/shared/traces/{gpu,peer-tlparse}/* where present. The parse cache
is used (a change to the analyzers does not change a parse); the report is built afresh. Run
it from another checkout (`git archive` of main) to record main's: fixtures are named relative
to the checkout.
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path
from typing import Any

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


def _here(value: object) -> Any:
    """`value` as JSON data, the checkout's path written `.` (the fixtures' paths in the report)."""
    return orjson.loads(orjson.dumps(value, default=str).replace(str(ROOT).encode(), b"."))


def _sha(value: object) -> str:
    return hashlib.sha256(orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)).hexdigest()


def record(paths: list[str]) -> dict[str, object]:
    from traceview.analyze.accounts.compiles import compile_account
    from traceview.ingest.loading import LoadOptions, load_trace
    from traceview.output.report import build_report

    out: dict[str, object] = {}
    for p in paths:
        t = time.perf_counter()
        try:
            trace = load_trace(LoadOptions.of(p, use_cache=True, jobs=1))
            t = time.perf_counter()
            report = _here(build_report(trace))
            # the whole report and the compile account (the timeline's, the UI's) as digests
            out[_key(p)] = {"findings": report["findings"], "head": report["head"], "report": _sha(report),
                            "account": _sha(_here(compile_account(trace).to_dicts()))}
        except Exception as exc:  # an input summary refuses: its error is what it prints
            out[_key(p)] = {"error": f"{type(exc).__name__}: {exc}".replace(str(ROOT), ".")}
        print(f"{time.perf_counter() - t:7.2f}s {p}", file=sys.stderr)
    return out


def _key(path: str) -> str:
    """An input's name in the record: relative to the checkout for its fixtures (so that a
    record made in another checkout, say main's, compares)."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else path


def compare(a: dict[str, object], b: dict[str, object]) -> int:
    bad = 0
    for p in sorted(set(a) | set(b)):
        x, y = a.get(p) or {}, b.get(p) or {}
        parts = [k for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]  # type: ignore[union-attr]
        if parts:
            bad += 1
            print(f"DIFFERS: {p}: {', '.join(parts)}")
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
