"""Issue 45 class 1: torch.export that fails on control flow that needs a tensor's value, on
real torch 2.13 runs (fixtures/corpus/export_dd_*): strict (Dynamo: Unsupported "Data-dependent
branching", UserError "Could not guard on data-dependent expression"), non-strict (make_fx:
GuardOnDataDependentSymNode; the trace holds only create_unbacked_symbol and
make_fx_fail_partial), each read from the trace and the text log together, alone, and from the
trace alone. The verdict is the first finding, at the user's line (read from the logs; the
planted line is found in the program only to check it), never "fullgraph" or "a Dynamo bug";
draft_export, AOTInductor's export and a constraint violation are not this failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..conftest import FIXTURES

CORPUS = FIXTURES / "corpus"
VERDICT = "torch.export could not capture control flow on a tensor's value"


def _report(path: Path) -> dict:
    import traceview
    from traceview.output.report import build_report

    return build_report(traceview.load(str(path)))


def _line_of(name: str, text: str) -> int:
    """The line of the program that starts with `text` (exactly one)."""
    lines = (CORPUS / "programs" / f"{name}.py").read_text().splitlines()
    (n,) = [i for i, s in enumerate(lines, 1) if s.strip().startswith(text)]
    return n


# situation -> (the failing line's text, the exception torch raised, the export call's text)
CASES = {
    "export_dd_strict": ("if h.sum() > 0:", "torch._dynamo.exc.Unsupported", "ep = torch.export.export("),
    "export_dd_nonstrict": ("if h.sum() > 0:", "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode", "ep = torch.export.export("),
    "export_dd_item": ("if scale > 1.0:", "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode", "ep = torch.export.export("),
    "export_dd_nonzero": ("if idx.shape[0] > 0:", "torch._dynamo.exc.UserError", "ep = torch.export.export("),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("part", ["", "torch_logs.txt"])
def test_the_verdict_is_first_at_the_users_line(name: str, part: str) -> None:
    code, exc, call = CASES[name]
    rep = _report(CORPUS / name / part if part else CORPUS / name)
    first = rep["findings"][0]
    line = _line_of(name, code)
    assert first["kind"] == "crash" and first["facet"] == "export_data_dependent"
    assert first["claim"] == f"{VERDICT} in forward ({name}.py:{line}) ({exc})"
    # one finding for the one error: no failed compile, no graph break beside the crash
    assert [f["kind"] for f in rep["findings"]] == ["crash"]
    assert rep["head"][0] == "findings: torch.export failed on control flow that needs a tensor's value (the program crashed)"
    (crash,) = rep["crashes"]
    assert crash["called_from"]["line"] == _line_of(name, call)
    step = crash["next_step"]
    assert "torch.cond" in step and "torch.where" in step and "draft_export" in step
    assert "fullgraph" not in step and "minif" not in step and "report it" not in step


@pytest.mark.parametrize("name", ["export_dd_strict", "export_dd_nonzero"])
def test_strict_export_from_the_trace_alone(name: str) -> None:
    code, exc, _ = CASES[name]
    rep = _report(CORPUS / name / "trace")
    (f,) = rep["findings"]
    assert f["kind"] == "failure" and f["facet"] == "export_data_dependent" and f["certainty"] == "certain"
    assert f["claim"] == f"{VERDICT} in forward ({name}.py:{_line_of(name, code)}) [0/0] ({exc.rsplit('.', 1)[-1]})"
    assert "fullgraph" not in f["next_step"]
    assert rep["head"][0] == "findings: torch.export failed on control flow that needs a tensor's value"
    # torch counted no graph break (its counters have none): the gb0170 record is the export's failure
    counters = json.loads((CORPUS / name / "oracle.json").read_text())["processes"][0]["counters"]
    assert "graph_break" not in counters
    assert not [g for g in rep["findings"] if g["kind"] == "graph_break"]


@pytest.mark.parametrize(
    ("name", "code", "symbol"),
    [
        ("export_dd_nonstrict", "if h.sum() > 0:", "u0"),  # the bool of a tensor: u0 is made at the `if`
        ("export_dd_item", "scale = h.abs().max().item()", "zuf0"),  # the .item() line, the `if` follows it
    ],
)
def test_non_strict_export_from_the_trace_alone_is_likely(name: str, code: str, symbol: str) -> None:
    rep = _report(CORPUS / name / "trace")
    # the trace has no compilation_metrics and no exception: 0 compiles, and still the failure
    assert rep["compiles"] == 0
    (f,) = rep["findings"]
    line = _line_of(name, code)
    assert f["kind"] == "failure" and f["facet"] == "export_data_dependent"
    assert f["claim"] == f"{VERDICT} in forward ({name}.py:{line})"
    assert f["certainty"] == "likely"
    (row,) = rep["failures"]
    assert row["source"] == "trace_partial" and row["compile_id"] is None
    assert f"data-dependent value {symbol} " in row["reason"] and f"{name}.py:{line}" in row["reason"]
    assert rep["head"][0] == "findings: torch.export failed on control flow that needs a tensor's value"


def test_exports_that_did_not_fail_this_way_are_not_called_so() -> None:
    # draft_export succeeds (1 issue reported): no failure, no crash
    draft = _report(CORPUS / "export_dd_draft")
    assert draft["crashes"] == [] and draft["failures"] == []
    assert draft["head"][0] == "findings: none (no recompiles, graph breaks or failures)"
    # what it assumed is a fact (its propagate_real_tensors_provenance record), at the user's line
    (d,) = draft["facts"]["draft_export_issues"]
    line = (CORPUS / "programs" / "export_dd_draft.py").read_text().splitlines().index("        if h.sum() > 0:") + 1
    assert (d["expr"], d["result"], d["user_line"], d["user_code"]) == ("Eq(u0, 1)", "True", line, "if h.sum() > 0:")
    assert "note: draft_export decided 1 data-dependent expression from the example input (FACTS)" in draft["head"]
    # torch.export + AOTInductor that works: not failed
    aoti = _report(CORPUS / "aoti_export")
    assert aoti["failures"] == [] and aoti["crashes"] == []
    # a constraint violation stays one (its own words, not the data-dependent verdict)
    cv = _report(CORPUS / "export_strict_failure")
    assert [c["category"] for c in cv["crashes"]] == ["constraint_violation"]
    assert all(VERDICT not in f["claim"] for f in cv["findings"])


def test_torch_compile_data_dependent_break_is_not_an_export() -> None:
    # a data-dependent branch under torch.compile is a graph break, not export's failure
    for name in ("moe_nonzero_unbacked", "fullgraph_break"):
        rep = _report(CORPUS / name)
        assert all(f.get("facet") != "export_data_dependent" for f in rep["findings"]), name


def test_unbacked_symbol_of_a_non_strict_export_has_its_users_line() -> None:
    (u,) = _report(CORPUS / "export_dd_nonstrict" / "trace")["facts"]["unbacked_symbols"]
    assert (u["created_by"], u["user_line"], u["user_code"]) == ("export", _line_of("export_dd_nonstrict", "if h.sum() > 0:"), "if h.sum() > 0:")
