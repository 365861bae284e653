"""bench/bench.py's own logic (a script, not part of traceview): issue 40's check block, which
turns the fastest run of each tool into values, targets and met/missed, and --issue40's
options. The measurements themselves are real runs (bench/bench.py --issue40); these fake Run
rows test only the arithmetic and the bookkeeping around it."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_script", ROOT / "bench" / "bench.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_script"] = mod  # dataclasses look their module up
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        del sys.modules["bench_script"]


def run(bench: ModuleType, tool: str, walls: list[float | None], **kw: Any) -> Any:
    """A Run of `tool` whose rounds took `walls` (None: failed); the fastest ok one is its wall."""
    ok = [w for w in walls if w is not None]
    r = bench.Run("rank48_500mb", tool, [tool], 470.0, ok=bool(ok), wall_s=min(ok) if ok else None, **kw)
    if len(walls) > 1:
        r.extra["attempts"] = [{"wall_s": w, "ok": w is not None} for w in walls]
    return r


def by_check(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in checks}


def test_checks_values_targets_and_verdicts(bench: ModuleType) -> None:
    runs = [
        run(bench, "floor", [1.0, 0.8, 0.9]),
        run(bench, "tlparse", [30.0, 26.0, 28.0]),
        run(bench, "export", [2.5, 2.0, 2.2]),
        run(bench, "summary-cold", [1.2, 1.0, 1.1]),
        run(bench, "summary-prime", [1.3]),
        run(bench, "summary-warm", [0.35, 0.29, 0.31]),
        run(bench, "report-warm", [1.1, 1.05, 1.2]),
        run(bench, "watch-digest", [1.3, 1.15, 1.4]),
        run(bench, "open-first", [0.9, 1.0, 0.95]),
    ]
    c = by_check(bench.issue40_checks(runs))
    assert list(c) == ["cached summary s", "summary-cold/floor", "watch-digest/summary-cold", "report-warm s",
                       "open-first s", "tlparse/export"]
    # seconds: the fastest run; ratios: fastest over fastest (not the best round's quotient)
    assert c["cached summary s"]["value"] == pytest.approx(0.29)
    assert c["cached summary s"]["met"] is True
    assert c["summary-cold/floor"]["value"] == pytest.approx(1.0 / 0.8)  # 1.25 <= 1.3
    assert c["summary-cold/floor"]["met"] is True
    assert c["summary-cold/floor"]["goal"] == 1.2
    assert c["watch-digest/summary-cold"]["value"] == pytest.approx(1.15)
    assert c["watch-digest/summary-cold"]["met"] is True
    assert c["report-warm s"]["value"] == pytest.approx(1.05)
    assert c["report-warm s"]["met"] is False
    assert c["open-first s"]["met"] is True
    # tlparse/export is a ">=" check: 26 / 2 = 13 meets 12, short of the goal 15
    assert c["tlparse/export"]["op"] == ">="
    assert c["tlparse/export"]["value"] == pytest.approx(13.0)
    assert c["tlparse/export"]["met"] is True
    assert (c["tlparse/export"]["target"], c["tlparse/export"]["goal"]) == (12.0, 15.0)
    # each round on its own: round i over round i
    assert c["tlparse/export"]["rounds"] == pytest.approx([12.0, 13.0, 28.0 / 2.2])
    assert c["report-warm s"]["rounds"] == pytest.approx([1.1, 1.05, 1.2])
    assert all(x["missing"] is None for x in c.values())


def test_missed_ratio_and_boundary(bench: ModuleType) -> None:
    runs = [run(bench, "tlparse", [24.0]), run(bench, "export", [2.0]), run(bench, "summary-cold", [1.3]),
            run(bench, "floor", [1.0])]
    c = by_check(bench.issue40_checks(runs))
    assert c["tlparse/export"]["value"] == pytest.approx(12.0)
    assert c["tlparse/export"]["met"] is True  # the target itself is met
    assert c["summary-cold/floor"]["met"] is True  # 1.3 <= 1.3
    runs[0] = run(bench, "tlparse", [23.0])
    assert by_check(bench.issue40_checks(runs))["tlparse/export"]["met"] is False


def test_missing_tools_say_why(bench: ModuleType) -> None:
    runs = [
        run(bench, "summary-cold", [1.0]),
        run(bench, "watch-digest", [None]),  # failed
        bench.Run("rank48_500mb", "open-first", ["open"], 470.0, skipped="no tmux"),
    ]
    c = by_check(bench.issue40_checks(runs))
    assert c["watch-digest/summary-cold"]["value"] is None
    assert c["watch-digest/summary-cold"]["met"] is None
    assert c["watch-digest/summary-cold"]["missing"] == "watch-digest FAILED"
    assert c["open-first s"]["missing"] == "open-first skipped: no tmux"
    assert c["summary-cold/floor"]["missing"] == "floor not run"
    assert c["tlparse/export"]["missing"] == "tlparse not run; export not run"
    assert c["cached summary s"]["missing"] == "summary-warm not run"


def test_a_failed_round_is_left_out_of_its_rounds(bench: ModuleType) -> None:
    runs = [run(bench, "summary-cold", [1.0, None]), run(bench, "floor", [0.5, 0.4])]
    c = by_check(bench.issue40_checks(runs))["summary-cold/floor"]
    assert c["value"] == pytest.approx(2.5)
    assert c["rounds"] == [pytest.approx(2.0), None]


def test_block_prints_every_check_with_its_verdict(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [run(bench, "summary-warm", [0.5, 0.4]), run(bench, "tlparse", [30.0, 40.0]), run(bench, "export", [2.0, 2.0]),
            bench.Run("rank48_500mb", "open-first", ["open"], 470.0, skipped="no tmux")]
    bench.print_issue40({"rank48_500mb": runs}, ((1.0, 2.0, 3.0), (1.5, 2.5, 3.5)))
    out = capsys.readouterr().out
    lines = {line.split("  ")[1]: line for line in out.splitlines() if line.startswith("  ") and "  " in line[2:]}
    assert "fastest of 2 rounds" in out
    assert "at start 1.00 2.00 3.00, at end 1.50 2.50 3.50" in out
    assert lines["cached summary s"].split()[3:7] == ["0.400", "<=", "0.3", "missed"]
    assert lines["cached summary s"].split()[-2:] == ["0.500", "0.400"]
    assert "15.00" in lines["tlparse/export"] and ">= 12" in lines["tlparse/export"] and " met " in lines["tlparse/export"]
    assert "not measured (open-first skipped: no tmux)" in lines["open-first s"]
    # a scenario where nothing of the check ran prints no block
    capsys.readouterr()
    bench.print_issue40({"train_dynamic": [run(bench, "floor", [0.1])]})
    assert capsys.readouterr().out == ""


def test_issue40_option(bench: ModuleType) -> None:
    args = bench.parse_args(["--issue40"])
    assert args.scenario == ["rank48_500mb"]
    assert args.tools == ["floor", "tlparse", "export", "summary-cold", "summary-warm", "report-warm", "watch-digest",
                          "open-first"]
    assert args.repeat == 3
    assert bench.parse_args(["--issue40", "--repeat", "1"]).repeat == 1
    plain = bench.parse_args([])
    assert plain.repeat == 1 and plain.tools == list(bench.TOOLS)
    with pytest.raises(SystemExit):
        bench.parse_args(["--issue40", "--scenario", "train_dynamic"])


# --------------------------------------------------------------------------- --merge (issue 46)


def test_merge_rank_logs_are_the_real_ranks_with_the_plants(bench: ModuleType) -> None:
    src = {r: bench.corpus_rank_log(bench.MERGE_RUN, r) for r in (0, 1, 2, 3)}
    base = bench.merge_rank_log(7, src)  # 7 % 3 == 1: a copy of rank 2
    assert base == bench.rewrite_rank(src[2], 7)[0]
    assert b'"rank": 7' in base and b'"rank": 2,' not in base
    lone = bench.merge_rank_log(bench.MERGE_LONE[1], src)
    assert lone.count(b'] {"dynamo_start": ') == 2 and lone.count(b'] {"compilation_metrics": ') == 2
    stopped = bench.merge_rank_log(bench.MERGE_STOPPED[0], src)  # 1000 % 3 == 1: rank 2, cut
    assert b'] {"dynamo_start": ' in stopped and b'"inductor_collective_schedule"' in stopped
    assert b'"compilation_metrics"' not in stopped
    assert base.startswith(bench.rewrite_rank(stopped, 7)[0])
    assert bench.merge_plants(2048) == {"lone_recompile": [5, 300, 1500], "collective_mismatch": [5, 300, 1500],
                                        "stopped": [1000]}


def test_merge_check_names_found_other_and_unmatched(bench: ModuleType) -> None:
    def f(kind: str, facet: str | None, ranks: list[int]) -> dict[str, Any]:
        return {"kind": kind, "facet": facet, "ranks": ranks, "claim": f"{kind} {ranks}"}

    doc = {"findings": [f("collectives", "wait", [5, 300]), f("collectives", "wait", [*range(1000), *range(1001, 1024)]),
                        f("collectives", "mismatch", [5]), f("compile_time", None, [5, 300])]}
    got = bench.merge_check(doc, 1024)
    assert got["lone_recompile"]["found"] and got["lone_recompile"]["claims"] == ["collectives [5, 300]"]
    assert [o["ranks"] for o in got["lone_recompile"]["other"]] == ["0-999,1001-1023"]
    assert not got["collective_mismatch"]["found"]  # rank 300 is not named
    assert [o["ranks"] for o in got["collective_mismatch"]["other"]] == ["5"]
    assert not got["stopped"]["found"] and got["stopped"]["planted"] == [1000]
    assert [(u["kind"], u["ranks"]) for u in got["unmatched"]] == [
        ("collectives", "0-999,1001-1023"), ("collectives", "5"), ("compile_time", "5,300")]
    # one finding per stopped rank; one naming a rank besides the planted ones does not count
    doc = {"findings": [f("unfinished", "behind", [12345]), f("unfinished", "behind", [1000]),
                        f("collectives", "mismatch", [5, 300, 1500, 3000, 9000, 16000, 7])]}
    got = bench.merge_check(doc, 16384)
    assert got["stopped"]["found"] and len(got["stopped"]["claims"]) == 2 and got["stopped"]["other"] == []
    assert not got["collective_mismatch"]["found"]
    assert [o["ranks"] for o in got["collective_mismatch"]["other"]] == ["5,7,300,1500,3000,9000,16000"]


def test_merge_growth_and_targets(bench: ModuleType) -> None:
    def size(n: int, wall: float, cpu: float, rss: float) -> dict[str, Any]:
        r = {"ok": True, "wall_s": wall, "cpu_s": cpu, "maxrss_mb": rss}
        return {"ranks": n, "runs": {"summary": r, "summary-json": {"ok": False}}}

    sizes = [size(1024, 1.0, 1.5, 200.0), size(2048, 1.4, 2.0, 260.0), size(16384, 9.0, 10.0, 1100.0)]
    growth = bench.merge_growth(sizes, "summary")
    assert [(g["from"], g["to"]) for g in growth] == [(1024, 2048), (2048, 16384)]
    assert growth[0]["ms_per_rank"] == pytest.approx(400 / 1024)
    assert growth[0]["mb_per_rank"] == pytest.approx(60 / 1024)
    assert growth[1]["cpu_ms_per_rank"] == pytest.approx(8000 / 14336)
    assert bench.merge_growth(sizes, "summary-json") == []
    t = {x["what"]: x for x in bench.merge_targets(sizes, growth)}
    assert t["2048 ranks summary wall s"]["met"] is True and t["2048 ranks summary peak RSS MB"]["met"] is True
    assert t["16384 ranks summary peak RSS MB"]["met"] is False and t["16384 ranks summary wall s"]["met"] is True
    assert t["2048 ranks summary-json wall s"]["met"] is None  # failed: not measured
    assert t["1024->2048 summary MB/rank"]["met"] is False and t["1024->2048 summary ms/rank (wall)"]["met"] is True


def test_merge_plants_give_their_findings(bench: ModuleType, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plants on 12 ranks (lone recompiles at 3 and 9, rank 7 stopped), summarized for real."""
    import json
    import subprocess

    monkeypatch.setattr(bench, "MERGE_LONE", (3, 9))
    monkeypatch.setattr(bench, "MERGE_STOPPED", (7,))
    src = {r: bench.corpus_rank_log(bench.MERGE_RUN, r) for r in (0, 1, 2, 3)}
    for r in range(12):
        (tmp_path / bench.rank_file_name("t", r)).write_bytes(bench.merge_rank_log(r, src))
    out = subprocess.run([sys.executable, "-m", "traceview", "summary", str(tmp_path), "--no-cache", "--json"],
                         cwd=ROOT, capture_output=True, check=True).stdout
    got = bench.merge_check(json.loads(out), 12)
    assert {k: got[k]["found"] for k in bench.MERGE_FINDS} == {
        "lone_recompile": True, "collective_mismatch": True, "stopped": True}
