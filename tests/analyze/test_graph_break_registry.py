"""Graph-break explanations and advice (issue 13 classes 5 and 7): torch's own registry
(`torch/_dynamo/graph_break_registry.json` of the installed torch, read without importing
torch) where the log lacks them, the log's hints otherwise; torch's internals are not user code
to avoid. Asserted on the diagnosis corpus from the trace and from the text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import traceview
from traceview.analyze import hotspots, registry
from traceview.analyze.hotspots import graph_break_hotspots

from ..conftest import FIXTURES

CORPUS = FIXTURES / "corpus"
SOURCES = ("trace", "torch_logs.txt")


def installed_registry() -> dict[str, Any]:
    import torch  # the dev environment has torch; traceview itself does not import it

    return json.loads((Path(torch.__file__).parent / "_dynamo" / "graph_break_registry.json").read_text())


def breaks(name: str, source: str) -> list[dict[str, Any]]:
    return graph_break_hotspots(traceview.load(CORPUS / name / source))


def test_registry_is_the_installed_torchs_file() -> None:
    raw = installed_registry()["GB0059"][0]
    e = registry.registry_entry("gb0059", "Failed to trace builtin operator")
    assert e is not None
    assert (e["gb_type"], e["explanation"]) == (raw["Gb_type"], raw["Explanation"])
    # fragments joined into sentences, as torch's log prints them
    assert (
        "If you are attempting to call a logging function (e.g. `print`), you can try adding it to "
        "`torch._dynamo.config.reorderable_logging_functions`."
    ) in e["hints"]
    assert registry.registry_entry("gb9999") is None and registry.registry_entry(None) is None


def test_a_break_without_explanation_or_hints_gets_the_registrys() -> None:
    raw = installed_registry()["GB0123"][0]
    r: dict[str, Any] = {"gb_id": "gb0123", "reason": raw["Gb_type"], "explanation": None, "hint": None, "filename": "train.py"}
    hotspots._explain_from_registry(r)
    assert (r["explanation"], r["explanation_from"]) == (raw["Explanation"], "registry")
    assert r["hint"] == "\n".join(raw["Hints"])


def test_without_torch_the_logs_hints_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_registry", lambda: {})
    [g] = breaks("graph_break_print", "trace")
    assert g["explanation_from"] == "log"
    assert "reorderable_logging_functions" in g["advice"]
    r: dict[str, Any] = {"gb_id": "gb0123", "reason": "x", "explanation": None, "hint": None, "filename": "t.py"}
    hotspots._explain_from_registry(r)
    assert (r["explanation"], r["explanation_from"], r["hint"]) == (None, None, None)


@pytest.mark.parametrize("source", SOURCES)
def test_print_break_advice_names_the_logging_setting(source: str) -> None:
    [g] = breaks("graph_break_print", source)
    assert (g["gb_id"], g["line"], g["explanation_from"]) == ("gb0059", 15, "log")
    assert g["explanation"].startswith("Dynamo does not know how to trace builtin operator `print`")
    assert g["advice"].startswith("Avoid calling builtin `print` with argument types ['str', 'Size'].")
    assert "torch._dynamo.config.reorderable_logging_functions" in g["advice"]
    assert "report an issue" not in g["advice"]


@pytest.mark.parametrize("source", SOURCES)
def test_torch_skipped_functions_are_not_user_code_to_avoid(source: str) -> None:
    by_id = {g["gb_id"]: g for g in breaks("graph_break_torch_internal", source)}
    zero_grad = by_id["gb0008"]
    assert zero_grad["line"] == 25
    assert zero_grad["advice"].startswith("torch marks `Optimizer.zero_grad` as not traceable (file matches MOD_SKIPLIST)")
    assert "Avoid calling" not in zero_grad["advice"]
    optim = by_id["gb0025"]
    assert optim["explanation"] is None  # not "User-inserted graph break": torch's own
    assert "torch's own code calls torch._dynamo.graph_break() here on purpose" in optim["advice"]


@pytest.mark.parametrize("source", SOURCES)
def test_lr_scheduler_breaks(source: str) -> None:
    gbs = breaks("optimizer_lr_scheduler", source)
    # Dynamo's internal TensorifyScalarRestartAnalysis restart is not a graph break
    assert not any("RestartAnalysis" in (g["reason"] or "") for g in gbs)
    [step] = [g for g in gbs if g["gb_id"] == "gb0007"]
    assert step["advice"].startswith("torch marks `Adam.step` as not traceable (file is force-skipped)")
