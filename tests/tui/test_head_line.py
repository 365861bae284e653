"""The head line is computed once (traceview.analyze.judge.head_lines, kept in the report's
`head`) and every view prints it as it is: on every real run under fixtures/ (the CPU
fixtures, the corpus, the GPU runs), the UI's header says what the summary's head says, and
`watch`'s digest is the summary's head."""

from __future__ import annotations

from pathlib import Path

import pytest

import traceview
from tests.conftest import FIXTURES
from traceview.output.report import build_report
from traceview.output.summary import render_head, render_text
from traceview.tui.findings_view import header_text
from traceview.tui.report_model import ReportModel

RUNS = sorted(
    p for pattern in ("*/trace", "corpus/*/trace", "gpu/*/trace", "gpu_ablation/*/trace") for p in FIXTURES.glob(pattern)
)
WIDE = 10_000  # no line wrapped: the lines compared as the report keeps them


def _summary_head(text: str) -> list[str]:
    """The summary's lines between its title's rule and the first blank line."""
    lines = text.splitlines()
    assert lines[1].startswith("=")
    return lines[2 : lines.index("") if "" in lines else len(lines)]


def test_every_run_is_swept() -> None:
    # the sweep below is not vacuous: the CPU fixtures, the corpus and the GPU runs are in it
    names = {str(p.parent.relative_to(FIXTURES)) for p in RUNS}
    assert {"multirank", "corpus/multirank4", "gpu/oom_compiled", "corpus/sequential_model"} <= names
    assert len(RUNS) >= 100


@pytest.mark.parametrize("trace_dir", RUNS, ids=lambda p: str(p.parent.relative_to(FIXTURES)))
def test_the_ui_header_says_the_summarys_head_line(trace_dir: Path) -> None:
    run = trace_dir.parent  # the run as a user opens it: its trace and text logs together
    report = build_report(traceview.load(run))  # one report per run, every view rendered from it
    head = _summary_head(render_text(report, width=WIDE))
    assert head and head[0].startswith("findings: ")
    assert head == report["head"]
    ui = header_text(ReportModel.of(report)).plain.splitlines()
    assert ui[1:] == head  # the line under what was read: the summary's head, word for word
    assert render_head(report, width=WIDE).splitlines()[2:] == head  # watch's digest
    # a finding that needs action is never left out of the head: "none" only when there is none
    acts = [f for f in report["findings"] if f["severity"] == "act"]
    assert head[0].startswith("findings: none") == (not acts), (head[0], [f["kind"] for f in acts])


def test_the_head_line_on_runs_where_the_ui_said_otherwise() -> None:
    # issue 44.10, each a real run: the header the UI counted itself said "rank 2 diverges"
    # where the findings say a stall, nothing of an OOM crash, and counted expected graph
    # breaks as sites to fix
    cases = {
        "corpus/multirank4": ["findings: ranks 0,1,3 stalled ~0.20s while rank 2 compiled alone, 1 graph break"],
        "gpu/oom_compiled": ["findings: out of device memory",
                             "expected: 1 function recompiled by design (nothing to fix)"],
        # ranks waiting in a collective for a lone recompile: said, not "none" (the COLLECTIVES finding)
        "corpus/collective_wait_lone_recompile": ["findings: rank 0 waited ~3.24s at a collective while rank 1 compiled alone"],
        "gpu/ddp2_buckets": ["findings: none that needs action",
                             "expected: DDPOptimizer split [4/0] into 4 submodules at DDP's gradient buckets (by design, not graph breaks)",
                             "expected: 2 graph breaks of DDP's own wrapper (nothing of yours to avoid)"],
    }
    for name, want in cases.items():
        report = build_report(traceview.load(FIXTURES / name))
        ui = header_text(ReportModel.of(report)).plain.splitlines()
        assert ui[1:] == want, name
        assert "diverge" not in header_text(ReportModel.of(report)).plain


def test_ddps_own_breaks_in_the_ui_are_tagged_expected_with_no_pointer_to_the_ui() -> None:
    # DDP's own graph breaks (gpu/ddp2_buckets, torch 2.11 on 2 GPUs) are expected: the UI's list
    # tags them as the summary's section does, not as GRAPH BREAKs to fix; their short why
    # sends the summary's reader to the details ("--json, traceview open"), but inside the UI,
    # which shows the details beside it, no such pointer (issue 44.10)
    from traceview.tui.finding_rows import findings_from_report
    from traceview.tui.findings_view import finding_detail, finding_prompt

    report = build_report(traceview.load(FIXTURES / "gpu" / "ddp2_buckets"))
    rows = findings_from_report(report)
    breaks = [f for f in rows if f.kind == "graph_break"]
    assert len(breaks) == 2 and all(f.severity == "expected" and f.tag == "EXPECTED GRAPH BREAK" for f in breaks)
    for f in breaks:
        prompt, detail = finding_prompt(f).plain, finding_detail(f).plain
        assert prompt.startswith("EXPECTED GRAPH BREAK  ")
        assert "nothing of yours to avoid" in prompt and "details:" not in prompt + detail + f.as_text()
        assert "reducer" in detail  # the whole why (its details), beside it
    text = render_text(report, width=WIDE)
    assert "EXPECTED GRAPH BREAKS  2 distinct, 6 in all" in text
    assert text.count("nothing of yours to avoid (details: --json, traceview open)") == 2
    assert "details:" not in str(report["findings"])  # the typed findings carry no pointer
