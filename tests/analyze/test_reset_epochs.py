"""Two different compiles that share a compile id after torch._dynamo.reset(): each keeps its
own spans, graphs and graph breaks (fixtures/corpus/reset_unequal_models, a real torch 2.13
run: big_model [0/0] breaks and is compiled by Inductor; after the reset tiny_model is [0/0]
again, eager backend, no break). The other reset situations are in test_corpus_recompiles.py
(storms) and test_diff.py (diff)."""

from __future__ import annotations

import json

import polars as pl

import traceview
from traceview.analyze.hotspots import graph_break_hotspots
from traceview.output.timeline import piece_rows, timeline_events

from ..conftest import FIXTURES

CASE = FIXTURES / "corpus" / "reset_unequal_models"


def _load() -> traceview.Trace:
    return traceview.load(CASE / "trace")


def _oracle() -> dict:
    [process] = json.loads((CASE / "oracle.json").read_text())["processes"]
    return process


def test_the_planted_case_is_two_compiles_with_one_id() -> None:
    """What torch did: two epochs, big_model's 0/0 before the reset, tiny_model's after."""
    p = _oracle()
    ids = [[(m["compile_id"], m["function"]) for m in e["compilation_metrics"]] for e in p["epochs"]]
    assert ids == [
        [("0/0", "big_model"), ("1/0", "torch_dynamo_resume_in_big_model_at_19")],
        [("0/0", "tiny_model")],
    ]
    c = _load().compiles
    assert c.select("compile_id", "occurrence", "function").sort("occurrence", "compile_id").rows() == [
        ("0/0", 1, "big_model"),
        ("1/0", 1, "torch_dynamo_resume_in_big_model_at_19"),
        ("0/0", 2, "tiny_model"),
    ]


def test_graph_breaks_counted_once_as_torch_did() -> None:
    """torch counted one graph break (counters['graph_break']), in big_model's 0/0: the
    summary says one, in big_model; tiny_model's 0/0 (#2) has none. Before the breaks were
    placed by occurrence, the break row was joined to both 0/0 compiles and counted twice."""
    torch_breaks = sum(_oracle()["counters"]["graph_break"].values())
    assert torch_breaks == 1
    t = _load()
    [hot] = graph_break_hotspots(t)
    assert (hot["count"], hot["compile_ids"], hot["frame_function"]) == (torch_breaks, ["0/0"], "big_model")
    assert t.graph_breaks.select("compile_id", "occurrence").rows() == [("0/0", 1)]


def test_each_compile_keeps_its_own_spans() -> None:
    """torch's own per-compile accounting (compilation_metrics' inductor_compile_time_s) says
    which 0/0 went through Inductor: exactly that compile has the `inductor_compile` phase,
    and each compile has one `dynamo` phase of its own."""
    t = _load()
    spans = t.spans.filter(pl.col("compile_id").is_not_null())
    phases = spans.group_by("compile_id", "occurrence").agg(
        (pl.col("name") == "inductor_compile").any().alias("inductor"),
        (pl.col("name") == "dynamo").sum().alias("dynamo"),
    )
    got = {(cid, occ): (ind, dyn) for cid, occ, ind, dyn in phases.iter_rows()}
    want = {
        (cid, occ): (ind is not None, 1)
        for cid, occ, ind in t.compiles.select("compile_id", "occurrence", "inductor_compile_time_s").iter_rows()
    }
    assert got == want
    assert want[("0/0", 1)] == (True, 1) and want[("0/0", 2)] == (False, 1)


def test_each_compile_keeps_its_own_graphs() -> None:
    """tiny_model (eager backend) logged only its Dynamo graph; big_model's 0/0 also its AOT
    and post-grad graphs."""
    g = _load().graphs
    kinds = {
        occ: set(k)
        for occ, k in g.filter(pl.col("compile_id") == "0/0").group_by("occurrence").agg(pl.col("kind").unique()).iter_rows()
    }
    assert kinds[2] == {"dynamo"}
    assert {"dynamo", "aot_inference"} <= kinds[1]


def test_timeline_puts_phases_under_their_compile() -> None:
    """Every phase of 0/0 is drawn under the function of its own compile."""
    t = _load()
    rows = piece_rows(t)
    assert rows.filter((pl.col("compile_id") == "0/0") & (pl.col("piece") == "forward")).select(
        "occurrence", "function").sort("occurrence").rows() == [
        (1, "big_model"),
        (2, "tiny_model"),
    ]
    named = {
        (e["name"], e["args"].get("function"))
        for e in timeline_events(t)
        if e.get("cat") != "compile" and e.get("ph") == "X" and e["args"].get("compile_id") == "0/0"
    }
    assert ("inductor_compile", "big_model") in named
    assert ("inductor_compile", "tiny_model") not in named
    assert ("dynamo", "tiny_model") in named


def test_recompile_reasons_name_their_own_function() -> None:
    """fixtures/corpus/reset_between_models: scale_a's 0/1 and, after the reset, scale_b's 0/1
    each recompiled on its own int (torch's CompilationMetrics.recompile_reason per compile).
    The `recompile_reasons` artifact is logged before its compile's dynamo_start: each row
    goes to the compile after the ones of its id that closed before it."""
    doc = json.loads((FIXTURES / "corpus" / "reset_between_models" / "oracle.json").read_text())
    torch_says = {
        (m["function"], m["compile_id"], m["recompile_reason"].split(":", 1)[1].split("#")[0].strip())
        for p in doc["processes"] for e in p["epochs"] for m in e["compilation_metrics"] if m["recompile_reason"]
    }
    assert torch_says == {("scale_a", "0/1", "n == 1"), ("scale_b", "0/1", "m == 1")}
    r = traceview.load(FIXTURES / "corpus" / "reset_between_models" / "trace").recompiles
    got = {(f, c, g) for f, c, g in r.select("function", "compile_id", "guard").iter_rows()}
    assert got == torch_says
    assert sorted(r.select("occurrence", "function").rows()) == [(1, "scale_a"), (2, "scale_b")]
