"""Issue 45, classes 7 and 8, on real runs: a collective timeout caused by one rank's compile
(NCCL's watchdog with the flight recorder's dumps on 2 H200s, gloo's on CPU), and a job whose
time limit ran out in its first compile (max-autotune, 2 ranks over NCCL)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import traceview
from parsers.flight_recorder import collectives, read_dump
from parsers.timeouts import timeouts_from_text
from traceview.output.report import build_report

FIX = Path(__file__).resolve().parents[2] / "fixtures"
NCCL = FIX / "gpu" / "timeout_behind_compile_nccl"
NCCL_SLEEP = FIX / "gpu" / "timeout_behind_compile_nccl_sleep"
GLOO = FIX / "timeout_behind_compile_gloo_4ranks"
FIRST = FIX / "gpu" / "timeout_first_compile_nccl"


@pytest.fixture(scope="module")
def nccl_report():
    return build_report(traceview.load(str(NCCL)))


def test_watchdog_line_and_dump_signals_read_from_the_text():
    t = traceview.load(str(NCCL))
    rows = timeouts_from_text(t.log_records, t.other_lines, year=2026).to_dicts()
    watch = [r for r in rows if r["kind"] == "watchdog"]
    # the watchdog's text appears twice on rank 0 (the E line, then the exception it dies of): one row
    assert [(r["rank"], r["seq"], r["op"], r["numel_in"], r["timeout_ms"], r["ran_ms"]) for r in watch] == [
        (0, 13, "ALLREDUCE", 16777216, 30000, 30091)]
    dumps = sorted((r["rank"], r["last_enqueued"], r["last_completed"], r["from_rank"]) for r in rows if r["kind"] == "dump_signal")
    assert dumps == [(0, 15, 12, 0), (1, 12, 12, 0)]


def test_flight_recorder_dumps_read_as_plain_data():
    r0 = collectives(str(NCCL / "fr" / "nccl_trace_rank_0"))
    r1 = collectives(str(NCCL / "fr" / "nccl_trace_rank_1"))
    assert r0["rank"] == 0 and r1["rank"] == 1
    assert r0["status"]["0"]["last_enqueued_collective"] == 15 and r0["status"]["0"]["last_completed_collective"] == 12
    assert r1["status"]["0"]["last_enqueued_collective"] == 12
    assert [(e["seq"], e["op"], e["state"]) for e in r0["entries"] if e["state"] != "completed"] == [
        (13, "all_reduce", "scheduled"), (14, "all_reduce", "scheduled"), (15, "all_reduce", "scheduled")]


def test_a_pickle_that_names_a_class_is_refused(tmp_path):
    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(pickle.dumps({"entries": [], "pg_config": {}, "x": Path("/")}))
    assert read_dump(str(p)) is None
    p.write_bytes(pickle.dumps({"entries": [], "pg_config": {}, "version": "2.10"}))
    assert read_dump(str(p)) == {"entries": [], "pg_config": {}, "version": "2.10"}
    p.write_bytes(pickle.dumps({"entries": [], "version": "2.10"}))  # no process groups: not a dump
    assert read_dump(str(p)) is None


def test_dumps_are_inputs_not_stray_files():
    inp = traceview.load(str(NCCL)).inputs
    assert sorted(Path(p).name for p in inp.flight_recorder) == ["nccl_trace_rank_0", "nccl_trace_rank_1"]
    assert not [p for p, _ in inp.stray if "nccl_trace_rank" in p]


def test_nccl_timeout_names_the_other_ranks_recompile_first(nccl_report):
    first = nccl_report["findings"][0]
    assert first["kind"] == "timeout"
    assert first["claim"].startswith(
        "rank 0's all-reduce (NCCL collective 13) timed out after 30.00s because rank 1 was compiling [4/1] MLP.forward")
    # its autotuning: the two forward GEMMs that finished benchmarking, from the trace's autotuning records
    assert first["claim"].endswith("a recompile: dimension 0 of x varies (seen: 64, 4096), 85.68s of it max-autotune "
                                   "benchmarking 2 GEMMs")
    assert nccl_report["head"][0].startswith("findings: rank 0's all-reduce timed out behind rank 1's compile [4/1]")
    t = nccl_report["timeouts"][0]
    c = t["culprit"]
    assert (c["rank"], c["compile_id"], c["status"]) == (1, "4/1", "interrupted")
    assert c["autotune"]["ops"] == 2  # the forward's two GEMMs finished autotuning before the job ended
    assert [(b["rank"], b["last_enqueued"], b["last_completed"], b["source"]) for b in t["by_rank"]] == [
        (0, 15, 12, "flight recorder"), (1, 12, 12, "flight recorder")]
    assert t["certainty"] == "likely" and "rank 1 never enqueued collective 13" in t["evidence"]
    text = " ".join(x["text"] for x in first["lines"])
    assert "rank 0: exit code -6 (SIGABRT); rank 1: SIGTERM from torchrun" in text
    # the crash is the timeout's consequence, not a desync
    crash = next(f for f in nccl_report["findings"] if f["kind"] == "crash")
    assert "desync" not in crash["claim"] and "COLLECTIVE TIMEOUT" in crash["claim"]


def test_nccl_timeout_behind_a_compile_that_ended_after_it():
    r = build_report(traceview.load(str(NCCL_SLEEP)))
    first = r["findings"][0]
    assert first["kind"] == "timeout"
    assert first["claim"].startswith("rank 0's all-reduce (NCCL collective 9) timed out after 30.00s because rank 1 was compiling [4/1]")
    c = r["timeouts"][0]["culprit"]
    assert (c["status"], c["autotune"]["ops"]) == ("finished", 0)  # the default mode: no autotuning


def test_gloo_timeout_on_every_waiting_rank_names_the_other_ranks_recompile_first():
    r = build_report(traceview.load(str(GLOO)))
    first = r["findings"][0]
    assert first["kind"] == "timeout"
    assert first["claim"].startswith(
        "ranks 0, 2, 3: their gloo collective timed out (its recv) after 30.00s because rank 1 was compiling [4/1]")
    assert first["claim"].endswith("a recompile: dimension 0 of x varies (seen: 16, 12)")
    t = r["timeouts"][0]
    assert (t["backend"], t["ranks"], t["timeout_s"], t["culprit"]["rank"], t["culprit"]["status"]) == (
        "gloo", [0, 2, 3], 30.0, 1, "interrupted")
    assert t["fired_from"] != "the timeout's line"  # gloo's exception carries no time: the launcher's lines say when
    # each waiting rank's crash is that timeout, not a desync
    crashes = [f for f in r["findings"] if f["kind"] == "crash"]
    assert sorted(f["ranks"][0] for f in crashes) == [0, 2, 3]
    assert all("COLLECTIVE TIMEOUT" in f["claim"] and "desync" not in f["claim"] for f in crashes)


def test_time_limit_in_the_first_compile_is_no_hang():
    r = build_report(traceview.load(str(FIRST)))
    first = r["findings"][0]
    assert first["kind"] == "stop"
    assert "the time limit ran out inside the first compile on all 2 ranks ([0/0], 153s of compiling, of the 156s its logs cover)" in first["claim"]
    assert "no hang and no distributed (NCCL, gloo) problem" in first["claim"]
    assert r["head"][0].startswith("findings: the time limit ran out inside the first compile (no hang)")
    cost = next(x["text"] for x in first["lines"] if x["label"] == "autotuning:")
    # torch's own count of failed choices in the trace's autotuning records: 18 on rank 0, 16 on rank 1
    assert "rank 0: 7 GEMMs autotuned to the end, 130 choices benchmarked (18 failed)" in cost
    assert "rank 1: 7 GEMMs autotuned to the end, 132 choices benchmarked (16 failed)" in cost
    assert "skipped: 34 choices for out of resource: shared memory (a config needed 393216 bytes of shared memory, the GPU has 232448)" in cost
    assert not r["timeouts"]


def test_both_ranks_hung_in_their_first_compile_is_not_called_a_time_limit():
    # fixtures/stop_backward_compiling: both ranks hang (a planted sleep) in the backward of [0/0]
    r = build_report(traceview.load(str(FIX / "stop_backward_compiling")))
    stop = next(f for f in r["findings"] if f["kind"] == "stop")
    assert "first compile" not in stop["claim"]


def test_the_wait_is_told_once():
    r = build_report(traceview.load(str(GLOO)))
    kinds = [f["kind"] for f in r["findings"]]
    # the stall analysis sees the wait (estimated from rank 1's finished compiles: [4/1] never ended);
    # it is not said beside the timeout, which tells it with the timeout's numbers
    assert r["rank_stalls"] and "stall" not in kinds
    unfinished = next(f for f in r["findings"] if f["kind"] == "unfinished")
    assert unfinished["next_step"] == (
        "ranks 0, 2, 3: collective timed out waiting for this compile and the launcher stopped this rank "
        "(SIGTERM from torchrun): see COLLECTIVE TIMEOUT")


# NCCL's status line of the timed-out rank, as torch versions have written it (quoted from real
# logs: torch 2.3-2.6 on GitHub issues, torch 2.11 in fixtures/gpu/timeout_behind_compile_nccl)
@pytest.mark.parametrize("line, want", [
    ("[rank2]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 2] Timeout at NCCL work: 1, last enqueued NCCL work: 1, "
     "last completed NCCL work: 0.", (2, 1, 1, 0)),
    ("[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] Exception (either an "
     "error or timeout) detected by watchdog at work: 6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462.",
     (1, 6463, 6463, 6462)),
    ("[rank0]:[E1128 14:42:50.762 ProcessGroupNCCL.cpp:2303] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected "
     "by watchdog at work sequence id: 13 PG status: last enqueued work: 15, last completed work: 12", (0, 13, 15, 12)),
])
def test_pg_status_forms(line, want):
    import polars as pl

    other = pl.DataFrame({"file": ["f"], "lineno": [1], "rank": [None], "text": [line]},
                         schema={"file": pl.String, "lineno": pl.Int64, "rank": pl.Int32, "text": pl.String})
    empty = pl.DataFrame(schema={"file": pl.String, "lineno": pl.Int64, "rank": pl.Int32, "text": pl.String, "ts": pl.Datetime("us")})
    rows = timeouts_from_text(empty, other, year=2026).to_dicts()
    assert [(r["rank"], r["seq"], r["last_enqueued"], r["last_completed"]) for r in rows if r["kind"] == "pg_status"] == [want]


def test_older_watchdog_form_without_a_time():
    import polars as pl

    line = ("[rank1]:[E ProcessGroupNCCL.cpp:574] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
            "OpType=_ALLGATHER_BASE, NumelIn=1024, NumelOut=16384, Timeout(ms)=600000) ran for 600029 milliseconds before timing out.")
    other = pl.DataFrame({"file": ["f"], "lineno": [1], "rank": [1], "text": [line]},
                         schema={"file": pl.String, "lineno": pl.Int64, "rank": pl.Int32, "text": pl.String})
    empty = pl.DataFrame(schema={"file": pl.String, "lineno": pl.Int64, "rank": pl.Int32, "text": pl.String, "ts": pl.Datetime("us")})
    (r,) = timeouts_from_text(empty, other, year=2026).to_dicts()
    assert (r["rank"], r["seq"], r["op"], r["numel_in"], r["numel_out"], r["timeout_ms"], r["ran_ms"], r["ts"]) == (
        1, 7, "_ALLGATHER_BASE", 1024, 16384, 600000, 600029, None)


def test_nccl_timeout_without_the_dumps_reads_the_dump_signal_lines():
    # torch's defaults (no TORCH_FR_* / TORCH_NCCL_* set): no dump file among the inputs, the lines say it
    r = build_report(traceview.load(str(FIX / "gpu" / "timeout_behind_compile_nccl_nofr")))
    assert r["inputs"]["flight_recorder"] == []
    first = r["findings"][0]
    assert first["kind"] == "timeout" and "rank 1 was compiling [4/1]" in first["claim"]
    t = r["timeouts"][0]
    assert [(b["rank"], b["last_enqueued"], b["last_completed"], b["source"]) for b in t["by_rank"]] == [
        (0, 15, 12, "dump signal"), (1, 12, 12, "dump signal")]
    # rank 0's SIGABRT (the watchdog's abort) and its Python DistBackendError are that timeout, nothing else
    crashes = [f for f in r["findings"] if f["kind"] == "crash"]
    assert len(crashes) == 2 and all("COLLECTIVE TIMEOUT" in f["claim"] for f in crashes)
    assert not [f for f in crashes if "PYTHONFAULTHANDLER" in (f["next_step"] or "") or "not involved" in (f["next_step"] or "")]


def test_time_limit_in_the_forwards_autotuning():
    r = build_report(traceview.load(str(FIX / "gpu" / "timeout_first_compile_nccl_forward")))
    first = r["findings"][0]
    assert first["kind"] == "stop" and "the time limit ran out inside the first compile on all 2 ranks" in first["claim"]
    cost = next(x["text"] for x in first["lines"] if x["label"] == "autotuning:")
    assert "rank 0: 3 GEMMs autotuned to the end (and 1 still autotuning at the stop), 55 choices benchmarked (8 failed)" in cost
    assert "skipped: 16 choices for out of resource: shared memory" in cost


def test_time_limit_in_the_first_compile_on_cpu_before_any_autotuning():
    # gloo on CPU, `timeout -s TERM 60`: both ranks still in [0/0]'s forward, no autotuning finished
    r = build_report(traceview.load(str(FIX / "timeout_first_compile_gloo")))
    first = r["findings"][0]
    assert first["kind"] == "stop" and "the time limit ran out inside the first compile on all 2 ranks ([0/0]" in first["claim"]
    assert not [x for x in first["lines"] if x["label"] == "autotuning:"]
    assert {s["state"] for s in r["stops"][0]["ranks"]} == {"compiling"}


def test_a_timeout_no_compile_explains_keeps_the_crash_words():
    # corpus collective_extra_rank: rank 2 issues an all_reduce the others never issue; gloo times out.
    # No compile covers the wait: no COLLECTIVE TIMEOUT finding, the desync stands
    r = build_report(traceview.load(str(FIX / "corpus" / "collective_extra_rank")))
    assert [(t["kind"], t["timeout_s"], t["culprit"]) for t in r["timeouts"]] == [("gloo", 20.0, None)]
    assert "timeout" not in [f["kind"] for f in r["findings"]]


def test_the_culprits_autotuning_is_torchs_own_account():
    # torch prints each autotuning's seconds to stderr ("SingleProcess AUTOTUNE benchmarking takes B seconds and
    # P seconds precompiling for N choices"); the last two are rank 1's [4/1] (rank 0 never recompiled)
    import re

    text = (NCCL / "torch_logs.txt").read_text()
    said = re.findall(r"AUTOTUNE benchmarking takes ([\d.]+) seconds and ([\d.]+) seconds precompiling for (\d+) choices", text)
    b, p, n = zip(*said[-2:])
    r = build_report(traceview.load(str(NCCL)))
    tune = r["timeouts"][0]["culprit"]["autotune"]
    assert tune["ops"] == 2 and tune["choices"] == sum(int(x) for x in n)
    assert abs(tune["seconds"] - sum(float(x) for x in b + p)) < 0.01
