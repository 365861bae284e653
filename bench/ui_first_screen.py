"""Time from `traceview open TRACE` to its first screen with the findings drawn, in a real
terminal (tmux, 120x40), from the parse cache (the trace is summarised once first) and, with
--cold, from an empty cache.

    python bench/ui_first_screen.py /tmp/traceview-bench/inputs/rank48_500mb --repeat 3

Prints one line per run and the best. Needs tmux. The screen counts as drawn when the
Findings tab shows at least one finding title (a line in capitals, as in the summary:
traceview.analyze.finding.KIND_TITLES) or says there are none ("No findings:").
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from traceview.analyze.finding import KIND_TITLES  # noqa: E402  (the checkout's, without polars)

FINDING = re.compile(r"\b(" + "|".join(re.escape(t) for t in KIND_TITLES.values()) + r")\b|No findings:")


def _proc_cpu_s(pid: int) -> float:
    """utime + stime of a process and of its children it has waited for, from /proc."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _proc_kib(pid: int, key: bytes) -> int:
    """A ``/proc/<pid>/status`` figure in KiB (VmHWM, VmRSS), 0 if gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(key + b":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (not ``pid`` itself), from /proc/<pid>/task/*/children."""
    out: list[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children", "rb") as fh:
                    kids = [int(c) for c in fh.read().split()]
                out += kids
                stack += kids
        except (OSError, ValueError):
            continue
    return out


def first_screen(trace: str, cache: Path, width: int = 120, height: int = 40, *, python: str = sys.executable,
                 timeout: float = 120.0) -> dict[str, float]:
    """`traceview open TRACE` in a fresh tmux server (``width`` x ``height``): seconds from
    starting tmux to the first capture showing the Findings tab with a finding title, and,
    read from /proc at that moment, the `traceview open` process's CPU seconds (utime + stime,
    its reaped children's included), its peak RSS (VmHWM) and the summed RSS of its process
    tree, in MB (10**6 bytes). RuntimeError if the command ends or draws no finding within
    ``timeout`` s (with the last screen)."""
    with tempfile.TemporaryDirectory() as tmp:
        sock = str(Path(tmp) / "tmux.sock")
        session = f"tv-{uuid.uuid4().hex[:8]}"
        env = f"TRACEVIEW_CACHE_DIR={shlex.quote(str(cache))} TERM=screen-256color PYTHONPATH={shlex.quote(str(ROOT))}"
        # not exec'd: the pane's shell stays, so the command is its one child, and its exit shows
        cmd = (f"unset COLUMNS LINES && export {env} && {shlex.quote(python)} -m traceview open {shlex.quote(trace)}; "
               f"echo '[traceview open exited' $?']'; sleep {int(timeout) + 5}")

        def tmux(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["tmux", "-S", sock, *args], capture_output=True, text=True, timeout=20)

        t0 = time.monotonic()
        tmux("new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), cmd)
        try:
            screen = ""
            while time.monotonic() - t0 < timeout:
                got = tmux("capture-pane", "-p", "-t", session)
                if got.returncode != 0:
                    raise RuntimeError(f"tmux: {got.stderr.strip()} (the session ended); the last screen:\n{screen}")
                screen = got.stdout
                if "Findings" in screen and FINDING.search(screen):
                    seconds = time.monotonic() - t0
                    shell = int(tmux("display-message", "-p", "-t", session, "#{pane_pid}").stdout.strip())
                    tree = _descendants(shell)
                    pid = tree[0]  # the shell's one child: the command
                    return {"seconds": seconds, "cpu_s": _proc_cpu_s(pid),
                            "maxrss_mb": _proc_kib(pid, b"VmHWM") * 1024 / 1e6,
                            "tree_rss_mb": sum(_proc_kib(p, b"VmRSS") for p in tree) * 1024 / 1e6}
                if "[traceview open exited" in screen:
                    break
                if "Pick one (--latest" in screen:
                    raise RuntimeError("open asks which run to open (the input holds several runs): no first screen "
                                       "of findings to time")
                time.sleep(0.01)
            raise RuntimeError(f"no findings on screen after {time.monotonic() - t0:.0f} s; the screen shows:\n{screen}")
        finally:
            tmux("kill-server")


def one_run(trace: str, cache: Path, width: int, height: int) -> float:
    """Seconds from `traceview open TRACE` to its first screen with findings (see first_screen)."""
    try:
        return first_screen(trace, cache, width, height)["seconds"]
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="empty parse cache for every run")
    ap.add_argument("--size", default="120x40")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        sys.stderr.write("ui_first_screen: tmux is not installed\n")
        return 2
    width, height = (int(x) for x in args.size.split("x"))
    with tempfile.TemporaryDirectory() as cache_dir:
        cache = Path(cache_dir)
        env = {**os.environ, "TRACEVIEW_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
        if not args.cold:  # fill the cache once
            subprocess.run([sys.executable, "-m", "traceview", "summary", args.trace], env=env,
                           stdout=subprocess.DEVNULL, check=True)
        times = []
        for i in range(args.repeat):
            if args.cold:
                shutil.rmtree(cache, ignore_errors=True)
                cache.mkdir()
            t = one_run(args.trace, cache, width, height)
            times.append(t)
            print(f"run {i + 1}: first screen after {t:.2f} s")
    print(f"best of {len(times)}: {min(times):.2f} s ({'empty cache' if args.cold else 'from the cache'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
