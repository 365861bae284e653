"""Jobs stopped from outside (issue 39.1) and compiles without a dynamo_start still running
when they were stopped (issue 39.2), on real torchrun runs (fixtures/stop_*, made by
fixtures/make_fixtures.py from fixtures/programs/stops_torchrun.py, which patches Inductor's
GraphLowering.codegen to hang or to SIGKILL the process there; see their PROVENANCE.md).
Each finding is checked against the launcher's own lines in torch_logs.txt."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import polars as pl

import traceview
from parsers.stops import is_stop_exception, stops_from_text
from parsers.tracebacks import uncaught_from_text
from traceview.analyze.stops import KILLED, stop_findings
from traceview.analyze.unfinished import unfinished_compiles
from traceview.output.report import build_report
from traceview.output.summary import render_text

from ..conftest import FIXTURES

KILL = FIXTURES / "stop_killed_in_codegen"
BACKWARD = FIXTURES / "stop_backward_compiling"
IDLE = FIXTURES / "stop_idle_torchrun"


def _logs(d: Path) -> str:
    return (d / "torch_logs.txt").read_text()


def _trace_pids(d: Path) -> dict[int, int]:
    """rank -> pid, from each rank's trace file name and glog prefix (torch's own lines)."""
    out = {}
    for f in (d / "trace").glob("*.log.gz"):
        rank = int(re.search(r"_rank_(\d+)_", f.name).group(1))
        with gzip.open(f, "rt") as fh:
            out[rank] = int(fh.readline().split()[2])
    return out


def test_a_rank_sigkilled_in_codegen_is_a_stop_with_its_compile_not_a_crash() -> None:
    trace = traceview.load(KILL)
    report = build_report(trace)
    pids = _trace_pids(KILL)
    logs = _logs(KILL)
    # the launcher's own lines: rank 1 died of SIGKILL, rank 0 got torchrun's SIGTERM
    assert f"exitcode  : -9 (pid: {pids[1]})  (SIGKILL)" in logs
    assert f"Sending process {pids[0]} closing signal SIGTERM" in logs
    assert report["crashes"] == []  # torchrun's ChildFailedError is not the program's error
    [st] = report["stops"]
    assert (st["kind"], st["signal"], st["target"], st["by"]) == ("rank_killed", "SIGKILL", f"rank 1 (pid {pids[1]})", KILLED)
    assert st["at"] == "2026-11-26T23:34:08.557000" and st["at_from"]["lineno"] == 6  # torchrun's `failed (exitcode: -9)` record
    states = {r["rank"]: r for r in st["ranks"]}
    assert {k: states[1][k] for k in ("state", "compile_id", "part", "phase", "ended_by", "running_s")} == {
        "state": "compiling", "compile_id": "0/0", "part": None, "phase": "inductor code_gen",
        "ended_by": "killed by SIGKILL", "running_s": 10.81,
    }
    assert (states[0]["state"], states[0]["phase"], states[0]["ended_by"]) == ("compiling", "inductor code_gen", "SIGTERM from torchrun")
    assert st["message"] == (
        f"rank 1 (pid {pids[1]}) was killed by SIGKILL at 23:34:08.557 ({KILLED}); torchrun then stopped rank 0 (SIGTERM); "
        "at the stop rank 0 was inside [0/0] in inductor code_gen for 10.7s, rank 1 was inside [0/0] in inductor code_gen for 10.8s"
    )
    assert "writes no traceback" in st["next_step"] and "traceback of" not in st["next_step"]
    # one story: the unfinished compiles say who stopped them
    unf = {u["rank"]: u for u in report["unfinished_compiles"]}
    assert unf[1]["stopped_by"]["ended_by"] == "killed by SIGKILL" and unf[0]["stopped_by"]["ended_by"] == "SIGTERM from torchrun"
    text = render_text(report, width=200)
    assert "findings: rank 1 killed by SIGKILL, 2 unfinished compiles" in text
    assert "CRASHED" not in text and "fix it at the user line" not in text
    assert f"    rank 1 (pid {pids[1]}): inside [0/0] in inductor code_gen for 10.81s (UNFINISHED COMPILES); ended: killed by SIGKILL" in text
    assert "    next: stopped from outside while compiling (killed by SIGKILL): see STOPPED" in text


def test_a_backward_still_compiling_has_no_dynamo_start_and_is_found_by_its_open_spans() -> None:
    trace = traceview.load(BACKWARD)
    # torch's accounting: one dynamo_start and the forward's compilation_metrics per rank; no
    # bwd_compilation_metrics (the backward never ended)
    c = trace.compiles
    assert c.select("rank", "compile_id", "status").sort("rank").rows() == [(0, "0/0", "ok"), (1, "0/0", "ok")]
    assert trace.events.filter(pl.col("kind") == "bwd_compilation_metrics").height == 0
    [u0, u1] = sorted(unfinished_compiles(trace), key=lambda u: u["rank"])
    for u in (u0, u1):
        assert (u["compile_id"], u["part"], u["phase"], u["innermost_span"]) == ("0/0", "backward", "inductor code_gen", "code_gen")
        assert u["open_spans"][:2] == ["entire_backward_compile", "compile_fx.<locals>.bw_compiler"]
        assert u["code"]["qualname"] == "MLP.forward"
        # the running time runs to the launcher's line written when the job was stopped
        assert u["last_line_from"] == {
            "file": str(BACKWARD / "torch_logs.txt"), "lineno": 6, "what": f"the text log: Sending process {_trace_pids(BACKWARD)[0]} closing signal SIGTERM"
        }
    assert (u0["running_s"], u1["running_s"]) == (38.426, 38.626)
    report = build_report(trace)
    assert report["crashes"] == []
    [st] = report["stops"]
    assert (st["kind"], st["signal"], st["at"]) == ("launcher_signal", "SIGTERM", "2026-11-26T23:36:41.993000")
    assert [(r["rank"], r["state"], r["part"], r["ended_by"]) for r in st["ranks"]] == [
        (0, "compiling", "backward", "SIGTERM from torchrun"), (1, "compiling", "backward", "SIGTERM from torchrun")
    ]
    text = render_text(report, width=300)
    assert "findings: the job was stopped from outside (SIGTERM), 2 unfinished compiles" in text
    assert re.search(
        r"rank 1 \[0/0\] backward of MLP\.forward \(stops_torchrun\.py:\d+\) in inductor code_gen for 38\.63s up to the capture's last "
        r"timestamp \(torch_logs\.txt:6, the text log: Sending process \d+ closing signal SIGTERM\)", text
    )
    assert "The job was stopped while rank 1 compiled ([0/0] backward, inductor code_gen, 38.6s)" in text


def test_a_job_stopped_after_its_compiles_hung_outside_compilation() -> None:
    trace = traceview.load(IDLE)
    logs = _logs(IDLE)
    assert "Received 15 death signal, shutting down workers" in logs
    report = build_report(trace)
    assert report["crashes"] == [] and report["unfinished_compiles"] == []
    [st] = report["stops"]
    assert (st["kind"], st["signal"], st["certainty"]) == ("launcher_signal", "SIGTERM", "likely")
    assert [(r["rank"], r["state"], r["ended_by"]) for r in st["ranks"]] == [
        (0, "idle", "SIGTERM from torchrun"), (1, "idle", "SIGTERM from torchrun")
    ]
    done = min(r["compiles_done_s"] for r in st["ranks"])
    assert done > 1 and f"every compile had finished {done:.1f}s before the stop: the job hung (or ran) outside compilation" in st["message"]
    assert "py-spy dump --pid" in st["next_step"] and "TORCH_DISTRIBUTED_DEBUG=DETAIL" in st["next_step"]
    text = render_text(report, width=200)
    assert "findings: the job was stopped from outside (SIGTERM)" in text
    assert "torch.compile is not involved" not in text and "CRASHED" not in text


def test_the_launcher_lines_are_read_with_their_pids_and_times() -> None:
    trace = traceview.load(BACKWARD)
    s = stops_from_text(trace.log_records, trace.other_lines)
    pids = _trace_pids(BACKWARD)
    # both closing signals share one record (same prefix, same millisecond): both are read
    assert s.select("kind", "signal", "pid").rows() == [
        ("death_signal", "SIGTERM", s["pid"][0]),
        ("closing_signal", "SIGTERM", pids[0]),
        ("closing_signal", "SIGTERM", pids[1]),
        ("signal_exception", "SIGTERM", s["pid"][0]),
    ]
    uncaught = uncaught_from_text(trace.other_lines, trace.log_records)
    [row] = uncaught.rows(named=True)
    assert is_stop_exception(row["exc_type"], row["message"])


def test_what_is_a_stop_and_what_is_the_programs_own_error() -> None:
    killed = "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 1)  (SIGKILL)\n"
    aborted = killed.replace("-9", "-6").replace("SIGKILL", "SIGABRT")
    assert is_stop_exception("torch.distributed.elastic.multiprocessing.errors.ChildFailedError", killed)
    assert not is_stop_exception("torch.distributed.elastic.multiprocessing.errors.ChildFailedError", aborted)
    assert is_stop_exception("torch.multiprocessing.spawn.ProcessExitedException", "process 1 terminated with signal SIGKILL")
    assert not is_stop_exception("torch.multiprocessing.spawn.ProcessExitedException", "process 1 terminated with signal SIGABRT")
    assert is_stop_exception("KeyboardInterrupt", "")
    assert not is_stop_exception("RuntimeError", "got signal: 15")


def test_slurms_cancel_line_is_read_with_its_time_and_reason() -> None:
    # SLURM's own format (slurmstepd); no SLURM here to make a real run with
    other = pl.DataFrame(
        {"file": ["x.txt"], "lineno": [3], "rank": [None],
         "text": ["slurmstepd: error: *** STEP 4242.0 ON node7 CANCELLED AT 2025-05-01T12:00:03 DUE TO TIME LIMIT ***"]},
        schema={"file": pl.String, "lineno": pl.Int64, "rank": pl.Int32, "text": pl.String},
    )
    empty = traceview.load(IDLE).log_records.clear()
    [row] = stops_from_text(empty, other).rows(named=True)
    assert (row["kind"], row["reason"], row["ts"].isoformat()) == ("slurm_cancel", "TIME LIMIT", "2025-05-01T12:00:03")


def test_a_keyboard_interrupt_inside_a_compile_is_read_from_its_traceback() -> None:
    d = FIXTURES / "stop_interrupted_compile"
    trace = traceview.load(d)
    # torch's accounting: the interrupted compile logged its metrics (no fail_type) and ended
    # its spans, so it is not unfinished; only the traceback says where it stopped
    assert trace.compiles.select("compile_id", "fail_type").rows() == [("0/0", None)]
    assert unfinished_compiles(trace) == []
    uncaught = uncaught_from_text(trace.other_lines, trace.log_records)
    [st] = stop_findings(trace, uncaught=uncaught)
    assert (st["kind"], st["signal"], st["target"]) == ("interrupt", "SIGINT", "the program")
    [r] = st["ranks"]
    assert (r["state"], r["compile_id"], r["phase"], r["running_s"]) == ("compiling", "0/0", "inductor code_gen", 42.656)
    assert r["interrupted_in"].endswith("stops_interrupt.py:18 in _planted_codegen")
    report = build_report(trace)
    assert report["crashes"] == []
    text = render_text(report, width=200)
    assert "findings: interrupted (KeyboardInterrupt)" in text and "CRASHED" not in text
