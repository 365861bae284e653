"""`traceview repro`: a self-contained script that reproduces one compile of a trace.

Two sources, best first:

* `fx_graph_runnable` (an artifact Inductor logs before it compiles a graph): torch's own
  repro script of Inductor's input graph, with the Inductor/functorch config the compile ran
  with and random inputs of the logged shapes. It is rewritten here only to drop what ties it
  to the traced run (TORCH_TRACE and cache directories set through os.environ, a linecache
  block) and to say where it came from.
* otherwise the graph Dynamo produced (`dynamo_output_graph`, `print_readable` text), run
  through `torch.compile` with the compile's backend and dynamic setting, the Dynamo (and for
  Inductor, Inductor) config logged in `compilation_metrics`, and random inputs built from
  the graph's signature and the logged `describe_tensor` / `describe_source` /
  `create_symbol` records (shapes, strides, dtypes, devices, requires_grad).

A compile that cannot be reproduced from the log (a custom backend, whose code is not in it;
a failure inside Dynamo, which happens in the user's code before any graph exists; missing
artifacts) raises `ReproUnavailable`, one line saying why.
"""

from __future__ import annotations

import ast
import json
import operator
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from parsers import compile_ids
from traceview.analyze.failures import categorize, headline
from traceview.analyze.findings import ranks_text
from traceview.errors import UserError
from traceview.printable import one_line
from traceview.trace import Trace


class ReproUnavailable(UserError):
    """The compile cannot be reproduced from the log; the message says why."""


# Backends registered by torch itself (torch/_dynamo/backends); any other name is the
# program's own, whose code the trace does not hold.
BUILTIN_BACKENDS = frozenset({
    "eager", "eager_debug", "eager_noexcept", "pre_dispatch_eager", "aot_eager",
    "aot_eager_decomp_partition", "aot_eager_decomp_partition_crossref",
    "aot_eager_decomp_partition_with_mode", "aot_eager_default_partitioner", "inductor",
    "cudagraphs", "onnxrt", "openxla", "tvm", "tensorrt", "torchscript", "ts", "aot_ts",
})
# os.environ lines of fx_graph_runnable that point at the traced run's directories
_RUN_ENV = re.compile(r"^os\.environ\[['\"](TORCH_TRACE|TORCH_LOGS\w*|TORCHINDUCTOR_CACHE_DIR|TORCH_COMPILE_DEBUG_DIR|TRACEVIEW_\w+)['\"]\]")
_AOT_KINDS = ("aot_forward_graph", "aot_backward_graph", "aot_inference_graph", "aot_joint_graph")
_INDUCTOR_NAMES = ("inductor_output_code", "fx_graph_runnable", "before_post_grad_graph", "inductor_post_grad_graph")
_DTYPES = {
    "f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i64": "int64",
    "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8", "u16": "uint16", "u32": "uint32",
    "u64": "uint64", "b8": "bool", "c32": "complex32", "c64": "complex64", "c128": "complex128",
    "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "f8e4m3fnuz": "float8_e4m3fnuz",
    "f8e5m2fnuz": "float8_e5m2fnuz",
}
_TENSOR_ANN = re.compile(r"^(\w+)\[([^\]]*)\]\[([^\]]*)\]([a-z]+(?::\d+)?)$")
_SYM_ANN = re.compile(r"^Sym\((.+)\)$")
_PARAM = re.compile(r'(\w+)(?::\s*"([^"]*)")?')
_GET_ATTR = re.compile(r'^\s+(\w+): "([^"]+)" = self\.([A-Za-z_]\w*)\s*$', re.M)
_NESTED_CLASS = re.compile(r"^\s+class (\w+)\(torch\.nn\.Module\):", re.M)


@dataclass
class Repro:
    """A repro script and where it came from."""

    text: str
    source: str  # "fx_graph_runnable" or "dynamo_output_graph"
    compile_id: str
    rank: int | None
    file: str
    lineno: int
    backend: str
    expected_exception: str | None  # the class the script should raise; None: it should run
    notes: list[str] = field(default_factory=list)

    @property
    def lines(self) -> int:
        return self.text.count("\n")

    @property
    def summary(self) -> str:
        raises = f"expected to raise {self.expected_exception}" if self.expected_exception else "expected to run without error"
        return f"{self.lines} lines from {self.source}, backend {self.backend}; {raises}"


# ---------------------------------------------------------------------- selecting the compile
def _typed_id(compile_id: str) -> compile_ids.CompileId:
    """The compile id the user typed (an attempt suffix, 0/0_1, names the same compile)."""
    try:
        return compile_ids.typed(compile_id)
    except ValueError as exc:
        raise UserError(f"--compile-id {exc}") from None


def _compile_row(trace: Trace, typed: compile_ids.CompileId, rank: int | None) -> dict[str, Any]:
    cid = typed.label
    rows = trace.compiles.filter(typed.selects())
    if rank is not None:
        rows = rows.filter(pl.col("rank") == rank)
    if rows.height == 0:
        known = trace.compiles["compile_id"].unique().to_list()
        where = f" on rank {rank}" if rank is not None else ""
        shown = ", ".join(sorted(known, key=compile_ids.sort_key)[:20]) or "none"
        raise UserError(f"no compile {cid}{where} in the trace (compile ids: {shown})")
    ranks = sorted({r for r in rows["rank"].to_list()}, key=lambda r: -1 if r is None else r)
    if len(ranks) > 1:
        raise UserError(f"compile {cid} is on {ranks_text(ranks).strip()}: pass --rank")
    return rows.row(0, named=True)


def _events_of(trace: Trace, row: dict[str, Any]) -> pl.DataFrame:
    ev = trace.events.filter((pl.col("compile_id") == row["compile_id"]) & (pl.col("file") == row["file"]))
    return ev.sort("lineno")


def _torch_version(trace: Trace, file: str) -> str | None:
    ev = trace.events.filter((pl.col("file") == file) & (pl.col("name") == "torch_version"))
    for payload in ev["payload"].to_list():
        try:
            return str(json.loads(payload or "{}").get("pytorch_version")) or None
        except (ValueError, AttributeError):
            continue
    return None


def _safe(text: Any, width: int = 200) -> str:
    """Log text made safe for a `#` comment line (one line, printable)."""
    return one_line(str(text if text is not None else ""), width)


# ---------------------------------------------------------------------- the repro
def build_repro(
    trace: Trace,
    compile_id: str,
    *,
    rank: int | None = None,
    backend: str | None = None,
    graph: str | None = None,
) -> Repro:
    """A script reproducing compile `compile_id` (of `rank`) of `trace`."""
    row = _compile_row(trace, _typed_id(compile_id), rank)
    ev = _events_of(trace, row)
    failed = row["status"] == "failed"
    category = categorize(row["fail_type"], row["fail_reason"]) if failed else None
    runnables = ev.filter(pl.col("name") == "fx_graph_runnable")
    if runnables.height and backend is None:
        return _from_runnable(trace, row, runnables, category, graph)
    return _from_dynamo_graph(trace, row, ev, category, backend)


def _header(trace: Trace, row: dict[str, Any], source: str, file: str, lineno: int) -> list[str]:
    where = f"{_safe(row['filename'])}:{row['line']}" if row.get("filename") else "?"
    rank = f" on rank {row['rank']}" if row["rank"] is not None else ""
    return [
        f"# Reproduces torch.compile compile {row['compile_id']}{rank} of {_safe(row['function'])} ({where}).",
        f"# Written by `traceview repro` from the {source} record at {_safe(file)}:{lineno}",
        f"# (traced with torch {_safe(_torch_version(trace, file) or '?')}).",
    ]


def _expected(row: dict[str, Any], category: str | None, source: str) -> tuple[str | None, str]:
    if row["status"] != "failed":
        return None, "# Expected: runs without an error (the logged compile succeeded)."
    fail_type = row["fail_type"] or "?"
    exc = fail_type
    if source == "fx_graph_runnable" and fail_type == "BackendCompilerFailed":
        # run_repro calls Inductor directly: the exception Dynamo wrapped
        m = re.search(r"raised:\s*\n?\s*([A-Za-z_][\w.]*)", row["fail_reason"] or "")
        exc = m.group(1).rsplit(".", 1)[-1] if m else fail_type
    return exc, f"# Expected: raises {exc}, as the logged compile did ({_safe(fail_type)}: {_safe(headline(row['fail_reason']), 150)})."


def _from_runnable(trace: Trace, row: dict[str, Any], runnables: pl.DataFrame, category: str | None, graph: str | None) -> Repro:
    rows = runnables.to_dicts()
    if graph == "backward":
        if len(rows) < 2:
            raise UserError(f"compile {row['compile_id']} has no backward graph in the trace (only {len(rows)} fx_graph_runnable)")
        pick = rows[1]
    elif graph == "forward" or row["status"] != "failed" or category != "backend_compiler_failure":
        pick = rows[0]
    else:
        pick = rows[-1]  # the graph Inductor was compiling when it failed
    exc, expect = _expected(row, category, "fx_graph_runnable")
    notes = []
    if row["status"] == "failed" and category != "backend_compiler_failure":
        exc = None
        expect = (
            f"# The compile failed outside Inductor ({_safe(row['fail_type'])}: {_safe(headline(row['fail_reason']), 120)}); "
            "this script reproduces only Inductor's part, which is expected to run."
        )
        notes.append("the failure was not Inductor's")
    k = rows.index(pick)
    which = "" if len(rows) == 1 else [" (forward)", " (backward)"][k] if len(rows) == 2 else f" (graph {k + 1} of {len(rows)})"
    header = [
        *_header(trace, row, "fx_graph_runnable", pick["file"], pick["lineno"]),
        f"# Inductor's input graph{which} and the config it ran with; backend inductor.",
        "# Inputs are random values of the logged shapes, strides and dtypes.",
        expect,
    ]
    if len(rows) > 1:
        header.append(f"# The compile has {len(rows)} Inductor graphs: --graph forward|backward picks one.")
    text = "\n".join(header) + "\n" + _rewrite_runnable(pick["payload"] or "")
    return Repro(text, "fx_graph_runnable", row["compile_id"], row["rank"], pick["file"], pick["lineno"], "inductor", exc, notes)


def _rewrite_runnable(payload: str) -> str:
    """fx_graph_runnable without what ties it to the traced run, blank runs squeezed."""
    out: list[str] = []
    skip_block = False
    skip_comments = 0
    for line in payload.splitlines():
        if skip_block:
            if line.startswith((" ", "\t")) or not line.strip():
                continue
            skip_block = False
        if line.startswith('if "__compile_source__" in globals():'):
            skip_block = True
            continue
        if _RUN_ENV.match(line):
            continue
        stripped = line.strip()
        if stripped.startswith("# To run it separately"):
            skip_comments = 2
            continue
        if skip_comments and stripped.startswith("#"):
            skip_comments -= 1
            continue
        if not stripped and (not out or not out[-1].strip()):
            continue
        out.append(line.rstrip())
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------- from the Dynamo graph
def _from_dynamo_graph(trace: Trace, row: dict[str, Any], ev: pl.DataFrame, category: str | None, backend: str | None) -> Repro:
    cid = row["compile_id"]
    graphs = ev.filter(pl.col("kind") == "dynamo_output_graph").sort("attempt", "lineno")
    where = f"{row['filename']}:{row['line']}" if row.get("filename") else "the program"
    if category == "recompile_limit":
        raise ReproUnavailable(
            f"compile {cid} is the one Dynamo refused at the recompile limit: nothing was compiled, so there is "
            "no graph; the frame's earlier compile ids hold the graphs it did compile"
        )
    if row["status"] == "failed" and category != "backend_compiler_failure":
        user = f"{row['fail_user_filename']}:{row['fail_user_line']}" if row.get("fail_user_filename") else where
        raise ReproUnavailable(
            f"compile {cid} failed inside Dynamo ({_safe(row['fail_type'])}: {_safe(headline(row['fail_reason']), 120)}), "
            f"in the program's own code at {_safe(user)}, which the log does not contain; a graph Dynamo hands "
            "to a backend cannot reproduce it (run the program with backend='eager' instead)"
        )
    if graphs.height == 0:
        why = "its status is " + str(row["status"]) if row["status"] != "ok" else "the trace has no dynamo_output_graph record for it (cut short, or the graph was empty)"
        raise ReproUnavailable(f"compile {cid} left no graph to reproduce: {why}")
    g = graphs.row(graphs.height - 1, named=True)
    notes: list[str] = []
    chosen, how = _backend_of(trace, row, ev, backend)
    if chosen not in BUILTIN_BACKENDS and backend is None:
        raise ReproUnavailable(
            f"compile {cid} used the program's own backend {chosen!r}, whose code is not in the log; "
            "`--backend eager` (or another built-in backend) writes the graph it received as a script"
        )
    if not re.fullmatch(r"[A-Za-z_][\w.]*", chosen):
        raise UserError(f"--backend {chosen!r}: not a backend name")
    payload = g["payload"] or ""
    params = _signature(payload)
    if params is None:
        raise ReproUnavailable(f"compile {cid}: the logged graph has no forward() signature traceview can read")
    tensors = _described_tensors(ev)
    symbols = _symbol_values(ev)
    inputs, dynamic_dims = _input_lines(cid, params, tensors, symbols)
    dynamic = _dynamic_setting(row, dynamic_dims)
    exc, expect = _expected(row, category, "dynamo_output_graph")
    if backend is not None and row["status"] == "failed" and backend != _backend_of(trace, row, ev, None)[0]:
        exc, expect = None, f"# The logged compile failed with its own backend; with --backend {chosen} this is the graph it received."
    config = _logged_config(ev, row, chosen)
    header = [
        *_header(trace, row, "dynamo_output_graph", g["file"], g["lineno"]),
        f"# The graph Dynamo produced, compiled with backend={chosen!r} ({how})"
        + (f", dynamic={dynamic}" if dynamic is not None else "") + ".",
        "# Inputs are random values with the logged shapes, strides, dtypes, devices and requires_grad;",
        "# code whose result depends on the values (indices, masks) may need the real data.",
        expect,
    ]
    body = ["import torch", "from math import inf, nan  # noqa: F401 - names the graph may use",
            "from torch import device  # noqa: F401", "from torch._dynamo.testing import rand_strided", ""]
    if config:
        body += _config_block(config)
    body += ["", payload.rstrip(), "", ""]
    nested = sorted(set(_NESTED_CLASS.findall(payload)))
    if nested:
        body += [
            "def instantiate_submodules(mod):  # print_readable writes submodules as nested classes",
            "    for name, cls in list(vars(type(mod)).items()):",
            "        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):",
            "            delattr(type(mod), name)",
            "            sub = cls()",
            "            instantiate_submodules(sub)",
            "            setattr(mod, name, sub)",
            "",
            "",
        ]
    body += ["def make_inputs():", "    return [", *inputs, "    ]", "", "", "def main():"]
    if config:
        body.append("    apply_logged_config()")
    body.append("    mod = GraphModule()")
    if nested:
        body.append("    instantiate_submodules(mod)")
    for _name, ann, attr in _GET_ATTR.findall(payload):
        if attr in nested:
            continue
        spec = _tensor_spec(ann, symbols)
        if spec is None:
            raise ReproUnavailable(f"compile {cid}: the graph reads the attribute {attr} of unknown shape ({_safe(ann)})")
        body.append(f"    mod.register_buffer({attr!r}, rand_strided{spec})")
        notes.append(f"{attr} is a random tensor")
    dyn = f", dynamic={dynamic}" if dynamic is not None else ""
    body += [
        f"    compiled = torch.compile(mod, backend={chosen!r}{dyn})",
        "    compiled(*make_inputs())",
        "    print('compiled and ran the graph without an error')",
        "",
        "",
        'if __name__ == "__main__":',
        "    main()",
    ]
    text = "\n".join(header + body) + "\n"
    return Repro(text, "dynamo_output_graph", cid, row["rank"], g["file"], g["lineno"], chosen, exc, notes)


def _backend_of(trace: Trace, row: dict[str, Any], ev: pl.DataFrame, given: str | None) -> tuple[str, str]:
    """(backend, how it is known)."""
    if given:
        return given, "given with --backend"
    m = re.search(r"backend='([^']+)'", row["fail_reason"] or "")
    if m:
        return m.group(1), "named in the logged failure"
    if "InductorError" in (row["fail_type"] or ""):
        return "inductor", "the logged failure is Inductor's"
    recorded = _ablation_backend(row["file"])
    if recorded:
        return recorded, "recorded by traceview ablate for this run"
    names = set(ev["name"].drop_nulls().to_list()) | set(ev["kind"].drop_nulls().to_list())
    if names & set(_INDUCTOR_NAMES) or row.get("inductor_compile_time_s") is not None:
        return "inductor", "Inductor records logged for this compile"
    if names & {*_AOT_KINDS, "aot_forward_graph_fw_metadata"}:
        return "aot_eager", (
            "inferred: AOTAutograd graphs but no Inductor records were logged; the trace does not name "
            "the backend (aot_eager_decomp_partition or a custom AOT backend look the same: pass --backend)"
        )
    return "eager", (
        "inferred: no AOTAutograd or Inductor records were logged; the trace does not name the backend "
        "(a custom backend looks the same: pass --backend)"
    )


def _ablation_backend(trace_file: str) -> str | None:
    """The backend of a `traceview ablate` rung, from the calls.json beside its trace dir."""
    calls_file = Path(trace_file).parent.parent / "calls.json"
    try:
        calls = json.loads(calls_file.read_text(encoding="utf-8")).get("calls") or []
    except (OSError, ValueError, AttributeError):
        return None
    backends = {(c.get("applied") or {}).get("backend") for c in calls if not (c.get("applied") or {}).get("disable")}
    if len(backends) == 1:
        b = backends.pop()
        return b if isinstance(b, str) else None
    return None


def _signature(payload: str) -> list[tuple[str, str | None]] | None:
    m = re.search(r"def forward\(self(?:, )?(.*?)\):\s*\n", payload, re.S)
    if not m:
        return None
    params: list[tuple[str, str | None]] = []
    text = m.group(1)
    pos = 0
    while pos < len(text):
        pm = _PARAM.match(text, pos)
        if not pm:
            break
        params.append((pm.group(1), pm.group(2)))
        pos = pm.end()
        while pos < len(text) and text[pos] in ", \n":
            pos += 1
    return params


def _described_tensors(ev: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Placeholder name -> describe_tensor metadata, through describe_source (Dynamo names a
    graph input after its source: L['x'] -> L_x_)."""
    metas: dict[tuple[Any, Any], dict[str, Any]] = {}
    out: dict[str, dict[str, Any]] = {}
    for kind, meta in ev.filter(pl.col("kind").is_in(["describe_tensor", "describe_source"])).select("kind", "metadata").iter_rows():
        try:
            d = json.loads(meta or "{}")
        except ValueError:
            continue
        key = (d.get("describer_id"), d.get("id"))
        if kind == "describe_tensor":
            metas[key] = d
        elif key in metas and isinstance(d.get("source"), str):
            out.setdefault(re.sub(r"[^a-zA-Z0-9]+", "_", d["source"]), metas[key])
    return out


def _symbol_values(ev: pl.DataFrame) -> dict[str, float | int]:
    vals: dict[str, float | int] = {}
    for meta in ev.filter(pl.col("kind") == "create_symbol")["metadata"].to_list():
        try:
            d = json.loads(meta or "{}")
            v = str(d.get("val"))
            vals[str(d["symbol"])] = int(v) if re.fullmatch(r"-?\d+", v) else float(v)
        except (ValueError, KeyError, TypeError):
            continue
    return vals


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod, ast.Pow: operator.pow}


def _eval_dim(expr: str, symbols: dict[str, float | int]) -> int | None:
    """A size expression of an annotation (`4`, `s77`, `2*s77 + 1`) with the symbols' logged values."""
    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in symbols:
            return symbols[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError(expr)

    try:
        return int(ev(ast.parse(expr.strip(), mode="eval").body))
    except (ValueError, SyntaxError, TypeError, ZeroDivisionError):
        return None


def _tensor_spec(ann: str, symbols: dict[str, float | int], meta: dict[str, Any] | None = None) -> str | None:
    """`(size, stride, dtype, device)` source text for rand_strided, from the logged
    describe_tensor metadata when there is one, else from the annotation."""
    m = _TENSOR_ANN.match(ann or "")
    dtype = device = None
    size = stride = None
    if m:
        dtype = _DTYPES.get(m.group(1))
        device = m.group(4)
        dims = [_eval_dim(x, symbols) for x in m.group(2).split(",") if x.strip()]
        strides = [_eval_dim(x, symbols) for x in m.group(3).split(",") if x.strip()]
        if None not in dims and None not in strides:
            size, stride = dims, strides
    if meta:
        if isinstance(meta.get("size"), list) and all(isinstance(x, int) for x in meta["size"]):
            size = meta["size"]
        if isinstance(meta.get("stride"), list) and all(isinstance(x, int) for x in meta["stride"]):
            stride = meta["stride"]
        dm = re.fullmatch(r"torch\.(\w+)", str(meta.get("dtype") or ""))
        dtype = dm.group(1) if dm else dtype
        vm = re.fullmatch(r"device\(type='([a-z]+)'(?:, index=(\d+))?\)", str(meta.get("device") or ""))
        if vm:
            device = vm.group(1) + (f":{vm.group(2)}" if vm.group(2) else "")
    if size is None or stride is None or dtype is None or device is None or len(size) != len(stride):
        return None
    return f"({tuple(size)!r}, {tuple(stride)!r}, torch.{dtype}, {device!r})"


def _input_lines(cid: str, params: list[tuple[str, str | None]], tensors: dict[str, dict[str, Any]],
                 symbols: dict[str, float | int]) -> tuple[list[str], bool]:
    lines: list[str] = []
    dynamic = False
    for name, ann in params:
        sym = _SYM_ANN.match(ann or "")
        if sym:
            value = symbols.get(sym.group(1).strip())
            if value is None:
                raise ReproUnavailable(f"compile {cid}: no logged value for the symbolic input {name} ({_safe(ann)})")
            lines.append(f"        {value!r},  # {name}: {_safe(ann)}")
            dynamic = True
            continue
        meta = tensors.get(name)
        spec = _tensor_spec(ann or "", symbols, meta)
        if spec is None:
            raise ReproUnavailable(f"compile {cid}: cannot tell the shape, dtype or device of input {name} ({_safe(ann) or 'no annotation'})")
        m = _TENSOR_ANN.match(ann or "")
        if m and re.search(r"[A-Za-z]", m.group(2)):
            dynamic = True
        grad = bool(meta and meta.get("requires_grad")) and re.search(r"torch\.(float|bfloat|complex)", spec) is not None
        lines.append(f"        rand_strided{spec}{'.requires_grad_()' if grad else ''},  # {name}")
    return lines, dynamic


def _dynamic_setting(row: dict[str, Any], symbolic: bool) -> bool | None:
    if symbolic:
        return True
    if row.get("automatic_dynamic_shapes") is False:
        return False
    return None


def _logged_config(ev: pl.DataFrame, row: dict[str, Any], backend: str) -> dict[str, dict[str, Any]]:
    """The Dynamo (and for Inductor, Inductor) config of the compile, from compilation_metrics."""
    metrics = ev.filter(pl.col("kind") == "compilation_metrics")
    if metrics.height == 0:
        return {}
    try:
        m = json.loads(metrics["metadata"][metrics.height - 1] or "{}")
    except ValueError:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for module, key in (("torch._dynamo.config", "dynamo_config"), ("torch._inductor.config", "inductor_config")):
        if key == "inductor_config" and backend != "inductor":
            continue
        try:
            values = json.loads(m.get(key) or "{}")
        except (ValueError, TypeError):
            continue
        if isinstance(values, dict):
            out[module] = {
                k: v for k, v in values.items()
                if isinstance(k, str) and not k.startswith("_") and not k.endswith(("_dir", "_path"))
                and v != "Value is not JSON serializable"
            }
    return {k: v for k, v in out.items() if v}


def _config_block(config: dict[str, dict[str, Any]]) -> list[str]:
    return [
        "# The compile's config as compilation_metrics logged it; apply_logged_config() sets the",
        "# values that differ from this torch's defaults.",
        "LOGGED_CONFIG = " + repr({m: dict(sorted(v.items())) for m, v in config.items()}),
        "",
        "",
        "def apply_logged_config():",
        "    import importlib",
        "",
        "    for module_name, values in LOGGED_CONFIG.items():",
        "        module = importlib.import_module(module_name)",
        "        current = module.get_config_copy()",
        "        for key, value in values.items():",
        "            now = current.get(key, value)",
        "            if isinstance(now, (tuple, set, frozenset)) and isinstance(value, list):",
        "                value = type(now)(value)",
        "            scalar = (bool, int, float, str, list, tuple, set, frozenset)",
        "            if now != value and (type(now) is type(value) or (now is None and isinstance(value, scalar))):",
        "                setattr(module, key, value)",
        "",
    ]


def write_repro(repro: Repro, path: str | os.PathLike[str]) -> Path:
    """Write the script (atomically) and return its path."""
    out = Path(path)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    tmp.write_text(repro.text, encoding="utf-8")
    os.replace(tmp, out)
    return out


def save_repro(
    trace: Trace,
    compile_id: str,
    *,
    rank: int | None = None,
    directory: str | os.PathLike[str] = ".",
    backend: str | None = None,
    graph: str | None = None,
) -> tuple[Path, Repro]:
    """Build the repro of one compile and write it as `directory/repro_[rank<R>_]<id>.py` (what
    a UI key on a compile or failure calls); raises ReproUnavailable (one line) when the log
    cannot reproduce it."""
    repro = build_repro(trace, compile_id, rank=rank, backend=backend, graph=graph)
    cid = repro.compile_id.lstrip("!").replace("/", "_")
    name = f"repro_{'' if repro.rank is None else f'rank{repro.rank}_'}{cid}{'_' + graph if graph else ''}.py"
    return write_repro(repro, Path(directory) / name), repro
