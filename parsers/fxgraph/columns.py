"""The vectorized FX graph parser: many graph texts at once, column by column.

:func:`parse_many` explodes the texts into lines and reads them with polars string kernels
(the big traces hold thousands of graphs). It must give exactly the rows of the reference
parser, :func:`parsers.fxgraph.reference.parse_rows`, which is its specification (the tests
compare the two); for the lines its patterns do not cover it calls the reference's line rules
(:func:`~parsers.fxgraph.reference.classify`,
:func:`~parsers.fxgraph.reference.source_from_comment`, the grammar's patterns). Which texts
go to which parser is :mod:`parsers.fxgraph.cache`'s choice (:data:`VECTOR_MIN_BYTES`).
"""

from __future__ import annotations

import bisect
import keyword
import re
from typing import Any

import numpy as np
import polars as pl

from parsers.fxgraph.reference import (
    ASSIGN,
    CALL_HEAD,
    CLASS,
    DECL,
    DEF,
    DEF_END,
    DEL_TRAILER,
    INPLACE,
    INPLACE_NAMES,
    NO_STACK,
    NODE_SCHEMA,
    TUPLE,
    classify,
    source_from_comment,
    strip_ops,
)
from parsers.lexing import (
    ANSI,
    balance,
    closes_at_end,
    parse_param,
    signature_params,
    split_code_comment,
    split_top_level,
)

__all__ = ["VECTOR_MIN_BYTES", "parse_many"]

# parse_many parses all texts at once with polars string kernels: the texts are exploded
# into lines, lines are classified with literal tests and anchored regexes, the `# File:`
# comment in force is looked up for every node (sorted search per module), and order is a row
# number per graph. Python runs only on the structural lines (class, def, return,
# tree_flatten_spec unpacking, `l_x_ = L_x_` renames, body declarations) and on lines the fast
# patterns do not cover (non-ASCII text, in-place operators, operator expressions, ...), with
# the helpers of reference.parse_rows, so both parsers give identical rows. Texts with
# include_meta `"""` blocks go to reference.parse_rows whole.

# Below this much text (bytes) the line-by-line parser is the faster one.
VECTOR_MIN_BYTES = 100_000
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
    `closes_at_end` holds."""
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
_V_SIG_PLAIN = rf"^{_AS}*(?:{_V_SIG_P}{_AS}*,{_AS}*)*(?:{_V_SIG_P}{_AS}*)?$"  # lexing's _SIG_PLAIN
_V_PARAM = (
    rf'^(?P<name>\*{{0,2}}{_AID})(?:{_AS}*:{_AS}*"(?P<ann>[^"\\]*)")?{_AS}*,?{_AS}*'
    r"(?:#(?P<c>.*))?$"
)
_KEYWORDS = list(keyword.kwlist)
_IDENT = re.compile(r"[A-Za-z_]\w*")

def _line_kind(clean: str) -> int:
    """Kind of a line, tested in the order of parse_rows."""
    s = clean.strip()
    if not s:
        return _K_BLANK
    cm = CLASS.match(clean)
    if cm and "torch.nn.Module" in cm.group("base"):
        return _K_CLASS
    if DEF.match(clean):
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
    code, comment = split_code_comment(clean.strip())
    out = []
    for p in split_top_level(code):
        parsed = parse_param(p)
        if parsed:
            out.append((*parsed, comment))
    return out


def _classify_struct(rhs: str) -> tuple[str, str | None, str, str | None, str | None]:
    """`classify` without the node set: (op, target, args, root, method). For ``x.m(...)``
    root/method are set: the op is call_method when ``root`` is a known node by then."""
    m = CALL_HEAD.match(rhs)
    if m and rhs.endswith(")") and closes_at_end(rhs, m.end() - 1):
        fn = m.group("fn")
        args = rhs[m.end() : -1]
        root, _, rest = fn.partition(".")
        if root == "self" and rest:
            return "call_module", rest, args, None, None
        if rest and "." not in rest:
            return "call_function", strip_ops(fn), args, root, rest
        return "call_function", strip_ops(fn), args, None, None
    op, target, args = classify(rhs, set())
    return op, target, args, None, None


def _node_record(stripped: str) -> tuple[Any, ...]:
    """A statement line on its own: ("node", name, op, target, ann, args, root, method,
    rename_candidate), ("decl", [(name, ann, comment)]) or ("tree", [names])."""
    code = stripped
    k = code.rfind(";  ")
    if k >= 0 and DEL_TRAILER.match(code[k + 3 :]):
        code = code[:k]
    im = INPLACE.match(code)
    if im:
        return ("node", im.group("name"), "call_function",
                "operator." + INPLACE_NAMES[im.group("op")], im.group("ann"),
                f"{im.group('lhs')}, {im.group('rhs')}", None, None, False)
    dc = DECL.match(code)
    decls = [dc] if dc else (
        [DECL.match(d) for d in split_top_level(code, ";")] if '"; ' in code else [])
    if decls and all(decls):
        return ("decl", [(d.group("name"), d.group("ann"), d.group("c")) for d in decls if d])
    tm = TUPLE.match(code)
    if (tm and ("," in tm.group("names") or code.split("=", 1)[0].rstrip().endswith(","))
            and "tree_flatten_spec" in tm.group("rhs")):
        return ("tree", [x.strip() for x in tm.group("names").split(",") if x.strip()])
    am = ASSIGN.match(code)
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
                      c.str.find(NO_STACK, literal=True).alias("ns"))
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
    tree_flatten_spec unpacking (3) of one module, in line order, as parse_rows does."""
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

def parse_many(tx: pl.Series, gids: np.ndarray) -> pl.DataFrame:
    """parse_fx_graphs for texts without ``\"\"\"`` blocks (``gids``: their graph numbers)."""
    n_lines = (tx.str.count_matches("\n", literal=True) + 1).to_numpy().astype(np.int64)
    starts = np.zeros(len(n_lines) + 1, dtype=np.int64)
    np.cumsum(n_lines, out=starts[1:])
    total = int(starts[-1])
    gpos = np.repeat(np.arange(len(n_lines)), n_lines)  # graph position of every line
    li = np.arange(total, dtype=np.int64) - starts[gpos]  # 0-based line number in its graph

    # ---- lines, and their kind (in the order parse_rows tests them)
    raw = tx.str.split("\n").explode()
    if tx.str.contains("\x1b", literal=True).any():
        raw = raw.str.replace_all(ANSI.pattern, "")
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
         if DEF_END.match(c)], dtype=np.int64)

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
            cm = CLASS.match(c)
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
            rest = DEF.match(c).group("rest")
            if balance("(" + rest) <= 0:
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
            depth = balance(expr)
            i = j - g0 + 1
            buf: list[str] = []
            b0 = i
            while depth > 0 and i < g1 - g0:
                if i - b0 >= len(buf):  # the next cleaned lines of this graph
                    b0, buf = i, L["clean"].slice(g0 + i, 256).to_list()
                nxt = buf[i - b0]
                i += 1
                parts.append(nxt.strip())
                depth += balance(nxt)
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
            r = source_from_comment(s_[1:])
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
        keep = [(k, p) for k, p in enumerate(signature_params(rest_, pln)) if p[0] != "self"]
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

