"""FX graph text (``GraphModule.print_readable``) -> one row per graph node.

The text is what torch writes for ``dynamo_output_graph``, ``aot_*_graph``,
``before/after_pre_grad_graph``, ``before/after_joint_graph``, ``before_post_grad_graph``,
``inductor_post_grad_graph``, ``optimize_ddp_split_*``, ``compiled_autograd_graph`` in a
TORCH_TRACE, and the ``TRACED GRAPH`` blocks of TORCH_LOGS (``aot_graphs``, ``graph_code``,
``post_grad_graphs``, ...). The grammar is torch/fx/graph.py ``CodeGen._gen_python_code``
(verbose) wrapped by ``_print_readable``:

* ``class <Name>(torch.nn.Module):`` then ``def forward(self, ...):`` (one line, or one
  parameter per line with ``# PlainAOTInput(idx=0)`` comments when ``expanded_def=True``);
  submodules of higher-order ops are nested classes printed after the parent's body.
* a node is ``name: "f32[16, 64][64, 1]cpu" = torch.ops.aten.mm.default(a, b);  a = None``;
  operators print as ``x = a + b``, getitem as ``x = t[0]``, two-argument getattr as
  ``x = t.shape``, call_method as ``x = t.view(...)``, get_attr as ``x = self.c``,
  call_module as ``x = self.sub(...)``, in-place operators as ``a += b;  iadd = a``.
* placeholders are the ``forward`` parameters; ``l_x_ = L_x_`` renames one; joint graphs
  declare them in the body (``primals_1: "f32[...]"  # PlainAOTInput(idx=0)``) and unpack
  them with ``primals_1, ..., = fx_pytree.tree_flatten_spec(...)``.
* a comment ``# File: <path>:<line> in <fn>, code: <src>`` (older torch: without
  ``in <fn>``) or ``# No stacktrace found for following nodes`` precedes a run of nodes;
  ``print_readable(additional_meta=["seq_nr"])`` prefixes it with ``seq_nr: N #``, and
  ``include_meta`` prints a ``\"\"\"...\"\"\"`` block with ``seq_nr: N`` before a node.

Only the graph text is read: no analysis here.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

import polars as pl

__all__ = [
    "GRAPH_KINDS",
    "NODE_SCHEMA",
    "GraphDump",
    "graph_kind",
    "is_graph_text",
    "parse_fx_graph",
    "parse_fx_graph_rows",
    "split_traced_graphs",
]

#: Columns of :func:`parse_fx_graph` (documented in docs/tables-graphs.md, `graph_nodes`).
NODE_SCHEMA: dict[str, Any] = {
    "order": pl.Int32,
    "module": pl.String,
    "node": pl.String,
    "op": pl.String,
    "target": pl.String,
    "annotation": pl.String,
    "args": pl.String,
    "user_file": pl.String,
    "user_line": pl.Int32,
    "user_function": pl.String,
    "user_code": pl.String,
    "node_meta": pl.String,
    "seq_nr": pl.Int64,
    "line": pl.Int32,
}

#: Graph kind for a trace event kind or artifact name (anything else keeps its raw name).
GRAPH_KINDS: dict[str, str] = {
    "dynamo_output_graph": "dynamo",
    "aot_joint_graph": "aot_joint",
    "aot_forward_graph": "aot_forward",
    "aot_backward_graph": "aot_backward",
    "aot_inference_graph": "aot_inference",
    "before_pre_grad_graph": "pre_grad_before",
    "after_pre_grad_graph": "pre_grad_after",
    "before_joint_graph": "joint_before",
    "after_joint_graph": "joint_after",
    "before_post_grad_graph": "post_grad_before",
    "inductor_post_grad_graph": "post_grad",
    # older torch (tlparse's provenance inputs) logged the post-grad graph under this name
    "after_post_grad_graph": "post_grad",
    "optimize_ddp_split_graph": "ddp_split",
    "optimize_ddp_split_child": "ddp_child",
    "compiled_autograd_graph": "compiled_autograd",
}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CLASS = re.compile(r"^(?P<indent>\s*)(?:(?P<path>\S.*?) )?class (?P<name>[^\s(]+)\((?P<base>[^)]*)\):\s*$")
_DEF = re.compile(r"^(?P<indent>\s*)def forward\((?P<rest>.*)$")
_DEF_END = re.compile(r"^\s*\)\s*(?:->.*)?:\s*$")
_STACK = re.compile(
    r"(?:^|\s)File: (?P<file>.+?):(?P<line>\d+)(?: in (?P<fn>.+?))?, code: (?P<code>.*)$"
)
_NO_STACK = "No stacktrace found for following nodes"
_SEQ_NR = re.compile(r"\bseq_nr['\"]?\s*[:=]\s*['\"]?(?P<n>-?\d+)")
_ASSIGN = re.compile(
    r'^(?P<name>[A-Za-z_]\w*)(?:\s*:\s*(?:"(?P<qann>(?:[^"\\]|\\.)*)"|(?P<ann>[^=":][^=]*?)))?'
    r"\s*=\s*(?P<rhs>.*)$"
)
_DECL = re.compile(r'^(?P<name>[A-Za-z_]\w*)\s*:\s*"(?P<ann>(?:[^"\\]|\\.)*)"\s*(?:#\s*(?P<c>.*))?$')
_TUPLE = re.compile(r"^(?P<names>[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*,?\s*=\s*(?P<rhs>.*)$")
_INPLACE = re.compile(
    r"^(?P<lhs>.+?) (?P<op>\+|-|\*|/|//|%|\*\*|@|&|\||\^|<<|>>)= (?P<rhs>.+?);  "
    r'(?P<name>[A-Za-z_]\w*)(?:\s*:\s*"(?P<ann>(?:[^"\\]|\\.)*)")? = (?P<arg0>.+)$'
)
_DEL_TRAILER = re.compile(r"^(?:[A-Za-z_]\w* = )+None$")
_CALL_HEAD = re.compile(r"^(?P<fn>[A-Za-z_][\w.]*)\(")
_TRACED_HEADER = re.compile(r"^\s*===== (?P<title>.*?) =====\s*$")
_GRAPH_TEXT = re.compile(r"^(?:\S.* )?class [^\s(]+\(torch\.nn\.Module\):")

_INPLACE_NAMES = {
    "+": "iadd", "-": "isub", "*": "imul", "/": "itruediv", "//": "ifloordiv", "%": "imod",
    "**": "ipow", "@": "imatmul", "&": "iand", "|": "ior", "^": "ixor", "<<": "ilshift",
    ">>": "irshift",
}
_AST_BINOP = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
    ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul",
    ast.BitAnd: "and_", ast.BitOr: "or_", ast.BitXor: "xor", ast.LShift: "lshift",
    ast.RShift: "rshift",
}
_AST_UNARY = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert", ast.Not: "not_"}
_AST_CMP = {
    ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge",
    ast.Is: "is_", ast.IsNot: "is_not", ast.In: "contains",
}


def graph_kind(name: str) -> str:
    """Graph kind for a trace event kind / artifact name (see GRAPH_KINDS); raw name otherwise."""
    return GRAPH_KINDS.get(name, name)


def is_graph_text(text: str | None) -> bool:
    """True when ``text`` starts like ``print_readable`` output (``class X(torch.nn.Module):``)."""
    if not text:
        return False
    first = text.lstrip("\r\n").split("\n", 1)[0]
    return bool(_GRAPH_TEXT.match(_ANSI.sub("", first).lstrip()))


# --------------------------------------------------------------------------- text logs
@dataclass(frozen=True)
class GraphDump:
    """One ``TRACED GRAPH`` block cut out of a TORCH_LOGS record."""

    title: str  #: text between the ``=====`` rules, e.g. ``Forward graph 0``
    kind: str  #: graph kind (``aot_forward``, ``aot_backward``, ... or the raw title)
    aot_graph: int | None  #: the number in ``Forward graph 0`` (AOT id), else None
    text: str  #: the graph text: from the ``<path> class ...`` line to the block's end
    line_offset: int  #: 0-based line of ``text``'s first line within the record text


_TITLE_KINDS = (
    (re.compile(r"^Forward graph(?: (\d+))?$"), "aot_forward"),
    (re.compile(r"^Backward graph(?: (\d+))?$"), "aot_backward"),
    (re.compile(r"^Joint graph(?: (\d+))?$"), "aot_joint"),
    (re.compile(r"^BEFORE PRE GRAD$"), "pre_grad_before"),
    (re.compile(r"^AFTER POST GRAD$"), "post_grad"),
    (re.compile(r"^Compiled autograd graph$"), "compiled_autograd"),
    (re.compile(r"^__compiled_fn_\d+.*$"), "dynamo"),
)


def split_traced_graphs(text: str) -> list[GraphDump]:
    """Cut the ``TRACED GRAPH`` / `` ===== <title> =====`` blocks out of a text-log record.

    A record may hold one block (one logging call) or several (consecutive lines merged);
    a block ends at the next ``TRACED GRAPH`` line or header. Lines before the first header
    (``aot_config id: ...``) are not graphs. Trailing blank lines of a block are dropped;
    every other byte of the block is kept. ``Forward graph N`` is reported as
    ``aot_forward`` here; callers that see no ``Backward graph N`` for the same compile may
    call it ``aot_inference`` (the inference path logs the same title).
    """
    lines = text.split("\n")
    heads: list[tuple[int, str]] = []
    for i, raw in enumerate(lines):
        m = _TRACED_HEADER.match(_ANSI.sub("", raw))
        if m:
            heads.append((i, m.group("title")))
    out: list[GraphDump] = []
    for k, (i, title) in enumerate(heads):
        end = heads[k + 1][0] if k + 1 < len(heads) else len(lines)
        if k + 1 < len(heads) and end - 1 > i and _ANSI.sub("", lines[end - 1]).strip() == "TRACED GRAPH":
            end -= 1
        body = lines[i + 1 : end]
        while body and not body[-1].strip():
            body.pop()
        kind, number = title, None
        for pat, k_name in _TITLE_KINDS:
            m = pat.match(title)
            if m:
                kind = k_name
                if m.groups() and m.group(1) is not None:
                    number = int(m.group(1))
                break
        out.append(GraphDump(title, kind, number, "\n".join(body), i + 1))
    return out


# --------------------------------------------------------------------------- helpers
def _split_code_comment(s: str) -> tuple[str, str | None]:
    """Split ``code  # comment`` outside of string literals."""
    quote = ""
    i = 0
    while i < len(s):
        c = s[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "#":
            return s[:i].rstrip(), s[i + 1 :].strip()
        i += 1
    return s, None


def _split_top(s: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` at bracket depth 0 outside of strings."""
    parts: list[str] = []
    depth = 0
    quote = ""
    start = 0
    i = 0
    while i < len(s):
        c = s[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(s[start:i])
            start = i + 1
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts if p.strip()]


def _paren_balance(s: str) -> int:
    depth = 0
    quote = ""
    i = 0
    while i < len(s):
        c = s[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "#":
            break
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        i += 1
    return depth


def _closes_at_end(s: str, open_idx: int) -> bool:
    """True when the bracket at ``open_idx`` is closed by the last character of ``s``."""
    depth = 0
    quote = ""
    i = open_idx
    n = len(s)
    while i < n:
        c = s[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i == n - 1
        i += 1
    return False


_PARAM = re.compile(
    r'^(?P<name>\*{0,2}[A-Za-z_]\w*)(?:\s*:\s*(?:"(?P<qann>(?:[^"\\]|\\.)*)"|(?P<ann>[^=]+?)))?'
    r"(?:\s*=\s*(?P<default>.+))?$"
)


def _parse_param(p: str) -> tuple[str, str | None, str | None] | None:
    m = _PARAM.match(p.strip())
    if not m:
        return None
    name = m.group("name")
    ann = m.group("qann") if m.group("qann") is not None else m.group("ann")
    return name, (ann.strip() if ann is not None else None), m.group("default")


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _strip_ops(target: str) -> str:
    return target[len("torch.ops.") :] if target.startswith("torch.ops.") else target


def _classify(rhs: str, known: set[str]) -> tuple[str, str | None, str]:
    """(op, target, args) of a node's right-hand side."""
    m = _CALL_HEAD.match(rhs)
    if m and rhs.endswith(")") and _closes_at_end(rhs, m.end() - 1):
        fn = m.group("fn")
        args = rhs[m.end() : -1]
        root, _, rest = fn.partition(".")
        if root == "self" and rest:
            return "call_module", rest, args
        if root in known and rest and "." not in rest:
            return "call_method", rest, args
        return "call_function", _strip_ops(fn), args
    if rhs.startswith("self.") and re.fullmatch(r"self\.[\w.]+", rhs):
        return "get_attr", rhs[5:], rhs
    try:
        expr = ast.parse(rhs, mode="eval").body
    except SyntaxError:
        return "unknown", None, rhs
    if isinstance(expr, ast.Subscript):
        return "call_function", "operator.getitem", rhs
    if isinstance(expr, ast.BinOp):
        return "call_function", "operator." + _AST_BINOP.get(type(expr.op), "unknown"), rhs
    if isinstance(expr, ast.UnaryOp):
        return "call_function", "operator." + _AST_UNARY.get(type(expr.op), "unknown"), rhs
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
        return "call_function", "operator." + _AST_CMP.get(type(expr.ops[0]), "unknown"), rhs
    if isinstance(expr, ast.Attribute):
        return "call_function", "getattr", rhs
    if isinstance(expr, ast.Call):  # a call that is not the whole expression, e.g. f(x)[0]
        fn = _dotted(expr.func)
        if fn is not None:
            return "call_function", _strip_ops(fn), rhs
    return "unknown", None, rhs


# --------------------------------------------------------------------------- parser
class _Module:
    __slots__ = ("decls", "indent", "known", "path", "sig_names", "sig_rows", "source")

    def __init__(self, path: str, indent: int) -> None:
        self.path = path
        self.indent = indent
        self.sig_rows: list[dict[str, Any]] = []  # placeholder rows made from the signature
        self.sig_names: dict[str, dict[str, Any]] = {}
        self.decls: dict[str, tuple[str | None, str | None, int]] = {}
        self.known: set[str] = set()
        self.source: dict[str, Any] = _NO_SOURCE


_NO_SOURCE: dict[str, Any] = {
    "user_file": None, "user_line": None, "user_function": None, "user_code": None,
    "node_meta": None, "seq_nr": None,
}


def _source_from_comment(comment: str) -> dict[str, Any] | None:
    """Parse a stack-summary comment (text after the first ``#``); None if it is not one."""
    m = _STACK.search(comment)
    if m:
        pre = comment[: m.start()].strip()
        src = {
            "user_file": m.group("file"),
            "user_line": int(m.group("line")),
            "user_function": m.group("fn"),
            "user_code": m.group("code"),
        }
    elif _NO_STACK in comment:
        pre = comment[: comment.index(_NO_STACK)].strip()
        src = {"user_file": None, "user_line": None, "user_function": None, "user_code": None}
    else:
        return None
    pre = pre.rstrip("#").strip()
    sm = _SEQ_NR.search(pre)
    src["node_meta"] = pre or None
    src["seq_nr"] = int(sm.group("n")) if sm else None
    return src


def parse_fx_graph_rows(text: str) -> list[dict[str, Any]]:
    """Parse ``print_readable`` text into node rows (dicts with the NODE_SCHEMA keys)."""
    rows: list[dict[str, Any]] = []
    lines = text.split("\n")
    stack: list[_Module] = []
    n = len(lines)
    i = 0
    pending_seq: int | None = None

    def emit(mod: _Module, node: str, op: str, target: str | None, ann: str | None,
             args: str | None, lineno: int, source: dict[str, Any] | None = None) -> dict[str, Any]:
        nonlocal pending_seq
        src = mod.source if source is None else source
        row = {
            "order": 0, "module": mod.path, "node": node, "op": op, "target": target,
            "annotation": ann, "args": args, **src, "line": lineno,
        }
        if pending_seq is not None and op not in ("placeholder", "output"):
            row["seq_nr"] = pending_seq
            pending_seq = None
        rows.append(row)
        mod.known.add(node)
        return row

    while i < n:
        raw = lines[i]
        line = _ANSI.sub("", raw).rstrip("\r")
        stripped = line.strip()
        lineno = i + 1
        i += 1
        if not stripped:
            continue
        cm = _CLASS.match(line)
        if cm and "torch.nn.Module" in cm.group("base"):
            # the first class is the graph (its line may carry a path prefix in text logs);
            # nested classes (higher-order-op bodies) are indented under it
            indent = len(cm.group("indent")) if stack else 0
            while stack and stack[-1].indent >= indent:
                stack.pop()
            name = cm.group("name")
            path = f"{stack[-1].path}.{name}" if stack else name
            stack.append(_Module(path, indent))
            continue
        if not stack:
            continue
        mod = stack[-1]
        dm = _DEF.match(line)
        if dm:
            rest = dm.group("rest")
            params: list[tuple[str, str | None, str | None, str | None, int]] = []
            if _paren_balance("(" + rest) <= 0:  # one-line signature
                inner = rest[: rest.rfind(")")] if ")" in rest else rest
                for p in _split_top(inner):
                    parsed = _parse_param(p)
                    if parsed:
                        params.append((*parsed, None, lineno))
            else:
                while i < n:
                    pl_raw = _ANSI.sub("", lines[i]).rstrip("\r")
                    i += 1
                    if _DEF_END.match(pl_raw):
                        break
                    code, comment = _split_code_comment(pl_raw.strip())
                    for p in _split_top(code):
                        parsed = _parse_param(p)
                        if parsed:
                            params.append((*parsed, comment, i))
            mod.source = _NO_SOURCE
            for name, ann, default, comment, pline in params:
                if name == "self":
                    continue
                bare = name.lstrip("*")
                row = emit(mod, bare, "placeholder", bare, ann, comment if default is None
                           else (f"default={default}" + (f"; {comment}" if comment else "")),
                           pline, _NO_SOURCE)
                mod.sig_rows.append(row)
                mod.sig_names[bare] = row
            continue
        if stripped.startswith("#"):
            src = _source_from_comment(stripped[1:])
            if src is not None:
                mod.source = src
            continue
        if stripped.startswith('"""'):  # include_meta block
            body = stripped[3:]
            block = [body] if body and not body.endswith('"""') else []
            if not (body.endswith('"""') and len(stripped) > 3):
                while i < n:
                    b = _ANSI.sub("", lines[i]).rstrip("\r")
                    i += 1
                    if b.strip().endswith('"""'):
                        block.append(b.strip()[:-3])
                        break
                    block.append(b)
            sm = _SEQ_NR.search("\n".join(block))
            if sm:
                pending_seq = int(sm.group("n"))
            continue
        if stripped == "pass":
            continue
        if stripped.startswith("return"):
            expr = stripped[len("return") :].strip()
            parts = [expr]
            depth = _paren_balance(expr)
            while depth > 0 and i < n:
                nxt = _ANSI.sub("", lines[i]).rstrip("\r")
                i += 1
                parts.append(nxt.strip())
                depth += _paren_balance(nxt)
            emit(mod, "output", "output", "output", None, "\n".join(parts), lineno, _NO_SOURCE)
            continue
        code = stripped
        # drop the ``;  a = b = None`` deletion trailer
        k = code.rfind(";  ")
        if k >= 0 and _DEL_TRAILER.match(code[k + 3 :]):
            code = code[:k]
        # in-place operator: ``a += b;  iadd = a``
        im = _INPLACE.match(code)
        if im:
            emit(mod, im.group("name"), "call_function",
                 "operator." + _INPLACE_NAMES[im.group("op")], im.group("ann"),
                 f"{im.group('lhs')}, {im.group('rhs')}", lineno)
            continue
        # placeholders declared in the body (joint graphs; older torch: several on one line
        # joined by ``; ``), unpacked later by ``... = fx_pytree.tree_flatten_spec(...)``
        dc = _DECL.match(code)
        decls = [dc] if dc else (
            [_DECL.match(d) for d in _split_top(code, ";")] if '"; ' in code else [])
        if decls and all(decls):
            for dc in decls:
                mod.decls[dc.group("name")] = (dc.group("ann"), dc.group("c"), lineno)
            continue
        tm = _TUPLE.match(code)
        if tm and ("," in tm.group("names") or code.split("=", 1)[0].rstrip().endswith(",")):
            names = [x.strip() for x in tm.group("names").split(",") if x.strip()]
            if "tree_flatten_spec" in tm.group("rhs"):
                drop = {id(r) for r in mod.sig_rows}
                rows[:] = [r for r in rows if id(r) not in drop]
                for r in mod.sig_rows:
                    mod.known.discard(r["node"])
                mod.sig_rows = []
                mod.sig_names = {}
                for nm in names:
                    ann, comment, dl = mod.decls.get(nm, (None, None, lineno))
                    row = emit(mod, nm, "placeholder", nm, ann, comment, dl, _NO_SOURCE)
                    mod.sig_rows.append(row)
                    mod.sig_names[nm] = row
                continue
        am = _ASSIGN.match(code)
        if not am:
            emit(mod, stripped, "unknown", None, None, stripped, lineno)
            continue
        name = am.group("name")
        ann = am.group("qann") if am.group("qann") is not None else am.group("ann")
        if ann is not None:
            ann = ann.strip()
        rhs = am.group("rhs").strip()
        if rhs in mod.sig_names and rhs != name:  # ``l_x_ = L_x_``: placeholder named l_x_
            prow = mod.sig_names.pop(rhs)
            mod.known.discard(prow["node"])
            prow["node"] = name
            prow["target"] = rhs
            mod.known.add(name)
            mod.sig_names[name] = prow
            continue
        op, target, args = _classify(rhs, mod.known)
        emit(mod, name, op, target, ann, args, lineno)
    for k, r in enumerate(rows):
        r["order"] = k
    return rows


def parse_fx_graph(text: str) -> pl.DataFrame:
    """Parse one FX graph text into a DataFrame with the NODE_SCHEMA columns."""
    return pl.DataFrame(parse_fx_graph_rows(text), schema=NODE_SCHEMA)
