"""parsers.facts: the same fact tables from TORCH_TRACE alone and from TORCH_LOGS alone."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import polars as pl
import pytest

from parsers.compiles import build_compiles
from parsers.facts import (
    SCHEMAS,
    facts_from_text,
    facts_from_trace,
    recompiles_from_trace,
)
from parsers.textlog import read_text_log
from parsers.torch_trace import read_trace
from tests.conftest import FIXTURES, GPU, skip_without_shared

# TORCH_LOGS of each gpu/ scenario, from shared/traces/README.md.
GPU_TORCH_LOGS = {
    "train_dynamic": "recompiles,graph_breaks,guards,aot_graphs,output_code,annotation",
    "reduce_overhead": "recompiles,graph_breaks,cudagraphs,perf_hints",
    "max_autotune": "recompiles,autotuning,output_code",
    "big": "recompiles,graph_breaks",
}
FIXTURE_SCENARIOS = ["simple", "recompiles", "graph_breaks", "backend_error", "training",
                     "multirank"]


def scenario_dir(name: str) -> Path:
    d = GPU / name if name in GPU_TORCH_LOGS else FIXTURES / name
    if not (d / "torch_logs.txt").exists() or not list((d / "trace").glob("*.log")):
        skip_without_shared()
        pytest.fail(f"{d}: the scenario {name} has no trace or torch_logs.txt")
    return d


def torch_logs_of(name: str) -> set[str]:
    if name in GPU_TORCH_LOGS:
        return set(GPU_TORCH_LOGS[name].split(","))
    prov = (scenario_dir(name) / "PROVENANCE.md").read_text()
    m = re.search(r"^\| TORCH_LOGS \| `([^`]*)` \|", prov, re.M)
    assert m, "PROVENANCE.md names TORCH_LOGS"
    return set(m.group(1).split(","))


@cache
def events(name: str) -> pl.DataFrame:
    return read_trace(sorted((scenario_dir(name) / "trace").glob("*.log"))).events


@cache
def trace_facts(name: str) -> dict[str, pl.DataFrame]:
    return facts_from_trace(events(name))


@cache
def text_facts(name: str) -> dict[str, pl.DataFrame]:
    return facts_from_text(read_text_log(scenario_dir(name) / "torch_logs.txt"))


def keyset(df: pl.DataFrame, cols: list[str]) -> list[tuple]:
    return sorted(df.select(cols).rows(), key=repr)


@pytest.mark.parametrize("name", [*GPU_TORCH_LOGS, *FIXTURE_SCENARIOS])
def test_text_alone_equals_trace_alone(name):
    """What the text log says about recompiles, graph breaks, guards and the recompile limit
    equals what the trace says, for the artifacts TORCH_LOGS was configured with."""
    logs = torch_logs_of(name)
    tr, tx = trace_facts(name), text_facts(name)
    compared = 0
    if logs & {"recompiles", "recompiles_verbose"}:
        cols = ["rank", "compile_id", "function", "filename", "line", "failed_against", "guard",
                "kind", "guard_source", "dim", "expected", "actual", "user_line"]
        assert keyset(tx["recompiles"], cols) == keyset(tr["recompiles"], cols)
        cols = ["rank", "compile_id", "limit", "limit_name", "function", "line", "last_reason"]
        assert keyset(tx["limit_hits"], cols) == keyset(tr["limit_hits"], cols)
        compared += tr["recompiles"].height + tr["limit_hits"].height
    if "graph_breaks" in logs:
        cols = ["rank", "compile_id", "trace_id", "filename", "line", "function", "reason",
                "reason_line", "gb_id", "explanation", "hint", "frame_skipped",
                "inner_reason", "skipped_function", "skipped_line"]
        assert keyset(tx["graph_break_records"], cols) == keyset(tr["graph_break_records"], cols)
        compared += tr["graph_break_records"].height
    if "guards" in logs:
        cols = ["rank", "trace_id", "kind", "code", "guard_source", "user_code", "user_file",
                "user_line", "user_function", "depth"]
        assert keyset(tx["guards"], cols) == keyset(tr["guards"], cols)
        compared += tr["guards"].height
    else:
        assert tx["guards"].height == 0
    expected_nonempty = {"train_dynamic", "reduce_overhead", "big", "recompiles",
                         "graph_breaks", "backend_error", "simple", "training", "multirank"}
    if name in expected_nonempty:
        assert compared > 0  # the comparison is not vacuous


def test_schemas_and_sources():
    for name in ("train_dynamic", "recompiles"):
        for src, facts in (("trace", trace_facts(name)), ("text", text_facts(name))):
            for table, df in facts.items():
                assert df.schema == SCHEMAS[table], (name, table)
                assert df["source"].unique().to_list() in ([], [src])


def test_train_dynamic_findings():
    for facts in (trace_facts("train_dynamic"), text_facts("train_dynamic")):
        gb = facts["graph_break_records"].sort("compile_id")
        first = gb.row(0, named=True)
        assert (first["compile_id"], first["filename"], first["line"], first["function"]) == (
            "0/0", "/home/user/gptdemo/gpt.py", 49, "forward",
        )
        assert (first["gb_id"], first["frame_skipped"], first["reason"]) == (
            "gb0025", True, "Call to `torch._dynamo.graph_break()`",
        )
        assert (first["skipped_function"], first["skipped_line"]) == ("forward", 42)
        assert (first["inner_reason"], first["inner_gb_id"]) == ("graph break in loop", "gb7000")
        # the optimizer's step() breaks twice on purpose, at optimizer.py:80 in _use_grad
        rest = gb.filter(pl.col("compile_id") != "0/0")
        assert rest.select("compile_id", "line", "function", "frame_skipped").rows() == [
            ("2/0", 80, "_use_grad", False), ("3/0", 80, "_use_grad", False),
        ]
        [rc] = facts["recompiles"].rows(named=True)
        assert (rc["compile_id"], rc["function"], rc["filename"], rc["line"]) == (
            "1/1", "forward", "/home/user/gptdemo/gpt.py", 19,
        )
        assert (rc["failed_against"], rc["kind"], rc["guard_source"], rc["dim"],
                rc["expected"], rc["actual"]) == ("1/0", "size", "x", 1, "128", "256")
        g = facts["guards"]
        assert dict(g.group_by("trace_id").len().iter_rows()) == {
            "[1/0]": 62, "[2/0_1]": 6, "[3/0_1]": 20, "[4/0]": 550, "[1/1]": 65,
        }
    # only the text log has the duplicate-break marker; its function comes from the first one
    tx = text_facts("train_dynamic")["graph_break_records"]
    assert tx.filter(pl.col("user_stack_suppressed"))["compile_id"].to_list() == ["3/0"]


def test_other_gpu_findings():
    for facts in (trace_facts("big"), text_facts("big")):
        [rc] = facts["recompiles"].rows(named=True)
        assert (rc["compile_id"], rc["function"], rc["line"], rc["guard"]) == (
            "1/1", "forward", 19, "tensor 'x' size mismatch at index 1. expected 256, actual 320",
        )
        [gb] = facts["graph_break_records"].rows(named=True)
        assert (gb["line"], gb["frame_skipped"], gb["skipped_line"]) == (49, True, 42)
    for facts in (trace_facts("reduce_overhead"), text_facts("reduce_overhead")):
        [rc] = facts["recompiles"].rows(named=True)
        assert (rc["compile_id"], rc["function"], rc["line"], rc["guard_source"], rc["dim"],
                rc["expected"], rc["actual"]) == ("0/1", "forward", 42, "idx", 1, "64", "128")
        assert facts["graph_break_records"].height == 0
    assert trace_facts("max_autotune")["recompiles"].height == 0
    assert text_facts("max_autotune")["recompiles"].height == 0


def test_recompile_storm_and_limit():
    for facts in (trace_facts("recompiles"), text_facts("recompiles")):
        rc = facts["recompiles"]
        storm = rc.filter(pl.col("function") == "shape_storm")
        # 0/k failed against each of its k cache entries, all on dim 1 of x
        per = dict(storm.group_by("compile_id").len().iter_rows())
        assert per == {f"0/{k}": k for k in range(1, 9)}
        assert storm["kind"].unique().to_list() == ["size"]
        assert storm["dim"].unique().to_list() == [1]
        assert set(storm["line"].to_list()) == {12}
        last = storm.filter((pl.col("compile_id") == "0/8") & (pl.col("failed_against") == "0/7"))
        assert (last["expected"][0], last["actual"][0]) == ("9", "10")
        [hit] = facts["limit_hits"].rows(named=True)
        assert (hit["compile_id"], hit["limit"], hit["limit_name"], hit["function"],
                hit["line"]) == ("0/8", 8, "recompile_limit", "shape_storm", 12)
        assert hit["last_reason"] == "0/7: tensor 'x' size mismatch at index 1. expected 9, actual 10"
        values = rc.filter(pl.col("kind") == "value").sort("compile_id")
        assert values.select("compile_id", "function", "guard", "guard_source", "expected",
                             "user_line").rows() == [
            ("1/1", "scaled", "scale == 1.0", "scale", "1.0", 17),
            ("2/1", "flagged", "causal == True", "causal", "True", 21),
        ]


def test_multirank_rows_carry_rank():
    for facts in (trace_facts("multirank"), text_facts("multirank")):
        assert sorted(facts["graph_break_records"]["rank"].to_list()) == [0, 1]
        [rc] = facts["recompiles"].rows(named=True)
        assert (rc["rank"], rc["compile_id"], rc["function"], rc["line"], rc["expected"],
                rc["actual"]) == (1, "0/1", "forward", 31, "8", "6")


def test_compiles_table_gives_the_same_functions():
    ev = read_trace(sorted((scenario_dir("recompiles") / "trace").glob("*.log")))
    compiles = build_compiles(ev.events, ev.strings)
    a = recompiles_from_trace(ev.events, compiles)
    b = recompiles_from_trace(ev.events)
    assert a.equals(b)


def test_linenos_point_at_the_raw_lines():
    name = "train_dynamic"
    text = (scenario_dir(name) / "torch_logs.txt").read_text().split("\n")
    trace_file = sorted((scenario_dir(name) / "trace").glob("*.log"))[0]
    trace = trace_file.read_text().split("\n")
    for g in text_facts(name)["guards"].rows(named=True)[::37]:
        first = g["code"].split("\n")[0] if g["code"] else ""
        assert "[__guards] " in text[g["lineno"] - 1]
        assert f"+- {g['kind']}" in text[g["lineno"] - 1] and first in text[g["lineno"] - 1]
    for g in trace_facts(name)["guards"].rows(named=True)[::37]:
        assert g["file"] == str(trace_file)
        line = trace[g["lineno"] - 1]
        assert line.startswith("\t") and f"+- {g['kind']}" in line
    for gb in text_facts(name)["graph_break_records"].rows(named=True):
        assert "Graph break" in text[gb["lineno"] - 1]
    for gb in trace_facts(name)["graph_break_records"].rows(named=True):
        assert '"dynamo_graph_break_reason"' in trace[gb["lineno"] - 1]
    for rc in text_facts(name)["recompiles"].rows(named=True):
        assert "Recompiling function" in text[rc["lineno"] - 1]
    for a in text_facts(name)["annotations"].rows(named=True)[::50]:
        assert text[a["lineno"] - 1].endswith(f"node: {a['node']}")


def test_annotations_text_only():
    ann = text_facts("training")["annotations"]
    assert ann.height == 51
    erf = ann.filter(pl.col("seq_nr") == 23)
    assert erf.select("node", "side").rows() == [
        ("erf", "forward"), ("pow_1", "backward"), ("neg", "backward"), ("exp", "backward"),
        ("mul_2", "backward"), ("mul_3", "backward"),
    ]
    assert trace_facts("training")["annotations"].height == 0
    assert text_facts("train_dynamic")["annotations"].height == 346


def test_empty_inputs_give_empty_tables():
    empty_events = events("train_dynamic").clear()
    for table, df in facts_from_trace(empty_events).items():
        assert df.height == 0 and df.schema == SCHEMAS[table]
    empty_records = read_text_log(scenario_dir("train_dynamic") / "torch_logs.txt").records.clear()
    for table, df in facts_from_text(empty_records).items():
        assert df.height == 0 and df.schema == SCHEMAS[table]


# A real torch run made by the test itself: one recompile cause per guard kind that the
# fixtures do not plant (dtype, ndim, stride, type, id, global state, a global's value).
_KINDS_PROGRAM = '''
import torch

G = 1

def f1(t):
    return t * 2

def f2(t):
    return t * 3

@torch.compile(backend="eager")
def dtype_change(x):
    return x.sin()

@torch.compile(backend="eager")
def ndim_change(x):
    return x.sum()

@torch.compile(backend="eager")
def stride_change(x):
    return x + 1

@torch.compile(backend="eager")
def type_change(x, y):
    return x + y

@torch.compile(backend="eager")
def apply(fn, x):
    return fn(x) + 1

@torch.compile(backend="eager")
def grad_mode(x):
    return x * 3

@torch.compile(backend="eager")
def global_value(x):
    return x + G

dtype_change(torch.ones(2))
dtype_change(torch.ones(2, dtype=torch.float64))
ndim_change(torch.ones(2))
ndim_change(torch.ones(2, 2))
stride_change(torch.ones(3, 3))
stride_change(torch.ones(3, 3).t())
type_change(torch.ones(2), 1)
type_change(torch.ones(2), 1.5)
type_change(torch.ones(2), torch.ones(2))
apply(f1, torch.ones(2))
apply(f2, torch.ones(2))
grad_mode(torch.ones(2))
with torch.no_grad():
    grad_mode(torch.ones(2))
global_value(torch.ones(2))
G = 2
global_value(torch.ones(2))
'''


@pytest.fixture(scope="module")
def kinds_run(tmp_path_factory):
    import importlib.util
    import os
    import subprocess
    import sys

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    d = tmp_path_factory.mktemp("kinds")
    (d / "kinds.py").write_text(_KINDS_PROGRAM)
    env = {**os.environ, "TORCH_TRACE": str(d / "trace"), "TORCH_LOGS": "recompiles"}
    with open(d / "torch_logs.txt", "wb") as err:
        subprocess.run([sys.executable, str(d / "kinds.py")], cwd=d, env=env, stderr=err,
                       stdout=subprocess.DEVNULL, check=True, timeout=600)
    trace = facts_from_trace(read_trace(sorted((d / "trace").glob("*.log"))).events)
    text = facts_from_text(read_text_log(d / "torch_logs.txt"))
    return trace["recompiles"], text["recompiles"]


@pytest.mark.e2e
def test_every_guard_kind_from_a_real_run(kinds_run):
    trace, text = kinds_run
    cols = ["compile_id", "function", "line", "failed_against", "kind", "guard_source", "dim",
            "expected", "actual", "user_line"]
    assert keyset(trace, cols) == keyset(text, cols)
    got = {(r["function"], r["failed_against"]): r for r in text.rows(named=True)}
    want = {
        ("dtype_change", "0/0"): ("dtype", "x", None, "Float", "Double"),
        ("ndim_change", "1/0"): ("ndim", "x", None, "1", "2"),
        ("stride_change", "2/0"): ("stride", "x", 0, "3", "1"),
        ("type_change", "3/0"): ("value", "y", None, "1", None),  # compiled 3/1 (y=1.5)
        ("type_change", "3/1"): ("type", "y", None, "float", None),  # compiled 3/2 (tensor)
        ("apply", "4/0"): ("id", "fn.__code__", None, None, None),
        ("grad_mode", "5/0"): ("global_state", "grad_mode", None, None, None),
        ("global_value", "6/0"): ("value", "G['G']", None, "1", None),
    }
    assert {k: (r["kind"], r["guard_source"], r["dim"], r["expected"], r["actual"])
            for k, r in got.items()} == want
    # 3/2 failed against both cache entries, the newest first
    assert text.filter(pl.col("compile_id") == "3/2")["failed_against"].to_list() == ["3/1", "3/0"]
    assert got[("global_value", "6/0")]["guard"] == "G['G'] == 1"
    assert got[("global_value", "6/0")]["user_line"] == 38
    assert got[("apply", "4/0")]["guard"].startswith("___check_obj_id(fn.__code__, ")


# ------------------------------------------------------------------- unbacked symbols
def test_unbacked_symbols_table_from_trace_and_text() -> None:
    """`create_unbacked_symbol` (trace) and `create_unbacked_symint` (text) of the MoE routing
    run with capture_dynamic_output_shape_ops=True: one row per symbol, same schema."""
    from parsers.facts import (
        UNBACKED_SYMBOLS_SCHEMA,
        unbacked_symbols_from_text,
        unbacked_symbols_from_trace,
    )

    d = FIXTURES / "corpus" / "moe_nonzero_unbacked"
    trace = unbacked_symbols_from_trace(read_trace(sorted((d / "trace").glob("*.log*"))).events)
    text = unbacked_symbols_from_text(read_text_log(d / "torch_logs.txt"))
    for df, src in ((trace, "trace"), (text, "text")):
        assert df.schema == UNBACKED_SYMBOLS_SCHEMA and df["source"].unique().to_list() == [src]
        assert df.height == 15 and df["op"].unique().to_list() == ["torch.nonzero"]
        assert df.filter(pl.col("compile_id") == "1/0")["symbol"].to_list() == [f"u{i}" for i in range(12)]
        at = df.filter(pl.col("user_line").is_not_null())
        assert at.select("compile_id", "symbol", "user_line", "user_function").rows() == [
            ("0/0", "u0", 24, "route"),
            *[("1/0", f"u{i}", 30, "torch_dynamo_resume_in_route_at_25") for i in range(4)],
        ]
        assert at["user_code"].to_list() == ["active = torch.nonzero(scores.amax(-1) > 0).squeeze(-1)"] + [
            "idx = torch.nonzero(choice == e).squeeze(-1)"
        ] * 4
        assert set(df["vr"]) == {"[-int_oo, int_oo]"} and set(df["occurrence"]) == {1}
    # the trace's backend symbols carry the frame's first line as their user_stack (u4-u7 of
    # 1/0 say route:25, where the resume function starts): traceview gives them none
    assert trace["created_by"].value_counts(sort=True).rows() == [("backend", 10), ("dynamo", 5)]
    assert trace.filter(pl.col("created_by") == "backend")["user_line"].null_count() == 10
    assert trace["node_id"].null_count() == 0 and text["node_id"].null_count() == 15


def test_runtime_asserts_of_the_dynamo_graphs() -> None:
    """The runtime asserts of the real Dynamo graphs of the MoE run, each once, in order."""
    from parsers.facts import runtime_asserts

    d = FIXTURES / "corpus" / "moe_nonzero_unbacked"
    ev = read_trace(sorted((d / "trace").glob("*.log*"))).events
    graphs = ev.filter(pl.col("kind") == "dynamo_output_graph").sort("lineno")
    assert [runtime_asserts(p) for p in graphs["payload"]] == [
        ["u0 >= 0", "u0 <= 16"],
        ["u0 >= 0", "u1 >= 0", "u2 >= 0", "u3 >= 0"],
    ]
    assert runtime_asserts("") == []
