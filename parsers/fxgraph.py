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

Only the graph text is read: no analysis here. ``parse_fx_graphs`` parses many texts at once
with polars string kernels (for the big traces); it gives exactly the rows of the line-by-line
parser (``parse_fx_graph_rows``), which it uses for little text and odd lines.
"""

from __future__ import annotations

import ast
import bisect
import keyword
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

__all__ = [
    "GRAPH_KINDS",
    "NODE_SCHEMA",
    "GraphDump",
    "graph_kind",
    "is_graph_text",
    "parse_fx_graph",
    "parse_fx_graph_rows",
    "parse_fx_graphs",
    "split_top_level",
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
# A stack-summary comment, `File: <file>:<line>[ in <fn>], code: <code>`: what the regex
#   (?:^|\s)File: (?P<file>.+?):(?P<line>\d+)(?: in (?P<fn>.+?))?, code: (?P<code>.*)$
# finds with search, found by _find_stack in linear time (the regex is quadratic on many
# `File: ` or `:1 in ` in one line).
_STACK_LINE = re.compile(r":(?P<line>\d+)")
_CODE_SEP = ", code: "
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


_SIMPLE_OPS = {
    "+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv", "%": "mod",
    "**": "pow", "@": "matmul", "&": "and_", "|": "or_", "^": "xor", "<<": "lshift",
    ">>": "rshift", "==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge",
}
_OPERAND = r"[A-Za-z_][A-Za-z0-9_]*|(?:0|[1-9][0-9]*)(?:\.[0-9]+)?"
# `x[0]` (Subscript), `x.a` (Attribute), `a <op> b` (BinOp / Compare), as ast parses them
_SIMPLE_EXPR = re.compile(
    r"(?P<a>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<i>\[-?(?:0|[1-9][0-9]*)\])|\.(?P<b>[A-Za-z_][A-Za-z0-9_]*))"
    rf"|(?P<m>{_OPERAND}) (?P<op>\*\*|//|<<|>>|<=|>=|==|!=|[-+*/%@&|^<>]) (?P<n>{_OPERAND})"
)
_KEYWORD_SET = frozenset(keyword.kwlist)


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
def _unquoted(s: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """(index, character) of ``s`` from ``start``, skipping string literals (and their
    quotes and escapes)."""
    quote = ""
    i = start
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
        else:
            yield i, c
        i += 1


def _split_code_comment(s: str) -> tuple[str, str | None]:
    """Split ``code  # comment`` outside of string literals."""
    for i, c in _unquoted(s):
        if c == "#":
            return s[:i].rstrip(), s[i + 1 :].strip()
    return s, None


def split_top_level(s: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` at bracket depth 0 outside of strings (empty pieces dropped): the
    arguments of a call, the items of a tuple, in graph and wrapper code alike."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, c in _unquoted(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    return [p.strip() for p in parts if p.strip()]


def _paren_balance(s: str) -> int:
    depth = 0
    for _, c in _unquoted(s):
        if c == "#":
            break
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
    return depth


def _closes_at_end(s: str, open_idx: int) -> bool:
    """True when the bracket at ``open_idx`` is closed by the last character of ``s``."""
    depth = 0
    for i, c in _unquoted(s, open_idx):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i == len(s) - 1
    return False


# (the unquoted annotation is words between runs of whitespace, so that no two quantifiers
# can take the same spaces: `[^=]+?` before `\s*=` was quadratic on a long run of them)
_PARAM = re.compile(
    r'^(?P<name>\*{0,2}[A-Za-z_]\w*)(?:\s*:\s*(?:"(?P<qann>(?:[^"\\]|\\.)*)"'
    r"|(?P<ann>(?=[^=])[^=\s]*(?:\s+[^=\s]+)*)))?"
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
    # the usual shapes without ast: `x[0]`, `x.shape`, `a + b`, `x < 2`
    sm = _SIMPLE_EXPR.fullmatch(rhs)
    if sm and not _KEYWORD_SET.intersection(sm.group("a", "b", "m", "n")):
        if sm.group("i") is not None:
            return "call_function", "operator.getitem", rhs
        if sm.group("b") is not None:
            return "call_function", "getattr", rhs
        return "call_function", "operator." + _SIMPLE_OPS[sm.group("op")], rhs
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
    found = _find_stack(comment)
    if found:
        start, file, line, fn, code = found
        pre = comment[:start].strip()
        src = {"user_file": file, "user_line": int(line), "user_function": fn, "user_code": code}
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


def _find_stack(comment: str) -> tuple[int, str, str, str | None, str] | None:
    """(start, file, line, function, code) of the stack summary in a comment, where the
    regex in _STACK_LINE's comment finds it (start: of the whitespace before `File: `).
    `.` does not cross a newline and `$` is the end (or a final newline), so only the last
    line can hold it; each of its `:N` is looked at once, each `File: ` is a bisection."""
    end = len(comment) - 1 if comment.endswith("\n") else len(comment)
    begin = comment.rfind("\n", 0, end) + 1
    seps = []
    k = comment.find(_CODE_SEP, begin, end)
    while k >= 0:
        seps.append(k)
        k = comment.find(_CODE_SEP, k + 1, end)
    if not seps:
        return None
    # (colon, line, function, where the code starts) of each `:N` the file may end at
    ends: list[tuple[int, str, str | None, int]] = []
    for m in _STACK_LINE.finditer(comment, begin, end):
        d = m.end()
        if comment.startswith(" in ", d):
            j = bisect.bisect_left(seps, d + 5)
            if j < len(seps):
                ends.append((m.start(), m["line"], comment[d + 4 : seps[j]], seps[j] + len(_CODE_SEP)))
                continue
        if comment.startswith(_CODE_SEP, d):
            ends.append((m.start(), m["line"], None, d + len(_CODE_SEP)))
    i = comment.find("File: ", begin, end)
    while i >= 0:
        if i == 0 or comment[i - 1].isspace():
            j = bisect.bisect_left(ends, (i + 7,))  # the file is one character or more
            if j < len(ends):
                colon, line, fn, at = ends[j]
                return max(i - 1, 0), comment[i + 6 : colon], line, fn, comment[at:end]
        i = comment.find("File: ", i + 1, end)
    return None


def _parse_rows_py(text: str) -> list[dict[str, Any]]:
    """Reference parser, line by line (used for small texts and ``include_meta`` blocks)."""
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
        line = (_ANSI.sub("", raw) if "\x1b" in raw else raw).rstrip("\r")
        stripped = line.strip()
        lineno = i + 1
        i += 1
        if not stripped:
            continue
        cm = _CLASS.match(line) if "class " in line else None
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
        dm = _DEF.match(line) if "def forward(" in line else None
        if dm:
            rest = dm.group("rest")
            params: list[tuple[str, str | None, str | None, str | None, int]] = []
            if _balance("(" + rest) <= 0:  # one-line signature
                for parsed in _signature_params(rest):
                    params.append((*parsed, None, lineno))
            else:
                while i < n:
                    pl_raw = _ANSI.sub("", lines[i]).rstrip("\r")
                    i += 1
                    if _DEF_END.match(pl_raw):
                        break
                    code, comment = _split_code_comment(pl_raw.strip())
                    for p in split_top_level(code):
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
            depth = _balance(expr)
            while depth > 0 and i < n:
                nxt = _ANSI.sub("", lines[i]).rstrip("\r")
                i += 1
                parts.append(nxt.strip())
                depth += _balance(nxt)
            emit(mod, "output", "output", "output", None, "\n".join(parts), lineno, _NO_SOURCE)
            continue
        code = stripped
        # drop the ``;  a = b = None`` deletion trailer
        k = code.rfind(";  ")
        if k >= 0 and _DEL_TRAILER.match(code[k + 3 :]):
            code = code[:k]
        # in-place operator: ``a += b;  iadd = a``
        im = _INPLACE.match(code) if ";  " in code else None
        if im:
            emit(mod, im.group("name"), "call_function",
                 "operator." + _INPLACE_NAMES[im.group("op")], im.group("ann"),
                 f"{im.group('lhs')}, {im.group('rhs')}", lineno)
            continue
        # placeholders declared in the body (joint graphs; older torch: several on one line
        # joined by ``; ``), unpacked later by ``... = fx_pytree.tree_flatten_spec(...)``
        dc = _DECL.match(code) if '"' in code else None
        decls = [dc] if dc else (
            [_DECL.match(d) for d in split_top_level(code, ";")] if '"; ' in code else [])
        if decls and all(decls):
            for dc in decls:
                mod.decls[dc.group("name")] = (dc.group("ann"), dc.group("c"), lineno)
            continue
        tm = _TUPLE.match(code) if "," in code else None
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


# --------------------------------------------------------------------------- vectorized parser
# parse_fx_graphs parses all texts at once with polars string kernels: the texts are exploded
# into lines, lines are classified with literal tests and anchored regexes, the `# File:`
# comment in force is looked up for every node (sorted search per module), and order is a row
# number per graph. Python runs only on the structural lines (class, def, return,
# tree_flatten_spec unpacking, `l_x_ = L_x_` renames, body declarations) and on lines the fast
# patterns do not cover (non-ASCII text, in-place operators, operator expressions, ...), with
# the helpers of _parse_rows_py, so both parsers give identical rows. Texts with include_meta
# `"""` blocks go to _parse_rows_py whole.

# Below this much text (bytes) the line-by-line parser is the faster one.
_VECTOR_MIN_BYTES = 100_000
_K_BLANK, _K_PY, _K_CLASS, _K_DEF, _K_COMMENT, _K_RETURN, _K_NODE, _K_TRIPLE = range(8)

# The vectorized patterns only see ASCII lines, where these classes equal Python's \w and \s
# (and polars' strip_chars() equals str.strip()); lines with other characters go to Python.
_AW = "[A-Za-z0-9_]"
_AID = f"[A-Za-z_]{_AW}*"
_AS = r"[\t\n\x0b\x0c\r ]"
_V_CTRL = r"[\x1c-\x1f]"  # whitespace for Python, not for Rust's regex and strip


def _irregular(e: pl.Expr) -> pl.Expr:
    """Text the vectorized patterns do not cover: non-ASCII or \\x1c-\\x1f."""
    return (e.str.len_bytes() != e.str.len_chars()) | e.str.contains(_V_CTRL)


def _dyck(depth: int) -> str:
    """Text whose brackets (outside string literals) never close below the start and end
    balanced, nested at most ``depth`` deep, without ``;``: call arguments for which
    `_closes_at_end` holds."""
    atom = r"""[^()\[\]{}"';]|"[^"\\;]*(?:\\[^;][^"\\;]*)*"|'[^'\\;]*(?:\\[^;][^'\\;]*)*'"""
    level = f"(?:{atom})*"
    for _ in range(depth):
        level = rf"(?:{atom}|[(\[{{]{level}[)\]}}])*"
    return level


# A statement of the vectorized path: ``name: "ann" = rhs`` or ``name = rhs`` without ``;``
# but the ``;  a = b = None`` trailer, no ``=`` in the annotation, no blanks around the
# annotation and the rhs; rhs a call whose parentheses close at its end, ``self.attr``,
# ``x[0]``, ``x.attr`` or a name.
_V_NODE = (
    rf'^{_AID}(?:: "(?:[^"\\;=\s](?:[^"\\;=]*[^"\\;=\s])?)?")? = '
    rf"(?:[A-Za-z_][A-Za-z0-9_.]*\({_dyck(4)}\)|self\.[A-Za-z0-9_.]+"
    rf"|{_AID}\[-?(?:0|[1-9][0-9]*)\]|{_AID}\.{_AID}|{_AID})(?:;  (?:{_AID} = )+None)?$"
)
_V_STACK = (
    rf"^(?P<pre>.*?)(?:^|{_AS})File: (?P<file>.+?):(?P<line>[0-9]+)(?: in (?P<fn>.+?))?, "
    r"code: (?P<code>.*)$"
)
_V_SEQ_NR = rf"\bseq_nr['\"]?{_AS}*[:=]{_AS}*['\"]?(-?[0-9]+)"
_V_SIG_P = rf'\*{{0,2}}{_AID}(?:{_AS}*:{_AS}*"[^"\\]*")?'
_V_SIG_PLAIN = rf"^{_AS}*(?:{_V_SIG_P}{_AS}*,{_AS}*)*(?:{_V_SIG_P}{_AS}*)?$"  # _SIG_PLAIN
_V_PARAM = (
    rf'^(?P<name>\*{{0,2}}{_AID})(?:{_AS}*:{_AS}*"(?P<ann>[^"\\]*)")?{_AS}*,?{_AS}*'
    r"(?:#(?P<c>.*))?$"
)
_KEYWORDS = list(keyword.kwlist)
# a quoted string; one left open runs to the end (so the search for one never starts over
# at each quote after it: quadratic), and _unquote keeps its opening quote
_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*(?:(?P<dq>\")|\\?\Z)|'(?:[^'\\]|\\.)*(?:(?P<sq>')|\\?\Z)", re.S)


def _unquote(m: re.Match[str]) -> str:
    return "" if m["dq"] or m["sq"] else m[0][0]
_IDENT = re.compile(r"[A-Za-z_]\w*")
# a one-line signature of plain parameters ``name`` / ``name: "ann"``
_SIG_PARAM = r'\*{0,2}[A-Za-z_]\w*(?:\s*:\s*"[^"\\]*")?'
_SIG_PLAIN = re.compile(rf"\s*(?:{_SIG_PARAM}\s*,\s*)*(?:{_SIG_PARAM}\s*)?")
_SIG_PARAMS = re.compile(r'(\*{0,2}[A-Za-z_]\w*)(?:\s*:\s*("[^"\\]*"))?')


def _balance(s: str) -> int:
    """`_paren_balance` with string methods."""
    if '"' not in s and "'" not in s:
        t = s
    elif "\\" not in s and "'" not in s:
        # double quotes only: every other piece between them is outside the strings
        t = "\0".join(s.split('"')[0::2])
    else:
        t = _QUOTED.sub(_unquote, s)
    k = t.find("#")
    if k >= 0:
        t = t[:k]
    if '"' in t or "'" in t:
        return _paren_balance(s)
    return (t.count("(") + t.count("[") + t.count("{")) - (t.count(")") + t.count("]") + t.count("}"))


def _signature_params(rest: str, plain: bool | None = None
                      ) -> list[tuple[str, str | None, str | None]]:
    """(name, annotation, default) of a one-line ``def forward(<rest>``; ``plain``: whether
    the parameters match _SIG_PLAIN, when known."""
    inner = rest[: rest.rfind(")")] if ")" in rest else rest
    if plain if plain is not None else _SIG_PLAIN.fullmatch(inner):
        return [(n, q[1:-1].strip() if q else None, None) for n, q in _SIG_PARAMS.findall(inner)]
    return [parsed for parsed in map(_parse_param, split_top_level(inner)) if parsed]


def _line_kind(clean: str) -> int:
    """Kind of a line, tested in the order of _parse_rows_py."""
    s = clean.strip()
    if not s:
        return _K_BLANK
    cm = _CLASS.match(clean)
    if cm and "torch.nn.Module" in cm.group("base"):
        return _K_CLASS
    if _DEF.match(clean):
        return _K_DEF
    if s.startswith("#"):
        return _K_COMMENT
    if s.startswith('"""'):
        return _K_TRIPLE
    if s == "pass":
        return _K_BLANK
    if s.startswith("return"):
        return _K_RETURN
    return _K_NODE


def _param_line(clean: str) -> list[tuple[str, str | None, str | None, str | None]]:
    """Parameters on one line of a multi-line signature: (name, annotation, default, comment)."""
    code, comment = _split_code_comment(clean.strip())
    out = []
    for p in split_top_level(code):
        parsed = _parse_param(p)
        if parsed:
            out.append((*parsed, comment))
    return out


def _classify_struct(rhs: str) -> tuple[str, str | None, str, str | None, str | None]:
    """`_classify` without the node set: (op, target, args, root, method). For ``x.m(...)``
    root/method are set: the op is call_method when ``root`` is a known node by then."""
    m = _CALL_HEAD.match(rhs)
    if m and rhs.endswith(")") and _closes_at_end(rhs, m.end() - 1):
        fn = m.group("fn")
        args = rhs[m.end() : -1]
        root, _, rest = fn.partition(".")
        if root == "self" and rest:
            return "call_module", rest, args, None, None
        if rest and "." not in rest:
            return "call_function", _strip_ops(fn), args, root, rest
        return "call_function", _strip_ops(fn), args, None, None
    op, target, args = _classify(rhs, set())
    return op, target, args, None, None


def _node_record(stripped: str) -> tuple[Any, ...]:
    """A statement line on its own: ("node", name, op, target, ann, args, root, method,
    rename_candidate), ("decl", [(name, ann, comment)]) or ("tree", [names])."""
    code = stripped
    k = code.rfind(";  ")
    if k >= 0 and _DEL_TRAILER.match(code[k + 3 :]):
        code = code[:k]
    im = _INPLACE.match(code)
    if im:
        return ("node", im.group("name"), "call_function",
                "operator." + _INPLACE_NAMES[im.group("op")], im.group("ann"),
                f"{im.group('lhs')}, {im.group('rhs')}", None, None, False)
    dc = _DECL.match(code)
    decls = [dc] if dc else (
        [_DECL.match(d) for d in split_top_level(code, ";")] if '"; ' in code else [])
    if decls and all(decls):
        return ("decl", [(d.group("name"), d.group("ann"), d.group("c")) for d in decls if d])
    tm = _TUPLE.match(code)
    if (tm and ("," in tm.group("names") or code.split("=", 1)[0].rstrip().endswith(","))
            and "tree_flatten_spec" in tm.group("rhs")):
        return ("tree", [x.strip() for x in tm.group("names").split(",") if x.strip()])
    am = _ASSIGN.match(code)
    if not am:
        return ("node", stripped, "unknown", None, None, stripped, None, None, False)
    name = am.group("name")
    ann = am.group("qann") if am.group("qann") is not None else am.group("ann")
    if ann is not None:
        ann = ann.strip()
    rhs = am.group("rhs").strip()
    rename = rhs != name and _IDENT.fullmatch(rhs) is not None
    op, target, args, root, meth = _classify_struct(rhs)
    return ("node", name, op, target, ann, args, root, meth, rename)


_S = pl.String
_NODE_COLS = {"gl": pl.Int64, "node": _S, "op": _S, "target": _S, "annotation": _S, "args": _S,
              "mroot": _S, "mrest": _S, "rn": pl.Boolean}
_SRC_COLS = {"gl": pl.Int64, "user_file": _S, "user_line": pl.Int32, "user_function": _S,
             "user_code": _S, "node_meta": _S, "seq_nr": pl.Int64}
_PH_COLS = {"gl": pl.Int64, "sub": pl.Int64, "node": _S, "annotation": _S, "args": _S,
            "line": pl.Int32}
_ROW_COLS = {"gl": pl.Int64, "sub": pl.Int64, "node": _S, "op": _S, "target": _S,
             "annotation": _S, "args": _S, "line": pl.Int32}


def _fast_nodes(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Node statements (gl, s) -> (records (_NODE_COLS), statements left to Python (gl, s))."""
    df = df.with_columns(pl.col("s").str.contains(_V_NODE).alias("fast"))
    out = _FAST_NODES.collect_plan(df.lazy().filter(pl.col("fast")).drop("fast"))
    left = df.filter(~pl.col("fast")).drop("fast")
    odd = out.filter(pl.col("odd"))
    if odd.height:
        left = pl.concat([left, df.join(odd.select("gl"), on="gl", how="semi").drop("fast")])
        out = out.filter(~pl.col("odd"))
    return out.drop("odd"), left


class _FastNodes:
    """The lazy plan of _fast_nodes for _V_NODE statements (expressions built once)."""

    def __init__(self) -> None:
        s = pl.col("s")
        # In a _V_NODE statement the head ends at the first " = " (the annotation has no
        # "="), the name at the first ":" before it, the rhs at the trailer's ";" (the only
        # one).
        fe, fc = pl.col("fe"), pl.col("fc")
        annotated = (fc < fe).fill_null(False)
        self.finds = [
            "gl", "s",
            s.str.find(" = ", literal=True).alias("fe"),
            s.str.find(":", literal=True).alias("fc"),
            s.str.find(";", literal=True).fill_null(s.str.len_bytes()).alias("end"),
        ]
        rhs0 = s.str.slice(fe + 3, pl.col("end") - fe - 3)
        self.heads = [
            "gl",
            s.str.slice(0, pl.when(annotated).then(fc).otherwise(fe)).alias("node"),
            pl.when(annotated).then(s.str.slice(fc + 3, fe - fc - 4)).alias("annotation"),
            rhs0.alias("rhs"),
        ]
        rhs = pl.col("rhs")
        self.shape = (pl.when(rhs.str.ends_with(")")).then(1).when(rhs.str.ends_with("]"))
                      .then(2).otherwise(3).alias("shape"))
        # calls `fn(inner)`; `x.m(...)` is call_method if x is a known node (decided later)
        p = pl.col("p")
        fn, dot = pl.col("fn"), pl.col("dot")
        root, rest = pl.col("root"), pl.col("rest")
        module_call = ((root == "self") & (rest != "")).fill_null(False)
        method = (~module_call & (rest != "")
                  & ~rest.str.contains(".", literal=True)).fill_null(False)
        none = pl.lit(None, dtype=_S)
        self.calls = [
            [rhs.str.find("(", literal=True).alias("p")],
            [rhs.str.slice(0, p).alias("fn")],
            [fn.str.find(".", literal=True).alias("dot")],
            [pl.when(dot.is_null()).then(fn).otherwise(fn.str.slice(0, dot)).alias("root"),
             fn.str.slice(dot + 1).alias("rest")],  # rest: null without a dot
        ]
        self.calls_out = [
            "gl", "node",
            pl.when(module_call).then(pl.lit("call_module")).otherwise(pl.lit("call_function"))
            .alias("op"),
            pl.when(module_call).then(rest).otherwise(fn.str.strip_prefix("torch.ops."))
            .alias("target"),
            "annotation", rhs.str.slice(p + 1, rhs.str.len_bytes() - p - 2).alias("args"),
            pl.when(method).then(root).alias("mroot"), pl.when(method).then(rest).alias("mrest"),
            pl.lit(False).alias("rn"), pl.lit(False).alias("odd"),
        ]
        # getitem `x[0]`: `None[0]` and the like are not names (left to Python)
        self.items_out = [
            "gl", "node", pl.lit("call_function").alias("op"),
            pl.lit("operator.getitem").alias("target"), "annotation", rhs.alias("args"),
            none.alias("mroot"), none.alias("mrest"), pl.lit(False).alias("rn"),
            rhs.str.slice(0, rhs.str.find("[", literal=True)).is_in(_KEYWORDS).alias("odd"),
        ]
        # `self.a.b` (get_attr), `x.a` (getattr), `x` (a name: maybe `l_x_ = L_x_`)
        attr = rhs.str.slice(dot + 1)
        self_attr = rhs.str.starts_with("self.")
        self.names = [rhs.str.find(".", literal=True).alias("dot")]
        self.names_out = [
            "gl", "node",
            pl.when(self_attr).then(pl.lit("get_attr")).when(dot.is_not_null())
            .then(pl.lit("call_function")).otherwise(pl.lit("unknown")).alias("op"),
            pl.when(self_attr).then(attr).when(dot.is_not_null()).then(pl.lit("getattr"))
            .alias("target"),
            "annotation", rhs.alias("args"), none.alias("mroot"), none.alias("mrest"),
            (dot.is_null() & (rhs != pl.col("node"))).alias("rn"),
            (~self_attr & dot.is_not_null() & (
                rhs.str.slice(0, dot).is_in(_KEYWORDS) | attr.is_in(_KEYWORDS))).alias("odd"),
        ]

    def collect_plan(self, lf: pl.LazyFrame) -> pl.DataFrame:
        heads = lf.select(self.finds).select(self.heads).with_columns(self.shape)
        calls = heads.filter(pl.col("shape") == 1)
        for step in self.calls:
            calls = calls.with_columns(step)
        names = heads.filter(pl.col("shape") == 2).select(self.items_out)
        other = heads.filter(pl.col("shape") == 3).with_columns(self.names).select(self.names_out)
        out = pl.concat([calls.select(self.calls_out), names, other])
        return out.collect(engine="in-memory")


_FAST_NODES = _FastNodes()


def _fast_sources(df: pl.DataFrame) -> pl.DataFrame:
    """Comment lines (gl, s) -> the stack comments among them (_SRC_COLS)."""
    c = pl.col("c")
    has = pl.col("file").is_not_null()
    pre = (
        pl.when(has).then(pl.col("pre")).otherwise(c.str.slice(0, pl.col("ns")))
        .str.strip_chars().str.strip_chars_end("#").str.strip_chars()
    )
    return (
        df.lazy()
        .select("gl", pl.col("s").str.slice(1).alias("c"))
        .with_columns(c.str.extract_groups(_V_STACK).alias("m"),
                      c.str.find(_NO_STACK, literal=True).alias("ns"))
        .unnest("m")
        .filter(has | (pl.col("ns") >= 0))
        .with_columns(pre.alias("pre"))
        .select(
            "gl",
            pl.col("file").alias("user_file"),
            pl.col("line").cast(pl.Int32).alias("user_line"),
            pl.col("fn").alias("user_function"),
            pl.col("code").alias("user_code"),
            pl.when(pl.col("pre") != "").then(pl.col("pre")).alias("node_meta"),
            pl.col("pre").str.extract(_V_SEQ_NR, 1).cast(pl.Int64).alias("seq_nr"),
        )
        .collect(engine="in-memory")
    )


def _fast_params(df: pl.DataFrame, dstart: np.ndarray, li: np.ndarray
                 ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Lines of multi-line signatures (gl, clean, s; ``dstart``: the def lines) ->
    (placeholder rows (_PH_COLS) of the lines holding one plain parameter, the lines left to
    Python (gl, clean)). Blank and comment-only lines hold no parameter."""
    gl = df["gl"].to_numpy()
    s = pl.col("s")
    m = (
        df.with_columns(pl.Series("dgl", dstart[np.searchsorted(dstart, gl, side="right") - 1]),
                        pl.Series("line", li[gl] + 1, dtype=pl.Int32))
        .lazy()
        .filter((s != "") & ~s.str.starts_with("#"))
        .with_columns(s.str.extract_groups(_V_PARAM).alias("m"))
        .unnest("m")
        .collect(engine="in-memory")
    )
    fast = m.filter(pl.col("name").is_not_null() & (pl.col("name") != "self")).select(
        pl.col("dgl").alias("gl"), ((pl.col("gl") - pl.col("dgl")) * (1 << 20)).alias("sub"),
        pl.col("name").str.strip_chars_start("*").alias("node"),
        pl.col("ann").str.strip_chars().alias("annotation"),
        pl.col("c").str.strip_chars().alias("args"), "line",
    )
    return fast, m.filter(pl.col("name").is_null()).select("gl", "clean")


def _module_events(seg: int, seg_arr: np.ndarray, li: np.ndarray,
                   events: list[tuple[int, int, Any]], kev: list[tuple[int, str, int, bool]],
                   renamed_lines: list[int], renames: dict[int, tuple[str, str]],
                   dropped: set[int], tree_rows: list[dict[str, Any]]) -> None:
    """Signature placeholders (0), body declarations (1), `l_x_ = L_x_` renames (2) and
    tree_flatten_spec unpacking (3) of one module, in line order, as _parse_rows_py does."""
    events.sort(key=lambda e: (e[0], e[1]))
    sig: list[Any] = []  # placeholder handles: pid (int) or a tree row (dict)
    names_: dict[str, Any] = {}
    mdecls: dict[str, tuple[str | None, str | None, int]] = {}
    cur: dict[int, str] = {}

    def name_of(h: Any) -> str:
        return cur[h] if isinstance(h, int) else h["node"]

    for gl_, what, data in events:
        if int(np.searchsorted(seg_arr, gl_, side="right")) - 1 != seg:
            continue
        if what == 0:
            pid_, node_ = data
            sig.append(pid_)
            names_[node_] = pid_
            cur[pid_] = node_
        elif what == 1:
            for name, ann, comment in data:
                mdecls[name] = (ann, comment, int(li[gl_]) + 1)
        elif what == 2:
            name, rhs = data
            if rhs in names_:
                h = names_.pop(rhs)
                kev.append((seg, name_of(h), gl_ * 2, False))
                if isinstance(h, int):
                    cur[h] = name
                    renames[h] = (name, rhs)
                else:
                    h["node"], h["target"] = name, rhs
                kev.append((seg, name, gl_ * 2 + 1, True))
                names_[name] = h
                renamed_lines.append(gl_)
        else:
            for h in sig:
                kev.append((seg, name_of(h), gl_ * 2, False))
                if isinstance(h, int):
                    dropped.add(h)
                else:
                    h["drop"] = True
            sig.clear()
            names_.clear()
            for k, nm in enumerate(data):
                ann, comment, dl = mdecls.get(nm, (None, None, int(li[gl_]) + 1))
                row = {"gl": gl_, "sub": k, "node": nm, "op": "placeholder", "target": nm,
                       "annotation": ann, "args": comment, "line": dl, "seg": seg}
                tree_rows.append(row)
                sig.append(row)
                names_[nm] = row
                kev.append((seg, nm, gl_ * 2 + 1, True))


def parse_fx_graphs(texts: pl.Series | list[str | None]) -> pl.DataFrame:
    """Parse many FX graph texts at once.

    Returns the NODE_SCHEMA columns plus ``graph`` (u32, position of the text in ``texts``),
    sorted by graph then ``order``; the rows of each graph equal ``parse_fx_graph(text)``.
    Little text is parsed graph by graph (the vectorized parser has a fixed cost of a few
    milliseconds); texts with ``include_meta`` blocks always are.
    """
    tx = texts if isinstance(texts, pl.Series) else pl.Series("text", texts, dtype=pl.String)
    if tx.dtype != pl.String:
        tx = tx.cast(pl.String)
    if tx.null_count():
        tx = tx.fill_null("")
    schema = {"graph": pl.UInt32, **NODE_SCHEMA}
    if tx.len() == 0:
        return pl.DataFrame(schema=schema)
    if tx.len() >= _CACHE_MIN_TEXTS:
        return _parse_cached(tx)
    return _parse_uncached(tx)


# Parsed graphs of this process by text (two 64-bit hashes and the length: a collision is
# out of reach), for the many calls of one export: the ranks of a job log the same graphs.
_CACHE: dict[tuple[int, int, int], pl.DataFrame] = {}
_CACHE_ROWS = [0]
CACHE_MAX_ROWS = 100_000  # about 20-30 MB of parsed nodes
_CACHE_MIN_TEXTS = 8  # fewer texts: assembling from the cache costs more than it saves


def _parse_cached(tx: pl.Series) -> pl.DataFrame:
    keys = list(zip(tx.hash(11).to_list(), tx.hash(23).to_list(), tx.str.len_bytes().to_list()))
    if _CACHE_ROWS[0] > CACHE_MAX_ROWS:  # over budget: start again (before looking anything up)
        _CACHE.clear()
        _CACHE_ROWS[0] = 0
    new: dict[tuple[int, int, int], int] = {}
    for i, k in enumerate(keys):
        if k not in _CACHE and k not in new:
            new[k] = i
    if new:
        parsed = _parse_uncached(tx.gather(list(new.values())))
        by_graph = parsed.partition_by("graph", as_dict=True, include_key=False)
        empty = parsed.clear().drop("graph")
        for j, k in enumerate(new):
            rows = by_graph.get((j,), empty)
            _CACHE[k] = rows
            _CACHE_ROWS[0] += rows.height
    frames = [_CACHE[k] for k in keys]
    graph = np.repeat(np.arange(len(frames), dtype=np.uint32), [f.height for f in frames])
    # one chunk per column: polars 2.1's element-wise string kernels (str.contains with a
    # column pattern) panic on columns of many small chunks
    return pl.concat(frames).select(pl.Series("graph", graph, dtype=pl.UInt32), *NODE_SCHEMA).rechunk()


def _parse_uncached(tx: pl.Series) -> pl.DataFrame:
    """parse_fx_graphs without the cache."""
    if tx.len() > 1:
        # a trace often logs the same graph text twice (pre_grad before/after, joint
        # before/after, ...): parse each distinct text once, then repeat its rows
        first = pl.DataFrame({"t": tx, "i": np.arange(tx.len())}).select(
            pl.col("i").first().over("t"))["i"].to_numpy()
        uniq = np.flatnonzero(first == np.arange(tx.len()))
        if len(uniq) < tx.len():
            nodes = _parse_distinct(tx.gather(uniq))
            k_of = np.searchsorted(uniq, first)  # graph -> position of its text in uniq
            cnt = np.bincount(nodes["graph"].to_numpy(), minlength=len(uniq))
            start = np.concatenate([[0], np.cumsum(cnt)[:-1]])
            idx = np.concatenate([np.arange(start[k], start[k] + cnt[k]) for k in k_of])
            return nodes[idx].with_columns(
                pl.Series("graph", np.repeat(np.arange(tx.len()), cnt[k_of]), dtype=pl.UInt32))
    return _parse_distinct(tx)


def _parse_distinct(tx: pl.Series) -> pl.DataFrame:
    """parse_fx_graphs of texts (no nulls): vectorized, or line by line for little text."""
    schema = {"graph": pl.UInt32, **NODE_SCHEMA}
    if (tx.str.len_bytes().sum() or 0) < _VECTOR_MIN_BYTES:
        slow = np.ones(tx.len(), dtype=bool)
    else:
        slow = tx.str.contains('"""', literal=True).to_numpy()
    parts: list[pl.DataFrame] = []
    fast_idx = np.flatnonzero(~slow)
    if len(fast_idx):
        sub = tx if len(fast_idx) == tx.len() else tx.gather(fast_idx)
        parts.append(_parse_many(sub, fast_idx))
    slow_idx = np.flatnonzero(slow)
    if len(slow_idx):
        cols: dict[str, list[Any]] = {k: [] for k in schema}
        slow_texts = tx.to_list() if len(slow_idx) == tx.len() else tx.gather(slow_idx).to_list()
        for gi, text in zip(slow_idx.tolist(), slow_texts):
            rows = _parse_rows_py(text)
            cols["graph"].extend([gi] * len(rows))
            for k in NODE_SCHEMA:
                cols[k].extend([r[k] for r in rows])
        parts.append(pl.DataFrame(cols, schema=schema))
    out = pl.concat(parts) if len(parts) > 1 else parts[0]
    if len(slow_idx) and len(fast_idx):
        out = out.sort("graph", maintain_order=True)
    return out


def _parse_many(tx: pl.Series, gids: np.ndarray) -> pl.DataFrame:
    """parse_fx_graphs for texts without ``\"\"\"`` blocks (``gids``: their graph numbers)."""
    n_lines = (tx.str.count_matches("\n", literal=True) + 1).to_numpy().astype(np.int64)
    starts = np.zeros(len(n_lines) + 1, dtype=np.int64)
    np.cumsum(n_lines, out=starts[1:])
    total = int(starts[-1])
    gpos = np.repeat(np.arange(len(n_lines)), n_lines)  # graph position of every line
    li = np.arange(total, dtype=np.int64) - starts[gpos]  # 0-based line number in its graph

    # ---- lines, and their kind (in the order _parse_rows_py tests them)
    raw = tx.str.split("\n").explode()
    if tx.str.contains("\x1b", literal=True).any():
        raw = raw.str.replace_all(_ANSI.pattern, "")
    clean = raw.str.strip_chars_end("\r").alias("clean")
    L = pl.DataFrame([pl.int_range(0, total, eager=True).alias("gl"), clean,
                      clean.str.strip_chars().alias("s")])
    irregular = bool(pl.select(_irregular(pl.lit(tx)).any()).item())
    s, cl = pl.col("s"), pl.col("clean")
    irr = _irregular(cl) if irregular else pl.lit(False)
    kind = (
        pl.when(s == "").then(_K_BLANK)
        .when(cl.str.contains("class ", literal=True) | irr).then(_K_PY)
        .when(s.str.starts_with("#")).then(_K_COMMENT)
        .when(s.str.starts_with("def forward(")).then(_K_DEF)
        .when(s == "pass").then(_K_BLANK)
        .when(s.str.starts_with("return")).then(_K_RETURN)
        .otherwise(_K_NODE)
    )
    flags = L.select(kind.cast(pl.Int8).alias("kind"),
                     (s.str.starts_with(")") | irr).alias("paren"), irr.alias("irr"))
    kinds = flags["kind"].to_numpy().copy()
    irr_np = flags["irr"].to_numpy() if irregular else np.zeros(total, dtype=bool)
    # `class ` lines and irregular lines are classified by Python; so is the end of a
    # multi-line signature (lines starting with ")")
    py_lines = np.flatnonzero(kinds == _K_PY)
    if len(py_lines):
        for j, c in zip(py_lines.tolist(), L["clean"].gather(py_lines).to_list()):
            kinds[j] = _line_kind(c)
    paren = np.flatnonzero(flags["paren"].to_numpy())
    ends = np.asarray(
        [j for j, c in zip(paren.tolist(), L["clean"].gather(paren).to_list())
         if _DEF_END.match(c)], dtype=np.int64)

    # ---- modules, signatures and returns, and the lines they consume (Python, few lines)
    struct = np.flatnonzero((kinds == _K_CLASS) | (kinds == _K_DEF) | (kinds == _K_RETURN))
    seg_gl: list[int] = []  # class line of each module
    seg_path: list[str] = []
    dead_a: list[int] = []  # [a, b) line ranges that are not node/comment lines
    dead_b: list[int] = []
    defs: list[tuple[int, int, int, str | None, int, int]] = []  # gl, seg, lineno, rest, pa, pb
    outs: list[tuple[int, int, int, str]] = []  # gl, seg, lineno, returned expression
    started = np.zeros(len(n_lines), dtype=bool)
    cur, until = -1, -1
    stack: list[tuple[int, str, int]] = []
    for j, c in zip(struct.tolist(), L["clean"].gather(struct).to_list()):
        g = int(gpos[j])
        if g != cur:
            cur, until, stack = g, -1, []
        if j < until:
            continue
        k = kinds[j]
        g0, g1 = int(starts[g]), int(starts[g + 1])
        if k == _K_CLASS:
            cm = _CLASS.match(c)
            indent = len(cm.group("indent")) if stack else 0
            while stack and stack[-1][0] >= indent:
                stack.pop()
            name = cm.group("name")
            path = f"{stack[-1][1]}.{name}" if stack else name
            stack.append((indent, path, len(seg_gl)))
            seg_gl.append(j)
            seg_path.append(path)
            dead_a.append(j if started[g] else g0)
            dead_b.append(j + 1)
            started[g] = True
            continue
        if not stack:
            continue
        seg = stack[-1][2]
        if k == _K_DEF:
            rest = _DEF.match(c).group("rest")
            if _balance("(" + rest) <= 0:
                defs.append((j, seg, j - g0 + 1, rest, 0, 0))
                until = j + 1
            else:  # one parameter per line up to the line `) -> ...:`
                e = int(np.searchsorted(ends, j, side="right"))
                end = int(ends[e]) if e < len(ends) and ends[e] < g1 else g1
                defs.append((j, seg, j - g0 + 1, None, j + 1, end))
                until = min(end + 1, g1)
        else:  # return, possibly continued while brackets are open
            expr = c.strip()[len("return") :].strip()
            parts = [expr]
            depth = _balance(expr)
            i = j - g0 + 1
            buf: list[str] = []
            b0 = i
            while depth > 0 and i < g1 - g0:
                if i - b0 >= len(buf):  # the next cleaned lines of this graph
                    b0, buf = i, L["clean"].slice(g0 + i, 256).to_list()
                nxt = buf[i - b0]
                i += 1
                parts.append(nxt.strip())
                depth += _balance(nxt)
            outs.append((j, seg, j - g0 + 1, "\n".join(parts)))
            until = g0 + i
        dead_a.append(j)
        dead_b.append(until)
    for g in np.flatnonzero(~started).tolist():
        dead_a.append(int(starts[g]))
        dead_b.append(int(starts[g + 1]))
    diff = np.zeros(total + 1, dtype=np.int32)
    np.add.at(diff, np.asarray(dead_a, dtype=np.int64), 1)
    np.add.at(diff, np.asarray(dead_b, dtype=np.int64), -1)
    alive = np.cumsum(diff[:-1]) == 0
    seg_arr = np.asarray(seg_gl, dtype=np.int64)

    def python_lines(mask: np.ndarray) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(regular lines, irregular lines) of L under ``mask``; ``s`` of the irregular ones
        is stripped by Python (which also strips \\x1c-\\x1f)."""
        if not irregular:
            return L.filter(pl.Series(mask)), L.clear()
        odd = L.filter(pl.Series(mask & irr_np))
        odd = odd.with_columns(pl.Series("s", [c.strip() for c in odd["clean"].to_list()],
                                         dtype=_S))
        return L.filter(pl.Series(mask & ~irr_np)), odd

    # ---- stack comments
    com, com_py = python_lines(alive & (kinds == _K_COMMENT))
    src = _fast_sources(com.select("gl", "s"))
    if com_py.height:
        rows = []
        for gl_, s_ in zip(com_py["gl"].to_list(), com_py["s"].to_list()):
            r = _source_from_comment(s_[1:])
            if r is not None:
                rows.append({"gl": gl_, **r})
        src = pl.concat([src, pl.DataFrame(rows, schema=_SRC_COLS)]).sort("gl")

    # ---- node statements
    nd, nd_py = python_lines(alive & (kinds == _K_NODE))
    rec, left = _fast_nodes(nd.select("gl", "s"))
    left = pl.concat([left, nd_py.select("gl", "s")])
    decls: list[tuple[int, list[tuple[str, str | None, str | None]]]] = []
    trees: list[tuple[int, list[str]]] = []
    if left.height:
        rows = []
        for gl_, s_ in zip(left["gl"].to_list(), left["s"].to_list()):
            r = _node_record(s_)
            if r[0] == "node":
                rows.append((gl_, *r[1:]))
            elif r[0] == "decl":
                decls.append((gl_, r[1]))
            else:
                trees.append((gl_, r[1]))
        if rows:
            rec = pl.concat([rec, pl.DataFrame(rows, schema=_NODE_COLS, orient="row")])
    rec = rec.with_columns(
        pl.Series("seg", np.searchsorted(seg_arr, rec["gl"].to_numpy(), side="right") - 1))

    # ---- placeholders: signature parameters (sub orders them within their def line)
    ph_cols: dict[str, list[Any]] = {k: [] for k in _PH_COLS}

    def add_params(dgl: int, params: list[tuple[Any, ...]]) -> None:
        for k, (name, ann, default, comment, pline, sub) in enumerate(params):
            if name == "self":
                continue
            bare = name.lstrip("*")
            ph_cols["gl"].append(dgl)
            ph_cols["sub"].append(sub if sub is not None else k)
            ph_cols["node"].append(bare)
            ph_cols["annotation"].append(ann)
            ph_cols["args"].append(comment if default is None else (
                f"default={default}" + (f"; {comment}" if comment else "")))
            ph_cols["line"].append(pline)

    multi = [d for d in defs if d[3] is None]
    one = [d for d in defs if d[3] is not None]
    ph_parts = []
    # plain signatures are recognized by the Rust regex (ASCII lines)
    plain = pl.Series([d[3][: d[3].rfind(")")] if ")" in d[3] else d[3] for d in one],
                      dtype=_S).str.contains(_V_SIG_PLAIN).to_list()
    for (dgl_, _, line_, rest_, _, _), pln in zip(one, plain):
        pln = None if irr_np[dgl_] else pln
        keep = [(k, p) for k, p in enumerate(_signature_params(rest_, pln)) if p[0] != "self"]
        ph_cols["gl"] += [dgl_] * len(keep)
        ph_cols["sub"] += [k for k, _ in keep]
        ph_cols["node"] += [p[0].lstrip("*") for _, p in keep]
        ph_cols["annotation"] += [p[1] for _, p in keep]
        ph_cols["args"] += [None if p[2] is None else f"default={p[2]}" for _, p in keep]
        ph_cols["line"] += [line_] * len(keep)
    if multi:
        pm = np.zeros(total, dtype=bool)
        for d in multi:
            pm[d[4] : d[5]] = True
        plines, plines_py = python_lines(pm)
        dstart = np.asarray([d[0] for d in multi], dtype=np.int64)
        fast, slow = _fast_params(plines, dstart, li)
        ph_parts.append(fast)
        slow = pl.concat([slow, plines_py.select("gl", "clean")])
        for gl_, c in zip(slow["gl"].to_list(), slow["clean"].to_list()):
            d0 = int(dstart[np.searchsorted(dstart, gl_, side="right") - 1])
            add_params(d0, [(*p, int(li[gl_]) + 1, ((gl_ - d0) << 20) + k)
                            for k, p in enumerate(_param_line(c))])
    ph = pl.concat([pl.DataFrame(ph_cols, schema=_PH_COLS), *ph_parts]).sort("gl", "sub")
    ph = ph.with_columns(
        pl.Series("seg", np.searchsorted(seg_arr, ph["gl"].to_numpy(), side="right") - 1)
    ).with_row_index("pid")

    # ---- renames, declarations and tree_flatten_spec unpacking: Python, in line order,
    # only in the modules that have them
    cand = rec.filter(pl.col("rn")).sort("gl")
    kev: list[tuple[int, str, int, bool]] = []  # known-node events besides the emits
    renamed_lines: list[int] = []
    renames: dict[int, tuple[str, str]] = {}
    dropped: set[int] = set()
    tree_rows: list[dict[str, Any]] = []
    if cand.height or trees:
        tree_seg = {int(np.searchsorted(seg_arr, gl_, side="right")) - 1 for gl_, _ in trees}
        busy = set(cand["seg"].unique().to_list()) | tree_seg
        phb = ph.filter(pl.col("seg").is_in(list(busy)))
        p_pid, p_gl, p_node, p_seg = (phb[c].to_list() for c in ("pid", "gl", "node", "seg"))
        c_gl, c_node, c_rhs, c_seg = (cand[c].to_list() for c in ("gl", "node", "args", "seg"))
        ph_at: dict[int, list[int]] = {}
        for i, sg in enumerate(p_seg):
            ph_at.setdefault(sg, []).append(i)
        cand_at: dict[int, list[int]] = {}
        for j, sg in enumerate(c_seg):
            cand_at.setdefault(sg, []).append(j)
        for seg in sorted(busy):
            pi = ph_at.get(seg, [])
            cj = cand_at.get(seg, [])
            if seg not in tree_seg and (not pi or not cj or p_gl[pi[-1]] < c_gl[cj[0]]):
                # the usual case: the signature, then `l_x_ = L_x_` lines
                names_ = {p_node[i]: p_pid[i] for i in pi}
                for j in cj:
                    h = names_.pop(c_rhs[j], None)
                    if h is not None:
                        name, gl_ = c_node[j], c_gl[j]
                        kev.append((seg, c_rhs[j], gl_ * 2, False))
                        kev.append((seg, name, gl_ * 2 + 1, True))
                        renames[h] = (name, c_rhs[j])
                        names_[name] = h
                        renamed_lines.append(gl_)
                continue
            _module_events(
                seg, seg_arr, li,
                [(p_gl[i], 0, (p_pid[i], p_node[i])) for i in pi]
                + [(g, 1, ds) for g, ds in decls]
                + [(c_gl[j], 2, (c_node[j], c_rhs[j])) for j in cj]
                + [(g, 3, names) for g, names in trees],
                kev, renamed_lines, renames, dropped, tree_rows)
    # placeholder rows as printed: renamed, without the replaced ones
    ph_known = ph.select("seg", pl.col("node").alias("name"), (pl.col("gl") * 2 + 1).alias("pos"))
    if dropped:
        ph = ph.filter(~pl.col("pid").is_in(list(dropped)))
    ph = ph.with_columns(pl.col("node").alias("target"))
    if renames:
        rn = pl.DataFrame({"pid": list(renames), "rn_node": [v[0] for v in renames.values()],
                           "rn_target": [v[1] for v in renames.values()]},
                          schema={"pid": pl.UInt32, "rn_node": _S, "rn_target": _S})
        ph = ph.join(rn, on="pid", how="left").with_columns(
            pl.coalesce("rn_node", "node").alias("node"),
            pl.coalesce("rn_target", "target").alias("target"),
        )
    if renamed_lines:
        rec = rec.filter(~pl.col("gl").is_in(renamed_lines))

    # ---- call_method: the receiver is a node known at that line: the last add/discard
    # event of that name in the module before the line is an add
    q = rec.filter(pl.col("mroot").is_not_null())
    if q.height:
        roots = q["mroot"].unique().to_list()
        rs = set(roots)
        ev: dict[tuple[int, str], list[tuple[int, bool]]] = {}
        for frame in (ph_known.filter(pl.col("name").is_in(roots)),
                      rec.filter(pl.col("node").is_in(roots)).select(
                          "seg", "node", (pl.col("gl") * 2 + 1).alias("pos"))):
            for sg, nm, pos in frame.iter_rows():
                ev.setdefault((sg, nm), []).append((pos, True))
        for o in outs:
            if "output" in rs:
                ev.setdefault((o[1], "output"), []).append((o[0] * 2 + 1, True))
        for sg, nm, pos, add in kev:
            if nm in rs:
                ev.setdefault((sg, nm), []).append((pos, add))
        hits: list[int] = []
        if ev:
            for v in ev.values():
                v.sort()
            for gl_, sg, nm in q.filter(pl.col("mroot").is_in(list({k[1] for k in ev}))).select(
                    "gl", "seg", "mroot").iter_rows():
                v = ev.get((sg, nm))
                if v:
                    k = bisect.bisect_left(v, (gl_ * 2, False)) - 1
                    if k >= 0 and v[k][1]:
                        hits.append(gl_)
        if hits:
            is_m = pl.col("gl").is_in(hits)
            rec = rec.with_columns(
                pl.when(is_m).then(pl.lit("call_method")).otherwise(pl.col("op")).alias("op"),
                pl.when(is_m).then(pl.col("mrest")).otherwise(pl.col("target")).alias("target"),
            )

    # ---- all rows in emission order
    rgl = rec["gl"].to_numpy()
    nodes = rec.select(
        "gl", pl.lit(0, dtype=pl.Int64).alias("sub"), "node", "op", "target", "annotation",
        "args", pl.Series("line", li[rgl] + 1, dtype=pl.Int32), "seg",
    )
    extra = pl.DataFrame(
        [{k: r[k] for k in (*_ROW_COLS, "seg")} for r in tree_rows if not r.get("drop")]
        + [{"gl": o[0], "sub": 0, "node": "output", "op": "output", "target": "output",
            "annotation": None, "args": o[3], "line": o[2], "seg": o[1]} for o in outs],
        schema={**_ROW_COLS, "seg": pl.Int64},
    )
    phr = ph.select("gl", "sub", "node", pl.lit("placeholder").alias("op"), "target",
                    "annotation", "args", "line", "seg")
    allr = pl.concat([nodes, phr, extra]).sort("gl", "sub")

    # ---- module, source comment in force (the last stack comment, class line or
    # signature before the node; none for placeholders and outputs), order
    agl = allr["gl"].to_numpy()
    apos = gpos[agl]
    src_gl = src["gl"].to_numpy()
    ev_gl = np.concatenate([src_gl, seg_arr, np.asarray([d[0] for d in defs], dtype=np.int64)])
    ev_val = np.concatenate([np.arange(len(src_gl)), np.full(len(seg_arr) + len(defs), -1)])
    order_ev = np.argsort(ev_gl, kind="stable")
    ev_gl, ev_val = ev_gl[order_ev], ev_val[order_ev]
    sidx = ev_val[np.searchsorted(ev_gl, agl, side="right") - 1] if len(agl) else agl
    sidx = np.where(allr["op"].is_in(["placeholder", "output"]).to_numpy(), -1, sidx)
    sc = pl.Series(sidx)
    sc = pl.select(pl.when(sc >= 0).then(sc)).to_series()
    out = allr.with_columns(
        pl.Series("graph", gids[apos], dtype=pl.UInt32),
        pl.Series("order", np.arange(len(agl)) - np.searchsorted(agl, starts[apos]),
                  dtype=pl.Int32),
        pl.Series(seg_path, dtype=_S).gather(allr["seg"]).alias("module"),
        *[src[c].gather(sc).alias(c) for c in _SRC_COLS if c != "gl"],
    )
    return out.select("graph", *NODE_SCHEMA)


def parse_fx_graph_rows(text: str) -> list[dict[str, Any]]:
    """Parse ``print_readable`` text into node rows (dicts with the NODE_SCHEMA keys)."""
    if len(text) < _VECTOR_MIN_BYTES:
        return _parse_rows_py(text)
    return parse_fx_graphs([text]).drop("graph").to_dicts()


def parse_fx_graph(text: str) -> pl.DataFrame:
    """Parse one FX graph text into a DataFrame with the NODE_SCHEMA columns."""
    return parse_fx_graphs([text]).drop("graph")
