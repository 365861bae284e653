"""One rung of `traceview ablate`: its settings, running the program with them, and traceview's
reading of what the run logged.

A rung is a configuration every torch.compile call of the program gets (traceview/workflow/ablate/bootstrap.py
applies it inside the program's process); `run_rung` runs the program once with it, with its own
TORCH_TRACE directory and TORCH_LOGS capture, a time limit and a clean stop, and `analyze_rung`
reads the logs with the analysis behind `traceview summary` (`build_report`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from parsers.glog import TEXT_PREFIX, as_bytes, plain
from traceview.errors import UserError
from traceview.printable import one_line, printable
from traceview.workflow.capture import capture_env

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
BOOTSTRAP_ENV = "TRACEVIEW_ABLATE"
TORCH_LOGS = "recompiles,graph_breaks"

# The ladder, in the order the guide climbs it.
BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# Failure categories (traceview.analyze.failures) that make a rung fail even when the program
# exits 0 (the program caught the error, or suppress_errors ran the frame eagerly). Graph
# breaks, user exceptions and recompile limits are how programs normally run, not failures.
COMPILER_FAILURES = (
    "backend_compiler_failure",
    "accuracy",
    "internal_dynamo_error",
    "user_error",
    "constraint_violation",
    "export_guard_data_dependent",
    "other",
)

RUNG_HELP = (
    "comma-separated rungs: eager, aot_eager, aot_eager_decomp_partition, inductor, as-written "
    "(the program's own settings), no-compile (torch.compile disabled); a backend takes "
    ":mode=M (inductor: default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs) "
    "and :dynamic=true|false|none, e.g. inductor:mode=max-autotune,inductor:dynamic=false"
)


# ------------------------------------------------------------------------------ rungs
@dataclass(frozen=True)
class Rung:
    """One configuration of every torch.compile call in the program."""

    backend: str | None  # None: the program's own backend (as-written)
    mode: str | None = None
    set_mode: bool = False
    dynamic: bool | None = None
    set_dynamic: bool = False
    disable: bool = False
    why: str = ""

    @property
    def name(self) -> str:
        if self.disable:
            return "no-compile"
        name = self.backend or "as-written"
        if self.set_mode:
            name += f":mode={self.mode or 'default'}"
        if self.set_dynamic:
            name += f":dynamic={str(self.dynamic).lower()}"
        return name

    @property
    def dir_name(self) -> str:
        return self.name.replace(":", "_")

    @property
    def is_ladder(self) -> bool:
        """A plain backend rung (no mode or dynamic override): one step of the verdict's ladder."""
        return self.backend in BACKENDS and not self.set_mode and not self.set_dynamic and not self.disable

    def bootstrap_config(self, record: Path) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "mode": self.mode,
            "set_mode": self.set_mode,
            "dynamic": self.dynamic,
            "set_dynamic": self.set_dynamic,
            "disable": self.disable,
            "record": str(record),
        }


def parse_rung(text: str) -> Rung:
    """`inductor:mode=max-autotune:dynamic=false` -> Rung (UserError on anything else)."""
    head, *opts = text.strip().split(":")
    if head == "no-compile" and not opts:
        return Rung(None, disable=True)
    if head not in (*BACKENDS, "as-written"):
        raise UserError(f"unknown rung {text!r}; {RUNG_HELP}")
    rung = Rung(None if head == "as-written" else head)
    for opt in opts:
        key, _, value = opt.partition("=")
        if key == "mode" and value in MODES:
            if head != "inductor":
                raise UserError(f"rung {text!r}: modes are Inductor's; use inductor:mode={value}")
            rung = replace(rung, mode=value, set_mode=True)
        elif key == "dynamic" and value.lower() in ("true", "false", "none"):
            rung = replace(rung, dynamic={"true": True, "false": False, "none": None}[value.lower()], set_dynamic=True)
        else:
            raise UserError(f"rung {text!r}: unknown option {opt!r}; {RUNG_HELP}")
    return rung


def parse_rungs(spec: str) -> list[Rung]:
    rungs = [parse_rung(s) for s in spec.split(",") if s.strip()]
    if not rungs:
        raise UserError(f"--rungs is empty; {RUNG_HELP}")
    names = [r.name for r in rungs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"--rungs names {', '.join(dup)} twice")
    return rungs


# ---------------------------------------------------------------------- progress
class Progress:
    """One line per rung with its elapsed time. On a terminal the line is rewritten in place
    (carriage return only); otherwise (a pipe, a CI log) a line when a rung starts, one every
    minute while it runs, and one when it ends."""

    def __init__(self, stream: TextIO | None = None, *, interactive: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if interactive is None:
            try:
                interactive = self.stream.isatty()
            except (AttributeError, ValueError):
                interactive = False
        self.interactive = interactive
        self._width = 0
        self._last_note = 0.0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def line(self, text: str) -> None:
        self._write(printable(text) + "\n")

    def start(self, label: str) -> None:
        self._last_note = 0.0
        if self.interactive:
            self._status(f"{label}  running    0s", fit=True)
        else:
            self.line(f"{label}: started")

    def tick(self, label: str, elapsed: float) -> None:
        if self.interactive:
            self._status(f"{label}  running {elapsed:4.0f}s", fit=True)
        elif elapsed - self._last_note >= 60:
            self._last_note = elapsed
            self.line(f"{label}: still running ({elapsed:.0f}s)")

    def done(self, label: str, text: str) -> None:
        if self.interactive:
            self._status(f"{label}  {text}")
            self._write("\n")
            self._width = 0
        else:
            self.line(f"{label}: {text}")

    def _status(self, text: str, *, fit: bool = False) -> None:
        text = printable(text)
        if fit:  # a line that wraps cannot be rewritten by a carriage return
            text = text[: max(shutil.get_terminal_size((80, 24)).columns - 1, 20)]
        pad = max(self._width - len(text), 0)
        self._width = len(text)
        self._write("\r" + text + " " * pad)


# ---------------------------------------------------------------------- one rung
@dataclass
class RungRun:
    """What one rung did: its process and what traceview read from its logs."""

    rung: Rung
    dir: Path
    status: str = "not-run"  # pass, fail, compile-error, timeout, interrupted
    exit_code: int | None = None
    elapsed_s: float = 0.0
    error_line: str | None = None
    analysis: dict[str, Any] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    output: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return self.status == "pass"


class StopRequested(Exception):
    """Ctrl-C, SIGTERM or SIGHUP while a rung runs."""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop the rung's process group (the program and its compile workers): SIGINT (Python
    unwinds, the trace file is flushed), then SIGTERM, then SIGKILL, a few seconds apart; a
    second Ctrl-C goes straight to SIGKILL."""
    try:
        for sig, grace in ((signal.SIGINT, 5.0), (signal.SIGTERM, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
    except (KeyboardInterrupt, StopRequested):
        pass
    finally:
        # what is left of the group (also workers after the program itself exited)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


_TRACEBACK = "Traceback (most recent call last):"


def error_line(stderr_text: str) -> str | None:
    """The exception line of the last traceback in a program's stderr (`Type: message`)."""
    lines = stderr_text.splitlines()
    starts = [i for i, s in enumerate(lines) if s.strip() == _TRACEBACK or s.endswith("] " + _TRACEBACK)]
    if not starts:
        return None
    for s in lines[starts[-1] + 1 :]:
        if s and not s[0].isspace():
            return one_line(s, 300)
    return None


def run_rung(
    rung: Rung,
    argv: list[str],
    rung_dir: Path,
    *,
    env: dict[str, str],
    timeout_s: float | None,
    progress: Progress,
    label: str,
) -> RungRun:
    """Run the program once for `rung`; its trace, stderr, stdout and calls go to `rung_dir`."""
    rung_dir.mkdir(parents=True, exist_ok=True)
    trace_dir = rung_dir / "trace"
    trace_dir.mkdir(exist_ok=True)
    record = rung_dir / "calls.json"
    env = capture_env(trace_dir, TORCH_LOGS, env)
    env[BOOTSTRAP_ENV] = json.dumps(rung.bootstrap_config(record.resolve()))
    env["PYTHONUNBUFFERED"] = "1"
    run = RungRun(rung, rung_dir)
    progress.start(label)
    t0 = time.monotonic()
    with open(rung_dir / "stdout.txt", "wb") as out, open(rung_dir / "torch_logs.txt", "wb") as err:
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        except OSError as exc:
            raise UserError(f"{argv[0]}: {exc.strerror or exc}") from None
        try:
            while True:
                elapsed = time.monotonic() - t0
                if timeout_s and elapsed >= timeout_s:
                    _kill_group(proc)
                    run.status = "timeout"
                    break
                try:
                    proc.wait(timeout=1.0 if not timeout_s else max(min(1.0, timeout_s - elapsed), 0.01))
                    break
                except subprocess.TimeoutExpired:
                    progress.tick(label, time.monotonic() - t0)
        except (KeyboardInterrupt, StopRequested):
            _kill_group(proc)
            run.status = "interrupted"
    rc = proc.returncode
    run = read_rung(
        rung, rung_dir, 128 - rc if rc is not None and rc < 0 else rc,
        status=run.status, elapsed_s=round(time.monotonic() - t0, 1), pid=proc.pid,
    )
    progress.done(label, _progress_text(run))
    return run


def read_rung(
    rung: Rung,
    rung_dir: Path,
    exit_code: int | None,
    *,
    status: str = "not-run",
    elapsed_s: float = 0.0,
    pid: int | None = None,
) -> RungRun:
    """A finished rung as traceview reads it from `rung_dir` (its stderr, the bootstrap's
    calls.json, its trace): what `run_rung` returns once the process has ended, also for a
    rung run elsewhere (a GPU machine) and copied here. `status`: "timeout"/"interrupted" when
    the process was stopped, else decided here; `pid`: the rung's process, if known (else
    the one calls.json names)."""
    run = RungRun(rung, rung_dir, status=status, exit_code=exit_code, elapsed_s=elapsed_s)
    run.error_line = error_line((rung_dir / "torch_logs.txt").read_text(encoding="utf-8", errors="replace"))
    run.calls, reached = _read_calls(rung_dir / "calls.json")
    run.analysis = analyze_rung(rung_dir, reached_pids={*reached, *([pid] if pid is not None else [])})
    if run.status == "not-run":
        run.status = rung_status(run.exit_code, run.analysis)
    return run


def _read_calls(path: Path) -> tuple[list[dict[str, Any]], set[int]]:
    """The calls the bootstrap recorded, and the pid of the process it ran in."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return list(data.get("calls") or []), {int(data["pid"])} if data.get("pid") else set()
    except (OSError, ValueError, AttributeError, TypeError):
        return [], set()


def rung_status(exit_code: int | None, analysis: dict[str, Any]) -> str:
    """pass / fail (non-zero exit) / compile-error (exit 0, but a compiler failure was logged)."""
    if exit_code != 0:
        return "fail"
    if any(f.get("category") in COMPILER_FAILURES for f in analysis.get("failures", [])):
        return "compile-error"
    return "pass"


def _progress_text(run: RungRun) -> str:
    words = {
        "pass": "pass",
        "fail": f"FAIL (exit {run.exit_code})",
        "compile-error": "COMPILE ERROR (exit 0)",
        "timeout": "TIMEOUT",
        "interrupted": "interrupted",
    }
    text = f"{words.get(run.status, run.status)} in {run.elapsed_s:.1f}s"
    if run.status != "pass":
        first = (run.analysis.get("failures") or [None])[0]
        why = (f"[{first['compile_id']}] {first['reason']}" if first else None) or run.error_line
        if why:
            text += f": {one_line(why, 100)}"
    return text


def analyze_rung(rung_dir: Path, *, reached_pids: set[int] | None = None) -> dict[str, Any]:
    """traceview's own reading of a rung's trace and text log (via build_report).

    `reached_pids`: the process(es) the rung's settings applied to; compiles of other processes
    (started by the program itself) are counted as `unreached_compiles`."""
    trace_dir = rung_dir / "trace"
    logs = rung_dir / "torch_logs.txt"
    traces = sorted(p for pat in ("*.log", "*.log.gz") for p in trace_dir.glob("dedicated_log_torch_trace_" + pat))
    empty: dict[str, Any] = {
        "compiles": 0,
        "failed_compiles": 0,
        "failures": [],
        "graph_breaks": 0,
        "graph_break_sites": 0,
        "recompiles": 0,
        "compile_time_s": 0.0,
        "devices": [],
        "dynamic_shapes": False,
        "unreached_compiles": 0,
        "traced": bool(traces),
        "note": None,
    }
    if not traces:
        empty["note"] = "no TORCH_TRACE file: the program compiled nothing (or stopped first)"
        return empty
    import traceview
    from parsers.discover import InputError
    from traceview.output.report import build_report

    try:
        trace = traceview.load(trace_dir, logs=[str(logs)] if _is_torch_log(logs) else None)
        report = build_report(trace)
    except (InputError, UserError, OSError) as exc:
        empty["note"] = f"could not read the rung's logs: {one_line(str(exc))}"
        return empty
    import polars as pl

    described = trace.events.filter(pl.col("kind") == "describe_tensor")["metadata"].to_list()
    devices = sorted({m.group(1) for d in described if d for m in [re.search(r"type='(\w+)'", d)] if m})
    symbolic = trace.events.filter(pl.col("kind").is_in(["create_symbol", "create_unbacked_symbol"])).height > 0
    hints = {(g.get("rank"), c): g.get("hint") for g in report["graph_breaks"] for c in g.get("compile_ids") or []}
    fails = [
        {
            **{k: f.get(k) for k in ("rank", "compile_id", "function", "category", "fail_type", "reason", "gb_id", "filename", "line", "next_step")},
            "hint": hints.get((f.get("rank"), f.get("compile_id"))) if f.get("category") == "graph_break" else None,
        }
        for f in report["failures"]
    ]
    storms = report["recompiles"]
    unreached = 0
    note = None
    if reached_pids is not None and trace.compiles.height:
        pids = trace.compiles["pid"]
        other = trace.compiles.filter(pids.is_not_null() & ~pids.is_in(sorted(reached_pids)))
        unreached = other.height
        if unreached:
            shown = ", ".join(str(p) for p in sorted(set(other["pid"].to_list()))[:8])
            note = (
                f"{unreached} of {trace.compiles.height} compiles ran in processes the program started itself "
                f"(pid {shown}), which the rung does not reach: they used the program's own settings"
            )
    return {
        "compiles": report["compiles"],
        "failed_compiles": len(fails),
        "failures": fails,
        "graph_breaks": sum(int(g.get("count") or 0) for g in report["graph_breaks"]),
        "graph_break_sites": len(report["graph_breaks"]),
        "recompiles": sum(max(int(s.get("compiles") or 0) - 1, 0) for s in storms),
        "compile_time_s": report["compile_time"]["total_s"],
        "devices": devices,
        "dynamic_shapes": symbolic,
        "unreached_compiles": unreached,
        "traced": True,
        "note": note,
    }


def _is_torch_log(path: Path) -> bool:
    """Whether the captured stderr holds any TORCH_LOGS record (else it is only the program's
    own output, which traceview would list as a skipped input)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 20)
    except OSError:
        return False
    return _RECORD.search(head) is not None


_RECORD = re.compile(as_bytes("(?m)^" + plain(TEXT_PREFIX)))
