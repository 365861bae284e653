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


def one_run(trace: str, cache: Path, width: int, height: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        sock = str(Path(tmp) / "tmux.sock")
        session = f"tv-{uuid.uuid4().hex[:8]}"
        env = f"TRACEVIEW_CACHE_DIR={shlex.quote(str(cache))} TERM=screen-256color PYTHONPATH={shlex.quote(str(ROOT))}"
        cmd = f"unset COLUMNS LINES && export {env} && {shlex.quote(sys.executable)} -m traceview open {shlex.quote(trace)}"

        def tmux(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["tmux", "-S", sock, *args], capture_output=True, text=True, timeout=20)

        t0 = time.monotonic()
        tmux("new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), cmd)
        try:
            while time.monotonic() - t0 < 120:
                screen = tmux("capture-pane", "-p", "-t", session).stdout
                if "Findings" in screen and FINDING.search(screen):
                    return time.monotonic() - t0
                time.sleep(0.01)
            raise SystemExit(f"no findings on screen after 120 s; the screen shows:\n{screen}")
        finally:
            tmux("kill-server")


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
