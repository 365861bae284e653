"""`training_provenance`: the `training` run again with INDUCTOR_PROVENANCE=1 (torch 2.13, CPU).

What the provenance artifacts change in `origin` for the kernels of the planted erf line
(fixtures/programs/training.py:23). Without provenance (fixture `training`) both kernels are
linked by the wrapper's dataflow (`via == "dataflow"`, see test_origin.py); the backward
graph has no node mapping even with provenance, so there the dataflow answers too, and its
lines are exactly the lines of the provenance stack traces.
"""

from __future__ import annotations

import functools
import json

import polars as pl
import pytest

from parsers.facts import annotations_from_text
from parsers.outputcode import stack_frame
from parsers.seq_links import seq_links
from tests.helpers_graphs import FIXTURES, as_trace, tables
from traceview.analyze.origin import origin
from traceview.cli import main

PROV = FIXTURES / "training_provenance"
PROGRAM = "fixtures/programs/training.py"
ERF_LINE = 23  # h = torch.erf(h) * 0.5
FC3_LINE = 24  # return self.fc3(h)
FW = "cpp_fused_erf_mul_1"
BW = "cpp_fused_exp_mul_neg_pow_sum_0"  # erf' = 2/sqrt(pi) * exp(-x^2), fused with fc3's bias grad


@functools.cache
def _load(where: str) -> dict[str, pl.DataFrame]:
    t = dict(tables(where))
    t["annotations"] = annotations_from_text(t["log_records"])
    t["seq_links"] = seq_links(t["graph_nodes"], t["annotations"])
    return t


def _tables() -> dict[str, pl.DataFrame]:
    assert (PROV / "trace").is_dir(), "fixtures/training_provenance is committed"
    return _load(str(PROV))


@functools.cache
def _training_tables() -> dict[str, pl.DataFrame]:
    return _load(str(FIXTURES / "training"))


def test_trace_carries_provenance_artifacts() -> None:
    prov = _tables()["provenance"]
    # one node-mappings and one stack-traces artifact per graph (forward, backward)
    per = prov.group_by("graph", "artifact").agg(pl.col("lineno").n_unique().alias("n"))
    assert sorted(per.rows()) == [
        ("0_backward", "inductor_provenance_tracking_kernel_stack_traces", 1),
        ("0_forward", "inductor_provenance_tracking_kernel_stack_traces", 1),
        ("0_forward", "inductor_provenance_tracking_node_mappings", 1),
    ]  # the backward node-mappings payload is only {"version": 2.0}: no rows
    k = _tables()["kernels"].filter(pl.col("source") == "trace")
    fw = k.filter(pl.col("name") == FW).row(0, named=True)
    assert fw["debug_handles"][0].startswith(f"{FW}:")
    assert sorted(fw["provenance_nodes"]) == ["erf", "mul"]
    assert [stack_frame(s)["user_line"] for s in fw["provenance_stack"]] == [ERF_LINE]
    bw = k.filter(pl.col("name") == BW).row(0, named=True)
    assert bw["debug_handles"][0].startswith(f"{BW}:")
    assert bw["provenance_nodes"] == []
    frames = [stack_frame(s) for s in bw["provenance_stack"]]
    assert sorted(f["user_line"] for f in frames) == [ERF_LINE, FC3_LINE]
    assert all(f["user_file"].endswith(PROGRAM) for f in frames)


def test_forward_erf_kernel_is_exact_through_provenance() -> None:
    for name_match in (True, False):  # the provenance link does not need the name match
        (c,) = origin(as_trace(_tables()), kernel=FW, name_match=name_match)
        assert (c.source, c.compile_id, c.graph, c.kernel_kind) == ("trace", "0/0", "0_forward", "cpp")
        assert (c.via, c.link, c.node_graph) == ("provenance", "direct", "post_grad")
        assert sorted(c.nodes) == ["erf", "mul"]
        assert (c.user_line, c.user_function, c.user_code) == (ERF_LINE, "forward", "h = torch.erf(h) * 0.5")
        assert c.user_file.endswith(PROGRAM)


def test_backward_erf_kernel_dataflow_agrees_with_provenance_stack() -> None:
    # torch 2.13 logs no node mapping for the backward graph; the wrapper's dataflow ties the
    # kernel to its post-grad nodes, and the lines it reaches are exactly those of the kernel's
    # provenance stack traces: the erf derivative (line 23) and the fc3 bias gradient it fuses
    # (sum_1 of tangents_1, line 24). The op-name match reached 21 and 22 too (sum_2/sum_3,
    # bias grads computed in other kernels).
    bw = _tables()["kernels"].filter((pl.col("name") == BW) & (pl.col("source") == "trace"))
    stack_lines = sorted(stack_frame(s)["user_line"] for s in bw["provenance_stack"][0])
    for t in (_tables(), _training_tables()):
        for name_match in (False, True):  # an exact tie never gives way to the name match
            chains = origin(as_trace(t), kernel=BW, name_match=name_match)
            assert {(c.via, c.confidence, c.link) for c in chains} == {("dataflow", "exact", "seq_nr")}
            assert [c.user_line for c in chains] == stack_lines == [ERF_LINE, FC3_LINE]
            assert all(c.user_file.endswith(PROGRAM) for c in chains)
            by_line = {c.user_line: c for c in chains}
            erf = by_line[ERF_LINE]
            assert sorted(erf.backward_nodes) == ["exp", "mul_1", "mul_2", "mul_3", "neg", "pow_1"]
            assert (erf.seq_nrs, sorted(erf.forward_nodes)) == ([23, 24], ["erf", "mul"])
            assert erf.user_code == "h = torch.erf(h) * 0.5"
            assert by_line[FC3_LINE].nodes == ["sum_1"]


def test_backward_erf_kernel_through_provenance_stack_without_dataflow() -> None:
    # Without the wrapper's launches (no kernel_calls table) the provenance stack traces
    # answer alone, with the same lines.
    t = {k: v for k, v in _tables().items() if k != "kernel_calls"}
    chains = origin(as_trace(t), kernel=BW)
    assert {(c.via, c.confidence, c.link) for c in chains} == {
        ("provenance_stack", "exact", "provenance_stack")}
    assert sorted(c.user_line for c in chains) == [ERF_LINE, FC3_LINE]
    assert all(c.nodes == [] and c.seq_nrs == [] and c.graph == "0_backward" for c in chains)
    assert {c.user_line: c.user_code for c in chains}[ERF_LINE] == "h = torch.erf(h) * 0.5"


def test_cli_forward_kernel_via_provenance(capsys: pytest.CaptureFixture[str]) -> None:
    _tables()  # skip when not generated
    assert main(["origin", str(PROV), "--kernel", FW, "--json", "--no-cache"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["matches"] == 1
    (c,) = out["chains"]
    assert (c["via"], c["link"], c["user_line"]) == ("provenance", "direct", ERF_LINE)
    assert c["location"].endswith(f"{PROGRAM}:{ERF_LINE}")
