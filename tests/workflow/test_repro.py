"""`traceview repro`: scripts written from the fixtures' real traces, run with torch 2.13.

Each script is run as its own process; a script for a failed compile must raise the exception
class the compile raised, one for a successful compile must run cleanly. Compiles the log cannot
reproduce are refused with one line saying why.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

import traceview
from tests.conftest import FIXTURES, ROOT
from tests.conftest import program_env as _env
from traceview.trace import Trace
from traceview.workflow.ablate.rung import error_line
from traceview.workflow.repro import ReproUnavailable, build_repro, save_repro, write_repro


@cache
def _trace(name: str) -> Trace:
    return traceview.load(FIXTURES / name / "trace")


# (fixture, compile id, rank, --backend, source, backend the script uses, exception it must raise)
CASES = [
    ("simple", "0/0", None, None, "fx_graph_runnable", "inductor", None),
    ("inductor_error", "0/0", None, None, "fx_graph_runnable", "inductor", "InductorError"),
    ("inductor_error", "0/0", None, "inductor", "dynamo_output_graph", "inductor", "InductorError"),
    ("inductor_error", "1/0", None, None, "dynamo_output_graph", "aot_eager", None),
    ("graph_breaks", "7/1", None, None, "dynamo_output_graph", "eager", None),
    ("recompiles", "1/1", None, None, "dynamo_output_graph", "eager", None),
    ("multirank", "0/1", 1, None, "dynamo_output_graph", "aot_eager", None),
    ("backend_error", "0/0", None, "eager", "dynamo_output_graph", "eager", None),
]


def _run(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=_env(), timeout=600, cwd=path.parent)


@pytest.mark.e2e
def test_repro_scripts_of_the_fixtures_run_and_fail_like_the_compile(tmp_path: Path) -> None:
    scripts = []
    for name, cid, rank, backend, source, used, raises in CASES:
        repro = build_repro(_trace(name), cid, rank=rank, backend=backend)
        assert (repro.source, repro.backend, repro.expected_exception) == (source, used, raises), (name, cid)
        assert repro.lines < 100, (name, cid, repro.lines)
        text = repro.text
        assert text.startswith(f"# Reproduces torch.compile compile {cid}")
        assert f"from the {source} record at {FIXTURES / name / 'trace'}/dedicated_log_torch_trace_" in text
        assert "(traced with torch 2.13.0+cpu)" in text
        assert "TORCH_TRACE" not in text  # the script must not write into the fixture's trace dir
        scripts.append(((name, cid, backend), write_repro(repro, tmp_path / f"{name}_{cid.replace('/', '_')}_{backend}.py"), raises))
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda s: _run(s[1]), scripts))
    for (case, _, raises), r in zip(scripts, results):
        if raises is None:
            assert r.returncode == 0, (case, r.stderr[-2000:])
        else:
            assert r.returncode == 1, (case, r.stderr[-2000:])
            line = error_line(r.stderr) or ""
            assert line.split(":", 1)[0].rsplit(".", 1)[-1] == raises, (case, line)
    assert not list((FIXTURES / "inductor_error" / "trace").glob("*.log"))[1:], "a script wrote a trace into the fixture"


def test_the_inductor_failure_repro_carries_the_compile_config() -> None:
    fx = build_repro(_trace("inductor_error"), "0/0").text
    assert "torch._inductor.config.cpp.cxx = ('/nonexistent/c++',)" in fx
    assert "# Expected: raises InductorError, as the logged compile did (InductorError: InvalidCxxCompiler" in fx
    dyn = build_repro(_trace("inductor_error"), "0/0", backend="inductor").text
    assert "'cpp.cxx': ['/nonexistent/c++']" in dyn and "apply_logged_config()" in dyn


def test_inputs_follow_the_logged_metadata() -> None:
    sym = build_repro(_trace("inductor_error"), "1/0").text
    assert "        5,  # s77: Sym(s77)\n        3,  # s27: Sym(s27)\n" in sym
    assert "rand_strided((5, 3), (3, 1), torch.float32, 'cpu'),  # L_x_" in sym
    assert "torch.compile(mod, backend='aot_eager', dynamic=True)" in sym
    assert "inferred: AOTAutograd graphs but no Inductor records" in sym
    params = build_repro(_trace("graph_breaks"), "7/1").text
    assert "rand_strided((8, 8), (8, 1), torch.float32, 'cpu').requires_grad_(),  # L_self_modules_linear_parameters_weight_" in params
    assert "rand_strided((4, 8), (8, 1), torch.float32, 'cpu').requires_grad_(),  # L_x_" in params  # 7/1: x requires grad
    static = build_repro(_trace("multirank"), "0/1", rank=1).text
    assert "rand_strided((6, 8), (8, 1), torch.float32, 'cpu'),  # L_x_" in static
    assert "dynamic=False" in static  # torch.compile(..., dynamic=False) in the program: automatic dynamic off


def test_training_compile_has_two_inductor_graphs() -> None:
    fwd = build_repro(_trace("training"), "0/0")
    assert (fwd.source, fwd.expected_exception) == ("fx_graph_runnable", None) and fwd.lines < 100
    bwd = build_repro(_trace("training"), "0/0", graph="backward")
    assert "Inductor's input graph (forward)" in fwd.text and "Inductor's input graph (backward)" in bwd.text
    assert bwd.lineno > fwd.lineno
    assert "tangents_1" in bwd.text and "tangents_1" not in fwd.text


@pytest.mark.parametrize(
    ("name", "cid", "needle"),
    [
        ("backend_error", "0/0", "used the program's own backend 'failing_backend', whose code is not in the log; `--backend eager`"),
        ("backend_error", "1/0", "failed inside Dynamo (Unsupported: Observed exception), in the program's own code at"),
        ("graph_breaks", "6/0", "failed inside Dynamo (Unsupported: Call to `torch._dynamo.graph_break()`)"),
        ("recompiles", "0/8", "refused at the recompile limit: nothing was compiled"),
    ],
)
def test_compiles_the_log_cannot_reproduce_are_refused_with_the_reason(name: str, cid: str, needle: str) -> None:
    with pytest.raises(ReproUnavailable) as e:
        build_repro(_trace(name), cid)
    assert needle in str(e.value)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "traceview", "repro", *args], capture_output=True, text=True, timeout=120, cwd=ROOT, env=_env())


def test_cli_writes_the_script_or_says_why_not(tmp_path: Path) -> None:
    out = tmp_path / "repro.py"
    r = _cli("fixtures/simple", "--compile-id", "[0/0]", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(f"traceview: wrote {out} (") and "from fx_graph_runnable" in r.stderr
    assert out.read_text().startswith("# Reproduces torch.compile compile 0/0 of sin_mul_add")
    r = _cli("fixtures/backend_error", "--compile-id", "0/0")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("traceview: error: compile 0/0 used the program's own backend")
    r = _cli("fixtures/multirank", "--compile-id", "0/0")
    assert r.returncode == 2 and "is on ranks 0-1: pass --rank" in r.stderr
    r = _cli("fixtures/simple", "--compile-id", "3/0")
    assert r.returncode == 2 and "no compile 3/0 in the trace (compile ids: 0/0)" in r.stderr
    r = _cli("fixtures/simple", "--compile-id", "zero")
    assert r.returncode == 2 and "'zero' is not a compile id (expected e.g. 1/0, [1/0], 0/0_1" in r.stderr


def test_save_repro_names_the_file_after_the_compile(tmp_path: Path) -> None:
    path, repro = save_repro(_trace("multirank"), "0/1", rank=1, directory=tmp_path)
    assert path == tmp_path / "repro_rank1_0_1.py"
    assert path.read_text() == repro.text
    with pytest.raises(ReproUnavailable):
        save_repro(_trace("backend_error"), "1/0", directory=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repro_rank1_0_1.py"]


def test_the_compile_id_as_a_view_prints_it() -> None:
    # the summary prints [0/0_1] for a compile Dynamo restarted; the same compile as 0/0
    t = _trace("graph_breaks")
    assert build_repro(t, "[7/1]").text == build_repro(t, "7/1").text
    assert build_repro(t, "[0/0_1]").text == build_repro(t, "0/0").text
