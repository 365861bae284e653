"""TORCH_COMPILE_DEBUG=1 folders as input, end to end on real runs (fixtures/debugdir, torch
2.13 CPU; oracle.json = torch's own counters): what is read, tied and said, what the head line
says cannot be known, and that the trace wins where it is beside the folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import traceview
from parsers.discover import InputError, discover
from tests.conftest import FIXTURES
from traceview.output.report import build_report

DEBUG = FIXTURES / "debugdir"


def counters(name: str) -> dict:
    return json.loads((DEBUG / name / "oracle.json").read_text())["processes"][0]["counters"]


def report_of(path: Path | str) -> dict:
    return build_report(traceview.load(path))


def test_folder_with_stderr_graphs_and_kernels_tied_to_compile_ids() -> None:
    t = traceview.load(DEBUG / "debugdir_train_plain")
    g = t.graphs.sort("label", "kind")
    assert g.select("label", "kind", "compile_id").rows() == [
        ("model__0_inference_0.0", "aot_inference", "0/0"), ("model__0_inference_0.0", "post_grad", "0/0"),
        ("model__1_inference_1.1", "aot_inference", "1/0"), ("model__1_inference_1.1", "post_grad", "1/0"),
        ("model__2_inference_2.2", "aot_inference", "1/1"), ("model__2_inference_2.2", "post_grad", "1/1"),
        ("model__3_backward_6.4", "aot_backward", "2/0"), ("model__3_backward_6.4", "post_grad", "2/0"),
        ("model__3_forward_4.3", "aot_forward", "2/0"), ("model__3_forward_4.3", "post_grad", "2/0"),
    ]
    k = t.kernels
    # torch counted 2 extern calls (addmm in the forward, mm in the backward)
    assert k.filter(pl.col("kind") == "extern").height == counters("debugdir_train_plain")["inductor"]["extern_calls"] == 2
    assert k.filter(pl.col("kind") == "extern").select("graph", "name").sort("graph").rows() == [
        ("3_backward", "extern_kernels.mm"), ("3_forward", "extern_kernels.addmm")]
    assert k.filter(pl.col("kind") == "cpp").height == 6
    assert k["compile_id"].null_count() == 0
    r = report_of(DEBUG / "debugdir_train_plain")
    (d,) = r["inputs"]["debug_dirs"]
    assert (d["graphs"], d["tied"], d["messages"], d["unfinished"], d["covered_by"]) == (5, 5, 0, [], None)
    assert r["head"][0] == "findings: none (no recompiles, graph breaks or failures)"
    assert r["head"][1].startswith("1 TORCH_COMPILE_DEBUG folder without TORCH_TRACE: no compile times, guards, cache or status")
    assert "5 Inductor graphs, each tied to its compile id" in r["head"][1]


def test_folder_alone_compile_ids_unknown_and_said_so() -> None:
    root = DEBUG / "debugdir_train_plain" / "torch_compile_debug"
    t = traceview.load(root)
    assert t.graphs.height == 10 and t.graphs["compile_id"].null_count() == 10
    assert t.kernels.height == 8
    r = report_of(root)
    assert r["inputs"]["debug_dirs"][0]["tied"] == 0
    # never "no failures": the folder alone cannot show one
    assert r["head"][0] == ("findings: none found (a TORCH_COMPILE_DEBUG folder alone shows neither failures "
                            "nor recompiles: see below)")
    assert "5 Inductor graphs, compile ids unknown" in r["head"][1]
    from traceview.output.summary import title_line

    assert title_line(r) == "traceview: 5 Inductor graphs from 1 TORCH_COMPILE_DEBUG folder"


def test_debug_log_break_counted_once_beside_its_stderr() -> None:
    # TORCH_LOGS=graph_breaks prints the break on stderr (with its compile id) and into
    # torchdynamo/debug.log (without): one break, torch counted one
    name = "debugdir_train_logs"
    t = traceview.load(DEBUG / name)
    assert sum(counters(name)["graph_break"].values()) == 1
    assert t.graph_breaks.select("line", "function", "compile_id").rows() == [(15, "scale", "0/0")]
    r = report_of(DEBUG / name)
    assert r["head"][0] == "findings: 1 graph break, 1 recompiling function"
    assert r["inputs"]["debug_dirs"][0]["messages"] == 0  # the capture's record counts
    # the folder alone (TORCH_COMPILE_DEBUG_DIR=debug_root): the break from debug.log, its compile unknown
    alone = traceview.load(DEBUG / name / "debug_root")
    assert alone.graph_breaks.select("line", "function", "compile_id").rows() == [(15, "scale", None)]
    assert report_of(DEBUG / name / "debug_root")["head"][0] == "findings: 1 graph break"


def test_trace_beside_the_folder_wins() -> None:
    # torch 2.13 writes the trace into torch_compile_debug/tlparse/ itself: the same process
    # (pid) holds every graph and wrapper of the folder, so the folder is not read again
    name = "debugdir_train_trace"
    inputs = discover(DEBUG / name)
    (run,) = inputs.debug_runs
    assert run.covered_by is not None and "tlparse" in run.covered_by
    t = traceview.load(DEBUG / name)
    assert t.log_records.filter(pl.col("artifact").str.starts_with("debug_")).height == 0
    assert t.graphs.filter(pl.col("source") != "trace").height == 0
    assert t.kernels.filter(pl.col("kind") == "extern").height == counters(name)["inductor"]["extern_calls"]
    r = report_of(DEBUG / name)
    assert r["compiles"] == counters(name)["frames"]["total"] == 4
    assert not any("TORCH_COMPILE_DEBUG" in line for line in r["head"])


def test_failing_compile_is_the_crash_and_the_folder_says_nothing_twice() -> None:
    r = report_of(DEBUG / "debugdir_failure")
    assert r["head"][0] == "findings: the program crashed"
    assert r["findings"][0]["kind"] == "crash"
    assert "CppCompileError" in json.dumps(r["findings"][0])


def _copy_run(tmp_path: Path, name: str = "debugdir_train_plain") -> Path:
    src = next((DEBUG / name).glob("**/torch_compile_debug/run_*"))
    dst = tmp_path / "torch_compile_debug" / src.name
    shutil.copytree(src, dst)
    return dst


def test_half_written_graph_folder_is_an_unfinished_compile(tmp_path: Path) -> None:
    run = _copy_run(tmp_path)
    # a compile stopped before Inductor wrote its wrapper (output_code.py is written last)
    (run / "torchinductor" / "model__3_backward_6.4" / "output_code.py").unlink()
    # and a wrapper cut in the middle of a line
    oc = run / "torchinductor" / "model__0_inference_0.0" / "output_code.py"
    oc.write_bytes(oc.read_bytes()[:1500])
    r = report_of(tmp_path)
    first = r["findings"][0]
    assert (first["kind"], first["facet"], first["certainty"]) == ("unfinished", "debug_dir", "likely")
    assert first["claim"].startswith("Inductor did not finish AOT graph 3_backward (a compile whose id the folder does not tell)")
    folder = run / "torchinductor" / "model__3_backward_6.4"
    assert r["inputs"]["debug_dirs"][0]["unfinished"] == [
        {"folder": folder.name, "path": str(folder), "aot_id": "3_backward", "compile_id": None}]
    assert first["evidence"][0]["file"] == str(folder)
    assert r["head"][0] == "findings: 1 unfinished compile"
    from tests.output.test_report_schema import _errors

    assert _errors(json.loads(json.dumps(r))) == []


def test_empty_debug_folder_is_noted_not_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "torch_compile_debug" / "run_2026_11_28_14_37_07_371432-pid_10686"
    (empty / "torchdynamo").mkdir(parents=True)
    (empty / "torchdynamo" / "debug.log").write_bytes(b"")
    with pytest.raises(InputError, match="no TORCH_TRACE or TORCH_LOGS logs"):
        discover(tmp_path)
    # beside a readable one: noted in the input, the other read
    _copy_run(tmp_path)
    inputs = discover(tmp_path)
    assert len(inputs.debug_runs) == 1
    assert (str(empty), "TORCH_COMPILE_DEBUG folder with nothing written in it") in inputs.stray
    r = report_of(tmp_path)
    assert r["inputs"]["debug_dirs"][0]["graphs"] == 5


def test_an_export_keeps_the_folder_and_what_it_cannot_tell(tmp_path: Path) -> None:
    from traceview.output.export import write_export

    src = DEBUG / "debugdir_train_plain"
    write_export(traceview.load(src), tmp_path / "exp")
    back = traceview.load(tmp_path / "exp")
    assert back.graphs.select("label", "kind", "compile_id").sort("label", "kind").rows() == (
        traceview.load(src).graphs.select("label", "kind", "compile_id").sort("label", "kind").rows())
    r = build_report(back)
    assert r["inputs"]["debug_dirs"] == report_of(src)["inputs"]["debug_dirs"]
    assert r["head"] == report_of(src)["head"]


def test_two_ranks_each_folder_tied_to_its_rank_and_the_lone_recompile_found() -> None:
    name = "debugdir_ranks"
    procs = {p["rank"]: p for p in json.loads((DEBUG / name / "oracle.json").read_text())["processes"]}
    t = traceview.load(DEBUG / name)
    per_rank = t.graphs.filter(pl.col("kind").str.starts_with("aot_")).group_by("rank").len().sort("rank").rows()
    # one Inductor graph per FX graph cache miss of each process: rank 1 compiled forward twice
    assert per_rank == [(r, procs[r]["counters"]["inductor"]["fxgraph_cache_miss"]) for r in (0, 1)] == [(0, 2), (1, 4)]
    assert t.kernels.filter(pl.col("kind") == "extern").group_by("rank").len().sort("rank").rows() == [
        (r, procs[r]["counters"]["inductor"]["extern_calls"]) for r in (0, 1)]
    assert set(t.graphs.filter(pl.col("rank") == 1)["compile_id"]) == {"0/0", "0/1"}
    r = report_of(DEBUG / name)
    assert r["head"][0] == "findings: 1 diverging rank (rank 1), 1 recompiling function"
    assert (r["findings"][0]["kind"], r["findings"][0]["ranks"]) == ("divergence", [1])
    # the folders alone: which rank is which is unknown, that the processes differ is said
    alone = report_of(DEBUG / name / "torch_compile_debug")
    assert "its processes compiled different numbers of Inductor graphs (pid 3872: 4, pid 3871: 2)" in alone["head"][1]
    assert {p["pid"]: p["rank"] for p in procs.values()} == {3872: 1, 3871: 0}


def test_damaged_debug_folders_end_cleanly_from_the_command_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    def tv(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "traceview", "summary", "--no-cache", str(path)],
                              capture_output=True, text=True, timeout=300)

    empty = tmp_path / "empty" / "torch_compile_debug" / "run_2026_11_28_14_37_07_371432-pid_10686" / "torchinductor"
    empty.mkdir(parents=True)
    r = tv(tmp_path / "empty")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith("traceview: error: ") and "Traceback" not in r.stderr
    # a half-written one: a graph folder with only its first file, a debug.log cut mid-message
    # and with bytes that are not text
    run = _copy_run(tmp_path / "half", "debugdir_train_logs")
    for f in (run / "torchinductor" / "model__3_backward_6.4").iterdir():
        if f.name != "fx_graph_runnable.py":
            f.unlink()
    log = run / "torchdynamo" / "debug.log"
    log.write_bytes(log.read_bytes()[:700] + b"\x00\xff\xfe")
    r = tv(tmp_path / "half")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.splitlines()[2] == "findings: 1 unfinished compile, 1 graph break"


@pytest.mark.parametrize("name", ["debugdir_train_plain", "debugdir_train_logs/debug_root", "debugdir_train_trace",
                                  "debugdir_failure", "debugdir_ranks"])
def test_reports_of_debug_folders_validate(name: str) -> None:
    from tests.output.test_report_schema import _as_printed, _errors

    assert _errors(_as_printed(traceview.load(DEBUG / name))) == []


def test_a_trace_cut_short_leaves_the_graph_folders_it_lacks_to_the_folder(tmp_path: Path) -> None:
    import gzip

    # the trace wins for what it holds: cut before the backward's wrapper, the folder's
    # backward graph is read from the folder, every other graph from the trace alone
    src = DEBUG / "debugdir_train_trace" / "torch_compile_debug"
    dst = tmp_path / "torch_compile_debug"
    shutil.copytree(src / next(src.glob("run_*")).name, dst / next(src.glob("run_*")).name)
    (gz,) = (src / "tlparse").glob("*.log.gz")
    data = gzip.decompress(gz.read_bytes())
    cut = data.index(b"# AOT ID: ['3_backward']")
    cut = data.rindex(b"\nV", 0, cut) + 1  # the start of that wrapper's record
    (dst / "tlparse").mkdir()
    (dst / "tlparse" / gz.name.removesuffix(".gz")).write_bytes(data[:cut])
    t = traceview.load(tmp_path)
    kernels = t.kernels.group_by("graph", "source").len().sort("graph").rows()
    assert kernels == [("0_inference", "trace", 1), ("1_inference", "trace", 1), ("2_inference", "trace", 1),
                       ("3_backward", "text", 3), ("3_forward", "trace", 2)]
    from_folder = t.graphs.filter(pl.col("source") == "text")
    assert sorted(from_folder["kind"]) == ["aot_backward", "post_grad"] and set(from_folder["aot_id"]) == {"3_backward"}
    r = report_of(tmp_path)
    (d,) = r["inputs"]["debug_dirs"]
    assert d["covered_by"] is not None and d["from_folder"] == 1


def test_dynamo_debug_logs_in_the_folder_give_the_break_once() -> None:
    # TORCH_LOGS=+dynamo,guards,recompiles_verbose,graph_breaks: debug.log holds Dynamo's
    # tracing (one record per line) around the break's message; the break is found once,
    # from the folder alone (compile unknown) and beside stderr (compile 0/0)
    name = "debugdir_train_verbose"
    assert sum(counters(name)["graph_break"].values()) == 1
    alone = traceview.load(DEBUG / name / "torch_compile_debug")
    assert alone.graph_breaks.select("line", "function", "gb_id", "compile_id").rows() == [(15, "scale", "gb0059", None)]
    assert alone.log_records.filter(pl.col("artifact") == "graph_breaks").height == 1
    both = traceview.load(DEBUG / name)
    assert both.graph_breaks.select("line", "function", "compile_id").rows() == [(15, "scale", "0/0")]
    assert report_of(DEBUG / name / "torch_compile_debug")["head"][0] == "findings: 1 graph break"
