"""`traceview timeline`: the compiles of every rank as Chrome Trace Events, checked against the
format's rules (not by eye)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

import traceview
from tests.conftest import FIXTURES
from traceview.cli import main

MULTIRANK = FIXTURES / "multirank"
PHASES = {"X", "B", "E", "i", "I", "M"}


def check_trace_events(doc: dict) -> list[dict]:
    """The Trace Event Format's rules (JSON object form): required fields per phase, X events
    with a non-negative duration, B/E pairs and X events nesting properly per thread,
    every process that has events named by a process_name metadata event."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    events = doc["traceEvents"]
    named: set[int] = set()
    spans: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    open_b: dict[tuple[int, int], list[tuple[str, int]]] = defaultdict(list)
    for e in events:
        assert e["ph"] in PHASES, e
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name", "thread_sort_index")
            if e["name"] == "process_name":
                assert isinstance(e["args"]["name"], str)
                named.add(e["pid"])
            continue
        assert isinstance(e["ts"], int | float) and e["ts"] >= 0
        if "args" in e:
            assert isinstance(e["args"], dict)
        key = (e["pid"], e["tid"])
        if e["ph"] == "X":
            assert isinstance(e["dur"], int | float) and e["dur"] >= 0
            spans[key].append((e["ts"], e["ts"] + e["dur"]))
        elif e["ph"] == "B":
            open_b[key].append((e["name"], e["ts"]))
        elif e["ph"] == "E":
            assert open_b[key], f"E without B on {key}"
            _, ts = open_b[key].pop()
            spans[key].append((ts, e["ts"]))
    assert not any(open_b.values()), "B without E"
    for key, ivs in spans.items():
        stack: list[int] = []
        for start, end in sorted(ivs, key=lambda iv: (iv[0], -iv[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], f"events overlap without nesting on {key}"
            stack.append(end)
    used = {e["pid"] for e in events if e["ph"] != "M"}
    assert used <= named, f"processes without a name: {used - named}"
    return events


def test_one_process_per_rank_with_compile_ids_and_functions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t" / "compile_trace.json"
    assert main(["timeline", str(MULTIRANK / "trace"), "-o", str(out), "--no-cache"]) == 0
    events = check_trace_events(json.loads(out.read_bytes()))
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(names.values()) == ["rank 0", "rank 1"]
    trace = traceview.load(MULTIRANK / "trace")
    compiles = [e for e in events if e["ph"] == "X" and e["cat"] == "compile" and e["name"].startswith("compile ")]
    got = sorted((names[e["pid"]], e["args"]["compile_id"], e["args"]["function"]) for e in compiles)
    want = sorted((f"rank {r}", c, f) for r, c, f in trace.compiles.select("rank", "compile_id", "function").rows())
    assert got == want
    # and on the same track, each lazily compiled backward where it ran (issue 44.2)
    backward = [e for e in events if e.get("cat") == "compile" and e["name"].startswith("backward ")]
    lazy = trace.spans.filter(pl.col("name") == "entire_backward_compile")
    assert sorted((names[e["pid"]], e["args"]["compile_id"]) for e in backward) == sorted(
        (f"rank {r}", c) for r, c in lazy.select("rank", "compile_id").rows()
    ) and backward
    # the recompile only rank 1 did is on rank 1's process, as long as its metrics say
    (extra,) = [e for e in compiles if e["args"]["compile_id"] == "0/1"]
    assert names[extra["pid"]] == "rank 1"
    row = trace.compiles.filter(compile_id="0/1")
    assert extra["dur"] == round(row["compile_time_s"][0] * 1e6)
    # every chromium phase of the trace is an event, with its compile's function
    phases = [e for e in events if e["ph"] in ("X", "i") and e["cat"] != "compile"]
    assert len(phases) == trace.spans.height > 0
    assert {e["args"]["function"] for e in phases if e["args"]["compile_id"] == "0/1"} == {"forward"}
    assert [p.name for p in out.parent.iterdir()] == ["compile_trace.json"]  # no temporary left
    assert "wrote" in capsys.readouterr().err


def test_timeline_of_exports_on_two_hosts(tmp_path: Path) -> None:
    from traceview.output.export import write_export
    from traceview.output.timeline import timeline_events

    whole = timeline_events(traceview.load(MULTIRANK / "trace"))
    for i, log in enumerate(sorted((MULTIRANK / "trace").glob("*.log"))):
        d = tmp_path / f"logs-{i}"
        d.mkdir()
        (d / log.name).write_bytes(log.read_bytes())
        write_export(traceview.load(d), tmp_path / "run" / f"host-{i}")
    merged = timeline_events(traceview.load(tmp_path / "run"))
    check_trace_events({"traceEvents": merged})

    def key(e: dict) -> tuple:
        return (e["ph"], e["name"], e["pid"], e["tid"], e.get("ts"), e.get("dur"))

    assert sorted(map(key, merged)) == sorted(map(key, whole))


def test_an_output_that_is_a_directory_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "d").mkdir()
    assert main(["timeline", str(MULTIRANK / "trace"), "-o", str(tmp_path / "d")]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["d"] and not any((tmp_path / "d").iterdir())


def test_bars_carry_the_compiles_own_figure() -> None:
    """Issue 30.7: a forward bar is the forward part (compilation_metrics), the backward bar the
    lazily compiled backward; both rows carry the compile's own total (forward + backward), the
    figure Findings and Frames show, so the timeline's detail can say which part a bar is."""
    from traceview.output.timeline import compile_rows

    trace = traceview.load(FIXTURES / "training")
    rows = compile_rows(trace)
    totals = {(r["compile_id"], r["occurrence"]): r["total_time_s"] for r in trace.compiles.iter_rows(named=True)}
    bwd = rows.filter(rows["part"] == "backward")
    assert bwd.height >= 1
    for r in rows.iter_rows(named=True):
        assert r["total_time_s"] == totals[(r["compile_id"], r["occurrence"])]
    for r in bwd.iter_rows(named=True):
        fwd = rows.filter((rows["part"] == "forward") & (rows["compile_id"] == r["compile_id"])).row(0, named=True)
        # the two bars are the parts of one compile's figure
        assert abs(fwd["dur_us"] / 1e6 + r["dur_us"] / 1e6 - r["total_time_s"]) < 0.05
