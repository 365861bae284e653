"""`traceview ablate`: the torch.compile troubleshooting ladder, run for the user.

PyTorch's troubleshooting guide says: when torch.compile fails, rerun with backend="eager"
(Dynamo only), "aot_eager" (+ AOTAutograd), "aot_eager_decomp_partition" (+ Inductor's
decompositions and the partitioner), then "inductor"; the first backend that fails holds the
bug. Then try Inductor's modes and the dynamic-shape settings, and run the minifier. This
module runs the user's program once per rung without editing it (each rung's settings are
applied to every torch.compile call by traceview/ablate_bootstrap.py), reads each rung's
TORCH_TRACE and TORCH_LOGS with traceview's own analysis (`build_report`), and draws the
verdict.

Everything here works on plain data: `run_ablation` returns the report dict (schema in
docs/ablate-and-repro.md) and `render_ablation` lays it out; the CLI only parses arguments.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from traceview.capture import capture_env
from traceview.errors import UserError
from traceview.textutil import one_line, printable

ABLATION_SCHEMA_VERSION = 1
BOOTSTRAP = Path(__file__).with_name("ablate_bootstrap.py")
BOOTSTRAP_ENV = "TRACEVIEW_ABLATE"
TORCH_LOGS = "recompiles,graph_breaks"
DEFAULT_TIMEOUT_S = 1800.0

# The ladder, in the order the guide climbs it, with the piece each rung adds.
BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")
DEFAULT_LADDER = BACKENDS
COMPONENT = {
    "eager": "dynamo",
    "aot_eager": "aot_autograd",
    "aot_eager_decomp_partition": "decompositions",
    "inductor": "inductor",
}
COMPONENT_WORDS = {
    "dynamo": "a Dynamo problem (a graph break, a Dynamo bug, or the program's own code under Dynamo)",
    "aot_autograd": "an AOTAutograd problem (tracing the forward/backward graphs)",
    "decompositions": "a problem in Inductor's decompositions or the min-cut partitioner",
    "inductor": "an Inductor problem (lowering, code generation or compiling the generated code)",
    "custom_backend": "a problem in the program's own backend",
    "program": "a problem in the program itself: it fails without torch.compile too",
    "accuracy": "an accuracy problem",
    "none": "no problem reproduced",
    "nothing_compiled": "nothing to ablate",
    "inconclusive": "inconclusive",
}
COMPONENT_SHORT = {
    "dynamo": "Dynamo",
    "aot_autograd": "AOTAutograd",
    "decompositions": "Inductor's decompositions and the partitioner",
    "inductor": "Inductor",
}
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# Failure categories (traceview.analyze.failures) that make a rung fail even when the program
# exits 0 (the program caught the error, or suppress_errors ran the frame eagerly). Graph
# breaks, user exceptions and recompile limits are how programs normally run, not failures.
COMPILER_FAILURES = ("backend_compiler_failure", "internal_dynamo_error", "export_guard_data_dependent", "other")

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


# ---------------------------------------------------------------------- the command
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_PY_FLAGS_WITH_ARG = "WX"


def split_python_command(cmd: Sequence[str]) -> tuple[list[str], list[str]]:
    """`python -u train.py --lr 1` -> (["python", "-u"], ["train.py", "--lr", "1"]).

    The target is `script ARGS`, `-m module ARGS` or `-c code ARGS`; a script file with a python
    shebang is run with that interpreter. Anything else is a UserError: the rungs are applied
    inside the Python process, so it has to be one we start."""
    cmd = list(cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UserError("nothing to run: use `traceview ablate [-o DIR] -- python train.py ARGS...`")
    interp, rest = [cmd[0]], cmd[1:]
    if not _is_python(cmd[0]):
        shebang = _python_shebang(cmd[0])
        if shebang is None:
            raise UserError(
                f"{cmd[0]}: ablate runs Python programs: give `python script.py ARGS`, `python -m module "
                "ARGS` or a script with a python shebang (launchers such as torchrun or a shell script "
                "start their own Python processes, which the rungs cannot reach)"
            )
        interp, rest = shebang, cmd
    opts: list[str] = []
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "--":
            i += 1
            break
        if a == "-" or not a.startswith("-"):
            break
        if a.startswith("--"):
            if a == "--check-hash-based-pycs" and i + 1 < len(rest):
                opts += rest[i : i + 2]
                i += 2
                continue
            raise UserError(f"python option {a} is not supported by ablate")
        for j, ch in enumerate(a[1:], start=1):
            if ch in "mc":  # -m module / -c code end the interpreter options
                value = a[j + 1 :]
                if j > 1:
                    opts.append(a[:j])
                target = ([f"-{ch}", value] if value else [f"-{ch}"]) + rest[i + 1 :]
                if len(target) < 2:
                    raise UserError(f"python -{ch} needs an argument")
                return interp + opts, target
            if ch in _PY_FLAGS_WITH_ARG:
                if j + 1 < len(a):
                    opts.append(a)
                    i += 1
                else:
                    opts += rest[i : i + 2]
                    i += 2
                break
        else:
            opts.append(a)
            i += 1
    if i >= len(rest) or rest[i] == "-":
        raise UserError("ablate needs a script, `-m module` or `-c code` to run (not a program on stdin)")
    return interp + opts, rest[i:]


def _is_python(arg: str) -> bool:
    if _PYTHON.match(os.path.basename(arg)):
        return True
    path = shutil.which(arg) or arg
    try:
        return os.path.samefile(path, sys.executable)
    except OSError:
        return False


def _python_shebang(arg: str) -> list[str] | None:
    path = arg if os.sep in arg else (shutil.which(arg) or arg)
    try:
        with open(path, "rb") as f:
            first = f.readline(200).decode("utf-8", "replace")
    except OSError:
        return None
    if first.startswith("#!") and "python" in first:
        return shlex.split(first[2:].strip())
    return None


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


class _Stop(Exception):
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
    except (KeyboardInterrupt, _Stop):
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
        except (KeyboardInterrupt, _Stop):
            _kill_group(proc)
            run.status = "interrupted"
    run.elapsed_s = round(time.monotonic() - t0, 1)
    rc = proc.returncode
    run.exit_code = 128 - rc if rc is not None and rc < 0 else rc
    run.error_line = error_line((rung_dir / "torch_logs.txt").read_text(encoding="utf-8", errors="replace"))
    run.calls, reached = _read_calls(record)
    run.analysis = analyze_rung(rung_dir, reached_pids={proc.pid, *reached})
    if run.status == "not-run":
        run.status = rung_status(run.exit_code, run.analysis)
    progress.done(label, _progress_text(run))
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
    traces = sorted(trace_dir.glob("dedicated_log_torch_trace_*.log"))
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
    from traceview.report import build_report

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
    storms = report["recompile_storms"]
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
    return re.search(rb"(^|\n)(\[rank\d+\]:)?[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ ", head) is not None


# ---------------------------------------------------------------------- follow-up rungs
def follow_ups(runs: list[RungRun], done: set[str]) -> tuple[list[Rung], list[dict[str, str]]]:
    """Rungs worth adding after the backend ladder (each with why), and those not worth it."""
    add: list[Rung] = []
    skip: list[dict[str, str]] = []
    ladder = [r for r in runs if r.rung.is_ladder]
    by_backend = {r.rung.backend: r for r in ladder}
    first_fail = next((r for r in sorted(ladder, key=lambda r: BACKENDS.index(r.rung.backend)) if not r.passed), None)
    asked = asked_settings(runs)
    devices = sorted({d for r in runs for d in r.analysis.get("devices", [])})
    gpu = any(d != "cpu" for d in devices)

    def want(rung: Rung, why: str) -> None:
        if rung.name not in done and all(r.name != rung.name for r in add):
            add.append(replace(rung, why=why))

    custom = sorted({b for b in asked["backends"] if b not in (*BACKENDS, None)})
    if custom:
        want(Rung(None), f"the program asks for backend {', '.join(repr(b) for b in custom)}, which the ladder replaces: this rung runs the program as written")
    if first_fail is not None and first_fail.rung.backend == "eager":
        want(Rung(None, disable=True), "eager fails: does the program fail without torch.compile as well?")
    if first_fail is not None and first_fail.rung.backend == "inductor":
        own_modes = sorted({m for m in asked["modes"] if m and m != "default"})
        if own_modes:
            want(Rung("inductor", mode="default", set_mode=True), f"the program asks for mode {', '.join(own_modes)}: does Inductor's default mode pass?")
        if gpu:
            want(Rung("inductor", mode="reduce-overhead", set_mode=True), "Inductor fails: does it with CUDA graphs (reduce-overhead)?")
            want(Rung("inductor", mode="max-autotune", set_mode=True), "Inductor fails: does it with other kernel choices (max-autotune)?")
        else:
            skip.append({
                "rung": "inductor:mode=reduce-overhead",
                "why": "not run: reduce-overhead adds CUDA graphs, which apply to CUDA tensors only; on CPU it compiles the same code as the default mode",
            })
            want(
                Rung("inductor", mode="max-autotune", set_mode=True),
                "Inductor fails: does it with other kernel choices? On CPU max-autotune only autotunes matrix "
                "multiplies (ATen against Inductor's C++ GEMM templates, for constant weights and bmm); "
                "its coordinate-descent tuning and CUDA graphs apply to GPU code only",
            )
    if first_fail is not None and first_fail.rung.backend in BACKENDS and first_fail.rung.backend != "eager":
        b = first_fail.rung.backend
        if first_fail.analysis.get("dynamic_shapes"):
            want(Rung(b, dynamic=False, set_dynamic=True), f"the failing {b} compiles have symbolic (dynamic) shapes: does {b} pass with static shapes?")
        elif False not in asked["dynamics"]:
            skip.append({"rung": f"{b}:dynamic=false", "why": f"not run: the failing {b} compiles have static shapes already"})
    if first_fail is None and "inductor" in by_backend:
        ind = by_backend["inductor"]
        n = int(ind.analysis.get("recompiles") or 0)
        if n and True not in asked["dynamics"]:
            want(Rung("inductor", dynamic=True, set_dynamic=True), f"{n} recompiles with inductor: does dynamic=True avoid them?")
        elif not n:
            skip.append({"rung": "inductor:mode=*, :dynamic=*", "why": "not run: every backend passes and inductor does not recompile, so modes and dynamic settings have nothing to explain"})
    return add, skip


def asked_settings(runs: list[RungRun]) -> dict[str, list[Any]]:
    """What the program's torch.compile calls asked for, as the bootstrap recorded it."""
    calls = [c.get("asked") or {} for r in runs for c in r.calls]
    return {
        "backends": sorted({c.get("backend") for c in calls}, key=str),
        "modes": sorted({c.get("mode") for c in calls}, key=str),
        "dynamics": sorted({c.get("dynamic") for c in calls}, key=str),
        "fullgraph": sorted({bool(c.get("fullgraph")) for c in calls}),
        "calls": len(calls),
    }


# ---------------------------------------------------------------------- outputs
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)\b")


def compare_outputs(reference: str, other: str, *, rtol: float = 1e-3) -> dict[str, Any]:
    """Compare two runs' stdout line by line; numbers may differ by `rtol` (relative) plus one
    unit of their last printed digit, everything else must be equal."""
    a, b = reference.splitlines(), other.splitlines()
    worst = 0.0
    for i, (x, y) in enumerate(zip(a, b), start=1):
        if x == y:
            continue
        xs, ys = _NUMBER.split(x), _NUMBER.split(y)
        xn, yn = _NUMBER.findall(x), _NUMBER.findall(y)
        if xs != ys or len(xn) != len(yn):
            return {"same": False, "line": i, "reference": x, "this": y, "max_rel_diff": None}
        for p, q in zip(xn, yn):
            fp, fq = float(p), float(q)
            if p == q or (math.isnan(fp) and math.isnan(fq)):
                continue
            if math.isinf(fp) or math.isinf(fq) or math.isnan(fp) or math.isnan(fq):
                return {"same": False, "line": i, "reference": x, "this": y, "max_rel_diff": None}
            ulp = max(_last_digit(p), _last_digit(q))
            diff = abs(fp - fq)
            rel = diff / max(abs(fp), 1e-12)
            if diff > rtol * abs(fp) + ulp:
                return {"same": False, "line": i, "reference": x, "this": y, "max_rel_diff": round(rel, 6),
                        "values": [p, q]}
            worst = max(worst, rel)
    if len(a) != len(b):
        i = min(len(a), len(b)) + 1
        return {
            "same": False,
            "line": i,
            "reference": a[i - 1] if i <= len(a) else "(no more output)",
            "this": b[i - 1] if i <= len(b) else "(no more output)",
            "max_rel_diff": None,
        }
    return {"same": True, "line": None, "reference": None, "this": None, "max_rel_diff": round(worst, 6)}


def _last_digit(number: str) -> float:
    """One unit of the last printed digit (`1.25` -> 0.01, `3e-5` -> 1e-5, `12` -> 1)."""
    mant, _, exp = number.lower().partition("e")
    decimals = len(mant.split(".", 1)[1]) if "." in mant else 0
    return 10.0 ** (-decimals + (int(exp) if exp else 0))


def _compare_all(runs: list[RungRun], rtol: float) -> str | None:
    passing = [r for r in runs if r.passed]
    ref = next((r for r in passing if r.rung.name == "eager"), passing[0] if passing else None)
    if ref is None:
        return None
    ref_text = (ref.dir / "stdout.txt").read_text(encoding="utf-8", errors="replace")
    for r in passing:
        if r is ref:
            continue
        text = (r.dir / "stdout.txt").read_text(encoding="utf-8", errors="replace")
        r.output = {"compared_with": ref.rung.name, **compare_outputs(ref_text, text, rtol=rtol)}
    return ref.rung.name


# ---------------------------------------------------------------------- verdict
def _failure_text(run: RungRun) -> str:
    first = (run.analysis.get("failures") or [None])[0]
    if run.status == "timeout":
        return "timed out"
    if run.status == "interrupted":
        return "interrupted"
    if first and (run.status == "compile-error" or first.get("category") in COMPILER_FAILURES or run.error_line is None):
        return f"[{first['compile_id']}] {first.get('fail_type') or first['category']}: {first['reason']}"
    if run.error_line:
        return run.error_line
    return f"exit code {run.exit_code}"


def verdict(runs: list[RungRun], out_dir: Path, *, minified: bool = False) -> dict[str, Any]:
    """Which component fails first, in the guide's terms, and the next step (`minified`: the
    minifier ran already, so the step does not suggest it)."""
    ladder = sorted((r for r in runs if r.rung.is_ladder and r.status not in ("interrupted", "not-run")), key=lambda r: BACKENDS.index(r.rung.backend))
    by_name = {r.rung.name: r for r in runs}
    first_fail = next((r for r in ladder if not r.passed), None)
    v: dict[str, Any] = {"component": "none", "first_failing_rung": None, "last_passing_rung": None, "summary": "", "details": [], "next_step": ""}
    if not any(r.calls for r in runs) and not any(r.analysis.get("compiles") for r in runs):
        v.update(
            component="nothing_compiled",
            summary=f"{COMPONENT_WORDS['nothing_compiled']}: the program never called torch.compile (or "
            "torch._dynamo.optimize), so every rung ran the same code",
            next_step="check that the command runs the code that compiles (and that it does not start it in "
            "another process, which the rungs do not reach)",
        )
        return v
    counted = [r for r in ladder if r.analysis.get("compiles")]
    if counted and all(r.analysis.get("unreached_compiles") == r.analysis.get("compiles") for r in counted):
        v.update(
            component="inconclusive",
            summary=f"{COMPONENT_WORDS['inconclusive']}: every compile ran in processes the program starts itself "
            "(multiprocessing workers, a launcher's ranks), which the rungs do not reach, so every rung ran the "
            "program's own settings there",
            next_step="ablate the code that compiles in a single process (e.g. one rank without the launcher), "
            "or set the backend in the program and compare runs with `traceview run`",
        )
        return v
    if not ladder:
        v.update(component="inconclusive", summary="no backend rung (eager, aot_eager, aot_eager_decomp_partition, inductor) finished, so no component can be named")
        return v
    if first_fail is None:
        return _verdict_all_pass(v, ladder, by_name, out_dir)
    below = [r for r in ladder if BACKENDS.index(r.rung.backend) < BACKENDS.index(first_fail.rung.backend)]
    last_pass = below[-1] if below else None
    above_pass = [r for r in ladder if BACKENDS.index(r.rung.backend) > BACKENDS.index(first_fail.rung.backend) and r.passed]
    comp = COMPONENT[first_fail.rung.backend]
    v["first_failing_rung"] = first_fail.rung.name
    v["last_passing_rung"] = last_pass.rung.name if last_pass else None
    why = _failure_text(first_fail)
    fail_dir = out_dir / first_fail.rung.dir_name
    cid = next((f["compile_id"] for f in first_fail.analysis.get("failures", []) if f.get("category") in COMPILER_FAILURES), None)
    if comp == "dynamo":
        nc = by_name.get("no-compile")
        if nc is not None and nc.status in ("fail", "timeout"):
            comp = "program"
            v["summary"] = f"fails without torch.compile as well (no-compile: {_failure_text(nc)}): not a torch.compile problem"
            v["next_step"] = f"fix the program; its error is in {out_dir / 'no-compile' / 'torch_logs.txt'}"
        else:
            v["summary"] = f"fails already with backend='eager' (Dynamo alone): {why}"
            if True in asked_settings(runs)["fullgraph"]:
                v["details"].append("the program compiles with fullgraph=True, so any graph break is an error")
            if nc is not None and nc.passed:
                v["details"].append("passes without torch.compile (no-compile), so Dynamo's handling of the program is what fails")
            v["next_step"] = _dynamo_next_step(first_fail, fail_dir)
    else:
        passed = f"passes with {last_pass.rung.name}, " if last_pass else ""
        v["summary"] = f"{passed}fails with {first_fail.rung.name}: {why}"
        v["next_step"] = _backend_next_step(first_fail, comp, cid, fail_dir, minified)
    if above_pass:
        v["details"].append(
            f"but {', '.join(r.rung.name for r in above_pass)} passes: a deterministic problem in "
            f"{first_fail.rung.name}'s piece would fail there too; the failing piece is one the later "
            "backend replaces (e.g. an op Inductor decomposes), or the failure is intermittent (rerun to check)"
        )
    v["details"] += _follow_up_details(runs, first_fail)
    v["details"] += _unreached_details(ladder)
    v["component"] = comp
    v["summary"] = f"{COMPONENT_WORDS[comp]}: {v['summary']}"
    return v


def _unreached_details(ladder: list[RungRun]) -> list[str]:
    n = max((int(r.analysis.get("unreached_compiles") or 0) for r in ladder), default=0)
    if not n:
        return []
    return [
        f"up to {n} compiles per rung ran in processes the program started itself, with the program's own "
        "settings: the verdict rests on the other compiles"
    ]


def _verdict_all_pass(v: dict[str, Any], ladder: list[RungRun], by_name: dict[str, RungRun], out_dir: Path) -> dict[str, Any]:
    v["last_passing_rung"] = ladder[-1].rung.name
    v["details"] += _unreached_details(ladder)
    aw = by_name.get("as-written")
    if aw is not None and not aw.passed and aw.status != "interrupted":
        backends = sorted({str((c.get("asked") or {}).get("backend")) for c in aw.calls} - {"None", *BACKENDS})
        cid = next((f["compile_id"] for f in aw.analysis.get("failures", []) if f.get("category") in COMPILER_FAILURES), "ID")
        v.update(
            component="custom_backend",
            first_failing_rung="as-written",
            summary=f"{COMPONENT_WORDS['custom_backend']}: every built-in backend passes, the program as written "
            f"(backend {', '.join(backends) or '?'}) fails: {_failure_text(aw)}",
            next_step="debug the backend on the graph it receives: `traceview repro "
            f"{out_dir / 'as-written' / 'trace'} --compile-id {cid} --backend eager` writes that graph as a script",
        )
        return v
    differs = [r for r in ladder if r.output and not r.output["same"]]
    if differs:
        first = differs[0]
        o = first.output or {}
        idx = BACKENDS.index(first.rung.backend)
        same_before = [r.rung.name for r in ladder if BACKENDS.index(r.rung.backend) < idx]
        comp = COMPONENT[first.rung.backend]
        v.update(
            component="accuracy",
            first_failing_rung=first.rung.name,
            last_passing_rung=same_before[-1] if same_before else None,
            summary=f"{COMPONENT_WORDS['accuracy']}: every rung runs, but the output with {first.rung.name} differs "
            f"from {o.get('compared_with')} ({_difference(o)}); the first rung that differs adds {COMPONENT_SHORT[comp]}",
            next_step=(
                "rerun with `--minify` (TORCHDYNAMO_REPRO_LEVEL=4 compares each graph's result with eager "
                "and dumps the first that differs); if the program draws random numbers inside compiled code, "
                "Inductor's differ by design (torch._inductor.config.fallback_random=True makes it use eager's)"
            ),
        )
        return v
    ind = by_name.get("inductor")
    extras = ""
    if ind is not None and (ind.analysis.get("graph_breaks") or ind.analysis.get("recompiles")):
        extras = (
            f"; with inductor: {ind.analysis.get('graph_breaks', 0)} graph breaks, "
            f"{ind.analysis.get('recompiles', 0)} recompiles (`traceview summary {out_dir / 'inductor'}` says why)"
        )
    v.update(
        component="none",
        summary=f"{COMPONENT_WORDS['none']}: the program runs with every rung{extras}",
        next_step="if it fails elsewhere, the difference is in that run (inputs, environment, GPU, torch version): "
        "run `traceview ablate` there, or `traceview run` to capture its logs",
    )
    return v


def _difference(o: dict[str, Any]) -> str:
    if o.get("values"):
        a, b = o["values"]
        return f"line {o.get('line')}: {a} vs {b}"
    return f"line {o.get('line')}: {one_line(o.get('reference'), 60)!r} vs {one_line(o.get('this'), 60)!r}"


def _dynamo_next_step(run: RungRun, fail_dir: Path) -> str:
    first = (run.analysis.get("failures") or [None])[0]
    cat = first.get("category") if first else None
    where = f" at {first['filename']}:{first['line']}" if first and first.get("filename") else ""
    if cat == "graph_break":
        hint = f" (torch's hint: {one_line(first.get('hint'), 200)})" if first and first.get("hint") else ""
        return (
            f"a graph break{where} stops a fullgraph=True compile: fix the construct{hint}, or drop "
            f"fullgraph=True so that Dynamo splits the graph there (`traceview summary {fail_dir}` has the "
            "details); the minifier cannot shrink Dynamo failures"
        )
    if cat == "user_exception":
        return f"the program's own exception{where} inside the compiled function: fix it there"
    return (
        f"rerun with TORCHDYNAMO_VERBOSE=1 for Dynamo's internal stack (`traceview summary {fail_dir}`); "
        "a Dynamo bug is reported to pytorch/pytorch with the smallest program that fails with backend='eager' "
        "(the minifier cannot shrink Dynamo failures); torch._dynamo.config.suppress_errors=True runs such frames eagerly meanwhile"
    )


def _backend_next_step(run: RungRun, comp: str, cid: str | None, fail_dir: Path, minified: bool) -> str:
    repro = f"`traceview repro {fail_dir / 'trace'} --compile-id {cid}` writes a script for the failing compile; " if cid else ""
    after = "aot" if comp == "inductor" else "dynamo"
    fallback = {
        "inductor": "backend='aot_eager_decomp_partition' runs the program without Inductor meanwhile (slower)",
        "decompositions": "backend='aot_eager' runs the program without the decompositions meanwhile",
        "aot_autograd": "backend='eager' runs the program without AOTAutograd meanwhile",
    }[comp]
    minify = "" if minified else (
        f"`--minify` reruns {run.rung.name} with TORCHDYNAMO_REPRO_AFTER={after} TORCHDYNAMO_REPRO_LEVEL=2 for the minifier; "
    )
    return f"{repro}{minify}{fallback}"


def _follow_up_details(runs: list[RungRun], first_fail: RungRun) -> list[str]:
    out = []
    for r in runs:
        if r.rung.is_ladder or r.status in ("interrupted", "not-run") or r.rung.disable:
            continue
        if r.rung.backend is None:
            out.append(f"as written (the program's own settings): {r.status}" + ("" if r.passed else f": {_failure_text(r)}"))
            continue
        if r.rung.set_mode:
            what = f"with mode={r.rung.mode}"
        elif r.rung.set_dynamic:
            what = f"with dynamic={r.rung.dynamic}"
        else:
            continue
        if r.passed:
            hint = " (dynamic shapes take part in the failure)" if r.rung.set_dynamic and r.rung.dynamic is False else ""
            out.append(f"{r.rung.backend} {what} passes{hint}")
        else:
            same = _failure_text(r) == _failure_text(first_fail)
            out.append(f"{r.rung.backend} {what} fails too" + (" (the same error)" if same else f": {_failure_text(r)}"))
    return out


# ---------------------------------------------------------------------- minifier
def minify_plan(v: dict[str, Any], runs: list[RungRun]) -> tuple[Rung | None, dict[str, str], str | None]:
    """(rung to rerun, minifier environment, or why the minifier does not apply)."""
    name = v.get("first_failing_rung")
    run = next((r for r in runs if r.rung.name == name), None)
    if run is None:
        return None, {}, "nothing failed, so there is nothing to minify"
    if v["component"] in ("dynamo", "program"):
        return None, {}, (
            "the first failure is in Dynamo (or the program), which the minifier cannot shrink: it works on the "
            "graph Dynamo hands to the backend"
        )
    backend = run.rung.backend
    after = "aot" if backend == "inductor" else "dynamo"
    level = "4" if v["component"] == "accuracy" else "2"
    return run.rung, {"TORCHDYNAMO_REPRO_AFTER": after, "TORCHDYNAMO_REPRO_LEVEL": level}, None


def _minify(plan_rung: Rung, env: dict[str, str], base_env: dict[str, str], argv: list[str], out_dir: Path,
            timeout_s: float | None, progress: Progress) -> dict[str, Any]:
    mdir = out_dir / "minify"
    debug_root = mdir / "debug"
    full = {**base_env, **env, "TORCH_COMPILE_DEBUG_DIR": str(debug_root.resolve())}
    run = run_rung(plan_rung, argv, mdir, env=full, timeout_s=timeout_s, progress=progress, label=f"[minify] {plan_rung.name}")
    launchers = sorted(str(p) for p in debug_root.rglob("minifier_launcher.py"))
    repros = sorted(str(p) for p in debug_root.rglob("repro.py"))
    note = None
    if launchers:
        note = (
            f"run `python {launchers[0]}` to shrink the failing graph: it writes the smallest graph that still "
            "fails as repro.py next to itself (and into the directory it runs in)"
        )
    elif repros:
        note = f"the repro is {repros[0]}"
    else:
        note = "the minifier wrote nothing: the failure did not happen in the graph it watches (see the rung's torch_logs.txt)"
    return {
        "rung": plan_rung.name,
        "dir": str(mdir),
        "env": env,
        "status": run.status,
        "exit_code": run.exit_code,
        "minifier_launcher": launchers[0] if launchers else None,
        "repro": repros[0] if repros else None,
        "note": note,
    }


# ---------------------------------------------------------------------- the ablation
@dataclass
class AblationOptions:
    out_dir: Path | None = None
    rungs: list[Rung] | None = None  # None: the default ladder plus follow-ups
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    compare_output: bool = False
    rtol: float = 1e-3
    minify: bool = False
    warm_cache: bool = False


def default_out_dir() -> Path:
    return Path(f"traceview-ablate-{_dt.datetime.now():%Y%m%d-%H%M%S}")


def _base_env(warm_cache: bool, cache_dir: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDYNAMO_REPRO_") and k != BOOTSTRAP_ENV}
    if not warm_cache and cache_dir is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir)
    return env


def run_ablation(
    cmd: Sequence[str],
    options: AblationOptions,
    *,
    progress: Progress | None = None,
    on_update: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the ladder for `cmd`; returns the ablation report (also written to DIR/ablation.json
    after every rung, so an interrupted ablation keeps what finished)."""
    prefix, target = split_python_command(cmd)
    if not target[0].startswith("-") and not Path(target[0]).is_file():
        raise UserError(f"{target[0]}: no such file")
    argv = [*prefix, str(BOOTSTRAP), *target]
    cmd = list(cmd[1:] if cmd and cmd[0] == "--" else cmd)
    out = options.out_dir or default_out_dir()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out}: exists and is not empty; choose another -o")
    out.mkdir(parents=True, exist_ok=True)
    progress = progress or Progress()
    explicit = options.rungs is not None
    planned = list(options.rungs) if explicit else [Rung(b) for b in DEFAULT_LADDER]
    runs: list[RungRun] = []
    skipped: list[dict[str, str]] = []
    state: dict[str, Any] = {"interrupted": False, "minify": None, "reference": None}
    cache = None if options.warm_cache else Path(tempfile.mkdtemp(prefix="traceview-ablate-inductor-cache-"))
    base_env = _base_env(options.warm_cache, cache)
    t0 = time.monotonic()

    def report() -> dict[str, Any]:
        return ablation_report(cmd, out, runs, skipped, state, options, time.monotonic() - t0)

    def save() -> dict[str, Any]:
        rep = report()
        _write_json(out / "ablation.json", rep)
        if on_update:
            on_update(rep)
        return rep

    progress.line(f"traceview ablate: {shlex.join(list(cmd))}")
    progress.line(f"  output in {out}/<rung>/ (trace/, torch_logs.txt, stdout.txt); TORCH_LOGS={TORCH_LOGS}")
    handlers = _stop_on_signals()
    try:
        i = 0
        followed = explicit
        while True:
            if i >= len(planned):
                if followed:
                    break
                followed = True
                more, skip = follow_ups(runs, {r.name for r in planned})
                skipped.extend(skip)
                for r in more:
                    progress.line(f"  + {r.name}: {r.why}")
                planned += more
                if not more:
                    break
                continue
            rung = planned[i]
            i += 1
            label = f"[{i}/{len(planned)}] {rung.name}"
            run = run_rung(rung, argv, out / rung.dir_name, env=base_env, timeout_s=options.timeout_s, progress=progress, label=label)
            runs.append(run)
            if run.status == "interrupted":
                state["interrupted"] = True
                break
            save()
        if options.compare_output and not state["interrupted"]:
            state["reference"] = _compare_all(runs, options.rtol)
        if options.minify and not state["interrupted"]:
            v = verdict(runs, out)
            rung, menv, why = minify_plan(v, runs)
            if rung is None:
                state["minify"] = {"rung": None, "note": why}
            else:
                state["minify"] = _minify(rung, menv, base_env, argv, out, options.timeout_s, progress)
                if state["minify"]["status"] == "interrupted":
                    state["interrupted"] = True
    except (KeyboardInterrupt, _Stop):
        state["interrupted"] = True
    finally:
        _restore_signals(handlers)
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
    return save()


def _stop_on_signals() -> dict[int, Any]:
    """SIGTERM and SIGHUP (a closed SSH session) stop the ablation like Ctrl-C does."""
    old: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return old

    def stop(signum: int, frame: Any) -> None:
        raise _Stop()

    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            old[sig] = signal.signal(sig, stop)
    return old


def _restore_signals(old: dict[int, Any]) -> None:
    for sig, h in old.items():
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, h)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def ablation_report(
    cmd: Sequence[str],
    out: Path,
    runs: list[RungRun],
    skipped: list[dict[str, str]],
    state: dict[str, Any],
    options: AblationOptions,
    elapsed_s: float,
) -> dict[str, Any]:
    """The ablation as plain data (schema: docs/ablate-and-repro.md)."""
    devices = sorted({d for r in runs for d in r.analysis.get("devices", [])})
    asked = asked_settings(runs)
    return {
        "schema_version": ABLATION_SCHEMA_VERSION,
        "command": list(cmd),
        "output_dir": str(out),
        "devices": devices,
        "program_asked": asked,
        "torch_logs": TORCH_LOGS,
        "fresh_inductor_cache": not options.warm_cache,
        "timeout_s": options.timeout_s,
        "elapsed_s": round(elapsed_s, 1),
        "interrupted": bool(state.get("interrupted")),
        "rungs": [_rung_row(r) for r in runs],
        "not_run": skipped,
        "output_reference": state.get("reference"),
        "verdict": verdict(runs, out, minified=bool((state.get("minify") or {}).get("rung"))),
        "minify": state.get("minify"),
    }


def _rung_row(r: RungRun) -> dict[str, Any]:
    a = r.analysis
    first = (a.get("failures") or [None])[0]
    return {
        "name": r.rung.name,
        "backend": r.rung.backend,
        "mode": r.rung.mode if r.rung.set_mode else None,
        "dynamic": r.rung.dynamic if r.rung.set_dynamic else "as-written",
        "why": r.rung.why or None,
        "dir": str(r.dir),
        "status": r.status,
        "exit_code": r.exit_code,
        "elapsed_s": r.elapsed_s,
        "error_line": r.error_line,
        "compiles": a.get("compiles", 0),
        "failed_compiles": a.get("failed_compiles", 0),
        "graph_breaks": a.get("graph_breaks", 0),
        "graph_break_sites": a.get("graph_break_sites", 0),
        "recompiles": a.get("recompiles", 0),
        "compile_time_s": a.get("compile_time_s", 0.0),
        "first_failure": first,
        "devices": a.get("devices", []),
        "dynamic_shapes": a.get("dynamic_shapes", False),
        "unreached_compiles": a.get("unreached_compiles", 0),
        "note": a.get("note"),
        "output": r.output,
    }


def exit_code(report: dict[str, Any]) -> int:
    """0 when every rung passed (and printed the same output), 1 when one did not, 130 when
    the ablation was interrupted."""
    if report["interrupted"]:
        return 130
    bad = [r for r in report["rungs"] if r["status"] != "pass" or (r.get("output") and not r["output"]["same"])]
    return 1 if bad else 0


# ---------------------------------------------------------------------- text
def render_ablation(report: dict[str, Any], *, width: int = 100) -> str:
    """The ablation for a terminal: the table, then the verdict and the next step."""
    w = max(width, 60)
    lines: list[str] = [""]
    compared = report.get("output_reference") is not None
    head = ("rung", "result", "exit", "failed", "breaks", "recompiles", "compile s", "time s") + (("output",) if compared else ())
    rows = [head]
    for r in report["rungs"]:
        result = {"pass": "pass", "fail": "FAIL", "compile-error": "COMPILE ERR", "timeout": "TIMEOUT", "interrupted": "interrupted"}.get(r["status"], r["status"])
        row: tuple[str, ...] = (
            r["name"], result, "" if r["exit_code"] is None else str(r["exit_code"]), str(r["failed_compiles"]),
            str(r["graph_breaks"]), str(r["recompiles"]), f"{r['compile_time_s']:.2f}", f"{r['elapsed_s']:.1f}",
        )
        if compared:
            o = r.get("output")
            row += ("reference" if r["name"] == report["output_reference"] else "-" if not o else "same" if o["same"] else "DIFFERS",)
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for row in rows:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])] + [
            c.ljust(widths[i]) if head[i] == "output" else c.rjust(widths[i]) for i, c in enumerate(row[2:], start=2)
        ]
        lines.append(printable("  ".join(cells)).rstrip())
    devices = ", ".join(report["devices"]) or "unknown"
    lines.append(f"(devices: {devices}; failed = failed compiles, breaks = graph breaks, as traceview reads each rung's logs)")

    def para(label: str, text: str) -> None:
        lines.extend(textwrap.wrap(printable(f"{label}{text}"), width=w, subsequent_indent=" " * min(len(label), 12),
                                   break_on_hyphens=False, break_long_words=False))

    for r in report["rungs"]:
        if r["status"] != "pass" or (r.get("output") and not r["output"]["same"]):
            detail = r["error_line"] or (f"[{r['first_failure']['compile_id']}] {r['first_failure']['reason']}" if r["first_failure"] else r["note"] or "")
            if r["status"] == "compile-error" and r["first_failure"]:
                detail = f"[{r['first_failure']['compile_id']}] {r['first_failure'].get('fail_type')}: {r['first_failure']['reason']}"
            if r.get("output") and not r["output"]["same"]:
                o = r["output"]
                detail = f"stdout differs from {o['compared_with']}'s at {_difference(o)}"
            if detail:
                para(f"  {r['name']}: ", one_line(detail, 400))
    for r in report["rungs"]:
        if r.get("unreached_compiles"):
            para(f"  {r['name']}: ", r["note"])
    for s in report["not_run"]:
        para(f"  {s['rung']}: ", s["why"])
    lines.append("")
    v = report["verdict"]
    para("verdict: ", v["summary"])
    for d in v["details"]:
        para("  - ", d)
    if v["next_step"]:
        para("next step: ", v["next_step"])
    m = report.get("minify")
    if m:
        if m.get("rung") is None:
            para("minify: ", m["note"])
        else:
            para("minify: ", f"{m['rung']} rerun with {' '.join(f'{k}={v}' for k, v in m['env'].items())} -> {m['status']}")
            if m.get("minifier_launcher"):
                para("  minifier_launcher.py: ", m["minifier_launcher"])
            if m.get("repro"):
                para("  repro.py: ", m["repro"])
            para("  ", m["note"])
    if report["interrupted"]:
        lines.append("interrupted: the rungs above finished; the rest did not run")
    lines.append(f"every rung's trace and logs: {report['output_dir']}/<rung>/; this report: {report['output_dir']}/ablation.json")
    return "\n".join(lines) + "\n"
