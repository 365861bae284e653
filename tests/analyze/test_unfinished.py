"""Unfinished compiles (issue 33.1): a compile that began and logged no compilation_metrics.

The inputs are real logs cut where a killed job's log would end (a hand-made truncation of a
real trace, the bad input this analyzer is for): a max-autotune run on an H100 cut inside its
Inductor code generation, and a 4-rank gloo run (fixtures/corpus/multirank4) whose rank 1 is
cut inside its first compile while ranks 0, 2 and 3 finished it.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import traceview
from traceview.analyze.unfinished import unfinished_compiles
from traceview.output.report import build_report
from traceview.output.summary import render_text
from traceview.tui.finding_rows import findings_from_report

from ..conftest import FIXTURES, SHARED, needs_shared


def _cut(src: Path, dst: Path, lines: int) -> None:
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt", encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
        for i, line in enumerate(f):
            if i >= lines:
                break
            out.write(line)


@needs_shared
def test_a_log_cut_inside_inductor_codegen_names_the_compile_and_its_phase(tmp_path: Path) -> None:
    [src] = (SHARED / "gpu" / "max_autotune" / "trace").glob("*.log")
    log = tmp_path / src.name
    _cut(src, log, 2190)
    trace = traceview.load(str(log))
    [u] = unfinished_compiles(trace)
    assert (u["compile_id"], u["phase"], u["innermost_span"]) == ("0/0", "inductor code_gen", "Scheduler.fused_nodes")
    assert u["open_spans"][:3] == ["dynamo", "entire_frame_compile", "compile_attempt_0"]
    assert u["running_s"] == 9.655 and not u["behind"] and u["others"] == []
    report = build_report(trace)
    text = render_text(report, width=200)
    assert "findings: 1 unfinished compile" in text
    assert (
        "[0/0] a module via torch.compile(model), called at train.py:41 `cm(x)` in inductor code_gen for 9.65s "
        "up to the log's last line (innermost open span: Scheduler.fused_nodes)"
    ) in text
    # the compile account's seconds: the open compile up to the log's last line, said so
    assert "COMPILE TIME  9.65s in all (1 unfinished compile counted up to the capture's end)" in text
    assert "  process: 1 compiles (1 never ended), 9.65s" in text
    # the open spans are in no time: no compile-time autotuning counted for the cut compile
    assert report["compile_time"]["phases_s"]["autotuning"] == 0


def test_a_rank_cut_inside_a_compile_the_others_finished_is_behind(tmp_path: Path) -> None:
    for f in (FIXTURES / "corpus" / "multirank4" / "trace").glob("*.gz"):
        if "_rank_1_" in f.name:
            _cut(f, tmp_path / f.name.removesuffix(".gz"), 500)
        else:
            shutil.copy(f, tmp_path / f.name)
    report = build_report(traceview.load(str(tmp_path)))
    [u] = report["unfinished_compiles"]
    assert (u["rank"], u["compile_id"], u["phase"], u["behind"]) == (1, "0/0", "AOTAutograd", True)
    assert [o["rank"] for o in u["others"]] == [0, 2, 3]
    assert u["code"]["qualname"] == "TinyNet.forward"
    text = render_text(report, width=200)
    assert "findings: 1 unfinished compile (1 behind the other ranks: likely hang)" in text
    assert "rank 1 [0/0] TinyNet.forward (multirank4.py:30) in AOTAutograd for " in text
    [f] = [f for f in findings_from_report(report) if f.kind == "unfinished"]
    assert findings_from_report(report)[0] is not None and findings_from_report(report)[0].kind == "unfinished"
    assert f.rank == 1 and f.compile_id == "0/0"
    assert f.summary[0].startswith("others: ranks 0,2,3 finished [0/0], ")
    assert f.summary[1].startswith("next: a likely hang: this rank is behind the others")


def test_a_whole_run_has_no_unfinished_compile() -> None:
    assert unfinished_compiles(traceview.load(FIXTURES / "corpus" / "multirank4" / "trace")) == []
