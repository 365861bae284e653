"""Issue 45: the verdicts that key on torch's message grammar, on the same programs run under
torch 2.11 (fixtures/torch211, the GPU machine's version) as under 2.13."""

from __future__ import annotations

import pytest

import traceview
from traceview.output.report import build_report

from .conftest import FIXTURES

T211 = FIXTURES / "torch211"
PAIRS = {
    "stance_fail_dtype": FIXTURES / "corpus" / "stance_fail_dtype",
    "export_dd_nonstrict": FIXTURES / "corpus" / "export_dd_nonstrict",
    "crash_worker_killed": FIXTURES / "crash_worker_killed",
}


def _report(path) -> dict:
    return build_report(traceview.load(str(path)))


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_verdict_is_the_same_under_torch_2_11(name: str) -> None:
    old, new = _report(T211 / name), _report(PAIRS[name])
    assert "2.11" in (T211 / name / "PROVENANCE.md").read_text()
    assert old["head"] == new["head"]
    first_old, first_new = old["findings"][0], new["findings"][0]
    assert (first_old["kind"], first_old["facet"]) == (first_new["kind"], first_new["facet"])


def test_each_verdict_under_torch_2_11() -> None:
    stance = _report(T211 / "stance_fail_dtype")
    assert stance["head"][0] == "findings: set_stance('fail_on_recompile') refused a recompile of scale"
    assert "the dtype of x changed: Float -> BFloat16" in stance["findings"][0]["claim"]
    export = _report(T211 / "export_dd_nonstrict")
    assert export["head"][0] == "findings: torch.export failed on control flow that needs a tensor's value (the program crashed)"
    worker = _report(T211 / "crash_worker_killed")
    assert worker["head"][0] == "findings: a compile worker process was killed (lost to the host, not the model)"


def test_an_empty_debug_graph_folder_is_a_cache_hit_not_an_unfinished_compile(tmp_path) -> None:
    # torch 2.11, 2 gloo ranks sharing one Inductor cache: rank 1's backward hit the entry rank 0
    # had just written, and Inductor wrote nothing into that graph's folder. git keeps no empty
    # folder: the run is copied and that folder made again where torch's `debug trace:` line on
    # stderr names it (fixtures/torch211/README.md)
    import json
    import re
    import shutil

    run = tmp_path / "debugdir_ranks"
    shutil.copytree(T211 / "debugdir_ranks", run)
    named = re.findall(r"debug trace: \S*/(torch_compile_debug/\S+)", (run / "stderr.txt").read_text())
    made = [run / n for n in named if not (run / n).exists()]
    assert [p.name for p in made] == ["model__0_backward_3.1"]
    for p in made:
        p.mkdir()
    oracle = json.loads((run / "oracle.json").read_text())
    hits = sum(p["counters"]["inductor"].get("fxgraph_cache_hit", 0) for p in oracle["processes"])
    r = _report(run)
    dirs = r["inputs"]["debug_dirs"]
    assert sum(len(d["empty"]) for d in dirs) == hits == 1
    assert not [d for d in dirs if d["unfinished"]]
    assert not [f for f in r["findings"] if f["kind"] == "unfinished"]
    assert "1 empty graph folder" in " ".join(r["head"]) and "likely cache hits" in " ".join(r["head"])
