"""What tlhub 0.3.5 does with a trace once the wrapped command has exited, timed by bench.py.

    .venv-tlhub/bin/python bench/tlhub_ingest.py INPUT OUT

tlhub (a Python peer that ingests TORCH_TRACE logs into SQLite for a web hub) has no
"ingest this directory" command: `tlhub CMD` runs CMD with TORCH_TRACE set, then ingests the
trace directory (`trace_parser.ingest_trace_dir`: parse every file, write the artifacts) and
records the run and its artifacts in its SQLite database (`Repository.finish_run`). This
script does exactly that second half, with TLHUB_HOME=OUT (so its database and artifacts go
there) and without starting its web daemon. INPUT is a trace directory or one trace file (then
linked into a directory of its own, as tlhub only reads directories).
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    src, out = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ["TLHUB_HOME"] = str(out / "home")
    from tlhub.cli import iso_now, new_run_id, safe_ingest
    from tlhub.config import ensure_layout, get_paths
    from tlhub.database import Repository, RunCreate

    if src.is_dir():
        trace_dir = src
    else:
        trace_dir = out / "input"
        trace_dir.mkdir(exist_ok=True)
        (trace_dir / src.name).symlink_to(src)
    paths = ensure_layout(get_paths())
    repo = Repository(paths)
    run_id = new_run_id()
    artifacts = paths.runs_dir / run_id / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    now = iso_now()
    command = ["bench"]
    repo.create_run(
        RunCreate(
            id=run_id, status="running", command=command, command_display=shlex.join(command),
            cwd=os.getcwd(), hostname=socket.gethostname(), trace_dir=str(trace_dir),
            created_at=now, started_at=now,
        )
    )
    result = safe_ingest(run_id, trace_dir, artifacts)
    repo.finish_run(
        run_id, status="finished", finished_at=iso_now(), duration_ms=0, exit_code=0,
        log_count=len(result.log_files), artifacts=result.artifacts,
    )
    print(f"tlhub: indexed {len(result.artifacts)} artifacts from {len(result.log_files)} log files", file=sys.stderr)
    if any(w.startswith("ingest failed") for w in result.warnings):
        print(result.warnings[0], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
