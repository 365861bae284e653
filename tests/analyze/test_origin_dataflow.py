"""`origin` of every C++ kernel of real CPU training runs: exactly the lines it computes.

Fixtures `origin_block` and `origin_block_provenance` (fixtures/programs/origin_block.py, an
MLP and a transformer block, forward + backward, torch 2.13 CPU; the second run with
INDUCTOR_PROVENANCE=1). torch 2.13 writes no source-node comment on a C++ launch, so without
provenance (and for every backward kernel even with it) only the wrapper's dataflow ties these
kernels to graph nodes (`via = dataflow`).

EXPECTED was worked out by hand once from each wrapper's `call()` (which buffers a launch
passes as `in_ptr`/`out_ptr`/`in_out_ptr`) and the C++ of the kernel, then mapped to the
program's lines; a backward kernel's lines are the forward lines of the ops it differentiates.
Lines of fixtures/programs/origin_block.py:

    22 h = self.fc1(x)      23 h = F.gelu(h)       24 h = self.norm(h)     25 h = self.fc2(h)
    26 return h.sum(dim=-1)
    42 h = self.ln1(x)      43 q, k, v = self.qkv(h).split(d, dim=-1)
    44 q = q.view(..).transpose(1, 2)   45 k = ...   46 v = ...
    47 att = q @ k.transpose(-2, -1)    48 att = att * 0.25     49 att = att.softmax(dim=-1)
    50 y = att @ v          51 y = y.transpose(1, 2).reshape(b, t, d)
    52 x = x + self.proj(y) 53 h = self.ln2(x)      54 h = self.up(h)
    55 h = F.gelu(h, approximate="tanh")            56 x = x + self.down(h)
    57 return x.sum(dim=-1)
"""

from __future__ import annotations

import functools

import polars as pl
import pytest

from tests.helpers_graphs import FIXTURES, as_trace
from traceview.analyze.origin import origin
from traceview.ingest.loading import load
from traceview.trace import Trace

PLAIN = FIXTURES / "origin_block"
PROV = FIXTURES / "origin_block_provenance"
PROGRAM = "fixtures/programs/origin_block.py"

# (graph, kernel) -> the program lines it computes, read off the output code by hand
EXPECTED: dict[tuple[str, str], set[int]] = {
    # MLP forward. fused_gelu_native_layer_norm_0(buf2, buf4, buf0, ln.weight, ln.bias, buf5):
    # reads fc1's addmm (buf0), writes mean, rstd (in_out_ptr0/1 on fresh buffers: scratch,
    # not inputs) and the normalized output: gelu (23) + layer norm (24)
    ("0_forward", "cpp_fused_gelu_native_layer_norm_0"): {23, 24},
    # reads fc2's addmm, writes the sum: 26 only (not the other sum nodes of the graph)
    ("0_forward", "cpp_fused_sum_1"): {26},
    # MLP backward. reads tangents_1, the mm into fc2's input, ln.weight, fc1's addmm, mean,
    # rstd; writes fc2's bias grad (sum of the expanded tangents: 25, 26), the grad into fc1's
    # output (layer norm backward 24, gelu backward 23, with gelu recomputed), ln grads (24)
    (
        "0_backward",
        "cpp_fused_expand_gelu_gelu_backward_native_layer_norm_native_layer_norm_"
        "backward_sum_unsqueeze_0",
    ): {23, 24, 25, 26},
    # fc1's bias grad: sum of the grad into fc1's output
    ("0_backward", "cpp_fused_sum_1"): {22},
    # Block forward. ln1 of the input x
    ("1_forward", "cpp_fused_native_layer_norm_0"): {42},
    # reads qkv's addmm, writes q and k made contiguous for the bmm: the view/split (43), q's
    # and k's view+transpose (44, 45), k.transpose and the matmul's expand/clone (47)
    ("1_forward", "cpp_fused_clone_split_transpose_view_1"): {43, 44, 45, 47},
    # reads q@k (bmm) and qkv's addmm; writes the softmax and v made contiguous: split (43),
    # v's view+transpose (46), the view of q@k (47), softmax (49), att @ v's expand/clone (50).
    # Line 48 (att * 0.25) is computed here too, but the post-grad pattern matcher rewrote
    # the scale and the softmax into nodes without a `# File:` line (mul_tensor, amax_default,
    # ...): they come as one chain with no source line (provenance has no line for them either)
    ("1_forward", "cpp_fused__softmax_abs_all_amax_clone_eq_mul_ne_split_sub_transpose_view_2"): {
        43,
        46,
        47,
        49,
        50,
    },
    # reads att @ v (bmm), writes y transposed back: the view of the bmm (50), 51
    ("1_forward", "cpp_fused_clone_transpose_view_3"): {50, 51},
    # reads x and proj's addmm: x + proj (52), ln2 (53)
    ("1_forward", "cpp_fused_add_native_layer_norm_view_4"): {52, 53},
    # reads up's addmm: its view (54), tanh gelu (55)
    ("1_forward", "cpp_fused_gelu_view_5"): {54, 55},
    # reads x, proj's and down's addmm: recomputes x + proj (52), + down (56), sum (57)
    ("1_forward", "cpp_fused_add_sum_view_6"): {52, 56, 57},
    # Block backward. reads tangents_1: down's bias grad (56) of the expanded tangents (57)
    ("1_backward", "cpp_fused_expand_sum_unsqueeze_view_0"): {56, 57},
    # reads the mm into down's input (view, 56) and up's addmm; gelu backward in place (55),
    # up's bias grad (54)
    ("1_backward", "cpp_fused_gelu_gelu_backward_sum_view_1"): {54, 55, 56},
    # reads the mm into up's input (54), x, proj's addmm, ln2's mean/rstd, tangents_1: ln2
    # backward (53) with x + proj recomputed and proj's bias grad (52), plus the residual
    # grad of the expanded tangents (57)
    (
        "1_backward",
        "cpp_fused_add_expand_native_layer_norm_native_layer_norm_backward_sum_unsqueeze_view_2",
    ): {52, 53, 54, 57},
    # reads the mm into proj's input (52): y's transpose/reshape backward (51), into the
    # layout of att @ v's output (50)
    ("1_backward", "cpp_fused_clone_transpose_view_3"): {50, 51, 52},
    # reads the bmm grad of att (50) and the softmax output: softmax backward (49), scale (48)
    ("1_backward", "cpp_fused__softmax_backward_data_mul_view_4"): {48, 49, 50},
    # reads the grads of q, k (bmms) and v: writes the three slices of qkv's grad (cat = split
    # backward, 43) through q/k/v's view+transpose backward (44, 45, 46), 47 and 50's views
    ("1_backward", "cpp_fused__unsafe_view_cat_clone_transpose_view_5"): {43, 44, 45, 46, 47, 50},
    # qkv's bias grad
    ("1_backward", "cpp_fused_sum_view_6"): {43},
    # ln2's and ln1's weight/bias grads (53 with x + proj recomputed 52, 42), from the mm
    # grads of up's (54) and qkv's (43) inputs
    ("1_backward", "cpp_fused_add_native_layer_norm_native_layer_norm_backward_view_7"): {
        42,
        43,
        52,
        53,
        54,
    },
}
# the kernels whose forward nodes include pattern-matcher nodes without a source line
NO_LINE = {
    ("1_forward", "cpp_fused__softmax_abs_all_amax_clone_eq_mul_ne_split_sub_transpose_view_2")
}


@functools.cache
def _trace(where: str) -> Trace:
    d = FIXTURES / where
    if not (d / "trace").is_dir():
        pytest.fail(f"fixtures/{where} is missing: fixtures/make_fixtures.py makes it")
    return load(str(d))


def _cpp(t: Trace) -> list[tuple[str, str, str]]:
    k = t.kernels.filter(pl.col("kind") == "cpp").sort("graph", "order")
    return k.select("graph", "name", "kernel_id").rows()


@pytest.mark.parametrize("where", ["origin_block", "origin_block_provenance"])
def test_every_cpp_kernel_gives_exactly_its_lines(where: str) -> None:
    t = _trace(where)
    kernels = _cpp(t)
    assert {(g, n) for g, n, _ in kernels} == set(EXPECTED)
    assert len(kernels) == len(EXPECTED)  # one launch each
    for graph, name, kid in kernels:
        for name_match in (False, True):  # an exact tie never gives way to the name match
            chains = origin(t, kernel=kid, name_match=name_match)
            got = [c.user_line for c in chains if c.user_line is not None]
            assert set(got) == EXPECTED[graph, name], (where, graph, name)
            assert len(got) == len(set(got))  # one chain per line
            assert all(c.user_file.endswith(PROGRAM) for c in chains if c.user_file), name
            assert all(c.confidence == "exact" for c in chains), name
            # with provenance the forward kernels come from the artifact, the backward ones
            # (torch 2.13 maps no backward node) from the dataflow
            via = (
                "provenance"
                if where.endswith("provenance") and graph.endswith("forward")
                else "dataflow"
            )
            assert {c.via for c in chains} == {via}, (where, name)
            unlined = [c for c in chains if c.user_line is None]
            assert len(unlined) == ((graph, name) in NO_LINE), name
            if unlined:  # last, after the lines
                assert chains[-1] is unlined[0]
                assert "mul_tensor" in unlined[0].nodes and "amax_default" in unlined[0].nodes
            # backward kernels reach their lines through the forward nodes' seq_nr, or (mul_31,
            # the scale's grad: its forward mul was rewritten by the pattern matcher) through
            # the backward node's own `# File:` line
            if graph.endswith("backward"):
                links = {c.user_line: c.link for c in chains if c.user_line}
                assert set(links.values()) <= {"seq_nr", "node_source"}, name
                assert [ln for ln, lk in links.items() if lk == "node_source"] == (
                    [48] if "softmax_backward" in name else []
                ), name


def test_the_issue_examples() -> None:
    """The kernels issue 15 found wrong or empty, without provenance."""
    t = _trace("origin_block")
    by = {(g, n): kid for g, n, kid in _cpp(t)}
    # the gelu kernel: the gelu line and the layer norm it fuses, nothing else
    gelu = origin(t, kernel=by["0_forward", "cpp_fused_gelu_native_layer_norm_0"])
    assert [(c.user_line, c.user_code) for c in gelu] == [
        (23, "h = F.gelu(h)"),
        (24, "h = self.norm(h)"),
    ]
    assert sorted(gelu[0].nodes) == ["add", "erf", "mul", "mul_1", "mul_2"]
    # all of the layer norm, mean and rstd too: its in_out_ptr0/1 are fresh buffers the kernel
    # writes, not inputs that would cut the walk short
    assert sorted(gelu[1].nodes) == [
        "add_1",
        "add_2",
        "getitem",
        "getitem_1",
        "mul_3",
        "mul_4",
        "rsqrt",
        "sub",
        "var_mean",
    ]
    # a sum kernel: its own sum node, not every sum of the graph
    (s,) = origin(t, kernel=by["0_forward", "cpp_fused_sum_1"])
    assert (s.nodes, s.user_line) == (["sum_1"], 26)
    # a layer_norm kernel gives its line
    (ln,) = origin(t, kernel=by["1_forward", "cpp_fused_native_layer_norm_0"])
    assert (ln.user_line, ln.user_code) == (42, "h = self.ln1(x)")
    # a view kernel: only the views it reads through, not the graph's dozens of views
    views = origin(t, kernel=by["1_forward", "cpp_fused_clone_transpose_view_3"])
    assert [(c.user_line, sorted(c.nodes)) for c in views] == [
        (50, ["view_10"]),
        (51, ["clone_3", "permute_5"]),
    ]
    # without the wrapper's launches nothing ties a C++ kernel: said plainly, no guess
    bare = as_trace({"graph_nodes": t.graph_nodes, "kernels": t.kernels, "seq_links": t.seq_links})
    (none,) = origin(bare, kernel=by["0_forward", "cpp_fused_gelu_native_layer_norm_0"])
    assert (none.via, none.confidence, none.user_line) == (None, None, None)


def test_text_output_says_via_and_certainty(capsys: pytest.CaptureFixture[str]) -> None:
    from traceview.cli import main

    _trace("origin_block")
    name = "cpp_fused__softmax_abs_all_amax_clone_eq_mul_ne_split_sub_transpose_view_2"
    assert main(["origin", str(PLAIN), "--kernel", name, "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("6 chains, best first")
    assert out.count("via: wrapper dataflow (exact)") == 6
    assert "NOT EXACT" not in out
    # the chain of nodes without a source line is said as such, last
    last = out.split("\n\n")[-1]
    assert "mul_tensor" in last
    assert last.rstrip().endswith("source: none recorded: these nodes carry no `# File:` line")


def test_trace_and_text_log_give_one_row_per_fact() -> None:
    """The run was captured both ways (TORCH_TRACE and TORCH_LOGS=output_code,aot_graphs,
    annotation): each kernel, launch and seq link is one row, from the trace."""
    from parsers.graphs import build_kernel_calls, build_kernels
    from parsers.seq_links import seq_links

    t = _trace("origin_block")
    both = build_kernels(t.events, t.log_records)
    assert sorted(set(both["source"])) == ["text", "trace"]  # the fact is logged twice
    assert both.filter(pl.col("source") == "text").height == 42
    assert t.kernels.height == 42 and set(t.kernels["source"]) == {"trace"}
    assert t.kernels.select("graph", "order").n_unique() == 42
    calls = build_kernel_calls(t.events, t.log_records)
    assert t.kernel_calls.height == calls.height // 2 and set(t.kernel_calls["source"]) == {"trace"}
    links = seq_links(t.graph_nodes, t.annotations)
    assert set(links["source"]) == {"text", "trace"}
    assert t.seq_links.height == links.filter(pl.col("source") == "trace").height > 0
    assert set(t.seq_links["source"]) == {"trace"}
    # the same when the graph tables are built per parsed part (trace file and text log
    # apart, in worker processes: the UI and export do this)
    parts = load(str(PLAIN))
    assert parts.parts is not None
    parts.ensure_graph_tables()
    for name in ("kernels", "kernel_calls", "seq_links"):
        assert set(parts.table(name)["source"]) == {"trace"}, name
        assert parts.table(name).height == t.table(name).height, name
    # a chain is answered once, not once per source
    k = t.kernels.filter(pl.col("name") == "cpp_fused_sum_view_6")["kernel_id"][0]
    assert len(origin(t, kernel="cpp_fused_sum_view_6")) == 1
    assert origin(t, kernel=k)[0].source == "trace"
    # the text log alone: its kernels are the only ones then
    text = load(str(PLAIN / "torch_logs.txt"))
    assert text.kernels.height == 42 and set(text.kernels["source"]) == {"text"}
    (c,) = origin(text, kernel="cpp_fused_sum_view_6")
    assert (c.source, c.via, c.confidence, c.user_line) == ("text", "dataflow", "exact", 43)


def test_json_carries_via_and_confidence(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from traceview.cli import main

    _trace("origin_block")
    assert (
        main(
            [
                "origin",
                str(PLAIN),
                "--kernel",
                "cpp_fused_gelu_native_layer_norm_0",
                "--json",
                "--no-cache",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["matches"] == 2
    assert [(c["via"], c["confidence"], c["user_line"]) for c in out["chains"]] == [
        ("dataflow", "exact", 23),
        ("dataflow", "exact", 24),
    ]
    assert out["chains"][0]["location"].endswith(f"{PROGRAM}:23")


def test_text_log_alone_gives_the_same_lines() -> None:
    """TORCH_LOGS=aot_graphs,output_code without post_grad_graphs: no post-grad graph, so the
    dataflow follows the AOT graph the post-grad graph was made from; same lines."""
    t = load(str(PLAIN / "torch_logs.txt"))
    assert set(t.graph_nodes["graph_kind"]) == {"aot_forward", "aot_backward"}
    kernels = _cpp(t)
    assert {(g, n) for g, n, _ in kernels} == set(EXPECTED)
    for graph, name, kid in kernels:
        chains = origin(t, kernel=kid)
        assert {c.user_line for c in chains if c.user_line} == EXPECTED[graph, name], name
        assert {(c.via, c.confidence, c.source) for c in chains} == {("dataflow", "exact", "text")}
        assert {c.node_graph for c in chains} == {f"aot_{graph.split('_')[1]}"}, name


def test_no_match_said_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    """ro_cpu_scalar (torch 2.11, CUDA): a C++ kernel writes a CPU scalar that `buf1.copy_(buf0)`
    moves to the GPU for a graph partition; nothing recorded ties it to a graph node."""
    from traceview.cli import main

    d = FIXTURES / "gpu" / "ro_cpu_scalar"
    assert main(["origin", str(d), "--kernel", "cpp_fused_0", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "via: no match: nothing recorded ties this kernel to graph nodes" in out
    assert "source:" not in out


def test_name_match_only_on_request_and_marked() -> None:
    """Without the wrapper's launches nothing ties cpp_fused_sum_view_6 (qkv's bias grad, line
    43): asked for the op-name match, origin gives every sum and view of the backward graph
    (13 lines), each marked NOT EXACT, in text as in the table."""
    from traceview.output.summary import render_origin

    t = load(str(PLAIN / "torch_logs.txt"))
    bare = as_trace({"graph_nodes": t.graph_nodes, "kernels": t.kernels, "seq_links": t.seq_links})
    (none,) = origin(bare, kernel="cpp_fused_sum_view_6")
    assert "via: no match: nothing recorded ties this kernel to graph nodes" in render_origin(
        [none]
    )
    chains = origin(bare, kernel="cpp_fused_sum_view_6", name_match=True)
    assert len(chains) == 13 and 43 in {c.user_line for c in chains}
    assert {(c.via, c.confidence) for c in chains} == {("kernel_name", "name_match")}
    lines = render_origin(chains).splitlines()
    assert lines[0].startswith("13 chains, best first")
    assert lines[1] == (
        "13 of them NOT EXACT (op names in the kernel's name only): check them "
        "against the kernel's code"
    )
    vias = [ln.strip() for ln in lines if ln.strip().startswith("via:")]
    assert vias == ["via: name match (NOT EXACT: a guess from op names in the kernel's name)"] * 13
