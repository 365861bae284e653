"""`traceview summary`: the text at 80 columns (sections in order, nothing wider than the
terminal, log text printed as data) and `--json` (its keys and types: tests/output/test_report_schema.py)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import traceview
from tests.conftest import FIXTURES, GPU, SHARED, needs_shared
from traceview.analyze.judge import judge
from traceview.cli import main
from traceview.output.report import build_report
from traceview.output.summary import render_text

SECTIONS = ("RANK STALLS", "RECOMPILES", "EXPECTED RECOMPILES", "GRAPH BREAKS", "FAILED COMPILES", "RANK DIVERGENCE", "SLOW COMPILES",
            "COMPILE TIME", "PER RANK", "INPUT")
# the tier of each section: what needs action (ranked by cost among themselves), then what is
# expected, then facts, then the figures
TIER = {"RANK STALLS": 0, "RECOMPILES": 0, "GRAPH BREAKS": 0, "FAILED COMPILES": 0, "RANK DIVERGENCE": 0, "EXPECTED RECOMPILES": 1,
        "SLOW COMPILES": 2, "COMPILE TIME": 3, "PER RANK": 4, "INPUT": 5}


@cache
def report_of(path: str) -> dict[str, Any]:
    return build_report(traceview.load(path))


def sections(text: str) -> list[str]:
    return [line.split("  ")[0] for line in text.splitlines() if line.split("  ")[0] in SECTIONS]


def summary_text(path: Path | str, capsys: pytest.CaptureFixture[str], width: int = 80) -> str:
    assert main(["summary", str(path), "--width", str(width), "--no-cache"]) == 0
    return capsys.readouterr().out


def summary_json(path: Path | str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["summary", str(path), "--json", "--no-cache"]) == 0
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------ text
def test_recompiles_summary_at_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    out = summary_text(FIXTURES / "recompiles", capsys)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    # the recompile limit's refusal is the storm's own (one root cause): not a second finding
    assert sections(out) == ["RECOMPILES", "EXPECTED RECOMPILES", "COMPILE TIME", "PER RANK", "INPUT"]
    assert lines[0] == "traceview: 13 compiles from 2 log files"
    # what needs action apart from what torch.compile does by design (a float's and a bool's
    # single recompile under automatic dynamic shapes)
    assert lines[2] == "findings: 1 recompiling function (1 hit the limit)"
    assert lines[3] == "expected: 2 functions recompiled by design (nothing to fix)"
    storm = out[out.index("\nRECOMPILES") : out.index("COMPILE TIME")]
    assert "shape_storm (recompiles.py:12): 9 compiles" in storm[: storm.index("EXPECTED RECOMPILES")]
    # most costly first: scaled (0.15s) before flagged (0.09s)
    expected = storm[storm.index("EXPECTED RECOMPILES") :]
    assert expected.index("scaled (recompiles.py:16)") < expected.index("flagged (recompiles.py:20)")
    flat = " ".join(storm.split())
    assert "9 compiles, 0.53s; HIT THE RECOMPILE LIMIT (8) at [0/8], runs eagerly from then on" in flat
    assert "cause: dimension 1 of x varies (seen: 2, 3, 4, 5, 6, 7, …), 8 recompiles" in storm
    assert "call torch._dynamo.mark_dynamic(x, 1)" in flat
    assert "the code forces dynamic=False" in flat
    assert "cause: the Python float scale changes between calls (compiled for 1.0), 1 recompile" in flat
    assert "cause: the bool flag causal changes between calls (compiled for True), 1 recompile" in flat
    assert "[0/8] shape_storm (recompiles.py:12): recompile limit" not in out  # said once, in the storm


def test_graph_breaks_summary(capsys: pytest.CaptureFixture[str]) -> None:
    out = summary_text(FIXTURES / "graph_breaks", capsys)
    # the break that sent its frame to eager first (its failed compile is the break's own: one root
    # cause); Block.forward: block 0's input has no grad, the others' do: one compile per
    # requires_grad value, by design
    assert sections(out) == ["GRAPH BREAKS", "EXPECTED RECOMPILES", "COMPILE TIME", "PER RANK", "INPUT"]
    gb = out[out.index("GRAPH BREAKS") : out.index("EXPECTED RECOMPILES")]
    order = [gb.index(f"graph_breaks.py:{n} in ") for n in (48, 16, 21, 27)]
    assert order == sorted(order)
    assert "graph_breaks.py:48 in forward (its frame starts at line 45) [gb0025], 1x" in gb
    assert "WHOLE FRAME RAN EAGERLY: forward (graph_breaks.py:45): graph break inside a" in gb


def test_backend_error_and_multirank_summaries(capsys: pytest.CaptureFixture[str]) -> None:
    out = summary_text(FIXTURES / "backend_error", capsys)
    assert sections(out) == ["FAILED COMPILES", "GRAPH BREAKS", "COMPILE TIME", "PER RANK", "INPUT"]
    assert "[0/0] add_one (backend_error.py:20): backend compiler failure" in out
    assert "backend='failing_backend' raised: RuntimeError: planted backend failure" in out
    assert "[1/0] checked (backend_error.py:26): user exception (Unsupported)" in out
    out = summary_text(FIXTURES / "multirank", capsys)
    # rank 1's lone recompile: the stall of rank 0 it costs, the divergence it is and its fix in one finding
    assert sections(out) == ["RANK STALLS", "GRAPH BREAKS", "SLOW COMPILES", "COMPILE TIME", "PER RANK", "INPUT"]
    assert "rank 0 waited ~0.15s at its next collective while rank 1 recompiled [0/1]" in " ".join(out.split())
    assert "RANK DIVERGENCE" not in out and "RECOMPILES" not in out


def test_text_log_only_summary(capsys: pytest.CaptureFixture[str]) -> None:
    out = summary_text(FIXTURES / "recompiles" / "torch_logs.txt", capsys)
    assert out.splitlines()[0] == "traceview: 13 compile ids in the text log from 1 log file"
    assert "text log only: no compile times, cache or status" in out
    # flagged's bool: expected; scaled's float: the text does not say whether dynamic=False
    assert sections(out) == ["RECOMPILES", "EXPECTED RECOMPILES", "INPUT"]
    assert out.index("scaled (recompiles.py:16)") < out.index("EXPECTED RECOMPILES") < out.index("flagged (recompiles.py:20)")
    assert "HIT THE RECOMPILE LIMIT (8) at [0/8]" in " ".join(out.split())


def _inputs() -> list[Path]:
    out = [FIXTURES / n for n in ("simple", "recompiles", "graph_breaks", "backend_error", "training", "multirank")]
    out += [FIXTURES / n / "torch_logs.txt" for n in ("recompiles", "graph_breaks", "multirank")]
    if SHARED.is_dir():
        out += [GPU / n for n in ("train_dynamic", "max_autotune", "reduce_overhead", "big")]
        out += [SHARED / "peer-tlparse" / n for n in ("multi_rank_logs", "comp_failure.log", "comp_metrics.log")]
    return out


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("width", [80, 60])
def test_no_line_wider_than_the_terminal(path: Path, width: int) -> None:
    text = render_text(report_of(str(path)), width=width)
    too_wide = [line for line in text.splitlines() if len(line) > width]
    assert not too_wide
    tiers = [TIER[s] for s in sections(text) if s in TIER]
    assert tiers == sorted(tiers)  # what needs action first, then what is expected, then facts
    assert "\t" not in text


@needs_shared
def test_train_dynamic_summary(capsys: pytest.CaptureFixture[str]) -> None:
    out = summary_text(GPU / "train_dynamic", capsys)
    assert max(len(line) for line in out.splitlines()) <= 80
    # automatic dynamic shapes' one recompile (the config says dynamic=None): expected
    # the break that sent a whole frame to eager is one finding (its failed compile folded in);
    # what needs action first, the expected recompile after it, a slow compile last
    assert sections(out) == ["GRAPH BREAKS", "EXPECTED RECOMPILES", "SLOW COMPILES", "COMPILE TIME", "PER RANK", "INPUT"]
    assert "forward (gpt.py:19): 2 compiles" in out
    assert "cause: dimension 1 of x varies (seen: 128, 256), 1 recompile" in out
    assert "fix:   nothing to fix: automatic dynamic shapes recompiled it once" in out
    assert "gpt.py:49 in forward (its frame starts at line 42) [gb0025], 1x" in out
    assert "WHOLE FRAME RAN EAGERLY: forward (gpt.py:42): graph break inside a loop" in out
    assert "torch/optim/optimizer.py:80 in _use_grad [gb0025], 2x" in out
    flat = " ".join(out.split())
    # the 0.19s of CachingAutotuner.benchmark_all_configs ran at the kernels' first calls,
    # after the compiles: not part of Inductor's time
    # the backward: the window torch timed its bwd_compilation_metrics in (end - start:
    # 1.227834 s; Inductor's part of it, inductor_compile_time_s, is 1.218264 s)
    assert "phases: dynamo 2.67s, aot 3.72s, inductor 12.07s (of which codegen 8.89s), backward 1.23s" in flat
    assert "autotune: 0.19s at run time (first calls of compiled kernels; not compile time)" in flat
    assert "cache: FX graph 0 hits / 5 misses (0% hits)" in out


@needs_shared
def test_max_autotune_summary_shows_autotuning(capsys: pytest.CaptureFixture[str]) -> None:
    out = summary_text(GPU / "max_autotune", capsys)
    flat = " ".join(out.split())
    # autotuning (4.89s) ran inside codegen (8.97s), inside Inductor (10.28s): said as part of
    # codegen, never as a part that adds up to more than its whole
    assert "inductor 10.28s (of which codegen 8.97s, 4.89s of it autotuning)" in flat
    ct = summary_json(GPU / "max_autotune", capsys)["compile_time"]
    assert ct["phases_s"]["autotuning"] == ct["phases_s"]["autotuning_in_codegen"] == pytest.approx(4.892391)
    assert ct["phases_s"]["autotuning"] <= ct["phases_s"]["codegen"] <= ct["phases_s"]["inductor"]
    assert ct["top"][0]["autotuning_s"] == 4.892  # (rounded to ms in the report)
    assert "autotune: addmm(512x4096, 512x1024, 1024x4096) float16: 21 choices, best bias_addmm 0.0119 ms" in flat
    assert "precompile 3.83s, benchmark 0.22s, 1 choice failed" in flat


# ------------------------------------------------------------------ log text is data
def test_markup_and_escapes_in_log_text_print_harmlessly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = (FIXTURES / "graph_breaks" / "torch_logs.txt").read_text()
    evil = "Failed to trace \x1b[31mbuiltin[bold] operator\x1b[0m"
    assert "Failed to trace builtin operator" in src
    log = tmp_path / "torch_logs.txt"
    log.write_text(src.replace("Failed to trace builtin operator", evil))
    out = summary_text(log, capsys)
    assert "\x1b" not in out
    assert "Failed to trace ^[[31mbuiltin[bold] operator^[[0m" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    rep = summary_json(log, capsys)
    assert any(g["reason"] == evil for g in rep["graph_breaks"])  # the data itself is kept


def test_control_characters_in_any_field_are_made_visible() -> None:
    rep = json.loads(json.dumps(report_of(str(FIXTURES / "recompiles"))))
    rep["recompiles"][0]["function"] = "sha\x1b]0;pwned\x07pe\tstorm"
    rep["recompiles"][0]["causes"][0]["fix"] = "[red]fix[/red] \x9b2J"
    rep["findings"] = [f.to_json() for f in judge(None, report=rep)]  # judged again from the changed data
    text = render_text(rep, width=80)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)
    assert "sha^[]0;pwned\\x07pe storm" in text
    assert "[red]fix[/red] \\x9b2J" in text




# ------------------------------------------------------------------ compile attempts
@needs_shared
def test_a_restarted_compile_is_shown_with_its_attempt(capsys: pytest.CaptureFixture[str]) -> None:
    """comp_metrics.log (tlparse's input): 0/0 and 1/0 restarted after a graph break, and
    their graph and metrics were logged by attempt 1: tlparse names them `0/0_1`, `1/0_1`
    (folders `-_0_0_1`, `-_1_0_1`) and 2/0 `2/0` (`-_2_0_0`). Every view shows those
    names; the `compile_id` key stays without the attempt."""
    from traceview.tui.frames_view import compile_detail, compile_label
    from traceview.tui.model import TraceModel

    path = SHARED / "peer-tlparse" / "comp_metrics.log"
    out = summary_text(path, capsys)
    assert "[0/0_1] fn (test_misc.py:9549)" in out
    assert "[1/0_1] torch_dynamo_resume_in_fn_at_9551 (test_misc.py:9551)" in out
    assert "[2/0] torch_dynamo_resume_in_fn_at_9553 (test_misc.py:9553)" in out
    top = summary_json(path, capsys)["compile_time"]["top"]
    assert sorted((t["compile_id"], t["attempts"]) for t in top) == [("0/0", 2), ("1/0", 2), ("2/0", 1)]
    model = TraceModel.build(traceview.load(str(path)))
    rows = [model.compile_row(None, cid) for cid in ("0/0", "1/0", "2/0")]
    assert [compile_label(r, False).plain.split()[2] for r in rows if r] == ["0/0_1", "1/0_1", "2/0"]
    assert compile_detail(model, rows[0]).plain.startswith("[0/0_1] fn")


# ------------------------------------------------------------- fix named by torch's hint
def test_nonzero_break_fix_is_torchs_config_hint(capsys: pytest.CaptureFixture[str]) -> None:
    """moe_nonzero_break: torch.nonzero without capture_dynamic_output_shape_ops. torch's own
    counters (oracle.json) count the two breaks; the hint of gb0036 names the config setting,
    which the summary gives as the fix of both, the one in the loop (frame skipped) too."""
    d = FIXTURES / "corpus" / "moe_nonzero_break"
    counters = json.loads((d / "oracle.json").read_text())["processes"][0]["counters"]
    assert sum(counters["unimplemented"].values()) == 2 and sum(counters["graph_break"].values()) == 1
    assert all("gb0036" in k and "capture_dynamic_output_shape_ops = True" in k for k in counters["unimplemented"])
    setting = "torch._dynamo.config.capture_dynamic_output_shape_ops = True"
    rep = summary_json(d / "trace", capsys)
    gbs = rep["graph_breaks"]
    assert [(g["line"], g["gb_id"], g["frame_skipped"], g["config_fix"]) for g in gbs] == [
        (24, "gb0036", True, setting),
        (18, "gb0036", False, setting),
    ]
    assert gbs[0]["advice"].startswith(f"{setting} (torch's hint), which removes this break; otherwise: Dynamo cannot resume inside a loop")
    assert gbs[1]["advice"] == f"Enable tracing of dynamic shape operators with `{setting}`"
    text = summary_text(d / "trace", capsys, width=200)
    assert f"    fix: {setting} (torch's hint), which removes this break; otherwise: Dynamo cannot resume" in text
    assert f"    fix: Enable tracing of dynamic shape operators with `{setting}`" in text
    assert "    hint: Enable tracing" not in text
    # the failed compile of the skipped frame (the same break) says it too
    (fail,) = rep["failures"]
    assert fail["next_step"].startswith(f"{setting} (torch's hint) removes this break. Otherwise: The break is inside a loop")
    # a hint that names no config setting stays a hint (moe_nonzero_unbacked's gb0170)
    rep = summary_json(FIXTURES / "corpus" / "moe_nonzero_unbacked" / "trace", capsys)
    assert [(g["gb_id"], g["config_fix"]) for g in rep["graph_breaks"]] == [("gb0170", None)]
    text = summary_text(FIXTURES / "corpus" / "moe_nonzero_unbacked" / "trace", capsys, width=200)
    assert "    hint: This graph break is fundamental" in text


# ------------------------------------------------------------------ findings as JSON
@pytest.mark.parametrize("name", ["recompiles", "corpus/multirank4", "corpus/collective_wait_lone_recompile", "backend_error"])
def test_a_findings_json_is_its_fields_in_order(name: str) -> None:
    """Finding.to_json, built field by field (a finding on thousands of ranks holds as many
    compiles: dataclasses.asdict deep-copied each), is what asdict gives, keys in the same order."""
    import dataclasses

    findings = judge(None, report=report_of(str(FIXTURES / name)))
    assert findings
    for f in findings:
        want = dataclasses.asdict(f)
        want["title"] = f.title
        want["lines"] = [{"label": a, "text": b} for a, b in f.lines]
        want["more"] = [{"label": a, "text": b} for a, b in f.more]
        got = f.to_json()
        assert got == want and list(got) == list(want)
        assert json.dumps(got) == json.dumps(want)
