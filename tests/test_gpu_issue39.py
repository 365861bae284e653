"""Issue 39 on real GPU runs (fixtures/gpu, group `issue39` of fixtures/make_gpu_fixtures.py:
torch 2.11 + CUDA 13 on an H100; programs in fixtures/programs/gpu/).

- `stop_backward_autotuning`: a max-autotune training step under torchrun, stopped by
  `timeout -s TERM 75` while its backward (compiled lazily, no dynamo_start) autotunes
  mm(1024x128, 128x4096): the unfinished compile names the operation, its shapes and how far
  it got; the stop is the launcher's, not the program's error.
- `oom_compiled` / `oom_compiled_static`: torch.OutOfMemoryError raised by the compiled code's
  allocation: said as memory (asked, free, held), tied to the compile whose generated module
  raised and to the input it was compiled for; never the minifier's advice.

Each finding is checked against torch's own lines: the launcher's in torch_logs.txt, the
trace's chromium events and `inductor_output_code` records, the allocator's message and the
`Recompiling function` lines.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from typing import Any

import traceview
from parsers.oom import is_oom_message, oom_of
from traceview.output.report import build_report
from traceview.output.summary import render_text

from .conftest import FIXTURES

GPU = FIXTURES / "gpu"


@functools.cache
def _report(name: str) -> dict[str, Any]:
    return build_report(traceview.load(GPU / name, jobs=1))


def _logs(name: str) -> str:
    return (GPU / name / "torch_logs.txt").read_text()


def _chromium(name: str) -> list[dict[str, Any]]:
    """The trace's chromium events, as torch wrote them (payload lines after the envelope)."""
    [f] = (GPU / name / "trace").glob("*.log.gz")
    out, cur = [], None
    with gzip.open(f, "rt") as fh:
        for line in fh:
            if line.startswith("\t"):
                if cur is not None:
                    cur.append(line[1:])
                continue
            if cur:
                out.append(json.loads("".join(cur)))
            cur = [] if '"chromium_event"' in line else None
    if cur:
        out.append(json.loads("".join(cur)))
    return out


# --------------------------------------------------------------------------------------
# a backward still autotuning when the job is stopped


def test_a_stop_inside_the_backwards_autotuning_names_the_op_its_shapes_and_how_far_it_got() -> None:
    name = "stop_backward_autotuning"
    report = _report(name)
    logs = _logs(name)
    # torch's own records: the backward's autotuning span began (with its shapes) and never
    # ended; its precompiling span ended 5.615 s after it began; the launcher got SIGTERM
    ev = _chromium(name)
    tune_b = [e for e in ev if e["name"] == "mm_template_autotuning" and e["ph"] == "B"]
    tune_e = [e for e in ev if e["name"] == "mm_template_autotuning" and e["ph"] == "E"]
    assert len(tune_b) == 1 and tune_e == [] and tune_b[0]["args"]["autotune_shape"] == "1024x128, 128x4096"
    pre = [e["ts"] for e in ev if e["name"] == "mm_template_precompiling"]
    assert len(pre) == 2 and round((pre[1] - pre[0]) / 1e6, 3) == 5.615
    assert not [e for e in ev if e["name"] == "entire_backward_compile" and e["ph"] == "E"]
    assert "Received 15 death signal, shutting down workers" in logs
    assert "Sending process 560 closing signal SIGTERM" in logs
    assert report["crashes"] == []  # torchrun's SignalException is the stop, not the program's error

    [u] = report["unfinished_compiles"]
    assert (u["compile_id"], u["part"], u["function"], u["innermost_span"]) == ("0/0", "backward", "forward", "mm_template_autotuning")
    assert u["phase"] == "autotuning mm(1024x128, 128x4096) (inductor code_gen)"
    assert u["autotuning"] == {
        "op": "mm", "shapes": "1024x128, 128x4096", "what": "autotuning",
        "open_s": 17.81, "precompile_s": 5.615, "done": [],
    }
    # to the launcher's line written at the stop (torch_logs.txt:118), not the trace's last record
    assert u["running_s"] == 24.181 and u["last_line_from"]["lineno"] == 118
    assert u["last_line_from"]["what"] == "the text log: Sending process 560 closing signal SIGTERM"

    [st] = report["stops"]
    assert (st["kind"], st["signal"], st["target"]) == ("launcher_signal", "SIGTERM", "torchrun (pid 532)")
    [r] = st["ranks"]
    assert (r["pid"], r["state"], r["compile_id"], r["part"], r["phase"]) == (
        560, "compiling", "0/0", "backward", "autotuning mm(1024x128, 128x4096) (inductor code_gen)")

    text = render_text(report, width=400)
    assert (
        "[0/0] backward of MLP.forward (stop_backward_autotuning.py:65) in autotuning mm(1024x128, 128x4096) "
        "(inductor code_gen) for 24.18s up to the capture's last timestamp"
    ) in text
    assert (
        "autotuning: mm(1024x128, 128x4096): its choices precompiled in 5.62s, then 17.81s autotuning "
        "(benchmarking them) up to the last timestamp, the first autotuning of this backward; which choice "
        "it was on is not logged"
    ) in text
    assert "fix it at the user line" not in text


def test_the_forwards_finished_autotunings_are_counted_and_the_open_one_is_not() -> None:
    report = _report("stop_backward_autotuning")
    tuned = [(a["op"], a["shape"], a["benchmark_s"] is not None) for a in report["compile_time"]["autotuning"]]
    # the forward's two addmm ended (torch printed their AUTOTUNE tables); the backward's mm is open
    logs = _logs("stop_backward_autotuning")
    assert logs.count("AUTOTUNE addmm(") == 2 and "AUTOTUNE mm(" not in logs
    assert ("addmm", "1024x4096, 1024x128, 128x4096", True) in tuned
    assert ("addmm", "1024x128, 1024x4096, 4096x128", True) in tuned
    # the open one is listed with its precompile and no benchmark time (its span never ended)
    assert ("mm", "1024x128, 128x4096", False) in tuned


# --------------------------------------------------------------------------------------
# CUDA out of memory in compiled code


def _message_numbers(logs: str) -> dict[str, str]:
    """The allocator's numbers, read from torch's message in torch_logs.txt."""
    m = re.search(
        r"torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate (\S+ \S+)\. GPU 0 has a total capacity of "
        r"(\S+ \S+) of which (\S+ \S+) is free\. Including non-PyTorch memory, this process has (\S+ \S+) memory in use",
        logs,
    )
    assert m is not None
    return dict(zip(("asked", "capacity", "free", "this_process"), m.groups(), strict=True))


def _raising_module(logs: str) -> tuple[str, int, str]:
    """The last frame of the traceback: the generated module, its line and statement."""
    frames = re.findall(r'^  File "([^"]+)", line (\d+), in (\w+)\n    (.*)$', logs, re.M)
    path, line, fn, src = frames[-1]
    assert fn == "call"
    return path, int(line), src.strip()


def _output_code_paths(name: str) -> dict[str, str]:
    """compile id -> the generated module its inductor_output_code record names."""
    [f] = (GPU / name / "trace").glob("*.log.gz")
    out = {}
    with gzip.open(f, "rt") as fh:
        for line in fh:
            if '"inductor_output_code"' in line:
                d = json.loads(line[line.index("{"):])
                out[f"{d['frame_id']}/{d['frame_compile_id']}"] = d["inductor_output_code"]["filename"]
    return out


def test_out_of_memory_in_dynamic_compiled_code_is_memory_tied_to_the_compile_that_raised() -> None:
    name = "oom_compiled"
    report = _report(name)
    logs = _logs(name)
    nums = _message_numbers(logs)
    path, line, src = _raising_module(logs)
    assert _output_code_paths(name)["0/1"] == path  # torch's own: [0/1] wrote the module that raised
    [c] = report["crashes"]
    assert (c["exc_type"], c["category"], c["raised_in"]) == ("torch.OutOfMemoryError", "out_of_memory", "compiled code")
    mem = c["memory"]
    assert {k: mem[k]["text"] for k in nums} == nums == {
        "asked": "4.00 GiB", "capacity": "79.18 GiB", "free": "2.50 GiB", "this_process": "76.67 GiB"}
    assert (mem["allocated"]["text"], mem["reserved_unallocated"]["text"], mem["other_processes"]) == ("75.92 GiB", "97.81 MiB", [])
    assert mem["asked"]["bytes"] == 4 * 1024**3 == 16384 * 65536 * 4  # buf0 at batch 16384, float32
    ran = c["ran"]
    assert (ran["compile_id"], ran["function"], ran["module"], ran["module_line"], ran["statement"]) == ("0/1", "f", path, line, src)
    assert ran["buffer"] == {"name": "buf0", "shape": "s77x65536", "dtype": "float32", "symbolic": True}
    # [0/1] is torch's recompile for x's dim 0 (`Recompiling function f` in torch_logs.txt)
    assert "- 0/0: tensor 'x' size mismatch at index 0. expected 1024, actual 2048" in logs
    assert ran["recompile_reason"] == "0/0: tensor 'x' size mismatch at index 0. expected 1024, actual 2048"
    assert c["called_from"]["code"].startswith("y = compiled(x, w1, w2)")
    step = c["next_step"]
    assert step.startswith(
        "Out of device memory, not a compiler bug: 4.00 GiB asked with 2.50 GiB free of 79.18 GiB; this process "
        "holds 76.67 GiB (75.92 GiB of it in PyTorch's tensors). Lower the batch or sequence length ([0/1] compiled "
        "its sizes as dynamic (recompiled after 0/0: tensor 'x' size mismatch at index 0. expected 1024, actual "
        "2048): the failing call's sizes are not in the log; buf0 is s77x65536 float32)."
    )
    assert "torch.cuda.memory._dump_snapshot" in step and "torch.compiler.set_stance('force_eager')" in step
    assert "REPRO_LEVEL" not in step and "minify" not in step
    assert "expandable_segments" not in step  # 97.81 MiB cached is less than the 4 GiB asked
    text = render_text(report, width=400)
    assert (
        "torch.OutOfMemoryError in the compiled code of [0/1] f (oom_compiled.py:26): out of device memory "
        "(CUDA, GPU 0): 4.00 GiB asked, 2.50 GiB free of 79.18 GiB, this process holds 76.67 GiB"
    ) in text
    assert "allocation: buf0, s77x65536 float32: c756sumkzgxyxxm74f6dc4mec2aytahd5hjvfvchggrxo6t6ahyl.py:96 (the generated code of [0/1])" in text
    [f] = [f for f in report["findings"] if f["kind"] == "crash"]
    assert (f["severity"], f["certainty"]) == ("act", "certain")


def test_out_of_memory_after_a_recompile_for_the_grown_input_names_that_recompile() -> None:
    name = "oom_compiled_static"
    report = _report(name)
    logs = _logs(name)
    path, _, src = _raising_module(logs)
    assert _output_code_paths(name)["0/2"] == path
    assert src == "buf0 = empty_strided_cuda((16384, 65536), (65536, 1), torch.float32)"
    assert "- 0/1: tensor 'x' size mismatch at index 0. expected 2048, actual 16384" in logs
    [c] = report["crashes"]
    ran = c["ran"]
    assert (ran["compile_id"], ran["recompile_reason"]) == ("0/2", "0/1: tensor 'x' size mismatch at index 0. expected 2048, actual 16384")
    assert ran["buffer"] == {"name": "buf0", "shape": "16384x65536", "dtype": "float32", "symbolic": False}
    assert ("Lower the batch or sequence length ([0/2] is the recompile for the input that changed: 0/1: tensor 'x' "
            "size mismatch at index 0. expected 2048, actual 16384).") in c["next_step"]
    text = render_text(report, width=400)
    assert "input: [0/2] recompiled for 0/1: tensor 'x' size mismatch at index 0. expected 2048, actual 16384" in text


def test_the_oom_parser_reads_torchs_message_and_not_tritons_shared_memory_error() -> None:
    logs = _logs("oom_compiled")
    message = logs[logs.index("CUDA out of memory."):].splitlines()[0]
    assert is_oom_message(message)
    # torch adds a clause per other process on the device (CUDACachingAllocator.cpp)
    other = message.replace("Including non-PyTorch", "Process 4242 has 10.00 GiB memory in use. Including non-PyTorch")
    assert oom_of(other)["other_processes"] == [{"pid": 4242, "in_use": {"text": "10.00 GiB", "bytes": 10 * 1024**3}}]
    # Triton's "out of resource" (shared memory per block, in the same run's autotuning) is not device memory
    triton = next(x for x in _logs("stop_backward_autotuning").splitlines() if "out of resource" in x)
    assert "OutOfMemoryError: out of resource: triton_mm" in triton
    assert not is_oom_message(triton) and oom_of(triton) is None
    assert _report("stop_backward_autotuning")["crashes"] == []
