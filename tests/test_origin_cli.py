"""`traceview origin`: kernel / node / seq_nr -> forward op -> user source line, text and JSON."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES, GPU, needs_shared
from traceview.cli import main

ERF_LINE = 23  # fixtures/programs/training.py: h = torch.erf(h) * 0.5 (see fixtures/training/PROVENANCE.md)


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["origin", *args, "--json", "--no-cache"]) == 0
    return json.loads(capsys.readouterr().out)


def test_forward_kernel_leads_to_the_erf_line(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, str(FIXTURES / "training"), "--kernel", "cpp_fused_erf_mul_1")
    # the trace logs the absolute path of the program where the fixture was made
    locs = {c["location"] for c in out["chains"]}
    assert len(locs) == 1 and locs.pop().endswith(f"fixtures/programs/training.py:{ERF_LINE}")
    assert all(c["user_code"] == "h = torch.erf(h) * 0.5" for c in out["chains"])


def test_backward_node_links_by_seq_nr(capsys: pytest.CaptureFixture[str]) -> None:
    # the annotation text log gives seq_nr: `exp` of the backward graph (erf' = 2/sqrt(pi)
    # * exp(-x^2)) carries the forward erf's seq_nr, so it leads to the erf line
    out = _json(capsys, str(FIXTURES / "training"), "--node", "exp")
    chains = [c for c in out["chains"] if c["link"] == "seq_nr"]
    assert chains
    assert {c["user_line"] for c in chains} == {ERF_LINE}
    assert {tuple(c["forward_nodes"]) for c in chains} == {("erf",)}


def test_without_annotation_the_link_is_the_source_line(capsys: pytest.CaptureFixture[str]) -> None:
    # the trace alone has no seq_nr: the backward node is joined by its `# File:` line
    out = _json(capsys, str(FIXTURES / "training" / "trace"), "--node", "erf")
    assert out["chains"]
    assert {c["user_line"] for c in out["chains"]} == {ERF_LINE}
    assert "seq_nr" not in {c["link"] for c in out["chains"]}


@needs_shared
def test_ambiguous_kernel_name_shows_every_compile(capsys: pytest.CaptureFixture[str]) -> None:
    # the same Triton kernel name is generated for Block.forward's compiles 1/0 and 1/1
    assert main(["origin", str(GPU / "train_dynamic"), "--kernel", "triton_per_fused_native_layer_norm_0", "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "chains" in text.splitlines()[0]
    assert "[1/0]" in text and "[1/1]" in text
    assert "gpt.py" in text


def test_no_match_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["origin", str(FIXTURES / "training"), "--kernel", "no_such_kernel", "--no-cache"]) == 1
    assert capsys.readouterr().out.strip() == (
        "no match: no kernel, node or seq_nr of that name in this trace")


def test_compile_id_in_any_form_a_view_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    """`--compile-id "[0/0]"` (as the summary prints it) matched nothing before issue 38."""
    base = _json(capsys, str(FIXTURES / "training"), "--kernel", "cpp_fused_erf_mul_1")
    assert base["matches"] >= 1
    for form in ("0/0", "[0/0]", "0/0_1", "[0/0 #1]"):
        assert _json(capsys, str(FIXTURES / "training"), "--kernel", "cpp_fused_erf_mul_1", "--compile-id", form) == base
    assert main(["origin", str(FIXTURES / "training"), "--kernel", "cpp_fused_erf_mul_1", "--compile-id", "[1/0]"]) == 1
    capsys.readouterr()
    assert main(["origin", str(FIXTURES / "training"), "--kernel", "cpp_fused_erf_mul_1", "--compile-id", "zero"]) == 2
    assert "'zero' is not a compile id (expected e.g. 1/0, [1/0]" in capsys.readouterr().err
