"""Facts the logs carry (issue 13 class 6), on the diagnosis corpus from the trace alone and
from the text log alone: specializations, PGO code state, compiled-autograd graphs,
higher-order ops, cache bypass reasons, cache hits from text logs."""

from __future__ import annotations

from typing import Any

import pytest

import traceview
from traceview.analyze.compile_facts import compile_facts
from traceview.cli import main
from traceview.report import build_report

from .conftest import FIXTURES

CORPUS = FIXTURES / "corpus"
SOURCES = ("trace", "torch_logs.txt")


def facts(name: str, source: str) -> dict[str, list[dict[str, Any]]]:
    return compile_facts(traceview.load(CORPUS / name / source))


def summary(name: str, source: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["summary", str(CORPUS / name / source), "--no-cache", "--width", "200"]) == 0
    return capsys.readouterr().out


def evidence_line(f: dict[str, Any]) -> str:
    with open(f["file"], "rb") as fh:
        data = fh.read()
    if f["file"].endswith(".gz"):
        import gzip

        data = gzip.decompress(data)
    return data.decode("utf-8", "replace").splitlines()[f["lineno"] - 1]


@pytest.mark.parametrize("source", SOURCES)
def test_specializations(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    got = facts("symbolic_shape_specialization", source)
    rows = sorted((s["symbol"], s["source"], s["value"], s["reason"], s["user_line"], s["user_code"]) for s in got["specializations"])
    assert rows == [
        ("s27", "x.size()[1]", "3", "range_refined_to_singleton", 21, "return x + self.table"),
        ("s77", "x.size()[0]", "4", "range_refined_to_singleton", 21, "return x + self.table"),
    ]
    for s in got["specializations"]:
        assert s["symbol"] in evidence_line(s) and s["compile_id"] == "0/0"
    out = summary("symbolic_shape_specialization", source, capsys)
    assert "[0/0] x.size()[0] specialized to 4 at " in out and "symbolic_shape_specialization.py:21 (return x + self.table)" in out


@pytest.mark.parametrize("source", SOURCES)
def test_pgo_warm_start(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    got = facts("pgo_warm_start", source)["pgo"]
    assert got[0]["action"] == "get" and got[0]["where"] == "local" and got[0]["compile_id"] == "0/0"
    if source == "trace":
        assert got == [got[0]] and got[0]["detail"] == "L['x']: tensor size=[?, 8] stride=[S(1), 1]"
        assert "get_local_code_state" in evidence_line(got[0])
    else:
        assert [(p["action"], p["detail"]) for p in got[1:]] == [("put", "no change, skipping")]
        assert "hit local" in evidence_line(got[0])
    assert "PGO profile read (local code state)" in summary("pgo_warm_start", source, capsys)


@pytest.mark.parametrize("source", SOURCES)
def test_compiled_autograd_graphs_are_named(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    got = facts("compiled_autograd", source)["compiled_autograd_graphs"]
    assert [g["id"] for g in got] == ["!0", "!1"]
    if source == "trace":
        assert [g["compiles"] for g in got] == [["!0/1/0"], ["!1/3/0"]]
        by_fn = build_report(traceview.load(CORPUS / "compiled_autograd" / source))["compile_time"]["by_function"]
        assert all(b["function"] is not None for b in by_fn)
    out = summary("compiled_autograd", source, capsys)
    assert "2 compiled-autograd graphs (backward captured by compiled autograd): !0" in out
    assert "? (?)" not in out


@pytest.mark.parametrize(
    ("name", "op", "count"),
    [("hop_cond", "cond", 1), ("hop_checkpoint", "tag_activation_checkpoint", 1), ("hop_invoke_subgraph", "invoke_subgraph", 2)],
)
@pytest.mark.parametrize("source", SOURCES)
def test_higher_order_ops(name: str, op: str, count: int, source: str) -> None:
    got = facts(name, source)["higher_order_ops"]
    assert [(h["op"], h["count"], h["compile_id"]) for h in got] == [(op, count, "0/0")]


@pytest.mark.parametrize("source", SOURCES)
def test_cache_bypass_reasons(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    got = facts("cache_bypass", source)["cache_events"]
    assert sorted((c["cache"], c["event"], c["reason"]) for c in got) == [
        ("aot_autograd", "bypass", "Unsupported post grad custom pass"),
        ("fx_graph", "bypass", "Unsupported post grad custom pass"),
    ]
    out = summary("cache_bypass", source, capsys)
    assert "FX graph cache bypassed: Unsupported post grad custom pass" in out


def test_cache_hits_from_the_text_log_alone(capsys: pytest.CaptureFixture[str]) -> None:
    got = facts("cache_warm_hits", "torch_logs.txt")["cache_events"]
    assert sorted((c["cache"], c["event"]) for c in got) == [("aot_autograd", "hit"), ("fx_graph", "hit")]
    assert "fx graph cache hit for key" in evidence_line(next(c for c in got if c["cache"] == "fx_graph"))
    out = summary("cache_warm_hits", "torch_logs.txt", capsys)
    assert "FX graph cache (text log): 1 hits / 0 misses (hit in 0/0)" in out
    assert "AOTAutograd cache (text log): 1 hits / 0 misses (hit in 0/0)" in out
    assert "text log only: no compile times or status" in out


def _oracle_counters(run: str) -> dict[str, Any]:
    import json

    [proc] = json.loads((CORPUS / "cache_warm_hits" / run / "oracle.json").read_text())["processes"]
    return proc["counters"]


@pytest.mark.parametrize("run", ["", "first_run"])
def test_text_log_cache_counts_match_the_trace_and_torch(run: str) -> None:
    """The text log alone (`[0/0] fx graph cache hit for key …`) counts the same lookups, on
    the same compile, as the trace's fx_graph_cache_*/aotautograd_cache_* artifacts and
    torch's own counters; given both, each lookup is counted once (the trace's)."""
    from traceview.analyze import compile_time as ct

    d = CORPUS / "cache_warm_hits" / run
    text = ct.cache_summary(traceview.load(str(d / "torch_logs.txt")))
    trace = ct.cache_summary(traceview.load(str(d / "trace")))
    both = ct.cache_summary(traceview.load(str(d / "trace"), logs=[str(d / "torch_logs.txt")]))
    keys = ("fx_graph_hits", "fx_graph_misses", "fx_graph_bypasses", "aot_autograd_hits", "aot_autograd_misses", "aot_autograd_bypasses")
    assert [text[k] for k in keys] == [trace[k] for k in keys] == [both[k] for k in keys]
    assert (text["from_text_log"], trace["from_text_log"], both["from_text_log"]) == (2, 0, 0)
    c = _oracle_counters(run)  # torch's own counters (torch._dynamo.utils.counters)
    assert (text["fx_graph_hits"], text["fx_graph_misses"]) == (
        c["inductor"].get("fxgraph_cache_hit", 0), c["inductor"].get("fxgraph_cache_miss", 0))
    assert (text["aot_autograd_hits"], text["aot_autograd_misses"]) == (
        c["aot_autograd"].get("autograd_cache_hit", 0), c["aot_autograd"].get("autograd_cache_miss", 0))
    assert (text["fx_graph_hits"], text["fx_graph_misses"]) == ((1, 0) if run == "" else (0, 1))
    event = "hit" if run == "" else "miss"
    assert sorted(text["text_log_by_compile"], key=str) == sorted([
        {"rank": None, "compile_id": "0/0", "cache": "fx_graph", "event": event, "count": 1},
        {"rank": None, "compile_id": "0/0", "cache": "aot_autograd", "event": event, "count": 1},
    ], key=str)


def test_text_log_cache_lookups_in_the_ui() -> None:
    from traceview.tui.model import TraceModel

    m = TraceModel.build(traceview.load(str(CORPUS / "cache_warm_hits" / "torch_logs.txt")))
    [row] = m.text_log_compiles()
    assert (row["compile_id"], row["fx_cache_hits"], row["aot_cache_hits"], row.get("fx_cache_misses")) == ("0/0", 1, 1, None)


def test_no_facts_where_there_are_none() -> None:
    assert facts("bool_flag", "trace") == {k: [] for k in facts("bool_flag", "trace")}
