"""Compiles outside a Dynamo frame at run time (issue 39 item 3), on the real corpus run
fixtures/corpus/piecewise_backend (torch 2.13 CPU, fixtures/corpus/programs/piecewise_backend.py).

A vLLM-style backend splits Dynamo's graph at attention and compiles each other piece with
Inductor on its first call per batch size (batches 2, 4, 2, 8: 3 sizes x 2 pieces, submod_0
with `torch._inductor.compile`, submod_2 with `standalone_compile`), then the program calls
`torch._inductor.compile` once directly. torch writes those 7 compiles' records with no compile
id, each ending in a `compilation_metrics_runtime` (compile id null). Checked against torch's
own accounting in oracle.json (its CompilationMetrics and counters).
"""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest

import traceview
from traceview.output.report import build_report
from traceview.output.summary import render_text

from .conftest import FIXTURES

RUN = FIXTURES / "corpus" / "piecewise_backend"
PROGRAM = FIXTURES / "corpus" / "programs" / "piecewise_backend.py"


def _line_of(text: str) -> int:
    return next(i for i, ln in enumerate(PROGRAM.read_text().split("\n"), 1) if text in ln)


@pytest.fixture(scope="module")
def trace() -> traceview.Trace:
    return traceview.load(RUN / "trace", jobs=1)


@pytest.fixture(scope="module")
def oracle() -> dict:
    (p,) = json.loads((RUN / "oracle.json").read_text())["processes"]
    return p


@pytest.fixture(scope="module")
def runtime_metrics() -> list[tuple[int, dict]]:
    """(1-based line, metadata) of the trace's null-id compilation_metrics_runtime records."""
    (path,) = sorted((RUN / "trace").glob("*.log*"))
    with gzip.open(path, "rt") as fh:
        lines = fh.read().split("\n")
    out = []
    for i, ln in enumerate(lines, 1):
        if '] {"compilation_metrics_runtime": ' in ln:
            m = json.loads(ln.split("] ", 1)[1])["compilation_metrics_runtime"]
            assert m["compile_id"] is None
            out.append((i, m))
    return out


def test_seven_compiles_without_a_dynamo_frame_as_torch_counted(trace, oracle, runtime_metrics) -> None:
    """One Dynamo compile and 7 Inductor compiles at run time, as torch's CompilationMetrics
    (7 with is_runtime) and counters (aot_autograd total 7) say; each named unknown_<line of its
    run-time metrics>, timed end_time_us - start_time_us like torch's own record."""
    torch_runtime = [m for e in oracle["epochs"] for m in e["compilation_metrics"] if m["is_runtime"]]
    assert len(torch_runtime) == 7 == oracle["counters"]["aot_autograd"]["total"] == len(runtime_metrics)
    c = trace.compiles.sort("lineno")
    assert c["compile_kind"].to_list() == ["dynamo"] + ["inductor"] * 7
    assert c["status"].to_list() == ["ok"] * 8
    fl = c.filter(pl.col("compile_kind") == "inductor")
    assert fl["compile_id"].to_list() == [f"unknown_{i}" for i, _ in runtime_metrics]
    assert fl["at_run_time"].to_list() == [True] * 7
    want = [round((m["end_time_us"] - m["start_time_us"]) / 1e6, 6) for m in torch_runtime]
    assert [round(x, 6) for x in fl["total_time_s"].to_list()] == want
    # Inductor's part from its spans: torch's own figure to the microsecond
    assert fl["inductor_compile_time_s"].to_list() == pytest.approx([m["inductor_compile_time_s"] for m in torch_runtime], abs=2e-6)


def test_grouped_under_the_dynamo_compile_whose_backend_made_them(trace) -> None:
    """The records' Python stack: 6 compiles called from [0/0] Block.forward's compiled code
    (pieces submod_0, submod_2 in call order), at the backend's lines; the direct one at its
    own line, under no Dynamo compile."""
    fl = trace.compiles.filter(pl.col("compile_kind") == "inductor").sort("lineno")
    assert fl["parent_compile_id"].to_list() == ["0/0"] * 6 + [None]
    assert fl["graph_piece"].to_list() == ["submod_0", "submod_2"] * 3 + [None]
    compile_line, standalone_line = _line_of("fn = torch._inductor.compile(gm"), _line_of("standalone_compile(gm")
    assert fl["call_line"].to_list() == [compile_line, standalone_line] * 3 + [_line_of("direct = torch._inductor.compile(gm")]
    assert all(f.endswith("piecewise_backend.py") for f in fl["call_filename"].to_list())


def test_their_spans_graphs_kernels_and_cache_results(trace, oracle) -> None:
    """Every span, graph and kernel has a compile id; each run-time compile's spans cover its
    seconds (inside torch's timed window, covering 90% of it); its graphs (pre-grad .. post-grad, output code) and kernels (one C++
    kernel and one addmm each) are its own; its cache results sum to torch's counters."""
    assert trace.spans.filter(pl.col("compile_id").is_null()).height == 0
    fl = trace.compiles.filter(pl.col("compile_kind") == "inductor").sort("lineno")
    # the one span before torch's timed window: standalone_compile's first call computes the
    # cache key of torch's own files (once per process), before its run-time metrics start
    key = trace.spans.filter(pl.col("name") == "inductor_codecache_torch_key")
    assert key["compile_id"].to_list() == [fl["compile_id"][1]] and 0.3 < key["duration_s"][0] < 0.5
    ext = (
        trace.spans.filter(pl.col("compile_id").is_in(fl["compile_id"].implode()) & (pl.col("name") != "inductor_codecache_torch_key"))
        .group_by("compile_id")
        .agg(pl.col("start_us").min().alias("a"), (pl.col("start_us") + pl.col("duration_s").fill_null(0) * 1e6).max().alias("b"))
    )
    window = {r["compile_id"]: (r["start"].timestamp() * 1e6, r["total_time_s"]) for r in fl.iter_rows(named=True)}
    for cid, a, b in ext.iter_rows():
        start, secs = window[cid]
        # inside torch's timed window (20 ms: its pre-grad passes start just before it) and covering nearly all of it
        assert a >= start - 2e4 and b <= start + secs * 1e6 + 2e4, (cid, a - start, b - start, secs)
        assert (b - a) / 1e6 > 0.9 * secs, (cid, (b - a) / 1e6, secs)
    assert ext.height == 7
    ids = fl["compile_id"].to_list()
    graphs = trace.graphs.group_by("compile_id").len()
    assert dict(graphs.iter_rows()) == {"0/0": 1, **{cid: 7 for cid in ids}}
    k = trace.kernels.group_by("compile_id").agg(pl.col("kind").sort())
    assert {cid: kinds for cid, kinds in k.iter_rows()} == {cid: ["cpp", "extern"] for cid in ids}
    inductor = oracle["counters"]["inductor"]
    assert int(fl["fx_cache_misses"].sum()) == inductor["fxgraph_cache_miss"] == 3
    assert int(fl["fx_cache_bypasses"].sum()) == inductor["fxgraph_cache_bypass"] == 4
    aot = oracle["counters"]["aot_autograd"]
    assert int(fl["aot_cache_misses"].sum()) == aot["autograd_cache_miss"] == 3
    assert int(fl["aot_cache_bypasses"].sum()) == aot["autograd_cache_bypass"] == 4


def test_compile_time_includes_them_and_says_so(trace, oracle) -> None:
    """COMPILE TIME counts the run-time compiles (torch's sum) and says how much of it they are,
    under which Dynamo compile."""
    ms = [m for e in oracle["epochs"] for m in e["compilation_metrics"]]
    frameless = sum((m["end_time_us"] - m["start_time_us"]) / 1e6 for m in ms if m["is_runtime"])
    report = build_report(trace)
    groups = report["compile_time"]["frameless"]
    assert [(g["parent_compile_id"], g["count"], g["pieces"]) for g in groups] == [
        ("0/0", 6, {"submod_0": 3, "submod_2": 3}),
        (None, 1, {}),
    ]
    assert sum(g["seconds"] for g in groups) == pytest.approx(frameless, abs=2e-3)  # each group rounded to ms
    (dynamo,) = [m for m in ms if not m["is_runtime"]]
    assert report["compile_time"]["total_s"] == pytest.approx(frameless + (dynamo["end_time_us"] - dynamo["start_time_us"]) / 1e6, abs=2e-3)
    text = " ".join(render_text(report, width=100).split())
    assert f"COMPILE TIME {report['compile_time']['total_s']:.2f}s in all, {sum(g['seconds'] for g in groups):.2f}s of it in 7 compiles without a Dynamo frame" in text
    assert f"{groups[0]['seconds']:.2f}s in 6 compiles at run time made by the backend of [0/0] forward (piecewise_backend.py:71) (submod_0 x3, submod_2 x3)" in text
    assert f"in 1 compile at run time called at piecewise_backend.py:{_line_of('direct = torch._inductor.compile(gm')}" in text
    assert "Inductor compile without a Dynamo frame at run time (submod_0 of [0/0]'s graph)" in text
