"""Compile stances (issue 45, class 6) on real torch 2.13 runs (fixtures/corpus/stance_*):
torch.compiler.set_stance("fail_on_recompile") refuses the recompile a call needs; the
RuntimeError is only in the text log (the trace ends before it). The verdict comes first,
with the failed guard parsed as a recompile's, the recompiles allowed before the stance, and
the fix; counts against torch's own (oracle.json)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import traceview
from parsers.messages import parse_stance_refusal
from traceview.output.report import build_report

from ..conftest import FIXTURES

CORPUS = FIXTURES / "corpus"
# situation -> (the guard the newest entry failed, its parse, the cause's words, the fix's words)
REFUSED = {
    "stance_fail_dtype": (
        "tensor 'x' dtype mismatch. expected Float, actual BFloat16", ("dtype", "x", None, "Float", "BFloat16"),
        "the dtype of x changed: Float -> BFloat16", "warm up every dtype before set_stance('fail_on_recompile')",
    ),
    "stance_fail_int": (
        "k == 2", ("value", "k", None, "2", None),
        "k is no longer 2, the value every compile was made for", "warm up every value of k before set_stance",
    ),
    "stance_fail_shape": (
        "tensor 'x' size mismatch at index 1. expected 8, actual 3", ("size", "x", 1, "8", "3"),
        "dimension 1 of x changed: 8 -> 3", "torch._dynamo.mark_dynamic(x, 1) before the first call",
    ),
}


def _oracle(name: str) -> dict[str, Any]:
    [proc] = json.loads((CORPUS / name / "oracle.json").read_text())["processes"]
    return proc


def _report(name: str, both: bool) -> dict[str, Any]:
    d = CORPUS / name
    t = traceview.load(d / "trace", logs=[d / "torch_logs.txt"]) if both else traceview.load(d / "torch_logs.txt")
    return build_report(t)


@pytest.mark.parametrize("both", [True, False], ids=["trace+text", "text"])
@pytest.mark.parametrize("name", list(REFUSED))
def test_fail_on_recompile_verdict_first(name: str, both: bool) -> None:
    guard, parsed, cause, fix = REFUSED[name]
    oracle = _oracle(name)
    assert oracle["uncaught"]["type"] == "RuntimeError"
    rep = _report(name, both)
    first = rep["findings"][0]
    assert (first["kind"], first["severity"], first["facet"]) == ("crash", "act", "stance_refused")
    assert first["claim"].startswith("torch.compiler.set_stance('fail_on_recompile') refused a recompile of scale (")
    assert cause in first["claim"]
    lines = {x["label"]: x["text"] for x in first["lines"]}
    assert lines["cause:"].startswith(f"{guard} (against [0/1], the newest cache entry)")
    assert lines["cause:"].endswith("1 older entry failed too")
    # the recompile torch allowed before the stance (oracle: its one guard-failure line) is listed as allowed
    [allowed] = oracle["epochs"][0]["guard_failures"][0]["reasons"]
    assert allowed == "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 6"
    assert lines["allowed:"] == "1 recompile before the stance, not the problem: [0/1] dimension 0 of x varies (seen: 4, 6)"
    assert fix in lines["fix:"] and "set_stance('eager_on_recompile')" in lines["fix:"]
    # the recompile before the stance is the program's warm-up: expected, never a finding to act on
    assert rep["head"][0] == "findings: set_stance('fail_on_recompile') refused a recompile of scale"
    [warm] = [f for f in rep["findings"] if f["kind"] != "crash"]
    assert (warm["kind"], warm["severity"], warm["code"].split(" ")[0]) == ("expected", "expected", "scale")
    assert not both or all(x["label"] != "allowed:" for x in warm["lines"])  # the trace says it is automatic dynamic
    assert both or warm["lines"][0]["label"] == "allowed:"
    [crash] = rep["crashes"]
    st = crash["stance"]
    assert (st["stance"], st["function"], st["line"]) == ("fail_on_recompile", "scale", oracle["per_code"][0]["line"])
    r = st["refused"]
    assert (r["guard"], (r["kind"], r["guard_source"], r["dim"], r["expected"], r["actual"])) == (guard, parsed)
    assert [f["failed_against"] for f in st["failures"]] == ["0/1", "0/0"]
    assert crash["code"] == next(ln.strip() for ln in (CORPUS / "programs" / f"{name}.py").read_text().splitlines()
                                 if ln.strip().startswith("out = "))
    # torch's count: the refused call made no compile: scale 2 compiles, 1 recompile
    per = oracle["per_code"][0]
    assert (per["compiles"], per["recompiles"]) == (2, 1)
    assert [a["compile_id"] for a in st["allowed"]] == ["0/1"]


def test_the_trace_alone_has_no_refusal() -> None:
    """The trace ends before the RuntimeError: without the text log there is nothing to say
    about the stance, and traceview says nothing of it (no crash, no guess)."""
    rep = build_report(traceview.load(CORPUS / "stance_fail_dtype" / "trace"))
    assert rep["crashes"] == []
    assert all(f["facet"] != "stance_refused" for f in rep["findings"])


def test_eager_on_recompile_leaves_no_mark() -> None:
    """eager_on_recompile runs the calls that need a new graph eagerly: torch logs nothing of
    them, so the run reads as its two compiles (torch's count) and one expected recompile."""
    name = "stance_eager_on_recompile"
    assert (CORPUS / name / "stdout.txt").read_text().splitlines()[:2] == ["torch.bfloat16", "torch.bfloat16"]
    rep = _report(name, True)
    per = _oracle(name)["per_code"][0]
    assert (per["compiles"], per["recompiles"]) == (2, 1)
    assert rep["compiles"] == 2 and rep["crashes"] == []
    assert [(f["kind"], f["severity"]) for f in rep["findings"]] == [("expected", "expected")]


def test_first_compile_refused_message() -> None:
    """The message torch writes when the code object has no cache entry yet (no guard-failure
    block): the stance refused its first compile. Read from torch's own message as the oracle
    of stance_fail_dtype recorded it, with its guard block cut (eval_frame.fail_callback adds
    that block only when there are cache entries)."""
    msg = _oracle("stance_fail_dtype")["uncaught"]["message"].split("\n")[0]
    st = parse_stance_refusal(msg)
    assert st is not None and st["failures"] == [] and st["function"] == "scale"
    assert parse_stance_refusal("Detected recompile of something else") is None


def test_older_message_without_location() -> None:
    """torch before the location was added wrote only the first sentence: still a refusal by
    the stance; the function comes from the failed entries' compile ids (none here)."""
    msg = _oracle("stance_fail_dtype")["uncaught"]["message"]
    first, _, guards = msg.partition("\n")
    st = parse_stance_refusal(first.split(". filename:")[0] + "\n" + guards)
    assert st is not None and st["function"] is None and st["line"] is None
    assert [(f["failed_against"], f["kind"]) for f in st["failures"]] == [("0/1", "dtype"), ("0/0", "dtype")]


@pytest.mark.parametrize("both", [True, False], ids=["trace+text", "text"])
def test_refused_on_one_rank(both: bool) -> None:
    """2 gloo ranks (mp.spawn): rank 1's refusal is re-raised by mp.spawn in the parent; the
    verdict is rank 1's, its cause the newest entry's failed guard (w's dtype, as torch lists
    it), its allowed recompile rank 1's own; torch's counts per rank."""
    name = "stance_fail_rank"
    procs = json.loads((CORPUS / name / "oracle.json").read_text())["processes"]
    by_rank = {p["rank"]: p for p in procs}
    assert by_rank[None]["uncaught"]["type"] == "ProcessRaisedException"
    for r in (0, 1):
        assert [(c["function"], c["compiles"], c["recompiles"]) for c in by_rank[r]["per_code"]] == [("step", 2, 1)]
    rep = _report(name, both)
    first = rep["findings"][0]
    assert (first["kind"], first["facet"], first["ranks"]) == ("crash", "stance_refused", [1])
    assert first["claim"].startswith("rank 1 torch.compiler.set_stance('fail_on_recompile') refused a recompile of step (")
    assert "the dtype of w changed: Float -> BFloat16" in first["claim"]
    lines = {x["label"]: x["text"] for x in first["lines"]}
    assert lines["cause:"].startswith("tensor 'w' dtype mismatch. expected Float, actual BFloat16 (against [0/1]")
    assert lines["allowed:"] == "1 recompile before the stance, not the problem: [0/1] dimension 0 of x varies (seen: 8, 6)"
    assert rep["head"][0].startswith("findings: set_stance('fail_on_recompile') refused a recompile of step")
