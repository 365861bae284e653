"""`traceview ablate`: real programs, each rung a real subprocess of real torch 2.13.

The programs under tests/workflow/programs plant one problem each with a real torch config or construct:
a C++ compiler that does not exist (fails only in Inductor), data-dependent control flow under
fullgraph=True (fails already in Dynamo), randomness inside compiled code (Inductor prints other
numbers). Rung subsets keep the slow ones short; a rung of a program that does not import
torch takes a fraction of a second and covers the process handling (argv, -m, timeout, Ctrl-C).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import traceview
from tests.conftest import FIXTURES, ROOT
from tests.conftest import program_env as _env
from traceview.errors import UserError
from traceview.workflow.ablate import render_ablation, split_python_command
from traceview.workflow.ablate.rung import (
    BOOTSTRAP,
    Rung,
    RungRun,
    error_line,
    parse_rungs,
    read_rung,
)
from traceview.workflow.ablate.verdict import compare_outputs, follow_ups, minify_plan, verdict

PROGRAMS = ROOT / "tests" / "workflow" / "programs"


def _ablate(tmp_path: Path, program: Path | str, *args: str, prog_args: tuple[str, ...] = (), cwd: Path | None = None,
            target: list[str] | None = None) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "abl"
    cmd = [sys.executable, "-m", "traceview", "ablate", "-o", str(out), "--json", *args, "--", sys.executable]
    cmd += target if target is not None else [str(program), *prog_args]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=900, cwd=cwd or ROOT)
    assert r.stdout, r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert json.loads((out / "ablation.json").read_text()) == report
    return r, report


def _rungs(report: dict) -> dict[str, dict]:
    return {r["name"]: r for r in report["rungs"]}


# ------------------------------------------------------------------ the verdicts
@pytest.mark.e2e
def test_a_program_that_fails_only_under_inductor_is_named_inductor(tmp_path: Path) -> None:
    r, rep = _ablate(tmp_path, PROGRAMS / "ablate_inductor_fails.py", "--rungs", "aot_eager_decomp_partition,inductor", "--minify")
    assert r.returncode == 1, r.stderr[-3000:]
    rungs = _rungs(rep)
    assert list(rungs) == ["aot_eager_decomp_partition", "inductor"]
    dp = rungs["aot_eager_decomp_partition"]
    assert (dp["status"], dp["exit_code"], dp["compiles"], dp["failed_compiles"]) == ("pass", 0, 1, 0)
    ind = rungs["inductor"]
    assert (ind["status"], ind["exit_code"], ind["failed_compiles"]) == ("fail", 1, 1)
    assert ind["first_failure"]["fail_type"] == "InductorError"
    assert ind["first_failure"]["category"] == "backend_compiler_failure"
    assert "InvalidCxxCompiler" in ind["error_line"]
    v = rep["verdict"]
    assert (v["component"], v["first_failing_rung"], v["last_passing_rung"]) == ("inductor", "inductor", "aot_eager_decomp_partition")
    assert v["summary"].startswith("an Inductor problem")
    assert f"traceview repro {tmp_path / 'abl' / 'inductor' / 'trace'} --compile-id 0/0" in v["next_step"]
    # each rung applied its backend to the program's torch.compile() call
    calls = json.loads((tmp_path / "abl" / "aot_eager_decomp_partition" / "calls.json").read_text())["calls"]
    assert [(c["asked"]["backend"], c["applied"]["backend"]) for c in calls] == [(None, "aot_eager_decomp_partition")]
    # --minify reran inductor with the minifier after AOTAutograd and found its launcher
    m = rep["minify"]
    assert m["env"] == {"TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_LEVEL": "2"}
    assert m["minifier_launcher"].endswith("minifier/minifier_launcher.py")
    assert Path(m["minifier_launcher"]).is_file()
    # the launcher names the Inductor cache of the rerun: one inside DIR, not the removed temp one
    assert f"'TORCHINDUCTOR_CACHE_DIR'] = '{tmp_path / 'abl' / 'minify' / 'inductor-cache'}'" in Path(m["minifier_launcher"]).read_text()
    text = render_ablation(rep, width=1000)
    assert "passes with aot_eager_decomp_partition, fails with inductor" in text
    assert "minifier_launcher.py" in text


@pytest.mark.e2e
def test_a_fullgraph_graph_break_is_named_dynamo(tmp_path: Path) -> None:
    r, rep = _ablate(tmp_path, PROGRAMS / "ablate_dynamo_fails.py", "--rungs", "eager,aot_eager,no-compile")
    assert r.returncode == 1
    rungs = _rungs(rep)
    assert [(n, x["status"]) for n, x in rungs.items()] == [("eager", "fail"), ("aot_eager", "fail"), ("no-compile", "pass")]
    first = rungs["eager"]["first_failure"]
    assert (first["category"], first["fail_type"], first["line"]) == ("graph_break", "Unsupported", 8)
    assert first["reason"] == "Data-dependent branching"
    assert rungs["eager"]["error_line"].startswith("torch._dynamo.exc.Unsupported: Data-dependent branching")
    assert rungs["no-compile"]["compiles"] == 0
    v = rep["verdict"]
    assert (v["component"], v["first_failing_rung"], v["last_passing_rung"]) == ("dynamo", "eager", None)
    assert "fails already with backend='eager'" in v["summary"]
    assert "passes without torch.compile (no-compile), so Dynamo's handling of the program is what fails" in v["details"]
    assert "the program compiles with fullgraph=True, so any graph break is an error" in v["details"]
    assert "ablate_dynamo_fails.py:8" in v["next_step"] and "fullgraph=True" in v["next_step"]
    assert rep["program_asked"]["fullgraph"] == [True]


@pytest.mark.e2e
def test_a_healthy_program_passes_every_rung_with_the_same_output(tmp_path: Path) -> None:
    r, rep = _ablate(tmp_path, PROGRAMS / "ablate_healthy.py", "--compare-output", prog_args=("3",))
    assert r.returncode == 0, r.stderr[-3000:]
    rungs = _rungs(rep)
    assert list(rungs) == ["eager", "aot_eager", "aot_eager_decomp_partition", "inductor"]
    assert all(x["status"] == "pass" and x["compiles"] == 1 and x["failed_compiles"] == 0 for x in rungs.values())
    assert rep["output_reference"] == "eager"
    assert all(rungs[n]["output"]["same"] for n in ("aot_eager", "aot_eager_decomp_partition", "inductor"))
    assert (tmp_path / "abl" / "inductor" / "stdout.txt").read_text().count("step ") == 3  # the program's own argv
    assert rep["verdict"]["component"] == "none"
    assert rep["not_run"] and "nothing to explain" in rep["not_run"][0]["why"]
    # progress: a line per rung start and end, no terminal tricks when stderr is not a tty
    assert "[1/4] eager: started" in r.stderr and "[4/4] inductor: pass in " in r.stderr
    assert "\r" not in r.stderr and "\x1b" not in r.stderr


@pytest.mark.e2e
def test_compare_output_flags_inductor_random_numbers(tmp_path: Path) -> None:
    r, rep = _ablate(tmp_path, PROGRAMS / "ablate_random.py", "--rungs", "aot_eager,inductor", "--compare-output")
    assert r.returncode == 1
    rungs = _rungs(rep)
    assert rep["output_reference"] == "aot_eager"  # no eager rung: the first passing one
    assert rungs["inductor"]["status"] == "pass"
    assert rungs["inductor"]["output"]["same"] is False and rungs["inductor"]["output"]["line"] == 1
    v = rep["verdict"]
    assert (v["component"], v["first_failing_rung"], v["last_passing_rung"]) == ("accuracy", "inductor", "aot_eager")
    assert "TORCHDYNAMO_REPRO_LEVEL=4" in v["next_step"]
    assert "DIFFERS" in render_ablation(rep)


@pytest.mark.e2e
def test_a_failing_custom_backend_is_named_by_the_as_written_rung(tmp_path: Path) -> None:
    # fixtures/programs/backend_error.py: its own backend raises, the program catches it, exits 0
    r, rep = _ablate(tmp_path, ROOT / "fixtures" / "programs" / "backend_error.py", "--rungs", "eager,as-written")
    assert r.returncode == 1
    rungs = _rungs(rep)
    assert (rungs["eager"]["status"], rungs["as-written"]["status"], rungs["as-written"]["exit_code"]) == ("pass", "compile-error", 0)
    assert rungs["as-written"]["first_failure"]["fail_type"] == "BackendCompilerFailed"
    v = rep["verdict"]
    assert (v["component"], v["first_failing_rung"]) == ("custom_backend", "as-written")
    assert "backend failing_backend" in v["summary"]
    assert f"{tmp_path / 'abl' / 'as-written' / 'trace'} --compile-id 0/0 --backend eager" in v["next_step"]


ENTRY_POINTS = '''
import torch

@torch.compile(fullgraph=True)
def a(x):
    return x + 1

class M(torch.nn.Module):
    def forward(self, x):
        return x * 2

m = M()
m.compile(mode="max-autotune")
b = torch._dynamo.optimize("inductor")(lambda x: x - 1)
c = torch.compiler.compile(lambda x: x.sin(), backend="aot_eager", dynamic=True)
x = torch.ones(3)
print(a(x).sum().item(), m(x).sum().item(), b(x).sum().item(), round(c(x).sum().item(), 4))
'''


@pytest.mark.e2e
def test_every_entry_point_gets_the_rung_backend(tmp_path: Path) -> None:
    prog = tmp_path / "entry.py"
    prog.write_text(ENTRY_POINTS)
    r, rep = _ablate(tmp_path, prog, "--rungs", "eager")
    assert r.returncode == 0, r.stderr[-3000:]
    calls = json.loads((tmp_path / "abl" / "eager" / "calls.json").read_text())["calls"]
    asked = [(c["api"], c["asked"]["backend"], c["asked"]["mode"], c["asked"]["dynamic"], c["asked"]["fullgraph"]) for c in calls]
    assert asked == [
        ("torch.compile", None, None, None, True),
        ("torch.compile", None, "max-autotune", None, False),
        ("torch._dynamo.optimize", "inductor", None, None, False),
        ("torch.compile", "aot_eager", None, True, False),
    ]
    applied = [(c["applied"]["backend"], c["applied"].get("mode"), c["applied"]["dynamic"], c["applied"]["fullgraph"]) for c in calls]
    assert applied == [("eager", None, None, True), ("eager", None, None, False), ("eager", None, None, False), ("eager", None, True, False)]
    assert (tmp_path / "abl" / "eager" / "stdout.txt").read_text().split() == ["6.0", "6.0", "0.0", "2.5244"]
    # what torch did: four compiles, none with AOTAutograd or Inductor
    t = traceview.load(tmp_path / "abl" / "eager" / "trace")
    assert t.compiles.height == 4
    kinds = set(t.events["kind"].drop_nulls().to_list()) | set(t.events["name"].drop_nulls().to_list())
    assert not kinds & {"aot_inference_graph", "aot_forward_graph", "inductor_output_code", "fx_graph_runnable"}
    assert sorted(rep["program_asked"]["backends"], key=str) == sorted([None, "aot_eager", "inductor"], key=str)


SPAWNS = '''
import multiprocessing as mp
import torch

def work():
    f = torch.compile(lambda x: x + 1, backend="aot_eager")
    print(f(torch.ones(2)).sum().item())

if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=work)
    p.start()
    p.join()
    raise SystemExit(p.exitcode)
'''


@pytest.mark.e2e
def test_compiles_in_processes_the_program_starts_are_not_claimed(tmp_path: Path) -> None:
    # the rung's settings reach only the process traceview starts: a verdict on the worker's
    # compiles (which used backend aot_eager whatever the rung) would be a wrong answer
    prog = tmp_path / "spawns.py"
    prog.write_text(SPAWNS)
    r, rep = _ablate(tmp_path, prog, "--rungs", "eager")
    assert r.returncode == 0, r.stderr[-3000:]
    row = rep["rungs"][0]
    assert row["compiles"] == 1 and row["unreached_compiles"] == 1
    assert "ran in processes the program started itself" in row["note"]
    assert rep["verdict"]["component"] == "inconclusive"
    assert (tmp_path / "abl" / "eager" / "stdout.txt").read_text() == "4.0\n"


# ------------------------------------------------------------------ processes (no torch)
ARGV_PROGRAM = '''
import os, sys
import helper
print("argv", sys.argv[1:])
print("name", __name__)
print("helper", helper.VALUE)
'''


@pytest.mark.e2e
def test_the_program_runs_with_its_own_argv_and_path(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("VALUE = 42\n")
    prog = tmp_path / "prog.py"
    prog.write_text(ARGV_PROGRAM)
    r, rep = _ablate(tmp_path, prog, "--rungs", "eager", prog_args=("--lr", "0.1", "x y"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "abl" / "eager" / "stdout.txt").read_text().splitlines() == [
        "argv ['--lr', '0.1', 'x y']", "name __main__", "helper 42",
    ]
    row = rep["rungs"][0]
    assert row["compiles"] == 0 and "compiled nothing" in row["note"]
    assert rep["verdict"]["component"] == "nothing_compiled"


@pytest.mark.e2e
def test_a_module_target_runs_as_python_m_does(tmp_path: Path) -> None:
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text("import sys\nprint('argv0', sys.argv[0].endswith('train.py'), sys.argv[1:], __name__)\n")
    r, _ = _ablate(tmp_path, "", "--rungs", "eager", target=["-u", "-m", "mypkg.train", "a", "b"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "abl" / "eager" / "stdout.txt").read_text() == "argv0 True ['a', 'b'] __main__\n"


@pytest.mark.e2e
def test_a_rung_past_its_time_limit_is_stopped(tmp_path: Path) -> None:
    prog = tmp_path / "slow.py"
    prog.write_text("import time\nprint('started', flush=True)\ntime.sleep(120)\n")
    t0 = time.monotonic()
    r, rep = _ablate(tmp_path, prog, "--rungs", "eager", "--timeout", "2")
    assert time.monotonic() - t0 < 60
    row = rep["rungs"][0]
    assert row["status"] == "timeout" and row["exit_code"] != 0
    assert 2 <= row["elapsed_s"] < 30
    assert r.returncode == 1


INTERRUPTED = '''
import os, sys, time
flag = sys.argv[1]
if os.path.exists(flag):
    with open(flag + ".pid", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)
open(flag, "w").close()
print("first rung done")
'''


@pytest.mark.e2e
def test_ctrl_c_stops_the_rung_and_keeps_what_finished(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(INTERRUPTED)
    flag = tmp_path / "flag"
    out = tmp_path / "abl"
    cmd = [sys.executable, "-m", "traceview", "ablate", "-o", str(out), "--rungs", "eager,aot_eager,inductor",
           "--", sys.executable, str(prog), str(flag)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
    pid_file = Path(str(flag) + ".pid")
    deadline = time.monotonic() + 120
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    child = int(pid_file.read_text())
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # the rung's process is gone, not left running
    rep = json.loads((out / "ablation.json").read_text())
    assert rep["interrupted"] is True
    assert [(x["name"], x["status"]) for x in rep["rungs"]] == [("eager", "pass"), ("aot_eager", "interrupted")]
    assert "interrupted" in stdout


def test_the_bootstrap_imports_only_the_standard_library() -> None:
    # it runs in the user's interpreter, and torch waits until the program imports it
    code = "import json, sys; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    r = subprocess.run([sys.executable, str(BOOTSTRAP), "-c", code], capture_output=True, text=True,
                       env={**_env(), "TRACEVIEW_ABLATE": '{"backend": "eager"}'}, timeout=60)
    assert r.returncode == 0, r.stderr
    loaded = set(json.loads(r.stdout))
    assert not loaded & {"torch", "traceview", "parsers", "polars", "numpy", "pyarrow"}


# ------------------------------------------------------------------ pure functions
@pytest.mark.parametrize(
    ("cmd", "prefix", "target"),
    [
        (["python", "train.py", "--lr", "1"], ["python"], ["train.py", "--lr", "1"]),
        (["--", "python3.11", "-u", "-W", "ignore", "train.py"], ["python3.11", "-u", "-W", "ignore"], ["train.py"]),
        (["python", "-Xdev", "-m", "pkg.train", "-x"], ["python", "-Xdev"], ["-m", "pkg.train", "-x"]),
        (["python", "-um", "pkg.train"], ["python", "-u"], ["-m", "pkg.train"]),
        (["python", "-c", "print(1)", "a"], ["python"], ["-c", "print(1)", "a"]),
    ],
)
def test_split_python_command(cmd: list[str], prefix: list[str], target: list[str]) -> None:
    assert split_python_command(cmd) == (prefix, target)


def test_a_script_with_a_python_shebang(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("#!/usr/bin/env python3\nprint(1)\n")
    assert split_python_command([str(script), "a"]) == (["/usr/bin/env", "python3"], [str(script), "a"])


@pytest.mark.parametrize(
    ("cmd", "needle"),
    [
        (["torchrun", "--nproc-per-node=2", "train.py"], "ablate runs Python programs"),
        (["python"], "needs a script"),
        (["python", "-"], "needs a script"),
        ([], "nothing to run"),
    ],
)
def test_commands_ablate_cannot_run(cmd: list[str], needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        split_python_command(cmd)


def test_rung_names() -> None:
    rungs = parse_rungs("eager, inductor:mode=max-autotune:dynamic=false,as-written,no-compile,aot_eager:dynamic=none")
    assert [r.name for r in rungs] == [
        "eager", "inductor:mode=max-autotune:dynamic=false", "as-written", "no-compile", "aot_eager:dynamic=none",
    ]
    assert rungs[1].dir_name == "inductor_mode=max-autotune_dynamic=false"
    assert [r.is_ladder for r in rungs] == [True, False, False, False, False]
    assert Rung("inductor", mode="reduce-overhead", set_mode=True).bootstrap_config(Path("/x"))["mode"] == "reduce-overhead"
    for bad in ("eagre", "eager:mode=max-autotune", "inductor:mode=fast", "eager,eager", ""):
        with pytest.raises(UserError):
            parse_rungs(bad)


def test_compare_outputs_tolerates_printed_rounding_only() -> None:
    assert compare_outputs("loss 0.1234\nok\n", "loss 0.1235\nok\n")["same"]  # one unit of the last digit
    assert compare_outputs("x 1.00000001", "x 1.0000001")["same"]  # within rtol
    d = compare_outputs("a\nloss 0.50\n", "a\nloss 0.75\n")
    assert (d["same"], d["line"], d["values"]) == (False, 2, ["0.50", "0.75"])
    assert not compare_outputs("ok True", "ok False")["same"]
    assert compare_outputs("a\nb", "a")["this"] == "(no more output)"


def test_error_line_is_the_last_tracebacks_exception() -> None:
    err = (
        "W1123 12:00:00.000000 1 torch/x.py:1] noise\n"
        "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\nValueError: first\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n    raise X\n"
        "torch._inductor.exc.InductorError: CppCompileError: C++ compile error\n\nCommand:\ng++ ...\n"
    )
    assert error_line(err) == "torch._inductor.exc.InductorError: CppCompileError: C++ compile error"
    assert error_line("no traceback here\n") is None


def _run(name: str, status: str, devices: tuple[str, ...] = ("cpu",), asked: dict | None = None, **analysis) -> RungRun:
    rung = parse_rungs(name)[0]
    calls = [{"asked": {"backend": None, "mode": None, "dynamic": None, "fullgraph": False, **(asked or {})}}]
    return RungRun(rung, Path(rung.dir_name), status=status, exit_code=0 if status == "pass" else 1,
                   analysis={"devices": list(devices), **analysis}, calls=calls)


def _ladder(failing_from: str | None, **kw) -> list[RungRun]:
    names = ["eager", "aot_eager", "aot_eager_decomp_partition", "inductor"]
    k = names.index(failing_from) if failing_from else len(names)
    return [_run(n, "pass" if i < k else "fail", **kw) for i, n in enumerate(names)]


def test_follow_ups_after_an_inductor_failure_on_cpu_and_gpu() -> None:
    add, skip = follow_ups(_ladder("inductor"), set())
    assert [r.name for r in add] == ["inductor:mode=max-autotune"]
    assert "C++ GEMM templates" in add[0].why
    assert [s["rung"] for s in skip] == ["inductor:mode=reduce-overhead", "inductor:dynamic=false"]
    assert "CUDA tensors only" in skip[0]["why"]
    add, skip = follow_ups(_ladder("inductor", devices=("cuda",), dynamic_shapes=True, asked={"mode": "reduce-overhead"}), set())
    assert [r.name for r in add] == [
        "inductor:mode=default", "inductor:mode=reduce-overhead", "inductor:mode=max-autotune", "inductor:dynamic=false",
    ]


def test_follow_ups_elsewhere_on_the_ladder() -> None:
    assert [r.name for r in follow_ups(_ladder("eager"), set())[0]] == ["no-compile"]
    assert [r.name for r in follow_ups(_ladder("aot_eager", dynamic_shapes=True), set())[0]] == ["aot_eager:dynamic=false"]
    assert [r.name for r in follow_ups(_ladder(None, asked={"backend": "my_backend"}), set())[0]] == ["as-written"]
    assert [r.name for r in follow_ups(_ladder(None, recompiles=3), set())[0]] == ["inductor:dynamic=true"]
    add, skip = follow_ups(_ladder(None), set())
    assert add == [] and "nothing to explain" in skip[0]["why"]


def test_verdicts_on_unusual_ladders() -> None:
    runs = [*_ladder(None, asked={"backend": "my_backend"}), _run("as-written", "fail", asked={"backend": "my_backend"})]
    v = verdict(runs, Path("out"))
    assert (v["component"], v["first_failing_rung"]) == ("custom_backend", "as-written")
    assert "backend my_backend" in v["summary"]
    # eager fails but aot_eager passes: named, with the doubt said
    runs = [_run("eager", "fail"), _run("aot_eager", "pass")]
    v = verdict(runs, Path("out"))
    assert v["component"] == "dynamo"
    assert any(d.startswith("but aot_eager passes") for d in v["details"])
    # a program that fails without torch.compile too
    v = verdict([*_ladder("eager"), _run("no-compile", "fail")], Path("out"))
    assert v["component"] == "program"
    # only mode rungs: no component can be named
    assert verdict([_run("inductor:mode=max-autotune", "fail")], Path("out"))["component"] == "inconclusive"


GPU_ABLATION = FIXTURES / "gpu_ablation" / "ro_overwritten_output"


def test_a_cuda_graph_failure_on_a_real_gpu_is_named_cudagraphs() -> None:
    # a real ablation on an H100 (fixtures/gpu_ablation): the program asks for
    # mode="reduce-overhead" and reads a CUDA-graph output after the graph was replayed
    names = ["eager", "aot_eager", "aot_eager_decomp_partition", "inductor",
             "inductor:mode=default", "inductor:mode=reduce-overhead", "inductor:mode=max-autotune"]
    runs = []
    for name in names:
        rung = parse_rungs(name)[0]
        d = GPU_ABLATION / rung.dir_name
        runs.append(read_rung(rung, d, int((d / "rc.txt").read_text())))
    assert [r.status for r in runs] == ["pass", "pass", "pass", "fail", "pass", "fail", "fail"]
    assert runs[3].analysis["devices"] == ["cuda"]
    add, _ = follow_ups(runs[:4], {r.rung.name for r in runs[:4]})
    assert [r.name for r in add] == names[4:]
    v = verdict(runs, Path("out"))
    assert (v["component"], v["first_failing_rung"], v["last_passing_rung"]) == ("cudagraphs", "inductor", "aot_eager_decomp_partition")
    assert "passes with inductor:mode=default, fails with inductor, inductor:mode=reduce-overhead, inductor:mode=max-autotune" in v["summary"]
    assert "overwritten by a subsequent run" in v["summary"]
    assert "torch.compiler.cudagraph_mark_step_begin()" in v["next_step"] and "--minify" not in v["next_step"]
    rung, env, why = minify_plan(v, runs)
    assert rung is None and env == {} and "minifier" in why
    # without the default-mode rung there is no evidence that CUDA graphs alone fail
    v = verdict(runs[:4], Path("out"))
    assert v["component"] == "inductor"
