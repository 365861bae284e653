"""Issue 44 item 8: advice that must follow what the log shows, each on a real run.

* max-autotune: when GEMM autotuning took most of the compile, or a compile ended inside it,
  the finding names max-autotune, its seconds and what it bought (each op's winner, from the
  autotuning spans' choices stats); where ATen won every op, that it bought nothing
  (fixtures/gpu/max_autotune_fp16_*, stop_backward_autotuning: torch 2.11 on an H200/H100;
  fixtures/corpus/max_autotune_cpu*: torch 2.13 CPU, bmm against the C++ GEMM template);
* torch's test-only fault injection (`inject_relu_bug_TESTING_ONLY`, logged in the compile's
  compilation_metrics `inductor_config`) is the cause of the failure, not a bug to minify
  (fixtures/corpus/inject_relu_bug: C++; fixtures/gpu/inject_relu_bug_triton: Triton);
* the failure's decisive line is shown: the `SyntaxError` after "Failed to import", the C++
  compiler's `error:` line;
* a graph break whose config fix (capture_dynamic_output_shape_ops, capture_scalar_outputs)
  the run applied after torch._dynamo.reset() is said as applied
  (fixtures/corpus/reset_break_config_fix).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

import traceview
from traceview.analyze.finding import findings_of
from traceview.output.report import build_report
from traceview.output.summary import render_text

from ..conftest import FIXTURES

CORPUS = FIXTURES / "corpus"
GPU = FIXTURES / "gpu"


def _report(path: Path) -> dict[str, Any]:
    return build_report(traceview.load(path))


def _of(report: dict[str, Any], kind: str) -> list:
    return [f for f in findings_of(report) if f.kind == kind]


def _records(path: Path, key: str) -> list[dict[str, Any]]:
    """torch's own records of one kind, read straight from the trace files (the oracle)."""
    out = []
    for p in sorted((path / "trace").iterdir()):
        text = gzip.open(p, "rt").read() if p.suffix == ".gz" else p.read_text()
        for line in text.splitlines():
            if f'{{"{key}": ' in line and "] {" in line:
                out.append(json.loads(line[line.index("] {") + 2 :])[key])
    return out


def _autotune_winners(path: Path) -> list[str | None]:
    """The best_kernel of each `*_template_autotuning` span in the trace, in order (None
    where the span never ended): torch's own stats, read from the raw chromium events."""
    text = "".join(gzip.open(p, "rt").read() if p.suffix == ".gz" else p.read_text() for p in sorted((path / "trace").iterdir()))
    begins = len(re.findall(r'"name": "\w+_template_autotuning",\n\t"ts": [\d.]+,\n\t"args": \{[^}]*\},\n\t"ph": "B"', text))
    winners: list[str | None] = re.findall(r'best_kernel\\": \\"(\w+)\\"', text)
    return winners + [None] * (begins - len(winners))


# --------------------------------------------------------------------------- max-autotune


def test_max_autotune_says_what_each_op_won_and_its_seconds() -> None:
    """GPU, float16 MLP training step under max-autotune-no-cudagraphs: the forward's two
    addmm were won by Triton templates, the backward's three mm by ATen's mm (the spans'
    stats); 53.33 s of the 73.02 s compile went to autotuning (COMPILE TIME's phases: 9.21 s in
    Inductor, 44.12 s in the backward)."""
    path = GPU / "max_autotune_fp16_train"
    report = _report(path)
    assert _autotune_winners(path) == ["triton_mm_12", "triton_mm_28", "mm", "mm", "mm"]
    m = report["compile_time"]["max_autotune"]
    ph = report["compile_time"]["phases_s"]
    assert m["seconds"] == pytest.approx(ph["autotuning"] + ph["backward_autotuning"], abs=1e-3) == pytest.approx(53.33, abs=0.01)
    # (every backward piece counted: 73.03 s, the compile account's total)
    assert m["compile_s"] == report["compile_time"]["total_s"] == pytest.approx(73.03, abs=0.01)
    assert [(o["winner"], o["winner_kind"]) for o in m["ops"]] == [
        ("triton_mm_12", "Triton"), ("triton_mm_28", "Triton"), ("mm", "ATen"), ("mm", "ATen"), ("mm", "ATen")]
    [f] = _of(report, "autotune")
    assert f.severity == "fact" and f.cost.seconds == pytest.approx(53.33, abs=0.01)
    assert f.claim == ('max-autotune (mode="max-autotune-no-cudagraphs"): 53.33s of 73.03s compile time (73%) went to '
                       "autotuning 5 GEMMs; it bought Triton kernels for 2 of the 5 ops it finished (ATen's kernel won "
                       "the other 3)")
    won = [t for label, t in f.lines if label == "won:"]
    assert won[2] == ("[0/0] mm(512x1024, 1024x4096) float16: mm (ATen) 0.0115 ms, best Triton triton_mm_58 "
                      "0.0115 ms; 25.73s autotuning")
    text = render_text(report, width=200)
    assert "MAX-AUTOTUNE  GEMM autotuning took most of the compile time" in text


def test_a_stop_inside_autotuning_names_max_autotune_first() -> None:
    """GPU, stopped by `timeout -s TERM` (torchrun) while the backward autotunes mm(1024x128,
    128x4096): of the two finished autotunings one was won by Triton, one by ATen's addmm; the
    stop's advice says max-autotune before raising the limit."""
    path = GPU / "stop_backward_autotuning"
    report = _report(path)
    assert _autotune_winners(path) == ["triton_mm_16", "addmm", None]
    m = report["compile_time"]["max_autotune"]
    assert (m["finished"], m["open"], m["aten_won"]) == (2, 1, 1)
    assert [(s["compile_id"], s["part"], s["op"], s["shapes"]) for s in m["stopped_in"]] == [
        ("0/0", "backward", "mm", "1024x128, 128x4096")]
    [f] = _of(report, "autotune")
    assert f.severity == "act"  # the job was cut inside it
    assert ("ended in:", "[0/0] backward was autotuning mm(1024x128, 128x4096) when the log ends "
                         "(see UNFINISHED COMPILES)") in f.lines
    [stop] = _of(report, "stop")
    labels = [label for label, _ in stop.lines]
    assert labels.index("first:") < labels.index("next:")
    first = dict(stop.lines)["first:"]
    assert first.startswith("it was max-autotune's autotuning: 40.20s of 55.23s compile time went to it, and it bought "
                            "Triton kernels for 1 of the 2 ops it finished (ATen's kernel won the other 1)")


def test_max_autotune_that_bought_nothing_says_drop_it() -> None:
    """GPU, float16 4096x4096 GEMMs: ATen's mm won all 4 autotunings (the spans' stats);
    21.76 s of the 36.03 s compile: max-autotune bought nothing, drop it."""
    path = GPU / "max_autotune_square_train"
    assert _autotune_winners(path) == ["mm", "mm", "mm", "mm"]
    report = _report(path)
    m = report["compile_time"]["max_autotune"]
    assert (m["finished"], m["aten_won"], m["open"]) == (4, 4, 0)
    [f] = _of(report, "autotune")
    assert f.severity == "act" and f.facet == "nothing_bought"
    # the mode, as the FX graph cache key lists Inductor's config (max_autotune, coordinate descent, no CUDA graphs)
    assert (m["mode"], m["config"]["triton.cudagraphs"]) == ("max-autotune-no-cudagraphs", False)
    assert f.claim == ('max-autotune (mode="max-autotune-no-cudagraphs"): 21.76s of 36.04s compile time (60%) went to '
                       "autotuning 4 GEMMs; it bought nothing on this run: ATen's kernel won every op it finished "
                       "autotuning (4 of 4)")
    assert f.next_step == ('drop mode="max-autotune-no-cudagraphs": the default mode uses the ATen kernel without '
                           "autotuning it, saving ~21.76s of compile")
    assert "findings: max-autotune took 21.76s of the compile time" in render_text(report, width=200)


def test_a_stop_in_autotuning_that_bought_nothing_leads_with_dropping_it() -> None:
    """The issue's case: stopped (timeout -s TERM, a sleep planted at the first choice of the
    backward's second autotuning) after three autotunings all won by ATen's mm; the fourth
    never ended. The finding says max-autotune, that it bought nothing, and where it ended."""
    path = GPU / "max_autotune_square_stopped"
    assert _autotune_winners(path) == ["mm", "mm", "mm", None]
    report = _report(path)
    [f] = _of(report, "autotune")
    assert f.severity == "act" and f.facet == "nothing_bought"
    assert "it bought nothing on this run: ATen's kernel won every op it finished autotuning (3 of 3)" in f.claim
    assert dict(f.lines)["ended in:"] == ("[0/0] backward was autotuning mm(4096x4096, 4096x4096) when the log ends "
                                         "(see UNFINISHED COMPILES)")
    [u] = _of(report, "unfinished")
    assert dict(u.lines)["max-autotune:"].startswith(
        "it was max-autotune's autotuning: 11.98s of 28.19s compile time went to it, and it bought nothing on this run")


def test_cpu_max_autotune_autotunes_bmm_against_the_cpp_template() -> None:
    """torch 2.13 CPU Inductor autotunes bmm under max-autotune (ATen's bmm against
    cpp_CppMicroGemmFP32Vec): each finished op's winner is the span's stats' best_kernel, ATen
    or the C++ template; no Triton choice competes on CPU."""
    path = CORPUS / "max_autotune_cpu"
    winners = _autotune_winners(path)
    assert len(winners) == 4 and all(w == "bmm" or w.startswith("cpp_CppMicroGemm") for w in winners)
    m = _report(path)["compile_time"]["max_autotune"]
    assert [o["winner"] for o in m["ops"]] == winners
    assert [o["winner_kind"] for o in m["ops"]] == ["ATen" if w == "bmm" else "C++ template" for w in winners]
    assert not m["triton_choices"] and m["aten_won"] == winners.count("bmm")
    assert m["mode"] == "max-autotune"  # the program's torch.compile(model, mode="max-autotune")


# ------------------------------------------------------------------ test-only fault injection


def test_torch_test_only_fault_injection_is_the_cause_not_a_torch_bug() -> None:
    """cpp.inject_relu_bug_TESTING_ONLY = 'compile_error' (logged in the failed compile's
    compilation_metrics inductor_config): the cause is the config, the next step removes it;
    no minifier, in the failure and in the crash it raised."""
    path = CORPUS / "inject_relu_bug"
    [metrics] = _records(path, "compilation_metrics")
    assert json.loads(metrics["inductor_config"])["cpp.inject_relu_bug_TESTING_ONLY"] == "compile_error"
    report = _report(path)
    [fail] = report["failures"]
    assert fail["testing_only_config"] == "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'compile_error'"
    for f in _of(report, "failure") + _of(report, "crash"):
        cause = dict(f.lines)["cause:"]
        assert cause.startswith("the run's own config asked for this failure: "
                                "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'compile_error'")
        assert "TORCHDYNAMO_REPRO_AFTER" not in f.next_step
        assert f.next_step.startswith("remove torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY")


def test_an_inductor_failure_without_injection_keeps_the_minifier() -> None:
    """The control: fixtures/corpus/inductor_only_failure (no C++ compiler) logs the same
    setting as None: no injection, the minifier step stays; nor do the other Inductor and
    backend failures of the fixtures turn any test-only setting on."""
    for path in (CORPUS / "inductor_only_failure", FIXTURES / "inductor_error", FIXTURES / "backend_error"):
        configs = [json.loads(m["inductor_config"]) for m in _records(path, "compilation_metrics")]
        assert configs and all(c["cpp.inject_relu_bug_TESTING_ONLY"] is None for c in configs)
        assert traceview.load(path / "trace").compiles["testing_only_config"].null_count() == len(configs)
    report = _report(CORPUS / "inductor_only_failure")
    [fail] = report["failures"]
    assert fail["testing_only_config"] is None
    [f] = _of(report, "failure")
    assert "cause:" not in dict(f.lines) and "TORCHDYNAMO_REPRO_AFTER=aot" in f.next_step


def test_the_decisive_line_of_a_failure_is_shown() -> None:
    """Triton (GPU): "Failed to import <module>" then the SyntaxError; C++ (CPU): the
    compiler's first `error:` line with the source line it quotes."""
    [gpu] = _of(_report(GPU / "inject_relu_bug_triton"), "failure")
    head = gpu.lines[0][1]
    assert head == ("RuntimeError: Failed to import cucnwsvq2gaxhpfwo3np32br5hdh25mdlhmfhdq7txigixqouobo.py: SyntaxError: "
                    "invalid syntax (cucnwsvq2gaxhpfwo3np32br5hdh25mdlhmfhdq7txigixqouobo.py, line 25)")
    assert "triton.inject_relu_bug_TESTING_ONLY = 'compile_error'" in dict(gpu.lines)["cause:"]
    [cpu] = _of(_report(CORPUS / "inject_relu_bug"), "failure")
    assert re.fullmatch(r"CppCompileError: C\+\+ compile error: \w+\.main\.cpp:14: error: ‘compile’ was not declared in "
                        r"this scope \(`auto tmp1 = compile error!;`\)", cpu.lines[0][1])


# ------------------------------------------------------------------ a fix applied after a reset


def test_a_config_fix_applied_after_a_reset_is_said_as_applied() -> None:
    """Round 1 breaks at torch.nonzero (gb0036) and .item() (gb0124); after the reset the run
    sets both flags and round 2 compiles each function without a break: torch's records say
    so (round 2's compilation_metrics: the flags on, no graph break)."""
    path = CORPUS / "reset_break_config_fix"
    metrics = _records(path, "compilation_metrics")
    second = [m for m in metrics if json.loads(m["dynamo_config"])["capture_scalar_outputs"]]
    assert [(m["compile_id"], m["co_name"]) for m in second] == [("0/0", "select_positive"), ("1/0", "rescale")]
    assert all(json.loads(m["dynamo_config"])["capture_dynamic_output_shape_ops"] for m in second)
    # round 1: 6 compiles (the two functions and their resume functions); round 2: no restart
    assert len(metrics) == 8 and not any(m["restart_reasons"] for m in second)
    report = _report(path)
    breaks = {(g["function"], g["gb_id"]): g["fixed_later"] for g in report["graph_breaks"]}
    assert {k: (v["setting"], v["compile_id"], v["occurrence"]) for k, v in breaks.items()} == {
        ("select_positive", "gb0036"): ("torch._dynamo.config.capture_dynamic_output_shape_ops = True", "0/0", 2),
        ("rescale", "gb0124"): ("torch._dynamo.config.capture_scalar_outputs = True", "1/0", 2),
    }
    fs = _of(report, "graph_break")
    assert [f.severity for f in fs] == ["fact", "fact"] and all(f.next_step is None for f in fs)
    assert all("fix:" not in dict(f.lines) for f in fs)
    fixed = [dict(f.lines)["fixed:"] for f in fs]
    assert ("applied later in this run: after torch._dynamo.reset(), torch._dynamo.config.capture_scalar_outputs = True "
            "was set and rescale compiled once as [1/0 #2] with no break at this line: the fix worked, nothing left to do") in fixed
    text = render_text(report, width=200)
    assert "findings: none that needs action" in text
    assert "fixed: 2 graph breaks, gone after the run applied torch's config fix" in text
    # the resume functions' recompiles (round 1: torch counts 1 each) are that fix's too: never advised again
    resumes = {f.code: f for f in _of(report, "expected")}
    assert sorted(resumes) == ["torch_dynamo_resume_in_rescale_at_22 (reset_break_config_fix.py:22)",
                               "torch_dynamo_resume_in_select_positive_at_17 (reset_break_config_fix.py:17)"]
    [proc] = json.loads((path / "oracle.json").read_text())["processes"]
    assert sorted((r["function"], r["recompiles"]) for r in proc["per_code"] if r["function"].startswith("torch_dynamo_resume")) == [
        ("torch_dynamo_resume_in_rescale_at_22", 1), ("torch_dynamo_resume_in_select_positive_at_17", 1)]
    fix = dict(resumes["torch_dynamo_resume_in_rescale_at_22 (reset_break_config_fix.py:22)"].lines)["fix:  "]
    assert fix == ("this is the resume function of the graph break at line 22 of rescale, whose fix the run applied later "
                   "(torch._dynamo.config.capture_scalar_outputs = True, after torch._dynamo.reset()): see GRAPH BREAKS "
                   "FIXED LATER; nothing left to do")


def test_a_break_whose_fix_was_never_applied_keeps_its_fix() -> None:
    """The control: moe_nonzero_break never sets the flag: its gb0036 break keeps torch's fix."""
    report = _report(CORPUS / "moe_nonzero_break")
    gs = [g for g in report["graph_breaks"] if g["gb_id"] == "gb0036"]
    assert [g["line"] for g in gs] == [24, 18] and all(g["fixed_later"] is None for g in gs)
    fs = [f for f in _of(report, "graph_break") if "gb0036" in f.claim]
    assert len(fs) == 2 and all(f.severity == "act" for f in fs)
    assert any(("fix:", g["advice"]) in f.lines for f in fs for g in gs if not g["frame_skipped"])


def test_a_cache_with_no_lookup_logged_is_not_printed_as_zero_hits_zero_misses() -> None:
    """inject_relu_bug's compile failed in Inductor before its FX graph cache lookup was
    logged (torch counted one, `fxgraph_cache_miss`, but the trace has no fx_graph_cache_*
    record); its AOTAutograd miss was logged, as torch counted it (`autograd_cache_miss`)."""
    path = CORPUS / "inject_relu_bug"
    [proc] = json.loads((path / "oracle.json").read_text())["processes"]
    assert proc["counters"]["aot_autograd"]["autograd_cache_miss"] == 1
    assert not [r for r in _records(path, "artifact") if r["name"].startswith("fx_graph_cache_")]
    lines = [ln.strip() for ln in render_text(_report(path), width=400).splitlines() if ln.strip().startswith("cache:")]
    # the FX graph cache: Inductor compiled a graph, no lookup was logged: "not logged", never "0 / 0"
    assert lines == ["cache: FX graph not logged (Inductor ran on 1 graph, no lookup recorded: a cache turned off, a torch "
                     "that does not log it, or compiles that ended first; the trace alone cannot tell), AOTAutograd 0 hits / "
                     "1 misses (0% hits)"]


def test_cpu_max_autotune_stopped_in_the_backward() -> None:
    """torch 2.13 CPU, stopped by `timeout -s TERM` with a sleep planted at the first choice of
    the backward's second autotuning: three autotunings ended (the stats' winners), the fourth
    is open; the compile's backward is unfinished, inside it."""
    path = CORPUS / "max_autotune_cpu_stopped"
    winners = _autotune_winners(path)
    assert len(winners) == 4 and winners[-1] is None and all(winners[:3])
    report = _report(path)
    m = report["compile_time"]["max_autotune"]
    assert (m["finished"], m["open"], m["aten_won"]) == (3, 1, winners.count("bmm"))
    assert [(s["compile_id"], s["part"], s["op"]) for s in m["stopped_in"]] == [("0/0", "backward", "bmm")]
    [f] = _of(report, "autotune")
    assert f.severity == "act"
