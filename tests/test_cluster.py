"""The whole tool on logs as clusters collect them (fixtures/cluster/, issue 45 class 10): each
launcher's combined capture gives the findings of the ranks' own unprefixed files, the lone
rank's recompile first, with torch's own counts (`oracle.json`)."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import pytest

import traceview
from parsers.discover import discover
from traceview.output.report import build_report

from .conftest import FIXTURES

CLUSTER = FIXTURES / "cluster"
LAUNCHED = ["srun_label", "srun_label_before_init", "ompi_tag_output", "ompi_tag_output_before_init",
            "mpich_label_before_init", "pdsh_hosts"]


def _findings(report: dict) -> list[tuple]:
    """What a finding says, not where it was read: kind, severity, claim, ranks, compiles, count,
    certainty."""
    return [
        (f["kind"], f["severity"], f["claim"], tuple(f.get("ranks") or ()),
         tuple((c["rank"], c["compile_id"]) for c in f.get("compiles") or ()), f.get("count"), f.get("certainty"))
        for f in report["findings"]
    ]


@functools.cache
def _report(path: str) -> dict:
    return build_report(traceview.load(path))


@pytest.fixture(scope="module")
def per_rank_files(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """torchrun's per-rank files (no prefix), alone in a directory."""
    d = tmp_path_factory.mktemp("per_rank")
    for f in (CLUSTER / "torchrun_nodes" / "logs").glob("node-*/rank-*.log"):
        shutil.copy(f, d / f.name)
    return build_report(traceview.load(d))


def _oracle_recompiles(name: str) -> dict[int, int]:
    """torch's recompiles of `forward` per rank."""
    doc = json.loads((CLUSTER / name / "oracle.json").read_text())
    return {p["rank"]: r["recompiles"] for p in doc["processes"] for r in p["per_code"] if r["function"] == "forward"}


def test_reference_says_rank_2_alone_recompiled(per_rank_files: dict) -> None:
    first = per_rank_files["findings"][0]
    assert first["kind"] == "divergence" and first["ranks"] == [2]
    assert "size mismatch at index 0. expected 8, actual 6" in first["claim"]
    assert _oracle_recompiles("torchrun_nodes") == {0: 0, 1: 0, 2: 1, 3: 0}
    (storm,) = per_rank_files["recompiles"]
    assert (storm["rank"], storm["function"], storm["compiles"]) == (2, "forward", 2)


@pytest.mark.parametrize("name", LAUNCHED)
def test_launcher_capture_gives_the_per_rank_findings(name: str, per_rank_files: dict) -> None:
    report = _report(str(CLUSTER / name / "combined.log"))
    assert _findings(report) == _findings(per_rank_files)
    assert report["head"] == per_rank_files["head"]
    # torch's accounting of that run: rank 2 alone recompiled forward, once
    assert _oracle_recompiles(name) == {0: 0, 1: 0, 2: 1, 3: 0}
    assert [(s["rank"], s["compiles"]) for s in report["recompiles"]] == [(2, 2)]


def test_torchrun_consoles_give_the_per_rank_findings(per_rank_files: dict) -> None:
    """Both nodes' consoles (`[default0]:[rank2]:` on node 1: the local ranks collide)."""
    report = _report(str(CLUSTER / "torchrun_nodes" / "console"))
    assert _findings(report) == _findings(per_rank_files)


def test_one_folder_per_node_reads_as_one_job() -> None:
    """logs/node-000/, logs/node-001/: each with its ranks' text logs and trace files."""
    inputs = discover(CLUSTER / "torchrun_nodes" / "logs")
    assert sorted(t.rank for t in inputs.traces) == [0, 1, 2, 3] and inputs.runs == 1
    assert len(inputs.text_logs) == 4
    report = _report(str(CLUSTER / "torchrun_nodes" / "logs"))
    first = report["findings"][0]
    assert first["kind"] == "stall" and first["compiles"][0]["rank"] == 2 and first["compiles"][0]["compile_id"] == "0/1"
    assert [(s["rank"], s["compiles"]) for s in report["recompiles"]] == [(2, 2)]


def test_trace_files_opened_before_init_process_group_take_their_records_rank(tmp_path: Path) -> None:
    """dedicated_log_torch_trace_XXXX.log (no rank_N_): the first records carry no `rank`,
    the later ones do; every record gets the file's one rank, the job is one run."""
    trace = CLUSTER / "spawn_trace_before_init" / "trace"
    assert not any("rank_" in p.name for p in trace.iterdir())
    inputs = discover(trace)
    assert sorted(t.rank for t in inputs.traces) == [0, 1, 2, 3] and inputs.runs == 1
    t = traceview.load(trace)
    ev = t.events
    assert ev["rank"].null_count() == 0 and sorted(ev["rank"].unique().to_list()) == [0, 1, 2, 3]
    # the warmup compile before init_process_group: its records had no rank of their own
    starts = ev.filter(ev["kind"] == "dynamo_start").sort("file", "lineno")
    assert starts.group_by("file").first().height == 4
    raw = [json.loads(line.split("] ", 1)[1]) for line in _first_lines(inputs.traces[0].path, 1)]
    assert "rank" not in raw[0]
    report = build_report(t)
    first = report["findings"][0]
    assert first["kind"] == "stall" and first["compiles"][0]["rank"] == 2
    # forward is the second code object here (warmup came first): its recompile is 1/1
    assert first["compiles"][0]["compile_id"] == "1/1"
    assert _oracle_recompiles("spawn_trace_before_init") == {0: 0, 1: 0, 2: 1, 3: 0}


def _first_lines(path: str, n: int) -> list[str]:
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [next(f) for _ in range(n)]


def test_no_rank_anywhere_says_no_rank() -> None:
    """mp.spawn, compiles before init_process_group, no launcher prefix: the recompile is
    found, attributed to no rank (never to a made-up one)."""
    report = _report(str(CLUSTER / "spawn_before_init" / "combined.log"))
    assert [(s["rank"], s["compiles"]) for s in report["recompiles"]] == [(None, 2)]
    for f in report["findings"]:
        assert all(r is None for r in f.get("ranks") or ()), f


def test_rankless_processes_of_one_job_are_one_run_and_reruns_are_not(tmp_path: Path) -> None:
    """Trace files without a rank anywhere (no process group): the 4 processes of one
    mp.spawn job overlap in time, one run; a program run twice (the corpus' cold and warm
    cache runs, one after the other) is two."""
    one = discover(CLUSTER / "spawn_before_init" / "trace")
    assert [t.rank for t in one.traces] == [None] * 4 and one.runs == 1
    both = tmp_path / "both"
    both.mkdir()
    for run in (FIXTURES / "corpus" / "cache_warm_hits" / "first_run" / "trace", FIXTURES / "corpus" / "cache_warm_hits" / "trace"):
        for f in run.iterdir():
            shutil.copy(f, both / f.name)
    two = discover(both)
    assert [t.rank for t in two.traces] == [None, None] and two.runs == 2
    assert len(discover(both, latest=True).dropped_runs) == 1


def test_a_job_stdout_that_starts_with_megabytes_of_other_output_is_a_text_log(tmp_path: Path) -> None:
    """A many-rank job's stdout: every rank's start-up output first (here 9 MB of the corpus
    runs' real stdout lines), torch's lines after it: found, read, the same findings."""
    foreign = b"".join(p.read_bytes() for p in sorted((FIXTURES / "corpus").glob("*/stdout.txt")))
    assert foreign
    src = CLUSTER / "srun_label" / "combined.log"
    job = tmp_path / "job.out"
    with open(job, "wb") as out:
        n = 0
        while n < 9 << 20:
            out.write(foreign)
            n += len(foreign)
        out.write(src.read_bytes())
    inputs = discover(job)
    assert inputs.text_logs == [str(job)]
    assert _findings(build_report(traceview.load(job))) == _findings(_report(str(src)))


def test_torchrun_trace_opened_before_init_counts_the_compile_before_it() -> None:
    """fixtures/torchrun_tee/trace: torchrun --tee, `scale` compiled first before
    init_process_group (trace files named without a rank, the first compile's records without
    one). Each rank's recompile finding counts all its compiles and their time as torch's own
    compilation_metrics give it (read here with json alone), the pre-init compile included."""
    trace = FIXTURES / "torchrun_tee" / "trace"
    torch_says: dict[int, tuple[int, float]] = {}
    for f in trace.iterdir():
        rank, n, us = None, 0, 0
        for line in f.read_text().splitlines():
            if line.startswith("\t") or '{"compilation_metrics"' not in line:
                continue
            envelope = json.loads(line.split("] ", 1)[1])
            n, us = n + 1, us + envelope["compilation_metrics"]["duration_us"]
            rank = envelope.get("rank", rank)  # none on the compile before init_process_group
        torch_says[rank] = (n, us / 1e6)
    assert sorted(torch_says) == [0, 1]
    report = _report(str(trace))
    got = {f["ranks"][0]: f["claim"] for f in report["findings"] if f["kind"] in ("storm", "recompile")}
    for rank, (n, seconds) in torch_says.items():
        assert f"rank {rank} scale (torchrun_tee.py:15): {n} compiles, {seconds:.2f}s" in got[rank]
    assert {r: n for r, (n, _) in torch_says.items()} == {0: 3, 1: 2}  # as planted
