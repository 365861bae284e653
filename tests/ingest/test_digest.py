"""The digest (traceview.ingest.digest): a summary over exports reads each host's digest only,
and judges exactly as from the full tables, on every real multi-rank run we have."""

from __future__ import annotations

import json
import re
from pathlib import Path

import orjson
import pytest

from tests.conftest import FIXTURES, PEER, SHARED
from traceview.cli import main
from traceview.errors import ExportError
from traceview.ingest import exports
from traceview.ingest.digest import DIGEST_FILES, DIGEST_VERSION
from traceview.ingest.exports import read_exports
from traceview.output.export import write_export
from traceview.output.report import build_report
from traceview.trace import GRAPH_TABLES

# directories of several runs (each run is taken on its own below)
_AGGREGATES = {"cachekey", "cluster", "corpus", "diff", "gpu"}


def _ranks_in_names(d: Path) -> set[str]:
    return {m.group(1) for f in d.rglob("*.log*") for m in [re.search(r"rank_(\d+)", f.name)] if m}


def multi_rank_runs() -> list[Path]:
    """Every real multi-rank run in fixtures/ (two or more ranks' trace files), and every
    cluster capture (the ranks are in its lines' prefixes); tlparse's multi-rank logs."""
    runs = [d for d in FIXTURES.glob("*") if d.is_dir() and d.name not in _AGGREGATES]
    runs += [d for agg in _AGGREGATES for d in (FIXTURES / agg).glob("*") if d.is_dir() and d.name != "programs"]
    runs = [d for d in runs if len(_ranks_in_names(d)) >= 2 or d.parent.name == "cluster"]
    return sorted(runs)


RUNS = multi_rank_runs()
PEER_RUNS = ["multi_rank_runtime", "multi_rank_logs", "multi_rank_schedule", "multi_rank_messy_input"]


def _judged(trace) -> tuple[list, list, list]:
    rep = build_report(trace)
    return rep["findings"], rep["head"], rep["per_rank"]


def _no_full_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail on any read of an export's whole tables or its events (the digest path reads
    neither: a detail, such as a crash's kernel calls, is read for its rank alone, by read_rows)."""

    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("a full table was read")

    monkeypatch.setattr(exports, "_read_table", refuse)
    monkeypatch.setattr(exports, "index_events_of", refuse)


def _check(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from traceview.ingest.loading import load

    out = write_export(load(src), tmp_path / "x")
    full = _judged(read_exports([out]))
    with monkeypatch.context() as m:
        _no_full_tables(m)
        trace = read_exports([out], digests=True)
        digest = _judged(trace)
        assert not any(trace.is_loaded(n) for n in ("events", "strings", *GRAPH_TABLES))
    assert digest[0] == full[0]
    assert digest[1] == full[1]
    assert digest[2] == full[2]


def test_every_multi_rank_fixture_is_found() -> None:
    names = {d.name for d in RUNS}
    assert len(RUNS) >= 40
    assert {"multirank4", "collective_size_mismatch", "timeout_behind_compile_nccl", "srun_label", "stop_hang_behind_rank"} <= names


@pytest.mark.parametrize("src", RUNS, ids=[f"{d.parent.name}/{d.name}" for d in RUNS])
def test_digest_findings_are_the_full_tables_findings(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _check(src, tmp_path, monkeypatch)


@pytest.mark.parametrize("name", PEER_RUNS)
def test_digest_findings_on_tlparse_multi_rank_logs(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not SHARED.is_dir():
        pytest.skip("needs the shared traces")
    _check(PEER / name, tmp_path, monkeypatch)


def _export(src: Path, out: Path, *extra: str) -> None:
    assert main(["export", str(src), "-o", str(out), "--no-cache", *extra]) == 0


def _shards(tmp_path: Path, n: int = 2) -> Path:
    src = FIXTURES / "corpus" / "multirank4" / "trace"
    for k in range(n):
        _export(src, tmp_path / "run" / f"host-{k}", "--shard", f"{k}/{n}")
    return tmp_path / "run"


def _summary(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    capsys.readouterr()
    rc = main(["summary", str(path), "--json"])
    got = capsys.readouterr()
    return rc, (json.loads(got.out) if rc == 0 else {}), got.err


def test_the_digest_is_small_and_documented(tmp_path: Path) -> None:
    run = _shards(tmp_path)
    manifest = orjson.loads((run / "host-0" / "manifest.json").read_bytes())
    d = manifest["digest"]
    assert d["version"] == DIGEST_VERSION
    assert d["ranks"] == [0, 2]
    assert set(d["tables"]) == set(DIGEST_FILES)
    size = sum((run / "host-0" / t["path"]).stat().st_size for t in d["tables"].values())
    whole = sum(f.stat().st_size for f in (run / "host-0").rglob("*.parquet")) - size
    # two ranks of a small real run: ~110 KB, most of it the files' own overhead (about 5 KB a
    # rank with 64 ranks a host), a third of the tables
    assert size < whole / 2
    doc = (Path(__file__).parents[2] / "docs" / "tables.md").read_text()
    assert "## The digest" in doc and "summary_guards" in doc


def test_a_damaged_host_is_named_and_the_others_are_summarized(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _shards(tmp_path)
    # hand-damaged on purpose: one host's digest file cut in half
    victim = run / "host-1" / "digest" / "compiles.parquet"
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    rc, rep, _ = _summary(run, capsys)
    assert rc == 0
    stray = {s["path"]: s["why"] for s in rep["inputs"]["stray_files"]}
    assert str(run / "host-1") in stray and "damaged traceview export" in stray[str(run / "host-1")]
    assert rep["ranks"] == [0, 2]


def test_a_digest_of_another_version_says_to_export_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _shards(tmp_path)
    mpath = run / "host-0" / "manifest.json"
    manifest = orjson.loads(mpath.read_bytes())
    manifest["digest"]["version"] = DIGEST_VERSION + 1
    mpath.write_bytes(orjson.dumps(manifest))
    with pytest.raises(ExportError, match="export it again"):
        read_exports([run / "host-0", run / "host-1"], digests=True)
    rc, _, err = _summary(run, capsys)
    assert rc != 0 and "export it again" in err and "Traceback" not in err


def test_an_export_without_a_digest_is_read_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # an older traceview's export (no digest) beside a new one: both read, the same findings
    run = _shards(tmp_path)
    _, want, _ = _summary(run, capsys)
    mpath = run / "host-1" / "manifest.json"
    manifest = orjson.loads(mpath.read_bytes())
    del manifest["digest"]
    mpath.write_bytes(orjson.dumps(manifest))
    _, got, _ = _summary(run, capsys)
    assert got["findings"] == want["findings"] and got["head"] == want["head"]


def test_two_digests_of_one_rank_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = FIXTURES / "corpus" / "multirank4" / "trace"
    _export(src, tmp_path / "run" / "host-a", "--shard", "0/2")
    _export(src, tmp_path / "run" / "host-b", "--shard", "0/2")
    rc, _, err = _summary(tmp_path / "run", capsys)
    assert rc != 0 and "rank 0" in err and "Traceback" not in err
