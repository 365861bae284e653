"""Ranks that fall out of step (issue 32), on the real 4-rank gloo runs of the corpus:
fixtures/corpus/collective_extra_rank (rank 2's [0/0] issues a second all_reduce; gloo times
out) and fixtures/corpus/collective_size_mismatch (rank 1 recompiles [0/1] alone for batch 6;
gloo aborts on the size mismatch).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from parsers.discover import InputError, discover

from ..conftest import FIXTURES, ROOT

CORPUS = FIXTURES / "corpus"
EXTRA = CORPUS / "collective_extra_rank"
SIZES = CORPUS / "collective_size_mismatch"


def tv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "traceview", *args], capture_output=True, text=True, timeout=300)


# ------------------------------------------------------------------ item 5: an empty input beside good ones


def _copy_trace(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(EXTRA / "trace", d)
    return d


def test_an_empty_text_log_named_beside_a_trace_is_noted_and_skipped(tmp_path: Path) -> None:
    d = _copy_trace(tmp_path)
    empty = tmp_path / "torch_logs.txt"
    empty.write_bytes(b"")
    r = tv("summary", "--json", "--no-cache", str(d), str(empty))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {"path": str(empty), "why": "empty file"} in doc["inputs"]["stray_files"]
    assert sorted(t["rank"] for t in doc["inputs"]["trace_files"]) == [0, 1, 2, 3]
    text = tv("summary", "--no-cache", str(d), str(empty))
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("traceview: 4 compiles on 4 ranks from 4 log files")
    skipped = [ln.strip() for ln in text.stdout.splitlines() if ln.strip().startswith("skipped ")]
    assert len(skipped) == 1 and skipped[0].endswith("/torch_logs.txt: empty file"), skipped


def test_a_zero_length_rank_trace_named_beside_the_others_is_noted_and_skipped(tmp_path: Path) -> None:
    d = _copy_trace(tmp_path)
    zero = d / "dedicated_log_torch_trace_rank_4_zzzzzzzz.log"
    zero.write_bytes(b"")
    inputs = discover(sorted(d.glob("*rank_0*"))[0], extra_logs=[str(zero), *map(str, sorted(d.glob("*rank_[123]*")))])
    assert sorted(t.rank for t in inputs.traces) == [0, 1, 2, 3]
    assert (str(zero), "empty trace log (nothing written to it yet)") in inputs.stray


def test_an_empty_input_alone_is_still_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "torch_logs.txt"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"torch_logs\.txt: empty file"):
        discover(empty)
    r = tv("summary", str(empty))
    assert r.returncode == 2 and r.stderr.strip() == f"traceview: error: {empty}: empty file"


# ------------------------------------------------------------------ item 1: the tables


def _load(d: Path):
    import traceview

    return traceview.load(d / "trace")


def _schedules(t) -> dict[tuple[int, str], list[tuple[str, list[int] | None, str | None]]]:
    out: dict[tuple[int, str], list] = {}
    for r in t.collectives.sort("rank", "compile_id", "graph_index", "position").iter_rows(named=True):
        out.setdefault((r["rank"], r["compile_id"]), []).append((r["op"], r["shape"], r["dtype"]))
    return out


def test_collectives_of_the_extra_all_reduce_run() -> None:
    t = _load(EXTRA)
    one = [("all_reduce", [8, 16], "float32"), ("wait_tensor", [8, 16], "float32")]
    # the program: rank 2 alone takes the branch with the second funcol.all_reduce
    assert _schedules(t) == {(0, "0/0"): one, (1, "0/0"): one, (2, "0/0"): one + one, (3, "0/0"): one}
    c = t.collectives
    assert c["target"].unique().sort().to_list() == [
        "torch.ops._c10d_functional.all_reduce_.default", "torch.ops._c10d_functional.wait_tensor.default"]
    assert c.filter(pl.col("rank") == 2)["collective_index"].to_list() == [0, None, 1, None]
    # LOG_TLPARSE=1: every scheduled op has its estimate (0 ns on CPU, as torch logged it)
    assert c["estimated_runtime_ns"].to_list() == [0.0] * 10
    # funcol.all_reduce called directly: the node's frame is torch's, no user line
    assert c["user_line"].null_count() == 10
    # the recorder ran `step` twice on every rank (STEPS = 2), graph 0/0 each time
    g = t.graph_execution.sort("rank", "order")
    assert g.select("rank", "order", "compile_id").rows() == [(r, i, "0/0") for r in range(4) for i in range(2)]


def test_collectives_of_the_size_mismatch_run() -> None:
    t = _load(SIZES)
    eight = [("all_reduce", [8, 16], "float32"), ("wait_tensor", [8, 16], "float32")]
    six = [("all_reduce", [6, 16], "float32"), ("wait_tensor", [6, 16], "float32")]
    assert _schedules(t) == {(0, "0/0"): eight, (1, "0/0"): eight, (1, "0/1"): six, (2, "0/0"): eight, (3, "0/0"): eight}
    assert t.collectives["estimated_runtime_ns"].null_count() == 10  # no LOG_TLPARSE
    assert t.graph_execution.height == 0  # no recorder in this program


def test_collectives_in_sql_and_export(tmp_path: Path) -> None:
    r = tv("sql", "--no-cache", "--format", "json", str(EXTRA / "trace"),
           "select rank, count(*) n from collectives where kind = 'collective' group by rank order by rank")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"rank": 0, "n": 1}, {"rank": 1, "n": 1}, {"rank": 2, "n": 2}, {"rank": 3, "n": 1}]
    out = tmp_path / "export"
    r = tv("export", "--no-cache", str(SIZES / "trace"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    import traceview

    back = traceview.load(out)
    assert _schedules(back) == _schedules(_load(SIZES))
    assert back.graph_execution.height == 0


# ------------------------------------------------------------------ items 2 + 3: compared across ranks, findings first


def _report(d: Path) -> dict:
    import traceview
    from traceview.output.report import build_report

    return build_report(traceview.load(d / "trace", logs=[str(d / "torch_logs.txt")]))


def _valid(report: dict) -> None:
    import jsonschema
    import orjson

    schema = json.loads((ROOT / "traceview" / "schemas" / "report.schema.json").read_text())
    jsonschema.validate(orjson.loads(orjson.dumps(report)), schema)


def test_the_rank_with_the_extra_all_reduce_is_named_with_its_schedule() -> None:
    rep = _report(EXTRA)
    _valid(rep)
    coll = rep["collectives"]
    assert coll["unknown"] == []
    [g] = coll["graphs"]
    one = {"op": "all_reduce", "shape": [8, 16], "dtype": "float32"}
    assert (g["compile_id"], g["function"], g["line"]) == ("0/0", "step", 31)
    assert g["schedules"] == [{"ranks": [0, 1, 3], "collectives": [one]}, {"ranks": [2], "collectives": [one, one]}]
    [m] = coll["mismatches"]
    assert (m["kind"], m["ranks"], m["other_ranks"], m["position"], m["op"]) == ("extra", [2], [0, 1, 3], 1, "all_reduce")
    assert m["message"] == (
        "collectives do not match: rank 2's [0/0] step (collective_extra_rank.py:31) issues 2 all_reduce, "
        "ranks 0,1,3 issue 1; the second (float32[8, 16]) has no partner: "
        "expect a hang, an NCCL timeout or 'Connection closed by peer'"
    )
    assert "branch on the rank" in m["next_step"]


def test_the_rank_that_recompiled_alone_is_tied_to_the_collective_sizes() -> None:
    rep = _report(SIZES)
    _valid(rep)
    [m] = rep["collectives"]["mismatches"]
    assert (m["kind"], m["ranks"], m["other_ranks"], m["compile_id"], m["other_compile_id"]) == ("size", [1], [0, 2, 3], "0/1", "0/0")
    # the recompile's one cause (the compile account's: torch's `tensor 'x' size mismatch at index 0.
    # expected 8, actual 6`), said as every finding says it
    assert m["recompile_reason"] == "dimension 0 of x varies (seen: 8, 6)"
    assert m["message"].startswith(
        "collective sizes do not match: rank 1 compiled [0/1] step (collective_size_mismatch.py:29) alone "
        "(recompiled: dimension 0 of x varies (seen: 8, 6)); there its first all_reduce "
        "takes float32[6, 16], ranks 0,2,3 in [0/0] take float32[8, 16]: expect an abort on the size mismatch"
    )
    # the all_reduce runs on an activation: a dynamic graph would still send [6, 16] against [8, 16]
    # (issue 44, item 6): equal shapes are the fix, mark_dynamic is not offered as one
    assert m["next_step"].startswith("give every rank the same shapes (drop_last=True in the DataLoader, or pad the last batch)")
    assert "would spare rank 1 the recompile but still send float32[6, 16] against float32[8, 16]" in m["next_step"]
    assert "torch._dynamo.mark_dynamic" not in m["next_step"]
    # one root cause, one finding: no RANK DIVERGENCE offering mark_dynamic for the same compile
    kinds = [f["kind"] for f in rep["findings"]]
    assert "divergence" not in kinds and kinds.count("collectives") == 2  # the mismatch and the others' wait


def test_collectives_come_first_in_the_text_summary() -> None:
    from traceview.output.summary import render_text

    text = render_text(_report(EXTRA))
    lines = text.splitlines()
    assert lines[2] == "findings: collectives do not match across ranks (rank 2), the program crashed"
    assert lines[4] == "COLLECTIVES  the ranks do not issue the same collectives"
    assert text.index("COLLECTIVES") < text.index("CRASHED")


def test_ranks_that_agree_have_no_collective_finding() -> None:
    import traceview
    from traceview.analyze.collectives import collective_mismatches

    # multirank4: aot_eager, no Inductor graph, no schedule at all
    assert collective_mismatches(traceview.load(CORPUS / "multirank4" / "trace")) == {"graphs": [], "mismatches": [], "unknown": [], "waits": [], "execution": []}


def test_a_schedule_missing_after_an_fx_cache_hit_is_unknown_not_none() -> None:
    import traceview
    from traceview.analyze.collectives import collective_mismatches

    t = traceview.load(EXTRA / "trace")
    # rank 3's graph as if it came from the FX graph cache: torch logs no schedule then
    collectives, compiles = t.collectives, t.compiles
    t.provide("collectives", collectives.filter(pl.col("rank") != 3))
    t.provide("compiles", compiles.with_columns(
        pl.when(pl.col("rank") == 3).then(1).otherwise(pl.col("fx_cache_hits")).alias("fx_cache_hits"),
        pl.when(pl.col("rank") == 3).then(0).otherwise(pl.col("fx_cache_misses")).alias("fx_cache_misses"),
    ))

    res = collective_mismatches(t)
    assert res["unknown"] == [{"rank": 3, "compile_id": "0/0", "graph_index": 0,
                               "why": "the graph came from the FX graph cache (torch logs no schedule then)"}]
    [m] = res["mismatches"]
    assert (m["kind"], m["ranks"], m["other_ranks"]) == ("extra", [2], [0, 1])


# ------------------------------------------------------------------ item 4: distributed errors explained


def test_the_timeout_is_a_desync_explained_by_rank_2s_extra_all_reduce() -> None:
    rep = _report(EXTRA)
    _valid(rep)
    [c] = rep["crashes"]
    # mp.spawn reports the first rank whose collective timed out (which one varies per run)
    assert c["exc_type"] == "RuntimeError" and "Timed out waiting 20000ms" in c["message"]
    assert c["category"] == "distributed_desync"
    assert c["distributed_error"]["kind"] == "collective timeout (gloo)"
    assert (c["look_first"], c["diverged_in"]) == ([2], "0/0")
    assert c["next_step"].startswith(
        "A distributed desync (collective timeout (gloo)), explained by the compiled graphs (COLLECTIVES): "
        "rank 2's [0/0] step (collective_extra_rank.py:31) issues 2 all_reduce, ranks 0,1,3 issue 1; "
        "the second (float32[8, 16]) has no partner. Look at rank 2 first: make every rank issue the same collectives"
    )
    assert "not involved" not in c["next_step"]


def test_the_gloo_abort_is_a_size_mismatch_tied_to_rank_1s_recompile() -> None:
    rep = _report(SIZES)
    [c] = rep["crashes"]
    assert (c["exc_type"], c["message"]) == ("torch.multiprocessing.spawn.ProcessExitedException", "process 1 terminated with signal SIGABRT")
    assert c["category"] == "distributed_desync"
    # the aborting rank's own words are in the capture's other lines (gloo::EnforceNotMet's what())
    assert c["distributed_error"]["kind"] == "collective size mismatch (gloo)"
    assert "Received data size doesn't match expected size" in c["distributed_error"]["line"]
    assert (c["look_first"], c["diverged_in"]) == ([1], "0/1")
    assert "rank 1 compiled [0/1] step (collective_size_mismatch.py:29) alone" in c["next_step"]
    assert "drop_last=True" in c["next_step"] and "not involved" not in c["next_step"]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # torch 2.13's ProcessGroupNCCL watchdog and TORCH_DISTRIBUTED_DEBUG=DETAIL wording
        ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=128, "
         "NumelOut=128, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.", "NCCL watchdog timeout"),
        ("RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
         "CollectiveFingerPrint(SequenceNumber=3, OpType=ALLREDUCE)", "collective mismatch (TORCH_DISTRIBUTED_DEBUG=DETAIL)"),
        ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:3112",
         "peer connection closed"),
        ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited", "c10d error"),
        ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x3 and 4x5)", None),
    ],
)
def test_distributed_errors_are_recognised(text: str, kind: str | None) -> None:
    from traceview.analyze.collectives import distributed_error

    got = distributed_error(text)
    assert (got[0] if got else None) == kind


# ------------------------------------------------------------------ item 6: diff of schedules


def test_diff_of_rank_0_against_rank_2_shows_the_extra_all_reduce() -> None:
    import traceview
    from traceview.workflow.diff import build_diff, render_diff

    t = traceview.load(EXTRA / "trace")
    d = build_diff(t, t, rank=0, against_rank=2)
    eight = "all_reduce float32[8, 16]"
    assert d["collectives"] == [{
        "change": "changed", "rank": None, "function": "step", "file": "collective_extra_rank.py", "line": 31, "nth": 0,
        "label": "step (collective_extra_rank.py:31)", "compile_id_a": "0/0", "compile_id_b": "0/0", "graph_index": 0,
        "collectives_a": [eight], "collectives_b": [eight, eight],
    }]
    assert "changed: step (collective_extra_rank.py:31) compile #1 [0/0] -> [0/0]:" in render_diff(d)
    # the same run against itself: nothing
    assert build_diff(t, t)["collectives"] == []


def test_the_ranks_that_waited_while_rank_1_recompiled_are_named() -> None:
    import traceview
    from traceview.analyze.collectives import collective_mismatches

    t = traceview.load(SIZES / "trace")
    took = t.compiles.filter((pl.col("rank") == 1) & (pl.col("compile_id") == "0/1"))["total_time_s"][0]
    [w] = collective_mismatches(t)["waits"]
    assert (w["compile_id"], w["compiling_ranks"], w["waiting_ranks"], w["seconds"]) == ("0/1", [1], [0, 2, 3], round(took, 2))
    assert w["message"] == (
        f"ranks 0,2,3 waited ~{took:.1f} s at the first collective while rank 1 compiled [0/1] step (collective_size_mismatch.py:29)"
    )
    # every rank compiled [0/0] in about the same time (a cold cache on each): nobody waited for it
    assert collective_mismatches(traceview.load(EXTRA / "trace"))["waits"] == []


def test_graph_execution_orders_are_compared_across_ranks() -> None:
    import traceview
    from traceview.analyze.collectives import execution_differences

    t = traceview.load(EXTRA / "trace")
    assert execution_differences(t) == []  # every rank ran [0/0] twice

    class Other:  # rank 1's second call as if it had run another graph ([0/1]): the real rows, one changed
        graph_execution = t.graph_execution.with_columns(
            pl.when((pl.col("rank") == 1) & (pl.col("order") == 1)).then(pl.lit("0/1")).otherwise(pl.col("compile_id")).alias("compile_id")
        )

    [d] = execution_differences(Other())  # type: ignore[arg-type]
    assert (d["ranks"], d["other_ranks"], d["call"]) == ([1], [0, 2, 3], 1)
    assert d["message"] == (
        "compiled graphs ran in another order: at call 2 rank 1 ran [0/1] where ranks 0,2,3 ran [0/0] (2 against 2 recorded calls)"
    )


MISSING = CORPUS / "collective_missing_rank"


def test_the_rank_that_skips_an_all_reduce_is_named_and_the_timeout_in_compiled_code_is_a_desync() -> None:
    rep = _report(MISSING)
    _valid(rep)
    [m] = rep["collectives"]["mismatches"]
    # torch.distributed.all_reduce traced by Dynamo: the node's frame is torch's, no user line
    assert (m["kind"], m["ranks"], m["other_ranks"], m["position"], m["user_line"]) == ("missing", [0], [1, 2, 3], 1, None)
    assert m["message"] == (
        "collectives do not match: rank 0's [0/0] step (collective_missing_rank.py:24) issues 1 all_reduce, "
        "ranks 1-3 issue 2; the second all_reduce of ranks 1-3 has no partner on rank 0: "
        "expect a hang, an NCCL timeout or 'Connection closed by peer'"
    )
    [c] = rep["crashes"]
    # a rank whose collective timed out inside the compiled graph: not "run it without torch.compile"
    assert c["category"] == "distributed_desync" and c["look_first"] == [0] and c["diverged_in"] == "0/0"
    assert "without torch.compile" not in c["next_step"] and "minify" not in c["next_step"]


# ------------------------------------------------ a rank stuck in a compile waited for nobody


def test_a_rank_stuck_in_its_compile_is_not_said_to_wait(tmp_path: Path) -> None:
    """The real collective_size_mismatch run with rank 2's log cut at its first
    compilation_metrics (by hand, in the test: a rank killed or hung inside [0/0], as the
    issue-46 bench plants it): rank 2 did not wait ~21s for the others' [0/0] (it never
    finished its own; UNFINISHED COMPILES says it is behind), nor for rank 1's [0/1], which
    ended after rank 2 got stuck."""
    import gzip

    from traceview.analyze.collectives import collective_mismatches
    from traceview.ingest.loading import load

    run = tmp_path / "run"
    run.mkdir()
    for f in (SIZES / "trace").glob("*.gz"):
        data = gzip.decompress(f.read_bytes())
        if "_rank_2_" in f.name:
            data = data[: data.index(b"compilation_metrics")]
            data = data[: data.rindex(b"\n") + 1]
        (run / f.name.removesuffix(".gz")).write_bytes(data)
    trace = load(run)
    assert trace.compiles.filter((pl.col("rank") == 2) & (pl.col("compile_id") == "0/0"))["status"].to_list() == ["no_metrics"]
    waits = collective_mismatches(trace)["waits"]
    assert [(w["compile_id"], w["compiling_ranks"], w["waiting_ranks"]) for w in waits] == [("0/1", [1], [0, 3])]
    r = tv("summary", "--json", "--no-cache", str(run))
    doc = json.loads(r.stdout)
    assert not any("rank 2 waited" in f["claim"] for f in doc["findings"])
    assert any(f["kind"] == "unfinished" and "rank 2 [0/0]" in f["claim"] for f in doc["findings"])
