"""Exports are inputs: one export, or a directory of exports (one per host), loads as one
Trace with the same findings as the logs parsed at once; colliding ranks are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import traceview
from tests.conftest import FIXTURES
from traceview.cli import main
from traceview.errors import ExportError
from traceview.output.export import write_export
from traceview.output.report import build_report

MULTIRANK = FIXTURES / "multirank" / "trace"


def _findings(report: dict) -> dict:
    """The report with input files named by their base name (the hosts' copies of a rank log
    live in other directories than the fixture's), without the input root."""

    def base(v: object, key: str = "") -> object:
        if isinstance(v, dict):
            return {k: base(x, k) for k, x in v.items() if k != "root"}
        if isinstance(v, list):
            return [base(x, key) for x in v]
        return Path(v).name if key in ("file", "path") and isinstance(v, str) else v

    out = base(report)
    assert isinstance(out, dict)
    return out


def _host_exports(tmp_path: Path) -> Path:
    """The multirank fixture's two rank logs, each parsed and exported on its own "host",
    as `run/host-0` and `run/host-1`."""
    run = tmp_path / "run"
    for i, log in enumerate(sorted(MULTIRANK.glob("*.log"))):
        host = tmp_path / f"host-{i}-logs"
        host.mkdir()
        shutil.copy(log, host / log.name)
        write_export(traceview.load(host), run / f"host-{i}")
    return run


def test_two_host_exports_give_the_findings_of_the_whole_directory(tmp_path: Path) -> None:
    run = _host_exports(tmp_path)
    merged = traceview.load(run)
    whole = traceview.load(MULTIRANK)
    assert merged.ranks == [0, 1]
    got, want = build_report(merged), build_report(whole)
    assert _findings(got) == _findings(want)
    # the finding that needs both ranks at once: rank 1 compiled 0/1, rank 0 did not
    assert [(d["rank"], d["extra_compile_ids"]) for d in got["rank_divergence"]] == [(1, ["0/1"])]
    # the tables are the same rows (the file column names each host's copy)
    for name in ("compiles", "recompiles", "graph_breaks", "spans"):
        a = merged.table(name).drop("file").sort(pl.all())
        b = whole.table(name).drop("file").sort(pl.all())
        assert a.equals(b), name
    # the inputs and parse stats of both manifests, combined
    assert sorted(t.rank for t in merged.inputs.traces) == [0, 1]
    assert merged.stats.height == 2
    assert int(merged.stats["envelopes"].sum()) == int(whole.stats["envelopes"].sum())
    assert merged.inputs.root == str(run)


def test_tables_are_read_when_asked_for(tmp_path: Path) -> None:
    merged = traceview.load(_host_exports(tmp_path))
    build_report(merged)
    # the summary does not need the graph text of any host (it reads the guards only to name
    # the newest value of a value-guard recompile, which this run has)
    assert not merged.is_loaded("graph_nodes")
    # nor the events' payloads: their summary payloads are streamed out of the parquet files
    assert not merged.is_loaded("events")


def test_summary_of_a_directory_of_exports_matches_the_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _host_exports(tmp_path)
    assert main(["summary", str(run), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert main(["summary", str(MULTIRANK), "--json", "--no-cache"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert _findings(merged) == _findings(whole)
    assert merged["ranks"] == whole["ranks"]
    # one export alone is an input too
    assert main(["summary", str(run / "host-1"), "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["compiles"] == 4 and one["per_rank"][0]["rank"] == 1


def test_the_same_export_twice_is_a_rank_collision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _host_exports(tmp_path)
    shutil.copytree(run / "host-0", run / "host-0-again")
    with pytest.raises(ExportError, match="holds rank 0, and so does"):
        traceview.load(run)
    assert main(["summary", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rank 0" in err and "host-0" in err and "Traceback" not in err


def test_an_export_of_both_ranks_collides_with_a_host_export(tmp_path: Path) -> None:
    run = _host_exports(tmp_path)
    write_export(traceview.load(MULTIRANK), run / "all")
    with pytest.raises(ExportError, match="rank 0"):
        traceview.load(run)


def test_more_logs_beside_an_export_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _host_exports(tmp_path)
    assert main(["summary", str(run), "--logs", str(FIXTURES / "multirank" / "torch_logs.txt")]) == 2
    err = capsys.readouterr().err
    assert "is a traceview export" in err and err.count("\n") == 1


def test_a_log_beside_the_exports_is_listed_as_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _host_exports(tmp_path)
    shutil.rmtree(run / "host-1")
    log = sorted(MULTIRANK.glob("*.log"))[1]  # rank 1's log, left beside host-0's export
    shutil.copy(log, run / log.name)
    trace = traceview.load(run)
    assert trace.ranks == [0]
    assert trace.inputs.stray == [(str(run / log.name), "beside the exports, not read (export it too)")]
    assert main(["summary", str(run), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [s["path"] for s in report["inputs"]["stray_files"]] == [str(run / log.name)]


def test_a_process_without_a_rank_reads_back_from_rank_partitions(tmp_path: Path) -> None:
    # --partition-by-rank yes on a single process without a rank (what the per-host recipe
    # asks for): its rows live in rank=__HIVE_DEFAULT_PARTITION__ and come back with a null rank
    t = traceview.load(FIXTURES / "training" / "trace")
    write_export(t, tmp_path / "out", partition_by_rank=True)
    assert (tmp_path / "out" / "compiles" / "rank=__HIVE_DEFAULT_PARTITION__").is_dir()
    back = traceview.load(tmp_path / "out")
    for name in ("events", "compiles", "spans", "recompiles"):
        assert back.table(name).equals(t.table(name)), name
    assert back.compiles["rank"].dtype == pl.Int32 and back.compiles["rank"].null_count() == back.compiles.height > 0


def test_an_export_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    run = _host_exports(tmp_path)
    mpath = run / "host-1" / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest["traceview_schema_version"] = 999
    mpath.write_text(json.dumps(manifest))  # a hand-edited manifest: the version check
    with pytest.raises(ExportError, match="schema version 999"):
        traceview.load(run)


def test_origin_and_sql_read_exports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _host_exports(tmp_path)
    assert main(["origin", str(run), "--node", "add", "--json"]) in (0, 1)
    capsys.readouterr()
    assert main(["sql", str(run), "select rank, compile_id from compiles where compile_id = '0/1'", "--format", "csv"]) == 0
    assert capsys.readouterr().out == "rank,compile_id\n1,0/1\n"


def test_many_ranks_over_four_hosts_diverge_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 32 ranks on 4 "hosts" of 8, copies of the fixture's real rank logs (each renamed
    # rank_N: the file name's rank wins): the ranks that are copies of rank 1 compiled 0/1,
    # which the majority (copies of rank 0) did not
    logs = sorted(MULTIRANK.glob("*.log"))
    diverging = {3, 4, 5, 6, 11, 17, 18, 19, 30}
    run = tmp_path / "run"
    for host in range(4):
        d = tmp_path / f"host-{host}-logs"
        d.mkdir()
        for r in range(host * 8, host * 8 + 8):
            src = logs[1] if r in diverging else logs[0]
            shutil.copy(src, d / f"dedicated_log_torch_trace_rank_{r}_copy.log")
        assert main(["export", str(d), "-o", str(run / f"host-{host:03d}"), "--no-cache"]) == 0
    capsys.readouterr()
    assert main(["summary", str(run), "--width", "100"]) == 0
    out = capsys.readouterr().out
    # the diverging ranks compiled [0/1] alone while the other 23 waited: one finding, one line of ranks each
    block = out.split("RANK STALLS", 1)[1].split("\n\n", 1)[0]
    assert " ".join(block.split()).startswith(
        "ranks waited while another rank compiled alone ranks 0-2,7-10,12-16,20-29,31 waited ~0.15s at their next "
        "collective while ranks 3-6,11,17-19,30 recompiled [0/1] TinyNet.forward (multirank.py:31) alone"
    )
    assert "(23 ranks stalled)" in " ".join(block.split())
    assert "32 ranks" in out.splitlines()[0] or "on 32 ranks" in out


def test_open_a_directory_of_exports(tmp_path: Path) -> None:
    import asyncio

    from tests.tui.test_tui import SIZE, open_args, press, ready, screen_text
    from traceview.tui.app import build_app

    run = _host_exports(tmp_path)

    async def go() -> None:
        app = build_app(open_args(run))
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            text = screen_text(app)
            # rank 1 recompiled where rank 0 did not: the divergence comes first, its recompile in it
            assert "RANK STALL" in text and "rank 0 waited ~" in text
            await press(pilot, "2")
            text = screen_text(app)
            assert "rank 0" in text and "rank 1" in text

    asyncio.run(go())


def test_an_export_gives_the_summary_of_its_logs(tmp_path: Path) -> None:
    # the summary over an export reads no graph or code payload (the events' summary payloads
    # are picked by kind and name), yet says what the logs say: the newest value of a value
    # guard (2.0, only in the newest compile's guards), the facts, the storm's causes
    src = FIXTURES / "corpus" / "float_changes_dynamic_false" / "trace"
    write_export(traceview.load(src), tmp_path / "out")
    back = traceview.load(tmp_path / "out")
    got, want = build_report(back), build_report(traceview.load(src))
    assert got["recompiles"][0]["causes"][0]["values"] == ["1.0", "0.5", "0.25", "2.0"]
    for key in ("recompiles", "graph_breaks", "failures", "facts", "cudagraphs"):
        assert _without_paths(got[key]) == _without_paths(want[key]), key
    assert not back.is_loaded("events")


def _without_paths(x: object) -> object:
    if isinstance(x, dict):
        return {k: _without_paths(v) for k, v in x.items() if k != "file"}
    if isinstance(x, list):
        return [_without_paths(v) for v in x]
    return x


@pytest.mark.parametrize("situation", ["hop_cond", "pgo_warm_start", "cache_bypass", "symbolic_shape_specialization"])
def test_facts_of_an_export_are_the_logs(tmp_path: Path, situation: str) -> None:
    src = FIXTURES / "corpus" / situation / "trace"
    write_export(traceview.load(src), tmp_path / "out")
    got = build_report(traceview.load(tmp_path / "out"))["facts"]
    want = build_report(traceview.load(src))["facts"]
    assert _without_paths(got) == _without_paths(want) and any(got.values())


def test_raw_record_of_an_export_shows_its_payload(tmp_path: Path) -> None:
    # the UI's raw record of an export: its payload is in the export's events, not in a log
    from traceview.tui.model import record_payload

    write_export(traceview.load(FIXTURES / "graph_breaks" / "trace"), tmp_path / "out")
    t = traceview.load(tmp_path / "out")
    row = t.index_events().with_row_index("r").filter(pl.col("kind") == "dynamo_output_graph")["r"][0]
    assert t.index_events()["payload"][row] is None  # the summary's index left it out
    text = record_payload(t, "trace", row)
    payload = t.events["payload"][row]
    assert payload and payload in text
