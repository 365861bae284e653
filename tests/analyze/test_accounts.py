"""The accounts (traceview.analyze.accounts): one story of each compile and each rank, on real runs.

* fixtures/stop_hang_behind_rank (and fixtures/gpu/hang_behind_rank_nccl, the same on two H200s
  over NCCL): DDP on 2 gloo ranks; both recompile [4/1] for batch 12; rank 1
  hangs in its code generation (a planted sleep), rank 0 finishes it, runs it and waits in DDP's
  gradient all-reduce until `timeout` stops torchrun (issue 44, item 1: a hang read as one).
* fixtures/corpus/rank_cause_requires_grad_first: rank 1 alone recompiles [0/2]; torch's own
  recompile_reason (the newest cache entry's failure) is requires_grad, the cause is the size
  (issue 44, item 5: one recompile, one cause, in every finding and table).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import traceview
from tests.conftest import GPU, needs_shared
from traceview.analyze.accounts.compiles import compile_account
from traceview.analyze.accounts.ranks import rank_account
from traceview.output.report import build_report

ROOT = Path(__file__).resolve().parents[2]
HANG = ROOT / "fixtures" / "stop_hang_behind_rank"
HANG_NCCL = ROOT / "fixtures" / "gpu" / "hang_behind_rank_nccl"
CORPUS = ROOT / "fixtures" / "corpus"
CAUSE = CORPUS / "rank_cause_requires_grad_first"


def _row(acc: pl.DataFrame, rank: int | None, cid: str) -> dict:
    same_rank = pl.col("rank").is_null() if rank is None else pl.col("rank") == rank
    [row] = acc.filter(same_rank & (pl.col("compile_id") == cid)).to_dicts()
    return row


def test_the_hung_rank_is_compiling_and_the_other_waits_for_it() -> None:
    t = traceview.load(HANG)
    acc = compile_account(t)
    stuck, done = _row(acc, 1, "4/1"), _row(acc, 0, "4/1")
    # rank 1 was inside [4/1]'s forward (Inductor's code generation) when torchrun was stopped
    assert (stuck["status"], stuck["open_part"], stuck["phase"]) == ("interrupted", "forward", "inductor code_gen")
    # rank 0 finished it: its forward and the backward compiled at its first .backward()
    assert done["status"] == "finished" and done["forward_s"] < 5 and done["backward_pieces"] == 1
    assert done["seconds"] == done["forward_s"] + done["backward_s"]
    ranks = {r["rank"]: r for r in rank_account(t)}
    assert ranks[1]["state"] == "compiling" and ranks[1]["compile"]["compile_id"] == "4/1"
    assert [o["rank"] for o in ranks[1]["compile"]["others_s"]] == [0]
    assert ranks[1]["compile"]["others_s"][0]["seconds"] == round(done["forward_s"], 3)
    # rank 0 is not compiling: its compiles had ended and it waits for rank 1
    assert ranks[0]["state"] == "waiting" and ranks[0]["behind"] == [1]
    assert ranks[0]["last_at"] > stuck["open_since"]
    assert ranks[0]["idle_s"] > 45  # the run was stopped 90 s after it started, ~30 s of it compiling


@pytest.mark.parametrize("path", [HANG, HANG_NCCL], ids=["gloo_cpu", "nccl_2xh200"])
def test_a_hang_is_said_as_one_story_with_py_spy_first(path: Path) -> None:
    """The same plant on CPU (gloo) and on two H200s (NCCL, torch 2.11; fixtures/gpu)."""
    rep = build_report(traceview.load(path))
    [stop] = [f for f in rep["findings"] if f["kind"] == "stop"]
    claim = stop["claim"]
    assert "rank 1 hung inside [4/1] (inductor code_gen) for" in claim
    took = _row(compile_account(traceview.load(path)), 0, "4/1")["forward_s"]
    assert f"a compile done elsewhere in {took:.1f}s (rank 0 in {took:.1f}s)" in claim
    assert "rank 0 waited ~" in claim
    assert stop["next_step"].startswith("A hang, not a slow compile")
    assert "py-spy dump --pid" in stop["next_step"] and "raise it" not in stop["next_step"]
    assert stop["cost"]["ranks_stalled"] == 1 and stop["cost"]["seconds"] > 45
    lines = [line["text"] for line in stop["lines"]]
    assert any(x.startswith("rank 0 (pid ") and ": waiting for rank 1: its compiles had ended" in x for x in lines)
    # the same compile on both ranks is no divergence: the stop and the unfinished compile say it
    assert [f for f in rep["findings"] if f["kind"] == "divergence"] == []
    [u] = [f for f in rep["findings"] if f["kind"] == "unfinished"]
    assert u["ranks"] == [1]


def test_one_recompile_has_one_cause_everywhere() -> None:
    oracle = json.loads((CAUSE / "oracle.json").read_text())
    [rank1] = [p for p in oracle["processes"] if p.get("rank") == 1]
    torch_reason = {m["compile_id"]: m["recompile_reason"] for e in rank1["epochs"] for m in e["compilation_metrics"]}
    # torch stores the newest entry's failure: requires_grad
    assert torch_reason["0/2"].startswith("0/1: tensor 'x' requires_grad mismatch")
    t = traceview.load(CAUSE)
    acc = compile_account(t)
    r = _row(acc, 1, "0/2")
    assert (r["cause_kind"], r["cause_source"], r["cause_dim"]) == ("size", "x", 0)
    assert r["cause"] == "dimension 0 of x varies (seen: 8, 12)"
    # the table torch's reason is in keeps it, the account says the cause
    assert _row(t.compiles, 1, "0/2")["recompile_reason"].startswith("0/1: tensor 'x' requires_grad mismatch")
    rep = build_report(t)
    [stall] = [f for f in rep["findings"] if f["kind"] == "stall"]
    assert "rank 1 recompiled [0/2] score (rank_cause_requires_grad_first.py:23) alone for another size (dim 0 of x: 12, not 8)" in stall["claim"]
    assert "requires_grad mismatch" not in stall["claim"] and "requires_grad=" not in stall["claim"]
    # the requires_grad variant both ranks compiled is no divergence, and the lone recompile is the stall's
    assert [f for f in rep["findings"] if f["kind"] == "divergence"] == []
    [storm] = [s for s in rep["recompiles"] if s["rank"] == 1]
    [size] = [c for c in storm["causes"] if "0/2" in c["compile_ids"]]
    assert size["kind"] == "size"


def test_the_accounts_are_tables_in_sql() -> None:
    from traceview.output.sql import run_query

    t = traceview.load(CAUSE)
    res = run_query(t, "SELECT rank, compile_id, cause_kind FROM compile_account WHERE cause_kind IS NOT NULL ORDER BY rank, compile_id",
                    engine="polars")
    assert res.rows == [(0, "0/1", "requires_grad"), (1, "0/1", "requires_grad"), (1, "0/2", "size")]
    res = run_query(traceview.load(HANG), "SELECT rank, state, compile_id, behind FROM rank_account ORDER BY rank", engine="polars")
    assert res.rows == [(0, "waiting", None, [1]), (1, "compiling", "4/1", None)]


@needs_shared
def test_a_graph_benchmarking_its_kernels_at_its_first_call_is_running_not_compiling(tmp_path: Path) -> None:
    """The real GPU run `big`, cut (by this test) right after a `CachingAutotuner.benchmark_all_configs`
    begin of [1/0]: a job killed while its compiled graph's first call benchmarks a Triton kernel's
    configs. Its log ends in a span under [1/0] left open, after [1/0]'s compilation_metrics: run
    time, not a compile left open (issue 44, item 1: rank 0 was read as "inside [4/1]")."""
    src = GPU / "big" / "trace"
    [log] = sorted(src.iterdir())
    lines = log.read_text().splitlines(keepends=True)
    begin = next(i for i, line in enumerate(lines) if '"name": "CachingAutotuner.benchmark_all_configs"' in line)
    end = next(i for i in range(begin, len(lines)) if lines[i].rstrip("\n") == "\t}")  # the record's last line
    (tmp_path / log.name).write_text("".join(lines[: end + 1]))
    t = traceview.load(tmp_path)
    acc = compile_account(t)
    assert acc.filter(pl.col("status").is_in(("interrupted", "never_ended"))).is_empty()
    assert _row(acc, None, "1/0")["status"] == "finished"
    [r] = rank_account(t)
    assert r["state"] == "running"
    assert r["running"]["compile_id"] == "1/0" and r["running"]["span"] == "CachingAutotuner.benchmark_all_configs"
    assert [f for f in build_report(t)["findings"] if f["kind"] == "unfinished"] == []


def test_a_lone_recompile_the_others_wait_for_in_a_collective_is_never_nothing_to_fix() -> None:
    """corpus/collective_wait_lone_recompile: rank 1 alone recompiles [0/1] by design (automatic
    dynamic shapes) while rank 0 waits in the compiled graph's all_reduce of a [16] tensor
    (issue 44, item 5: "nothing to fix" while COLLECTIVES said the others waited; cost 0.0)."""
    rep = build_report(traceview.load(CORPUS / "collective_wait_lone_recompile"))
    [w] = rep["collectives"]["waits"]
    assert (w["compile_id"], w["compiling_ranks"], w["waiting_ranks"]) == ("0/1", [1], [0])
    [storm] = [s for s in rep["recompiles"] if s["rank"] == 1]
    assert storm["expected"] is False and storm["stall"]["section"] == "COLLECTIVES"
    [f] = [f for f in rep["findings"] if f["kind"] == "collectives"]
    assert f["cost"] == {"seconds": w["seconds"], "ranks_stalled": 1, "compiles_wasted": 0}
    lines = {line["label"]: line["text"] for line in f["lines"]}
    assert lines["cause:"] == "recompiled on rank 1: dimension 0 of x varies (seen: 8, 6)"
    assert f["claim"].startswith("rank 0 waited ~3.24s at the first collective while rank 1 compiled [0/1] step (collective_wait_lone_recompile.py:26)")
    assert lines["next:"].startswith("give every rank the same shapes so rank 1 does not compile alone")
    # one root cause, one finding: no divergence, no expected recompile beside it
    assert {x["kind"] for x in rep["findings"]} == {"collectives", "compile_time"}


def test_a_log_cut_inside_the_compile_after_a_reset_has_one_compile_open(tmp_path: Path) -> None:
    """corpus/reset_same_id cut (by this test) inside its second compile, after
    torch._dynamo.reset(): both compiles are [0/0]. The spans the second one opened before its
    dynamo_start (`dynamo`, `entire_frame_compile`) are its own, open at the end of the log; the
    first [0/0], which failed and logged its metrics, is not open (it was listed as unfinished)."""
    import re

    src = CORPUS / "reset_same_id"
    (log,) = (src / "trace").glob("*.log")
    data = log.read_bytes()
    second = data.index(b'"dynamo_start"', data.index(b'"dynamo_start"') + 1)
    cut = next(m.start() for m in re.finditer(rb"(?m)^[VIWE]\d{4} ", data) if m.start() > second + 10000)
    (tmp_path / log.name).write_bytes(data[:cut])
    t = traceview.load(tmp_path)
    acc = compile_account(t).sort("occurrence")
    assert acc.select("compile_id", "occurrence", "status").rows() == [("0/0", 1, "failed"), ("0/0", 2, "never_ended")]
    [u] = build_report(t)["unfinished_compiles"]
    assert (u["compile_id"], u["occurrence"], u["part"]) == ("0/0", 2, None)
    assert u["open_spans"][:2] == ["dynamo", "entire_frame_compile"]


def test_each_rank_says_how_it_ended_where_the_capture_says() -> None:
    """fixtures/stop_killed_in_codegen: rank 1 SIGKILLs itself in code_gen (torchrun: `exitcode
    : -9`), torchrun then SIGTERMs rank 0; fixtures/rank_crash_torchrun: rank 1 raises in its own
    code, rank 0 fails in dist.barrier() because of it (both uncaught RuntimeErrors)."""
    killed = {r["rank"]: r for r in rank_account(traceview.load(ROOT / "fixtures" / "stop_killed_in_codegen"))}
    assert (killed[1]["ended_by"], killed[0]["ended_by"]) == ("killed by SIGKILL", "SIGTERM from torchrun")
    assert killed[0]["crashed"] is None and killed[1]["crashed"] is None
    crashed = {r["rank"]: r for r in rank_account(traceview.load(ROOT / "fixtures" / "rank_crash_torchrun"))}
    assert (crashed[0]["crashed"], crashed[1]["crashed"]) == ("RuntimeError", "RuntimeError")
    # the stop says the same endings, read from the account
    rep = build_report(traceview.load(ROOT / "fixtures" / "stop_killed_in_codegen"))
    [stop] = rep["stops"]
    assert {r["rank"]: r["ended_by"] for r in stop["ranks"]} == {0: "SIGTERM from torchrun", 1: "killed by SIGKILL"}


def test_an_account_is_derived_again_when_a_table_it_read_is_replaced() -> None:
    """The accounts are kept with their Trace (Trace.keep); a table the Trace read and then
    replaced (Trace.provide) makes them derived again, never answered from the old tables."""
    t = traceview.load(CORPUS / "ddp_rank_recompile")
    first = compile_account(t)
    assert compile_account(t) is first  # kept
    compiles = t.compiles
    t.provide("compiles", compiles.with_columns(pl.col("compile_time_s") * 2))
    again = compile_account(t)
    assert again is not first
    assert again["forward_s"].sum() == pytest.approx(2 * first["forward_s"].sum())
