"""One story per run (issue 44): a compile has one duration, one status and one cause in every
finding, table and figure, and a rank one state; every reader takes them from the accounts
(traceview.analyze.accounts), none derives them again.

Over every real run of fixtures/ and fixtures/corpus/ (and the shared GPU and peer runs where
they are there), the report's numbers and words are checked against the compile account and the
rank account built independently from the same Trace.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import traceview
from tests.conftest import FIXTURES, SHARED
from traceview.analyze.accounts.compiles import OPEN, compile_account
from traceview.analyze.accounts.ranks import rank_account
from traceview.output.report import build_report

CORPUS = FIXTURES / "corpus"
RUNS = sorted(
    [p for p in FIXTURES.iterdir() if (p / "trace").is_dir()]
    + [p for p in CORPUS.iterdir() if (p / "trace").is_dir()]
    + [p for p in (SHARED / "gpu").glob("*") if (p / "trace").is_dir()]
    + [p for p in (SHARED / "peer-tlparse").glob("multi_rank_*") if p.is_dir()]
)


def _key(r: dict[str, Any]) -> tuple:
    """A compile: its log file (two runs of one directory can both be rank-less `0/0`), id, occurrence."""
    return (r["file"], r["compile_id"], r.get("occurrence") or 1)


def _accounts(t: traceview.Trace) -> dict[tuple, dict[str, Any]]:
    return {_key(r): r for r in compile_account(t).iter_rows(named=True)}


@pytest.mark.parametrize("path", RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_compile_has_one_time_status_and_cause_everywhere(path: Path) -> None:
    t = traceview.load(path)
    acc = _accounts(t)
    rep = build_report(t)
    ct = rep["compile_time"]
    # the figures: the compile time in all, per rank, and each of the slowest compiles
    assert ct["total_s"] == pytest.approx(sum(a["seconds"] or 0.0 for a in acc.values()), abs=2e-3)
    for pr in rep["per_rank"]:
        mine = [a for a in acc.values() if a["rank"] == pr["rank"]]
        assert pr["compile_time_s"] == pytest.approx(sum(a["seconds"] or 0.0 for a in mine), abs=2e-3), pr["rank"]
        assert pr["interrupted"] == sum(a["status"] == "interrupted" for a in mine)
        assert pr["never_ended"] == sum(a["status"] == "never_ended" for a in mine)
    for top in ct["top"]:
        a = acc[_key(top)]
        assert top["seconds"] == pytest.approx(a["seconds"], abs=1e-3), _key(top)
        assert top["status"] == a["status"]
    # a compile left open is an unfinished compile, and every unfinished compile is open
    still_open = {k for k, a in acc.items() if a["status"] in OPEN}
    unfinished = {_key(u) for u in rep["unfinished_compiles"]}
    # ... but for one a KeyboardInterrupt stopped (its traceback through torch.compile's frames;
    # torch logged its metrics as if it had ended): the stop says it
    interrupted = {_key(r) for st in rep["stops"] for r in st["ranks"] if r.get("interrupted_in") and r["state"] == "compiling"}
    assert unfinished <= still_open and still_open - unfinished <= interrupted
    # the stop says each rank's state as the rank account has it, with the account's compile
    states = {r["file"]: r for r in rank_account(t)}
    for st in rep["stops"]:
        for r in st["ranks"]:
            if r["file"] not in states or r.get("interrupted_in"):
                continue  # a KeyboardInterrupt's traceback places the process itself
            assert r["state"] == states[r["file"]]["state"], r
            if r["state"] == "compiling":
                assert acc[_key(r)]["status"] in OPEN
    findings = rep["findings"]
    # a slow compile is the account's time of a compile that ended
    for f in findings:
        if f["kind"] == "compile_time":
            ref = f["target"]
            [a] = [a for a in acc.values() if (a["rank"], a["compile_id"], a["occurrence"] or 1)
                   == (ref["rank"], ref["compile_id"], ref.get("occurrence") or 1)
                   and a["file"] == f["evidence"][0]["file"]]
            assert a["status"] not in OPEN
            assert f["cost"]["seconds"] == pytest.approx(a["seconds"], abs=1e-3)
    # a rank stall: each lone compile's seconds are its account's
    for s in rep["rank_stalls"]:
        for c in s["compiles"]:
            [a] = [a for a in acc.values() if (a["rank"], a["compile_id"]) == (c["rank"], c["compile_id"])]
            assert c["seconds"] == pytest.approx(a["seconds"], abs=1e-3)
    # one recompile, one cause: the collectives' and the divergence's words are the account's
    causes = {(a["rank"], a["compile_id"]): a["cause"] for a in acc.values() if a["cause"]}
    for m in rep["collectives"]["mismatches"]:
        if m.get("other_compile_id") and (m["ranks"][0], m["compile_id"]) in causes:
            assert m["recompile_reason"] == causes[(m["ranks"][0], m["compile_id"])]
    for d in rep["rank_divergence"]:
        if d["source"] != "trace":
            continue
        for cid, why in re.findall(r"(\S+) \([^,()]*, recompiled because (.*?)\)(?: that|,|;|$)", d["detail"]):
            if (d["rank"], cid) in causes:
                assert causes[(d["rank"], cid)].startswith(why), (cid, why)


@pytest.mark.parametrize("path", [p for p in RUNS if "stop" in p.name or "crash" in p.name or "hang" in p.name],
                         ids=lambda p: p.name)
def test_a_rank_is_never_both_compiling_and_waiting(path: Path) -> None:
    t = traceview.load(path)
    ranks = rank_account(t)
    acc = compile_account(t)
    for r in ranks:
        open_here = acc.filter((pl.col("file") == r["file"]) & pl.col("status").is_in(OPEN))
        assert (r["state"] == "compiling") == (open_here.height > 0), r
        if r["state"] == "waiting":
            assert all(b != r["rank"] for b in r["behind"])
            assert all(x["state"] == "compiling" for x in ranks if x["rank"] in r["behind"])
