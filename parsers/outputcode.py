"""Inductor output code (the Python wrapper module) -> kernels and kernel call sites.

Input: the payload of an ``inductor_output_code`` envelope, or the text after
``Output code:`` in a TORCH_LOGS ``output_code`` record. What it holds (torch 2.x):

* ``# AOT ID: ['0_forward']`` on the first line (which AOT graph this wrapper runs);
* kernel definitions at module level::

      # kernel path: /tmp/torchinductor_root/j7/cj76....py
      # Topologically Sorted Source Nodes: [input_1, input_2], Original ATen: [aten.t, aten.addmm]
      # Source node to ATen node mapping:
      #   input_1 => addmm, permute
      # Graph fragment:
      #   %addmm : Tensor "f16[512, 4096][4096, 1]cuda:0"[num_users=2] = call_function[...](...)
      triton_tem_fused_addmm_gelu_t_0 = async_compile.triton('triton_tem_...', '''
      <kernel source>
      ''', device_str='cuda')

  (CPU: ``cpp_fused_relu_0 = async_compile.cpp_pybinding([...], r'''<C++>''')``, usually
  without header comments);
* ``def call(args)`` (or ``Runner.call`` and ``partition_N`` functions with graph
  partitions) launching them in order: ``kernel.run(...)`` (Triton), ``kernel(...)`` (C++),
  ``extern_kernels.mm(...)``, fallback ops ``torch.ops.aten.x.default(...)``, collectives
  ``torch.ops._c10d_functional.*``; each launch may be preceded by
  ``# Topologically Sorted Source Nodes: [...], Original ATen: [...]`` and, with provenance
  tracking, ``# [Provenance debug handles] name:N``.

Kernel source text is the exact text between the ``'''`` quotes of its literal.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from parsers.coerce import json_object
from parsers.lexing import split_top_level

__all__ = [
    "CALL_SCHEMA",
    "KERNEL_SCHEMA",
    "PROVENANCE_SCHEMA",
    "OutputCode",
    "kernel_kind",
    "output_code_from_log_text",
    "parse_aot_code",
    "parse_output_code",
    "parse_provenance",
    "stack_frame",
]

#: Per-kernel columns produced by :func:`parse_output_code` (see docs/tables-graphs.md).
KERNEL_SCHEMA: dict[str, Any] = {
    "order": pl.Int32,
    "name": pl.String,
    "kind": pl.String,
    "variant": pl.String,
    "code": pl.String,
    "kernel_path": pl.String,
    "source_nodes": pl.List(pl.String),
    "aten_ops": pl.List(pl.String),
    "post_grad_nodes": pl.List(pl.String),
    "debug_handles": pl.List(pl.String),
    "calls": pl.List(pl.Int32),
    "line": pl.Int32,
}

#: Per-launch columns (one row per kernel launch in ``call()``, in execution order).
CALL_SCHEMA: dict[str, Any] = {
    "call_index": pl.Int32,
    "kernel_order": pl.Int32,
    "name": pl.String,
    "kind": pl.String,
    "function": pl.String,
    "source_nodes": pl.List(pl.String),
    "aten_ops": pl.List(pl.String),
    "debug_handle": pl.String,
    "text": pl.String,
    "line": pl.Int32,
    "reads": pl.List(pl.String),
    "writes": pl.List(pl.String),
}

#: Rows of :func:`parse_provenance`: one per kernel key of a provenance artifact.
PROVENANCE_SCHEMA: dict[str, Any] = {
    "artifact": pl.String,
    "kernel_key": pl.String,
    "kernel": pl.String,
    "debug_handle": pl.Int32,
    "post_grad_nodes": pl.List(pl.String),
    "pre_grad_nodes": pl.List(pl.String),
    "stack_traces": pl.List(pl.String),
    "user_file": pl.String,
    "user_line": pl.Int32,
    "user_function": pl.String,
    "user_code": pl.String,
}

_AOT_ID = re.compile(r"^# AOT ID: \[(?P<ids>[^\]]*)\]")
_DEF = re.compile(
    r"^(?P<var>[A-Za-z_]\w*) = async_compile\.(?P<method>\w+)\((?:'(?P<qname>[^']*)'\s*,\s*)?"
)
_KERNEL_PATH = re.compile(r"^# kernel path: (?P<p>.*)$")
_SOURCE_NODES = re.compile(
    r"^\s*# (?:Topologically Sorted|Unsorted) Source Nodes: \[(?P<nodes>.*?)\], "
    r"Original ATen: \[(?P<aten>.*?)\]\s*$"
)
_MAPPING_HEAD = "# Source node to ATen node mapping:"
_MAPPING_ROW = re.compile(r"^#\s+(?P<src>\S+) => (?P<dst>.*)$")
_HANDLE = re.compile(r"^\s*# \[Provenance debug handles\] (?P<h>\S+)\s*$")
_FUNC = re.compile(r"^(?P<indent>\s*)def (?P<name>\w+)\(")
_EXTERN = re.compile(
    r"^\s*(?:[\w,][\w, ]* = )?(?P<fn>extern_kernels\.\w+|torch\.ops\.[\w.]+|aten\.[\w.]+|"
    r"inductor_ops\.[\w.]+|_quantized\.[\w.]+)\("
)
_PARTITION_CALL = re.compile(r"(?:self\.partitions\[(?P<k>\d+)\]|(?P<name>partition_\d+))\(")
_PARTITIONS = re.compile(r"Runner\(partitions=\[(?P<p>[^\]]*)\]")
_EXTERN_PARTS = ("extern_kernels.", "torch.ops.", "aten.", "inductor_ops.", "_quantized.")
_LAUNCH = re.compile(r"^\s*(?:[\w,][\w, ]* = )?(?P<name>[A-Za-z_]\w*)(?P<run>\.run)?\(")
_NOT_RUNTIME = {"benchmark_compiled_module", "get_args", "__init__", "recursively_apply_fns"}
_HELPERS = {"alloc_from_pool"}  # ``alloc_from_pool = torch.ops.inductor._alloc_from_pool``


_KW = re.compile(r"^\w+=")
_PARAMS = re.compile(r'(?:extern "C"\s+void\s+kernel|^def \w+)\((?P<p>[^)]*)\)', re.M)
_REUSE = re.compile(r"^\s*(?P<dst>\w+) = (?P<src>\w+)(?:\[(?P<i>\d+)\])?(?:;.*)?$")
# ``buf4 = reinterpret_tensor(buf3, (8, 1), (1, 1), 0); del buf3  # reuse``: same storage
_ALIAS = re.compile(r"^\s*(?P<dst>\w+) = (?:reinterpret_tensor|as_strided|torch\.as_strided)\((?P<src>\w+),")
_ALLOC = re.compile(r"^\s*(?P<dst>\w+) = (?:empty_strided\w*|torch\.empty\w*)\(")
_RETURN = re.compile(r"^\s*return \((?P<r>.*)\)\s*$")
_VIEW_CALL = re.compile(r"^(?:reinterpret_tensor|as_strided|torch\.as_strided)\((?P<b>\w+)")



def _add_origin(kernel: dict, nodes: list[str], aten: list[str]) -> None:
    """Add the source nodes and aten ops of another call site of a kernel (each once, in order)."""
    for x in nodes:
        if x not in kernel["source_nodes"]:
            kernel["source_nodes"].append(x)
    for x in aten:
        if x not in kernel["aten_ops"]:
            kernel["aten_ops"].append(x)

def _top_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of the first call in ``text``."""
    i = text.find("(")
    if i < 0:
        return []
    depth = 0
    for j in range(i + 1, len(text)):  # the call's closing parenthesis (or the end)
        if text[j] in "([{":
            depth += 1
        elif text[j] in ")]}":
            if depth == 0:
                return split_top_level(text[i + 1 : j])
            depth -= 1
    return split_top_level(text[i + 1 :])


def _arg_name(arg: str) -> str | None:
    """The buffer an argument names (``buf3``, ``reinterpret_tensor(buf3, ...)`` -> buf3)."""
    arg = arg.split("=", 1)[1].strip() if re.match(r"^\w+=", arg) else arg
    m = _VIEW_CALL.match(arg)
    if m:
        return m.group("b")
    return arg if re.fullmatch(r"[A-Za-z_]\w*", arg) and arg not in ("None", "True", "False") else None


def _param_roles(code: str) -> list[str] | None:
    """Role of each parameter of a generated kernel (``r``, ``w``, ``rw`` or ``""``), from
    Inductor's parameter names: ``in_ptrN`` read, ``out_ptrN`` written, ``in_out_ptrN``
    both, ``arg_X`` (templates) read; None when the signature is not found."""
    m = _PARAMS.search(code)
    if not m:
        return None
    roles = []
    for p in m.group("p").split(","):
        p = p.strip().split("=")[0].strip()
        name = re.split(r"[\s*&]+", p)[-1] if p else ""
        if name.startswith("in_out_ptr"):
            roles.append("rw")
        elif name.startswith(("in_ptr", "arg_")):
            roles.append("r")
        elif name.startswith("out_ptr"):
            roles.append("w")
        else:
            roles.append("")
    return roles


def kernel_kind(name: str, method: str | None = None, code: str | None = None) -> str:
    """Kind of a kernel from its name, ``async_compile`` method and source.

    ``triton`` (generated pointwise/reduction/persistent/foreach kernels), ``template``
    (Triton templates: autotuned matmul/conv/flex-attention, ``triton_tem_*`` or a
    ``@triton_heuristics.template`` decorator), ``cpp`` (C++ on CPU), ``cuda``/``rocm``
    (CUTLASS/CK templates), ``halide``, ``mps``, ``multi_kernel``, ``extern``
    (``extern_kernels.*``), ``collective`` (``torch.ops._c10d_functional.*``), ``fallback``
    (other ``torch.ops``/``aten`` calls Inductor did not generate code for), else the
    ``async_compile`` method name.
    """
    if method is None:
        if name.startswith("extern_kernels."):
            return "extern"
        bare = name[len("torch.ops.") :] if name.startswith("torch.ops.") else name
        if bare.startswith(("_c10d_functional.", "c10d_functional.", "_dtensor.")):
            return "collective"
        return "fallback"
    if method == "triton":
        if name.startswith("triton_tem_") or (
            code is not None and "@triton_heuristics.template(" in code
        ):
            return "template"
        return "triton"
    if method in ("cpp", "cpp_pybinding"):
        return "cpp"
    return method


def _split_list(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def _variant(name: str, kind: str) -> str | None:
    if kind in ("triton", "template"):
        m = re.match(r"triton_([a-z]+)_", name)
        return m.group(1) if m else None
    if kind == "cpp":
        m = re.match(r"cpp_([a-z]+)_", name)
        return m.group(1) if m else None
    return None


@dataclass
class OutputCode:
    """A parsed wrapper: its AOT ids, kernel rows and launch rows (dicts)."""

    aot_ids: list[str] = field(default_factory=list)
    kernels: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def aot_id(self) -> str | None:
        """The first AOT id (``0_forward``), None when the wrapper has no ``# AOT ID`` line."""
        return self.aot_ids[0] if self.aot_ids else None

    def kernels_frame(self) -> pl.DataFrame:
        return pl.DataFrame(self.kernels, schema=KERNEL_SCHEMA)

    def calls_frame(self) -> pl.DataFrame:
        return pl.DataFrame(self.calls, schema=CALL_SCHEMA)


def output_code_from_log_text(text: str) -> str | None:
    """The wrapper source inside a TORCH_LOGS ``output_code`` record (None if there is none).

    The record starts with ``Output code: `` and the wrapper follows on the next line; an
    ``Output code written to: ...`` line, when merged into the same record, ends it.
    """
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.strip().startswith("Output code:"):
            body = lines[i + 1 :]
            for j, b in enumerate(body):
                if b.startswith("Output code written to:"):
                    body = body[:j]
                    break
            while body and not body[-1].strip():
                body.pop()
            return "\n".join(body)
    return None


# memoized: ranks of one job log the same text, parsed once per process (the result is shared,
# callers must not modify it)
@functools.lru_cache(maxsize=32)
def parse_output_code(text: str) -> OutputCode:
    """Parse one wrapper module into kernels (definitions + extern/fallback launches) and launches."""
    out = OutputCode()
    lines = text.split("\n")
    n = len(lines)
    m = _AOT_ID.match(lines[0].rstrip("\r")) if lines else None
    if m:
        out.aot_ids = [x.strip().strip("'\"") for x in m.group("ids").split(",") if x.strip()]

    kernels = out.kernels
    by_name: dict[str, dict[str, Any]] = {}
    # pending header comments of the next kernel definition
    head: dict[str, Any] = {}
    in_mapping = False
    funcs: dict[str, list[tuple[str, Any]]] = {}
    func_order: list[str] = []
    partitions: list[str] = []
    cur_func: str | None = None
    pend_nodes: tuple[list[str], list[str]] | None = None
    pend_handle: str | None = None
    # dataflow: the value each buffer name holds (a write makes a new value), in line order
    cur: dict[str, str] = {}
    fresh: set[str] = set()
    versions: dict[str, int] = {}
    returns: list[str] | None = None

    def read(name: str | None) -> str | None:
        return None if name is None else cur.get(name, name)

    def write(name: str) -> str:
        v = cur.get(name, name)
        if v in fresh:
            fresh.discard(v)
            return v
        versions[name] = versions.get(name, 0) + 1
        cur[name] = f"{name}~{versions[name]}"
        return cur[name]

    def flow(name: str, text: str, generated: bool) -> tuple[list[str], list[str]]:
        args = _top_args(text[text.find(name) :])
        reads: list[str] = []
        writes: list[str] = []
        if generated:
            roles = _param_roles(by_name[name]["code"])
            pos = [a for a in args if not _KW.match(a)]
            if roles is None:
                return [v for a in pos if (v := read(_arg_name(a)))], []
            for a, role in zip(pos, roles, strict=False):
                b = _arg_name(a)
                if b is None or not role:
                    continue
                v = read(b) or b
                # an in_out_ptr on a buffer nothing wrote yet is scratch space, not an input
                if "r" in role and not (role == "rw" and v in fresh):
                    reads.append(v)
                if "w" in role:
                    writes.append(write(b))
            return reads, writes
        outs = [a.split("=", 1)[1].strip() for a in args if a.startswith("out=")]
        for a in args:
            if a.startswith("out="):
                continue
            v = read(_arg_name(a))
            if v is not None:
                reads.append(v)
        lhs = text.split(" = ", 1)[0].strip() if " = " in text.split("(", 1)[0] else ""
        for b in [*(_arg_name(o) for o in outs), *(x.strip() for x in lhs.split(",") if x.strip())]:
            if b:
                if b not in cur:  # a fallback's result: a new buffer
                    cur[b] = b
                    fresh.add(b)
                writes.append(write(b))
        return reads, writes

    def new_kernel(name: str, kind: str, code: str, lineno: int) -> dict[str, Any]:
        row = {
            "order": len(kernels), "name": name, "kind": kind, "variant": _variant(name, kind),
            "code": code, "kernel_path": head.get("path"),
            "source_nodes": list(head.get("nodes", [])), "aten_ops": list(head.get("aten", [])),
            "post_grad_nodes": list(head.get("post", [])), "debug_handles": [], "calls": [],
            "line": lineno,
        }
        kernels.append(row)
        return row

    i = 0
    while i < n:
        raw = lines[i]
        line = raw.rstrip("\r")
        lineno = i + 1
        i += 1
        # ---- module level: kernel definitions and their header comments
        # (each regex is tried only on lines holding its literal part)
        dm = _DEF.match(line) if " = async_compile." in line else None
        if dm and dm.group("method") != "wait":
            q = line.find("'''", dm.end())
            if q < 0:
                # no triple-quoted literal on this line (e.g. multi_kernel([...]) lists)
                k = new_kernel(dm.group("var"), kernel_kind(dm.group("var"), dm.group("method")),
                               line, lineno)
                by_name[k["name"]] = k
                head = {}
                cur_func = None
                continue
            start_line = i - 1
            # the literal may start on this line or continue on the following ones
            pieces = [raw[q + 3 :]]
            j = start_line
            end_found = pieces[0].find("'''")
            while end_found < 0 and j + 1 < n:
                j += 1
                pieces.append(lines[j])
                end_found = pieces[-1].find("'''")
            pieces[-1] = pieces[-1][:end_found] if end_found >= 0 else pieces[-1]
            code = "\n".join(pieces)
            i = j + 1
            name = dm.group("var")
            k = new_kernel(name, kernel_kind(name, dm.group("method"), code), code, lineno)
            by_name[name] = k
            head = {}
            in_mapping = False
            cur_func = None
            continue
        if not line.startswith((" ", "\t")):
            km = _KERNEL_PATH.match(line) if line.startswith("# kernel path: ") else None
            if km:
                head = {"path": km.group("p")}
                in_mapping = False
                continue
            sm = _SOURCE_NODES.match(line) if "Source Nodes: [" in line else None
            if sm:
                head["nodes"] = _split_list(sm.group("nodes"))
                head["aten"] = _split_list(sm.group("aten"))
                continue
            if line.startswith(_MAPPING_HEAD):
                in_mapping = True
                head.setdefault("post", [])
                continue
            if in_mapping:
                mm = _MAPPING_ROW.match(line)
                if mm:
                    for x in _split_list(mm.group("dst")):
                        if x not in head["post"]:
                            head["post"].append(x)
                    continue
                in_mapping = False
        # ---- functions
        fm = _FUNC.match(line) if "def " in line else None
        if fm:
            name = fm.group("name")
            cur_func = None if name in _NOT_RUNTIME else name
            if cur_func is not None:
                funcs.setdefault(cur_func, [])
                func_order.append(cur_func)
            pend_nodes, pend_handle = None, None
            continue
        if line and not line[0].isspace():
            if not line.startswith("#"):  # a module-level statement ends the function
                cur_func = None
                pm = _PARTITIONS.search(line) if "Runner(partitions=[" in line else None
                if pm:
                    partitions = _split_list(pm.group("p"))
            continue
        if cur_func is None:
            continue
        # ---- inside a runtime function: launches in order
        sm = _SOURCE_NODES.match(line) if "Source Nodes: [" in line else None
        if sm:
            pend_nodes = (_split_list(sm.group("nodes")), _split_list(sm.group("aten")))
            continue
        hm = _HANDLE.match(line) if "# [Provenance debug handles] " in line else None
        if hm:
            pend_handle = hm.group("h")
            continue
        if line.lstrip().startswith("#"):
            continue
        rm = _REUSE.match(line) if " = " in line else None
        if rm:
            base = read(rm.group("src")) or rm.group("src")
            cur[rm.group("dst")] = f"{base}[{rm.group('i')}]" if rm.group("i") else base
            continue
        vm = _ALIAS.match(line) if " = " in line else None
        if vm:
            cur[vm.group("dst")] = read(vm.group("src")) or vm.group("src")
            continue
        am = _ALLOC.match(line) if " = " in line else None
        if am:
            cur[am.group("dst")] = am.group("dst")
            fresh.add(am.group("dst"))
            continue
        tm = _RETURN.match(line) if cur_func == "call" and "return (" in line else None
        if tm:
            returns = [read(_arg_name(a)) or "" for a in _top_args("(" + tm.group("r") + ")")]
            continue
        if "(" not in line:  # no call: neither a launch nor a partition
            continue
        pc = _PARTITION_CALL.search(line) if "partition" in line else None
        if pc:
            target = pc.group("name") or (
                partitions[int(pc.group("k"))] if pc.group("k") and int(pc.group("k")) < len(partitions)
                else f"partition_{pc.group('k')}"
            )
            funcs[cur_func].append(("partition", target))
            continue
        em = _EXTERN.match(line) if any(p in line for p in _EXTERN_PARTS) else None
        lm = _LAUNCH.match(line) if not em else None
        if em:
            fn = em.group("fn")
            if fn in _HELPERS:
                continue
            funcs[cur_func].append(("extern", (fn, line, lineno, pend_nodes, pend_handle,
                                                *flow(fn, line, False))))
            pend_nodes, pend_handle = None, None
        elif lm and lm.group("name") in by_name:
            funcs[cur_func].append(("kernel", (lm.group("name"), line, lineno, pend_nodes, pend_handle,
                                                *flow(lm.group("name"), line, True))))
            pend_nodes, pend_handle = None, None

    # ---- execution order: call() with partitions spliced in, then anything not reached
    seen: set[str] = set()
    ordered: list[tuple[str, tuple[Any, ...]]] = []

    def expand(fname: str) -> None:
        if fname in seen or fname not in funcs:
            return
        seen.add(fname)
        for what, payload in funcs[fname]:
            if what == "partition":
                expand(payload)
            else:
                ordered.append((fname, payload))

    expand("call")
    for fname in func_order:
        expand(fname)

    head = {}  # launches have no definition header
    for idx, (fname, (name, text, lineno, pnodes, handle, reads, writes)) in enumerate(ordered):
        nodes, aten = pnodes if pnodes else ([], [])
        if name in by_name and by_name[name]["kind"] not in ("extern", "fallback", "collective"):
            k = by_name[name]
            _add_origin(k, nodes, aten)
        else:
            kind = kernel_kind(name)
            k = new_kernel(name, kind, text.strip(), lineno)
            k["source_nodes"] = list(nodes)
            k["aten_ops"] = list(aten)
        k["calls"].append(idx)
        if handle:
            k["debug_handles"].append(handle)
        out.calls.append({
            "call_index": idx, "kernel_order": k["order"], "name": name, "kind": k["kind"],
            "function": fname, "source_nodes": list(nodes), "aten_ops": list(aten),
            "debug_handle": handle, "text": text.strip(), "line": lineno,
            "reads": reads, "writes": writes,
        })
    if returns is not None:
        # the values call() returns, in the order of the graph's outputs ("" = not a buffer)
        out.calls.append({
            "call_index": len(out.calls), "kernel_order": None, "name": "return", "kind": "return",
            "function": "call", "source_nodes": [], "aten_ops": [], "debug_handle": None,
            "text": "return", "line": None, "reads": returns, "writes": [],
        })
    return out


# --------------------------------------------------------------------------- provenance
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<fn>[^\n\\]+))?')
PROVENANCE_ARTIFACTS = (
    "inductor_provenance_tracking_node_mappings",
    "inductor_provenance_tracking_kernel_stack_traces",
    "inductor_triton_kernel_to_post_grad_nodes",
)


def _split_handle(key: str) -> tuple[str, int | None]:
    name, sep, h = key.rpartition(":")
    if sep and h.isdigit():
        return name, int(h)
    return key, None


def stack_frame(trace: str) -> dict[str, Any]:
    """user_file/user_line/user_function/user_code of the innermost frame of a stack trace.

    ``trace`` is Python traceback text (``File "path", line N, in fn`` + the code line);
    escaped newlines (``\\n``, written by some producers) are accepted. All None when the
    text has no frame.
    """
    text = trace.replace("\\n", "\n")
    frames = list(_FRAME.finditer(text))
    if not frames:
        return {"user_file": None, "user_line": None, "user_function": None, "user_code": None}
    f = frames[-1]
    rest = text[f.end() :].split("\n")
    code = rest[1].strip() if len(rest) > 1 else None
    return {
        "user_file": f.group("file"), "user_line": int(f.group("line")),
        "user_function": f.group("fn").strip() if f.group("fn") else None,
        "user_code": code or None,
    }


def _innermost_frame(traces: list[str]) -> dict[str, Any]:
    """stack_frame of the first trace that has a frame."""
    for t in traces:
        f = stack_frame(t)
        if f["user_file"] is not None:
            return f
    return stack_frame("")


def parse_provenance(name: str, payload: str | None) -> list[dict[str, Any]]:
    """Rows (PROVENANCE_SCHEMA) from one provenance artifact payload.

    * ``inductor_provenance_tracking_node_mappings`` (torch >= 2.8): ``cppCodeToPost``
      maps kernel keys (``name`` or ``name:debug_handle``) to post-grad nodes; ``postToPre``
      maps post-grad to pre-grad nodes.
    * ``inductor_provenance_tracking_kernel_stack_traces``: kernel key -> user stack traces
      (a list of strings, or one string).
    * ``inductor_triton_kernel_to_post_grad_nodes`` (older torch): kernel -> post-grad nodes.

    An empty or non-JSON payload gives no rows (the FX-cache-hit path logs these artifacts
    without a payload).
    """
    data = json_object(payload)
    if not data:
        return []
    rows: list[dict[str, Any]] = []
    if name == "inductor_provenance_tracking_node_mappings":
        post_to_pre = data.get("postToPre") or {}
        mapping = data.get("cppCodeToPost") or {}
    elif name == "inductor_triton_kernel_to_post_grad_nodes":
        post_to_pre, mapping = {}, data
    elif name == "inductor_provenance_tracking_kernel_stack_traces":
        for key, traces in data.items():
            tr = [traces] if isinstance(traces, str) else [str(t) for t in traces or []]
            kname, handle = _split_handle(key)
            rows.append({
                "artifact": name, "kernel_key": key, "kernel": kname, "debug_handle": handle,
                "post_grad_nodes": [], "pre_grad_nodes": [], "stack_traces": tr,
                **_innermost_frame(tr),
            })
        return rows
    else:
        return []
    for key, post in mapping.items():
        post = [str(x) for x in post or []]
        pre: list[str] = []
        for p in post:
            for q in post_to_pre.get(p, []) or []:
                qn = q.get("name") if isinstance(q, dict) else str(q)
                if qn and qn not in pre:
                    pre.append(qn)
        kname, handle = _split_handle(key)
        rows.append({
            "artifact": name, "kernel_key": key, "kernel": kname, "debug_handle": handle,
            "post_grad_nodes": post, "pre_grad_nodes": pre, "stack_traces": [],
            "user_file": None, "user_line": None, "user_function": None, "user_code": None,
        })
    return rows


# ---------------------------------------------------------------- AOTInductor C++ code
_AOT_KERNEL_DEF = re.compile(r'^extern "C"\s+(?:\w+\s+)*void\s+(?P<name>\w+)\(')
_AOT_SHIM = re.compile(r"\b(?P<fn>aoti_torch_(?:cpu|cuda|xpu|mps)_\w+)\(")
_AOT_LAUNCH = re.compile(r"^\s*(?:kernels\.)?(?P<name>[A-Za-z_]\w*)\(")
# a Triton kernel of an AOTInductor GPU wrapper: a launcher `static inline void call_<name>(`
# whose body opens with the kernel's Python source in a comment:
# `async_compile.triton('<name>', '''` <source> `''', device_str='cuda')`
_AOT_TRITON_CALLER = re.compile(r"^static inline void (?P<caller>call_(?P<name>\w+))\(")
_AOT_TRITON_OPEN = re.compile(r"^(?P<indent>\s*)async_compile\.(?P<method>triton)\('(?P<name>\w+)', '{3}$")


def parse_aot_code(wrapper: str, kernel_code: str | None = None) -> OutputCode:
    """Kernels and launches of an AOTInductor compile: the C++ wrapper (`graph_dump`
    ``inductor_aot_wrapper_code``) and its kernel file (``inductor_aot_kernel_code``).

    Kernel definitions are the ``extern "C" void name(...)`` functions of the kernel file
    (``cpp``; their text up to the closing ``}`` at column 0), or their declarations in the
    wrapper when there is no kernel file; on a GPU, the Triton kernels the wrapper embeds as
    comments in their launchers (``static inline void call_<name>(...)`` opening with
    ``async_compile.triton('<name>', '''<source>''', ...)``): kind ``triton``/``template``,
    named by the kernel, code the source de-indented, launched as ``call_<name>(...)``.
    Launches are read from
    ``AOTInductorModel::run_impl`` in order: a defined kernel called by name, and the C shims
    of ATen ops Inductor did not generate code for (``aoti_torch_cpu_addmm_out(...)``: kind
    ``extern``, named by the shim), each with the ``// Topologically Sorted Source Nodes``
    comment before it. The wrapper has no ``# AOT ID`` line (``aot_id`` is None).
    """
    out = OutputCode()
    by_name: dict[str, dict[str, Any]] = {}

    def add(name: str, kind: str, code: str, line: int, nodes: list[str], aten: list[str]) -> dict[str, Any]:
        row = {
            "order": len(out.kernels), "name": name, "kind": kind, "variant": _variant(name, kind),
            "code": code, "kernel_path": None, "source_nodes": list(nodes), "aten_ops": list(aten),
            "post_grad_nodes": [], "debug_handles": [], "calls": [], "line": line,
        }
        out.kernels.append(row)
        return row

    def definitions(text: str, whole: bool) -> None:
        lines = text.split("\n")
        i = 0
        while i < len(lines):
            m = _AOT_KERNEL_DEF.match(lines[i])
            if not m or m.group("name") in by_name:
                i += 1
                continue
            j = i
            if whole:
                while j + 1 < len(lines) and lines[j].rstrip() != "}":
                    j += 1
            else:
                while j + 1 < len(lines) and not lines[j].rstrip().endswith(";"):
                    j += 1
            by_name[m.group("name")] = add(m.group("name"), "cpp", "\n".join(lines[i : j + 1]), i + 1, [], [])
            i = j + 1

    def triton_definitions(lines: list[str]) -> None:
        caller = None
        i = 0
        while i < len(lines):
            cm = _AOT_TRITON_CALLER.match(lines[i])
            if cm:
                caller = cm
            om = _AOT_TRITON_OPEN.match(lines[i]) if caller and "async_compile." in lines[i] else None
            if om is None or caller is None or om.group("name") != caller.group("name") or caller.group("caller") in by_name:
                i += 1
                continue
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith("'''"):
                j += 1
            ind = len(om.group("indent"))
            body = [x[ind:] if x[:ind].strip() == "" else x for x in lines[i + 1 : j]]
            code = "\n" + "\n".join(body) + "\n"
            name = om.group("name")
            by_name[caller.group("caller")] = add(name, kernel_kind(name, om.group("method"), code), code, i + 1, [], [])
            caller = None
            i = j + 1

    if kernel_code:
        definitions(kernel_code, True)
    definitions(wrapper, False)
    lines = wrapper.split("\n")
    triton_definitions(lines)
    inside = False
    pend: tuple[list[str], list[str]] | None = None
    for idx, raw in enumerate(lines):
        line = raw.rstrip("\r")
        if not inside:
            inside = line.startswith("void AOTInductorModel::run_impl(")
            continue
        if line.startswith("}"):
            break
        sm = _SOURCE_NODES.match(line.replace("//", "#", 1)) if "Source Nodes: [" in line else None
        if sm:
            pend = (_split_list(sm.group("nodes")), _split_list(sm.group("aten")))
            continue
        nodes, aten = pend if pend else ([], [])
        shim = _AOT_SHIM.search(line)
        launch = _AOT_LAUNCH.match(line) if shim is None else None
        if shim:
            name = shim.group("fn")
            k = add(name, "extern", line.strip(), idx + 1, nodes, aten)
        elif launch and launch.group("name") in by_name:
            k = by_name[launch.group("name")]
            name = k["name"]  # a Triton kernel's launcher call_<name> launches <name>
            _add_origin(k, nodes, aten)
        else:
            continue
        call = len(out.calls)
        k["calls"].append(call)
        out.calls.append({
            "call_index": call, "kernel_order": k["order"], "name": name, "kind": k["kind"],
            "function": "run_impl", "source_nodes": list(nodes), "aten_ops": list(aten),
            "debug_handle": None, "text": line.strip(), "line": idx + 1, "reads": [], "writes": [],
        })
        pend = None
    return out
