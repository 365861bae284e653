"""The judgement on many ranks (issue 46): fixtures/corpus/multirank4 (a real 4-rank gloo job
whose rank 2 recompiles [0/1] alone for a smaller last batch) copied to 16 ranks, rank R a copy
of rank R % 4 with its envelope rank rewritten (bench/bench.py's rewrite_rank, as
bench/scale_judge.py's inputs are made): ranks 2, 6, 10 and 14 recompile alone."""

from __future__ import annotations

import gzip
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

import traceview
from traceview.analyze.finding import CompileRef, findings_of
from traceview.output.report import build_report

from ..conftest import FIXTURES, ROOT

RANKS = 16


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("bench_for_ranks", ROOT / "bench" / "bench.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_for_ranks"] = bench  # dataclasses look their module up
    try:
        spec.loader.exec_module(bench)
    finally:
        del sys.modules["bench_for_ranks"]
    src = sorted((FIXTURES / "corpus" / "multirank4" / "trace").glob("*.log.gz"))
    assert len(src) == 4
    d = tmp_path_factory.mktemp("ranks16")
    for r in range(RANKS):
        data, changed = bench.rewrite_rank(gzip.decompress(src[r % 4].read_bytes()), r)
        assert changed
        (d / f"dedicated_log_torch_trace_rank_{r}_x{r:05d}.log").write_bytes(data)
    return build_report(traceview.load(d))


def test_a_stall_names_each_compiling_ranks_own_compiles_once(report: dict[str, Any]) -> None:
    """Four ranks recompiled [0/1] alone: the stall's compiles are those four compiles, each
    once (not every compiling rank with every rank's compile ids: ranks squared)."""
    stalls = [f for f in findings_of(report) if f.kind == "stall"]
    assert len(stalls) == 1
    s = stalls[0]
    lone = [2, 6, 10, 14]
    assert s.ranks == lone
    assert s.compiles == [CompileRef(r, "0/1") for r in lone]
    assert s.target == CompileRef(2, "0/1")
    assert s.cost.ranks_stalled == RANKS - len(lone) and s.cost.compiles_wasted == len(lone)
    assert s.claim.startswith("ranks 0,1,3-5,7-9,11-13,15 waited ~0.20s at their next collective while "
                              "ranks 2,6,10,14 recompiled [0/1] TinyNet.forward (multirank4.py:30) alone")


def test_the_lone_recompile_is_said_by_the_stall_only(report: dict[str, Any]) -> None:
    """The recompile behind the stall and the ranks' divergence are the stall's (one root
    cause): no recompile or divergence finding of their own, on any of the 16 ranks."""
    kinds = [f.kind for f in findings_of(report)]
    assert "storm" not in kinds and "recompile" not in kinds and "divergence" not in kinds
    assert report["head"][0].startswith("findings: ranks 0,1,3-5,7-9,11-13,15 stalled ~0.20s while ranks 2,6,10,14 compiled alone")
