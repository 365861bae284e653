"""Distributed rules of issue 38 (item 2) and issue 39's "compiled nothing" (item 4), on real
gloo runs (torch 2.13, CPU; fixtures/corpus/ddp_* and multirank*) and the GPU DDP runs
(torch 2.11, fixtures/gpu/ddp2*):

* a recompile on some ranks only costs the others a wait at their next collective
  (analyze/stalls.py); with DDP the collective is its reducer's gradient all-reduce; the
  estimate is checked against the wait the ranks themselves measured (stdout timestamps);
* DDP's own graph breaks are expected, never the user's to avoid (analyze/ddp.py);
* torch.compile(DDP(nn.Sequential)) compiles nothing; the same with a user-defined module
  compiles, and the advised fix, DDP(torch.compile(model)), does (analyze/eager_model.py);
  each checked against torch's own counters (oracle.json).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import traceview
from traceview.analyze.collectives import collective_mismatches
from traceview.analyze.ddp import INSIDE_FORWARD, LOGGER
from traceview.analyze.eager_model import compiled_nothing
from traceview.analyze.hotspots import graph_break_hotspots
from traceview.analyze.stalls import rank_stalls
from traceview.output.report import build_report
from traceview.output.summary import render_text

from ..conftest import FIXTURES

CORPUS = FIXTURES / "corpus"
DDP_RECOMPILE = CORPUS / "ddp_rank_recompile"
SEQ_EAGER = CORPUS / "ddp_sequential_eager"
USER_MODULE = CORPUS / "ddp_user_module"
INNER_COMPILE = CORPUS / "ddp_sequential_inner_compile"


def _oracle(path: Path) -> dict[str, Any]:
    return json.loads((path / "oracle.json").read_text())


def _counters(path: Path) -> dict[int, dict[str, dict[str, int]]]:
    return {p["rank"]: p["counters"] for p in _oracle(path)["processes"]}


def _summary(path: Path) -> str:
    return render_text(build_report(traceview.load(path)), width=100)


# ------------------------------------------------------------------ rank stalls


def test_ddp_lone_recompile_stalls_the_others_at_the_gradient_all_reduce() -> None:
    t = traceview.load(DDP_RECOMPILE)
    stalls = rank_stalls(t)
    assert len(stalls) == 1
    s = stalls[0]
    assert (s["compiling_ranks"], s["waiting_ranks"], s["ranks_stalled"]) == ([3], [0, 1, 2], 3)
    # rank 3's lone compiles: torch.compile's wrapper around DDP and Net.forward, both for x of 6
    assert [(x["compile_id"], x["function"], x["cause"]) for x in s["compiles"]] == [
        ("0/1", "inner", "for another size (dim 0 of args[0]: 6, not 8)"),
        ("4/1", "forward", "for another size (dim 0 of x: 6, not 8)"),
    ]
    assert s["seconds"] == pytest.approx(sum(x["seconds"] for x in s["compiles"]), abs=0.01)
    # torch's own accounting: rank 3 alone recompiled, once per code object (oracle per_code)
    per_code = {p["rank"]: {r["function"]: r["recompiles"] for r in p["per_code"]} for p in _oracle(DDP_RECOMPILE)["processes"]}
    assert {r: sum(v.values()) for r, v in per_code.items()} == {0: 0, 1: 0, 2: 0, 3: len(s["compiles"])}
    assert s["where"].startswith("the first gradient all-reduce (a hook of DDP's reducer")
    assert any(e.startswith(f"graph breaks at {INSIDE_FORWARD}") for e in s["ddp"])
    assert any(e.startswith("DDPOptimizer split graphs") for e in s["ddp"])
    assert s["certainty"] == "likely" and "no record shows the wait itself" in s["estimate"]
    assert s["cost_s"] == pytest.approx(s["seconds"] * 3, abs=0.01)
    assert s["message"].startswith("ranks 0-2 waited ~") and "while rank 3 recompiled" in s["message"]
    assert "Net.forward (ddp_rank_recompile.py:56) alone for another size (dim 0 of x: 6, not 8)" in s["message"]
    assert "drop_last=True" in s["next_step"] and "mark_dynamic" in s["next_step"]


def _measured_wait(path: Path, step: int, waiting: list[int]) -> float:
    """The waiting ranks' own measure: their backward at `step` (DDP's all-reduce is in it)
    less their usual backward (the other steps after the first), averaged over the ranks."""
    rows = [json.loads(x) for x in (path / "stdout.txt").read_text().split("\n") if x.startswith("{")]
    back = {(r["rank"], r["step"]): r["backward_end"] - r["backward_start"] for r in rows}
    usual = {r: min(v for (rr, st), v in back.items() if rr == r and st not in (0, step)) for r in waiting}
    return sum(back[(r, step)] - usual[r] for r in waiting) / len(waiting)


def test_the_estimated_wait_matches_the_wait_the_ranks_measured() -> None:
    # the program prints time.time() around each rank's backward; ranks 0-2's backward at step 2
    # holds the wait for rank 3 at DDP's all-reduce
    s = rank_stalls(traceview.load(DDP_RECOMPILE))[0]
    measured = _measured_wait(DDP_RECOMPILE, 2, s["waiting_ranks"])
    assert measured > 1.0  # a real stall, not noise
    assert s["seconds"] == pytest.approx(measured, rel=0.15)


def test_a_lone_automatic_dynamic_recompile_is_not_nothing_to_fix() -> None:
    r = build_report(traceview.load(DDP_RECOMPILE))
    storms = [s for s in r["recompiles"] if s["rank"] == 3 and s["function"] == "forward"]
    assert len(storms) == 1
    st = storms[0]
    # on one process this is automatic dynamic's one recompile (expected); on rank 3 alone it is not
    assert st["expected"] is False and st["stall"]["waiting_ranks"] == [0, 1, 2]
    assert st["causes"][0]["fix"].startswith("not free on some ranks only: ranks 0-2 waited ~")
    text = render_text(r, width=100)
    assert "EXPECTED RECOMPILES" not in text and "nothing to fix" not in text
    head = text.split("\n\n")[0]
    assert "ranks 0-2 stalled ~" in head and "while rank 3 compiled alone" in head
    # what needs action first: the stall is the first section
    assert text.split("\n\n")[1].startswith("RANK STALLS")


def test_non_ddp_lone_recompile_waits_at_the_next_collective() -> None:
    # fixtures/multirank: rank 1 recompiles forward [0/1] for batch 6 (dynamic=False); rank 0
    # meets it at the eager dist.all_reduce of the loss
    t = traceview.load(FIXTURES / "multirank")
    [s] = rank_stalls(t)
    row = t.compiles.filter((t.compiles["rank"] == 1) & (t.compiles["compile_id"] == "0/1")).row(0, named=True)
    assert s["seconds"] == pytest.approx(row["total_time_s"], abs=1e-3)
    assert s["ddp"] == [] and s["where"] == "its next collective"
    assert s["message"] == (
        f"rank 0 waited ~{s['seconds']:.2f}s at its next collective while rank 1 recompiled [0/1] "
        "TinyNet.forward (multirank.py:31) alone for another size (dim 0 of x: 6, not 8)"
    )
    storm = next(x for x in build_report(t)["recompiles"] if x["rank"] == 1)
    assert storm["stall"]["waiting_ranks"] == [0]


def test_multirank4_stall_names_the_three_waiting_ranks() -> None:
    [s] = rank_stalls(traceview.load(CORPUS / "multirank4"))
    assert (s["compiling_ranks"], s["waiting_ranks"]) == ([2], [0, 1, 3])
    assert [x["compile_id"] for x in s["compiles"]] == ["0/1"]


def test_a_lone_graph_with_collectives_is_left_to_the_collectives_wait() -> None:
    # collective_size_mismatch: rank 1's [0/1] holds the all_reduce; collectives.waits says it
    t = traceview.load(CORPUS / "collective_size_mismatch")
    coll = collective_mismatches(t)
    assert [w["compile_id"] for w in coll["waits"]] == ["0/1"]
    assert rank_stalls(t, collectives=coll) == []
    assert [x["compile_id"] for s in rank_stalls(t) for x in s["compiles"]] == ["0/1"]  # without it: found


def test_no_stall_on_one_process_or_when_every_rank_compiled_alike() -> None:
    assert rank_stalls(traceview.load(FIXTURES / "recompiles")) == []
    assert rank_stalls(traceview.load(USER_MODULE)) == []


def test_gpu_ddp_user_module_stall() -> None:
    # torch 2.11, NCCL on 2 GPUs: rank 1 recompiles Net.forward for a batch of 24
    [s] = rank_stalls(traceview.load(FIXTURES / "gpu" / "ddp2_user_module"))
    assert (s["compiling_ranks"], s["waiting_ranks"]) == ([1], [0])
    assert "at the first gradient all-reduce" in s["message"]
    assert "Net.forward (ddp2_user_module.py:30) alone for another size (dim 0 of x: 24, not 32)" in s["message"]


# ------------------------------------------------------------------ DDP's own graph breaks


def test_ddp_wrapper_breaks_are_expected_and_match_torchs_counters() -> None:
    t = traceview.load(USER_MODULE)
    gbs = graph_break_hotspots(t)
    assert {g["wrapper_break"] for g in gbs} == {INSIDE_FORWARD, LOGGER}
    assert all(g["expected"] for g in gbs)
    for g in gbs:
        assert "Avoid calling" not in (g["advice"] or "")
        assert "DDP(torch.compile(model))" in g["advice"]
        assert "_inside_ddp_forward" in g["advice"] and "optimize_ddp" in g["advice"]
    # torch's counters (counters['graph_break'], per rank) count the same breaks
    counted = {INSIDE_FORWARD: 0, LOGGER: 0}
    for c in _counters(USER_MODULE).values():
        for reason, n in c["graph_break"].items():
            counted[INSIDE_FORWARD if "_inside_ddp_forward" in reason else LOGGER] += n
    assert {g["wrapper_break"]: g["count"] for g in gbs} == counted
    text = _summary(USER_MODULE)
    head = text.split("\n\n")[0]
    assert "findings: none that needs action" in head  # "no graph breaks" would deny the line below
    assert "expected: 2 graph breaks of DDP's own wrapper (nothing of yours to avoid)" in head
    assert "\nGRAPH BREAKS" not in text and "EXPECTED GRAPH BREAKS  2 distinct" in text


def test_other_torch_breaks_are_not_taken_for_ddps() -> None:
    gbs = graph_break_hotspots(traceview.load(CORPUS / "graph_break_torch_internal"))
    assert gbs and not any(g["expected"] or g["wrapper_break"] for g in gbs)


# ------------------------------------------------------------------ compiled nothing


def test_ddp_of_sequential_compiled_nothing() -> None:
    t = traceview.load(SEQ_EAGER)
    found = compiled_nothing(t)
    assert found is not None
    assert found["ranks"] == [0, 1] and found["why"] == "ddp_wrapper"
    assert found["compiles"] == t.compiles.height == 8
    assert found["message"] == (
        "torch.compile(model) had no effect: the model ran eagerly on ranks 0-1: no graph reached a "
        "backend (8 compiles, none with a graph op)"
    )
    assert "DDP(torch.compile(model))" in found["next_step"]
    assert INSIDE_FORWARD in found["reason"] and "torch's own code" in found["reason"]
    # torch's counters agree: no graph captured, nothing handed to AOTAutograd or Inductor
    for c in _counters(SEQ_EAGER).values():
        assert "unique_graphs" not in c.get("stats", {})
        assert "aot_autograd" not in c and "inductor" not in c
    text = _summary(SEQ_EAGER)
    assert text.split("\n\n")[0].split("\n")[2].startswith("findings: torch.compile had no effect")
    assert text.split("\n\n")[1].startswith("COMPILED NOTHING")


@pytest.mark.parametrize("path", [USER_MODULE, INNER_COMPILE], ids=lambda p: p.name)
def test_the_control_and_the_fix_compile(path: Path) -> None:
    # the user-defined module (control) and DDP(torch.compile(Sequential)) (the advised fix):
    # graphs reached Inductor on every rank, by torch's own counters too
    assert compiled_nothing(traceview.load(path)) is None
    for c in _counters(path).values():
        assert c["stats"]["unique_graphs"] >= 1
        assert c["aot_autograd"]["ok"] >= 1 and c["inductor"]["fxgraph_cache_miss"] >= 1


def test_the_fix_has_no_graph_break() -> None:
    assert graph_break_hotspots(traceview.load(INNER_COMPILE)) == []


def test_gpu_ddp_of_sequential_compiled_nothing() -> None:
    # torch 2.11 on 2 GPUs (NCCL): the same finding
    found = compiled_nothing(traceview.load(FIXTURES / "gpu" / "ddp2"))
    assert found is not None and found["why"] == "ddp_wrapper" and found["ranks"] == [0, 1]


@pytest.mark.parametrize(
    "name",
    ["graph_break_torch_internal", "suppress_errors", "hop_cond", "aoti_export", "fullgraph_break", "graph_break_loop",
     "reset_same_id", "compiled_autograd"],
)
def test_compiled_nothing_is_not_said_where_graphs_compiled_or_compiles_failed(name: str) -> None:
    assert compiled_nothing(traceview.load(CORPUS / name)) is None
