"""Issue 38's rules of judgement for recompiles, on real runs of the diagnosis corpus:

* a recompile's cause is what differs from the cache entry the call otherwise matches (regional
  compile of repeated blocks: the requires_grad variant is by design, the longer sequence is
  the cause; never "detach it");
* advice names what the user holds: a module compiled with `layer.compile()` is fixed at its
  compile (`dynamic=True`) or with torch.compiler.config.dynamic_sources, not with mark_dynamic
  on a tensor the user never holds (each advice was applied in a verification run of
  make_corpus.py: PROVENANCE.md "The advice, applied");
* a fix the run applied after torch._dynamo.reset() is said as applied, with the compile that
  shows it worked;
* a one-off or by-design recompile is not a storm (the report's `is_storm`).
"""

from __future__ import annotations

import json
from typing import Any

import traceview
from traceview.output.report import build_report
from traceview.output.summary import render_text

from ..conftest import FIXTURES

CORPUS = FIXTURES / "corpus"


def _report(name: str, source: str = "trace") -> dict[str, Any]:
    return build_report(traceview.load(CORPUS / name / source))


def _torch(name: str, function: str) -> tuple[int, int]:
    doc = json.loads((CORPUS / name / "oracle.json").read_text())
    [row] = [r for p in doc["processes"] for r in p["per_code"] if r["function"] == function]
    return row["compiles"], row["recompiles"]


def test_the_size_is_the_cause_not_the_requires_grad_variant() -> None:
    """torch lists '- 0/1: tensor 'x' requires_grad mismatch' then '- 0/0: tensor 'x' size
    mismatch at index 0. expected 128, actual 192' for block 0's longer input: 0/0 is the entry
    of the same requires_grad, so the size is the cause (0/2 and 0/3, one per variant)."""
    [s] = _report("regional_requires_grad")["recompiles"]
    assert (s["compiles"], s["recompiles"]) == _torch("regional_requires_grad", "forward") == (4, 3)
    got = {c["kind"]: (c["count"], c["compile_ids"], c["expected"]) for c in s["causes"]}
    assert got == {"size": (2, ["0/2", "0/3"], True), "requires_grad": (1, ["0/1"], True)}
    assert s["expected"] and not s["is_storm"] and s["fixed_later"] is None
    assert s["code"]["module_compile"] is True and s["code"]["owner"] == "user"
    size, grad = s["causes"]
    assert size["text"] == "dimension 0 of x varies (seen: 128, 192)"
    assert size["fix"] == (
        "nothing to fix: automatic dynamic shapes recompiled it once per compiled variant (requires_grad, flag or "
        "mode) and made dimension 0 of x dynamic; to avoid even that, compile each Block with `.compile(dynamic=True)` "
        "(e.g. `layer.compile(dynamic=True)`), or set torch.compiler.config.dynamic_sources = \"L['x']:0\" before the "
        "first call (only those dimensions; it overrides dynamic=False); or call torch._dynamo.mark_dynamic(x, 0) in "
        "your code before the module is called at regional_requires_grad.py:41 `x = block(x)`, not in a forward "
        "pre-hook: the hooks of a module compiled with .compile() run inside the compiled call, where Dynamo refuses "
        "to trace mark_dynamic"
    )
    assert grad["text"] == "x comes both with and without requires_grad (one cache entry per value)"
    assert grad["fix"].startswith("nothing to fix: torch keeps one compile per requires_grad value of x by design")
    assert "detach it" not in json.dumps(s)
    text = render_text(_report("regional_requires_grad"), width=200)
    assert "EXPECTED RECOMPILES" in text and "findings: none that needs action" in text


def test_the_requires_grad_variant_alone_is_its_cause_from_the_text_log_too() -> None:
    [s] = _report("regional_requires_grad", "torch_logs.txt")["recompiles"]
    got = {c["kind"]: (c["count"], c["compile_ids"]) for c in s["causes"]}
    assert got == {"size": (2, ["0/2", "0/3"]), "requires_grad": (1, ["0/1"])}
    assert "detach it" not in json.dumps(s)


def test_a_fix_applied_after_a_reset_is_said_as_applied() -> None:
    """normalize recompiles for every width with dynamic=False (0/0..0/3); after
    torch._dynamo.reset() the program marks dim 1 dynamic and [0/0 #2] compiles once."""
    report = _report("reset_fix_applied")
    [s] = report["recompiles"]
    assert (s["compiles"], s["recompiles"], s["epoch"]) == (4, 3, 1)
    assert _torch("reset_fix_applied", "normalize") == (5, 3)  # both rounds: 4 + 1 compiles
    assert s["is_storm"] and not s["expected"] and s["forced_dynamic_false"]
    fx = s["fixed_later"]
    assert (fx["compile_id"], fx["occurrence"], fx["epoch"], fx["compiles"]) == ("0/0", 2, 2, 1)
    [c] = s["causes"]
    assert c["fix"] == (
        "applied later in this run: after torch._dynamo.reset(), normalize compiled once as [0/0 #2] with dimension 1 "
        "of x dynamic (s27 for L['x'].size()[1]): the fix worked, nothing left to do"
    )
    assert (c["fixed_by"]["symbol"], c["fixed_by"]["source"]) == ("s27", "L['x'].size()[1]")
    text = render_text(report, width=200)
    assert "findings: none that needs action" in text
    assert "RECOMPILES FIXED LATER" in text and "\nRECOMPILES  " not in text
    assert "mark_dynamic(x, 1) on the input" not in text


def test_a_layer_compiled_with_layer_compile_is_fixed_at_its_compile() -> None:
    """HF Llama trained with `layer.compile()` on each decoder layer: args[0] (hidden_states) is
    made inside LlamaModel.forward; the fix names the layers' compile and the dynamic_sources
    that make dim 1 dynamic (the three sizes 0/1 made dynamic), each applied in a verification
    run (1 compile, 0 recompiles); a mark_dynamic pre-hook is refused by Dynamo there."""
    [s] = _report("llama_regional_seq")["recompiles"]
    assert (s["compiles"], s["recompiles"]) == _torch("llama_regional_seq", "forward_with_checkpointing") == (2, 1)
    assert s["expected"] and not s["is_storm"]
    assert s["code"]["module_compile"] is True and s["code"]["owner"] == "library"
    [c] = s["causes"]
    assert (c["kind"], c["source"], c["dim"], c["expected"]) == ("size", "args[0]", 1, True)
    assert c["fix"] == (
        "LlamaDecoderLayer.forward_with_checkpointing is the transformers library's code "
        "(transformers/modeling_layers.py:89), compiled per module with .compile(): args[0] is what transformers "
        "passes to each module inside your call at llama_regional_seq.py:41 `loss = model(input_ids=ids, labels=ids, "
        "use_cache=False).loss`, a tensor your code never holds. Nothing to fix: automatic dynamic shapes recompiled it "
        "once and made dimension 1 of args[0] dynamic; to avoid even that, compile each LlamaDecoderLayer with "
        "`.compile(dynamic=True)` (e.g. `layer.compile(dynamic=True)`), or set torch.compiler.config.dynamic_sources = "
        "\"L['args'][0]:1,L['kwargs']['position_embeddings'][0]:1,L['kwargs']['position_embeddings'][1]:1\" before the "
        "first call (only those dimensions; it overrides dynamic=False); mark_dynamic cannot reach args[0]: it is made "
        "inside the forward that calls the module, and the forward pre-hooks of a module compiled with .compile() run "
        "inside the compiled call, where Dynamo refuses to trace mark_dynamic"
    )
    # the advice was applied in real runs and held (make_corpus.py's verification runs)
    provenance = (CORPUS / "llama_regional_seq" / "PROVENANCE.md").read_text()
    assert "`forward_with_checkpointing` 1, 0 | none | as promised" in provenance
    assert "Attempt to trace forbidden callable" in provenance
