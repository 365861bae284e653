"""Inductor output code -> kernels / kernel_calls / provenance, on real traces."""

from __future__ import annotations

import re

import polars as pl
import pytest

from parsers.graphs import build_kernel_calls, build_kernels, build_provenance
from parsers.outputcode import (
    kernel_kind,
    output_code_from_log_text,
    parse_output_code,
    parse_provenance,
    stack_frame,
)
from tests.conftest import needs_shared
from tests.helpers_graphs import (
    FIXTURES,
    GPU,
    PEER,
    events_of,
    log_records_of,
    raw_envelopes,
    trace_files,
)


def _literal(payload: str, name: str) -> str:
    """The kernel's string literal cut out independently of the parser."""
    m = re.search(rf"^{name} = async_compile\.\w+\(.*?r?'''(.*?)'''", payload, re.M | re.S)
    assert m, name
    return m.group(1)


def _wrappers(path) -> list[dict]:
    return [e for e in raw_envelopes(path) if e["kind"] == "inductor_output_code"]


@needs_shared
def test_max_autotune_template_and_extern() -> None:
    (w,) = _wrappers(trace_files(GPU / "max_autotune" / "trace")[0])
    oc = parse_output_code(w["payload"])
    assert oc.aot_ids == ["0_forward"]
    tem, ext = oc.kernels
    assert (tem["name"], tem["kind"], tem["variant"]) == (
        "triton_tem_fused_addmm_gelu_t_0", "template", "tem")
    assert tem["source_nodes"] == ["input_1", "input_2"]
    assert tem["aten_ops"] == ["aten.t", "aten.addmm", "aten.gelu"]
    assert tem["post_grad_nodes"] == ["addmm", "permute", "add", "convert_element_type_3",
                                      "convert_element_type_4", "erf", "mul", "mul_1", "mul_2"]
    assert tem["kernel_path"].endswith("/j7/cj76cwcefibmoqjsm2yfrfv45yikr4ntjs7cwwrs5qhnscmbllkl.py")
    assert tem["code"] == _literal(w["payload"], tem["name"])
    assert tem["code"].startswith("\nimport triton\n")
    assert "@triton_heuristics.template(" in tem["code"]
    assert (ext["name"], ext["kind"], ext["source_nodes"], ext["aten_ops"]) == (
        "extern_kernels.bias_addmm", "extern", ["input_3"], ["aten.t", "aten.addmm"])
    assert ext["code"].startswith("extern_kernels.bias_addmm(reinterpret_tensor(primals_5")
    assert [(c["call_index"], c["name"], c["function"]) for c in oc.calls] == [
        (0, "triton_tem_fused_addmm_gelu_t_0", "call"), (1, "extern_kernels.bias_addmm", "call"),
        (2, "return", "call")]  # what call() returns, for the dataflow (reads = returned values)


@needs_shared
def test_train_dynamic_kernels_per_compile() -> None:
    ev = events_of(str(GPU / "train_dynamic" / "trace"))
    k = build_kernels(ev)
    assert k.group_by("compile_id", "graph", "kind").len().sort("compile_id", "graph", "kind").rows() == [
        ("1/0", "0_backward", "extern", 8), ("1/0", "0_backward", "fallback", 1),
        ("1/0", "0_backward", "triton", 9), ("1/0", "0_forward", "extern", 4),
        ("1/0", "0_forward", "fallback", 1), ("1/0", "0_forward", "triton", 4),
        ("1/1", "2_backward", "extern", 8), ("1/1", "2_backward", "fallback", 1),
        ("1/1", "2_backward", "triton", 11), ("1/1", "2_forward", "extern", 4),
        ("1/1", "2_forward", "fallback", 1), ("1/1", "2_forward", "triton", 4),
        ("4/0", "1_inference", "triton", 6),
    ]
    fw = k.filter(pl.col("graph") == "0_forward").sort("order")
    assert fw.select("name", "kind", "calls").rows() == [
        ("triton_per_fused_native_layer_norm_0", "triton", [0]),
        ("triton_per_fused_add_native_layer_norm_view_1", "triton", [4]),
        ("triton_poi_fused_gelu_view_2", "triton", [6]),
        ("triton_poi_fused_add_addmm_view_3", "triton", [8]),
        ("extern_kernels.addmm", "extern", [1]),
        ("torch.ops.aten._scaled_dot_product_efficient_attention.default", "fallback", [2]),
        ("extern_kernels.addmm", "extern", [3]),
        ("extern_kernels.addmm", "extern", [5]),
        ("extern_kernels.mm", "extern", [7]),
    ]
    gelu = fw.filter(pl.col("name") == "triton_poi_fused_gelu_view_2").row(0, named=True)
    assert gelu["source_nodes"] == ["linear_2", "gelu"]
    assert gelu["aten_ops"] == ["aten.view", "aten.gelu"]
    # kernel source is the literal, byte for byte, for every generated kernel
    raw = {e["lineno"]: e["payload"] for e in _wrappers(trace_files(GPU / "train_dynamic" / "trace")[0])}
    for r in k.filter(pl.col("kind") == "triton").iter_rows(named=True):
        assert r["code"] == _literal(raw[r["lineno"]], r["name"])
        assert r["calls"], r["name"]
    # the compiled optimizer's foreach kernels
    inf = k.filter(pl.col("graph") == "1_inference")["variant"].to_list()
    assert inf == ["for", "for", "for", "for", "for", "poi"]
    # no provenance tracking in these runs (INDUCTOR_PROVENANCE was not set)
    assert build_provenance(ev).is_empty()
    assert k["provenance_nodes"].list.len().sum() == 0


@needs_shared
def test_text_log_output_code_matches_trace() -> None:
    d = GPU / "train_dynamic"
    lr = log_records_of(str(d / "torch_logs.txt"))
    k = build_kernels(events_of(str(d / "trace")), lr)
    cols = ["compile_id", "graph", "order", "name", "kind", "code", "source_nodes", "aten_ops",
            "post_grad_nodes", "calls"]
    a = k.filter(pl.col("source") == "trace").select(cols).sort("compile_id", "graph", "order")
    b = k.filter(pl.col("source") == "text").select(cols).sort("compile_id", "graph", "order")
    assert a.height == b.height == 62
    assert a.equals(b)
    rec = lr.filter((pl.col("artifact") == "output_code") & (pl.col("lineno") == 904)).row(0, named=True)
    code = output_code_from_log_text(rec["text"])
    assert code.startswith("# AOT ID: ['0_forward']\n")
    assert "Output code written to" not in code


@needs_shared
def test_partitions_are_expanded_in_call_order() -> None:
    """reduce-overhead (CUDA graphs): kernels run in partition_0, called from Runner.call."""
    calls = build_kernel_calls(events_of(str(GPU / "reduce_overhead" / "trace")))
    assert calls.group_by("compile_id", "function", "kind").len().sort(
        "compile_id", "function", "kind").rows() == [
        ("0/0", "call", "return", 1), ("0/0", "partition_0", "extern", 17),
        ("0/0", "partition_0", "fallback", 4), ("0/0", "partition_0", "triton", 13),
        ("0/1", "call", "return", 1), ("0/1", "partition_0", "extern", 17),
        ("0/1", "partition_0", "fallback", 4), ("0/1", "partition_0", "triton", 13),
    ]
    c0 = calls.filter((pl.col("compile_id") == "0/0") & (pl.col("kind") != "return")).sort("call_index")
    assert c0["call_index"].to_list() == list(range(34))
    assert c0["name"][0] == "triton_red_fused_add_arange_embedding_native_layer_norm_0"
    assert c0["name"][-1] == "extern_kernels.mm"
    # a deduplicated Triton kernel launched several times keeps every launch
    k = build_kernels(events_of(str(GPU / "reduce_overhead" / "trace")))
    multi = k.filter((pl.col("compile_id") == "0/0") & (pl.col("calls").list.len() > 1))
    assert multi["calls"].list.len().sum() == 13 - 6 + multi.height


def test_cpu_training_fixture_kernels() -> None:
    d = FIXTURES / "training"
    if not (d / "trace").is_dir():
        pytest.fail("the training fixture is missing: fixtures/make_fixtures.py makes it")
    ev = events_of(str(d / "trace"))
    k = build_kernels(ev, log_records_of(str(d / "torch_logs.txt")))
    tr = k.filter(pl.col("source") == "trace").sort("graph", "order")
    cpp = tr.filter(pl.col("kind") == "cpp")
    assert cpp.select("graph", "name").rows() == [
        ("0_backward", "cpp_fused_exp_mul_neg_pow_sum_0"),
        ("0_backward", "cpp_fused_sum_threshold_backward_1"),
        ("0_backward", "cpp_fused_sum_2"),
        ("0_forward", "cpp_fused_relu_0"),
        ("0_forward", "cpp_fused_erf_mul_1"),
    ]
    erf = cpp.filter(pl.col("name") == "cpp_fused_erf_mul_1").row(0, named=True)
    assert erf["code"].startswith("\n#include <torch/csrc/inductor/cpp_prefix.h>\n")
    assert ".erf()" in erf["code"]
    raw = {e["lineno"]: e["payload"] for e in _wrappers(trace_files(d / "trace")[0])}
    for r in cpp.iter_rows(named=True):
        assert r["code"] == _literal(raw[r["lineno"]], r["name"])
    # CPU wrappers carry no source-node comments on C++ launches, only on extern calls
    assert cpp["source_nodes"].list.len().sum() == 0
    calls = build_kernel_calls(ev).filter(pl.col("graph") == "0_forward").sort("call_index")
    assert calls.select("name", "source_nodes").rows() == [
        ("extern_kernels.addmm", ["linear"]), ("cpp_fused_relu_0", []),
        ("extern_kernels.addmm", ["h_1"]), ("cpp_fused_erf_mul_1", []),
        ("extern_kernels.addmm", ["linear_2"]), ("return", []),
    ]
    # dataflow, read off the wrapper by hand: addmm writes buf0 (out=); `buf1 = buf0; del buf0
    # # reuse`; cpp_fused_relu_0(buf1) has one in_out_ptr0: reads buf0's value, writes a new
    # value of buf1 (buf1~1); erf_mul reads in_ptr0=buf2, writes out_ptr0=buf3; call() returns
    # (buf4, primals_3, primals_4, primals_6, buf1, buf2, buf3)
    assert calls.select("name", "reads", "writes").rows() == [
        ("extern_kernels.addmm", ["primals_2", "primals_3", "primals_1"], ["buf0"]),
        ("cpp_fused_relu_0", ["buf0"], ["buf1~1"]),
        ("extern_kernels.addmm", ["primals_5", "buf1~1", "primals_4"], ["buf2"]),
        ("cpp_fused_erf_mul_1", ["buf2"], ["buf3"]),
        ("extern_kernels.addmm", ["primals_7", "buf3", "primals_6"], ["buf4"]),
        ("return", ["buf4", "primals_3", "primals_4", "primals_6", "buf1~1", "buf2", "buf3"], []),
    ]
    # the same kernels from the text log's output_code records
    tx = k.filter(pl.col("source") == "text").sort("graph", "order")
    assert tx.select("graph", "name", "code").equals(tr.select("graph", "name", "code"))


@needs_shared
def test_collectives_and_ranks() -> None:
    k = build_kernels(events_of(str(PEER / "multi_rank_runtime")))
    assert k.group_by("rank", "kind").len().sort("rank", "kind").filter(pl.col("rank") == 0).rows() == [
        (0, "collective", 20), (0, "extern", 8), (0, "triton", 11)]
    assert sorted(k["rank"].unique().to_list()) == [0, 1, 2, 3, 4, 5, 6]
    names = set(k.filter(pl.col("kind") == "collective")["name"].to_list())
    assert names == {
        "torch.ops._c10d_functional.all_reduce_.default",
        "torch.ops._c10d_functional.wait_tensor.default",
        "torch.ops._c10d_functional.all_gather_into_tensor.default",
        "torch.ops._c10d_functional.reduce_scatter_tensor.default",
    }


@needs_shared
def test_provenance_debug_handles() -> None:
    """torch >= 2.8 provenance: kernel keys `name:handle`, matched to launches by the
    `# [Provenance debug handles]` comments."""
    ev = events_of(str(PEER / "inductor_provenance_jit_debug_handle_log.txt"))
    prov = build_provenance(ev)
    assert prov["artifact"].value_counts().sort("artifact").rows() == [
        ("inductor_provenance_tracking_kernel_stack_traces", 5),
        ("inductor_provenance_tracking_node_mappings", 5),
    ]
    assert set(prov["graph"].to_list()) == {"0_forward"}
    mul = prov.filter(pl.col("kernel_key") == "triton_poi_fused_mul_1:2").sort("artifact")
    assert mul.select("kernel", "debug_handle").rows() == [("triton_poi_fused_mul_1", 2)] * 2
    assert mul["pre_grad_nodes"].to_list()[1] == ["d"]
    assert mul.select("user_line", "user_function", "user_code").row(0) == (
        82, "forward", "d = a * 3.14")
    k = build_kernels(ev)
    ext = k.filter(pl.col("kind") == "extern").sort("order")
    assert ext.select("debug_handles", "provenance_nodes").rows() == [
        (["extern_kernels.mm:4"], ["mm_default_1"]), (["extern_kernels.mm:5"], ["mm_default"])]
    tri = k.filter(pl.col("name") == "triton_poi_fused_addmm_relu_sigmoid_threshold_backward_0")
    assert tri["provenance_nodes"].item().to_list() == ["sigmoid", "relu", "add_tensor_1", "le"]
    assert tri["provenance_stack"].item().len() == 3


@needs_shared
def test_provenance_older_artifacts() -> None:
    """Older torch: `inductor_triton_kernel_to_post_grad_nodes`, keys without handles."""
    k = build_kernels(events_of(str(PEER / "inductor_provenance_jit_log.txt")))
    assert k.select("name", "kind", "provenance_nodes").sort("name").rows() == [
        ("cpp_fused_gelu_1", "cpp", ["mul_3", "mul_1", "add", "erf", "mul_2"]),
        ("cpp_fused_mul_relu_sigmoid_0", "cpp", ["sigmoid", "relu", "mul"]),
        ("extern_kernels.addmm", "extern", ["addmm", "addmm_1", "mul"]),
        ("extern_kernels.addmm", "extern", ["addmm", "addmm_1", "mul"]),
    ]
    # AOTInductor logs (graph_dump, no inductor_output_code): rows with no wrapper
    prov = build_provenance(events_of(str(PEER / "inductor_provenance_aot_cuda_log.txt")))
    assert prov.height == 8 and prov["output_lineno"].null_count() == 8


def test_parse_provenance_edge_cases() -> None:
    assert parse_provenance("inductor_provenance_tracking_node_mappings", None) == []
    assert parse_provenance("inductor_provenance_tracking_node_mappings", '{"version": 2.0}') == []
    rows = parse_provenance(
        "inductor_provenance_tracking_kernel_stack_traces",
        '{"k:7": "  File \\"/a.py\\", line 3, in f\\n    y = g(x)\\n"}',
    )
    assert [(r["kernel"], r["debug_handle"], r["user_line"], r["user_code"]) for r in rows] == [
        ("k", 7, 3, "y = g(x)")]
    assert stack_frame("no frames here")["user_file"] is None


def test_kernel_kind() -> None:
    assert kernel_kind("triton_poi_fused_add_0", "triton") == "triton"
    assert kernel_kind("triton_tem_fused_mm_0", "triton") == "template"
    assert kernel_kind("cpp_fused_relu_0", "cpp_pybinding") == "cpp"
    assert kernel_kind("extern_kernels.mm") == "extern"
    assert kernel_kind("torch.ops._c10d_functional.wait_tensor.default") == "collective"
    assert kernel_kind("torch.ops.aten._scaled_dot_product_efficient_attention.default") == "fallback"
    assert kernel_kind("aten.randint.low_out") == "fallback"
