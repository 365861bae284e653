"""The diagnosis corpus (fixtures/corpus, made by fixtures/make_corpus.py with torch 2.13):
complete, and traceview's counts agree with torch's own accounting in each run's oracle.json.

Per situation, from the trace alone:
* compiles per code object (the `compiles` table) == the compile ids torch handed out;
* recompiling functions (the report's storms): compiles and the causes' counts == torch's
  compiles and recompiles (one primary cause per recompile, so the counts add up);
* failed compiles (the report's failures) == the compiles torch recorded with a fail_type.
From the text log alone (where TORCH_LOGS has recompiles or recompiles_verbose): the storms
again.

Where traceview is wrong today the case is xfail(strict=True) with the class of issue 13 it
belongs to, so main stays green and the fix flips it. The gaps are described in
/work/notes/issue-13-corpus-inventory.md; the expected findings in fixtures/corpus/README.md.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from typing import Any

import pytest

import traceview
from traceview.output.report import build_report

from .conftest import FIXTURES

CORPUS = FIXTURES / "corpus"


def _load_generator():
    spec = importlib.util.spec_from_file_location("make_corpus", FIXTURES / "make_corpus.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_corpus"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


GEN = _load_generator()
SITUATIONS = GEN.SITUATIONS
NAMES = list(SITUATIONS)


def _xfail(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=reason)


# What traceview gets wrong today, per test and situation (issue 13 classes).
KNOWN_WRONG: dict[str, dict[str, str]] = {
    "compiles_trace": {},
    "storms_trace": {},
    "storms_text": {},
    "failures_trace": {},
}


def _cases(test: str, names: list[str]) -> list[Any]:
    wrong = KNOWN_WRONG[test]
    return [pytest.param(n, marks=_xfail(wrong[n])) if n in wrong else n for n in names]


@functools.cache
def oracle(name: str) -> dict:
    return json.loads((CORPUS / name / "oracle.json").read_text())


@functools.cache
def trace_of(name: str) -> traceview.Trace:
    return traceview.load(CORPUS / name / "trace")


@functools.cache
def text_of(name: str) -> traceview.Trace:
    return traceview.load(CORPUS / name / "torch_logs.txt")


@functools.cache
def report_of(name: str, source: str) -> dict:
    return build_report(trace_of(name) if source == "trace" else text_of(name))


def _key(rank: Any, function: Any, filename: Any, line: Any) -> tuple:
    return (rank, function, os.path.basename(str(filename)), line)


def oracle_per_code(name: str) -> dict[tuple, dict]:
    """(rank, function, file name, first line) -> torch's per-code row (a frame torch ran
    without naming it, strict export's, is keyed (rank, None, "None", None))."""
    return {_key(p["rank"], r["function"], r["filename"], r["line"]): r for p in oracle(name)["processes"] for r in p["per_code"]}


def traceview_compiles_per_code(t: traceview.Trace) -> dict[tuple, int]:
    """Compiles per code object in traceview's `compiles` table. A compile whose metrics carry
    no function (refused at the recompile limit) belongs to the latest named compile of the same
    frame before it in the same file."""
    rows = t.compiles.filter(t.compiles["frame_id"].is_not_null()).sort("file", "lineno").to_dicts()
    counts: dict[tuple, int] = {}
    last: dict[tuple, tuple] = {}
    for r in rows:
        frame = (r["file"], r["rank"], r["frame_id"])
        if r["function"] is not None:
            k = _key(r["rank"], r["function"], r["filename"], r["line"])
            last[frame] = k
        elif frame in last:
            k = last[frame]
        else:
            k = _key(r["rank"], None, None, None)
        counts[k] = counts.get(k, 0) + 1
    return counts


def storms_per_code(report: dict, *, by_epoch: bool = True) -> dict[tuple, tuple[int, int]]:
    """(rank, function, file name, line[, epoch]) -> (compiles, sum of the causes' recompile counts)."""
    return {
        (*_key(s["rank"], s["function"], s["filename"], s["line"]), *((s.get("epoch") or 1,) if by_epoch else ())): (
            s["compiles"], sum(c["count"] for c in s["causes"])
        )
        for s in report["recompiles"]
    }


def oracle_storms(name: str, *, by_epoch: bool = True) -> dict[tuple, tuple[int, int]]:
    """(rank, function, file name, line[, epoch]) -> torch's (compile ids handed out,
    recompiles) of each code object in the rounds it recompiled in. torch._dynamo.reset()
    starts a round (frame ids restart: each round's frames are their own); rounds are
    numbered among those that compiled something, as traceview's epochs (a compile id seen
    again). A text log without TORCH_LOGS=dynamo does not show the reset (`by_epoch=False`)."""
    out: dict[tuple, tuple[int, int]] = {}
    for p in oracle(name)["processes"]:
        for epoch, e in enumerate([e for e in p["epochs"] if e["frames"]], 1):
            for fr in e["frames"]:
                if fr["recompiles"] > 0:
                    k = (*_key(p["rank"], fr["function"], fr["filename"], fr["line"]), *((epoch,) if by_epoch else ()))
                    n, r = out.get(k, (0, 0))
                    out[k] = (n + fr["compile_ids_assigned"], r + fr["recompiles"])
    return out


# ------------------------------------------------------------------ completeness


def test_corpus_has_at_least_25_situations_and_nothing_else() -> None:
    assert len(SITUATIONS) >= 25
    dirs = {p.name for p in CORPUS.iterdir() if p.is_dir()} - {"programs"}
    assert dirs == set(SITUATIONS)
    programs = {p.stem for p in (CORPUS / "programs").glob("*.py")} - {"corpus_oracle"}
    assert programs == set(SITUATIONS)


@pytest.mark.parametrize("name", NAMES)
def test_situation_is_complete(name: str) -> None:
    sit = SITUATIONS[name]
    d = CORPUS / name
    traces = sorted((d / "trace").glob("dedicated_log_torch_trace_*.log*"))
    assert traces, f"{name}: no trace file"
    for f in ("torch_logs.txt", "stdout.txt", "oracle.json", "PROVENANCE.md"):
        assert (d / f).is_file(), f"{name}: {f} missing"
    src = sit.program.read_text()
    assert "import corpus_oracle" in src
    hits = [line for line in src.splitlines() if line.strip().startswith(sit.plant.needle)]
    assert len(hits) == 1, f"{name}: planted line {sit.plant.needle!r} found {len(hits)} times"
    prov = (d / "PROVENANCE.md").read_text()
    assert "All checks passed when generated." in prov
    assert f"`{sit.torch_logs}`" in prov
    lineno, text = GEN.plant_line(sit)
    assert f"`{sit.program.name}:{lineno}` `{text}`" in prov
    doc = oracle(name)
    assert doc["torch"].startswith("2.13")
    assert doc["processes"], f"{name}: oracle has no process"
    uncaught = [p["uncaught"]["type"] for p in doc["processes"] if p["uncaught"]]
    assert uncaught == ([sit.uncaught] if sit.uncaught else [])
    for c in sit.compiles:
        assert GEN.oracle_count(doc, c) == (c.compiles, c.recompiles), (name, c)
    if sit.warm_run:
        assert sorted((d / "first_run" / "trace").glob("dedicated_log_torch_trace_*.log.gz"))
    assert (CORPUS / "README.md").read_text().count(f"[`{name}`]({name}/PROVENANCE.md)") == 1


def test_corpus_keeps_plain_and_gzipped_traces_and_both_recompile_log_forms() -> None:
    files = [p.name for n in NAMES for p in (CORPUS / n / "trace").iterdir()]
    assert sum(f.endswith(".log") for f in files) >= 5
    assert sum(f.endswith(".log.gz") for f in files) >= 2
    logs = {n: (CORPUS / n / "torch_logs.txt").read_text() for n in NAMES}
    assert any("[__recompiles] Recompiling function" in t for t in logs.values())
    assert any("[__recompiles_verbose] Recompiling function" in t for t in logs.values())


# ------------------------------------------------------------------ the oracle, trace alone


@pytest.mark.parametrize("name", _cases("compiles_trace", NAMES))
def test_compiles_per_code_object_match_torch(name: str) -> None:
    want = {k: r["compiles"] for k, r in oracle_per_code(name).items()}
    got = traceview_compiles_per_code(trace_of(name))
    assert got == want


@pytest.mark.parametrize("name", _cases("storms_trace", NAMES))
def test_recompiles_per_function_match_torch(name: str) -> None:
    # a code object compiled again only after torch._dynamo.reset() (no recompile) is no storm;
    # one that recompiled in one round is that round's (reset_fix_applied: 4 compiles, then 1)
    assert storms_per_code(report_of(name, "trace")) == oracle_storms(name)


def _failed_metrics(name: str) -> int:
    return sum(
        1
        for p in oracle(name)["processes"]
        for e in p["epochs"]
        for m in e["compilation_metrics"]
        if m["fail_type"] is not None and m["is_forward"] is not False
    )


@pytest.mark.parametrize("name", _cases("failures_trace", NAMES))
def test_failed_compiles_match_torch(name: str) -> None:
    failures = [f for f in report_of(name, "trace")["failures"] if f["source"] == "trace"]
    assert len(failures) == _failed_metrics(name)


# ------------------------------------------------------------------ the oracle, text alone

TEXT_NAMES = [n for n in NAMES if "recompiles" in SITUATIONS[n].torch_logs]


@pytest.mark.parametrize("name", _cases("storms_text", TEXT_NAMES))
def test_recompiles_per_function_from_text_match_torch(name: str) -> None:
    assert storms_per_code(report_of(name, "text"), by_epoch=False) == oracle_storms(name, by_epoch=False)


def test_oracle_and_traceview_name_code_objects_alike() -> None:
    """A guard on the tests' own keys: one code object, keyed the same from both sides."""
    sit = SITUATIONS["bool_flag"]
    # co_firstlineno of a decorated function is its first decorator's line
    line = sit.program.read_text().splitlines().index('@torch.compile(backend="eager")') + 1
    key = (None, "attention_mask", "bool_flag.py", line)
    assert oracle_per_code("bool_flag")[key]["compiles"] == 2
    assert traceview_compiles_per_code(trace_of("bool_flag")) == {key: 2}
