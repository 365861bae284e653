"""Issue 45 class 9: DDPOptimizer's deliberate split of a compiled DDP model, on real gloo runs
(fixtures/corpus/ddp_split_buckets: torch.compile(DDP(Net(), bucket_cap_mb=1)), three identical
1 MiB blocks on 2 ranks; fixtures/corpus/ddp_split_optimize_off: the same with
torch._dynamo.config.optimize_ddp = False) and the 2-GPU run fixtures/gpu/ddp2_buckets (torch 2.11).
The numbers are torch's own: oracle.json's counters (`inductor.fxgraph_cache_hit/miss`,
`graph_break`)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from traceview.analyze.compile_facts import param_module

from ..conftest import FIXTURES

SPLIT = FIXTURES / "corpus" / "ddp_split_buckets"
OFF = FIXTURES / "corpus" / "ddp_split_optimize_off"
GPU = FIXTURES / "gpu" / "ddp2_buckets"


def _report(d: Path) -> dict:
    import traceview
    from traceview.output.report import build_report

    return build_report(traceview.load(str(d)))


def _counters(d: Path) -> dict[int, dict]:
    """torch's counters per rank (oracle.json; the parent process has no rank)."""
    o = json.loads((d / "oracle.json").read_text())
    return {p["rank"]: p["counters"] for p in o["processes"] if p.get("rank") is not None}


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("l_self_modules_blocks_modules_0_modules_fc_parameters_weight_", "blocks.0.fc"),
        ("L_self_modules_layers_modules_5_parameters_bias_", "layers.5"),
        ("l_self_modules_layer_norm_parameters_weight_", "layer_norm"),
        ("l_self_modules_attn_modules_q_proj_parameters_weight_", "attn.q_proj"),
        ("L_self_parameters_scale_", "self"),
    ],
)
def test_param_module_reads_dynamos_argument_names(name: str, module: str) -> None:
    assert param_module(name) == module


def test_the_split_is_said_with_its_layers_and_the_fx_cache_hits_of_identical_pieces() -> None:
    rep = _report(SPLIT)
    (d,) = rep["facts"]["ddp_splits"]
    assert (d["compile_id"], d["ranks"], d["submodules"], d["function"]) == ("4/0", [0, 1], 3, "forward")
    assert d["layers"] == [["blocks.0.fc"], ["blocks.1.fc"], ["blocks.2.fc"]]
    assert d["param_bytes"] == [(512 * 512 + 512) * 4] * 3
    # the FX graph cache over the pieces' Inductor compiles is torch's own count on each rank
    counters = _counters(SPLIT)
    assert {c["rank"]: (c["hits"], c["misses"]) for c in d["fx_cache"]} == {
        r: (c["inductor"]["fxgraph_cache_hit"], c["inductor"]["fxgraph_cache_miss"]) for r, c in counters.items()
    } == {0: (3, 3), 1: (2, 4)}
    assert d["graph_breaks"] == 0
    assert rep["facts"]["ddp_unsplit"] == []


def test_the_split_is_not_counted_as_graph_breaks() -> None:
    from traceview.output.summary import render_text

    rep = _report(SPLIT)
    # the graph breaks are DDP's own wrapper's, as many as torch counted (3 per rank), none for the split
    torch_breaks = sum(sum(c["graph_break"].values()) for c in _counters(SPLIT).values())
    assert sum(g["count"] for g in rep["graph_breaks"]) == torch_breaks == 6
    assert all(g.get("wrapper_break") for g in rep["graph_breaks"])
    head = rep["head"]
    assert head[0] == "findings: none that needs action"
    assert head[1] == "expected: DDPOptimizer split [4/0] into 3 submodules at DDP's gradient buckets (by design, not graph breaks)"
    text = " ".join(render_text(rep).split())
    assert (
        "DDPOptimizer split [4/0] forward (ddp_split_buckets.py:44) on ranks 0-1 into 3 submodules at the gradient-bucket "
        "boundaries, by design"
    ) in text
    assert "not graph breaks (the compile logged none). Parameters per submodule, in graph order: submod_0: blocks.0.fc (1.0 MiB); " in text
    assert "rank 0 3 hits / 3 misses, rank 1 2 hits / 4 misses (identical submodules compiled once" in text


def test_optimize_ddp_off_is_one_graph_with_its_trade_off() -> None:
    import traceview

    t = traceview.load(str(OFF / "trace"))
    fwd = t.compiles.filter(pl.col("compile_id") == "4/0")
    assert fwd["optimize_ddp"].to_list() == [False, False]
    assert t.ddp_splits.height == 0
    on = traceview.load(str(SPLIT / "trace")).compiles.filter(pl.col("compile_id") == "4/0")
    assert on["optimize_ddp"].to_list() == [True, True]
    rep = _report(OFF)
    assert rep["facts"]["ddp_splits"] == []
    (u,) = rep["facts"]["ddp_unsplit"]
    assert (u["compile_id"], u["function"], u["ranks"]) == ("4/0", "forward", [0, 1])
    assert "note: optimize_ddp=False: [4/0] compiled as one graph (DDP's all-reduce cannot overlap the compiled backward)" in rep["head"]
    # no DDP in the split fixture's unsplit list, no unsplit fact for a compile that is not DDP's module
    assert _report(FIXTURES / "corpus" / "ddp_user_module")["facts"]["ddp_unsplit"] == []


def test_gpu_split_layers_and_cache() -> None:
    (d,) = _report(GPU)["facts"]["ddp_splits"]
    assert d["layers"] == [["layers.0"], ["layers.1", "layers.2"], ["layers.3", "layers.4"], ["layers.5", "head"]]
    assert d["fx_cache"] == [{"rank": 0, "hits": 2, "misses": 6}, {"rank": 1, "hits": 2, "misses": 6}]


def test_a_cache_the_log_never_looked_up_is_not_zero_hits() -> None:
    # ddp_rank_recompile: torch counted no FX graph cache lookup (no `inductor` counters) and
    # the trace logged none: the split says no cache figure, never "0 hits / 0 misses"
    from traceview.output.summary import render_text

    d = FIXTURES / "corpus" / "ddp_rank_recompile"
    assert all("inductor" not in c for c in _counters(d).values())
    rep = _report(d)
    splits = rep["facts"]["ddp_splits"]
    assert [(s["compile_id"], s["ranks"], s["fx_cache"]) for s in splits] == [("4/0", [0, 1, 2, 3], []), ("4/1", [3], [])]
    assert splits[0]["layers"][1][0] == "blocks.0.fc" and len(splits[0]["layers"][1]) == 8
    text = " ".join(render_text(rep).split())
    assert "0 hits / 0 misses" not in text
    assert "submod_1: blocks.0.fc … blocks.3.norm (8 modules) (1.0 MiB)" in text
