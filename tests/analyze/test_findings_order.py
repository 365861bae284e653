"""The order and grouping of findings (traceview.analyze.findings), on real torch 2.13 runs:
what the engineer needs first comes first, and what is normal is not called a failure."""

from __future__ import annotations

import polars as pl

import traceview
from tests.conftest import FIXTURES
from traceview.analyze.findings import compile_outcome, slow_compiles
from traceview.output.report import build_report
from traceview.tui.finding_rows import findings_from_report


def _findings(name: str):
    trace = traceview.load(FIXTURES / name)
    report = build_report(trace)
    return report, findings_from_report(report)


def test_a_rank_that_compiled_alone_comes_first_with_the_others_stall() -> None:
    # 4 gloo ranks; rank 2 got a batch of 6 instead of 8 once (dynamic=False) and recompiled
    # alone: the others waited at their next collective. One finding: the stall it cost, the
    # divergence it is (rank 2's extra compile) and the recompile behind it
    report, fs = _findings("corpus/multirank4")
    assert [d["rank"] for d in report["rank_divergence"]] == [2]
    first = fs[0]
    assert first.kind == "stall" and first.rank == 2 and first.compile_id == "0/1"
    assert first.title.startswith("ranks 0,1,3 waited ~0.20s at their next collective while rank 2 recompiled [0/1]")
    assert [f.kind for f in fs] == ["stall", "graph_break", "compile_time"]
    # the summary's findings line names it too
    from traceview.output.summary import render_text

    assert "ranks 0,1,3 stalled ~0.20s while rank 2 compiled alone" in render_text(report)


def test_slow_compile_is_one_finding_per_compile_across_ranks() -> None:
    report, fs = _findings("corpus/multirank4")
    slow = [f for f in fs if f.kind == "compile_time"]
    # forward [0/0] took 2.90-4.46 s on the four ranks: one finding; report [1/0] (0.2 s) is
    # not slow
    assert len(slow) == 1
    assert slow[0].title.startswith("2.90-4.46s ranks 0-3 [0/0] TinyNet.forward (multirank4.py:30)")
    assert [r for r, _ in [(g["compile_id"], rs) for g, rs in slow_compiles(report)]] == ["0/0"]


def test_automatic_dynamic_single_recompile_is_not_a_storm() -> None:
    report, fs = _findings("corpus/automatic_dynamic_once")
    assert len(report["recompiles"]) == 1  # the analyzer lists it; the finding says what it is
    # what the summary calls it: an expected recompile, with why
    assert [f.kind for f in fs] == ["expected"] and fs[0].severity == "expected"
    assert fs[0].title.startswith("score (automatic_dynamic_once.py:12): 2 compiles")
    assert ("why", "expected: automatic dynamic shapes recompile once") in fs[0].detail
    assert report["recompiles"][0]["is_storm"] is False
    # ... while dynamic=False recompiling for every new float is a storm
    _, fs = _findings("corpus/float_changes_dynamic_false")
    assert fs[0].kind == "storm"


def test_compile_outcomes_say_what_the_status_means() -> None:
    def outcomes(name: str) -> dict[str, str]:
        c = traceview.load(FIXTURES / name).compiles
        return {r["compile_id"]: compile_outcome(r) for r in c.filter(pl.col("rank").is_null()).to_dicts()}

    # a graph break in a loop skips the frame: it runs eagerly, nothing crashed
    assert outcomes("corpus/graph_break_loop") == {"0/0": "eager", "1/0": "ok"}
    # a backend that raised, with suppress_errors: a real failure
    assert outcomes("corpus/suppress_errors") == {"0/0": "failed"}
    gb = outcomes("graph_breaks")
    assert gb["0/0"] == "restarted" and gb["1/0"] == "ok"
    # the recompile limit: the frame runs eagerly from then on
    assert outcomes("recompiles")["0/8"] == "eager"


def test_a_graph_break_that_skipped_its_frame_is_one_finding_with_its_fix() -> None:
    # a graph break inside a loop: Dynamo skips the frame (compile 0/0 "fails" with
    # Unsupported and runs eagerly). One finding, with the summary's why and fix; its
    # message not cut at "Graph break encountered:"
    report, fs = _findings("corpus/graph_break_loop")
    assert [f["category"] for f in report["failures"]] == ["graph_break"]
    assert [f.kind for f in fs] == ["graph_break"]
    detail = dict(fs[0].detail)
    assert ("", "WHOLE FRAME RAN EAGERLY: forward (graph_break_loop.py:28): graph break inside a loop") in fs[0].detail
    assert detail["fix"].startswith("Dynamo cannot resume inside a loop")
    assert detail["compile"] == "[0/0] fell back to eager (Unsupported)"
    assert detail["message"] == "Failed to handle graph break gracefully. Skipping the function and falling back to eager."
    # with the failed compiles: a graph break that only splits a graph comes after them
    _, fs = _findings("graph_breaks")
    assert fs[0].title.startswith("graph_breaks.py:48 in forward (its frame starts at line 45) [gb0025], 1x")
