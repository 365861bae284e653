"""parsers.messages on message bodies taken from real trace payloads and text-log records."""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

import polars as pl
import pytest

from parsers.messages import (
    classify_guard,
    parse_annotation,
    parse_graph_break,
    parse_guard_tree,
    parse_recompile_reasons,
    split_graph_breaks,
)
from parsers.textlog import read_text_log
from parsers.torch_trace import read_trace
from tests.conftest import FIXTURES, GPU, program_env, skip_without_shared


def scenario_dir(name: str) -> Path:
    d = GPU / name if (GPU / name).is_dir() else FIXTURES / name
    if not (d / "torch_logs.txt").exists() or not list((d / "trace").glob("*.log")):
        skip_without_shared()
        pytest.fail(f"{d}: the scenario {name} has no trace or torch_logs.txt")
    return d


@cache
def _records(name: str) -> pl.DataFrame:
    return read_text_log(scenario_dir(name) / "torch_logs.txt").records


@cache
def _events(name: str) -> pl.DataFrame:
    return read_trace(sorted((scenario_dir(name) / "trace").glob("*.log"))).events


def tree_of(name: str, trace_id: str) -> str:
    r = _records(name).filter(
        (pl.col("trace_id") == trace_id)
        & pl.col("text").str.contains("TREE_GUARD_MANAGER:", literal=True)
    )
    assert r.height == 1, (name, trace_id)
    return r["text"][0]


def text_of(name: str, artifact: str, trace_id: str) -> str:
    r = _records(name).filter(
        (pl.col("artifact") == artifact) & (pl.col("trace_id") == trace_id)
    )
    assert r.height >= 1, (name, artifact, trace_id)
    return r["text"][0]


def payload_of(name: str, kind: str, trace_id: str, artifact: str | None = None) -> str:
    cond = (pl.col("kind") == kind) & (pl.col("trace_id") == trace_id)
    if artifact:
        cond &= pl.col("name") == artifact
    e = _events(name).filter(cond)
    assert e.height == 1, (name, kind, trace_id, e.height)
    return e["payload"][0]


# ---------------------------------------------------------------- graph breaks


def test_nested_graph_break_in_loop_train_dynamic():
    [(offset, msg)] = split_graph_breaks(text_of("train_dynamic", "graph_breaks", "[0/0]"))
    assert offset == 0
    d = parse_graph_break(msg)
    assert (d["filename"], d["line"], d["function"]) == ("/home/user/gptdemo/gpt.py", 49, "forward")
    assert d["reason"] == "Call to `torch._dynamo.graph_break()`"
    assert d["reason_line"] == (
        "Failed to handle graph break gracefully. Skipping the function and falling back to "
        "eager. Graph break encountered:"
    )
    assert d["gb_id"] == "gb0025"
    assert d["explanation"] == "User-inserted graph break. Message: None"
    assert d["hint"] == "Remove the `torch._dynamo.graph_break()` call."
    assert d["frame_skipped"] is True
    assert (d["inner_reason"], d["inner_gb_id"]) == ("graph break in loop", "gb7000")
    assert d["inner_explanation"].startswith("torch.compile detected a graph break in a for/while")
    assert (d["skipped_function"], d["skipped_filename"], d["skipped_line"]) == (
        "forward", "/home/user/gptdemo/gpt.py", 42,
    )
    assert d["user_stack_suppressed"] is False
    assert [(f["filename"].rsplit("/", 1)[-1], f["line"], f["function"]) for f in
            d["user_stack"]][::5] == [("train.py", 21, "<module>"), ("gpt.py", 49, "forward")]
    assert d["user_stack"][-1]["code"] == "torch._dynamo.graph_break()"


@pytest.mark.parametrize("trace_id", ["[0/0]", "[2/0]"])
def test_graph_break_same_from_trace_and_text(trace_id):
    text = parse_graph_break(text_of("train_dynamic", "graph_breaks", trace_id))
    # the trace payload also carries the Python traceback after the message
    payload = payload_of("train_dynamic", "artifact", trace_id, "dynamo_graph_break_reason")
    assert "Traceback (most recent call last):" in payload
    assert parse_graph_break(payload) == text


def test_duplicate_graph_break_suppressed_in_text_only():
    text = parse_graph_break(text_of("train_dynamic", "graph_breaks", "[3/0]"))
    trace = parse_graph_break(
        payload_of("train_dynamic", "artifact", "[3/0]", "dynamo_graph_break_reason")
    )
    optimizer = "/opt/torch/.venv/lib/python3.12/site-packages/torch/optim/optimizer.py"
    assert (text["filename"], text["line"]) == (trace["filename"], trace["line"]) == (optimizer, 80)
    assert text["user_stack_suppressed"] is True and trace["user_stack_suppressed"] is False
    assert text["function"] is None and text["user_stack"] == []
    assert trace["function"] == "_use_grad"
    for k in ("reason", "reason_line", "gb_id", "explanation", "hint", "frame_skipped"):
        assert text[k] == trace[k], k
    assert text["reason_line"].startswith("Encountered graph break when attempting to trace "
                                          "CALL_FUNCTION_EX")


def test_graph_break_kinds_torch_213():
    got = {}
    for tid in ("[0/0]", "[2/0]", "[4/0]", "[6/0]"):
        d = parse_graph_break(text_of("graph_breaks", "graph_breaks", tid))
        got[tid] = (d["line"], d["function"], d["reason"], d["gb_id"], d["frame_skipped"])
    assert got == {
        "[0/0]": (16, "print_inside", "Failed to trace builtin operator", "gb0059", False),
        "[2/0]": (21, "data_dependent", "Data-dependent branching", "gb0170", False),
        "[4/0]": (
            27, "item_inside",
            "Unsupported Tensor.item() call with capture_scalar_outputs=False", "gb0124", False,
        ),
        "[6/0]": (48, "forward", "Call to `torch._dynamo.graph_break()`", "gb0025", True),
    }
    dd = parse_graph_break(text_of("graph_breaks", "graph_breaks", "[2/0]"))
    # the reason line is the title itself, and the explanation spans several lines
    assert dd["reason_line"] == "Data-dependent branching"
    assert dd["explanation"].startswith("Detected data-dependent branching")
    assert "The branch condition involves a tensor computed as follows:" in dd["explanation"]
    assert dd["hint"].count("\n") == 2
    assert dd["hint"].splitlines()[-1] == "Use `torch.cond` to express dynamic control flow."
    loop = parse_graph_break(text_of("graph_breaks", "graph_breaks", "[6/0]"))
    # the skipped frame is LoopModel.forward, defined on line 45 (its loop is line 46)
    assert (loop["inner_reason"], loop["skipped_function"], loop["skipped_line"]) == (
        "graph break in loop", "forward", 45,
    )


def test_observed_exception_falls_back_to_eager():
    d = parse_graph_break(text_of("backend_error", "graph_breaks", "[1/0]"))
    assert (d["line"], d["function"], d["reason"], d["gb_id"]) == (
        26, "checked", "Observed exception", "gb0088",
    )
    assert d["frame_skipped"] is True and d["inner_reason"] is None
    assert d["debug_context"] == (
        "raised exception ValueError('planted user error: expected 3 rows, got 4')"
    )


# ----------------------------------------------------------- recompile reasons


def test_recompile_reason_single_raw_payload_and_text():
    payload = payload_of("train_dynamic", "artifact", "[1/1]", "recompile_reasons")
    assert not payload.startswith("[")  # one reason: raw text although encoding says json
    [p] = parse_recompile_reasons(payload)
    [t] = parse_recompile_reasons(text_of("train_dynamic", "recompiles", "[1/1]"))
    assert (t["function"], t["filename"], t["line"]) == ("forward", "/home/user/gptdemo/gpt.py", 19)
    assert p["function"] is None  # the trace payload does not name the function
    for row in (p, t):
        assert row["failed_against"] == "1/0"
        assert row["guard"] == "tensor 'x' size mismatch at index 1. expected 128, actual 256"
        assert (row["kind"], row["guard_source"], row["dim"], row["expected"], row["actual"]) == (
            "size", "x", 1, "128", "256",
        )


def test_recompile_reasons_json_list_and_verbose_text():
    payload = payload_of("recompiles", "artifact", "[0/3]", "recompile_reasons")
    assert payload.startswith("[\n")  # two or more reasons: a JSON list
    p = parse_recompile_reasons(payload)
    t = parse_recompile_reasons(text_of("recompiles", "recompiles_verbose", "[0/3]"))
    keys = ("reason_index", "failed_against", "guard", "kind", "guard_source", "dim",
            "expected", "actual")
    assert [tuple(r[k] for k in keys) for r in p] == [tuple(r[k] for k in keys) for r in t] == [
        (0, "0/2", "tensor 'x' size mismatch at index 1. expected 4, actual 5", "size", "x", 1,
         "4", "5"),
        (1, "0/1", "tensor 'x' size mismatch at index 1. expected 3, actual 5", "size", "x", 1,
         "3", "5"),
        (2, "0/0", "tensor 'x' size mismatch at index 1. expected 2, actual 5", "size", "x", 1,
         "2", "5"),
    ]
    assert {(r["function"], r["line"]) for r in t} == {("shape_storm", 12)}


def test_value_guard_with_user_stack():
    [p] = parse_recompile_reasons(payload_of("recompiles", "artifact", "[1/1]",
                                             "recompile_reasons"))
    [t] = parse_recompile_reasons(text_of("recompiles", "recompiles_verbose", "[1/1]"))
    for row in (p, t):
        assert (row["failed_against"], row["guard"], row["kind"]) == ("1/0", "scale == 1.0",
                                                                      "value")
        assert (row["guard_source"], row["expected"], row["actual"]) == ("scale", "1.0", None)
        assert row["user_file"].endswith("fixtures/programs/recompiles.py")
        assert (row["user_line"], row["user_function"], row["user_code"]) == (
            17, "scaled", "return x * scale + 1.0",
        )
    [c] = parse_recompile_reasons(text_of("recompiles", "recompiles_verbose", "[2/1]"))
    assert (c["guard"], c["kind"], c["guard_source"], c["expected"], c["user_line"]) == (
        "causal == True", "value", "causal", "True", 21,
    )


def test_requires_grad_and_multirank_reasons():
    [g] = parse_recompile_reasons(text_of("graph_breaks", "recompiles", "[7/1]"))
    assert (g["kind"], g["guard_source"], g["expected"], g["actual"]) == (
        "requires_grad", "x", "0", None,
    )
    [m] = parse_recompile_reasons(text_of("multirank", "recompiles", "[0/1]"))
    assert (m["function"], m["line"], m["failed_against"], m["kind"], m["expected"],
            m["actual"]) == ("forward", 31, "0/0", "size", "8", "6")


# A real run whose recompile reasons put `; ` where it is not a separator: inside a string
# literal with an escaped quote, and after the user source of a multi-line condition (its last
# line closes a bracket that opened on the line before).
_SPLIT_PROGRAM = """\
import torch


@torch.compile(backend="eager", dynamic=False)
def words(x, s, t):
    return x + len(s) + len(t)


@torch.compile(backend="eager")
def ranges(x, z):
    if (x.dim() == 1 and
            x.size(0) > 8):
        x = x + 1
    if z.size(0) > 8:
        z = z + 1
    return x, z


words(torch.ones(2), "it's \\"q\\"; y)", "a")
words(torch.ones(2), "other", "b")
a, c = torch.ones(20), torch.ones(30)
torch._dynamo.mark_dynamic(a, 0)
torch._dynamo.mark_dynamic(c, 0)
ranges(a, c)
ranges(torch.ones(3), torch.ones(4))
"""


@pytest.fixture(scope="module")
def split_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], list[dict], str]:
    d = tmp_path_factory.mktemp("split")
    (d / "split.py").write_text(_SPLIT_PROGRAM)
    env = {**program_env(), "TORCH_TRACE": str(d / "trace"), "TORCH_LOGS": "recompiles_verbose"}
    with open(d / "torch_logs.txt", "wb") as err:
        subprocess.run([sys.executable, str(d / "split.py")], cwd=d, env=env, stderr=err,
                       stdout=subprocess.DEVNULL, check=True, timeout=600)
    ev = read_trace(sorted((d / "trace").glob("*.log"))).events
    payloads = ev.filter(pl.col("name") == "recompile_reasons").sort("lineno")["payload"]
    records = read_text_log(d / "torch_logs.txt").records
    texts = records.filter(pl.col("artifact") == "recompiles_verbose").sort("lineno")["text"]
    trace = [r for t in payloads for r in parse_recompile_reasons(t)]
    text = [r for t in texts for r in parse_recompile_reasons(t)]
    return trace, text, (d / "torch_logs.txt").read_text()


@pytest.mark.e2e
def test_recompile_reason_guards_split_where_torch_joined_them(split_run):
    trace, text, log = split_run
    # what torch printed: the string guard alone; the two range guards joined by `; `
    assert """s == 'it\\'s "q"; y)'  """ in log
    assert "# x.size(0) > 8):  # " in log and "evaluate_expr); 9 <= z.size()[0]  # " in log
    want = [
        ("0/0", """s == 'it\\'s "q"; y)'""", "value", "s", """'it\\'s "q"; y)'""", 6),
        ("1/0", "9 <= x.size()[0]", "size", "x", None, 12),
        ("1/0", "9 <= z.size()[0]", "size", "z", None, 14),
    ]
    for rows in (text, trace):
        assert [(r["failed_against"], r["guard"].split("  # ")[0], r["kind"], r["guard_source"],
                 r["expected"], r["user_line"]) for r in rows] == want
    # a range guard's comment ends with torch's own frame, `(_dynamo/...:N in evaluate_expr)`:
    # the user's line before it is the guard's source, the frame is not kept
    for rows in (text, trace):
        assert [(r["guard"], r["user_code"], r["user_function"]) for r in rows[1:]] == [
            ("9 <= x.size()[0]", "x.size(0) > 8):", "ranges"),
            ("9 <= z.size()[0]", "if z.size(0) > 8:", "ranges"),
        ]


def test_classify_guard_codes_of_real_guard_trees():
    """Every guard in the real guard trees classifies consistently with its tree kind."""
    expect = {
        "TYPE_MATCH": "type", "ID_MATCH": "id", "GLOBAL_STATE": "global_state",
        "TORCH_FUNCTION_MODE_STACK": "global_state", "EQUALS_MATCH": "value",
        "NONE_MATCH": "value", "TRUE_MATCH": "value", "FALSE_MATCH": "value",
        "LENGTH_CHECK": "value", "DEFAULT_DEVICE": "value", "DICT_CONTAINS": "other",
        "DIMENSION_DYNAMIC_MARKING_GUARD": "other", "NO_HASATTR": "other",
        "TENSOR_MATCH": "other",
    }
    seen = set()
    for name in ("train_dynamic", "simple", "recompiles", "graph_breaks", "training"):
        for text in _events(name).filter(pl.col("kind") == "dynamo_cpp_guards_str")["payload"]:
            for g in parse_guard_tree(text):
                if g["kind"] in expect and g["code"]:
                    c = classify_guard(g["code"])
                    assert c["kind"] == expect[g["kind"]], (g["kind"], g["code"])
                    seen.add(g["kind"])
                    if g["kind"] in ("TYPE_MATCH", "ID_MATCH"):
                        assert c["guard_source"], g
    assert seen >= {"TYPE_MATCH", "ID_MATCH", "GLOBAL_STATE", "EQUALS_MATCH", "LENGTH_CHECK",
                    "NONE_MATCH", "FALSE_MATCH", "TRUE_MATCH"}
    t = classify_guard("___check_type_id(L['args'], 10759232), type=<class 'tuple'>")
    assert (t["kind"], t["guard_source"], t["expected"]) == ("type", "L['args']", "tuple")
    eq = classify_guard("L['self']._modules['pos'].norm_type == 2.0")
    assert (eq["kind"], eq["guard_source"], eq["expected"]) == (
        "value", "L['self']._modules['pos'].norm_type", "2.0",
    )


# ------------------------------------------------------------------ guard tree


def test_guard_tree_train_dynamic():
    rows = parse_guard_tree(tree_of("train_dynamic", "[1/0]"))
    assert len(rows) == 62
    [t] = [r for r in rows if r["kind"] == "TENSOR_MATCH" and r["guard_source"] == "L['x']"]
    assert t["depth"] == 2
    assert t["code"].startswith("check_tensor(L['x'], Tensor, DispatchKeySet(CUDA, BackendSelect")
    assert t["code"].endswith("size=[8, 128, 256], stride=[32768, 256, 1])")
    assert (t["user_code"], t["user_file"], t["user_line"], t["user_function"]) == (
        "B, T, C = x.shape", "ome/user/gptdemo/gpt.py", 20, "forward",
    )
    lam = rows[0]
    assert (lam["kind"], lam["depth"], lam["guard_source"], lam["user_code"]) == (
        "LAMBDA_GUARD", 1, None, None,
    )
    assert (lam["user_file"], lam["user_line"]) == ("_dynamo/output_graph.py", 964)
    # a guard whose repr spans several lines (the optimizer object)
    opt = parse_guard_tree(tree_of("train_dynamic", "[2/0_1]"))
    [idm] = [r for r in opt if r["kind"] == "ID_MATCH"]
    assert idm["guard_source"] == "G['opt']" and idm["depth"] == 3
    assert idm["code"].startswith("___check_obj_id(G['opt'], 140147547502064), type=AdamW (")
    assert "\nParameter Group 0\n" in idm["code"] and idm["code"].endswith("\n)")
    assert (idm["user_code"], idm["user_line"], idm["user_function"]) == ("opt.step()", 18, "step")
    assert [r["kind"] for r in opt].count("DICT_CONTAINS") == 1
    assert opt[-1]["line_offset"] == idm["line_offset"] + 15


@pytest.mark.parametrize("trace_id", ["[1/0]", "[2/0_1]", "[3/0_1]", "[4/0]", "[1/1]"])
def test_guard_tree_same_from_trace_and_text(trace_id):
    text = parse_guard_tree(tree_of("train_dynamic", trace_id))
    trace = parse_guard_tree(payload_of("train_dynamic", "dynamo_cpp_guards_str", trace_id))
    assert len(trace) > 5
    assert trace == text  # same lines, both start with an empty line before the tree


def test_bare_no_tensor_aliasing_line():
    rows = parse_guard_tree(payload_of("simple", "dynamo_cpp_guards_str", "[0/0]"))
    alias = [(r["guard_source"], r["code"]) for r in rows if r["kind"] == "NO_TENSOR_ALIASING"]
    assert alias == [("L['x']", "check_no_aliasing(L['x'], L['y'])"), ("L['y']", None)]


# ------------------------------------------------------------------ annotation


def test_annotation_training_seq_nr():
    recs = _records("training").filter(pl.col("artifact") == "annotation")
    rows = parse_annotation(recs.iter_rows(named=True))
    df = pl.DataFrame(rows)
    assert df.height == 51
    assert df["compile_id"].unique().to_list() == ["0/0"]
    erf = df.filter(pl.col("seq_nr") == 23)
    assert erf.filter(pl.col("side") == "forward")["node"].to_list() == ["erf"]
    assert erf.filter(pl.col("side") == "backward")["node"].to_list() == [
        "pow_1", "neg", "exp", "mul_2", "mul_3",
    ]
    sides = dict(df.group_by("side").len().iter_rows())
    assert sides == {"forward": 17, "backward": 33, None: 1}
    assert df.filter(pl.col("node") == "tangents_1")["side"][0] == "backward"
    assert df.filter(pl.col("node") == "output")["side"][0] is None
    # lineno is the exact line of the `node:` message
    lines = (scenario_dir("training") / "torch_logs.txt").read_text().split("\n")
    for r in rows[::7]:
        assert lines[r["lineno"] - 1].endswith(f"[__annotation] node: {r['node']}")


def test_annotation_train_dynamic_gradient_accumulation():
    recs = _records("train_dynamic").filter(pl.col("artifact") == "annotation")
    df = pl.DataFrame(parse_annotation(recs.iter_rows(named=True)))
    counts = {(c, s): n for c, s, n in df.group_by("compile_id", "side").len().iter_rows()}
    assert counts == {
        ("1/0", "forward"): 72, ("1/0", "backward"): 99, ("1/0", None): 1,
        ("1/1", "forward"): 74, ("1/1", "backward"): 99, ("1/1", None): 1,
    }
    gelu = df.filter((pl.col("compile_id") == "1/0") & (pl.col("seq_nr") == 188))
    assert gelu.filter(pl.col("side") == "forward")["node"].to_list() == [
        "mul_4", "mul_5", "erf", "add_5", "mul_6",
    ]
    # is_gradient_acc nodes are backward although no grad_fn_seq_nr line names them
    acc = df.filter((pl.col("compile_id") == "1/0") & (pl.col("node") == "add_10")).row(
        0, named=True
    )
    assert (acc["seq_nr"], acc["side"]) == (193, "backward")
