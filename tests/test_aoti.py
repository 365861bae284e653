"""torch.export + AOTInductor: a compile without a Dynamo frame (issue 30 item 4), on the real
corpus run fixtures/corpus/aoti_export (torch 2.13 CPU, fixtures/corpus/programs/aoti_export.py).

The trace has no `dynamo_start`; its one `compilation_metrics` has compile_id null and times
the compile by start_time_us / end_time_us (the `compile_fx_aot` span). traceview names the
compile as tlparse names its directory, `unknown_<line of that compilation_metrics>`.
"""

from __future__ import annotations

import gzip
import json
import re

import polars as pl
import pytest

import traceview
from traceview.output.report import build_report
from traceview.output.summary import render_text

from .conftest import FIXTURES

RUN = FIXTURES / "corpus" / "aoti_export"


def _trace_lines() -> list[str]:
    (path,) = sorted((RUN / "trace").glob("*.log*"))
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return fh.read().split("\n")


@pytest.fixture(scope="module")
def metrics() -> tuple[int, dict]:
    """(1-based line, metadata) of the trace's compilation_metrics envelope."""
    hits = [(i, ln) for i, ln in enumerate(_trace_lines(), 1) if '] {"compilation_metrics": ' in ln]
    assert len(hits) == 1
    i, ln = hits[0]
    return i, json.loads(ln.split("] ", 1)[1])["compilation_metrics"]


@pytest.fixture(scope="module")
def trace():
    return traceview.load(RUN / "trace", cache=False)


def test_the_frameless_compile_is_one_row_named_like_tlparse(trace, metrics) -> None:
    line, m = metrics
    assert m["compile_id"] is None and m["co_name"] is None
    c = trace.compiles
    assert c.height == 1
    row = c.row(0, named=True)
    assert row["compile_id"] == f"unknown_{line}"
    assert row["compile_kind"] == "aot_inductor"
    assert row["frame_id"] is None and row["function"] is None
    assert row["status"] == "ok"
    assert row["metrics_lineno"] == line
    # its time is the metrics' own span, end_time_us - start_time_us
    assert row["compile_time_s"] == pytest.approx((m["end_time_us"] - m["start_time_us"]) / 1e6, abs=1e-6)
    assert row["dynamo_time_s"] is None


def test_its_spans_graphs_and_kernels_carry_its_id(trace, metrics) -> None:
    cid = f"unknown_{metrics[0]}"
    spans = trace.spans
    top = spans.filter(pl.col("name") == "compile_fx_aot")
    assert top["compile_id"].to_list() == [cid]
    assert spans.filter(pl.col("compile_id").is_null()).height == 0
    row = trace.compiles.row(0, named=True)
    inductor = spans.filter(pl.col("name") == "inductor_compile")["duration_s"].sum()
    assert row["inductor_compile_time_s"] == pytest.approx(inductor)
    assert row["inductor_compile_time_s"] <= row["compile_time_s"]
    graphs = trace.graphs
    assert set(graphs["compile_id"]) == {cid}
    assert "aot_inference" in graphs["kind"].to_list()
    k = trace.kernels
    assert set(k["compile_id"]) == {cid}
    cpp = k.filter(pl.col("kind") == "cpp")["name"].to_list()
    assert cpp == ["cpp_fused_relu_0", "cpp_fused_relu_1", "cpp_fused__softmax_2"]
    assert all(code.startswith('extern "C"') for code in k.filter(pl.col("kind") == "cpp")["code"])
    ext = k.filter(pl.col("kind") == "extern")
    assert ext["name"].to_list() == ["aoti_torch_cpu_addmm_out"] * 3
    assert ext["source_nodes"].to_list() == [["linear"], ["relu", "linear_1"], ["relu_1", "linear_2"]]
    # one launch per call in run_impl, in order
    assert trace.kernel_calls["name"].to_list() == [
        "aoti_torch_cpu_addmm_out", "cpp_fused_relu_0", "aoti_torch_cpu_addmm_out",
        "cpp_fused_relu_1", "aoti_torch_cpu_addmm_out", "cpp_fused__softmax_2",
    ]


def test_summary_counts_it_and_names_what_it_was(trace, metrics) -> None:
    cid = f"unknown_{metrics[0]}"
    report = build_report(trace)
    text = " ".join(render_text(report, width=200).split())  # wrapping aside
    assert report["compiles"] == 1
    secs = trace.compiles["total_time_s"][0]
    assert f"COMPILE TIME {secs:.2f}s in all" in text
    assert re.search(rf"{secs:.2f}s \[{cid}\] AOTInductor compile", text)
    assert "findings: none" in text
    # FACTS: the export's dynamic batch dim and the specialized feature dim
    assert f"[{cid}] x.size()[1] specialized to 16" in text
    assert "the exported program accepts only this size" in text
    assert f"[{cid}] export: x.size()[0] is dynamic (s77, range [2, 1024], traced with 8)" in text
    (fl,) = report["frameless_compiles"]
    assert fl["compile_id"] == cid and fl["compile_kind"] == "aot_inductor" and fl["what"] == "AOTInductor compile"
    assert fl["seconds"] == round(secs, 3)
    assert report["compile_time"]["top"][0]["compile_kind"] == "aot_inductor"
    assert report["compile_time"]["by_function"] == []
    (dim,) = report["facts"]["export_dims"][:1]
    assert dim["range"] == "[2, 1024]" and dim["specialized_to"] is None


def test_json_report_matches_schema(trace) -> None:
    from tests.output.test_report_schema import _as_printed, _errors

    report = _as_printed(trace)
    assert _errors(report) == []
    assert report["frameless_compiles"][0]["what"] == "AOTInductor compile"


def test_tui_frames_view_lists_it(monkeypatch: pytest.MonkeyPatch, metrics) -> None:
    pytest.importorskip("textual")
    from tests.tui.test_tui import SIZE, open_args, press, ready, screen_text, static_text, sync
    from traceview.tui.app import build_app
    from traceview.tui.frames_view import FramesView

    monkeypatch.setenv("TRACEVIEW_THEME", "textual-dark")
    cid = f"unknown_{metrics[0]}"

    @sync
    async def run() -> None:
        app = build_app(open_args(RUN / "trace"))
        async with app.run_test(size=SIZE) as pilot:
            main = await ready(pilot)
            await press(pilot, "2")
            assert main.view.view_id == "frames"
            text = screen_text(app)
            assert "AOTInductor compile" in text and cid in text
            await press(pilot, "g")
            await press(pilot, *cid, "enter")
            frames = main.query_one(FramesView)
            assert frames.compile_ref() == (None, cid)
            detail = static_text(frames.query_one("#compile-detail"))
            assert f"[{cid}] AOTInductor compile" in detail
            assert "no Dynamo frame" in detail

    run()
