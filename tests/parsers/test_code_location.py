"""Issue 30: whose code a compiled frame is, what the user compiled and from where.

The fixtures are real torch 2.13 CPU runs (fixtures/corpus): `library_llama_layers` ran HF
transformers 5.24 from a venv under a prefix that contains `torch/`
(`/tmp/tv30/torch/.venv/lib/python3.11/site-packages/`), `sequential_model` compiled an
`nn.Sequential`, `reset_same_model` compiled one function in two rounds around
`torch._dynamo.reset()`. The recompile counts are torch's own (oracle.json, checked by
tests/test_corpus.py); these tests check what the findings say about them.
"""

from __future__ import annotations

import functools
import re

import pytest

import traceview
from parsers.code_location import call_site, whose
from traceview.output.report import build_report
from traceview.output.summary import render_text
from traceview.tui.finding_rows import findings_from_report
from traceview.tui.frames_view import compile_detail
from traceview.tui.model import TraceModel

from ..conftest import FIXTURES

CORPUS = FIXTURES / "corpus"


@functools.cache
def _trace(name: str) -> traceview.Trace:
    return traceview.load(CORPUS / name / "trace")


@functools.cache
def _report(name: str) -> dict:
    return build_report(_trace(name))


@pytest.mark.parametrize(
    ("path", "owner", "package", "shown"),
    [
        # the install prefix has a directory named torch: the module decides, not the substring
        ("/opt/torch/.venv/lib/python3.12/site-packages/transformers/models/llama/modeling_llama.py",
         "library", "transformers", "transformers/models/llama/modeling_llama.py"),
        ("/opt/torch/.venv/lib/python3.12/site-packages/torch/_dynamo/external_utils.py",
         "torch", "torch", "torch/_dynamo/external_utils.py"),
        ("/opt/torch/.venv/lib/python3.12/site-packages/timm/models/resnet.py", "library", "timm", "timm/models/resnet.py"),
        ("/usr/lib/python3/dist-packages/torch/nn/modules/module.py", "torch", "torch", "torch/nn/modules/module.py"),
        ("/home/me/torch/train.py", "user", None, "/home/me/torch/train.py"),
        # a PyTorch source checkout and an editable library install
        ("/home/me/pytorch/torch/_inductor/compile_fx.py", "torch", "torch", "torch/_inductor/compile_fx.py"),
        ("/home/me/transformers/src/transformers/models/llama/modeling_llama.py",
         "library", "transformers", "transformers/models/llama/modeling_llama.py"),
        ("/home/me/vllm/vllm/model_executor/models/llama.py", "library", "vllm", "vllm/model_executor/models/llama.py"),
        ("/usr/lib/python3.11/contextlib.py", "python", None, "contextlib.py"),
        ("<eval_with_key>.3", "generated", None, "<eval_with_key>.3"),
        ("/tmp/torchinductor_root/ab/cabcdef.py", "generated", None, "cabcdef.py"),
    ],
)
def test_whose_code_by_module_not_by_substring(path: str, owner: str, package: str | None, shown: str) -> None:
    code = whose(path)
    assert (code.owner, code.package, code.shown) == (owner, package, shown)


def test_call_site_is_the_innermost_user_frame_before_the_compiled_one() -> None:
    stack = [
        "/w/train.py:30 in <module>: main()",
        "/w/train.py:21 in main: y = compiled(x)",
        "/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/modules/module.py:1778 in _wrapped_call_impl: return self._call_impl(*args, **kwargs)",
        "/opt/torch/.venv/lib/python3.12/site-packages/torch/_dynamo/external_utils.py:67 in inner",
    ]
    assert call_site(stack) == ("/w/train.py", 21, "main", "y = compiled(x)")
    assert call_site(stack[2:]) is None  # no user frame called it
    assert call_site([]) is None


def test_library_code_is_named_as_the_library_with_the_users_call_site() -> None:
    """HF Llama's decoder layers compiled one by one: the frame is transformers'
    forward_with_checkpointing (GradientCheckpointingLayer), bound to LlamaDecoderLayer."""
    c = _trace("library_llama_layers").compiles
    assert set(c["code_owner"]) == {"library"} and set(c["code_package"]) == {"transformers"}
    assert set(c["call_line"]) == {30}
    assert set(c["call_code"]) == {"logits = model(input_ids=ids).logits"}
    assert {f.rsplit("/", 1)[-1] for f in c["call_filename"]} == {"library_llama_layers.py"}
    [s] = _report("library_llama_layers")["recompiles"]
    code = s["code"]
    assert (code["owner"], code["package"], code["path"]) == ("library", "transformers", "transformers/modeling_layers.py")
    assert code["module_class"] == "transformers.models.llama.modeling_llama.LlamaDecoderLayer"
    assert code["qualname"] == "LlamaDecoderLayer.forward_with_checkpointing"
    assert code["wrapper"] is None
    assert (s["compiles"], s["recompiles"]) == (4, 3)  # torch's counters: 4 compiles, 3 recompiles
    [size, flag] = s["causes"]
    assert flag["fix"].startswith(
        "LlamaDecoderLayer.forward_with_checkpointing is the transformers library's code "
        "(transformers/modeling_layers.py:89): it recompiled because what your code passes into it changed; "
        "act at library_llama_layers.py:30 `logits = model(input_ids=ids).logits`"
    )
    # the layers are compiled with layer.compile(): the varying tensor is made inside the model
    assert code["module_compile"] is True
    assert size["fix"].startswith(
        "LlamaDecoderLayer.forward_with_checkpointing is the transformers library's code "
        "(transformers/modeling_layers.py:89), compiled per module with .compile(): args[0] is what transformers "
        "passes to each module inside your call at library_llama_layers.py:30 `logits = model(input_ids=ids).logits`, "
        "a tensor your code never holds."
    )
    assert "mark_dynamic(" not in size["fix"]
    text = render_text(_report("library_llama_layers"), width=200)
    assert "torch's own" not in text and "DDP/compiled autograd" not in text and ".venv" not in text
    assert (
        "LlamaDecoderLayer.forward_with_checkpointing (transformers/modeling_layers.py:89), called at "
        "library_llama_layers.py:30 `logits = model(input_ids=ids).logits`: 4 compiles"
    ) in text


def test_sequential_is_named_for_what_the_user_compiled() -> None:
    """torch.compile(nn.Sequential): Dynamo compiles torch's wrapper `inner`; the finding names
    the Sequential and the call, and the wrapper's args[0] is the `x` of `compiled(x)`."""
    [s] = _report("sequential_model")["recompiles"]
    assert (s["function"], s["compiles"], s["recompiles"]) == ("inner", 2, 1)  # torch: 2 compiles, 1 recompile
    code = s["code"]
    assert (code["owner"], code["wrapper"], code["module_class"]) == (
        "torch", "torch.compile(model)", "torch.nn.modules.container.Sequential")
    assert code["label"] == "Sequential via torch.compile(model)"
    [c] = s["causes"]
    assert c["text"].startswith("dimension 0 of x (the wrapper's args[0]) varies (seen: 8, 16)")
    assert c["fix"].startswith(
        "the compiled frame is torch.compile's wrapper around your Sequential (torch/_dynamo/external_utils.py): "
        "its args[0] is the model's first positional input you pass at sequential_model.py:21 `y = compiled(x)`."
    )
    assert "torch._dynamo.mark_dynamic(x, 0)" in c["fix"] and "DDP" not in c["fix"]
    text = render_text(_report("sequential_model"), width=200)
    assert "Sequential via torch.compile(model), called at sequential_model.py:21 `y = compiled(x)`: 2 compiles" in text
    assert "inner (" not in text


def test_compile_detail_in_the_ui_says_whose_code_and_the_call_site() -> None:
    model = TraceModel.build(_trace("library_llama_layers"))
    row = model.compiles.row(0, named=True)
    text = compile_detail(model, row, hint=False).plain
    assert "whose code   the transformers library's code  (transformers/modeling_layers.py)" in text
    assert re.search(r"called at    \S*library_llama_layers\.py:30 in main  logits = model\(input_ids=ids\)\.logits", text)
    assert "what         LlamaDecoderLayer.forward_with_checkpointing  (transformers.models.llama.modeling_llama.LlamaDecoderLayer)" in text


def test_one_compile_of_each_round_keeps_its_own_seconds() -> None:
    """mlp compiled as [0/0] in two rounds around torch._dynamo.reset(): the UI's slow-compile
    finding is the first round's own time, never a range over both rounds."""
    report = _report("reset_same_model")
    top = {(t["compile_id"], t["occurrence"]): t["seconds"] for t in report["compile_time"]["top"]}
    assert set(top) == {("0/0", 1), ("0/0", 2)}
    slow = [f for f in findings_from_report(report) if f.kind == "compile_time"]
    assert [f.title for f in slow] == [f"{top[('0/0', 1)]:.2f}s [0/0] mlp (reset_same_model.py:14)"]


def test_graphs_of_the_second_round_are_labelled_as_its_compile() -> None:
    """After torch._dynamo.reset() the second round's graphs and kernels belong to [0/0 #2]
    (the Frames label), not to the first round's 0/0."""
    model = TraceModel.build(_trace("reset_same_model"))
    model.build_graph_tables()
    shown = model.code.group_by("shown_id").len().sort("shown_id")
    ids = dict(shown.iter_rows())
    assert set(ids) == {"0/0", "0/0 #2"}
    by_occ = model.code.filter(model.code["occurrence"] == 2)
    assert set(by_occ["shown_id"]) == {"0/0 #2"}


def test_a_break_inside_a_library_is_the_librarys_with_the_users_call_site() -> None:
    """HF GPT-2 training on an H100 (torch 2.11 under /opt/torch/.venv/...): the loss function's
    logger call breaks the graph inside transformers; the advice names the library, the user's
    line that entered the compiled frame, and torch's config hint."""
    from traceview.analyze.hotspots import graph_break_hotspots

    [g] = graph_break_hotspots(traceview.load(FIXTURES / "gpu" / "hf_gpt2_train" / "trace"))
    assert g["gb_id"] == "gb0291"
    assert g["advice"].startswith(
        "the break is inside the transformers library's code (transformers/modeling_utils.py, reached from wrapper), "
        "not a line of yours to edit: look at what your code passes into it at hf_gpt2_train.py:30"
    )
    assert "torch._dynamo.config.ignore_logging_functions" in g["advice"]


def test_a_break_inside_torch_names_the_users_call_site() -> None:
    from traceview.analyze.hotspots import graph_break_hotspots

    gbs = graph_break_hotspots(traceview.load(FIXTURES / "gpu" / "ddp2" / "trace"))
    [g] = [g for g in gbs if g["gb_id"] == "gb0156"]
    # the break is DDP's own (_inside_ddp_forward, torch's design: analyze.ddp): expected, with
    # why, never the user's to avoid
    assert g["expected"] and g["wrapper_break"] == "Logger.set_runtime_stats_and_log"
    assert g["advice"].startswith("DDP's forward runs its own bookkeeping eagerly around the compiled module")


def test_the_ui_calls_an_expected_recompile_what_the_summary_calls_it() -> None:
    """4 compiles of the Llama layer's forward, every cause by design (a flag's two values, one
    automatic-dynamic recompile): EXPECTED RECOMPILES in the summary, not a storm in the UI."""
    report = _report("library_llama_layers")
    assert "EXPECTED RECOMPILES" in render_text(report, width=200)
    [f] = [f for f in findings_from_report(report) if f.kind in ("storm", "recompile", "expected")]
    assert f.kind == "expected"
    assert f.severity == "expected" and f.title.endswith(": 4 compiles, 25.30s")
    assert ("why", "expected by design: nothing to fix") in f.detail


def test_a_method_compiled_per_layer_is_one_code_object_shared_by_the_layers() -> None:
    """Regional compilation of HF Llama: torch guards LlamaDecoderLayer's class, not the object
    (TYPE_MATCH on L['self'], no ID_MATCH), so both layers share each compile."""
    [s] = _report("library_llama_layers")["recompiles"]
    assert s["code"]["per_instance"] is False
    text = render_text(_report("library_llama_layers"), width=200)
    assert (
        "shared: one code object for every LlamaDecoderLayer; torch guards the class, not the object, so the "
        "instances share each compile while their guarded values match"
    ) in text


def test_a_backward_compiled_inside_its_forward_compile_is_said() -> None:
    """HF Llama regional compile with gradient checkpointing on an H100: [0/1]'s backward was
    compiled with its forward (bw_compiler span 3.86 s before its compilation_metrics; no
    bwd_compilation_metrics), so its detail says so instead of a bare "backward -"."""
    model = TraceModel.build(traceview.load(FIXTURES / "gpu" / "hf_llama_regional_ckpt" / "trace"))
    rows = {r["compile_id"]: r for r in model.compiles.iter_rows(named=True)}
    assert rows["0/1"]["bwd_compile_time_s"] is None and rows["0/0"]["bwd_compile_time_s"] is not None
    assert model.backward_inside(rows["0/0"]) is None  # its backward compiled lazily, later
    text = compile_detail(model, rows["0/1"], hint=False).plain
    assert "backward     3.86s compiled inside this compile (part of its time, not lazily later)" in text
