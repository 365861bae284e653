"""`traceview diff`: pairs of real torch 2.13 runs (fixtures/diff, made by
fixtures/make_diff_fixtures.py: the same program before and after a one-line change, a cold and
a warm cache, a rerun) and one rank against another (fixtures/corpus/multirank4). Each diff must
state exactly the planted change and nothing else."""

from __future__ import annotations

import json
from functools import cache

import jsonschema
import orjson
import polars as pl
import pytest

import traceview
from tests.conftest import FIXTURES, GPU, PEER, ROOT, needs_shared
from traceview.analyze.diff import SECTIONS, Noise, file_tail, guard_key, kernel_key
from traceview.analyze.failures import failures
from traceview.analyze.storms import recompile_storms
from traceview.cli import main
from traceview.errors import UserError
from traceview.versions import DIFF_SCHEMA_VERSION
from traceview.workflow.diff import build_diff, gate, parse_fail_on, render_diff

PAIRS = FIXTURES / "diff"
MULTIRANK = FIXTURES / "corpus" / "multirank4" / "trace"


@cache
def run(name: str) -> traceview.Trace:
    path = MULTIRANK if name == "multirank4" else PAIRS / name / "trace"
    return traceview.load(path)


def diff(a: str, b: str, **kw: object) -> dict:
    return build_diff(run(a), run(b), **kw)


def changed_sections(d: dict) -> set[str]:
    return {s for s in SECTIONS if d[s]}


def test_graph_break_added() -> None:
    d = diff("graph_break/a", "graph_break/b")
    # the break cut the graph: both runs missed (fresh caches), B's key's graph lost sum (cache_keys)
    assert changed_sections(d) == {"functions", "graph_breaks", "graphs", "guards", "kernels", "cache", "cache_keys"}
    assert [(f["change"], f["function"], f["file"], f["line_b"], f["compiles_a"], f["compiles_b"]) for f in d["functions"]] == [
        ("new", "torch_dynamo_resume_in_step_at_7", "train.py", 7, 0, 1)
    ]
    assert [(g["change"], g["reason"], g["gb_id"], g["function"], g["file"], g["line"]) for g in d["graph_breaks"]] == [
        ("new", "Call to `torch._dynamo.graph_break()`", "gb0025", "step", "train.py", 7)
    ]
    # the graph of `step` now ends before the sum: its op and its share of the fused kernel left
    [g] = d["graphs"]
    assert (g["function"], g["compile_id_a"], g["compile_id_b"], g["ops_added"], g["ops_removed"]) == (
        "step", "0/0", "0/0", {}, {"sum": 1}
    )
    [k] = d["kernels"]
    assert (k["kernels_added"], k["kernels_removed"]) == ({"cpp_fused_mul_relu_sin": 1}, {"cpp_fused_mul_relu_sin_sum": 1})
    # calling torch._dynamo.graph_break guards on the module and the function (ids blanked)
    [gd] = d["guards"]
    assert gd["guards_removed"] == {}
    assert sorted(gd["guards_added"]) == [
        "ID_MATCH: ___check_obj_id(G['torch']._dynamo, #), type=<class 'module'>",
        "ID_MATCH: ___check_obj_id(G['torch']._dynamo.graph_break.__code__, #), type=<class 'code'>",
    ]
    assert [(c["counter"], c["a"], c["b"]) for c in d["cache"]] == [("fx_graph_misses", 1, 2), ("aot_autograd_misses", 1, 2)]
    assert d["recompile_causes"] == d["failures"] == d["frames_eager"] == []


def test_graph_break_fixed_is_the_mirror() -> None:
    d = diff("graph_break/b", "graph_break/a")
    assert [(g["change"], g["file"], g["line"]) for g in d["graph_breaks"]] == [("fixed", "train.py", 7)]
    assert [(f["change"], f["function"]) for f in d["functions"]] == [("gone", "torch_dynamo_resume_in_step_at_7")]
    assert d["graphs"][0]["ops_added"] == {"sum": 1}


def test_graph_break_moved(capsys: pytest.CaptureFixture[str]) -> None:
    d = diff("break_moved/a", "break_moved/b")
    assert changed_sections(d) == {"functions", "graph_breaks", "graphs", "guards"}
    assert [(g["change"], g["reason"], g["file"], g["line_a"], g["line"]) for g in d["graph_breaks"]] == [
        ("moved", "Call to `torch._dynamo.graph_break()`", "train.py", 7, 6)
    ]
    # the resume function is named after the break's line: matched as the same code object, moved
    assert [(f["change"], f["function"], f["line_a"], f["line_b"], f["compiles_a"], f["compiles_b"]) for f in d["functions"]] == [
        ("moved", "torch_dynamo_resume_in_step_at_6", 7, 6, 1, 1)
    ]
    # sin and mul went from the graph before the break to the resume function's graph
    assert [(g["function"], g["ops_added"], g["ops_removed"]) for g in d["graphs"]] == [
        ("step", {}, {"operator.mul": 1, "sin": 1}),
        ("torch_dynamo_resume_in_step_at_6", {"operator.mul": 1, "sin": 1}, {}),
    ]
    a, b = PAIRS / "break_moved" / "a" / "trace", PAIRS / "break_moved" / "b" / "trace"
    assert main(["diff", str(a), str(b), "--no-cache", "--fail-on", "new-graph-breaks,new-recompiles,new-failures"]) == 0
    assert capsys.readouterr().err == ""


def test_recompile_storm_fixed() -> None:
    d = diff("recompile_fix/a", "recompile_fix/b")
    assert changed_sections(d) == {"functions", "recompile_causes", "guards"}
    assert [(f["change"], f["function"], f["compiles_a"], f["compiles_b"]) for f in d["functions"]] == [
        ("fewer", "scale", 5, 1)
    ]
    assert [(c["change"], c["kind"], c["source"], c["dim"], c["count_a"], c["count_b"]) for c in d["recompile_causes"]] == [
        ("gone", "size", "x", 0, 4, 0)
    ]
    assert d["recompile_causes"][0]["text_a"] == "dimension 0 of x varies (seen: 2, 3, 4, 5, 6)"
    # dynamic=True: the size guard of the first compile became a symbolic bound
    [g] = d["guards"]
    assert "LAMBDA_GUARD: 2 <= L['x'].size()[0]" in g["guards_added"]
    assert any("size=[2]" in x for x in g["guards_removed"])


def test_new_recompiles_fail_the_gate(capsys: pytest.CaptureFixture[str]) -> None:
    a, b = PAIRS / "recompile_fix" / "b" / "trace", PAIRS / "recompile_fix" / "a" / "trace"
    rc = main(["diff", str(a), str(b), "--no-cache", "--fail-on", "new-graph-breaks,new-recompiles,new-failures"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 1
    assert err == [
        "traceview: fail-on new-recompiles: 1 function(s) compile more often, 1 new recompile cause(s), "
        "first: scale (train.py:4)"
    ]


def test_new_failure_and_its_gate(capsys: pytest.CaptureFixture[str]) -> None:
    d = diff("fullgraph/a", "fullgraph/b")
    assert changed_sections(d) == {"functions", "failures", "cache"}
    assert [(f["change"], f["function"], f["category"], f["reason"]) for f in d["failures"]] == [
        ("new", "step", "graph_break", "Call to `torch._dynamo.graph_break()`")
    ]
    assert [(f["change"], f["function"]) for f in d["functions"]] == [("gone", "torch_dynamo_resume_in_step_at_7")]
    assert [f["change"] for f in diff("fullgraph/b", "fullgraph/a")["failures"]] == ["fixed"]
    a, b = PAIRS / "fullgraph" / "a" / "trace", PAIRS / "fullgraph" / "b" / "trace"
    assert main(["diff", str(a), str(b), "--no-cache", "--fail-on", "new-failures,new-graph-breaks"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "traceview: fail-on new-failures: 1 new failure(s), first: step (train.py:7) Call to `torch._dynamo.graph_break()`"
    ]


def test_new_graph_break_gate(capsys: pytest.CaptureFixture[str]) -> None:
    a, b = PAIRS / "graph_break" / "a" / "trace", PAIRS / "graph_break" / "b" / "trace"
    assert main(["diff", str(a), str(b), "--no-cache", "--fail-on", "new-graph-breaks,new-recompiles,new-failures"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "traceview: fail-on new-graph-breaks: 1 new graph break site(s), first: train.py:7 "
        "Call to `torch._dynamo.graph_break()`"
    ]


def test_warm_cache_changes_only_the_cache() -> None:
    d = diff("cache/a", "cache/b")
    assert changed_sections(d) == {"cache"}
    assert [(c["counter"], c["a"], c["b"]) for c in d["cache"]] == [
        ("fx_graph_hits", 0, 1), ("fx_graph_misses", 1, 0), ("aot_autograd_hits", 0, 1), ("aot_autograd_misses", 1, 0)
    ]


def test_rerun_has_no_changes_beyond_time(capsys: pytest.CaptureFixture[str]) -> None:
    d = diff("rerun/a", "rerun/b")
    assert d["changes"] == 0 and changed_sections(d) == set()
    a, b = PAIRS / "rerun" / "a" / "trace", PAIRS / "rerun" / "b" / "trace"
    assert main(["diff", str(a), str(b), "--no-cache", "--fail-on", "new-graph-breaks,new-recompiles,new-failures,new-eager-frames"]) == 0
    assert capsys.readouterr().err == ""


def test_reset_between_models_is_no_change() -> None:
    """b resets Dynamo before each of two models (fixtures/diff/reset_between_models): Scale.forward
    and Shift.forward, two different functions, are then both 0/0 and 0/1 in b (frames 0 and 1
    in a). Each still compiles twice with one recompile on its own `n == 1`; each compile's
    graph and guards are its own, so nothing changed. (Keyed by compile id alone, b's 0/0 held
    both models' graphs and guards: each forward 'gained' the other's ops and guards.)"""
    d = diff("reset_between_models/a", "reset_between_models/b")
    assert changed_sections(d) == set() and d["changes"] == 0
    b = run("reset_between_models/b").compiles.sort("lineno")
    assert b.select("function", "line", "compile_id", "occurrence").rows() == [
        ("forward", 5, "0/0", 1), ("forward", 5, "0/1", 1), ("forward", 10, "0/0", 2), ("forward", 10, "0/1", 2),
    ]
    # the two code objects' recompile causes stay apart (same function name, same file, both on `n`)
    storms = recompile_storms(run("reset_between_models/b"))
    assert sorted((s["line"], s["epoch"], s["recompiles"]) for s in storms) == [(5, 1, 1), (10, 2, 1)]


@pytest.mark.parametrize("name", ["graph_break/b", "recompile_fix/a", "multirank4"])
def test_a_run_against_itself(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    d = diff(name, name)
    assert d["no_changes"] and d["compile_time"]["within_noise"] == []
    path = MULTIRANK if name == "multirank4" else PAIRS / name / "trace"
    assert main(["diff", str(path), str(path), "--no-cache", "--fail-on", "new-recompiles,compile-time:+0%"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "no changes"


def test_failures_leave_out_the_errors_the_program_survived() -> None:
    # fixtures/corpus/suppress_errors, its text log alone: suppress_errors=True turned the
    # backend failure into a WON'T CONVERT warning and the frame ran eagerly. The summary lists
    # it (traceview.analyze.failures); the diff compares the compiles' failures only
    # (caught=False), and a text log has no compile metrics: no failure to compare
    a = traceview.load(FIXTURES / "corpus" / "suppress_errors" / "torch_logs.txt")
    b = traceview.load(FIXTURES / "simple")
    assert [(f["function"], f["category"], f["source"]) for f in failures(a).to_dicts()] == [
        ("score", "backend_compiler_failure", "text"),
    ]
    assert build_diff(a, b)["failures"] == []


def test_a_printed_traceback_of_a_traced_failure_is_that_failure() -> None:
    # fixtures/backend_error: the program caught add_one's BackendCompilerFailed and printed its
    # traceback (no compile id logged before it: TORCH_LOGS without dynamo). That is the [0/0]
    # failure of the trace, not a third one: torch recorded two failed compiles
    a, b = traceview.load(FIXTURES / "backend_error"), traceview.load(FIXTURES / "simple")
    assert [(f["compile_id"], f["function"], f["category"], f["source"]) for f in failures(a).to_dicts()] == [
        ("0/0", "add_one", "backend_compiler_failure", "trace"),
        ("1/0", "checked", "user_exception", "trace"),
    ]
    assert [(f["change"], f["function"], f["category"]) for f in build_diff(a, b)["failures"]] == [
        ("fixed", "add_one", "backend_compiler_failure"),
        ("fixed", "checked", "user_exception"),
    ]


def test_rank_against_rank() -> None:
    # rank 2 was fed a smaller batch: its forward recompiled (dynamic=False); ranks 0 and 3 did not
    d = diff("multirank4", "multirank4", rank=0, against_rank=2)
    assert [(f["change"], f["function"], f["compiles_a"], f["compiles_b"]) for f in d["functions"]] == [
        ("more", "forward", 1, 2)
    ]
    assert [(c["change"], c["kind"], c["source"], c["dim"]) for c in d["recompile_causes"]] == [("new", "size", "x", 0)]
    assert (d["a"]["rank"], d["b"]["rank"]) == (0, 2)
    # ranks 0 and 3 compiled alike but for the guard on the rank argument of `report`
    d = diff("multirank4", "multirank4", rank=0, against_rank=3)
    assert changed_sections(d) == {"guards"}
    [g] = d["guards"]
    assert (g["function"], g["guards_added"], g["guards_removed"]) == (
        "report", {"EQUALS_MATCH: L['rank'] == 3": 1}, {"EQUALS_MATCH: L['rank'] == 0": 1}
    )
    # --rank alone: the same rank on both sides
    assert diff("multirank4", "multirank4", rank=2)["no_changes"]


def test_rank_divergence_fixed() -> None:
    # two gloo ranks; in a, rank 1 alone got a smaller batch once and recompiled; b fixed it
    d = diff("rank_divergence/a", "rank_divergence/b")
    assert changed_sections(d) == {"functions", "recompile_causes", "rank_divergence"}
    assert [(f["change"], f["rank"], f["function"], f["compiles_a"], f["compiles_b"]) for f in d["functions"]] == [
        ("fewer", 1, "step_fn", 2, 1)
    ]
    assert [(r["change"], r["rank"]) for r in d["rank_divergence"]] == [("gone", 1)]
    # the recompile's one cause, as every finding says it (torch logged `tensor 'x' size mismatch at index 0`)
    assert d["rank_divergence"][0]["detail"].startswith("compiles 0/1 (step_fn, recompiled because dimension 0 of x varies (seen: 8, 6))")
    assert [(r["change"], r["rank"]) for r in diff("rank_divergence/b", "rank_divergence/a")["rank_divergence"]] == [("new", 1)]
    # within run a: rank 1 against rank 0
    d = diff("rank_divergence/a", "rank_divergence/a", rank=0, against_rank=1)
    assert [(f["change"], f["rank"], f["compiles_a"], f["compiles_b"]) for f in d["functions"]] == [("more", None, 1, 2)]
    assert d["rank_divergence"] == []


def test_bad_arguments_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(MULTIRANK)
    assert main(["diff", path, path, "--no-cache", "--rank", "7"]) == 2
    assert capsys.readouterr().err.strip() == f"traceview: error: {path} has no rank 7 (it has ranks 0-3)"
    assert main(["diff", path, path, "--no-cache", "--against-rank", "1"]) == 2
    assert "--against-rank needs --rank" in capsys.readouterr().err
    assert main(["diff", path, path, "--no-cache", "--fail-on", "new-graph-breaks,slower"]) == 2
    assert capsys.readouterr().err.strip().startswith("traceview: error: --fail-on: unknown rule 'slower'")
    assert main(["diff", path, str(PAIRS / "nowhere"), "--no-cache"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    # b adds torch._dynamo.graph_break() at train.py:7: the JSON holds that change, each row in
    # the summary's names, and its compile time per phase as each side's summary has it
    a, b = PAIRS / "graph_break" / "a" / "trace", PAIRS / "graph_break" / "b" / "trace"
    assert main(["diff", str(a), str(b), "--no-cache", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["diff_schema_version"] == 1 and d["changes"] == 8 and not d["no_changes"]
    assert set(d) == {"diff_schema_version", "a", "b", *SECTIONS, "compile_time", "cache_load", "findings", "changes", "no_changes"}
    [fn] = d["functions"]
    assert (fn["change"], fn["label"], fn["compile_ids_a"], fn["compile_ids_b"]) == (
        "new", "torch_dynamo_resume_in_step_at_7 (train.py:7)", [], ["1/0"])
    [gb] = d["graph_breaks"]
    assert (gb["change"], gb["reason"], gb["gb_id"], gb["file"], gb["line"]) == (
        "new", "Call to `torch._dynamo.graph_break()`", "gb0025", "train.py", 7)
    [g] = d["graphs"]
    assert (g["label"], g["compile_id_a"], g["compile_id_b"], g["ops_added"], g["ops_removed"]) == (
        "step (train.py:4)", "0/0", "0/0", {}, {"sum": 1})
    [k] = d["kernels"]
    assert (k["kernels_added"], k["kernels_removed"]) == ({"cpp_fused_mul_relu_sin": 1}, {"cpp_fused_mul_relu_sin_sum": 1})
    # every phase, significant or not, with the seconds and nesting `summary --json` of each side says
    ct = d["compile_time"]
    rows = ct["phases"] + [r for r in ct["within_noise"] if r["what"] == "phase"]
    for side, key in (("a", "seconds_a"), ("b", "seconds_b")):
        assert main(["summary", str(a if side == "a" else b), "--no-cache", "--json"]) == 0
        summary = {r["phase"]: r for r in json.loads(capsys.readouterr().out)["compile_time"]["phases"]}
        for r in rows:
            assert r[key] == round(summary[r["phase"]]["seconds"], 3) and r["within"] == summary[r["phase"]]["within"]
    assert [r["phase"] for r in ct["phases"]] == ["aot+backend", "aot", "inductor", "codegen"]  # as they nest
    assert [r["within"] for r in ct["phases"]] == [None, "aot+backend", "aot+backend", "inductor"]


def test_torchs_wrapper_is_named_as_the_summary_names_the_module() -> None:
    # issue 44.10: two real runs of an nn.Sequential under torch.compile(model) (the corpus'
    # sequential_model and sequential_failed_compile): Dynamo compiles torch's wrapper `inner`
    # (torch/_dynamo/external_utils.py:67); the diff names it as the summary does, and marks
    # nested phases as the summary's `(of which ...)` does
    from traceview.output.report import build_report

    a = traceview.load(FIXTURES / "corpus" / "sequential_model" / "trace")
    b = traceview.load(FIXTURES / "corpus" / "sequential_failed_compile" / "trace")
    d = build_diff(a, b)
    name = "Sequential via torch.compile(model), called at sequential_failed_compile.py:25 `y = compiled(torch.randn(8, 32))`"
    [fn] = d["functions"]
    assert (fn["function"], fn["change"], fn["compiles_a"], fn["compiles_b"], fn["label"]) == ("inner", "more", 2, 3, name)
    storm = next(f for f in build_report(b)["findings"] if f["kind"] == "storm")
    assert storm["code"] == name  # the summary's own name for it
    # one row per compile: the call site of B's compile (0/1 was called at line 26)
    assert [(g["compile_id_b"], g["label"].split(", called at ")[1]) for g in d["graphs"]] == [
        ("0/0", "sequential_failed_compile.py:25 `y = compiled(torch.randn(8, 32))`"),
        ("0/1", "sequential_failed_compile.py:26 `y = compiled(torch.randn(16, 32))`")]
    assert [r["label"] for r in d["compile_time"]["functions"]] == [name]
    text = render_diff(d, width=200)
    assert "inner (" not in text and "external_utils" not in text
    assert f"  {name} compiles more often: 2 -> 3 compiles" in text
    lines = text.splitlines()
    at = lines.index("  aot+backend: 13.55s -> 202.90s")
    assert lines[at + 1 : at + 4] == [
        "    aot: 0.91s -> 24.56s (part of aot+backend)",
        "    inductor: 12.63s -> 178.34s (part of aot+backend)",
        "      codegen: 12.29s -> 175.95s (part of inductor)",
    ]



def test_exports_as_inputs_give_the_same_diff(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    # `traceview export` of each side, then `traceview diff EXPORT_A EXPORT_B`: the same JSON
    # as the diff of the logs, but for the paths (exports are read, not parsed: loading.exports_of)
    pair = PAIRS / "recompile_fix"
    for side in "ab":
        assert main(["export", str(pair / side / "trace"), "-o", str(tmp_path / side), "--no-cache"]) == 0
    capsys.readouterr()

    def diff_json(a: object, b: object) -> dict:
        assert main(["diff", str(a), str(b), "--no-cache", "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        for side in ("a", "b"):
            d[side].pop("root"), d[side].pop("name")
        return d

    logs = diff_json(pair / "a" / "trace", pair / "b" / "trace")
    exports = diff_json(tmp_path / "a", tmp_path / "b")
    assert logs["changes"] == 3 and logs["recompile_causes"][0]["change"] == "gone"  # not an empty diff
    assert exports == logs
    # mixed: an export against logs
    assert diff_json(tmp_path / "a", pair / "b" / "trace") == logs

def test_text_most_important_first() -> None:
    text = render_diff(diff("graph_break/a", "graph_break/b"), width=80)
    lines = text.splitlines()
    assert all(len(x) <= 80 for x in lines)
    order = [next(i for i, x in enumerate(lines) if x.startswith(h))
             for h in ("compiles per function:", "graph breaks:", "Dynamo graphs:", "guards:", "kernels:", "cache:", "compile time:")]
    assert order == sorted(order)
    assert "  new: train.py:7 Call to `torch._dynamo.graph_break()` [gb0025]" in lines


def test_fail_on_parsing_and_compile_time_rule() -> None:
    assert [str(r) for r in parse_fail_on("new-graph-breaks, compile-time:+20%")] == ["new-graph-breaks", "compile-time:+20%"]
    with pytest.raises(UserError):
        parse_fail_on("compile-time:20s")
    with pytest.raises(UserError):
        parse_fail_on("new-failures:3")
    # the compile-time rule on the real totals of two runs: fewer seconds never fail it
    d = diff("cache/a", "cache/b")
    assert d["compile_time"]["total_b_s"] < d["compile_time"]["total_a_s"]
    assert gate(d, parse_fail_on("compile-time:+0%")) == []
    back = diff("cache/b", "cache/a")
    [line] = gate(back, parse_fail_on("compile-time:+20%"))
    assert line.startswith("compile-time:+20%: compile time ")


def test_helpers() -> None:
    assert file_tail("/home/u/proj/train.py") == file_tail("/ci/checkout/train.py") == "train.py"
    assert file_tail("/usr/lib/python3/site-packages/torch/nn/modules/module.py") == "torch/nn/modules/module.py"
    kernels = pl.DataFrame({"name": ["cpp_fused_mul_relu_sin_3", "extern_kernels.mm"], "kind": ["cpp", "extern"]})
    assert kernels.select(kernel_key(pl.col("name"), pl.col("kind")))["name"].to_list() == [
        "cpp_fused_mul_relu_sin", "extern_kernels.mm"
    ]
    guards = pl.DataFrame({
        "kind": ["ID_MATCH", "TENSOR_MATCH", "NO_TENSOR_ALIASING"],
        "code": ["___check_obj_id(L['m'], 140234577)  # y = m(x)  # a/train.py:3 in f", "check_tensor(L['x'], device=1)", None],
    })
    assert guards.select(guard_key(pl.col("kind"), pl.col("code"), blank_device=True))["kind"].to_list() == [
        "ID_MATCH: ___check_obj_id(L['m'], #)", "TENSOR_MATCH: check_tensor(L['x'], device=#)", "NO_TENSOR_ALIASING"
    ]
    n = Noise()
    assert not n.significant(10.0, 10.9)  # 9%
    assert not n.significant(1.0, 1.15)  # 15% but 0.15 s
    assert n.significant(1.0, 1.3)
    assert Noise(pct=50).significant(1.0, 1.3) is False


def test_pgo_warm_start() -> None:
    # the corpus's PGO situation: the first run wrote a profile (x's dimension 0 dynamic), the
    # second read it and compiled dynamic from the start: one compile instead of two
    first = traceview.load(FIXTURES / "corpus" / "pgo_warm_start" / "first_run" / "trace")
    d = build_diff(first, traceview.load(FIXTURES / "corpus" / "pgo_warm_start" / "trace"))
    assert [(r["artifact"], r["a"], r["b"]) for r in d["pgo"]] == [
        ("get_local_code_state", 0, 1), ("put_local_code_state", 2, 0)
    ]
    assert [(f["change"], f["function"], f["compiles_a"], f["compiles_b"]) for f in d["functions"]] == [
        ("fewer", "project", 2, 1)
    ]
    assert [(c["change"], c["kind"], c["source"], c["dim"]) for c in d["recompile_causes"]] == [("gone", "size", "x", 0)]


@needs_shared
def test_autotuning_choices() -> None:
    # real GPU runs (torch 2.11): max-autotune tuned two addmm templates; reduce-overhead none
    d = build_diff(traceview.load(GPU / "max_autotune"), traceview.load(GPU / "reduce_overhead"))
    assert [(r["change"], r["op"], r["shape"], r["best_a"], r["choices_a"]) for r in d["autotuning"]] == [
        ("gone", "addmm", "512x4096, 512x1024, 1024x4096", "bias_addmm", 21),
        ("gone", "addmm", "512x1024, 512x4096, 4096x1024", "bias_addmm", 21),
    ]
    assert build_diff(traceview.load(GPU / "max_autotune"), traceview.load(GPU / "max_autotune"))["no_changes"]


@needs_shared
def test_ranks_of_a_real_multi_gpu_run() -> None:
    # tlparse's multi_rank_runtime (real, 8 GPUs): ranks 0 and 1 compiled alike; each guards on
    # its own device index, which is not a change between ranks
    runtime = traceview.load(PEER / "multi_rank_runtime")
    assert build_diff(runtime, runtime, rank=0, against_rank=1)["no_changes"]
    d = build_diff(runtime, runtime, rank=0, against_rank=5)
    assert [(f["change"], f["function"], f["compiles_a"], f["compiles_b"]) for f in d["functions"]] == [
        ("fewer", "inner", 4, 2)
    ]


SCHEMA = json.loads((ROOT / "traceview" / "schemas" / "diff.schema.json").read_text())


@pytest.mark.parametrize("pair", ["graph_break", "break_moved", "recompile_fix", "fullgraph", "rank_divergence", "cache", "rerun"])
def test_json_validates_against_the_schema(pair: str) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["diff_schema_version"]["const"] == DIFF_SCHEMA_VERSION
    validator = jsonschema.Draft202012Validator(SCHEMA)
    diffs = [diff(f"{pair}/a", f"{pair}/b"), diff(f"{pair}/b", f"{pair}/a")]
    if pair == "rerun":
        diffs += [diff("multirank4", "multirank4", rank=0, against_rank=2), diff("multirank4", "multirank4")]
    for d in diffs:
        printed = json.loads(orjson.dumps(d))
        assert [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(printed)] == []


def _cut(src, dst, lines: int) -> None:
    """A hand-cut copy of a real log: its first `lines` lines, as a killed job's log ends."""
    import gzip

    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt", encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
        for i, line in enumerate(f):
            if i >= lines:
                break
            out.write(line)


@needs_shared
def test_a_compile_unfinished_in_one_run_comes_first(tmp_path) -> None:
    # the real max-autotune run against its log cut after 2190 lines, inside Inductor's code_gen
    # (tests/analyze/test_unfinished.py cuts it there too)
    [src] = (GPU / "max_autotune" / "trace").glob("*.log")
    cut = tmp_path / "cut"
    cut.mkdir()
    _cut(src, cut / src.name, 2190)
    full, part = traceview.load(GPU / "max_autotune" / "trace"), traceview.load(cut)
    d = build_diff(full, part)
    [u] = d["unfinished"]
    assert u == {
        "change": "new", "unfinished_in": "b", "rank": None, "function": "inner",
        "file": "torch/_dynamo/external_utils.py", "line": 67,
        "label": "a module via torch.compile(model), called at train.py:41 `cm(x)`", "nth": 0,
        "compile_id_a": "0/0", "occurrence_a": 1, "compile_id_b": "0/0", "occurrence_b": 1,
        "phase": "inductor code_gen", "innermost_span": "Scheduler.fused_nodes", "running_s": 9.655, "behind": False,
        "other_status": "ok", "other_compile_time_s": 11.250991,
    }
    assert d["a"]["unfinished"] == []
    assert d["b"]["unfinished"] == [{
        "rank": None, "compile_id": "0/0", "occurrence": 1, "function": "inner", "file": "torch/_dynamo/external_utils.py",
        "line": 67, "label": "a module via torch.compile(model), called at train.py:41 `cm(x)`",
        "phase": "inductor code_gen", "innermost_span": "Scheduler.fused_nodes", "running_s": 9.655, "behind": False,
    }]
    # the cut compile logged no guards or kernels yet: not "all guards removed"
    assert d["guards"] == [] and d["kernels"] == [] and d["graphs"] == []
    assert changed_sections(d) == {"unfinished", "autotuning", "cache"}
    text = render_diff(d, width=200).splitlines()
    assert text[1].endswith("-> B = " + str(cut) + " (1 compiles, 1 unfinished)")
    assert text[2:4] == [
        "unfinished compiles (begun, no compilation_metrics: killed, hung or still running when the log ends):",
        "  [0/0] a module via torch.compile(model), called at train.py:41 `cm(x)`: finished in A (11.25s), "
        "unfinished in B (in inductor code_gen for 9.65s)",
    ]
    assert "compile time: 11.25s -> 0.00s (-100%) (unfinished compiles not counted: 1 in B)" in text
    # the other way round: unfinished in A, finished in B
    back = build_diff(part, full)
    assert [(r["change"], r["unfinished_in"]) for r in back["unfinished"]] == [("fixed", "a")]
    assert render_diff(back, width=200).splitlines()[3] == (
        "  [0/0] a module via torch.compile(model), called at train.py:41 `cm(x)`: finished in B (11.25s), "
        "unfinished in A (in inductor code_gen for 9.65s)"
    )
    # unfinished in both runs: no change, the header still counts it
    same = build_diff(part, part)
    assert same["no_changes"] and same["unfinished"] == [] and len(same["a"]["unfinished"]) == 1
    assert render_diff(same, width=200).splitlines()[2:] == ["no changes"]
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for x in (d, back, same):
        assert [e.message for e in validator.iter_errors(json.loads(orjson.dumps(x)))] == []


def test_a_rank_cut_inside_a_compile_the_others_finished(tmp_path) -> None:
    # fixtures/corpus/multirank4 with rank 1's log cut after 500 lines, inside its first compile
    cut = tmp_path / "cut"
    cut.mkdir()
    for f in MULTIRANK.glob("*.gz"):
        if "_rank_1_" in f.name:
            _cut(f, cut / f.name.removesuffix(".gz"), 500)
        else:
            (cut / f.name).write_bytes(f.read_bytes())
    d = build_diff(run("multirank4"), traceview.load(cut))
    [u] = d["unfinished"]
    assert (u["rank"], u["compile_id_b"], u["phase"], u["behind"], u["other_status"]) == (1, "0/0", "AOTAutograd", True, "ok")
    text = render_diff(d, width=200).splitlines()
    assert text[3] == (
        "  rank 1 [0/0] TinyNet.forward (multirank4.py:30): finished in A (3.56s), unfinished in B "
        "(in AOTAutograd for 4.74s; behind the other ranks: likely hang)"
    )
    one = build_diff(run("multirank4"), traceview.load(cut), rank=1)
    assert [(r["rank"], r["compile_id_b"]) for r in one["unfinished"]] == [(None, "0/0")]


def test_expected_findings_are_tagged_expected_in_the_diff() -> None:
    # DDP's own graph breaks in B (gpu/ddp2_buckets, torch 2.11 on 2 GPUs) against the gloo run
    # corpus/multirank4: new in B as the summary of B tags them, EXPECTED; A's own break is not
    d = build_diff(run("multirank4"), traceview.load(FIXTURES / "gpu" / "ddp2_buckets" / "trace"))
    text = render_diff(d, width=200)
    assert "  EXPECTED GRAPH BREAK: DistributedDataParallel._inside_ddp_forward (contextlib.py:105), ranks 0-1 4x" in text
    assert "  EXPECTED GRAPH BREAK: Logger.set_runtime_stats_and_log (torch/nn/parallel/distributed.py:1566), ranks 0-1 2x" in text
    assert "  GRAPH BREAK: multirank4.py:36 in report (its frame starts at line 34) [gb0059], ranks 0-3 4x" in text
