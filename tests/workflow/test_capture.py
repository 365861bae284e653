"""`traceview run`: a real torch program captured, exit code passed through, seq_nr present."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import traceview

PROGRAM = """
import sys
import torch

def f(x, w):
    h = x @ w
    return torch.erf(h).sum()  # the planted op

cf = torch.compile(f, backend="aot_eager")
x = torch.randn(4, 8)
w = torch.randn(8, 3, requires_grad=True)
cf(x, w).backward()
print("program done")
sys.exit(int(sys.argv[1]))
"""


def _run(tmp_path: Path, code: int, *extra: str) -> subprocess.CompletedProcess[str]:
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = dict(os.environ)
    env.pop("TORCH_LOGS", None)
    env.pop("TORCH_TRACE", None)
    return subprocess.run(
        [sys.executable, "-m", "traceview", "run", "-o", str(tmp_path / "cap"), *extra, "--", sys.executable, str(prog), str(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.mark.e2e
def test_run_captures_trace_and_logs(tmp_path: Path) -> None:
    r = _run(tmp_path, 3)
    assert r.returncode == 3, r.stderr[-2000:]
    assert "program done" in r.stdout
    assert "1 compiles" in r.stdout  # the summary printed afterwards
    out = tmp_path / "cap"
    assert list((out / "trace").glob("dedicated_log_torch_trace_*.log"))
    text = (out / "torch_logs.txt").read_text()
    assert "[__annotation]" in text
    # the live watch while it ran: on our stderr, never in the program's captured log
    live = [x for x in r.stderr.splitlines() if x.startswith("[traceview] ")]
    assert re.fullmatch(r"\[traceview\] \d\d:\d\d:\d\d \[0/0\] compiling f \(prog\.py:5\)", live[0]), live
    # the backward is compiled at the first .backward() (aot_eager: a few ms): said with the
    # compile's end when the watch read both at once, else on a line of its own with the total
    # (none when it rounds to 0.00s); the parts labelled either way
    at_once = re.fullmatch(r"\[traceview\] \d\d:\d\d:\d\d \[0/0\] compiled in \d+\.\d\ds "
                           r"\(forward \d+\.\d\ds \+ backward \d+\.\d\ds\): f \(prog\.py:5\)", live[1])
    apart = re.fullmatch(r"\[traceview\] \d\d:\d\d:\d\d \[0/0\] compiled in \d+\.\d\ds: f \(prog\.py:5\)", live[1])
    assert at_once or apart, live
    rest = live[2:-1]
    assert len(rest) <= (1 if apart else 0), live
    for x in rest:
        assert re.fullmatch(r"\[traceview\] \d\d:\d\d:\d\d \[0/0\] backward compiled in \d+\.\d\ds: f \(prog\.py:5\); "
                            r"\d+\.\d\ds in all \(forward \d+\.\d\ds \+ backward \d+\.\d\ds\)", x), live
    assert live[-1].startswith("[traceview] stopped: " + ("1 backward_end, " if rest else "") + "1 compile_end, 1 compile_start;"), live
    assert "[traceview]" not in text
    t = traceview.load(out)
    assert t.compiles["function"].to_list() == ["f"]
    ann = t.annotations
    assert ann.height > 0
    assert ann.filter(pl.col("seq_nr").is_not_null())["compile_id"].unique().to_list() == ["0/0"]


@pytest.mark.e2e
def test_run_writes_the_page_of_what_it_captured(tmp_path: Path) -> None:
    """`traceview run --html FILE`: after the run, the page `traceview report DIR` writes, atomically;
    the command's exit code still passed through and the summary still printed."""
    from traceview.cli import main

    r = _run(tmp_path, 5, "--html", str(tmp_path / "run.html"))
    assert r.returncode == 5, r.stderr[-2000:]
    assert "1 compiles" in r.stdout
    assert f"traceview: wrote {tmp_path / 'run.html'} (" in r.stderr
    html = (tmp_path / "run.html").read_text()
    assert "<title>traceview: 1 compiles</title>" in html
    assert re.search(r'<summary class="mono">\[0/0\] f <span class="note">[^<]*prog\.py:5</span>', html)
    assert not list(tmp_path.glob(".run.html.tmp-*"))  # written atomically
    assert main(["report", str(tmp_path / "cap"), "-o", str(tmp_path / "report.html")]) == 0
    assert (tmp_path / "report.html").read_text() == html


@pytest.mark.e2e
def test_run_no_watch_prints_nothing_of_ours_while_it_runs(tmp_path: Path) -> None:
    r = _run(tmp_path, 0, "--no-watch")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "[traceview]" not in r.stderr
    assert "1 compiles" in r.stdout


def test_run_refuses_non_empty_output(tmp_path: Path) -> None:
    (tmp_path / "cap").mkdir()
    (tmp_path / "cap" / "x").write_text("x")
    r = _run(tmp_path, 0)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("traceview: error:")
    assert "not empty" in r.stderr


def test_run_without_command() -> None:
    r = subprocess.run([sys.executable, "-m", "traceview", "run"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "nothing to run" in r.stderr


FULLGRAPH = """
import torch

@torch.compile(backend="eager", fullgraph=True)
def f(x):
    y = x * 2
    print("tracing", y.shape)  # the planted graph break
    return y + 1

f(torch.randn(4))
"""


@pytest.mark.e2e
def test_run_reports_the_uncaught_exception(tmp_path: Path) -> None:
    """Issue 13 class 3: the program died of a graph break under fullgraph=True; the summary
    after `traceview run` says so, from the traceback at the end of stderr."""
    prog = tmp_path / "fg.py"
    prog.write_text(FULLGRAPH)
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_LOGS", "TORCH_TRACE")}
    r = subprocess.run(
        [sys.executable, "-m", "traceview", "run", "-o", str(tmp_path / "cap"), "--", sys.executable, str(prog)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert r.returncode == 1, r.stderr[-2000:]
    # in the findings' order: the crash, the failed compile, then the graph break
    assert "findings: the program crashed, 1 failed compile, 1 graph break" in r.stdout
    # the crash is the failed compile [0/0], named as its failure is
    assert "torch._dynamo.exc.Unsupported compiling [0/0] f (fg.py:7): graph break" in r.stdout
    assert "RAN EAGERLY" not in r.stdout


@pytest.mark.e2e
def test_run_names_a_fatal_signal(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "traceview", "run", "-o", str(tmp_path / "cap"), "--", sys.executable, "-c",
         "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 139
    assert "traceview: the command was killed by SIGSEGV: a crash in native code (segmentation fault)" in r.stderr


SEGFAULT = """
import ctypes
import torch

@torch.compile(backend="eager")
def f(x):
    return x.sin() + 1

print(f(torch.randn(4)).sum().item(), flush=True)
ctypes.string_at(0)  # a real SIGSEGV: a null read, no faulthandler
"""


@pytest.mark.e2e
def test_run_records_the_signal_in_the_capture(tmp_path: Path) -> None:
    """Issue 45 class 3: a process killed by SIGSEGV without faulthandler leaves no traceback;
    `run` appends the exit status to the capture, and the summary says the signal first."""
    prog = tmp_path / "segv.py"
    prog.write_text(SEGFAULT)
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_LOGS", "TORCH_TRACE", "PYTHONFAULTHANDLER")}
    r = subprocess.run(
        [sys.executable, "-m", "traceview", "run", "-o", str(tmp_path / "cap"), "--", sys.executable, str(prog)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert r.returncode == 139, r.stderr[-2000:]
    log = (tmp_path / "cap" / "torch_logs.txt").read_text()
    assert log.endswith("traceview run: the command exited with 139 (SIGSEGV)\n")
    out = " ".join(r.stdout.split())  # the summary wraps its lines
    assert "findings: the program was killed by SIGSEGV" in out
    assert "killed by SIGSEGV, exit code 139 (no Python error) where: unknown (no Python stack)" in out
    assert "certain that it died of SIGSEGV (the capture's exit status: traceview run: the command exited with 139 (SIGSEGV))" in out
    assert "Rerun with PYTHONFAULTHANDLER=1" in out
