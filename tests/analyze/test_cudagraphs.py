"""CUDA graphs (`mode="reduce-overhead"`) and compiled optimizers (issue 21), on the real GPU runs
of fixtures/gpu/ (torch 2.11 + CUDA, fixtures/make_gpu_fixtures.py) and the CPU corpus runs of
the compiled optimizer (fixtures/corpus/optimizer_lr_*, torch 2.13).

Expected numbers are read from the fixtures' text logs here, with regular expressions of this
file (not the parser's), so that the table and the findings are checked against the log itself.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import jsonschema
import orjson
import polars as pl
import pytest

import traceview
from tests.conftest import FIXTURES, ROOT, SHARED, needs_shared
from traceview.analyze.cudagraphs import cudagraph_findings
from traceview.output.report import build_report
from traceview.output.summary import render_text
from traceview.tui.finding_rows import findings_from_report

GPU = FIXTURES / "gpu"
SCHEMA = json.loads((ROOT / "traceview" / "schemas" / "report.schema.json").read_text())

_PREFIX = re.compile(r"^[VIWEC]\d{4} [\d:.]+ +\d+ \S+:\d+\] (?:\[(?P<pcid>[\d/]+)\] )?\[__cudagraphs\] (?P<msg>.*)$")
_MSG_CID = re.compile(r"^\[(?P<cid>\d+/\d+)\] (?P<msg>.*)$")


def log_lines(scenario: str) -> list[tuple[str | None, str]]:
    """(compile id, message) of every `[__cudagraphs]` line of a fixture's text log (the
    compile id of the prefix, or the one torch puts inside the message)."""
    out = []
    for line in (GPU / scenario / "torch_logs.txt").read_text().splitlines():
        m = _PREFIX.match(line)
        if m is None:
            continue
        cid, msg = m["pcid"], m["msg"]
        if cid is None and (n := _MSG_CID.match(msg)):
            cid, msg = n["cid"], n["msg"]
        out.append((cid, msg))
    return out


def load(scenario: str) -> traceview.Trace:
    return traceview.load(GPU / scenario, jobs=1)


def findings(t: traceview.Trace, kind: str) -> list[dict]:
    return [f for f in cudagraph_findings(t) if f["kind"] == kind]


# ------------------------------------------------------------------------------ table


@pytest.mark.parametrize("scenario", ["ro_cpu_scalar", "ro_device_copy", "hf_llama_generate_static"])
def test_partitions_and_their_reasons_are_the_logged_ones(scenario: str) -> None:
    lines = log_lines(scenario)
    want_parts = [
        (cid, int(m[1]), m[2] == "cudagraphable")
        for cid, msg in lines
        if (m := re.match(r"\s*Partition (\d+): \d+ nodes, (\w+(?:-\w+)?),", msg))
    ]
    want_ops = [(cid, m[1], m[2]) for cid, msg in lines if (m := re.match(r"\s+(op\d+): reason=([^,]+),", msg))]
    cg = load(scenario).cudagraphs
    parts = cg.filter(pl.col("event") == "partition")
    ops = cg.filter(pl.col("event") == "op")
    assert list(zip(parts["compile_id"], parts["partition"], parts["cudagraphable"])) == want_parts
    assert list(zip(ops["compile_id"], ops["op"], ops["reason"])) == want_ops
    assert want_ops  # every one of these runs has non-cudagraphable code


def test_recordings_per_compile_and_graph_ids_are_the_logged_ones() -> None:
    lines = log_lines("ro_dynamic_batches")
    want = [(cid, int(m[1])) for cid, msg in lines if (m := re.match(r"Recording function=\w+, cuda_graph_id=(\d+),", msg))]
    rec = load("ro_dynamic_batches").cudagraphs.filter(pl.col("event") == "recording")
    assert list(zip(rec["compile_id"], rec["graph_id"])) == want
    assert len(want) == 23 and sorted(g for _, g in want) == list(range(23))
    # the symint-key tree lines (no compile id of their own in torch 2.11) go to the compile that records next
    keys = load("ro_dynamic_batches").cudagraphs.filter(pl.col("symint_key").is_not_null())
    assert keys.filter(pl.col("compile_id") == "1/0").height == 10
    assert keys.filter(pl.col("compile_id") == "0/1").height == 6


def test_a_runtime_skip_is_attributed_to_its_compile_with_the_user_line() -> None:
    cg = load("ro_mutated_input").cudagraphs
    skip = cg.filter(pl.col("event") == "skip").to_dicts()
    assert [(s["compile_id"], s["reason"], s["user_function"], s["user_line"]) for s in skip] == [
        ("0/0", "mutated inputs (1 instances)", "accumulate", 22)
    ]
    assert skip[0]["user_code"].startswith("acc.add_(x * 0.5)")


def test_compile_time_skip_comes_from_the_trace_alone() -> None:
    # the trace directory without the text log: compilation_metrics.cudagraph_skip_reason only
    t = traceview.load(GPU / "hf_llama_generate_static_no_graph_partition" / "trace", jobs=1)
    skip = t.cudagraphs.filter(pl.col("event") == "skip")
    assert skip["source"].unique().to_list() == ["trace"]
    assert list(zip(skip["compile_id"], skip["reason"])) == [("0/0", "cpu device (arg8_1)"), ("0/2", "cpu device (arg11_1)")]
    assert skip["user_line"].to_list() == [444, 444]


def test_the_trace_alone_says_which_compiles_went_to_cuda_graphs_and_asks_for_the_log() -> None:
    lines = log_lines("ro_mutated_input")
    graphed = {cid for cid, msg in lines if msg.startswith("Created ")}  # compiles Inductor partitioned
    t = traceview.load(GPU / "ro_mutated_input" / "trace", jobs=1)
    rows = t.cudagraphs.filter(pl.col("event") == "cudagraphify")
    assert set(rows["compile_id"]) == graphed == {"0/0", "1/0"}
    report = build_report(t)
    assert (report["cudagraphs"]["cudagraphified_compiles"], report["cudagraphs"]["text_log_rows"]) == (2, 0)
    text = render_text(report, width=100)
    assert "CUDA GRAPHS  2 compiles handed to CUDA graphs" in text and "TORCH_LOGS=cudagraphs" in text
    # mode="default" runs have no cudagraphify span
    t = traceview.load(GPU / "hf_llama_generate_static_default_mode" / "trace", jobs=1)
    assert t.cudagraphs.height == 0


@needs_shared
def test_shared_reduce_overhead_run_records_a_graph_per_sequence_length_and_has_nothing_to_fix() -> None:
    path = SHARED / "gpu" / "reduce_overhead"
    want = [m[1] for ln in (path / "torch_logs.txt").read_text().splitlines()
            if (m := re.search(r"Recording function=\w+, cuda_graph_id=(\d+)", ln))]
    t = traceview.load(path, jobs=1)
    report = build_report(t)
    assert report["cudagraphs"]["recorded_graphs"] == len(want) == 2
    assert report["cudagraphs"]["findings"] == []  # 2 shapes: below the graph-per-shape threshold
    assert "CUDA GRAPHS  nothing to fix; 2 graphs recorded" in render_text(report, width=100)


def test_a_run_without_cudagraphs_logs_has_an_empty_table_and_no_finding() -> None:
    t = load("timm_vit_train")
    assert t.cudagraphs.height == 0
    assert cudagraph_findings(t) == []
    assert "CUDA GRAPHS" not in render_text(build_report(t))


# --------------------------------------------------------------------------- findings


def test_code_left_out_of_cuda_graphs_names_the_reasons_and_the_user_line() -> None:
    t = load("ro_cpu_scalar")
    got = {f["function"]: f for f in findings(t, "not_graphed")}
    assert set(got) == {"scaled_relu", "mixed_devices"}
    assert got["scaled_relu"]["compile_ids"] == ["0/0"]
    assert [(o["op"], o["reason"]) for o in got["scaled_relu"]["ops"]] == [("op0", "cpu ops"), ("op1", "DeviceCopy ops")]
    assert "Python float" in got["scaled_relu"]["fix"]
    mixed = got["mixed_devices"]
    assert mixed["where"]["line"] == 27 and "cpu_vec * 2.0" in mixed["where"]["code"]
    assert "1 of 2 graph partitions run outside CUDA graphs" in mixed["headline"]


def test_partitions_of_a_run_without_cuda_graphs_are_no_finding() -> None:
    # mode="default": Inductor still logs its graph partitions, "non-cudagraphable" included
    lines = log_lines("hf_llama_generate_static_default_mode")
    assert sum("non-cudagraphable," in msg for _, msg in lines) == 4
    assert not any(msg.startswith(("Recording", "Running warmup")) for _, msg in lines)
    t = load("hf_llama_generate_static_default_mode")
    assert t.cudagraphs.filter(pl.col("event") == "partition").height == 4
    assert cudagraph_findings(t) == []


def test_device_copies_get_the_fix_for_their_direction() -> None:
    got = {f["function"]: f for f in findings(load("ro_device_copy"), "not_graphed")}
    assert got["add_bias"]["ops"][0]["fx"].startswith("prims.device_put.default(arg1_1, cuda:0")
    assert "CPU->GPU copy" in got["add_bias"]["fix"]
    assert got["to_host"]["where"]["code"] == "return y.sum(dim=0).cpu()"
    assert "copy to the CPU" in got["to_host"]["fix"]


def test_one_graph_per_shape_per_function_with_the_sizes() -> None:
    lines = log_lines("ro_dynamic_batches")
    per_frame: Counter = Counter()
    sizes: dict[str, list[str]] = {}
    for cid, msg in lines:
        m = re.match(r"Recording function=\w+, cuda_graph_id=\d+, inputs: \[0\]: Tensor\(size=(\[[^\]]*\])", msg)
        if m:
            per_frame[cid.split("/")[0]] += 1
            sizes.setdefault(cid.split("/")[0], [])
            if m[1] not in sizes[cid.split("/")[0]]:
                sizes[cid.split("/")[0]].append(m[1])
    warned = [int(m[1]) for _, msg in lines if (m := re.search(r"We have observed (\d+) distinct sizes", msg))]
    got = {f["function"]: f for f in findings(load("ro_dynamic_batches"), "graph_per_shape")}
    assert {k: f["count"] for k, f in got.items()} == {
        "mlp_default": per_frame["0"], "mlp_dynamic": per_frame["1"], "mlp_static": per_frame["2"]
    } == {"mlp_default": 7, "mlp_dynamic": 10, "mlp_static": 6}
    assert got["mlp_dynamic"]["shapes"] == sizes["1"]
    assert got["mlp_default"]["shapes"] == sizes["0"]  # size 4 recorded twice (static, then dynamic)
    assert f"torch warned at {warned[0]} distinct sizes" in got["mlp_dynamic"]["headline"]
    assert got["mlp_static"]["compile_ids"] == [f"2/{i}" for i in range(6)]
    assert "cudagraph_skip_dynamic_graphs=True" in got["mlp_default"]["fix"]
    # every function's recordings are in the report, finding or not
    funcs = {f["function"]: f for f in build_report(load("ro_dynamic_batches"))["cudagraphs"]["functions"]}
    assert {k: (f["graphs"], f["input"]) for k, f in funcs.items()} == {
        "mlp_default": (7, 0), "mlp_dynamic": (10, 0), "mlp_static": (6, 0)
    }
    assert funcs["mlp_static"]["shapes"] == sizes["2"]


def test_rerecords_count_new_graphs_not_rerecord_lines() -> None:
    lines = log_lines("ro_rerecord")
    rerecord_lines = sum(msg.startswith("Re-recording function=") for _, msg in lines)
    recordings = [int(m[1]) for _, msg in lines if (m := re.match(r"Recording function=\w+, cuda_graph_id=(\d+)", msg))]
    t = load("ro_rerecord")
    (f,) = findings(t, "rerecords")
    assert rerecord_lines == 15  # 1+2+3+4+5: one line per existing graph that failed its check
    assert f["count"] == len(recordings) - 1 == 5
    assert f["graph_ids"] == recordings[1:]
    assert f["reason"] == "static input data pointer changed"
    assert "load_state_dict" in f["fix"]
    assert build_report(t)["cudagraphs"]["rerecord_lines"] == rerecord_lines


def test_skips_are_findings_and_trace_and_text_count_once() -> None:
    (f,) = findings(load("ro_mutated_input"), "skipped")
    assert (f["function"], f["compile_ids"], f["where"]["line"]) == ("accumulate", ["0/0"], 22)
    assert "mark_static_address" in f["fix"]
    got = {f["reason"]: f for f in findings(load("hf_llama_generate_static_no_graph_partition"), "skipped")}
    assert set(got) == {"cpu device (arg11_1, arg8_1)", "mutated inputs (6 instances)"}
    cpu = got["cpu device (arg11_1, arg8_1)"]
    assert cpu["compile_ids"] == ["0/0", "0/2"] and cpu["count"] == 2  # trace + text: each compile once
    assert cpu["where"]["file"].endswith("transformers/cache_utils.py") and cpu["where"]["line"] == 444


def test_overwritten_output_crash_is_tied_to_the_recorded_function() -> None:
    lines = log_lines("ro_overwritten_output")
    graph = [int(m[1]) for cid, msg in lines if cid == "1/0" and (m := re.search(r"cuda_graph_id=(\d+)", msg))]
    (f,) = findings(load("ro_overwritten_output"), "overwritten_output")
    assert (f["function"], f["compile_ids"], f["graph_ids"]) == ("predict", ["1/0"], graph) == ("predict", ["1/0"], [1])
    assert f["where"]["line"] == 30
    assert "cudagraph_mark_step_begin()" in f["fix"] and "clone" in f["fix"]


def test_text_log_alone_gives_the_same_graph_counts() -> None:
    t = traceview.load(GPU / "ro_dynamic_batches" / "torch_logs.txt", jobs=1)
    got = sorted((f["function"], f["count"]) for f in findings(t, "graph_per_shape"))
    assert got == [("frame 0", 7), ("frame 1", 10), ("frame 2", 6)]


def test_a_cut_cudagraphs_log_is_read_up_to_the_cut(tmp_path: Path) -> None:
    # hand-made damage: the real log cut in the middle of a Recording line
    text = (GPU / "ro_rerecord" / "torch_logs.txt").read_text()
    cut = text.index("cuda_graph_id=3") + 5
    (tmp_path / "torch_logs.txt").write_text(text[:cut])
    t = traceview.load(tmp_path / "torch_logs.txt", jobs=1)
    rec = t.cudagraphs.filter(pl.col("event") == "recording")
    assert rec["graph_id"].to_list() == [0, 1, 2]
    assert [f["count"] for f in findings(t, "rerecords")] == [2]


# ------------------------------------------------------------------ compiled optimizer


def _recompile_lines(path: Path, function: str) -> int:
    return sum(1 for ln in path.read_text().splitlines() if re.search(rf"Recompiling function {function} in \S+/torch/optim/", ln))


@pytest.mark.parametrize("path", [GPU / "compiled_optimizer_lr", FIXTURES / "corpus" / "optimizer_lr_scheduler"], ids=lambda p: p.name)
def test_compiled_optimizer_with_a_float_lr_is_one_finding_with_the_tensor_lr_fix(path: Path) -> None:
    report = build_report(traceview.load(path, jobs=1))
    (o,) = report["compiled_optimizer"]
    recompiles = _recompile_lines(path / "torch_logs.txt", "step")
    assert o["recompiles"] == recompiles == 8
    assert (o["optimizer"], o["lr_source"], o["hit_recompile_limit"], o["limit_compile_id"]) == (
        "Adam", "self.param_groups[0]['lr']", True, "2/8"
    )
    assert "lr=torch.tensor(" in o["fix"] and "capturable=True" in o["fix"]
    # the storm's causes add up to its recompiles: `___as_tensor(lr).item() == v` is the lr itself
    (storm,) = report["recompiles"]
    assert [(c["source"], c["count"]) for c in storm["causes"]] == [("self.param_groups[0]['lr']", recompiles)]
    assert storm["causes"][0]["fix"] == o["fix"]
    assert o["merged_causes"] == 1
    text = render_text(report, width=100)
    storm = text.split("RECOMPILES", 1)[1].split("\n\n", 1)[0]
    assert "compiled optimizer + LR scheduler" in storm
    # the storm is one cause, with the documented fix: not the float advice, not ___as_tensor causes
    assert "after one recompile" not in storm and "cause: ___as_tensor" not in storm
    assert storm.count("cause:") == 1


@pytest.mark.parametrize("path", [GPU / "compiled_optimizer_lr_tensor", FIXTURES / "corpus" / "optimizer_lr_tensor"], ids=lambda p: p.name)
def test_compiled_optimizer_with_a_tensor_lr_has_no_finding(path: Path) -> None:
    report = build_report(traceview.load(path, jobs=1))
    assert report["compiled_optimizer"] == []
    # the break at opt.step() is the LR scheduler's wrapper (gb0007 naming lr_scheduler.py): expected
    (wrapper,) = [g for g in report["graph_breaks"] if g["gb_id"] == "gb0007"]
    assert wrapper["advice"].startswith("expected with a compiled optimizer step under an LR scheduler")
    assert "Avoid calling the function" not in render_text(report, width=100)


# -------------------------------------------------------------------- report and UI


@pytest.mark.parametrize(
    "scenario",
    ["ro_cpu_scalar", "ro_device_copy", "ro_dynamic_batches", "ro_mutated_input", "ro_overwritten_output",
     "ro_rerecord", "hf_llama_generate_static_no_graph_partition", "compiled_optimizer_lr"],
)
def test_gpu_reports_validate_and_show_cuda_graphs(scenario: str) -> None:
    t = load(scenario)
    report = json.loads(orjson.dumps(build_report(t)))
    errors = [e.message for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(report)]
    assert errors == []
    text = render_text(report, width=80)
    assert all(len(line) <= 80 for line in text.splitlines())
    n = len(report["cudagraphs"]["findings"])
    if n:
        assert f"CUDA GRAPHS  {n} finding" in text
        assert f"{n} CUDA-graph finding" in text.splitlines()[2]
    ui = findings_from_report(report)
    assert sum(f.kind == "cudagraphs" for f in ui) == n
    # a compiled optimizer's recompiles are its storm's cause: said in the storm, not twice
    for o in report["compiled_optimizer"]:
        [storm] = [f for f in ui if f.kind == "storm" and f.rank == o["rank"] and o["function"] in f.title]
        assert ("cause", f"{o['headline']} ({o['explanation']})") in storm.detail


def test_export_has_the_cudagraphs_table_and_reads_it_back(tmp_path: Path) -> None:
    from traceview.output.export import write_export

    src = tmp_path / "in"
    shutil.copytree(GPU / "ro_rerecord", src)
    write_export(traceview.load(src, jobs=1), tmp_path / "out")
    df = pl.read_parquet(tmp_path / "out" / "cudagraphs.parquet")
    assert df.filter(pl.col("event") == "recording").height == 6
    back = traceview.read_export(str(tmp_path / "out"))
    assert [f["count"] for f in findings(back, "rerecords")] == [5]
