"""Ranks that fall out of step (issue 32), on the real 4-rank gloo runs of the corpus:
fixtures/corpus/collective_extra_rank (rank 2's [0/0] issues a second all_reduce; gloo times
out) and fixtures/corpus/collective_size_mismatch (rank 1 recompiles [0/1] alone for batch 6;
gloo aborts on the size mismatch).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from parsers.discover import InputError, discover

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "corpus"
EXTRA = CORPUS / "collective_extra_rank"
SIZES = CORPUS / "collective_size_mismatch"


def tv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "traceview", *args], capture_output=True, text=True, timeout=300)


# ------------------------------------------------------------------ item 5: an empty input beside good ones


def _copy_trace(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(EXTRA / "trace", d)
    return d


def test_an_empty_text_log_named_beside_a_trace_is_noted_and_skipped(tmp_path: Path) -> None:
    d = _copy_trace(tmp_path)
    empty = tmp_path / "torch_logs.txt"
    empty.write_bytes(b"")
    r = tv("summary", "--json", "--no-cache", str(d), str(empty))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {"path": str(empty), "why": "empty file"} in doc["inputs"]["stray_files"]
    assert sorted(t["rank"] for t in doc["inputs"]["trace_files"]) == [0, 1, 2, 3]
    text = tv("summary", "--no-cache", str(d), str(empty))
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("traceview: 4 compiles on 4 ranks from 4 log files")
    skipped = [ln.strip() for ln in text.stdout.splitlines() if ln.strip().startswith("skipped ")]
    assert len(skipped) == 1 and skipped[0].endswith("/torch_logs.txt: empty file"), skipped


def test_a_zero_length_rank_trace_named_beside_the_others_is_noted_and_skipped(tmp_path: Path) -> None:
    d = _copy_trace(tmp_path)
    zero = d / "dedicated_log_torch_trace_rank_4_zzzzzzzz.log"
    zero.write_bytes(b"")
    inputs = discover(sorted(d.glob("*rank_0*"))[0], extra_logs=[str(zero), *map(str, sorted(d.glob("*rank_[123]*")))])
    assert sorted(t.rank for t in inputs.traces) == [0, 1, 2, 3]
    assert (str(zero), "empty trace log (nothing written to it yet)") in inputs.stray


def test_an_empty_input_alone_is_still_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "torch_logs.txt"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"torch_logs\.txt: empty file"):
        discover(empty)
    r = tv("summary", str(empty))
    assert r.returncode == 2 and r.stderr.strip() == f"traceview: error: {empty}: empty file"
