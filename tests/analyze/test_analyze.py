"""The analyzers on real torch runs: exact findings for what each fixture planted (see
fixtures/*/PROVENANCE.md) and for the GPU runs in ../shared/traces.

Every scenario is checked on the whole fixture (trace + text log), and where the text log was
configured for it, on the trace alone and on the text log alone: both must give the same
storms and graph breaks."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import traceview
from tests.conftest import FIXTURES, GPU, PEER, needs_shared, skip_without_shared
from tests.helpers_graphs import raw_envelopes
from traceview.analyze import compile_time as ct
from traceview.analyze.divergence import rank_divergence
from traceview.analyze.failures import categorize, failures
from traceview.analyze.hotspots import graph_break_hotspots
from traceview.analyze.storms import recompile_storms
from traceview.trace import Trace


@cache
def load(path: str, latest: bool = False) -> Trace:
    return traceview.load(path, latest=latest)


def fx(name: str, part: str = "") -> str:
    return str(FIXTURES / name / part) if part else str(FIXTURES / name)


def storm_of(storms: list[dict[str, Any]], function: str, rank: int | None = None) -> dict[str, Any]:
    hits = [s for s in storms if s["function"] == function and s["rank"] == rank]
    assert len(hits) == 1, [(s["function"], s["rank"]) for s in storms]
    return hits[0]


def failures_of(t: Trace) -> pl.DataFrame:
    return failures(t, caught=False)


def raw_line(file: str, lineno: int) -> str:
    with open(file, encoding="utf-8", errors="replace") as fh:
        for i, line in enumerate(fh, 1):
            if i == lineno:
                return line
    raise AssertionError(f"{file} has no line {lineno}")


# ------------------------------------------------------------------ recompile storms
RECOMPILES_INPUTS = [fx("recompiles"), fx("recompiles", "trace"), fx("recompiles", "torch_logs.txt")]


@pytest.mark.parametrize("path", RECOMPILES_INPUTS)
def test_shape_storm_hits_the_limit(path: str) -> None:
    storms = recompile_storms(load(path))
    assert storms[0]["function"] == "shape_storm"  # the limit hit ranks first
    s = storm_of(storms, "shape_storm")
    assert s["filename"].endswith("fixtures/programs/recompiles.py")
    assert s["line"] == 12
    # 0/0..0/7 compiled, 0/8 refused at the limit (PROVENANCE: "then 0/8 hits the limit")
    assert s["compiles"] == 9
    assert s["hit_recompile_limit"] is True
    assert s["recompile_limit"] == 8
    assert s["limit_compile_id"] == "0/8"
    assert s["forced_dynamic_false"] is True  # from the config; text only: from the repeated static guard
    assert len(s["causes"]) == 1
    c = s["causes"][0]
    assert (c["kind"], c["source"], c["dim"], c["count"]) == ("size", "x", 1, 8)
    assert c["text"] == "dimension 1 of x varies (seen: 2, 3, 4, 5, 6, 7, …)"
    assert c["values"] == [str(n) for n in range(2, 11)]
    assert "torch._dynamo.mark_dynamic(x, 1)" in c["fix"]
    assert "forces dynamic=False" in c["fix"]
    assert c["guard"] == "tensor 'x' size mismatch at index 1. expected 2, actual 3"
    assert s["compile_id"] == "0/1"


def test_shape_storm_counts_and_records_from_the_trace() -> None:
    t = load(fx("recompiles"))
    s = storm_of(recompile_storms(t), "shape_storm")
    assert s["compile_ids"] == [f"0/{i}" for i in range(9)]
    assert s["failed_compiles"] == 1
    assert s["compile_seconds"] > 0
    # the record behind the storm: the recompile_reasons envelope of 0/1 in the trace
    assert s["file"].endswith(".log")
    assert '"recompile_reasons"' in raw_line(s["file"], s["lineno"])
    assert '"frame_compile_id": 1' in raw_line(s["file"], s["lineno"])


def test_shape_storm_from_the_text_log_points_at_its_records() -> None:
    s = storm_of(recompile_storms(load(fx("recompiles", "torch_logs.txt"))), "shape_storm")
    assert s["compile_ids"] == [f"0/{i}" for i in range(1, 9)]  # 0/0 logs nothing
    assert s["compile_seconds"] == 0.0
    line = raw_line(s["file"], s["lineno"])
    assert "[0/1] [__recompiles_verbose] Recompiling function shape_storm" in line


@pytest.mark.parametrize("path", RECOMPILES_INPUTS)
def test_scaled_is_a_changing_python_float(path: str) -> None:
    s = storm_of(recompile_storms(load(path)), "scaled")
    assert (s["line"], s["compiles"], s["hit_recompile_limit"]) == (16, 2, False)
    [c] = s["causes"]
    assert (c["kind"], c["source"], c["count"], c["guard"]) == ("value:float", "scale", 1, "scale == 1.0")
    assert c["text"] == "the Python float scale changes between calls (compiled for 1.0)"
    if path.endswith(".txt"):  # the config is unknown (no TORCH_LOGS=dynamic): both cases said
        assert (s["expected"], c["expected"]) == (False, False)
        assert "pass scale as a tensor (torch.tensor(scale)" in c["fix"]
        assert "does not say whether the code compiles with dynamic=False" in c["fix"]
    else:  # automatic dynamic shapes on (the compile's config): one recompile is expected
        assert (s["expected"], c["expected"]) == (True, True)
        assert c["fix"].startswith("nothing to fix: automatic dynamic made scale symbolic after this one recompile")


@pytest.mark.parametrize("path", RECOMPILES_INPUTS)
def test_flagged_is_a_bool_flag(path: str) -> None:
    s = storm_of(recompile_storms(load(path)), "flagged")
    assert (s["line"], s["compiles"]) == (20, 2)
    [c] = s["causes"]
    assert (c["kind"], c["source"], c["count"], c["guard"]) == ("value:bool", "causal", 1, "causal == True")
    assert c["text"] == "the bool flag causal changes between calls (compiled for True)"
    assert "one compile per flag value is expected" in c["fix"]


def test_forced_dynamic_false_is_known_only_from_the_config_or_evidence() -> None:
    def known(path: str) -> dict[str, tuple]:
        return {s["function"]: (s["forced_dynamic_false"], s["forced_dynamic_false_from"]) for s in recompile_storms(load(path))}

    assert known(fx("recompiles")) == {"shape_storm": (True, "config"), "scaled": (False, "config"), "flagged": (False, "config")}
    assert known(fx("recompiles", "torch_logs.txt")) == {
        "shape_storm": (True, "guards"),
        "scaled": (False, None),
        "flagged": (False, None),
    }
    # unknown: the fix covers both cases
    [c] = storm_of(recompile_storms(load(fx("multirank", "torch_logs.txt"))), "forward", 1)["causes"]
    assert "does not say whether the code compiles with dynamic=False" in c["fix"]


@pytest.mark.parametrize("path", RECOMPILES_INPUTS)
def test_recompile_limit_failure_at_0_8(path: str) -> None:
    f = failures_of(load(path))
    assert f.height == 1
    row = f.row(0, named=True)
    assert (row["compile_id"], row["category"]) == ("0/8", "recompile_limit")
    # the limit's compilation_metrics has co_name null: attributed through frame 0
    assert (row["function"], row["line"]) == ("shape_storm", 12)
    assert "recompile_limit" in row["next_step"]
    if path.endswith(".txt"):
        assert (row["source"], row["fail_type"]) == ("text", None)
        assert "[0/8] torch._dynamo hit config.recompile_limit (8)" in raw_line(row["file"], row["lineno"])
    else:
        assert (row["source"], row["fail_type"], row["gb_id"]) == ("trace", "Unsupported", "gb0039")
        assert row["headline"] == "Dynamo recompile limit exceeded"
        assert '"compilation_metrics"' in raw_line(row["file"], row["lineno"])


def test_storms_are_the_same_from_trace_and_from_text() -> None:
    def key(p: str) -> list[tuple]:
        return sorted(
            (s["function"], s["line"], s["compiles"], s["hit_recompile_limit"], tuple((c["kind"], c["text"], c["count"]) for c in s["causes"]))
            for s in recompile_storms(load(p))
        )

    for name in ("recompiles", "graph_breaks", "multirank"):
        assert key(fx(name, "trace")) == key(fx(name, "torch_logs.txt")) == key(fx(name)), name


def test_requires_grad_recompile_of_block_forward() -> None:
    [s] = recompile_storms(load(fx("graph_breaks")))
    assert (s["function"], s["line"], s["compiles"]) == ("forward", 36, 2)
    [c] = s["causes"]
    assert (c["kind"], c["source"]) == ("requires_grad", "x")
    assert c["text"] == "x comes both with and without requires_grad (the cache entry was compiled for requires_grad=False)"
    # one compile per requires_grad value is by design; never "detach it"
    assert c["expected"] and s["expected"] and not s["is_storm"]
    assert c["fix"].startswith("nothing to fix: torch keeps one compile per requires_grad value of x by design")
    assert "never detach an activation" in c["fix"]


# ------------------------------------------------------------------ graph-break hotspots
PLANTED_BREAKS = [
    # line, gb id, reason, function
    (16, "gb0059", "Failed to trace builtin operator", "print_inside"),
    (21, "gb0170", "Data-dependent branching", "data_dependent"),
    (27, "gb0124", "Unsupported Tensor.item() call with capture_scalar_outputs=False", "item_inside"),
]


@pytest.mark.parametrize("path", [fx("graph_breaks"), fx("graph_breaks", "trace"), fx("graph_breaks", "torch_logs.txt")])
def test_the_four_planted_breaks(path: str) -> None:
    hs = graph_break_hotspots(load(path))
    assert len(hs) == 4
    loop = hs[0]  # the frame that fell back to eager ranks first
    assert loop["filename"].endswith("fixtures/programs/graph_breaks.py")
    assert (loop["line"], loop["gb_id"], loop["reason"], loop["function"]) == (
        48,
        "gb0025",
        "Call to `torch._dynamo.graph_break()`",
        "forward",
    )
    assert loop["frame_skipped"] is True
    assert loop["frame_skipped_why"] == "graph break inside a loop"
    assert (loop["frame_function"], loop["frame_line"]) == ("forward", 45)
    assert loop["frame_filename"].endswith("graph_breaks.py")
    assert "move the break out of the loop" in loop["advice"]
    assert (loop["count"], loop["compile_ids"], loop["ranks"]) == (1, ["6/0"], [])
    rest = [(h["line"], h["gb_id"], h["reason"], h["function"]) for h in hs[1:]]
    assert rest == PLANTED_BREAKS
    assert all(h["count"] == 1 and h["frame_skipped"] is False for h in hs[1:])
    assert [h["compile_ids"] for h in hs[1:]] == [["0/0"], ["2/0"], ["4/0"]]
    assert "capture_scalar_outputs = True" in hs[3]["advice"]


def test_hotspot_records_lead_to_the_raw_line() -> None:
    for h in graph_break_hotspots(load(fx("graph_breaks"))):
        assert h["origin"] == "message"
        assert '"dynamo_graph_break_reason"' in raw_line(h["file"], h["lineno"])
    for h in graph_break_hotspots(load(fx("graph_breaks", "torch_logs.txt"))):
        assert "Graph break in user code at" in raw_line(h["file"], h["lineno"])
        assert f"[{h['compile_id']}]" in raw_line(h["file"], h["lineno"])


def test_loop_break_fails_the_frame_as_a_graph_break() -> None:
    for path in (fx("graph_breaks"), fx("graph_breaks", "torch_logs.txt")):
        f = failures_of(load(path))
        assert f.height == 1
        row = f.row(0, named=True)
        assert (row["compile_id"], row["function"], row["category"], row["line"], row["gb_id"]) == (
            "6/0",
            "forward",
            "graph_break",
            48,
            "gb0025",
        )
        assert "inside a loop" in row["next_step"]


def test_restart_reasons_are_breaks_when_no_message_was_logged() -> None:
    # tlparse's comp_metrics.log (older torch): no dynamo_graph_break_reason artifact
    skip_without_shared()
    [h] = graph_break_hotspots(load(str(PEER / "comp_metrics.log")))
    assert h["origin"] == "restart_reason"
    assert h["reason"].startswith("skip function graph_break in file ")
    assert (h["count"], h["compile_ids"], h["line"]) == (2, ["0/0", "1/0"], None)
    assert h["filename"].endswith("test_misc.py")


# ------------------------------------------------------------------ failure triage
def test_backend_failure_and_user_exception() -> None:
    f = failures_of(load(fx("backend_error")))
    assert f.select("compile_id", "function", "category", "fail_type", "line").rows() == [
        ("0/0", "add_one", "backend_compiler_failure", "BackendCompilerFailed", 20),
        ("1/0", "checked", "user_exception", "Unsupported", 26),
    ]
    backend = f.row(0, named=True)
    assert backend["headline"] == "backend='failing_backend' raised: RuntimeError: planted backend failure"
    step = backend["next_step"]
    for needle in ("'failing_backend' is a custom backend", "backend='eager'", "'aot_eager'", "TORCHDYNAMO_REPRO_AFTER=dynamo", "TORCHDYNAMO_REPRO_LEVEL="):
        assert needle in step
    user = f.row(1, named=True)
    assert user["headline"] == "Observed exception"
    assert user["gb_id"] == "gb0088"
    assert "exception reached the caller" in user["next_step"]


def test_an_inductor_failure_is_a_backend_failure_with_inductor_steps() -> None:
    # torch 2.13 logs Inductor's failures as fail_type InductorError, not BackendCompilerFailed
    f = failures_of(load(fx("inductor_error")))
    assert f.select("compile_id", "function", "category", "fail_type", "line").rows() == [
        ("0/0", "scale_rows", "backend_compiler_failure", "InductorError", 15),
    ]
    row = f.row(0, named=True)
    assert row["headline"].startswith("InvalidCxxCompiler: No working C++ compiler found")
    for needle in ("Inductor failed while Dynamo and AOTAutograd did not", "traceview repro", "TORCHDYNAMO_REPRO_AFTER=aot"):
        assert needle in row["next_step"]


def test_backend_ablation_for_a_builtin_backend() -> None:
    from traceview.analyze.failures import next_step

    step = next_step("backend_compiler_failure", "BackendCompilerFailed", "backend='inductor' raised:\nLoweringException")
    for needle in ("backend='eager'", "'aot_eager'", "'aot_eager_decomp_partition'", "TORCHDYNAMO_REPRO_AFTER=dynamo", "REPRO_AFTER=aot"):
        assert needle in step


def test_the_user_exception_is_a_break_that_skipped_the_frame() -> None:
    [h] = graph_break_hotspots(load(fx("backend_error")))
    assert (h["reason"], h["gb_id"], h["line"], h["function"]) == ("Observed exception", "gb0088", 26, "checked")
    assert h["frame_skipped"] is True
    assert h["frame_skipped_why"] == "exception raised inside the compiled function"
    assert (h["frame_function"], h["frame_line"]) == ("checked", 24)


@pytest.mark.parametrize(
    ("fail_type", "reason", "category"),
    [
        ("Unsupported", "Data-dependent branching\n  Explanation: ...", "graph_break"),
        ("Unsupported", "Dynamo recompile limit exceeded", "recompile_limit"),
        ("Unsupported", "Observed exception\n  Explanation: ...", "user_exception"),
        ("BackendCompilerFailed", "backend='inductor' raised:\nAssertionError", "backend_compiler_failure"),
        ("InductorError", "InvalidCxxCompiler: No working C++ compiler found", "backend_compiler_failure"),
        ("GuardOnDataDependentSymNode", "Could not guard on data-dependent expression Eq(u0, 1)", "export_guard_data_dependent"),
        ("InternalTorchDynamoError", "AttributeError: 'NoneType' object has no attribute 'x'", "internal_dynamo_error"),
        ("RuntimeError", "something else", "other"),
    ],
)
def test_categories(fail_type: str, reason: str, category: str) -> None:
    assert categorize(fail_type, reason) == category


# ------------------------------------------------------------------ rank divergence
@pytest.mark.parametrize("path", [fx("multirank"), fx("multirank", "trace"), fx("multirank", "torch_logs.txt")])
def test_rank_1_compiles_0_1_extra(path: str) -> None:
    t = load(path)
    d = rank_divergence(t)
    assert d.height == 1  # nothing for rank 0
    row = d.row(0, named=True)
    assert (row["rank"], row["extra_compile_ids"], row["missing_compile_ids"], row["different"]) == (1, ["0/1"], [], [])
    assert "0/1 (forward, recompiled because " in row["detail"]
    if path.endswith(".txt"):  # the text log alone: the failed guard torch logged
        assert "tensor 'x' size mismatch at index 0. expected 8, actual 6" in row["detail"]
    else:  # the recompile's one cause (the compile account's), as every finding says it
        assert "recompiled because dimension 0 of x varies (seen: 8, 6)" in row["detail"]
    assert row["source"] == ("text" if path.endswith(".txt") else "trace")
    assert row["compile_id"] == "0/1"
    assert "[rank1]" in raw_line(row["file"], row["lineno"]) if path.endswith(".txt") else "rank_1" in row["file"]
    assert "0/1" in raw_line(row["file"], row["lineno"]) or '"frame_compile_id": 1' in raw_line(row["file"], row["lineno"])


@pytest.mark.parametrize("path", [fx("multirank"), fx("multirank", "torch_logs.txt")])
def test_multirank_storm_and_break(path: str) -> None:
    t = load(path)
    [s] = recompile_storms(t)
    assert (s["rank"], s["function"], s["line"], s["compiles"]) == (1, "forward", 31, 2)
    [c] = s["causes"]
    assert c["text"] == "dimension 0 of x varies (seen: 8, 6)"
    assert "torch._dynamo.mark_dynamic(x, 0)" in c["fix"]
    [h] = graph_break_hotspots(t)
    assert (h["line"], h["gb_id"], h["count"], h["ranks"], h["function"]) == (37, "gb0059", 2, [0, 1], "report")


def test_multirank_storm_knows_dynamic_false_from_the_trace() -> None:
    [s] = recompile_storms(load(fx("multirank")))
    assert s["forced_dynamic_false"] is True  # torch.compile(..., dynamic=False) at multirank.py:52
    assert "forces dynamic=False" in s["causes"][0]["fix"]


@needs_shared
def test_object_ids_do_not_make_ranks_diverge() -> None:
    t = load(str(PEER / "multi_rank_runtime"))
    c = t.compiles.filter(pl.col("compile_id") == "0/1").sort("rank")
    reasons = dict(zip(c["rank"].to_list(), c["recompile_reason"].to_list()))
    assert reasons[0] != reasons[1]  # ___check_obj_id(fn, <a different id per process>)
    d = rank_divergence(t)
    assert d["rank"].to_list() == [5, 6]  # ranks 0-4 agree despite their ids
    assert d["missing_compile_ids"].to_list() == [["0/2", "0/3"], ["0/2", "0/3"]]


# ------------------------------------------------------------------ compile time, cache
def test_cache_hits_and_misses() -> None:
    c = ct.cache_summary(load(fx("training")))
    assert (c["fx_graph_hits"], c["fx_graph_misses"], c["fx_graph_hit_ratio"]) == (0, 2, 0.0)
    assert (c["aot_autograd_hits"], c["aot_autograd_misses"], c["aot_autograd_hit_ratio"]) == (0, 1, 0.0)
    none = ct.cache_summary(load(fx("recompiles")))  # backend eager: no Inductor cache lookups
    assert none["fx_graph_hit_ratio"] is None and none["aot_autograd_hit_ratio"] is None


@needs_shared
def test_cache_hit_ratio_on_tlparse_input() -> None:
    c = ct.cache_summary(load(str(PEER / "cache_hit_miss.log")))
    assert (c["fx_graph_hits"], c["fx_graph_misses"], c["fx_graph_hit_ratio"]) == (1, 2, 0.3333)


def test_phases_and_top_compiles() -> None:
    t = load(fx("training"))
    ph = ct.phase_totals(t)
    assert set(ph) == {"dynamo", "aot+backend", "aot", "inductor", "codegen", "autotuning", "autotuning_in_codegen",
                       "backward", "backward_autotuning", "runtime_autotuning"}
    assert ph["inductor"] > 0 and ph["backward"] > 0 and ph["autotuning"] == 0.0
    assert ph["aot"] == pytest.approx(ph["aot+backend"] - ph["inductor"], abs=1e-5)
    [top] = ct.top_compiles(t).to_dicts()
    assert (top["compile_id"], top["function"], top["line"]) == ("0/0", "forward", 20)
    assert top["seconds"] == pytest.approx(top["dynamo_time_s"] + top["backend_compile_time_s"] + top["bwd_compile_time_s"], rel=1e-6)


@needs_shared
@pytest.mark.parametrize("part", ["trace", "torch_logs.txt"])
def test_max_autotune_autotuning(part: str) -> None:
    t = load(str(GPU / "max_autotune" / part))
    a = ct.autotuning(t)
    rows = a.select("op", "shape", "choices", "best_kernel", "best_triton_kernel").rows()
    assert rows == [
        ("addmm", "512x4096, 512x1024, 1024x4096", 21, "bias_addmm", "triton_mm_18"),
        ("addmm", "512x1024, 512x4096, 4096x1024", 21, "bias_addmm", "triton_mm_28"),
    ]
    first = a.row(0, named=True)
    assert first["precompile_s"] == pytest.approx(3.83, abs=0.01)
    assert first["benchmark_s"] == pytest.approx(0.22, abs=0.01)
    assert first["best_ms"] == pytest.approx(0.0119, abs=1e-4)
    if part == "trace":
        assert first["failed_choices"] == 1  # the triton_mm config that ran out of shared memory
        assert first["compile_id"] == "0/0"
        assert "addmm_template_autotuning" in raw_line(first["file"], first["lineno"] + 2)
        ph = ct.phase_totals(t)
        # every autotuning span lies inside code_gen, inside inductor_compile
        assert (ph["inductor"], ph["codegen"], ph["autotuning"]) == (10.277963, 8.965935, 4.892391)
        assert (ph["autotuning_in_codegen"], ph["backward_autotuning"], ph["runtime_autotuning"]) == (4.892391, 0.0, 0.0)


@needs_shared
def test_runtime_autotuning_is_not_compile_time() -> None:
    """train_dynamic's CachingAutotuner.benchmark_all_configs spans come after their compiles'
    inductor_compile spans (the kernels' first calls): run time, in no compile's phases."""
    t = load(str(GPU / "train_dynamic" / "trace"))
    ph = ct.phase_totals(t)
    assert (ph["autotuning"], ph["backward_autotuning"], ph["runtime_autotuning"]) == (0.0, 0.0, 0.186976)
    split = ct._autotune_split(t.spans, t.compiles)
    assert sorted((r["compile_id"], r["phase"], round(r["seconds"], 6)) for r in split.iter_rows(named=True)) == [
        ("1/0", "run time", 0.053041), ("1/1", "run time", 0.066783), ("4/0", "run time", 0.067152)]
    assert ct.top_compiles(t)["autotuning_s"].drop_nulls().to_list() == []


# ------------------------------------------------------------------ a real GPU training run
@needs_shared
@pytest.mark.parametrize("part", ["", "trace", "torch_logs.txt"])
def test_train_dynamic(part: str) -> None:
    t = load(str(GPU / "train_dynamic" / part) if part else str(GPU / "train_dynamic"))
    hs = graph_break_hotspots(t)
    loop = hs[0]
    assert loop["filename"].endswith("gpt.py")
    assert (loop["line"], loop["gb_id"], loop["frame_skipped"], loop["frame_skipped_why"]) == (
        49,
        "gb0025",
        True,
        "graph break inside a loop",
    )
    assert (loop["frame_function"], loop["frame_line"]) == ("forward", 42)
    # the optimizer's own graph_break() (torch/optim/optimizer.py) comes after it
    assert [h["filename"].rsplit("site-packages/", 1)[-1] for h in hs[1:]] == ["torch/optim/optimizer.py"]
    assert "on purpose" in hs[1]["advice"] and "not a bug in your code" in hs[1]["advice"]
    block = storm_of(recompile_storms(t), "forward")
    assert block["filename"].endswith("gpt.py")
    assert (block["line"], block["compiles"], block["hit_recompile_limit"]) == (19, 2, False)
    [c] = block["causes"]
    assert (c["kind"], c["source"], c["dim"]) == ("size", "x", 1)
    assert c["text"] == "dimension 1 of x varies (seen: 128, 256)"
    assert "torch._dynamo.mark_dynamic(x, 1)" in c["fix"]
    if part != "torch_logs.txt":
        assert block["forced_dynamic_false"] is False
        assert "automatic dynamic shapes" in c["fix"]
        f = failures_of(t).row(0, named=True)
        assert (f["compile_id"], f["category"], f["line"]) == ("0/0", "graph_break", 49)


def _record(file: str, lineno: int) -> tuple[str, str | None, str]:
    """(kind, artifact name, compile id) of the envelope at `file`:`lineno`, read with the tests'
    own reader (tests/helpers_graphs.py), not traceview's parser."""
    [e] = [e for e in raw_envelopes(Path(file)) if e["lineno"] == lineno]
    return e["kind"], e["name"], f"{e['env']['frame_id']}/{e['env']['frame_compile_id']}"


def test_analyzers_keep_the_record_of_every_finding() -> None:
    # each finding's (file, lineno) is the envelope it was read from: the recompile's reasons,
    # the graph break's message, the failed compile's metrics, with the finding's compile id
    storms = recompile_storms(load(fx("recompiles")))
    assert [s["function"] for s in storms] == ["shape_storm", "scaled", "flagged"]  # the three planted
    for s in storms:
        assert _record(s["file"], s["lineno"]) == ("artifact", "recompile_reasons", s["compile_id"])
        assert s["compile_id"].endswith("/1")  # the frame's first recompile
        for c in s["causes"]:
            assert _record(c["file"], c["lineno"]) == ("artifact", "recompile_reasons", c["compile_id"])
    hotspots = graph_break_hotspots(load(fx("graph_breaks")))
    assert len(hotspots) == 4
    for h in hotspots:
        assert h["origin"] == "message"
        assert _record(h["file"], h["lineno"]) == ("artifact", "dynamo_graph_break_reason", h["compile_id"])
    fails = failures_of(load(fx("backend_error")))
    assert fails["compile_id"].to_list() == ["0/0", "1/0"]
    for r in fails.iter_rows(named=True):
        assert _record(r["file"], r["lineno"]) == ("compilation_metrics", None, r["compile_id"])


# ------------------------------------------------------------------ the same runs, some records missing
def test_breaks_from_restart_reasons_and_failures_without_messages() -> None:
    """A trace without `dynamo_graph_break_reason` artifacts (older torch): the breaks come
    from compilation_metrics. The fixture's own tables, graph_break_records emptied."""
    t = load(fx("graph_breaks", "trace"))
    bare = Trace(
        {
            **{n: t.table(n) for n in ("events", "strings", "stats", "problems", "log_records", "other_lines")},
            "compiles": t.compiles,
            "graph_break_records": t.graph_break_records.clear(),
        }
    )
    hs = graph_break_hotspots(bare)
    got = [(h["origin"], h["compile_ids"], h["reason"], h["gb_id"], h["line"], h["frame_skipped"]) for h in hs]
    assert got == [
        # 6/0 failed as Unsupported: the frame ran eagerly; the user line is fail_user_frame_lineno
        ("failure", ["6/0"], "Call to `torch._dynamo.graph_break()`", "gb0025", 48, True),
        # print and item restarted analysis; the restart reason has no user line
        ("restart_reason", ["0/0"], "Failed to trace builtin operator", "gb0059", None, False),
        ("restart_reason", ["4/0"], "Unsupported Tensor.item() call with capture_scalar_outputs=False", "gb0124", None, False),
    ]
    assert (hs[0]["frame_function"], hs[0]["frame_line"]) == ("forward", 45)
    assert [h["function"] for h in hs[1:]] == ["print_inside", "item_inside"]


def test_ranks_that_differ_in_graph_breaks_not_in_cache_hits() -> None:
    """multirank's tables with rank 1 changed: an AOTAutograd cache hit on 0/0 and another
    graph-break reason on 1/0. Two ranks: no majority, rank 0 is the reference and the text names it.
    A cache hit on one rank alone is no divergence (ranks sharing a cache race to write it)."""
    t = traceview.load(fx("multirank", "trace"))  # not the cached one: two tables are replaced
    r1 = pl.col("rank") == 1
    comp = t.compiles.with_columns(
        pl.when(r1 & (pl.col("compile_id") == "0/0")).then(1).otherwise(pl.col("aot_cache_hits")).cast(pl.Int32).alias("aot_cache_hits")
    )
    gb = t.graph_break_records.with_columns(
        pl.when(r1).then(pl.lit("Data-dependent branching")).otherwise(pl.col("reason")).alias("reason")
    )
    t.provide("compiles", comp)
    t.provide("graph_break_records", gb)
    d = rank_divergence(t)
    assert d["rank"].to_list() == [1]
    row = d.row(0, named=True)
    assert (row["extra_compile_ids"], row["different"]) == (["0/1"], ["1/0"])
    assert "cache" not in row["detail"]
    assert "1/0: graph breaks 1: Data-dependent branching @ 37 (rank 0: 1: Failed to trace builtin operator @ 37)" in row["detail"]


@needs_shared
def test_id_guard_storm() -> None:
    t = load(str(PEER / "multi_rank_runtime"), latest=True)
    storms = recompile_storms(t)
    assert [(s["rank"], s["function"], s["compiles"]) for s in storms] == [(5, "inner", 2), (6, "inner", 2)]
    [c] = storms[0]["causes"]
    assert (c["kind"], c["source"], c["text"]) == ("id", "fn", "fn is a different object on each call")
    assert "pass changing state as arguments instead of globals" in c["fix"]


def test_functions_compiled_more_than_once_ties_in_rank_order() -> None:
    # ranks that compiled alike tie on seconds: their order must not depend on row order
    # (or on polars' group_by), or the summary changes from one run to the next
    from traceview.analyze.compile_time import by_function

    t = traceview.load(FIXTURES / "corpus" / "multirank4")
    c = t.compiles.with_columns(pl.lit(1.0).alias("total_time_s"))  # every rank ties
    t.provide("compiles", c)
    want = by_function(t)
    for seed in range(5):
        t.provide("compiles", c.sample(fraction=1.0, shuffle=True, seed=seed))
        assert by_function(t).equals(want)
    for _, tied in want.group_by("seconds", "compiles", "function", "filename", "line"):
        assert tied["rank"].to_list() == sorted(tied["rank"].to_list())
    assert want.height == 12 and want["rank"].head(4).to_list() == [2, 0, 1, 3]  # rank 2 compiled forward twice


@needs_shared
def test_a_log_cut_mid_compile_counts_no_autotuning(tmp_path: Path) -> None:
    """max_autotune's trace cut inside its Inductor compile (after the first addmm autotuning
    ended, before inductor_compile ended): the ended autotuning spans lie in an unended
    inductor_compile span of a compile without metrics, so they are counted nowhere, not as
    finished compile time nor as run time."""
    [src] = (GPU / "max_autotune" / "trace").iterdir()
    lines = src.read_text().splitlines(keepends=True)
    cut = tmp_path / src.name
    cut.write_text("".join(lines[:2190]))
    t = load(str(cut))
    assert t.spans.filter(pl.col("name") == "addmm_template_autotuning")["duration_s"].drop_nulls().len() == 1
    assert t.spans.filter(pl.col("name") == "inductor_compile")["duration_s"].null_count() == 1
    ph = ct.phase_totals(t)
    assert (ph["autotuning"], ph["backward_autotuning"], ph["runtime_autotuning"]) == (0.0, 0.0, 0.0)
    assert ct._autotune_split(t.spans, t.compiles)["phase"].to_list() == ["unfinished"]
