"""One share of a run's inputs: `traceview export --shard K/N` (docs/pipeline.md).

The split is stable and needs no coordination between the N tasks: a trace file of rank R
goes to share R mod N; a trace file without a rank, and a flight recorder dump whose name
ends in no rank, goes by a hash of its file name (crc32, the same in every process). K is
0-based, as Slurm arrays ($SLURM_ARRAY_TASK_ID) and Kubernetes indexed jobs
($JOB_COMPLETION_INDEX) number their tasks. Share 0 also lists what was skipped or left
out, so that the N exports, read together, count it once.

Text logs (their lines may hold every rank's output) and TORCH_COMPILE_DEBUG run folders
are not split: an input that has any is refused with one line rather than split wrongly.
"""

from __future__ import annotations

import dataclasses
import re
import zlib
from pathlib import Path

from parsers.discover import InputError, Inputs
from parsers.flight_recorder import dump_rank
from traceview.errors import UserError


def parse_shard(text: str) -> tuple[int, int]:
    """`K/N` -> (K, N); K is 0-based (0 <= K < N). Raises UserError with a one-line reason."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m:
        raise UserError(f"--shard {text!r}: expected K/N, e.g. 0/4 (K counts from 0, as $SLURM_ARRAY_TASK_ID does)")
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1 or k >= n:
        raise UserError(f"--shard {text}: K must be 0 to N-1 (K counts from 0, as $SLURM_ARRAY_TASK_ID does)")
    return k, n


def share_of(rank: int | None, name: str, n: int) -> int:
    """The share (0 .. n-1) of a file of `rank` (None: no rank; then by its file `name`)."""
    if rank is not None:
        return rank % n
    return zlib.crc32(Path(name).name.encode()) % n


def shard_inputs(inputs: Inputs, k: int, n: int) -> Inputs:
    """The K-th of N shares of `inputs` (raises InputError for inputs that cannot be split)."""
    if n == 1:
        return inputs
    if inputs.text_logs:
        raise InputError(
            f"{inputs.text_logs[0]}: a text log cannot be split by --shard (its lines may hold every rank); "
            "export the trace files alone, or export without --shard"
        )
    if inputs.debug_runs:
        raise InputError(
            f"{inputs.debug_runs[0].path}: a TORCH_COMPILE_DEBUG folder cannot be split by --shard; export without --shard"
        )
    traces = [t for t in inputs.traces if share_of(t.rank, t.path, n) == k]
    dumps = [p for p in inputs.flight_recorder if share_of(dump_rank(p, {}), p, n) == k]
    first = k == 0
    return dataclasses.replace(
        inputs,
        traces=traces,
        flight_recorder=dumps,
        stray=list(inputs.stray) if first else [],
        dropped_runs=list(inputs.dropped_runs) if first else [],
        limits={p: v for p, v in inputs.limits.items() if p in {t.path for t in traces} or p in dumps},
    )
