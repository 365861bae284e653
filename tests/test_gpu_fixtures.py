"""The GPU fixtures (fixtures/gpu/, real torch 2.11 + CUDA runs made by
fixtures/make_gpu_fixtures.py) load without problems. Light on purpose: the analyzers'
findings on them are asserted by the tests of the features that read them."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

import traceview
from parsers.discover import discover
from tests.conftest import FIXTURES

GPU_FIXTURES = FIXTURES / "gpu"
SCENARIOS = sorted(p for p in GPU_FIXTURES.iterdir() if (p / "PROVENANCE.md").is_file())
# runs whose stderr holds no TORCH_LOGS record (only Python warnings)
QUIET_STDERR = {"export_aoti_gpu"}
# a run whose TORCH_LOGS wrote nothing but that crashed: its stderr is the uncaught traceback,
# read as a text log (torch's frames in it) with no glog record of its own
TRACEBACK_ONLY = {"inject_relu_bug_triton"}


@functools.cache
def driver() -> ModuleType:
    """fixtures/make_gpu_fixtures.py, which defines the scenarios."""
    spec = importlib.util.spec_from_file_location("make_gpu_fixtures", FIXTURES / "make_gpu_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_scenario_of_the_driver_is_committed() -> None:
    assert {p.name for p in SCENARIOS} == set(driver().SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_gpu_fixture_loads(scenario: Path) -> None:
    inputs = discover(scenario)
    # the trace files and the one text log are found; PROVENANCE.md and stdout.txt are not logs.
    # A run whose TORCH_LOGS wrote nothing (export_aoti_gpu: torch.export + AOTInductor log no
    # recompiles, graph breaks or perf hints) has a stderr of Python warnings only: not a log.
    assert len(inputs.traces) == len(list((scenario / "trace").glob("*.log.gz"))) >= 1
    quiet = scenario.name in QUIET_STDERR
    assert [Path(p).name for p in inputs.text_logs] == ([] if quiet else ["torch_logs.txt"])
    assert sorted(Path(p).name for p, _ in inputs.stray) == sorted(
        ["PROVENANCE.md", "stdout.txt", *(["torch_logs.txt"] if quiet else [])])

    t = traceview.load(scenario, jobs=1)
    assert t.events.height > 0
    assert (t.log_records.height == 0) if quiet or scenario.name in TRACEBACK_ONLY else (t.log_records.height > 0)
    if scenario.name in TRACEBACK_ONLY:
        assert any("SyntaxError: invalid syntax" in x for x in t.other_lines["text"].to_list())
    assert t.problems.height == 0, t.problems.head(5)
    assert t.compiles.height > 0
    t.spans  # noqa: B018  (derived tables build without an exception)
    sc = driver().SCENARIOS[scenario.name]
    multi = sc.group == "multi" or sc.nproc > 1
    assert t.ranks == ([0, 1] if multi else [])
