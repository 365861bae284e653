"""Where a traceview command's time goes: run it with TRACEVIEW_TIMING=1 and print the steps
that it and its worker processes recorded, relative to the moment it was started.

    python bench/timeline.py traceview summary --no-cache /path/to/trace
    python bench/timeline.py python -m traceview export /path/to/trace -o /tmp/out

Each line: the process (main, w1, w2, ... in order of appearance), the step, its start and
end in seconds since the command started, and its length. The command's own output is
discarded; its other stderr lines are printed as they are.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write(__doc__ or "")
        return 2
    env = {**os.environ, "TRACEVIEW_TIMING": "1"}
    t0 = time.time()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.time() - t0
    names: dict[str, str] = {}
    rows = []
    for line in proc.stderr.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0] == "traceview-timing":
            pid, step, start, end = parts[1], " ".join(parts[2:-2]), float(parts[-2]), float(parts[-1])
            names.setdefault(pid, "main" if not names else f"w{len(names)}")
            rows.append((start - t0, end - t0, names[pid], step))
        else:
            print(line)
    for start, end, who, step in sorted(rows):
        print(f"{who:>5}  {step:<24} {start:7.3f} {end:7.3f}  {end - start:6.3f}")
    print(f"{'':>5}  {'command exited':<24} {'':7} {wall:7.3f}  (exit code {proc.returncode})")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
