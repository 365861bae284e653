"""seq_links and origin chains (kernel -> nodes -> backward -> seq_nr -> forward -> user line)."""

from __future__ import annotations

import functools

import polars as pl
import pytest

from parsers.facts import annotations_from_text
from parsers.seq_links import SEQ_LINKS_SCHEMA, seq_links
from tests.conftest import needs_shared
from tests.helpers_graphs import FIXTURES, GPU, PEER, as_trace, tables
from traceview.analyze.origin import origin, origin_table
from traceview.trace import Trace, table_schema

TRAINING = FIXTURES / "training"
ERF_LINE = 23  # fixtures/programs/training.py:23  h = torch.erf(h) * 0.5
GPT = "/home/user/gptdemo/gpt.py"


@functools.cache
def _with_annotations(d: str) -> Trace:
    t = dict(tables(d))
    t["annotations"] = annotations_from_text(t["log_records"])
    t["seq_links"] = seq_links(t["graph_nodes"], t["annotations"])
    return as_trace(t)


@functools.cache
def _without_annotations(d: str) -> Trace:
    t = {k: v for k, v in tables(d).items()}
    t["seq_links"] = seq_links(t["graph_nodes"], None)
    return as_trace(t)


def _training() -> str:
    if not (TRAINING / "trace").is_dir():
        pytest.fail("the training fixture is missing: fixtures/make_fixtures.py makes it")
    return str(TRAINING)


# ------------------------------------------------------------------ CPU training fixture
def test_seq_links_planted_erf_by_seq_nr() -> None:
    t = _with_annotations(_training())
    sl = t.seq_links
    assert sl.schema == table_schema("seq_links")  # the parser's, and the label a Trace adds
    assert sl.drop("label").schema == SEQ_LINKS_SCHEMA
    for source in ("trace", "text"):
        erf = sl.filter((pl.col("source") == source) & pl.col("seq_nr").is_in([23, 24]))
        assert erf.select("seq_nr", "forward_node", "backward_node").sort(
            "seq_nr", "backward_node").rows() == [
            (23, "erf", "exp"), (23, "erf", "mul_2"), (23, "erf", "mul_3"), (23, "erf", "neg"),
            (23, "erf", "pow_1"), (24, "mul", "mul_1"),
        ]
        assert set(erf["link"]) == {"seq_nr"}
        assert set(erf["user_line"]) == {ERF_LINE}
        assert set(erf["user_code"]) == {"h = torch.erf(h) * 0.5"}
        assert erf["user_file"][0].endswith("fixtures/programs/training.py")
    # a backward node the annotation walk gave no seq_nr falls back to its source line
    fd = sl.filter((pl.col("source") == "trace") & (pl.col("backward_node") == "full_default"))
    assert set(fd["link"]) == {"source_line"}
    assert sorted(fd["forward_node"]) == ["addmm", "permute", "relu"]
    assert set(fd["user_line"]) == {21}


def test_seq_links_planted_erf_by_source_line() -> None:
    """Without the annotation log: backward nodes of the erf line link by `# File:` line."""
    sl = _without_annotations(_training()).seq_links.filter(pl.col("source") == "trace")
    assert set(sl["link"]) == {"source_line"}
    line = sl.filter(pl.col("user_line") == ERF_LINE)
    assert sorted(set(line["backward_node"])) == ["exp", "mul_1", "mul_2", "mul_3", "neg", "pow_1"]
    assert sorted(set(line["forward_node"])) == ["erf", "mul"]
    assert line["seq_nr"].null_count() == line.height


def test_origin_backward_node_and_seq_nr() -> None:
    t = _with_annotations(_training())
    (c,) = origin(t, node="pow_1")
    assert (c.start, c.source, c.compile_id, c.graph, c.node_graph) == (
        "node", "trace", "0/0", "0_backward", "aot_backward")
    assert (c.link, c.seq_nrs, c.forward_nodes, c.user_line) == ("seq_nr", [23], ["erf"], ERF_LINE)
    assert c.user_code == "h = torch.erf(h) * 0.5"
    assert c.steps()[-1] == ("source", f"{c.user_file}:23  h = torch.erf(h) * 0.5")
    (s,) = origin(t, seq_nr=23, compile_id="0/0")
    assert sorted(s.backward_nodes) == ["exp", "mul_2", "mul_3", "neg", "pow_1"]
    assert (s.forward_nodes, s.user_line) == (["erf"], ERF_LINE)
    assert origin(t, seq_nr=23, compile_id="9/9") == []
    # answered from the trace only: the text log describes the same compile
    assert {ch.source for ch in origin(t, node="pow_1")} == {"trace"}
    assert {ch.source for ch in origin(t, node="pow_1", source="text")} == {"text"}


def test_origin_kernels_fusing_erf() -> None:
    t = _with_annotations(_training())
    (fw,) = origin(t, kernel="cpp_fused_erf_mul_1")
    # no source-node comment on a C++ launch: the wrapper's dataflow ties it (buf2 -> buf3)
    assert (fw.kernel_kind, fw.graph, fw.via, fw.confidence, fw.link) == (
        "cpp", "0_forward", "dataflow", "exact", "direct")
    assert (sorted(fw.nodes), fw.user_line) == (["erf", "mul"], ERF_LINE)
    # the backward kernel of erf: pow/neg/exp/mul nodes -> seq_nr 23 -> forward erf -> line 23,
    # and the fc3 bias gradient it fuses (sum_1 -> seq_nr 26 -> line 24); nothing else (the
    # name match also reached lines 21 and 22 through sum nodes of other kernels)
    bw = origin(t, kernel="cpp_fused_exp_mul_neg_pow_sum_0")
    assert [c.user_line for c in bw] == [ERF_LINE, 24]
    erf = bw[0]
    assert erf.link == "seq_nr" and erf.via == "dataflow"
    assert erf.seq_nrs == [23, 24]
    assert sorted(erf.forward_nodes) == ["erf", "mul"]
    assert sorted(erf.backward_nodes) == ["exp", "mul_1", "mul_2", "mul_3", "neg", "pow_1"]
    assert bw[1].nodes == ["sum_1"]
    # without annotations the same kernel reaches the line through the source line
    (erf2,) = [c for c in origin(_without_annotations(_training()), kernel=bw[0].kernel)
               if c.user_line == ERF_LINE]
    assert (erf2.link, erf2.seq_nrs) == ("source_line", [])
    # without kernel_calls (no dataflow) a C++ kernel has no chain unless the name match is
    # asked for, and then it says it is not exact
    bare = as_trace({k: v for k, v in t.tables().items() if k != "kernel_calls"})
    (none,) = origin(bare, kernel="cpp_fused_erf_mul_1")
    assert none.user_file is None and none.via is None and none.confidence is None
    assert ("via", "no match: nothing recorded ties this kernel to graph nodes") in none.steps()
    (guess,) = origin(bare, kernel="cpp_fused_erf_mul_1", name_match=True)
    assert (guess.via, guess.confidence, guess.user_line) == ("kernel_name", "name_match", ERF_LINE)
    assert ("via", "name match (NOT EXACT: a guess from op names in the kernel's name)") in guess.steps()
    # the name match never overrides an exact tie
    assert origin(t, kernel="cpp_fused_erf_mul_1", name_match=True) == [fw]
    # extern calls carry source nodes in the wrapper
    ext = origin_table(t, kernel="extern_kernels.addmm")
    assert sorted(ext["user_line"].to_list()) == [21, 22, 24]
    assert set(ext["via"]) == {"source_nodes"}


# ------------------------------------------------------------------------- GPU training
@needs_shared
def test_every_backward_triton_kernel_leads_to_gpt_py() -> None:
    d = str(GPU / "train_dynamic")
    t = _with_annotations(d)
    k = t.kernels.filter(
        (pl.col("source") == "trace") & (pl.col("kind") == "triton")
        & pl.col("graph").str.ends_with("_backward")
    )
    assert k.height == 20
    lines: set[int] = set()
    for kid in k["kernel_id"]:
        chains = origin(t, kernel=kid)
        assert chains, kid
        gpt = [c for c in chains if c.user_file == GPT]
        assert gpt, kid
        assert all(c.link == "seq_nr" and c.seq_nrs for c in gpt), kid
        assert all(c.via == "aten_mapping" and c.node_graph == "post_grad" for c in gpt), kid
        lines |= {c.user_line for c in gpt}
    # 25 (SDPA) and 26 (out projection) run as fallback/extern kernels, not Triton
    assert lines == {21, 22, 23, 24, 27, 28}
    # the gelu backward kernel of 1/0: post-grad nodes -> backward nodes -> forward gelu nodes
    (g,) = origin(t, kernel="triton_per_fused_gelu_gelu_backward_sum_view_3")
    assert (g.compile_id, g.graph, g.user_line) == ("1/0", "0_backward", 28)
    assert g.user_code == "x = x + self.out(F.gelu(self.fc(self.ln2(x))))"
    assert "erf" in g.forward_nodes


@needs_shared
def test_same_kernel_name_in_two_compiles_gives_two_chains() -> None:
    t = _with_annotations(str(GPU / "train_dynamic"))
    chains = origin(t, kernel="triton_red_fused_sum_view_0")
    assert sorted({(c.compile_id, c.graph) for c in chains}) == [
        ("1/0", "0_backward"), ("1/1", "2_backward")]
    assert {c.user_line for c in chains} == {28}
    only = origin(t, kernel="triton_red_fused_sum_view_0", compile_id="1/1")
    assert {c.compile_id for c in only} == {"1/1"}


@needs_shared
def test_gpu_backward_kernels_without_annotations() -> None:
    t = _without_annotations(str(GPU / "train_dynamic"))
    chains = origin(t, kernel="triton_per_fused_gelu_gelu_backward_sum_view_3")
    assert [(c.link, c.user_file, c.user_line) for c in chains] == [("source_line", GPT, 28)]
    assert chains[0].seq_nrs == []


@needs_shared
def test_origin_through_provenance_artifacts() -> None:
    from parsers.graphs import build_graph_nodes, build_graphs, build_kernels
    from tests.helpers_graphs import events_of

    ev = events_of(str(PEER / "inductor_provenance_jit_debug_handle_log.txt"))
    g = build_graphs(ev)
    tt = as_trace({"graph_nodes": build_graph_nodes(g), "kernels": build_kernels(ev)})
    (mul,) = origin(tt, kernel="triton_poi_fused_mul_1")
    assert (mul.via, mul.nodes, mul.user_line, mul.user_code) == (
        "provenance", ["mul"], 82, "d = a * 3.14")
    mm = origin(tt, kernel="extern_kernels.mm")
    assert sorted((c.nodes[0], c.user_line) for c in mm) == [("mm_default", 83), ("mm_default_1", 79)]
    assert len({c.kernel_id for c in mm}) == 2


@needs_shared
def test_kernel_in_several_ranks() -> None:
    from parsers.graphs import build_graph_nodes, build_graphs, build_kernels
    from tests.helpers_graphs import events_of

    ev = events_of(str(PEER / "multi_rank_runtime"))
    tt = as_trace({"graph_nodes": build_graph_nodes(build_graphs(ev)), "kernels": build_kernels(ev)})
    name = "triton_poi_fused_relu_1"
    chains = origin(tt, kernel=name)
    # one chain per rank, never a pick; these logs carry provenance artifacts
    assert sorted(c.rank for c in chains) == [0, 1, 2, 3, 4, 5, 6]
    assert {(c.via, c.link, tuple(c.nodes), c.user_code) for c in chains} == {
        ("provenance", "direct", ("relu",), "a = F.relu(a)")}
    # ranks 5 and 6 ran a different program revision: the same kernel, another line
    assert {c.rank: c.user_line for c in chains} == {0: 114, 1: 114, 2: 114, 3: 114, 4: 114,
                                                     5: 97, 6: 97}
    assert [c.rank for c in origin(tt, kernel=name, rank=5)] == [5]


def test_origin_needs_a_start() -> None:
    with pytest.raises(ValueError):
        origin(_with_annotations(_training()))


@needs_shared
def test_every_kernel_of_train_dynamic_has_an_exact_chain() -> None:
    """Every kernel of every compile of the GPU training run reaches a user line through a
    chain that is exact; none rests on the op names in its name, even when asked for."""
    from collections import Counter

    from traceview.ingest.loading import load

    t = load(str(GPU / "train_dynamic"))
    k = t.kernels
    assert k.group_by("kind").len().sort("kind").rows() == [
        ("extern", 24), ("fallback", 4), ("triton", 34)]
    assert k.select("compile_id").n_unique() > 1
    vias: Counter[tuple[str, str]] = Counter()
    for kid, kind in k.select("kernel_id", "kind").rows():
        chains = origin_table(t, kernel=kid, name_match=True)
        exact = chains.filter((pl.col("confidence") == "exact") & pl.col("user_line").is_not_null())
        assert not exact.is_empty(), kid
        assert "kernel_name" not in set(chains["via"]), kid
        (via,) = set(chains["via"])
        vias[kind, via] += 1
    # Triton kernels of the forward/backward graphs carry the ATen mapping header; those of
    # the optimizer step (an inference graph, `_foreach_*` ops) are tied by the dataflow
    assert vias == {("extern", "source_nodes"): 24, ("fallback", "source_nodes"): 4,
                    ("triton", "aten_mapping"): 28, ("triton", "dataflow"): 6}


# fixtures/programs/training.py, read off the output code by hand: 21 h = torch.relu(self.fc1(x))
# 22 h = self.fc2(h)   23 h = torch.erf(h) * 0.5   24 return self.fc3(h)
TRAINING_CPP = {
    ("0_forward", "cpp_fused_relu_0"): {21},  # in place on fc1's addmm (in_out_ptr0)
    ("0_forward", "cpp_fused_erf_mul_1"): {23},
    # erf's derivative, and fc3's bias grad (sum of tangents_1)
    ("0_backward", "cpp_fused_exp_mul_neg_pow_sum_0"): {23, 24},
    # relu's backward (threshold_backward, 21) and fc2's bias grad (22)
    ("0_backward", "cpp_fused_sum_threshold_backward_1"): {21, 22},
    ("0_backward", "cpp_fused_sum_2"): {21},  # fc1's bias grad
}


@pytest.mark.parametrize("where", ["training", "training_provenance"])
def test_every_cpp_kernel_of_training_gives_exactly_its_lines(where: str) -> None:
    t = _with_annotations(str(FIXTURES / where))
    k = t.kernels.filter((pl.col("kind") == "cpp") & (pl.col("source") == "trace"))
    assert set(k.select("graph", "name").rows()) == set(TRAINING_CPP)
    for graph, name, kid in k.select("graph", "name", "kernel_id").rows():
        chains = origin(t, kernel=kid)
        assert {c.user_line for c in chains} == TRAINING_CPP[graph, name], (where, name)
        assert {c.confidence for c in chains} == {"exact"}, (where, name)
