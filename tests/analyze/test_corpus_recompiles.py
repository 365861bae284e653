"""Recompile causes and advice on the diagnosis corpus (issue 13 classes 4 and 5), asserted
exactly from the trace alone and from the text log alone.

Each recompile has one primary cause (the newest cache entry's first failed guard, which torch
stores as the compile's `recompile_reason`); the counts add up to torch's recompiles in
oracle.json; the advice fits where the guarded value comes from; what torch.compile does by
design is `expected`, apart from what needs action.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import traceview
from parsers.facts import user_name
from parsers.messages import parse_recompile_reasons
from traceview.analyze.storms import VARIANT_KINDS, recompile_storms, refine_kind

from ..conftest import FIXTURES

CORPUS = FIXTURES / "corpus"
SOURCES = ("trace", "torch_logs.txt")


def storms(name: str, source: str) -> list[dict[str, Any]]:
    return recompile_storms(traceview.load(CORPUS / name / source))


def only_storm(name: str, source: str, function: str) -> dict[str, Any]:
    [s] = [s for s in storms(name, source) if s["function"] == function]
    return s


def torch_recompiles(name: str, function: str) -> int:
    doc = json.loads((CORPUS / name / "oracle.json").read_text())
    [row] = [r for p in doc["processes"] for r in p["per_code"] if r["function"] == function]
    return row["recompiles"]


def _recompile_reasons(name: str) -> dict[tuple, str]:
    """(rank, function, compile id) -> the recompile_reason torch stored (convert_frame.py:
    `reasons[0]`), from oracle.json's CompilationMetrics."""
    doc = json.loads((CORPUS / name / "oracle.json").read_text())
    out = {}
    for p in doc["processes"]:
        for e in p["epochs"]:
            for m in e["compilation_metrics"]:
                if m.get("recompile_reason"):
                    out[(p["rank"], m["function"], m["compile_id"])] = m["recompile_reason"]
    return out


@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.iterdir() if (p / "oracle.json").is_file()))
def test_primary_cause_is_torchs_own_recompile_reason(name: str) -> None:
    """The primary failed guard traceview picks for each recompile (trace alone) is the one torch
    stored as that compile's recompile_reason, and each recompile is counted under one cause."""
    reasons = _recompile_reasons(name)
    t = traceview.load(CORPUS / name / "trace")
    checked = 0
    passed_over: list[tuple[str, str]] = []
    for s in recompile_storms(t):
        counted = [cid for c in s["causes"] for cid in c["compile_ids"]]
        assert len(counted) == len(set(counted)) == sum(c["count"] for c in s["causes"])
        for c in s["causes"]:
            for cid in c["compile_ids"]:
                # the compile refused at the recompile limit has no function name in its metrics
                torch_reason = reasons.get((s["rank"], s["function"], cid)) or reasons.get((s["rank"], None, cid))
                if torch_reason is None:
                    continue
                # torch's reason, classified the same way: the cause this recompile is counted under
                [g, *_] = parse_recompile_reasons(torch_reason)
                kind, src, _ = refine_kind(g["kind"], user_name(g["guard_source"]) or None, g["guard"], g["expected"])
                if (kind, src or "the input") != (c["kind"], c["source"]):
                    # torch's reason is the newest entry's, compiled for the other variant (another
                    # requires_grad / flag value): the cause is the older entry the call matches but for it
                    assert kind in VARIANT_KINDS and c["kind"] not in VARIANT_KINDS, (cid, torch_reason)
                    passed_over.append((name, cid))
                checked += 1
    # every recompile torch recorded a reason for was checked
    assert checked == len(reasons)
    assert passed_over == PASSED_OVER.get(name, [])


# the recompiles whose cause is not torch's recompile_reason (the newest entry was the other variant)
PASSED_OVER = {
    "library_llama_layers": [("library_llama_layers", "0/3")],  # is_initialized True entry 0/1: size
    "regional_requires_grad": [("regional_requires_grad", "0/2"), ("regional_requires_grad", "0/3")],
    # rank 1's 0/2: the newest entry (no grad) fails on requires_grad, the entry with grad on the size
    "rank_cause_requires_grad_first": [("rank_cause_requires_grad_first", "0/2")],
}


def causes(s: dict[str, Any]) -> list[tuple]:
    return [(c["kind"], c["source"], c["count"], c["expected"]) for c in s["causes"]]


@pytest.mark.parametrize("source", SOURCES)
def test_mixed_causes_one_primary_per_recompile(source: str) -> None:
    s = only_storm("recompile_mixed_causes", source, "blend")
    assert sum(c["count"] for c in s["causes"]) == s["recompiles"] == torch_recompiles("recompile_mixed_causes", "blend") == 3
    got = {c["kind"]: (c["count"], c["compile_id"], c["values"]) for c in s["causes"]}
    # 0/1: batch 4 -> 6; 0/2: float32 -> float64; 0/3: boost False -> True
    assert got == {"size": (1, "0/1", ["4", "6"]), "dtype": (1, "0/2", ["Float", "Double"]), "value:bool": (1, "0/3", ["False"])}
    # secondary: the dtype failures of 0/0 inside 0/2, and of 0/1 and 0/0 inside 0/3
    assert s["secondary_guards"] == 3
    assert {c["kind"]: c["secondary"] for c in s["causes"]} == {"size": 0, "dtype": 3, "value:bool": 0}
    dtype = next(c for c in s["causes"] if c["kind"] == "dtype")
    assert not dtype["expected"] and not s["expected"] and dtype["certainty"] == "certain"
    size = next(c for c in s["causes"] if c["kind"] == "size")
    # the trace's config says automatic dynamic shapes were on; this text log does not say
    assert size["expected"] is (source == "trace")


@pytest.mark.parametrize("source", SOURCES)
def test_kwargs_change_is_a_call_signature_change(source: str) -> None:
    s = only_storm("kwargs_change", source, "mix")
    assert causes(s) == [("signature", "extras", 2, True)]
    assert s["recompiles"] == torch_recompiles("kwargs_change", "mix") == 2
    [c] = s["causes"]
    assert c["values"] == ["0", "1"] and c["secondary"] == 1
    assert c["text"].startswith("call-signature change: len(extras) differs between calls (compiled for 0, 1;")
    assert "same keyword arguments every time" in c["fix"]
    assert "tensor" not in c["fix"] and "recompiles_verbose" not in c["fix"]


@pytest.mark.parametrize("source", SOURCES)
def test_many_entries_names_every_value(source: str) -> None:
    s = only_storm("recompile_many_entries", source, "reduce")
    assert causes(s) == [("value", "mode", 3, True)]
    [c] = s["causes"]
    # None too; 'max' (the newest compile's value) is only in the trace's guards of 0/3
    assert c["values"] == (["None", "'sum'", "'mean'", "'max'"] if source == "trace" else ["None", "'sum'", "'mean'"])
    assert c["secondary"] == 3
    assert "tensor" not in c["fix"]


@pytest.mark.parametrize("source", SOURCES)
def test_per_layer_int_attribute_of_a_module(source: str) -> None:
    s = only_storm("per_layer_int_attr", source, "forward")
    assert s["hit_recompile_limit"] and s["compiles"] == 9
    assert causes(s) == [("module_int", "self.layer_idx", 8, False)]
    [c] = s["causes"]
    assert c["values"] == [str(i) for i in range(8)]
    assert "compiles once per module instance" in c["text"]
    assert c["certainty"] == "likely"  # an int attribute of `self`, read as an nn.Module's
    for fix in ("torch.compile(model)", "allow_unspec_int_on_nn_module = True", "recompile_limit"):
        assert fix in c["fix"]
    assert "after one recompile" not in c["fix"] and "dynamic=False" not in c["fix"]


@pytest.mark.parametrize("source", SOURCES)
def test_train_eval_is_expected(source: str) -> None:
    s = only_storm("train_eval", source, "forward")
    assert causes(s) == [("training", "self._modules['drop'].training", 1, True)] and s["expected"]
    [c] = s["causes"]
    assert "(self.drop.training)" in c["text"] and "model.train() / model.eval()" in c["text"]
    assert c["fix"].startswith("nothing to fix: one compile per mode")


@pytest.mark.parametrize("source", SOURCES)
def test_range_guard_branch_is_expected_and_never_says_dynamic_true(source: str) -> None:
    s = only_storm("range_guard_branch", source, "head")
    assert causes(s) == [("range", "x", 1, True)] and s["expected"]
    [c] = s["causes"]
    assert "2 <= x.size()[0] <= 8" in c["text"]
    assert "torch.cond" in c["fix"] and "mark_unbacked" in c["fix"]
    assert "dynamic=True" not in c["fix"]


@pytest.mark.parametrize("source", SOURCES)
def test_recompile_that_ended_in_the_users_exception(source: str) -> None:
    s = only_storm("user_exception_recompile", source, "embed")
    assert causes(s) == [("size", "x", 1, False)] and not s["expected"]
    [c] = s["causes"]
    assert "ValueError('expected 8 features, got 5')" in c["fix"]
    assert "mark_dynamic" not in c["fix"]


@pytest.mark.parametrize(
    ("name", "function", "kind", "source_name"),
    [
        ("automatic_dynamic_once", "score", "size", "x"),
        ("float_changes_default", "sharpen", "value:float", "temperature"),
        ("int_changes", "shift_scale", "value:int", "step"),
        ("bool_flag", "attention_mask", "value:bool", "causal"),
        ("backend_match_recompile", "fused", "backend", "the input"),
        ("graph_break_item", "torch_dynamo_resume_in_rescale_at_14", "resume_value", "___stack0"),
    ],
)
@pytest.mark.parametrize("source", SOURCES)
def test_single_recompiles_by_design_are_expected(name: str, function: str, kind: str, source_name: str, source: str) -> None:
    s = only_storm(name, source, function)
    assert causes(s) == [(kind, source_name, 1, True)] and s["expected"]
    [c] = s["causes"]
    assert "dynamic=True" not in c["fix"]
    if kind in ("size", "value:float", "value:int"):
        # automatic dynamic shapes at work: the trace's config, the text's `dynamic` log
        assert c["fix"].startswith("nothing to fix: automatic dynamic")


@pytest.mark.parametrize("source", SOURCES)
def test_float_changes_under_dynamic_false_need_action(source: str) -> None:
    s = only_storm("float_changes_dynamic_false", source, "sharpen")
    assert causes(s) == [("value:float", "temperature", 3, False)] and s["secondary_guards"] == 3
    assert s["causes"][0]["values"][:3] == ["1.0", "0.5", "0.25"]
    if source == "trace":  # 2.0 is in 0/3's guards; the config says dynamic=False
        assert s["causes"][0]["values"] == ["1.0", "0.5", "0.25", "2.0"]
        assert "drop dynamic=False" in s["causes"][0]["fix"]


@pytest.mark.parametrize("source", SOURCES)
def test_optimizer_learning_rate(source: str) -> None:
    s = only_storm("optimizer_lr_scheduler", source, "step")
    assert s["hit_recompile_limit"]
    assert causes(s) == [("optimizer_lr", "self.param_groups[0]['lr']", 8, False)] and s["secondary_guards"] == 28
    fix = s["causes"][0]["fix"]
    assert "lr=torch.tensor(1e-3)" in fix and "capturable=True" in fix
    assert "after one recompile" not in fix


def test_rank_that_recompiled_from_text_alone_is_not_called_expected() -> None:
    """multirank4 compiles with dynamic=False; its text log (recompiles,graph_breaks) cannot
    say so: the one size recompile of rank 2 is not presented as expected."""
    [s] = storms("multirank4", "torch_logs.txt")
    assert (s["rank"], s["expected"]) == (2, False)
    assert "does not say whether the code compiles with dynamic=False" in s["causes"][0]["fix"]
    [t] = storms("multirank4", "trace")
    assert t["forced_dynamic_false"] and not t["expected"]


# ------------------------------------------------------------------ real GPU runs (torch 2.11)

GPU = FIXTURES / "gpu"


def gpu_storms(name: str) -> list[dict[str, Any]]:
    return recompile_storms(traceview.load(GPU / name / "trace"))


def test_gpu_compiled_optimizer_lr_read_through_as_tensor() -> None:
    """torch 2.11 logs the lr guard as `___as_tensor(self.param_groups[0]['lr']).item() == v`."""
    [s] = gpu_storms("compiled_optimizer_lr")
    assert s["hit_recompile_limit"] and s["recompiles"] == 8
    assert causes(s) == [("optimizer_lr", "self.param_groups[0]['lr']", 8, False)]
    assert s["causes"][0]["values"][0] == "0.003333333333333333"


def test_gpu_ddp_wrapper_is_torchs_own_code() -> None:
    """torch.compile(DDP(model)): Dynamo compiles torch.compile's wrapper `inner` (torch's own,
    under /opt/torch/.venv/...) around the DDP module; the finding names the module and the
    user's call, and its args[0] is the `x` of `compiled(x)`."""
    [s] = gpu_storms("ddp2")
    assert (s["rank"], s["function"]) == (1, "inner")
    code = s["code"]
    assert (code["owner"], code["wrapper"], code["label"]) == ("torch", "torch.compile(model)", "DistributedDataParallel via torch.compile(model)")
    assert code["module_class"] == "torch.nn.parallel.distributed.DistributedDataParallel"
    assert (code["call_site"]["line"], code["call_site"]["code"]) == (41, "loss = compiled(x).square().mean()")
    fix = s["causes"][0]["fix"]
    assert fix.startswith("the compiled frame is torch.compile's wrapper around your DistributedDataParallel (torch/_dynamo/external_utils.py)")
    assert "mark_dynamic(x, 0)" in fix and "DDP/compiled autograd" not in fix


def test_gpu_llama_static_cache_kwargs_signature() -> None:
    [s] = gpu_storms("hf_llama_generate_static")
    assert [(c["kind"], c["source"], c["count"]) for c in s["causes"]] == [("signature", "kwargs", 1)]


@pytest.mark.parametrize("source", SOURCES)
def test_reset_between_models_keeps_two_functions_apart(source: str) -> None:
    """torch._dynamo.reset() restarts frame ids: scale_a (before) and scale_b (after) are both
    frame 0 with compile ids 0/0 and 0/1. Each is its own storm with its own cause, one
    recompile each as torch counted, the second in epoch 2; the trace says so from the compile
    ids seen again, the text log (no TORCH_LOGS=dynamo) from the function a frame id names
    (it shows no reset, so its epoch stays 1)."""
    got = {
        s["function"]: (s["epoch"], s["compiles"], s["recompiles"], [(c["kind"], c["source"], c["count"]) for c in s["causes"]])
        for s in storms("reset_between_models", source)
    }
    assert got == {
        "scale_a": (1, 2, 1, [("value:int", "n", 1)]),
        "scale_b": (2 if source == "trace" else 1, 2, 1, [("value:int", "m", 1)]),
    }
    for fn in got:
        assert torch_recompiles("reset_between_models", fn) == 1


def test_reset_between_models_summary_names_the_epoch() -> None:
    from traceview.output.report import build_report
    from traceview.output.summary import render_text

    text = render_text(build_report(traceview.load(CORPUS / "reset_between_models" / "trace")))
    assert "scale_b (reset_between_models.py:19) after torch._dynamo.reset() #1: 2" in " ".join(text.split())
    assert "[0/1 #2] scale_b" in text and "[0/1] scale_a" in text
