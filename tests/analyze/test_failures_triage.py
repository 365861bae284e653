"""Issue 13 classes 1-3 on the diagnosis corpus (real torch 2.13 CPU runs, fixtures/corpus) and
the GPU fixtures (real torch 2.11 + CUDA runs, fixtures/gpu): compile identity across
torch._dynamo.reset(), the triage category of each failure, and the crash at the end of a
capture, each asserted exactly from the trace and from the text log."""

from __future__ import annotations

import functools
import os

import polars as pl
import pytest

import traceview
from parsers.compile_ids import label, with_attempt
from parsers.discover import InputError, discover
from traceview.analyze.origin import origin
from traceview.output.report import build_report
from traceview.output.summary import render_text

from ..conftest import FIXTURES

CORPUS = FIXTURES / "corpus"
GPU = FIXTURES / "gpu"


@functools.cache
def report(path: str) -> dict:
    return build_report(traceview.load(path))


def trace_report(name: str) -> dict:
    return report(str(CORPUS / name / "trace"))


def text_report(name: str, root=CORPUS) -> dict:
    return report(str(root / name / "torch_logs.txt"))


def _short(f: dict) -> tuple:
    return (f["compile_id"], f["occurrence"], f["function"], os.path.basename(f["filename"] or ""), f["line"], f["category"])


# ------------------------------------------------------------------ class 1: compile identity


def test_reset_keeps_both_failed_compiles_with_their_occurrence() -> None:
    r = trace_report("reset_same_id")
    assert [_short(f) for f in r["failures"]] == [
        ("0/0", 1, "first", "reset_same_id.py", 22, "backend_compiler_failure"),
        ("0/0", 2, "second", "reset_same_id.py", 26, "backend_compiler_failure"),
    ]
    assert [f["reason"] for f in r["failures"]] == [
        "backend='backend_one' raised: RuntimeError: first planted backend failure",
        "backend='backend_two' raised: ValueError: second planted backend failure",
    ]
    # each failure points at its own compilation_metrics record
    assert [f["lineno"] for f in r["failures"]] == [255, 535]
    text = render_text(r, width=200)
    assert "[0/0] first (reset_same_id.py:22)" in text
    assert "[0/0 #2] second (reset_same_id.py:26)" in text


def test_compiles_table_has_one_row_per_span() -> None:
    c = traceview.load(CORPUS / "reset_same_id" / "trace").compiles
    assert c.select("compile_id", "occurrence", "function", "lineno", "metrics_lineno").rows() == [
        ("0/0", 1, "first", 1, 255),
        ("0/0", 2, "second", 314, 535),
    ]
    # a restart (attempt 1) is the same compile, not another occurrence
    g = traceview.load(CORPUS / "graph_break_print" / "trace").compiles
    assert g.select("compile_id", "occurrence", "attempts").rows() == [("0/0", 1, 2), ("1/0", 1, 1)]


def test_compile_id_labels() -> None:
    assert with_attempt("0/0", 1) == "0/0_1"
    assert with_attempt("0/0", 0) == "0/0"
    assert label("0/0", 1) == "0/0"
    assert label("0/0", 2) == "0/0 #2"
    assert label(None) == "?"


def test_strict_export_failure_without_compile_id_is_reported_at_the_user_line() -> None:
    r = trace_report("export_strict_failure")
    (f,) = r["failures"]
    assert _short(f) == ("0/0", 1, None, "export_strict_failure.py", 16, "constraint_violation")
    assert f["fail_type"] == "ConstraintViolationError"
    assert "You marked batch as dynamic but your code specialized it to be a constant (4)" in f["reason"]
    assert f["reason"].endswith("suggested fix: batch = 4)")
    assert f["lineno"] == 146  # the compilation_metrics line with compile_id null


# ------------------------------------------------------------------ class 2: triage, from the trace


def test_fake_tensor_error_is_the_users_bug_with_the_shapes() -> None:
    (f,) = trace_report("fake_tensor_user_error")["failures"]
    assert _short(f) == ("0/0", 1, "project", "fake_tensor_user_error.py", 15, "user_error")
    assert f["reason"] == (
        "RuntimeError when making fake tensor call (shapes [3, 4] and [5, 6]; RuntimeError: a and b "
        "must have same reduction dim, but got [3, 4] X [5, 6].)"
    )
    assert "fails in eager too" in f["next_step"]
    assert "report it" not in f["next_step"] and "suppress_errors" not in f["next_step"]


def test_fullgraph_break_raised_and_did_not_run_eagerly() -> None:
    r = trace_report("fullgraph_break")
    (f,) = r["failures"]
    assert _short(f) == ("0/0", 1, "normalize", "fullgraph_break.py", 14, "graph_break")
    assert f["certainty"] == "likely"
    assert "fullgraph=True" in f["evidence"]
    assert "raised to the caller; nothing ran eagerly" in f["next_step"]
    (g,) = r["graph_breaks"]
    assert g["frame_skipped"] is False
    assert "RAN EAGERLY" not in render_text(r, width=200)


def test_graph_break_in_a_loop_still_ran_eagerly() -> None:
    """The control: a logged break that skipped the frame is not fullgraph."""
    (f,) = trace_report("graph_break_loop")["failures"]
    assert f["category"] == "graph_break" and f["certainty"] == "certain"
    assert "whole frame ran eagerly" in f["next_step"]


def test_suppress_errors_says_the_frame_ran_eagerly() -> None:
    (f,) = trace_report("suppress_errors")["failures"]
    assert _short(f) == ("0/0", 1, "score", "suppress_errors.py", 18, "backend_compiler_failure")
    assert f["next_step"].startswith("torch._dynamo.config.suppress_errors=True hid this failure: the frame runs eagerly")


def test_constraint_violation_at_the_branch_with_the_messages_fix() -> None:
    (f,) = trace_report("constraint_violation")["failures"]
    assert _short(f) == ("0/0", 1, "pooled", "constraint_violation.py", 14, "constraint_violation")
    assert "If you're using mark_dynamic, either remove it or use maybe_mark_dynamic" in f["reason"]
    assert "maybe_mark_dynamic" in f["next_step"] and "torch._check" not in f["next_step"]


def test_accuracy_and_inductor_failures() -> None:
    (a,) = trace_report("accuracy")["failures"]
    assert a["category"] == "accuracy"
    assert "TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4" in a["next_step"]
    (i,) = trace_report("inductor_only_failure")["failures"]
    assert (i["category"], i["fail_type"]) == ("backend_compiler_failure", "InductorError")


# ------------------------------------------------------------------ class 2 and 3, from the text


def _crash(name: str, root=CORPUS) -> dict:
    (c,) = text_report(name, root)["crashes"]
    return c


def _crash_short(c: dict) -> tuple:
    return (c["exc_type"], c["category"], c["raised_in"], c["function"], os.path.basename(c["filename"] or ""), c["line"])


@pytest.mark.parametrize("name", ["fullgraph_break", "inductor_only_failure", "custom_backend_failure"])
def test_traceback_only_stderr_is_read(name: str) -> None:
    inputs = discover(CORPUS / name / "torch_logs.txt")
    assert inputs.text_logs == [str(CORPUS / name / "torch_logs.txt")]


def test_a_python_traceback_without_torch_is_still_not_a_torch_log(tmp_path) -> None:
    # hand-made bad input: a traceback that torch has no part in
    p = tmp_path / "stderr.txt"
    p.write_text('Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: no\n')
    with pytest.raises(InputError, match="not a TORCH_TRACE log or a TORCH_LOGS text log"):
        discover(p)


def test_text_crash_fullgraph_break() -> None:
    c = _crash("fullgraph_break")
    assert _crash_short(c) == ("torch._dynamo.exc.Unsupported", "graph_break", "compiling", "normalize", "fullgraph_break.py", 14)
    assert c["code"] == 'print("normalizing", y.shape)'
    assert "fullgraph=True" in c["next_step"] and c["certainty"] == "certain"
    assert (c["file"], c["lineno"]) == (str(CORPUS / "fullgraph_break" / "torch_logs.txt"), 1)


def test_text_crash_fake_tensor_user_error() -> None:
    c = _crash("fake_tensor_user_error")
    assert _crash_short(c) == (
        "torch._dynamo.exc.TorchRuntimeError", "user_error", "compiling", "project", "fake_tensor_user_error.py", 15,
    )
    assert "shapes [3, 4] and [5, 6]" in c["message"]


def test_text_crash_constraint_violation_and_export() -> None:
    c = _crash("constraint_violation")
    assert _crash_short(c)[1:] == ("constraint_violation", "compiling", "pooled", "constraint_violation.py", 14)
    e = _crash("export_strict_failure")
    assert _crash_short(e) == (
        "torch._dynamo.exc.UserError", "constraint_violation", "compiling", "forward", "export_strict_failure.py", 16,
    )
    assert e["message"].endswith("suggested fix: batch = 4)")


def test_text_crash_after_compile_and_in_compiled_code() -> None:
    a = _crash("crash_after_compile")
    assert _crash_short(a) == ("RuntimeError", "user_error_after_compile", "program", "main", "crash_after_compile.py", 22)
    assert a["message"] == "mat1 and mat2 shapes cannot be multiplied (4x8 and 6x2)"
    b = _crash("crash_in_compiled_code")
    assert _crash_short(b)[:3] == ("IndexError", "runtime_error_in_compiled_code", "compiled code")
    assert "force_eager" in b["next_step"]


def test_text_crash_backend_accuracy_data_dependent() -> None:
    assert _crash_short(_crash("custom_backend_failure"))[:3] == (
        "torch._dynamo.exc.BackendCompilerFailed", "backend_compiler_failure", "compiling",
    )
    assert "'my_backend' is a custom backend" in _crash("custom_backend_failure")["next_step"]
    assert _crash("accuracy")["category"] == "accuracy"
    assert _crash("inductor_only_failure")["category"] == "backend_compiler_failure"
    assert _crash("data_dependent")["category"] == "export_guard_data_dependent"


def test_caught_tracebacks_the_program_printed_are_not_a_crash() -> None:
    assert text_report("reset_same_id")["crashes"] == []
    assert text_report("graph_break_print")["crashes"] == []


def test_wont_convert_from_text_is_the_eager_fallback() -> None:
    r = text_report("suppress_errors")
    (f,) = r["failures"]
    assert (f["compile_id"], f["function"], os.path.basename(f["filename"]), f["line"], f["category"], f["source"]) == (
        None, "score", "suppress_errors.py", 18, "backend_compiler_failure", "text",
    )
    assert f["next_step"].startswith("WON'T CONVERT: torch._dynamo.config.suppress_errors=True ran this frame eagerly")
    assert (f["file"], f["lineno"]) == (str(CORPUS / "suppress_errors" / "torch_logs.txt"), 1)
    assert r["crashes"] == []
    # the trace and the text together: one failure, not two
    both = build_report(traceview.load(CORPUS / "suppress_errors"))
    assert [x["source"] for x in both["failures"]] == ["trace"]


# ------------------------------------------------------------------ class 3 on the GPU runs


def test_gpu_cudagraphs_overwritten_output() -> None:
    c = _crash("ro_overwritten_output", GPU)
    assert _crash_short(c) == ("RuntimeError", "cuda_graphs", "program", "main", "ro_overwritten_output.py", 51)
    assert "torch.compiler.cudagraph_mark_step_begin()" in c["next_step"]


@pytest.mark.parametrize("name", ["triton_index_oob", "triton_embedding_oob"])
def test_gpu_triton_device_assert(name: str) -> None:
    c = _crash(name, GPU)
    assert _crash_short(c)[:2] == ("torch.AcceleratorError", "triton_assert")
    assert "TORCH_LOGS=output_code,schedule" in c["next_step"]


def test_gpu_device_assert_reported_at_launch_names_the_kernel() -> None:
    # CUDA_LAUNCH_BLOCKING=1: the launch of the kernel raised, so that is the kernel that failed
    c = _crash("triton_index_oob_blocking", GPU)
    assert (c["category"], c["kernel"]) == ("triton_assert", "triton_per_fused_index_mul_sum_0")
    assert (c["called_from"]["function"], c["called_from"]["line"]) == ("main", 38)
    assert "`traceview origin --kernel triton_per_fused_index_mul_sum_0`" in c["next_step"]
    # and the advice works: origin gives the indexing line of the program
    lines = {(ch.user_line, ch.user_code) for ch in origin(traceview.load(GPU / "triton_index_oob_blocking"), kernel=c["kernel"])}
    assert (28, "rows = table[idx]") in lines


def test_gpu_illegal_memory_access_reported_asynchronously() -> None:
    # fixtures/gpu/cuda_ima: a user Triton kernel (shifted_copy) stores 2**40 elements past its
    # buffer; the error surfaced while autotuning benchmarked the *next* kernel
    # (triton_poi_fused_add_0). Naming that kernel as the culprit would be wrong.
    c = _crash("cuda_ima", GPU)
    assert _crash_short(c) == ("torch.AcceleratorError", "cuda_illegal_memory_access", "compiled code", "scale", "cuda_ima.py", 38)
    assert c["code"] == "@torch.compile"
    assert (c["called_from"]["function"], c["called_from"]["line"], c["called_from"]["code"]) == ("main", 48, "y = scale(x)")
    assert c["kernel"] is None
    assert "rerun with CUDA_LAUNCH_BLOCKING=1" in c["next_step"]
    assert "passes through triton_poi_fused_add_0, but CUDA reports errors asynchronously" in c["next_step"]


def test_gpu_illegal_memory_access_at_launch() -> None:
    c = _crash("cuda_ima_blocking", GPU)
    assert (c["exc_type"], c["category"], c["kernel"]) == ("RuntimeError", "cuda_illegal_memory_access", "shifted_copy_0")
    assert c["next_step"].startswith("shifted_copy_0 faulted: the error was raised by its launch")
    assert "a Triton kernel of your own" in c["next_step"]
    assert "rerun with CUDA_LAUNCH_BLOCKING" not in c["next_step"]  # it ran with it
    lines = {ch.user_line for ch in origin(traceview.load(GPU / "cuda_ima_blocking"), kernel="shifted_copy_0")}
    assert lines == {30}  # the launch of shifted_copy in cuda_ima.py
    text = render_text(text_report("cuda_ima_blocking", GPU), width=100)
    assert "failing kernel: shifted_copy_0" in text and "called from main (cuda_ima.py:48): y = scale(x)" in text


def test_gpu_segfault_from_faulthandler() -> None:
    c = _crash("hf_llama_generate_static_faulthandler", GPU)
    assert (c["kind"], c["exc_type"], c["category"], c["raised_in"], c["certainty"]) == (
        "fatal", "Segmentation fault", "segfault", "compiled code", "certain",
    )
    assert (os.path.basename(c["filename"]), c["line"], c["function"]) == ("hf_llama_generate_static.py", 39, "main")


def test_gpu_triton_launcher_error() -> None:
    c = _crash("hf_llama_generate_static_no_static_launcher", GPU)
    assert _crash_short(c)[:3] == ("TypeError", "triton", "compiled code")


def test_gpu_runs_that_ended_well_have_no_crash() -> None:
    for name in ("ro_rerecord", "hf_gpt2_train", "hf_llama_generate_static"):
        assert text_report(name, GPU)["crashes"] == [], name


def test_crash_text_section() -> None:
    out = render_text(text_report("crash_after_compile"), width=100)
    assert "findings: the program crashed" in out
    assert "CRASHED" in out and "RuntimeError at main (crash_after_compile.py:22)" in out


def test_failures_table_types() -> None:
    from traceview.analyze.failures import SCHEMA, failures

    t = traceview.load(CORPUS / "reset_same_id" / "trace")
    df = failures(t)
    assert df.schema == pl.Schema(SCHEMA)


def test_reset_from_the_text_log_alone() -> None:
    """The program caught both failures and printed them; `Step 1: torchdynamo start tracing`
    of [0/0] twice (with torch._dynamo.reset between) makes two compiles."""
    r = text_report("reset_same_id")
    assert r["compile_ids_in_text_logs"] == 2
    assert [_short(f) for f in r["failures"]] == [
        ("0/0", 1, "first", "reset_same_id.py", 22, "backend_compiler_failure"),
        ("0/0", 2, "second", "reset_same_id.py", 26, "backend_compiler_failure"),
    ]
    assert [(f["source"], f["lineno"]) for f in r["failures"]] == [("text", 7), ("text", 38)]
    # trace and text together: the trace's two, no duplicates
    both = build_report(traceview.load(CORPUS / "reset_same_id"))
    assert [(f["source"], f["occurrence"]) for f in both["failures"]] == [("trace", 1), ("trace", 2)]


def test_a_document_quoting_a_traceback_is_not_a_capture() -> None:
    """PROVENANCE.md quotes the crash in a markdown block: it stays a stray file."""
    inputs = discover(GPU / "triton_index_oob")
    assert inputs.text_logs == [str(GPU / "triton_index_oob" / "torch_logs.txt")]
    assert (str(GPU / "triton_index_oob" / "PROVENANCE.md"), "not a torch log") in inputs.stray


def _oracle_uncaught(name: str) -> list[tuple[str, str]]:
    import json

    doc = json.loads((CORPUS / name / "oracle.json").read_text())
    out = []
    for p in doc["processes"]:
        u = p["uncaught"]
        if u and u["type"] == "ProcessRaisedException":
            # mp.spawn re-raises a rank's exception with its traceback as the message: the
            # rank's own exception (its last unindented line: its message may go on, indented,
            # as a stance refusal's guard failures do) is what ended the program
            last = [ln for ln in u["message"].strip().split("\n") if ln and not ln[0].isspace()][-1]
            exc, _, msg = last.partition(": ")
            out.append((exc, msg))
        elif u:
            qual = u["type"] if u["module"] == "builtins" else f"{u['module']}.{u['type']}"
            out.append((qual, u["message"].strip().split("\n", 1)[0]))
    return out


CORPUS_NAMES = sorted(p.name for p in CORPUS.iterdir() if (p / "oracle.json").is_file())


@pytest.mark.parametrize("name", CORPUS_NAMES)
def test_crashes_match_torchs_uncaught_exception(name: str) -> None:
    """torch's oracle (sys.excepthook in the corpus program) against the text log's crash:
    every uncaught exception found, none invented (the caught ones the programs printed too)."""
    got = [(c["exc_type"], c["message_full"].strip().split("\n", 1)[0]) for c in text_report(name)["crashes"]]
    assert got == _oracle_uncaught(name)


def test_ui_findings_show_the_occurrence() -> None:
    from traceview.tui.finding_rows import findings_from_report

    found = findings_from_report(trace_report("reset_same_id"))
    titles = [f.title for f in found if "failure" in f.title]
    assert titles == [
        "[0/0] first (reset_same_id.py:22): backend compiler failure (BackendCompilerFailed)",
        "[0/0 #2] second (reset_same_id.py:26): backend compiler failure (BackendCompilerFailed)",
    ]


ERROR_ON_RECOMPILE = """
import torch
torch._dynamo.config.error_on_recompile = True

@torch.compile(backend="eager", dynamic=False)
def f(x):
    return x * 2

f(torch.randn(4))
f(torch.randn(5))  # the planted recompile
"""


@pytest.mark.e2e
def test_error_on_recompile_is_the_recompile_category(tmp_path) -> None:
    """A real run: error_on_recompile=True raises RecompileError at the second call."""
    import subprocess
    import sys

    prog = tmp_path / "rec.py"
    prog.write_text(ERROR_ON_RECOMPILE)
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_LOGS", "TORCH_TRACE")}
    env.update(TORCH_TRACE=str(tmp_path / "trace"), TORCH_LOGS="recompiles")
    with open(tmp_path / "torch_logs.txt", "wb") as err:
        rc = subprocess.run([sys.executable, str(prog)], stderr=err, env=env, timeout=600).returncode
    assert rc == 1
    (f,) = build_report(traceview.load(tmp_path / "trace"))["failures"]
    assert (f["compile_id"], f["function"], f["category"], f["fail_type"]) == ("0/1", "f", "recompile_limit", "RecompileError")
    assert f["next_step"].startswith("torch._dynamo.config.error_on_recompile=True turned this recompile into an error")
    (c,) = build_report(traceview.load(tmp_path / "torch_logs.txt"))["crashes"]
    assert (c["exc_type"], c["category"], c["function"], c["line"], c["code"]) == (
        "torch._dynamo.exc.RecompileError", "recompile_limit", "<module>", 10, "f(torch.randn(5))  # the planted recompile",
    )


# ------------------------------------------------ several ranks crash (torchrun, [rankN]: lines)

RANK_CRASH = FIXTURES / "rank_crash_torchrun"


def _rank_crashes(text_log) -> list[dict]:
    return build_report(traceview.load(text_log))["crashes"]


def test_torchrun_rank_crash_first_rank_first() -> None:
    # fixtures/rank_crash_torchrun: rank 1 raises in its own code, rank 0 fails in barrier()
    # because of it, torchrun raises ChildFailedError naming rank 1 (its Root Cause block)
    cs = _rank_crashes(RANK_CRASH / "torch_logs.txt")
    assert [(c["rank"], c["exc_type"], c["line"], c["consequence_of"], c["certainty"]) for c in cs] == [
        (1, "RuntimeError", 25, None, "certain"),
        (0, "RuntimeError", 27, 1, "likely"),
    ]
    assert cs[0]["message"] == "mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)"
    assert cs[0]["category"] == "user_error_after_compile"
    assert "Connection closed by peer" in cs[1]["message"]
    assert cs[1]["next_step"].startswith("Probably a consequence of rank 1's failure (torchrun names it")
    # torchrun's own traceback is not a crash of the program
    assert not [c for c in cs if "ChildFailedError" in (c["exc_type"] or "")]
    text = render_text(build_report(traceview.load(RANK_CRASH)), width=100)
    assert "findings: 2 processes crashed" in text
    assert text.index("rank 1 RuntimeError at main") < text.index("rank 0 RuntimeError at main")


def _cut(tmp_path, keep) -> str:
    """A copy of the real capture with some of its lines left out (hand-cut, to test what a
    capture without them says; every kept line is torch's own)."""
    lines = (RANK_CRASH / "torch_logs.txt").read_text().splitlines(keepends=True)
    out = tmp_path / "torch_logs.txt"
    out.write_text("".join(x for x in lines if keep(x)))
    return str(out)


def test_torchrun_without_its_root_cause_block(tmp_path) -> None:
    # no torchrun traceback: rank 0's error is a collective that lost its peer, rank 1's is its own
    start = next(i for i, x in enumerate((RANK_CRASH / "torch_logs.txt").read_text().splitlines()) if x.startswith("Traceback"))
    lines = (RANK_CRASH / "torch_logs.txt").read_text().splitlines(keepends=True)[:start]
    (tmp_path / "torch_logs.txt").write_text("".join(lines))
    cs = _rank_crashes(str(tmp_path / "torch_logs.txt"))
    assert [(c["rank"], c["consequence_of"]) for c in cs] == [(1, None), (0, 1)]
    assert "its error is its own" in cs[1]["next_step"]


def test_torchrun_error_alone_names_the_first_failed_rank(tmp_path) -> None:
    # the ranks' stderr not captured (only torchrun's lines): one launcher finding
    (c,) = _rank_crashes(_cut(tmp_path, lambda x: not x.startswith("[rank")))
    assert (c["kind"], c["category"], c["rank"], c["raised_in"]) == ("launcher", "launcher_child_failed", 1, "launcher")
    assert c["message"] == "torchrun: rank 1 failed first (exit code 1)"
    assert "the ranks' own tracebacks are not in this capture" in c["next_step"]


def test_mp_spawn_crash_is_the_childs_error() -> None:
    # fixtures/rank_crash_spawn: mp.spawn re-raises rank 1's error in the parent as
    # ProcessRaisedException, the child's traceback inside its message (the only traceback)
    (c,) = _rank_crashes(FIXTURES / "rank_crash_spawn" / "torch_logs.txt")
    assert (c["rank"], c["exc_type"], c["function"], c["line"], c["category"]) == (
        1, "RuntimeError", "worker", 27, "user_error_after_compile",
    )
    assert c["message"] == "mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)"
    assert c["evidence"].startswith("torch.multiprocessing.spawn re-raised process 1's error")
