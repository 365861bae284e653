"""`traceview export --shard K/N` and `traceview.export_hosts`: N exports of the shares of a
real multi-rank run are summarized with the findings of one export of everything."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import traceview
from tests.conftest import FIXTURES, PEER, needs_shared
from traceview.cli import main

CORPUS = FIXTURES / "corpus"
# real 4-rank gloo runs: a lone-rank recompile, a mismatched collective, a lone DDP recompile
RUNS = ["multirank4", "collective_size_mismatch", "ddp_rank_recompile"]


def _summary(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    assert main(["summary", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _base(v: object, key: str = "") -> object:
    """`v` with the log files named by their base name (a host's copy of a rank log is in
    another directory than the fixture's)."""
    if isinstance(v, dict):
        return {k: _base(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [_base(x, key) for x in v]
    return Path(v).name if key in ("file", "path") and isinstance(v, str) else v


def _export(src: Path, out: Path, *extra: str) -> None:
    assert main(["export", str(src), "-o", str(out), "--no-cache", *extra]) == 0


def _ranks(export: Path) -> list[int]:
    manifest = json.loads((export / "manifest.json").read_text())
    return sorted(t["rank"] for t in manifest["inputs"]["trace_files"])


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("n", [2, 3])
def test_n_shard_exports_summarize_as_one_export(run: str, n: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = CORPUS / run / "trace"
    _export(src, tmp_path / "whole")
    for k in range(n):
        _export(src, tmp_path / "run" / f"task-{k}", "--shard", f"{k}/{n}", "--partition-by-rank", "yes")
    # rank R is in share R mod N (4 ranks: 0..3)
    assert [_ranks(tmp_path / "run" / f"task-{k}") for k in range(n)] == [[r for r in range(4) if r % n == k] for k in range(n)]
    got, want = _summary(tmp_path / "run", capsys), _summary(tmp_path / "whole", capsys)
    assert want["findings"], "the fixture's findings are what is compared"
    assert got["findings"] == want["findings"]
    assert got["head"] == want["head"]
    assert got["per_rank"] == want["per_rank"]
    assert got["rank_divergence"] == want["rank_divergence"]
    assert got["collectives"] == want["collectives"]


@needs_shared
def test_ranks_with_equal_compile_times_come_in_rank_order_whatever_the_shares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # tlparse's 7-rank logs: ranks 1-4 are copies (equal compile times); the shares of 2 tasks
    # come in the order 0, 2, 4, 6, 1, 3, 5, one export's in rank order: the findings are the same
    src = PEER / "multi_rank_runtime"
    _export(src, tmp_path / "whole")
    for k in range(2):
        _export(src, tmp_path / "run" / f"task-{k}", "--shard", f"{k}/2", "--partition-by-rank", "yes")
    got, want = _summary(tmp_path / "run", capsys), _summary(tmp_path / "whole", capsys)
    assert got["findings"] == want["findings"]
    slow = [f for f in got["findings"] if f["kind"] == "compile_time"]
    assert [[c["rank"] for c in f["compiles"]] for f in slow] == [[0, 1, 2, 3, 4, 5, 6], *[[0, 1, 2, 3, 4]] * 3]


def test_multirank4_shards_find_the_lone_rank_recompile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the finding needs every share: rank 2 (share 0 of 2) compiles 0/1, ranks 1 and 3 (share 1)
    # do not (oracle.json, torch's counters: rank 2 compiled 4 frames, the others 3)
    src = CORPUS / "multirank4" / "trace"
    for k in range(2):
        _export(src, tmp_path / "run" / f"task-{k}", "--shard", f"{k}/2")
    report = _summary(tmp_path / "run", capsys)
    assert [(d["rank"], d["extra_compile_ids"]) for d in report["rank_divergence"]] == [(2, ["0/1"])]
    assert report["ranks"] == [0, 1, 2, 3]


def test_a_share_with_no_rank_is_an_empty_export_read_with_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = CORPUS / "multirank4" / "trace"
    _export(src, tmp_path / "whole")
    for k in range(5):  # 4 ranks over 5 tasks: task 4 has nothing to export
        _export(src, tmp_path / "run" / f"task-{k}", "--shard", f"{k}/5")
    assert _ranks(tmp_path / "run" / "task-4") == []
    assert _summary(tmp_path / "run", capsys)["findings"] == _summary(tmp_path / "whole", capsys)["findings"]


@pytest.mark.parametrize(
    ("shard", "says"),
    [("2/2", "K must be 0 to N-1"), ("1/0", "K must be 0 to N-1"), ("1", "expected K/N"), ("a/b", "expected K/N")],
)
def test_a_bad_shard_is_one_line(shard: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["export", str(CORPUS / "multirank4" / "trace"), "-o", str(tmp_path / "x"), "--shard", shard]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err
    assert not (tmp_path / "x").exists()


def test_text_logs_are_not_split_but_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # multirank4/torch_logs.txt holds the lines of all four ranks ([rank2]: ...)
    capsys.readouterr()
    assert main(["export", str(CORPUS / "multirank4"), "-o", str(tmp_path / "x"), "--shard", "0/2"]) == 2
    err = capsys.readouterr().err
    assert "torch_logs.txt: a text log cannot be split by --shard" in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_an_export_is_not_sharded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _export(CORPUS / "multirank4" / "trace", tmp_path / "whole")
    capsys.readouterr()
    assert main(["export", str(tmp_path / "whole"), "-o", str(tmp_path / "x"), "--shard", "0/2"]) == 2
    assert "--shard splits logs, not exports" in capsys.readouterr().err


def test_export_hosts_through_a_process_pool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = CORPUS / "collective_size_mismatch" / "trace"
    out = traceview.export_hosts(src, tmp_path / "run", shards=3)
    assert [p.name for p in out] == ["shard-000", "shard-001", "shard-002"]
    _export(src, tmp_path / "whole")
    assert _summary(tmp_path / "run", capsys)["findings"] == _summary(tmp_path / "whole", capsys)["findings"]


def test_export_hosts_names_one_export_per_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the logs as two hosts hold them: ranks 0-1 on node-a, ranks 2-3 on node-b
    logs = sorted((CORPUS / "multirank4" / "trace").iterdir())
    hosts = [tmp_path / "logs" / "node-a", tmp_path / "logs" / "node-b"]
    for i, h in enumerate(hosts):
        h.mkdir(parents=True)
        for f in logs[2 * i : 2 * i + 2]:
            (h / f.name).write_bytes(f.read_bytes())
    out = traceview.export_hosts(hosts, tmp_path / "run")
    assert [p.name for p in out] == ["node-a", "node-b"]
    assert [_ranks(p) for p in out] == [[0, 1], [2, 3]]
    _export(CORPUS / "multirank4" / "trace", tmp_path / "whole")
    got, want = _summary(tmp_path / "run", capsys)["findings"], _summary(tmp_path / "whole", capsys)["findings"]
    assert got != want  # the evidence names each host's copy of the logs
    assert _base(got) == _base(want)


@pytest.fixture
def deadline() -> Iterator[None]:
    def stop(signum: int, frame: object) -> None:
        raise TimeoutError("the Dask LocalCluster test ran past 240 s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(240)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGALRM bounds the test")
def test_export_through_a_dask_local_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str], deadline: None) -> None:
    distributed = pytest.importorskip("distributed", reason="the dask extra: pip install 'traceview[dask]'")
    src = CORPUS / "multirank4" / "trace"
    with (
        distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        out = traceview.export_hosts(src, tmp_path / "run", shards=2, executor=client.get_executor())
        # both workers exported: one share each
        assert len(client.scheduler_info()["workers"]) == 2
    assert [p.name for p in out] == ["shard-000", "shard-001"]
    assert [_ranks(p) for p in out] == [[0, 2], [1, 3]]
    _export(src, tmp_path / "whole")
    got, want = _summary(tmp_path / "run", capsys), _summary(tmp_path / "whole", capsys)
    assert want["findings"] and got["findings"] == want["findings"]
    assert got["per_rank"] == want["per_rank"]
