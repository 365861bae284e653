"""What launchers and the system write when they stop a job, read from a TORCH_LOGS capture.

Only reading: which line says which process got which signal, and when. What it means (who
stopped what, what each rank was doing) is traceview.analyze.stops'.

What is read (torch 2.13's own texts, `torch/distributed/elastic`, `torch/multiprocessing`):

* torchrun's records (glog prefix, so they carry a timestamp):
  `Received 15 death signal, shutting down workers` (torchrun itself got SIGTERM/SIGINT/...:
  `death_signal`), `Sending process 7061 closing signal SIGTERM` (torchrun stops a rank:
  `closing_signal`), `failed (exitcode: -9) local_rank: 1 (pid: 12178) of binary: ...` (a rank
  died: `child_exit`, a signal when the code is negative).
* torchrun's traceback: `SignalException: Process 7048 got signal: 15` (`signal_exception`), and
  its ChildFailedError blocks, one per failed rank (`child_failed`): `time : 2026-11-26_23:33:12`,
  `rank : 1 (local_rank: 1)`, `exitcode : -9 (pid: 12178)  (SIGKILL)`, `traceback : Signal 9
  (SIGKILL) received by PID 12178`; the one under `Root Cause (first observed failure):` is the
  root.
* torch.multiprocessing.spawn: `process 1 terminated with signal SIGKILL` (`spawn_signal`).
* A shell that ran the program (a job script) on the same stderr: `bash: line 1: 18684
  Segmentation fault      "$@"` (`shell_signal`, exit code 128 + N); srun's `srun: error: node1:
  task 0: Segmentation fault` (`srun_signal`). Only the crash signals' words (SIGSEGV, SIGBUS,
  SIGABRT, SIGILL, SIGFPE): a process that died of its own fault.
* `traceview run`'s own line at the end of its capture when a signal ended the command:
  `traceview run: the command exited with 139 (SIGSEGV)` (`capture_signal`).
* SLURM: `slurmstepd: error: *** JOB 123 ON node1 CANCELLED AT 2024-05-01T12:00:00 DUE TO TIME
  LIMIT ***` (also `STEP 123.0`; without `DUE TO ...` when scancel'ed: `slurm_cancel`).
* A Python `KeyboardInterrupt` (SIGINT, Ctrl-C) is an uncaught exception: read from the
  capture's tracebacks (parsers.tracebacks); `is_stop_exception` says which exceptions are a
  stop rather than the program's own error.
"""

from __future__ import annotations

import datetime as _dt
import re
import signal as _signal
from typing import Any

import polars as pl

from parsers.glog import RANK

STOPS_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String,
    "lineno": pl.Int64,
    "ts": pl.Datetime("us"),  # when, where the line says (null: a traceback line has no time)
    "ts_from": pl.String,  # "record" (the glog prefix), "failure time" (torchrun's, seconds), "slurm"
    "kind": pl.String,  # death_signal, closing_signal, child_exit, child_failed, signal_exception, spawn_signal, slurm_cancel, shell_signal, srun_signal, capture_signal
    "launcher": pl.String,  # torchrun, mp.spawn, SLURM
    "signal": pl.String,  # SIGTERM, SIGKILL, ... (null: an exit code that is not a signal)
    "exit_code": pl.Int32,  # a child's exit code (negative: the signal it died of)
    "pid": pl.Int64,  # the process that got the signal (or died)
    "rank": pl.Int32,  # its global rank where the line says (local rank for child_exit and spawn)
    "root": pl.Boolean,  # child_failed: torchrun's first observed failure
    "reason": pl.String,  # SLURM's `DUE TO ...`
    "text": pl.String,
}

_DEATH = re.compile(r"Received (\d+) death signal, shutting down workers")
_CLOSING = re.compile(r"Sending process (\d+) closing signal (SIG[A-Z0-9]+)")
_CHILD_EXIT = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")
_SIGNAL_EXC = re.compile(r"SignalException: Process (\d+) got signal: (\d+)")
_EXITCODE = re.compile(r"^\s*exitcode\s*: (-?\d+) \(pid: (\d+)\)")
_FAIL_TIME = re.compile(r"^\s*time\s*: (\d{4}-\d\d-\d\d_\d\d:\d\d:\d\d)")
_FAIL_RANK = re.compile(r"^\s*rank\s*: (\d+)")
_ROOT = "Root Cause (first observed failure):"
_SPAWN = re.compile(r"process (\d+) terminated with signal (SIG[A-Z0-9]+)")
_SLURM = re.compile(
    r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?: DUE TO ([A-Z][A-Z ]*[A-Z]))? \*\*\*"
)
# a shell that ran the program (a job script) reports its death on the same stderr: bash's
# `bash: line 1: 18684 Segmentation fault      "$@"`, a SLURM script's `…/slurm_script: line 12:
# 4567 Segmentation fault      (core dumped) python train.py`; srun's `srun: error: node1: task 0:
# Segmentation fault (core dumped)`. The words are strsignal()'s for the crash signals, and
# Python's faulthandler's (`Fatal Python error: Floating-point exception`): one table for both.
SIGNAL_WORDS = {
    "Segmentation fault": "SIGSEGV", "Bus error": "SIGBUS", "Aborted": "SIGABRT",
    "Illegal instruction": "SIGILL", "Floating point exception": "SIGFPE", "Floating-point exception": "SIGFPE",
}
# the signals a process dies of by its own fault (not sent from outside: OUTSIDE_SIGNALS)
CRASH_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL", "SIGFPE")
_WORDS = "|".join(re.escape(w) for w in SIGNAL_WORDS)
_SHELL_SIGNAL = re.compile(r"(?:^|: )(\d+) (" + _WORDS + r")(?:\s|$)")
_SRUN_SIGNAL = re.compile(r"^srun: error: \S+: tasks? (\d+)(?:[-,][\d,-]*)?: (" + _WORDS + r")\b")
# `traceview run` appends the command's exit status to the capture when a signal ended it
_CAPTURE_EXIT = re.compile(r"^traceview run: the command exited with (\d+) \((SIG[A-Z0-9]+)\)$")
_LINE_PREFIX = re.compile("^(?:" + RANK + " ?)+")

# the exceptions that say the process was stopped, not that its code failed
_STOP_EXCEPTIONS = ("SignalException", "KeyboardInterrupt")
# signals sent from outside (a launcher, a scheduler, a user, the kernel's OOM killer); SIGSEGV,
# SIGABRT, SIGBUS, SIGFPE are the process's own crash
OUTSIDE_SIGNALS = ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGXCPU")


def signal_name(number: int) -> str | None:
    """`SIGTERM` for 15 (None for a number that is no signal here)."""
    try:
        return _signal.Signals(number).name
    except ValueError:
        return None


def is_stop_exception(exc_type: str | None, message: str | None) -> bool:
    """Whether an uncaught exception says the process was stopped from outside: torchrun's
    SignalException, KeyboardInterrupt (SIGINT), mp.spawn's ProcessExitedException for a
    process killed by an outside signal, torchrun's ChildFailedError whose root failure is
    one."""
    short = (exc_type or "").rsplit(".", 1)[-1]
    if short in _STOP_EXCEPTIONS:
        return True
    msg = message or ""
    if short == "ProcessExitedException":
        m = _SPAWN.search(msg)
        return m is not None and m.group(2) in OUTSIDE_SIGNALS
    if short == "ChildFailedError" and _ROOT in msg:
        root = msg.split(_ROOT, 1)[1]
        m = re.search(r"exitcode\s*: (-\d+)", root)
        return m is not None and signal_name(-int(m.group(1))) in OUTSIDE_SIGNALS
    return False


def who_ended(rows: list[dict]) -> dict[str, Any]:
    """Of one capture's stop lines (stops_from_text's rows of one file): `closing` (pid -> its
    closing_signal row), `failed` and `exits` (the child_failed / child_exit rows), and `killed`:
    the first failure the launcher reports (its root, else the first exit) when a signal from
    outside caused it, else None."""
    closing = {r["pid"]: r for r in rows if r["kind"] == "closing_signal"}
    failed = [r for r in rows if r["kind"] == "child_failed"]
    exits = [r for r in rows if r["kind"] == "child_exit"]
    root = next((r for r in failed if r["root"]), None) or (exits[0] if exits else None)
    killed = root if root is not None and root["signal"] in OUTSIDE_SIGNALS else None
    return {"closing": closing, "failed": failed, "exits": exits, "killed": killed}


def ended_by(who: dict[str, Any], pid: object) -> str | None:
    """How the launcher says process `pid` ended (`who`: who_ended of its capture): "killed by
    SIGKILL", "SIGTERM from torchrun", "exit code -11 (SIGSEGV)"; None when it does not say."""
    killed = who["killed"]
    if killed is not None and pid is not None and killed["pid"] == pid:
        return f"killed by {killed['signal']}"
    if pid in who["closing"]:
        return f"{who['closing'][pid]['signal']} from torchrun"
    code = next((e for e in who["failed"] + who["exits"] if e["pid"] == pid and e["signal"]), None)
    return f"exit code {code['exit_code']} ({code['signal']})" if code is not None else None


def _row(file: str, lineno: int, kind: str, text: str, **kw: object) -> dict:
    row = {k: None for k in STOPS_SCHEMA}
    row.update(file=file, lineno=lineno, kind=kind, text=text, **kw)
    return row


def stops_from_text(log_records: pl.DataFrame, other_lines: pl.DataFrame) -> pl.DataFrame:
    """Every line of a capture that says a process was stopped or died of a signal (see the
    module doc), in file and line order."""
    rows: list[dict] = []
    if log_records.height:
        recs = log_records.filter(
            pl.col("compile_id").is_null()
            & pl.col("text").str.contains(r"death signal|closing signal|failed \(exitcode: ")
        )
        for r, text in ((rec, t) for rec in recs.iter_rows(named=True) for t in rec["text"].split("\n")):
            # (one record holds the lines torchrun wrote with the same prefix: both ranks'
            # closing signals in the same millisecond)
            if m := _DEATH.search(text):
                n = int(m.group(1))
                rows.append(_row(r["file"], r["lineno"], "death_signal", text, ts=r["ts"], ts_from="record",
                                 launcher="torchrun", signal=signal_name(n), pid=r["pid"]))
            elif m := _CLOSING.search(text):
                rows.append(_row(r["file"], r["lineno"], "closing_signal", text, ts=r["ts"], ts_from="record",
                                 launcher="torchrun", signal=m.group(2), pid=int(m.group(1))))
            elif m := _CHILD_EXIT.search(text):
                code = int(m.group(1))
                rows.append(_row(r["file"], r["lineno"], "child_exit", text, ts=r["ts"], ts_from="record",
                                 launcher="torchrun", signal=signal_name(-code) if code < 0 else None,
                                 exit_code=code, rank=int(m.group(2)), pid=int(m.group(3))))
    if other_lines.height:
        rows += _from_other_lines(other_lines)
    rows.sort(key=lambda r: (r["file"], r["lineno"]))
    return pl.DataFrame(rows, schema=STOPS_SCHEMA)


def _from_other_lines(other_lines: pl.DataFrame) -> list[dict]:
    rows: list[dict] = []
    hits = other_lines.filter(
        pl.col("text").str.contains(r"SignalException: Process|exitcode\s*: -?\d+ \(pid|terminated with signal|CANCELLED AT|^traceview run: |"
                                    + _WORDS)
    )
    if hits.height == 0:
        return rows
    for (file,), part in other_lines.filter(pl.col("file").is_in(hits["file"].unique().implode())).sort("lineno").group_by(
        ["file"], maintain_order=True
    ):
        texts = [_LINE_PREFIX.sub("", t) for t in part["text"].to_list()]
        linenos = part["lineno"].to_list()
        root = False
        for k, text in enumerate(texts):
            if text.startswith(_ROOT):
                root = True
            if m := _SIGNAL_EXC.search(text):
                n = int(m.group(2))
                rows.append(_row(file, linenos[k], "signal_exception", text.strip(), launcher="torchrun",
                                 signal=signal_name(n), pid=int(m.group(1))))
            elif m := _EXITCODE.match(text):
                code, pid = int(m.group(1)), int(m.group(2))
                ts = rank = None
                for back in texts[max(0, k - 4):k]:
                    if t := _FAIL_TIME.match(back):
                        ts = _dt.datetime.strptime(t.group(1), "%Y-%m-%d_%H:%M:%S")
                    if rk := _FAIL_RANK.match(back):
                        rank = int(rk.group(1))
                rows.append(_row(file, linenos[k], "child_failed", text.strip(), ts=ts, ts_from="failure time" if ts else None,
                                 launcher="torchrun", signal=signal_name(-code) if code < 0 else None,
                                 exit_code=code, pid=pid, rank=rank, root=root))
            elif m := _SPAWN.search(text):
                rows.append(_row(file, linenos[k], "spawn_signal", text.strip(), launcher="mp.spawn",
                                 signal=m.group(2), rank=int(m.group(1))))
            elif m := _CAPTURE_EXIT.match(text):
                rows.append(_row(file, linenos[k], "capture_signal", text.strip(), launcher="traceview run",
                                 signal=m.group(2), exit_code=int(m.group(1))))
            elif m := _SRUN_SIGNAL.search(text):
                rows.append(_row(file, linenos[k], "srun_signal", text.strip(), launcher="srun",
                                 signal=SIGNAL_WORDS[m.group(2)], rank=int(m.group(1))))
            elif (m := _SHELL_SIGNAL.search(text)) and not text.startswith(("Fatal Python error", " ")):
                rows.append(_row(file, linenos[k], "shell_signal", text.strip(), launcher="shell",
                                 signal=SIGNAL_WORDS[m.group(2)], exit_code=128 + _signal.Signals[SIGNAL_WORDS[m.group(2)]].value,
                                 pid=int(m.group(1))))
            elif m := _SLURM.search(text):
                rows.append(_row(file, linenos[k], "slurm_cancel", text.strip(), launcher="SLURM",
                                 ts=_dt.datetime.fromisoformat(m.group(1)), ts_from="slurm", reason=m.group(2)))
    return rows
