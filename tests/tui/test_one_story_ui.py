"""The UI tells each compile's one story (issue 44): on every real run under fixtures/ (the
CPU fixtures, the corpus, the GPU runs), each compile the Frames tree and the Timeline show has
the compile account's seconds (as the UI rounds them), status and cause, and the Timeline's
totals are the summary's. The UI's model is built once per run without the app (the views'
own row and text functions), the account independently from the same Trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import traceview
from tests.conftest import FIXTURES
from traceview.analyze.accounts.compiles import OPEN, compile_account
from traceview.output.report import build_report
from traceview.tui.frames_view import compile_detail, compile_label, frame_rows
from traceview.tui.model import TraceModel
from traceview.tui.text import seconds
from traceview.tui.timeline_view import (
    OPEN_BAR,
    bar_lines,
    piece_detail,
    timeline_table,
    timeline_title,
)

RUNS = sorted(p.parent for pattern in ("*/trace", "corpus/*/trace", "gpu/*/trace") for p in FIXTURES.glob(pattern))
WIDE = 400  # no bar line cut: each rank's figures and state said whole

# the words a compile's status is said with (Frames' outcome words; the Timeline's STATUS_WORDS)
FRAMES_WORDS = {
    "finished": ("✓ ok", "↻ restarted", "∅ empty", "+ ok", "r restarted", "0 empty"),
    "failed": ("✗ failed", "↓ eager", "x failed", "e eager"),
    "interrupted": ("! interrupted",),
    "never_ended": ("… never ended", "~ never ended"),
    "unknown": ("? no metrics",),
}
TIMELINE_WORDS = {  # the list's column; an open piece's whole words are in the strip below
    "finished": "finished", "failed": "failed", "interrupted": "interrupted", "never_ended": "never ended",
    "unknown": "no time logged",
}


def _key(r: dict[str, Any]) -> tuple:
    return (r["file"], r["compile_id"], r.get("occurrence") or 1)


def _model(run: Path) -> tuple[TraceModel, dict[tuple, dict[str, Any]], dict[str, Any]]:
    trace = traceview.load(run)
    report = build_report(trace)
    model = TraceModel.build(trace, report=report)
    model.place_compiles()  # what build_graph_tables does for the Timeline (no guards, graphs, kernels)
    acc = {_key(a): a for a in compile_account(trace).iter_rows(named=True)}
    return model, acc, report


def test_every_run_is_swept() -> None:
    names = {str(p.relative_to(FIXTURES)) for p in RUNS}
    assert {"stop_hang_behind_rank", "corpus/ddp_rank_recompile", "gpu/hang_behind_rank_nccl"} <= names
    assert len(RUNS) >= 100


@pytest.mark.parametrize("run", RUNS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_each_compile_in_the_ui_has_the_accounts_seconds_status_and_cause(run: Path) -> None:
    model, acc, report = _model(run)
    # Frames: each compile's leaf and detail
    firsts: set[tuple] = set()
    for r in frame_rows(model):
        if model.text_only:
            break
        a = acc[_key(r)]
        first = (r["rank"], r.get("frame_id"), r.get("epoch")) not in firsts
        firsts.add((r["rank"], r.get("frame_id"), r.get("epoch")))
        label = compile_label(r, first).plain
        assert label.startswith(FRAMES_WORDS[a["status"]]), (label, a["status"])
        assert f" {seconds(a['seconds'])}" in label, (label, a["seconds"])
        if a["status"] in OPEN:
            assert "to the capture's end" in label
        if not first and a["cause"]:
            assert "recompile: " + a["cause"][:40] in label, (label, a["cause"])
        detail = compile_detail(model, r, hint=False).plain
        time_line = next(x for x in detail.splitlines() if x.startswith("time "))
        assert f" {seconds(a['seconds'])} " in time_line, (time_line, a["seconds"])
        if a["cause"]:
            assert f"recompiled   {a['cause']}" in detail
            if r.get("recompile_reason"):  # torch's own list, said as torch's
                assert f"torch listed {r['recompile_reason'].splitlines()[0]}" in detail
    # the Timeline: every piece of each compile with a start, its compile's seconds and status
    if model.timeline is None or model.timeline.height == 0:
        return
    rows = timeline_table(model.timeline)
    placed = {_key(a) for a in acc.values() if a["start"] is not None}
    assert {_key(r) for r in rows.iter_rows(named=True)} == placed
    for r in rows.iter_rows(named=True):
        a = acc[_key(r)]
        assert r["compile_seconds"] == pytest.approx(a["seconds"]) if a["seconds"] is not None else r["compile_seconds"] is None
        assert r["compile_status"] == a["status"]
        assert r["outcome"].endswith(TIMELINE_WORDS[r["status"]]), r["outcome"]
        if r["open"]:
            assert a["status"] in OPEN and r["status"] == a["status"]
            assert r["took"].endswith("+")
        detail = piece_detail(model, r).plain
        if r["piece"] != "forward" and a["seconds"] is not None:
            assert f"the compile: {seconds(a['seconds'])} in all" in detail, detail
        if r["piece"] == "forward" and a["cause"]:
            assert f"recompiled: {a['cause'][:200]}" in detail
    # the totals: the summary's compile time, each rank's its compiles' seconds
    title = timeline_title(rows, model).plain
    assert f", {seconds(report['compile_time']['total_s'])} compiling" in title, title
    bars = bar_lines(rows, WIDE, None, model.timeline_end).plain.splitlines()
    procs = rows.select("process", "file").unique("process").sort("process").iter_rows()
    for line, (pid, file) in zip(bars, procs, strict=False):  # one line per process, in order; then the axis
        mine = [acc[k] for k in {_key(r) for r in rows.filter(pl.col("process") == pid).iter_rows(named=True)}]
        n = len(mine)
        want = f"{seconds(round(sum(a['seconds'] or 0 for a in mine), 3))}, {n} compile{'s' if n != 1 else ''}"
        assert want in line, (line, want)
        assert (OPEN_BAR in line) == any(a["status"] in OPEN for a in mine), line
        state = ((model.timeline_end or {}).get("ranks") or {}).get(file, {}).get("text")
        if state:
            assert line.rstrip().endswith(state), (line, state)


def _frames(model: TraceModel) -> dict[tuple, str]:
    return {(r["rank"], r["compile_id"]): compile_label(r, r.get("recompile_reason") is None).plain for r in frame_rows(model)}


def test_the_hang_behind_a_rank_in_the_ui() -> None:
    # rank 1 sits in Inductor code_gen of [4/1] until the job is stopped; rank 0 finished its
    # [4/1] in 2.84 s (forward 1.18 s, backward 1.66 s) and waits for rank 1
    model, _, _ = _model(FIXTURES / "stop_hang_behind_rank")
    frames = _frames(model)
    assert frames[(1, "4/1")].startswith("! interrupted 4/1    58.39s to the capture's end (in inductor code_gen)")
    assert frames[(0, "4/1")].startswith("✓ ok         4/1     2.84s")
    rows = timeline_table(model.timeline)
    bars = bar_lines(rows, WIDE, None, model.timeline_end).plain.splitlines()
    assert bars[0].startswith("rank 0") and bars[0].endswith("26.22s, 7 compiles · waiting for rank 1 (likely)")
    assert bars[1].startswith("rank 1") and bars[1].endswith("81.84s, 7 compiles · compiling [4/1] (in inductor code_gen)")
    # rank 1's open compile runs to the capture's end: the axis's last cell
    assert bars[1].split("│")[1].endswith(OPEN_BAR) and OPEN_BAR not in bars[0]
    [open_row] = rows.filter(pl.col("open")).to_dicts()
    assert (open_row["rank"], open_row["compile_id"], open_row["took"]) == (1, "4/1", "58.39s+")
    assert "58.39s up to the capture's end, interrupted when the job ended (in inductor code_gen)" in piece_detail(model, open_row).plain


def test_the_gpu_hang_behind_a_rank_in_the_ui() -> None:
    # the same hang on two H200s over NCCL (torch 2.11): the rank stuck compiling is never ok
    model, acc, _ = _model(FIXTURES / "gpu" / "hang_behind_rank_nccl")
    [stuck] = [a for a in acc.values() if a["status"] in OPEN]
    frames = _frames(model)
    assert frames[(stuck["rank"], stuck["compile_id"])].startswith("! interrupted")
    rows = timeline_table(model.timeline)
    bars = bar_lines(rows, WIDE, None, model.timeline_end).plain.splitlines()
    other = 1 - stuck["rank"]
    assert bars[other].endswith(f"waiting for rank {stuck['rank']} (likely)")
    assert f"compiling [{stuck['compile_id']}]" in bars[stuck["rank"]]


def test_one_cause_in_frames_torchs_list_beside_it() -> None:
    # rank 1's [0/2]: torch lists requires_grad first, but the entry it otherwise matches
    # differs in the size of x: Frames says the size, the detail keeps torch's text as torch's
    model, _, _ = _model(FIXTURES / "corpus" / "rank_cause_requires_grad_first")
    [row] = [r for r in frame_rows(model) if (r["rank"], r["compile_id"]) == (1, "0/2")]
    label = compile_label(row, False).plain
    assert label.endswith("recompile: dimension 0 of x varies (seen: 8, 12)")
    assert "requires_grad" not in label
    detail = compile_detail(model, row, hint=False).plain
    assert "recompiled   dimension 0 of x varies (seen: 8, 12)" in detail
    assert "torch listed 0/1: tensor 'x' requires_grad mismatch. expected requires_grad=0" in detail


def test_every_backward_piece_on_the_timeline() -> None:
    # DDPOptimizer compiled 4 backward pieces of [4/0] on each of the 4 ranks
    model, _, _ = _model(FIXTURES / "corpus" / "ddp_rank_recompile")
    rows = timeline_table(model.timeline)
    bwd = rows.filter(pl.col("piece") == "backward")
    assert bwd.height == 16
    assert sorted(bwd.filter(pl.col("rank") == 0)["part"].to_list()) == [f"backward {i} of 4" for i in range(1, 5)]
    assert timeline_title(rows, model).plain.startswith("Timeline: 22 compiles + 16 backward pieces on 4 ranks")
