"""The reference FX graph parser: ``print_readable`` text -> node rows, line by line.

This readable parser is the specification: :mod:`parsers.fxgraph.columns` (the vectorized
parser for big traces) must give exactly its rows, and the tests compare the two on every
real graph and on odd lines. It also parses little texts and texts with ``include_meta``
blocks itself, and its line rules (the patterns below, :func:`classify`,
:func:`source_from_comment`) serve the vectorized parser for the lines its patterns leave to
Python.

The grammar is torch/fx/graph.py ``CodeGen._gen_python_code`` (verbose) wrapped by
``_print_readable``:

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
"""

from __future__ import annotations

import ast
import bisect
import keyword
import re
from typing import Any

import polars as pl

from parsers.lexing import (
    ANSI,
    balance,
    closes_at_end,
    parse_param,
    signature_params,
    split_code_comment,
    split_top_level,
)

__all__ = [
    "ASSIGN",
    "CALL_HEAD",
    "CLASS",
    "DECL",
    "DEF",
    "DEF_END",
    "DEL_TRAILER",
    "INPLACE",
    "INPLACE_NAMES",
    "NODE_SCHEMA",
    "NO_STACK",
    "TUPLE",
    "classify",
    "find_stack",
    "parse_rows",
    "source_from_comment",
    "strip_ops",
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

# The lines of the grammar (the vectorized parser classifies lines with the same patterns).
CLASS = re.compile(r"^(?P<indent>\s*)(?:(?P<path>\S.*?) )?class (?P<name>[^\s(]+)\((?P<base>[^)]*)\):\s*$")
DEF = re.compile(r"^(?P<indent>\s*)def forward\((?P<rest>.*)$")
DEF_END = re.compile(r"^\s*\)\s*(?:->.*)?:\s*$")
# A stack-summary comment, `File: <file>:<line>[ in <fn>], code: <code>`: what the regex
#   (?:^|\s)File: (?P<file>.+?):(?P<line>\d+)(?: in (?P<fn>.+?))?, code: (?P<code>.*)$
# finds with search, found by find_stack in linear time (the regex is quadratic on many
# `File: ` or `:1 in ` in one line).
_STACK_LINE = re.compile(r":(?P<line>\d+)")
_CODE_SEP = ", code: "
NO_STACK = "No stacktrace found for following nodes"
_SEQ_NR = re.compile(r"\bseq_nr['\"]?\s*[:=]\s*['\"]?(?P<n>-?\d+)")
ASSIGN = re.compile(
    r'^(?P<name>[A-Za-z_]\w*)(?:\s*:\s*(?:"(?P<qann>(?:[^"\\]|\\.)*)"|(?P<ann>[^=":][^=]*?)))?'
    r"\s*=\s*(?P<rhs>.*)$"
)
DECL = re.compile(r'^(?P<name>[A-Za-z_]\w*)\s*:\s*"(?P<ann>(?:[^"\\]|\\.)*)"\s*(?:#\s*(?P<c>.*))?$')
TUPLE = re.compile(r"^(?P<names>[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*,?\s*=\s*(?P<rhs>.*)$")
INPLACE = re.compile(
    r"^(?P<lhs>.+?) (?P<op>\+|-|\*|/|//|%|\*\*|@|&|\||\^|<<|>>)= (?P<rhs>.+?);  "
    r'(?P<name>[A-Za-z_]\w*)(?:\s*:\s*"(?P<ann>(?:[^"\\]|\\.)*)")? = (?P<arg0>.+)$'
)
DEL_TRAILER = re.compile(r"^(?:[A-Za-z_]\w* = )+None$")
CALL_HEAD = re.compile(r"^(?P<fn>[A-Za-z_][\w.]*)\(")

INPLACE_NAMES = {
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


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def strip_ops(target: str) -> str:
    return target[len("torch.ops.") :] if target.startswith("torch.ops.") else target


def classify(rhs: str, known: set[str]) -> tuple[str, str | None, str]:
    """(op, target, args) of a node's right-hand side."""
    m = CALL_HEAD.match(rhs)
    if m and rhs.endswith(")") and closes_at_end(rhs, m.end() - 1):
        fn = m.group("fn")
        args = rhs[m.end() : -1]
        root, _, rest = fn.partition(".")
        if root == "self" and rest:
            return "call_module", rest, args
        if root in known and rest and "." not in rest:
            return "call_method", rest, args
        return "call_function", strip_ops(fn), args
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
            return "call_function", strip_ops(fn), rhs
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


def source_from_comment(comment: str) -> dict[str, Any] | None:
    """Parse a stack-summary comment (text after the first ``#``); None if it is not one."""
    found = find_stack(comment)
    if found:
        start, file, line, fn, code = found
        pre = comment[:start].strip()
        src = {"user_file": file, "user_line": int(line), "user_function": fn, "user_code": code}
    elif NO_STACK in comment:
        pre = comment[: comment.index(NO_STACK)].strip()
        src = {"user_file": None, "user_line": None, "user_function": None, "user_code": None}
    else:
        return None
    pre = pre.rstrip("#").strip()
    sm = _SEQ_NR.search(pre)
    src["node_meta"] = pre or None
    src["seq_nr"] = int(sm.group("n")) if sm else None
    return src


def find_stack(comment: str) -> tuple[int, str, str, str | None, str] | None:
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


def parse_rows(text: str) -> list[dict[str, Any]]:
    """Reference parser, line by line (used for small texts and ``include_meta`` blocks).

    Rows are dicts with the NODE_SCHEMA keys, in the order of the text."""
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
        line = (ANSI.sub("", raw) if "\x1b" in raw else raw).rstrip("\r")
        stripped = line.strip()
        lineno = i + 1
        i += 1
        if not stripped:
            continue
        cm = CLASS.match(line) if "class " in line else None
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
        dm = DEF.match(line) if "def forward(" in line else None
        if dm:
            rest = dm.group("rest")
            params: list[tuple[str, str | None, str | None, str | None, int]] = []
            if balance("(" + rest) <= 0:  # one-line signature
                for parsed in signature_params(rest):
                    params.append((*parsed, None, lineno))
            else:
                while i < n:
                    pl_raw = ANSI.sub("", lines[i]).rstrip("\r")
                    i += 1
                    if DEF_END.match(pl_raw):
                        break
                    code, comment = split_code_comment(pl_raw.strip())
                    for p in split_top_level(code):
                        parsed = parse_param(p)
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
            src = source_from_comment(stripped[1:])
            if src is not None:
                mod.source = src
            continue
        if stripped.startswith('"""'):  # include_meta block
            body = stripped[3:]
            block = [body] if body and not body.endswith('"""') else []
            if not (body.endswith('"""') and len(stripped) > 3):
                while i < n:
                    b = ANSI.sub("", lines[i]).rstrip("\r")
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
            depth = balance(expr)
            while depth > 0 and i < n:
                nxt = ANSI.sub("", lines[i]).rstrip("\r")
                i += 1
                parts.append(nxt.strip())
                depth += balance(nxt)
            emit(mod, "output", "output", "output", None, "\n".join(parts), lineno, _NO_SOURCE)
            continue
        code = stripped
        # drop the ``;  a = b = None`` deletion trailer
        k = code.rfind(";  ")
        if k >= 0 and DEL_TRAILER.match(code[k + 3 :]):
            code = code[:k]
        # in-place operator: ``a += b;  iadd = a``
        im = INPLACE.match(code) if ";  " in code else None
        if im:
            emit(mod, im.group("name"), "call_function",
                 "operator." + INPLACE_NAMES[im.group("op")], im.group("ann"),
                 f"{im.group('lhs')}, {im.group('rhs')}", lineno)
            continue
        # placeholders declared in the body (joint graphs; older torch: several on one line
        # joined by ``; ``), unpacked later by ``... = fx_pytree.tree_flatten_spec(...)``
        dc = DECL.match(code) if '"' in code else None
        decls = [dc] if dc else (
            [DECL.match(d) for d in split_top_level(code, ";")] if '"; ' in code else [])
        if decls and all(decls):
            for dc in decls:
                mod.decls[dc.group("name")] = (dc.group("ann"), dc.group("c"), lineno)
            continue
        tm = TUPLE.match(code) if "," in code else None
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
        am = ASSIGN.match(code)
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
        op, target, args = classify(rhs, mod.known)
        emit(mod, name, op, target, ann, args, lineno)
    for k, r in enumerate(rows):
        r["order"] = k
    return rows
