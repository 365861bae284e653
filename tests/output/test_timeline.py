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
    compiles = [e for e in events if e["ph"] == "X" and e["cat"] == "compile" and e["args"]["piece"] == "forward"]
    got = sorted((names[e["pid"]], e["args"]["compile_id"], e["args"]["function"]) for e in compiles)
    want = sorted((f"rank {r}", c, f) for r, c, f in trace.compiles.select("rank", "compile_id", "function").rows())
    assert got == want
    # and on the same track, each lazily compiled backward where it ran (issue 44.2)
    backward = [e for e in events if e.get("cat") == "compile" and (e.get("args") or {}).get("piece") == "backward"]
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
    phases = [e for e in events if e["ph"] in ("X", "i") and e["cat"] not in ("compile", "end")]
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
    from traceview.output.timeline import piece_rows

    trace = traceview.load(FIXTURES / "training")
    rows = piece_rows(trace)
    totals = {(r["compile_id"], r["occurrence"]): r["total_time_s"] for r in trace.compiles.iter_rows(named=True)}
    bwd = rows.filter(rows["piece"] == "backward")
    assert bwd.height >= 1
    for r in rows.iter_rows(named=True):
        assert r["compile_seconds"] == pytest.approx(totals[(r["compile_id"], r["occurrence"])], abs=1e-9)
    for r in bwd.iter_rows(named=True):
        fwd = rows.filter((rows["piece"] == "forward") & (rows["compile_id"] == r["compile_id"])).row(0, named=True)
        # the two bars are the parts of one compile's figure
        assert abs(fwd["dur_us"] / 1e6 + r["dur_us"] / 1e6 - r["compile_seconds"]) < 0.05


def test_an_open_piece_runs_to_the_capture_end_with_its_status_and_phase() -> None:
    """fixtures/stop_hang_behind_rank: rank 1's [4/1] hung in code_gen until timeout's SIGTERM.
    Its piece is a complete event from its dynamo_start to the capture's last timestamp (the
    launcher's "Sending process 29353 closing signal SIGTERM", 12:15:57.005), its args saying
    interrupted and where; each rank's state at that end is an instant on its process."""
    import datetime

    from traceview.output.timeline import timeline_events

    events = check_trace_events({"traceEvents": timeline_events(traceview.load(FIXTURES / "stop_hang_behind_rank"))})
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    [hung] = [e for e in events if e["ph"] == "X" and e["cat"] == "compile" and e["args"]["status"] != "finished"]
    assert names[hung["pid"]] == "rank 1" and hung["name"] == "compile 4/1 forward (interrupted when the job ended)"
    args = hung["args"]
    assert (args["compile_id"], args["unfinished"], args["phase"], args["seconds"]) == (
        "4/1", "interrupted when the job ended", "inductor code_gen", 58.389)
    assert args["to"] == "the capture's last timestamp (the text log: Sending process 29353 closing signal SIGTERM)"

    def clock(us: int) -> str:
        return datetime.datetime.fromtimestamp(us / 1e6, datetime.timezone.utc).strftime("%H:%M:%S.%f")

    assert (clock(hung["ts"]), clock(hung["ts"] + hung["dur"])) == ("12:14:58.616000", "12:15:57.005000")
    ends = {names[e["pid"]]: e for e in events if e.get("cat") == "end"}
    assert {k: (e["ph"], clock(e["ts"]), e["name"]) for k, e in ends.items()} == {
        "rank 0": ("i", "12:15:57.005000", "capture ends: waiting for rank 1 (likely)"),
        "rank 1": ("i", "12:15:57.005000", "capture ends: compiling [4/1] (in inductor code_gen)"),
    }
    assert ends["rank 0"]["args"]["behind"] == [1] and ends["rank 0"]["args"]["state"] == "waiting"


def test_every_backward_piece_is_an_event_as_torch_timed_it() -> None:
    """fixtures/corpus/ddp_rank_recompile: DDPOptimizer compiles [4/0]'s backward in 4 pieces
    (one per bucket) on each of 4 ranks; each is an event at its bwd_compilation_metrics'
    start_time_us, ending at its end_time_us, as torch wrote them."""
    import gzip

    from traceview.output.timeline import timeline_events

    run = FIXTURES / "corpus" / "ddp_rank_recompile"
    events = check_trace_events({"traceEvents": timeline_events(traceview.load(run))})
    got = sorted((e["args"]["rank"], e["args"]["index"], e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
                 if e["ph"] == "X" and e["cat"] == "compile" and e["args"]["piece"] == "backward")
    want = []
    for f in sorted((run / "trace").glob("*.gz")):
        with gzip.open(f, "rt") as fh:
            recs = [json.loads(line[line.index("] {") + 2 :]) for line in fh if '] {"bwd_compilation_metrics": ' in line]
        for i, r in enumerate(recs):
            m = r["bwd_compilation_metrics"]
            want.append((r["rank"], i, m["start_time_us"], m["end_time_us"], "compile 4/0 forward backward " f"{i + 1} of 4"))
    assert len(want) == 16 and got == sorted(want)
