"""Which post-grad nodes each kernel computes, from the wrapper's dataflow (no guessing).

The wrapper (``call()``) says which buffers each launch reads and writes (the ``reads`` /
``writes`` columns of ``kernel_calls``, built by parsers.outputcode from Inductor's parameter
names ``in_ptr``/``out_ptr``/``in_out_ptr``, ``out=`` of extern calls and buffer reuse
lines) and what it returns (the ``return`` row, in the order of the graph's outputs). The
post-grad graph says which node feeds which. Values are tied to post-grad nodes by facts
only:

* a graph input is the placeholder of the same name;
* the i-th returned value is the i-th output of the post-grad graph (views stripped);
* the last value written into a graph input is the source of the graph's ``copy_`` into it;
* an extern call's result is the one unclaimed node of its op whose inputs are the call's
  inputs (the ``Source Nodes`` comment picks among several; no single node: no tie).

A generated kernel (C++, Triton) whose every read and written value is tied computes exactly
the nodes between them: walking the graph back from its written nodes, stopping at the nodes
it reads; a written value no call reads is the kernel's scratch space, not a boundary. A
kernel with a value left untied gets no rows here (origin then looks for another tie, or says
there is none). Without a post-grad graph (a text log without ``post_grad_graphs``) the AOT
graph it was made from is walked instead. Per-graph Python over small graphs (a wrapper holds
tens to hundreds of launches).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import polars as pl

from parsers.lexing import split_top_level

__all__ = ["DATAFLOW_SCHEMA", "kernel_dataflow"]

DATAFLOW_SCHEMA = pl.Schema({"kernel_id": pl.String, "node": pl.String})

# ops that only change how memory is read: a kernel never materializes them on their own
_VIEWS = {
    "view",
    "_unsafe_view",
    "reshape",
    "permute",
    "t",
    "transpose",
    "expand",
    "squeeze",
    "unsqueeze",
    "slice",
    "select",
    "as_strided",
    "alias",
    "_reshape_alias",
    "view_as",
    "unflatten",
    "flatten",
    "split",
    "split_with_sizes",
    "unbind",
    "narrow",
    "diagonal",
}
_IDENT = re.compile(r"[A-Za-z_]\w*")
_GETITEM = re.compile(r"^\s*(\w+)\[(\d+)\]\s*$")  # ``getitem`` args: ``_foreach_add[76]``
_AOT = ["aot_forward", "aot_backward", "aot_inference"]
_GENERATED = ("cpp", "triton", "template", "halide", "mps")


def _op(target: str | None) -> str | None:
    """``aten.mm.default`` / ``torch.ops.aten.mm.default`` / ``extern_kernels.mm`` -> ``mm``."""
    if not target:
        return None
    t = target.removeprefix("torch.ops.")
    parts = t.split(".")
    return parts[1] if len(parts) >= 2 else parts[0]


def _closes_at(text: str) -> int:
    """Index of the bracket that closes the one ``text`` starts with (-1 if none)."""
    depth = 0
    for i, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0:
            return i
    return -1


def _split_top(text: str) -> list[str]:
    """The items of a tuple or list (its brackets taken off), or of a bare argument list."""
    text = text.strip()
    if text[:1] in "([" and _closes_at(text) == len(text) - 1:
        text = text[1:-1]
    return split_top_level(text)


class _Graph:
    def __init__(self, rows: Iterable[dict]) -> None:
        self.args: dict[str, list[str]] = {}
        self.op: dict[str, str | None] = {}
        self.placeholders: set[str] = set()
        self.outputs: list[str] = []
        self.items: dict[str, list[list[str] | None]] = {}
        self.raw: dict[str, str] = {}
        rows = list(rows)
        names = {r["node"] for r in rows}
        for r in rows:
            n, args = r["node"], r["args"] or ""
            if r["op"] == "placeholder":
                self.placeholders.add(n)
            elif r["op"] == "output":
                self.outputs = [x if x in names else "" for x in _split_top(args)]
            else:
                self.args[n] = [a for a in _IDENT.findall(args) if a in names and a != n]
                self.op[n] = _op(r["target"])
                self.raw[n] = args
                # list arguments (``_foreach_*`` ops) and getitem indices, element by element
                items = _split_top(args)
                self.items[n] = [
                    [x for x in _split_top(it) if x in names]
                    if it.startswith("[")
                    else ([it] if it in names else None)
                    for it in items
                ]

    def base(self, n: str) -> str:
        """The node a chain of views starts from."""
        seen = set()
        while self.op.get(n) in _VIEWS and self.args.get(n) and n not in seen:
            seen.add(n)
            n = self.args[n][0]
        return n

    def bases(self, n: str) -> set[str]:
        return {self.base(a) for a in self.args.get(n, [])}

    def between(self, writes: set[str], reads: set[str]) -> set[str]:
        """Nodes on a path into ``writes`` that start at ``reads`` or at no input at all."""
        out: set[str] = set()
        seen: set[tuple[str, int | None]] = set()
        # (node, element): a getitem of a multi-output node (``_foreach_add``) depends only
        # on that element of each list argument, not on the whole lists
        stack: list[tuple[str, int | None]] = [(w, None) for w in writes]
        while stack:
            n, i = stack.pop()
            if (n, i) in seen or n in reads or n in self.placeholders or n not in self.args:
                continue
            seen.add((n, i))
            out.add(n)
            items = self.items.get(n, [])
            gm = _GETITEM.match(self.raw.get(n, "")) if self.op[n] == "getitem" else None
            if gm and gm.group(1) in self.args:
                stack.append((gm.group(1), int(gm.group(2))))
                continue
            if i is not None and any(it is not None and len(it) > 1 for it in items):
                for it in items:
                    if it is not None and len(it) > 1:
                        stack.extend((x, None) for x in it[i : i + 1])
                    elif it:
                        stack.append((it[0], None))
                continue
            stack.extend((a, None) for a in self.args[n])
        return out


def _tie(calls: list[dict], g: _Graph) -> dict[str, str]:
    """value -> post-grad node, from placeholders, returned outputs and extern calls."""
    tied: dict[str, str] = {p: p for p in g.placeholders}
    ret = next((c for c in calls if c["kind"] == "return"), None)
    if ret is not None and len(ret["reads"]) == len(g.outputs):
        for v, n in zip(ret["reads"], g.outputs, strict=True):
            if v and n and v not in g.placeholders:
                tied.setdefault(v, g.base(n))
    # a mutated graph input: its last value in the wrapper is what the graph copies into it
    # (``copy_(arg0_1, add)`` at the end of the post-grad graph)
    last: dict[str, str] = {}
    for c in calls:
        for v in c["writes"]:
            last[v.split("~")[0]] = v
    for n, op in g.op.items():
        args = g.args.get(n, [])
        if op == "copy_" and len(args) == 2 and args[0] in g.placeholders and args[0] in last:
            tied.setdefault(last[args[0]], g.base(args[1]))
    # ... or, where the post-grad graph mutates it in place (``_foreach_add_(...)``), that
    # in-place node when it is the only one that takes the input
    inplace: dict[str, list[str]] = {}
    for n, op in g.op.items():
        if op and op.endswith("_") and not op.endswith("__") and op != "copy_":
            for a in set(g.args.get(n, [])) & g.placeholders:
                inplace.setdefault(a, []).append(n)
    picks: dict[tuple[str, int], str] = {}
    for n in g.op:
        gm = _GETITEM.match(g.raw.get(n, "")) if g.op[n] == "getitem" else None
        if gm:
            picks[(gm.group(1), int(gm.group(2)))] = n
    for p, v in last.items():
        if p in g.placeholders and v not in tied and len(inplace.get(p, [])) == 1:
            n = inplace[p][0]
            first = next((it for it in g.items.get(n, []) if it), [])
            # ``_foreach_add_([a, b], ...)``: b's new value is ``_foreach_add[1]``
            tied[v] = picks.get((n, first.index(p)), n) if p in first else n
    externs = [c for c in calls if c["kind"] in ("extern", "fallback") and c["writes"]]
    claimed: set[str] = set(tied.values()) - g.placeholders
    changed = True
    while changed:
        changed = False
        for c in externs:
            if all(w in tied for w in c["writes"]) and all(r in tied for r in c["reads"]):
                continue
            op = _op(c["name"])
            known = {tied[r] for r in c["reads"] if r in tied}
            if c["reads"] and not known:
                # no input tied: "the only node of this op left" would be a guess (a node of
                # the same op may be computed by a template kernel, not by an extern call)
                continue
            cands = [
                n
                for n, o in g.op.items()
                if o == op
                and known <= g.bases(n)
                and (n not in claimed or any(tied.get(w) == n for w in c["writes"]))
            ]
            named = [n for n in cands if n in (c["source_nodes"] or [])]
            cands = named or cands
            if len(cands) != 1 or len(c["writes"]) != 1:
                continue
            n = cands[0]
            if c["writes"][0] not in tied:
                tied[c["writes"][0]] = n
                claimed.add(n)
                changed = True
            free_reads = [r for r in c["reads"] if r not in tied]
            free_args = g.bases(n) - known
            if len(free_reads) == 1 and len(free_args) == 1:
                tied[free_reads[0]] = free_args.pop()
                changed = True
    return tied


def kernel_dataflow(kernel_calls: pl.DataFrame, graph_nodes: pl.DataFrame) -> pl.DataFrame:
    """(kernel_id, node) rows: the post-grad nodes each generated kernel computes, for the
    kernels whose every read and written buffer is tied to a node (see the module doc)."""
    rows: list[dict] = []
    if kernel_calls.is_empty() or graph_nodes.is_empty():
        return pl.DataFrame(rows, schema=DATAFLOW_SCHEMA)
    pg = graph_nodes.filter(pl.col("graph_kind").is_in(["post_grad", *_AOT])).select(
        "graph_kind",
        "graph_id",
        "rank",
        "compile_id",
        "source",
        "aot_id",
        "file",
        "lineno",
        "node",
        "op",
        "target",
        "args",
    )
    wrappers = kernel_calls.select(
        "rank", "compile_id", "source", "graph", "file", "lineno"
    ).unique()
    for w in wrappers.iter_rows(named=True):
        # the post-grad graph logged last before this wrapper in the same file and compile
        cand = pg.filter(
            (pl.col("file") == w["file"])
            & (pl.col("lineno") < w["lineno"])
            & pl.col("rank").eq_missing(w["rank"])
            & pl.col("compile_id").eq_missing(w["compile_id"])
            & pl.col("aot_id").eq_missing(w["graph"])
        )
        if cand.is_empty():
            continue
        # the post-grad graph Inductor scheduled; without it (TORCH_LOGS without
        # post_grad_graphs) the AOT graph it was made from
        post = cand.filter(pl.col("graph_kind") == "post_grad")
        cand = cand if post.is_empty() else post
        last = cand.select(pl.col("lineno").max()).item()
        g = _Graph(cand.filter(pl.col("lineno") == last).iter_rows(named=True))
        calls = (
            kernel_calls.filter((pl.col("file") == w["file"]) & (pl.col("lineno") == w["lineno"]))
            .sort("call_index")
            .to_dicts()
        )
        tied = _tie(calls, g)
        # values some call (or the return) reads: a written value nothing reads is scratch
        # space of its kernel (``amax``/``sum`` buffers of a softmax), not a boundary
        used = {v for c in calls for v in c["reads"]}
        for c in calls:
            if c["kind"] not in _GENERATED or not c["writes"]:
                continue
            outs = [v for v in c["writes"] if v in tied or v in used]
            if not outs or not all(v in tied for v in [*c["reads"], *outs]):
                continue
            nodes = g.between({tied[v] for v in outs}, {tied[v] for v in c["reads"]})
            rows.extend({"kernel_id": c["kernel_id"], "node": n} for n in sorted(nodes))
    return pl.DataFrame(rows, schema=DATAFLOW_SCHEMA).unique(maintain_order=True)
