"""Names say what they hold (issue 38: one split of a compile's time, each compile at its own
call site, a slow compile only relative to something, one rank-list wording; issue 39: the
compiled module named alike on every line, a reason that differs only by an address one fact).
On real torch runs: fixtures/gpu/sequential_max_autotune (torch.compile(nn.Sequential) under
max-autotune on a GPU), fixtures/corpus/sequential_failed_compile (its third compile fails in
Inductor, each compile called from a line of its own) and
fixtures/corpus/disabled_callback_address (4 failed compiles whose reasons differ by an address).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import traceview
from tests.conftest import FIXTURES
from traceview.analyze import compile_time as ct
from traceview.analyze.findings import ranks_text, same_text, slow_compiles
from traceview.analyze.wording import phases_text
from traceview.output.page import _phases
from traceview.output.report import build_report
from traceview.output.summary import render_text

SEQUENTIAL = FIXTURES / "corpus" / "sequential_failed_compile"
ADDRESSES = FIXTURES / "corpus" / "disabled_callback_address"


def test_the_phases_say_which_is_part_of_which_and_the_parts_add_up_to_the_total() -> None:
    report = build_report(traceview.load(FIXTURES / "gpu" / "sequential_max_autotune"))
    ctime = report["compile_time"]
    rows = {r["phase"]: r for r in ctime["phases"]}
    assert {k: r["within"] for k, r in rows.items()} == {
        "dynamo": None, "aot+backend": None, "aot": "aot+backend", "inductor": "aot+backend", "codegen": "inductor",
        "autotuning": "inductor", "autotuning_in_codegen": "codegen", "backward": None, "backward_autotuning": "backward",
        "runtime_autotuning": None,
    }
    assert [k for k, r in rows.items() if not r["compile_time"]] == ["runtime_autotuning"]
    # the flat phases_s sum to far more than the total (nested ones counted twice); the parts do not
    assert sum(ctime["phases_s"].values()) > 2 * ctime["total_s"]
    parts = sum(r["seconds"] for r in ctime["phases"] if r["within"] is None and r["compile_time"])
    assert parts == pytest.approx(ctime["total_s"], abs=0.01)
    assert phases_text(ctime["phases_s"]) == "dynamo 0.64s, aot 1.87s, inductor 123s (of which codegen 118s, 111s of it autotuning)"


def test_a_compile_is_split_alike_in_the_summary_the_page_and_the_ui() -> None:
    trace = traceview.load(FIXTURES / "gpu" / "sequential_max_autotune")
    at = ct.autotuning_by_phase(trace)
    rows = {r["compile_id"]: r for r in trace.compiles.to_dicts()}
    r = rows["0/1"]
    ph = ct.compile_phases(r, at.get((r["file"], "0/1", r["occurrence"])))
    # the page's bar: the same split, disjoint parts that add up to the compile's time
    bar = dict(_phases(r, at.get((r["file"], "0/1", r["occurrence"]))))
    assert list(bar) == ["dynamo", "aot", "inductor", "autotuning"]
    assert bar["autotuning"] == ph["autotuning"] and bar["inductor"] == pytest.approx(ph["inductor"] - ph["autotuning"])
    assert sum(bar.values()) == pytest.approx(r["compile_time_s"])
    # the run's totals are torch's own: its compilation_metrics records, read straight from the
    # trace file (autotuning: traceview's from the autotuning spans, torch's own counter apart)
    metrics = raw_metrics(FIXTURES / "gpu" / "sequential_max_autotune")
    assert [m["compile_id"] for m in metrics] == ["0/0", "0/1"] and not raw_metrics(FIXTURES / "gpu" / "sequential_max_autotune", "bwd_compilation_metrics")

    def torch_s(key: str) -> float:
        return sum(m[key] for m in metrics)

    totals = ct.phase_totals(trace)
    assert totals["aot+backend"] == pytest.approx(torch_s("backend_compile_time_s"), abs=1e-5)
    assert totals["inductor"] == pytest.approx(torch_s("inductor_compile_time_s"), abs=1e-5)
    assert totals["codegen"] == pytest.approx(torch_s("code_gen_time_s"), abs=1e-5)
    assert totals["dynamo"] == pytest.approx(torch_s("entire_frame_compile_time_s") - torch_s("backend_compile_time_s"), abs=1e-5)
    assert totals["aot"] == pytest.approx(torch_s("backend_compile_time_s") - torch_s("inductor_compile_time_s"), abs=1e-5)
    assert totals["autotuning"] == pytest.approx(torch_s("compile_time_autotune_time_us") / 1e6, abs=1e-3)  # 111.38 s
    assert totals["backward"] == 0.0
    assert sum(v for k, v in totals.items() if k in ("dynamo", "aot+backend", "backward")) == pytest.approx(
        torch_s("entire_frame_compile_time_s"), abs=1e-5)


def raw_metrics(run: Path, kind: str = "compilation_metrics") -> list[dict]:
    """torch's `kind` records of a run, straight from its trace files (the JSON on each record's
    line), not through traceview's parse."""
    out = []
    for path in sorted((run / "trace").glob("*.log.gz")):
        for line in gzip.decompress(path.read_bytes()).decode().splitlines():
            if f'{{"{kind}": ' in line:
                out.append(json.loads(line[line.index("{"):])[kind])
    return out


def test_each_compile_is_called_at_its_own_line_and_named_as_the_module() -> None:
    report = build_report(traceview.load(SEQUENTIAL))
    sites = {t["compile_id"]: t["code"]["call_site"]["line"] for t in report["compile_time"]["top"]}
    assert sites == {"0/0": 25, "0/1": 26, "0/2": 29}
    (f,) = report["failures"]
    assert (f["compile_id"], f["function"], f["code"]["label"], f["code"]["call_site"]["line"]) == (
        "0/2", "inner", "Sequential via torch.compile(model)", 29)
    text = render_text(report)
    assert (
        "  [0/2] Sequential via torch.compile(model), called at\n"
        "      sequential_failed_compile.py:29 `y = compiled(torch.randn(24, 32))`:\n"
        "      backend compiler failure (InductorError)\n"
    ) in text
    # the crash is that compile's failure, named alike
    (c,) = report["crashes"]
    assert c["compile"]["compile_id"] == "0/2"
    assert (
        "  torch._inductor.exc.InductorError compiling [0/2] Sequential via\n"
        "      torch.compile(model), called at sequential_failed_compile.py:29 `y =\n"
        "      compiled(torch.randn(24, 32))`: backend compiler failure\n"
    ) in text
    assert "external_utils.py:67" not in text and "inner" not in text


def test_a_reason_that_differs_only_by_an_address_is_one_fact() -> None:
    report = build_report(traceview.load(ADDRESSES))
    fails = report["failures"]
    assert [f["compile_id"] for f in fails] == ["0/0", "0/1", "0/2", "0/3"]
    full = {f["reason_full"] for f in fails}
    assert len(full) == 4 and len({same_text(x) for x in full}) == 1  # four addresses, one fact
    text = render_text(report)
    assert "  [0/0 … 0/3: 4 compiles] step (disabled_callback_address.py:25): graph break\n      (Unsupported)\n" in text
    assert text.count("Skip calling `torch.compiler.disable()`d function\n") == 2  # the break and the failure, once each
    (g,) = report["graph_breaks"]
    assert g["count"] == 4
    # every compile failed: none left a cache entry to miss, so none is a recompile (torch's
    # own count in oracle.json: 4 compiles, 0 recompiles); not a "recompiling function"
    assert report["recompiles"] == []
    assert "RECOMPILES" not in text and "recompiling" not in text


def test_the_only_compile_of_a_rank_is_not_slow() -> None:
    report = build_report(traceview.load(SEQUENTIAL))
    slow = [t["compile_id"] for t, _ in slow_compiles(report)]
    assert slow == ["0/0"]  # 64 s of 67 s, beside two other compiles
    one = {**report, "per_rank": [{**report["per_rank"][0], "compiles": 1}]}
    assert slow_compiles(one) == []


def test_one_wording_of_a_rank_list() -> None:
    assert [ranks_text(r) for r in ([3], [0, 1, 2, 3], [0, 2, 3], [1, 5], [None])] == [
        "rank 3 ", "ranks 0-3 ", "ranks 0,2,3 ", "ranks 1,5 ", ""]
