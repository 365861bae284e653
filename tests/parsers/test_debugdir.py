"""parsers.debugdir on real TORCH_COMPILE_DEBUG=1 runs (fixtures/debugdir, torch 2.13 CPU),
checked against torch's own accounting of each run (oracle.json)."""

from __future__ import annotations

import json
from pathlib import Path

from parsers.debugdir import (
    debug_records,
    debug_ties,
    find_run_dirs,
    read_run_dir,
    split_dynamo_log,
)
from parsers.messages import parse_graph_break
from tests.conftest import FIXTURES

DEBUG = FIXTURES / "debugdir"


def oracle(name: str) -> dict:
    return json.loads((DEBUG / name / "oracle.json").read_text())["processes"][0]


def inductor_compiles(name: str) -> set[str]:
    """The compile ids torch ran Inductor for (its compilation metrics)."""
    return {m["compile_id"] for e in oracle(name)["epochs"] for m in e["compilation_metrics"] if m["inductor_compile_time_s"]}


def test_run_folder_found_from_the_folder_its_parent_and_the_debug_dir_root() -> None:
    run = next((DEBUG / "debugdir_train_plain" / "torch_compile_debug").glob("run_*"))
    for root in (DEBUG / "debugdir_train_plain", run.parent, run):
        assert find_run_dirs(root) == [run]
    # TORCH_COMPILE_DEBUG_DIR=debug_root: torch adds torch_compile_debug/ under it
    logs = DEBUG / "debugdir_train_logs"
    assert [p.parent.parent.name for p in find_run_dirs(logs)] == ["debug_root"]


def test_graph_folders_are_torchs_inductor_compiles() -> None:
    run = read_run_dir(find_run_dirs(DEBUG / "debugdir_train_plain")[0])
    assert run.pid == oracle("debugdir_train_plain")["pid"]
    # one folder per Inductor compile: torch counted 5 FX graph cache misses
    assert len(run.graphs) == oracle("debugdir_train_plain")["counters"]["inductor"]["fxgraph_cache_miss"] == 5
    assert [g.aot_id for g in run.graphs] == ["0_inference", "1_inference", "2_inference", "3_forward", "3_backward"]
    assert all(g.finished for g in run.graphs)


def test_stderr_debug_trace_lines_tie_each_folder_to_its_compile_id() -> None:
    name = "debugdir_train_plain"
    run = read_run_dir(find_run_dirs(DEBUG / name)[0])
    ties = debug_ties([str(DEBUG / name / "stderr.txt")], run.pid)
    assert {n: t[1:] for n, t in ties.items()} == {
        "model__0_inference_0.0": ("0/0", "[0/0_1]"),  # scale, its second attempt (after the break)
        "model__1_inference_1.1": ("1/0", "[1/0]"),
        "model__2_inference_2.2": ("1/1", "[1/1]"),  # the resume function's recompile
        "model__3_forward_4.3": ("2/0", "[2/0]"),
        "model__3_backward_6.4": ("2/0", "[2/0]"),
    }
    assert {t[1] for t in ties.values()} == inductor_compiles(name)
    # another process's stderr ties nothing
    assert debug_ties([str(DEBUG / name / "stderr.txt")], run.pid + 1) == {}


def test_records_of_graph_files_carry_the_tie_or_none() -> None:
    name = "debugdir_train_plain"
    run = read_run_dir(find_run_dirs(DEBUG / name)[0])
    tied = debug_records(run, debug_ties([str(DEBUG / name / "stderr.txt")], run.pid))
    assert tied.height == 20  # 5 folders x (readable graph, transformed graph, runnable, wrapper); debug.log empty
    assert tied["compile_id"].null_count() == 0
    assert sorted(tied.filter(tied["artifact"] == "debug_output_code")["compile_id"].to_list()) == ["0/0", "1/0", "1/1", "2/0", "2/0"]
    untied = debug_records(run)
    assert untied["compile_id"].null_count() == untied.height


def test_dynamo_debug_log_messages_split_by_torchs_grammar() -> None:
    # TORCH_LOGS=graph_breaks: the break's message is in debug.log without any prefix
    run = read_run_dir(find_run_dirs(DEBUG / "debugdir_train_logs")[0])
    msgs = split_dynamo_log(Path(run.dynamo_log).read_text())
    assert len(msgs) == 1 == sum(oracle("debugdir_train_logs")["counters"]["graph_break"].values())
    gb = parse_graph_break(msgs[0][2])
    assert (gb["filename"].rsplit("/", 1)[-1], gb["line"], gb["function"], gb["gb_id"]) == ("debugdir_train.py", 15, "scale", "gb0059")
    assert len(gb["user_stack"]) == 3  # <module>, main, scale: the traceback stays with its message


def test_failing_compile_folder() -> None:
    run = read_run_dir(find_run_dirs(DEBUG / "debugdir_failure")[0])
    assert len(run.graphs) == oracle("debugdir_failure")["counters"]["inductor"]["fxgraph_cache_miss"] == 1
    ties = debug_ties([str(DEBUG / "debugdir_failure" / "stderr.txt")], run.pid)
    assert {t[1] for t in ties.values()} == {"0/0"}


def test_folders_made_far_apart_are_two_runs_and_latest_keeps_the_newest(tmp_path: Path) -> None:
    import shutil

    from parsers.discover import discover

    src = find_run_dirs(DEBUG / "debugdir_train_plain")[0]
    # the same process's folder again, as a job started an hour later would name it
    later = src.name.replace(src.name[4:17], src.name[4:15] + f"{(int(src.name[15:17]) + 1) % 24:02d}")
    for name in (src.name, later):
        shutil.copytree(src, tmp_path / "torch_compile_debug" / name)
    inputs = discover(tmp_path)
    assert inputs.runs == 2 and [r.run for r in inputs.debug_runs] == [0, 1]
    newest = discover(tmp_path, latest=True)
    assert [Path(r.path).name for r in newest.debug_runs] == [later]
    assert newest.dropped_runs == [str(tmp_path / "torch_compile_debug" / src.name)]
