"""Issue 45 classes 3 and 4 on real runs: a process killed by a signal of its own (SIGSEGV in the
code Inductor generated, with and without faulthandler, alone and under torchrun; fixtures/
crash_signal_*, torch 2.13 CPU; fixtures/gpu/hf_llama_generate_static*, torch 2.11 H100) and a
compile lost to the host killing Inductor's compile worker (fixtures/crash_worker_killed)."""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

import polars as pl

import traceview
from parsers.stops import stops_from_text
from traceview.analyze.failures import worker_died
from traceview.output.report import build_report

from ..conftest import FIXTURES

GPU = FIXTURES / "gpu"


@functools.cache
def report(path: str) -> dict:
    return build_report(traceview.load(path, jobs=1))


def crashes(name: str, root: Path = FIXTURES) -> list[dict]:
    return report(str(root / name))["crashes"]


def first(name: str, root: Path = FIXTURES) -> dict:
    return report(str(root / name))["findings"][0]


def test_faulthandler_names_the_compile_line_and_kernel() -> None:
    (c,) = crashes("crash_signal_faulthandler")
    assert (c["kind"], c["signal"], c["category"], c["raised_in"], c["rank"], c["certainty"]) == (
        "fatal", "SIGSEGV", "segfault", "compiled code", None, "certain")
    ran = c["signal_ran"]
    # batch 5 recompiled gather as [0/1]; the third call (the bad index) ran [0/1]'s code
    assert (ran["compile_id"], ran["function"], ran["line"]) == ("0/1", "gather", 21)
    assert (ran["module_line"], ran["module_function"], ran["kernel"]) == (99, "call", "cpp_fused_index_mul_sum_0")
    assert ran["statement"] == "cpp_fused_index_mul_sum_0(arg2_1, arg0_1, buf0, s95)"
    assert c["innermost"]["whose"] == "generated"
    assert (c["after"]["kind"], c["after"]["compile_id"]) == ("compilation_metrics", "0/1")
    assert c["nested"] is None
    # the program turned Inductor's index checks off (compilation_metrics' inductor_config): not torch's bug first
    assert ran["unchecked_indexing"] is True
    assert c["next_step"].startswith("This compile ran with torch._inductor.config.assert_indirect_indexing = False")
    assert "a crash in torch/Inductor to report" not in c["next_step"]
    assert "PYTHONFAULTHANDLER" not in c["next_step"]  # it ran with it
    f = first("crash_signal_faulthandler")
    assert f["kind"] == "crash" and f["claim"].startswith("killed by SIGSEGV (no Python error) in the generated code of [0/1] gather")
    assert report(str(FIXTURES / "crash_signal_faulthandler"))["head"][0] == "findings: the program was killed by SIGSEGV in compiled code"


def test_the_generated_module_is_the_compile_the_trace_names() -> None:
    """The stack's module path is [0/1]'s inductor_output_code record, and line 99 of that
    record's payload is the launch the finding quotes."""
    (c,) = crashes("crash_signal_faulthandler")
    ev = traceview.load(FIXTURES / "crash_signal_faulthandler", jobs=1).events
    oc = ev.filter((pl.col("kind") == "inductor_output_code") & pl.col("metadata").str.contains(c["signal_ran"]["module"], literal=True))
    assert oc["compile_id"].to_list() == ["0/1"]
    assert oc["payload"][0].split("\n")[99 - 1].strip() == c["signal_ran"]["statement"]


def test_shell_reports_the_signal_without_faulthandler() -> None:
    (c,) = crashes("crash_signal_shell")
    assert (c["kind"], c["signal"], c["exit_code"], c["raised_in"], c["signal_ran"], c["faulthandler"]) == (
        "signal", "SIGSEGV", 139, "unknown", None, False)
    assert c["evidence"].startswith("the shell that ran it: bash: line 1: ") and "Segmentation fault" in c["evidence"]
    assert (c["after"]["kind"], c["after"]["compile_id"]) == ("compilation_metrics", "0/1")
    assert c["next_step"].startswith("Rerun with PYTHONFAULTHANDLER=1")
    f = first("crash_signal_shell")
    assert f["claim"] == "killed by SIGSEGV, exit code 139 (no Python error) where: unknown (no Python stack)"


def test_shell_line_is_parsed_with_its_pid() -> None:
    t = traceview.load(FIXTURES / "crash_signal_shell", jobs=1)
    rows = stops_from_text(t.log_records, t.other_lines).filter(pl.col("kind") == "shell_signal")
    text = (FIXTURES / "crash_signal_shell" / "torch_logs.txt").read_text()
    pid = int(re.search(r"^bash: line 1: (\d+) Segmentation fault", text, re.M).group(1))
    assert rows.select("signal", "exit_code", "pid").rows() == [("SIGSEGV", 139, pid)]


def test_torchrun_faulthandler_dump_belongs_to_the_rank_torchrun_saw_die() -> None:
    cs = crashes("crash_signal_torchrun")
    assert [(c["rank"], c["kind"], c["category"]) for c in cs] == [
        (1, "fatal", "segfault"), (0, "exception", "distributed_desync")]
    sig, peer = cs
    assert (sig["signal"], sig["exit_code"], sig["signal_ran"]["compile_id"], sig["signal_ran"]["kernel"]) == (
        "SIGSEGV", -11, "0/1", "cpp_fused_index_mul_sum_0")
    assert sig["after"]["file"].endswith(".log.gz") and "rank_1_" in sig["after"]["file"]
    assert peer["consequence_of"] == 1
    assert first("crash_signal_torchrun")["claim"].startswith("rank 1 killed by SIGSEGV, exit code -11 (no Python error)")


def test_torchrun_without_faulthandler_says_the_signal_and_not_where() -> None:
    cs = crashes("crash_signal_torchrun_plain")
    assert [(c["rank"], c["kind"], c["consequence_of"]) for c in cs] == [(1, "signal", None), (0, "exception", 1)]
    assert (cs[0]["signal"], cs[0]["exit_code"], cs[0]["signal_ran"]) == ("SIGSEGV", -11, None)
    assert (cs[0]["after"]["compile_id"], "rank_1_" in cs[0]["after"]["file"]) == ("0/1", True)


def test_gpu_segfault_in_the_static_launcher_of_the_decode_step() -> None:
    (c,) = crashes("hf_llama_generate_static_faulthandler", GPU)
    ran = c["signal_ran"]
    assert (ran["compile_id"], ran["module_line"], ran["module_function"]) == ("0/1", 1216, "partition_0")
    # the run without the static launcher raised a Python error at the launch of the same kernel
    tb = (GPU / "hf_llama_generate_static_no_static_launcher" / "torch_logs.txt").read_text()
    launched = re.search(r"in partition_0\n\s+(\w+)\.run\(", tb).group(1)
    assert ran["kernel"] == launched
    assert c["innermost"]["whose"] == "launcher" and c["innermost"]["path"].endswith("static_triton_launcher.py")
    assert ran["unchecked_indexing"] is False
    assert c["nested"] == {"generate": "transformers/generation/utils.py:3030 in _sample", "wrappers": 2}
    for step in ("a crash in torch/Inductor to report", "mode='default'", "TORCHINDUCTOR_USE_STATIC_CUDA_LAUNCHER=0",
                 "already compiles the static-cache decode step itself"):
        assert step in c["next_step"], step
    assert report(str(GPU / "hf_llama_generate_static_faulthandler"))["findings"][0]["kind"] == "crash"


def test_gpu_log_that_just_ends_is_not_called_a_crash() -> None:
    """Without faulthandler and without an exit status, the capture cannot tell a crash from a
    normal end: no crash finding."""
    assert crashes("hf_llama_generate_static", GPU) == []


def test_compile_worker_killed() -> None:
    r = report(str(FIXTURES / "crash_worker_killed"))
    [f] = r["failures"]
    assert (f["compile_id"], f["function"], f["category"], f["fail_type"]) == (
        "0/0", "mlp", "compile_worker_died", "InductorError")
    [c] = r["crashes"]
    assert (c["category"], c["raised_in"], c["compile"]["compile_id"]) == ("compile_worker_died", "compiling", "0/0")
    assert "BrokenProcessPool: A process in the process pool was terminated abruptly" in c["message"]
    for step in ("not to the model", "OOM killer", "TORCHINDUCTOR_COMPILE_THREADS=1"):
        assert step in c["next_step"], step
    assert r["findings"][0]["kind"] == "crash"


def test_worker_death_grammar_is_torchs() -> None:
    """Every form of torch's message for a dead compile worker, read from torch's own source."""
    root = Path(importlib.util.find_spec("torch").submodule_search_locations[0]) / "_inductor"
    src = (root / "async_compile.py").read_text()
    m = re.search(r'"(A compilation subprocess exited unexpectedly)\. This "', src)
    assert m and worker_died(f"RuntimeError: {m.group(1)}. This is likely due to a crash.")
    assert "Attempting to use a closed pool" in (root / "compile_worker" / "subproc_pool.py").read_text()
    assert worker_died("RuntimeError: Attempting to use a closed pool")
    assert not worker_died("RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 6x2)")


def test_compile_worker_killed_says_how_far_the_compile_got() -> None:
    """The seconds are torch's own compilation_metrics of [0/0] (entire frame, backend, Inductor)."""
    [trace] = [p for p in (FIXTURES / "crash_worker_killed" / "trace").iterdir() if '"compilation_metrics"' in p.read_text()]
    m = {k: float(v) for k, v in re.findall(r'"(entire_frame_compile_time_s|backend_compile_time_s|inductor_compile_time_s)": ([\d.]+)',
                                             trace.read_text())}
    dynamo = m["entire_frame_compile_time_s"] - m["backend_compile_time_s"]
    aot = m["backend_compile_time_s"] - m["inductor_compile_time_s"]
    want = f"Lost after Dynamo {dynamo:.2f}s, AOTAutograd {aot:.2f}s and {m['inductor_compile_time_s']:.2f}s in Inductor, whose worker died."
    r = report(str(FIXTURES / "crash_worker_killed"))
    assert r["failures"][0]["next_step"].startswith(want)
    assert r["crashes"][0]["next_step"].startswith(want)


def test_torchrun_tee_prefixed_faulthandler_dump() -> None:
    """torchrun --tee prefixes the dump `[default1]:` with no space: its frames keep their two."""
    cs = [c for c in crashes("crash_signal_torchrun_tee") if c["category"] == "segfault"]
    assert [(c["rank"], c["kind"], c["exit_code"]) for c in cs] == [(1, "fatal", -11)]
    ran = cs[0]["signal_ran"]
    assert (ran["compile_id"], ran["module_line"], ran["kernel"]) == ("0/1", 99, "cpp_fused_index_mul_sum_0")


def test_torchrun_every_rank_segfaults_in_the_same_compile() -> None:
    """Both ranks die in [0/1]'s kernel (one Inductor cache: one module path for both ranks'
    [0/1]); their dumps interleave unprefixed, so the finding names both ranks, not one."""
    [c] = [c for c in crashes("crash_signal_torchrun_all") if c["category"] == "segfault"]
    assert (c["rank"], c["signal_ranks"], c["signal_ran"]["compile_id"], c["signal_ran"]["kernel"]) == (
        None, [0, 1], "0/1", "cpp_fused_index_mul_sum_0")
    assert c["signal_ran"]["how"].endswith("(on each of 2 ranks)")
    f = first("crash_signal_torchrun_all")
    assert f["claim"].startswith("ranks 0-1 killed by SIGSEGV (no Python error) in the generated code of [0/1] gather")


def test_the_head_line_counts_processes_not_crash_records() -> None:
    # rank 0's DistBackendError and the SIGABRT that then ended it are one death; two ranks one
    # signal killed are named together, not "2 processes crashed (rank 0 …)"
    nofr = report(str(GPU / "timeout_behind_compile_nccl_nofr"))
    assert sum(1 for c in nofr["crashes"] if c["rank"] == 0) == 2
    assert "rank 0 was aborted by the watchdog after the timeout" in " ".join(nofr["head"])
    assert "processes crashed" not in " ".join(nofr["head"])
    assert report(str(FIXTURES / "crash_signal_torchrun_all"))["head"][0] == "findings: ranks 0, 1 were killed by SIGSEGV in compiled code"


def test_the_head_line_says_a_worker_was_killed_not_the_program_crashed() -> None:
    # the compile lost to a dead worker ended the program: one verdict, not "crashed, 1 failed compile"
    head = report(str(FIXTURES / "crash_worker_killed"))["head"]
    assert head[0] == "findings: a compile worker process was killed (lost to the host, not the model)"


def test_a_rank_whose_collective_lost_the_dead_rank_is_its_consequence() -> None:
    # torchrun, rank 1 killed by SIGSEGV; rank 0's gloo barrier: "Connection closed by peer"
    r = report(str(FIXTURES / "crash_signal_torchrun"))
    assert r["head"][0] == "findings: rank 1 was killed by SIGSEGV in compiled code (rank 0 failed after it)"
    [after] = [f for f in r["findings"] if f["kind"] == "crash" and f["ranks"] == [0]]
    assert "its collective lost rank 1, which had failed first" in after["claim"] and "desync" not in after["claim"]
