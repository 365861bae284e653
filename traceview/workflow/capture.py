"""`traceview run`: run a command with TORCH_TRACE and TORCH_LOGS set, keep both, summarise.

The command's stdout goes straight to the terminal; its stderr goes to the terminal and to
`DIR/torch_logs.txt` (byte for byte, so progress bars still work); the trace goes to
`DIR/trace/`. The command's exit code is passed through. The summary (or the UI) of what was
captured is the command line's business (traceview.cli.cmd_run); `write_capture_page` writes
the page of the captured trace for `traceview run --html FILE` (the page of `traceview report`).
"""

from __future__ import annotations

import datetime as _dt
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from traceview.errors import UserError

DEFAULT_TORCH_LOGS = "recompiles,graph_breaks,annotation"


def capture_env(trace_dir: Path, torch_logs: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a captured run: `base` (default: ours) with TORCH_TRACE and TORCH_LOGS."""
    env = dict(os.environ if base is None else base)
    env["TORCH_TRACE"] = str(trace_dir.resolve())
    env["TORCH_LOGS"] = torch_logs
    return env


def _tee(src: object, sinks: list) -> None:
    read = src.read1 if hasattr(src, "read1") else src.read  # type: ignore[attr-defined]
    while True:
        chunk = read(65536)
        if not chunk:
            break
        for s in sinks:
            try:
                s.write(chunk)
                s.flush()
            except (OSError, ValueError):
                pass


# What a fatal signal means for a torch.compile run (PyTorch's triage of a segfault).
_SIGNAL_STEPS = {
    "SIGSEGV": (
        "a crash in native code (segmentation fault): rerun with PYTHONFAULTHANDLER=1 for the "
        "Python stack; then mode='default' (no CUDA graphs), backend='aot_eager' (no Inductor), "
        "backend='eager' (Dynamo only): the first that runs names the culprit"
    ),
    "SIGBUS": "a crash in native code (bus error): rerun with PYTHONFAULTHANDLER=1 for the Python stack",
    "SIGABRT": "the process aborted (a C++ assertion or std::terminate): the lines before this in stderr say why",
    "SIGKILL": "killed from outside (often the out-of-memory killer: check dmesg)",
}


# the line `run` appends to the captured stderr when the command died of a signal
# (parsers.stops reads it: `traceview run: the command exited with 139 (SIGSEGV)`)
EXIT_LINE = "traceview run: the command exited with"


def _signal_name(n: int) -> str | None:
    try:
        return signal.Signals(n).name
    except ValueError:
        return None


def killed_by(rc: int) -> str | None:
    """What an exit status above 128 (a signal; `run_capture` maps -N to 128+N) says."""
    try:
        name = signal.Signals(rc - 128).name
    except ValueError:
        return None
    step = _SIGNAL_STEPS.get(name)
    return f"the command was killed by {name}" + (f": {step}" if step else "")


@dataclass(frozen=True)
class Capture:
    """What `run_capture` captured: where, the command's exit code, and whether it logged."""

    directory: Path
    returncode: int
    logged_anything: bool


def run_capture(
    command: list[str], *, output: str | None = None, torch_logs: str | None = None, live: bool = True
) -> Capture:
    """Run `command` (a leading `--` is dropped) with TORCH_TRACE and TORCH_LOGS set, into
    `output` (default: ./traceview-run-<time>). `live`: while it runs, the trace's events
    (traceview.live.watch) go to stderr among the program's own output, each line marked
    `[traceview]`."""
    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UserError("nothing to run: use `traceview run [-o DIR] -- python train.py ARGS...`")
    out = Path(output or f"traceview-run-{_dt.datetime.now():%Y%m%d-%H%M%S}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out}: exists and is not empty; choose another -o")
    trace_dir = out / "trace"
    trace_dir.mkdir(parents=True, exist_ok=True)
    torch_logs = torch_logs or DEFAULT_TORCH_LOGS
    env = capture_env(trace_dir, torch_logs)
    log_path = out / "torch_logs.txt"
    sys.stderr.write(f"traceview: running {' '.join(cmd)}\n  TORCH_TRACE={trace_dir}  TORCH_LOGS={torch_logs}\n")
    sys.stderr.flush()
    try:
        proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise UserError(f"{cmd[0]}: command not found") from None
    except PermissionError:
        raise UserError(f"{cmd[0]}: permission denied") from None
    stop = threading.Event()
    watcher = _live_watch(trace_dir, stop) if live else None
    with open(log_path, "wb") as log:
        t = threading.Thread(target=_tee, args=(proc.stderr, [sys.stderr.buffer, log]), daemon=True)
        t.start()
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the command
        try:
            rc = proc.wait()
        finally:
            signal.signal(signal.SIGINT, old)
        t.join()
    if watcher is not None:
        stop.set()
        watcher.join(timeout=30)
    if rc < 0:
        rc = 128 - rc
    if rc > 128 and (name := _signal_name(rc - 128)):
        # the exit status into the capture itself: a signal leaves no traceback (parsers.stops reads it)
        with open(log_path, "ab") as log:
            log.write(f"{EXIT_LINE} {rc} ({name})\n".encode())
    sys.stderr.write(f"traceview: command exited with {rc}; trace and logs in {out}\n")
    if rc > 128 and (why := killed_by(rc)):
        sys.stderr.write(f"traceview: {why}\n")
    logged = any(trace_dir.iterdir()) or log_path.stat().st_size > 0
    if not logged:
        sys.stderr.write("traceview: the command logged nothing (did it call torch.compile?)\n")
    return Capture(out, rc, logged)


def _live_watch(trace_dir: Path, stop: threading.Event) -> threading.Thread:
    """The live watch of a captured run's trace, in a thread, until `stop`."""
    from traceview.live.watch import watch

    def run() -> None:
        try:
            watch([str(trace_dir)], out=sys.stderr, stop=stop, status_line=False, digest=False, prefix="[traceview] ",
                  interval_s=0.5)
        except Exception as exc:  # the command's run matters more than our view of it
            sys.stderr.write(f"[traceview] live view stopped: {exc}\n")

    t = threading.Thread(target=run, name="traceview-watch", daemon=True)
    t.start()
    return t


def write_capture_page(capture: Capture, out: str | os.PathLike[str]) -> tuple[Path, int]:
    """`traceview run --html FILE`: the page of the captured trace, exactly what
    `traceview report DIR -o FILE` writes (atomically); returns the path and its size."""
    from traceview.ingest.loading import LoadOptions, load_trace
    from traceview.output.page import write_page

    return write_page(load_trace(LoadOptions.of(capture.directory, prestart=True)), out)
