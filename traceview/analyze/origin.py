"""Where does this backward node, or this kernel, come from in the user's code?

Follows the ``seq_links`` table (built by parsers.seq_links), ``graph_nodes``, ``kernels``
and ``annotations``:

* :func:`origin_table` / :func:`origin` — kernel -> the graph nodes it computes (Inductor
  provenance artifacts, the wrapper's ``Source node to ATen node mapping`` or its
  ``Source Nodes`` comments, or as a last resort the op names in the kernel's name) ->
  backward node -> seq_nr -> forward node -> user file:line and code. One chain per
  (kernel instance or start node, user line); a kernel name found in several compiles or
  ranks gives chains for each, never a pick.

Linking is done with polars joins over whole tables; the only per-row Python is parsing
provenance stack-trace strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from parsers.compile_ids import CompileId, typed
from parsers.dataflow import kernel_dataflow
from parsers.outputcode import stack_frame
from parsers.seq_links import COMPUTE_OPS, USER_COLUMNS, compute_nodes
from parsers.sources import prefer_trace
from traceview.errors import UserError
from traceview.trace import Trace

__all__ = ["CONFIDENCE", "ORIGIN_SCHEMA", "Chain", "origin", "origin_table"]

_S, _I32, _I64 = pl.String, pl.Int32, pl.Int64

ORIGIN_SCHEMA = pl.Schema(
    {
        "rank": _I32, "compile_id": _S, "source": _S, "start": _S, "kernel_id": _S,
        "kernel": _S, "kernel_kind": _S, "graph": _S, "via": _S, "confidence": _S, "node_graph": _S,
        "nodes": pl.List(_S), "backward_nodes": pl.List(_S), "link": _S,
        "seq_nrs": pl.List(_I64), "forward_nodes": pl.List(_S), "user_file": _S,
        "user_line": _I32, "user_function": _S, "user_code": _S, "file": _S, "lineno": _I64,
    }
)


# how a kernel was tied to graph nodes, best first
_VIA_RANK = {"provenance": 0, "aten_mapping": 1, "dataflow": 2, "source_nodes": 3,
             "kernel_name": 4}
#: How sure a chain is, from its ``via``: ``exact`` rests on facts the trace records
#: (provenance, source-node comments, the wrapper's dataflow, seq_nr / stack traces);
#: ``name_match`` rests only on op names in the kernel's name (may be wrong, may miss lines).
CONFIDENCE = {"provenance": "exact", "aten_mapping": "exact", "dataflow": "exact",
              "source_nodes": "exact", "provenance_stack": "exact", "node": "exact",
              "seq_nr": "exact", "kernel_name": "name_match"}
_CONF_RANK = {"exact": 0, "name_match": 1}
#: ``via`` in words, for the text output.
VIA_TEXT = {
    "provenance": "Inductor provenance artifact", "aten_mapping": "source-node mapping comment",
    "source_nodes": "source-node comment", "dataflow": "wrapper dataflow",
    "provenance_stack": "provenance stack trace", "node": "graph node", "seq_nr": "seq_nr",
    "kernel_name": "name match",
}


# -------------------------------------------------------------------------- origin
@dataclass(frozen=True)
class Chain:
    """One origin chain: start (kernel or node) -> graph nodes -> backward nodes -> seq_nr ->
    forward nodes -> user source line. Fields are ORIGIN_SCHEMA columns."""

    rank: int | None
    compile_id: str | None
    source: str | None
    start: str
    kernel_id: str | None
    kernel: str | None
    kernel_kind: str | None
    graph: str | None
    via: str | None
    confidence: str | None
    node_graph: str | None
    nodes: list[str] = field(default_factory=list)
    backward_nodes: list[str] = field(default_factory=list)
    link: str | None = None
    seq_nrs: list[int] = field(default_factory=list)
    forward_nodes: list[str] = field(default_factory=list)
    user_file: str | None = None
    user_line: int | None = None
    user_function: str | None = None
    user_code: str | None = None
    file: str | None = None
    lineno: int | None = None

    @property
    def location(self) -> str | None:
        """``file:line`` of the user source, None when the chain ends before it."""
        return None if self.user_file is None else f"{self.user_file}:{self.user_line}"

    def steps(self) -> list[tuple[str, str]]:
        """The chain as (label, value) pairs, for display."""
        out: list[tuple[str, str]] = []
        if self.kernel:
            out.append(("kernel", f"{self.kernel} ({self.kernel_kind}, {self.graph})"))
        if self.via is not None:
            how = VIA_TEXT.get(self.via, self.via)
            sure = ("exact" if self.confidence == "exact"
                    else "NOT EXACT: a guess from op names in the kernel's name")
            out.append(("via", f"{how} ({sure})"))
        elif self.start == "kernel":
            out.append(("via", "no match: nothing recorded ties this kernel to graph nodes"))
        if self.nodes:
            out.append((f"{self.node_graph or 'graph'} nodes", ", ".join(self.nodes)))
        if self.backward_nodes:
            out.append(("backward nodes", ", ".join(self.backward_nodes)))
        if self.seq_nrs:
            out.append(("seq_nr", ", ".join(str(s) for s in self.seq_nrs)))
        if self.forward_nodes:
            out.append(("forward nodes", ", ".join(self.forward_nodes)))
        if self.user_file is not None:
            out.append(("source", f"{self.location}  {self.user_code or ''}".rstrip()))
        elif self.nodes:
            # e.g. nodes Inductor's post-grad pattern matcher made: no stack trace to follow
            out.append(("source", "none recorded: these nodes carry no `# File:` line"))
        return out


def _filter(df: pl.DataFrame, compile_id: CompileId | None, rank: int | None) -> pl.DataFrame:
    if compile_id is not None:
        df = df.filter(compile_id.selects(occurrence="occurrence" if "occurrence" in df.columns else None))
    if rank is not None:
        df = df.filter(pl.col("rank") == rank)
    return df


def _kernel_nodes(k: pl.DataFrame, graph_nodes: pl.DataFrame, name_match: bool,
                  flow: pl.DataFrame | None = None) -> pl.DataFrame:
    """(kernel_id, node, via) candidates, keeping each kernel's best ``via``."""
    base = ["kernel_id", "rank", "compile_id", "source", "graph"]
    cands = []
    if flow is not None and not flow.is_empty():
        cands.append(k.select(*base).join(flow, on="kernel_id")
                     .with_columns(pl.lit("dataflow").alias("via")))
    for col, via in (("provenance_nodes", "provenance"), ("post_grad_nodes", "aten_mapping"),
                     ("source_nodes", "source_nodes")):
        cands.append(
            k.select(*base, pl.col(col).alias("node")).explode("node")
            .filter(pl.col("node").is_not_null()).with_columns(pl.lit(via).alias("via"))
        )
    c = pl.concat(cands)
    # last resort: post-grad nodes whose op name is a word of the fused kernel name
    # (``cpp_fused_erf_mul_1`` -> erf, mul); CPU wrappers carry no source-node comments
    # (not for a kernel whose provenance gives stack traces: those are exact, see origin_table)
    rest = k.join(c.select("kernel_id").unique(), on="kernel_id", how="anti").filter(
        pl.col("kind").is_in(["triton", "template", "cpp"])
        & (pl.col("provenance_stack").list.len().fill_null(0) == 0)
    )
    if name_match and not rest.is_empty():
        words = rest.select(
            *base,
            pl.format("_{}_", pl.col("name").str.replace(r"^(?:triton_[a-z]+|cpp)_fused_", "")
                      .str.replace(r"_\d+$", "")).alias("words"),
        )
        pg = compute_nodes(graph_nodes, ["post_grad", "aot_forward", "aot_backward",
                                          "aot_inference"]).select(
            "rank", "compile_id", "source", pl.col("aot_id").alias("graph"), "graph_kind",
            "node", pl.format("_{}_", pl.col("target").str.replace(r"^[a-z_0-9]+\.", "")
                              .str.replace(r"\.[A-Za-z_0-9]+$", "")).alias("word"),
        )
        hit = (
            words.join(pg, on=["rank", "compile_id", "source", "graph"], nulls_equal=True)
            .filter(pl.col("words").str.contains(pl.col("word"), literal=True))
        )
        # prefer the post-grad graph when both it and the AOT graph are there
        best = hit.group_by("kernel_id").agg(
            (pl.col("graph_kind") == "post_grad").any().alias("has_pg"))
        hit = hit.join(best, on="kernel_id").filter(
            (pl.col("graph_kind") == "post_grad") | ~pl.col("has_pg")
        )
        c = pl.concat([c, hit.select(*base, "node", pl.lit("kernel_name").alias("via")).unique()])
    c = c.with_columns(pl.col("via").replace_strict(_VIA_RANK, return_dtype=_I32).alias("vr"))
    best = c.group_by("kernel_id").agg(pl.col("vr").min().alias("best"))
    return c.join(best, on="kernel_id").filter(pl.col("vr") == pl.col("best")).drop("vr", "best")


def _resolve(cands: pl.DataFrame, graph_nodes: pl.DataFrame) -> pl.DataFrame:
    """Find each candidate node in the graphs of its compile: post-grad graph of the kernel's
    AOT id, then the AOT graph of that id, then the Dynamo graph (forward source nodes)."""
    nodes = compute_nodes(graph_nodes, ["post_grad", "aot_forward", "aot_backward",
                                         "aot_inference", "dynamo"]).select(
        "rank", "compile_id", pl.col("source").alias("g_source"), pl.col("aot_id").alias("g_aot"),
        "graph_kind", "graph_id", "node", *USER_COLUMNS,
    )
    j = cands.join(nodes, on=["rank", "compile_id", "node"], nulls_equal=True)
    prio = (
        pl.when((pl.col("graph_kind") == "post_grad") & (pl.col("g_aot") == pl.col("graph"))).then(0)
        .when(pl.col("graph_kind").is_in(["aot_forward", "aot_backward", "aot_inference"])
              & (pl.col("g_aot") == pl.col("graph"))).then(1)
        .when((pl.col("graph_kind") == "dynamo")
              & ~pl.col("graph").fill_null("").str.ends_with("_backward")).then(2)
        .otherwise(None)
    )
    j = j.with_columns((prio * 2 + (pl.col("g_source") != pl.col("source")).cast(_I32)).alias("p"))
    j = j.filter(pl.col("p").is_not_null())
    best = j.group_by("kernel_id", "node").agg(pl.col("p").min().alias("bp"))
    return j.join(best, on=["kernel_id", "node"]).filter(pl.col("p") == pl.col("bp")).drop("p", "bp")


def _through_seq(resolved: pl.DataFrame, links: pl.DataFrame | None) -> pl.DataFrame:
    """Backward nodes -> seq_links -> forward nodes and their user line; others keep their own."""
    is_bwd = pl.col("g_aot").fill_null("").str.ends_with("_backward") | (
        pl.col("graph_kind") == "aot_backward")
    bwd = resolved.filter(is_bwd)
    own = resolved.filter(~is_bwd).with_columns(
        pl.lit("direct").alias("link"), pl.lit(None, dtype=_S).alias("backward_node"),
        pl.lit(None, dtype=_I64).alias("seq_nr"), pl.col("node").alias("forward_node"),
    )
    if links is not None and not links.is_empty() and not bwd.is_empty():
        lk = links.select(
            "rank", "compile_id", pl.col("source").alias("g_source"),
            pl.col("backward_aot_id").alias("g_aot2"), pl.col("backward_node").alias("node"),
            pl.col("link").alias("l_link"), pl.col("seq_nr").alias("l_seq"),
            "forward_node", pl.col("user_file").alias("f_file"),
            pl.col("user_line").alias("f_line"), pl.col("user_function").alias("f_fn"),
            pl.col("user_code").alias("f_code"),
        )
        j = bwd.with_columns(pl.col("g_aot").alias("g_aot2")).join(
            lk, on=["rank", "compile_id", "g_source", "g_aot2", "node"], how="left",
            nulls_equal=True,
        )
        hit = j.filter(pl.col("l_link").is_not_null()).with_columns(
            pl.col("l_link").alias("link"), pl.col("node").alias("backward_node"),
            pl.col("l_seq").alias("seq_nr"), pl.col("f_file").alias("user_file"),
            pl.col("f_line").alias("user_line"), pl.col("f_fn").alias("user_function"),
            pl.col("f_code").alias("user_code"),
        )
        miss = j.filter(pl.col("l_link").is_null())
    else:
        hit = None
        miss = bwd
    miss = miss.with_columns(
        pl.lit("node_source").alias("link"), pl.col("node").alias("backward_node"),
        pl.lit(None, dtype=_I64).alias("seq_nr"), pl.lit(None, dtype=_S).alias("forward_node"),
    )
    cols = [*resolved.columns, "link", "backward_node", "seq_nr", "forward_node"]
    parts = [own.select(cols), miss.select(cols)]
    if hit is not None:
        parts.append(hit.select(cols))
    return pl.concat(parts, how="vertical_relaxed")


def _chains(rows: pl.DataFrame, group: list[str], start: str) -> pl.DataFrame:
    uniq = lambda c: pl.col(c).drop_nulls().unique(maintain_order=True)  # noqa: E731
    links = ["seq_nr", "source_line", "node_source", "direct", "provenance_stack"]
    return (
        rows.sort("seq_nr", nulls_last=True)
        .group_by(*group, "user_file", "user_line", maintain_order=True)
        .agg(
            pl.col("via").first(), pl.col("graph_kind").first().alias("node_graph"),
            uniq("node").alias("nodes"), uniq("backward_node").alias("backward_nodes"),
            # the strongest link found for this line
            pl.col("link").replace_strict({k: i for i, k in enumerate(links)}, return_dtype=_I32)
            .min().alias("link_rank"),
            uniq("seq_nr").alias("seq_nrs"), uniq("forward_node").alias("forward_nodes"),
            pl.col("user_function").drop_nulls().first(), pl.col("user_code").drop_nulls().first(),
        )
        .with_columns(
            pl.col("link_rank").replace_strict(dict(enumerate(links)), return_dtype=_S).alias("link"),
            pl.lit(start).alias("start"),
        )
        .drop("link_rank")
    )


def origin_table(
    trace: Trace,
    *,
    kernel: str | None = None,
    node: str | None = None,
    seq_nr: int | None = None,
    compile_id: str | None = None,
    rank: int | None = None,
    source: str | None = None,
    name_match: bool = False,
    kernel_rows: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Origin chains as a table (ORIGIN_SCHEMA), one row per (start, user source line).

    Read from the trace's ``graph_nodes``, ``seq_links``, ``kernels`` and ``kernel_calls``
    (an empty ``kernel_calls``: no dataflow). Give one of ``kernel`` (a kernel name or kernel_id),
    ``node`` (a graph node name) or ``seq_nr``; ``compile_id``/``rank`` narrow the search.
    A start that leads nowhere still gets a row, with null user columns.

    ``source`` (``trace``/``text``) restricts to one input kind; by default a compile seen in
    both a trace and a text log is answered from the trace only. ``name_match=True`` adds, for
    kernels nothing else ties to nodes, the guess from op names in the kernel's name
    (``via = kernel_name``, ``confidence = name_match``); off by default: origin never
    guesses unless asked. ``kernel_rows`` (rows of ``trace.kernels``) starts from all those
    kernels at once, as ``kernel=`` does from one name (the report page's kernel lists).
    """
    if kernel_rows is not None:
        kernel = ""
    if kernel is None and node is None and seq_nr is None:
        raise ValueError("origin needs one of kernel=, node= or seq_nr=")
    try:  # as the user typed it: `1/0`, `[1/0]`, `0/0_1`, `0/0 #2` (parsers.compile_ids)
        cid = None if compile_id is None else typed(compile_id)
    except ValueError as exc:
        raise UserError(f"--compile-id {exc}") from None
    graph_nodes = trace.graph_nodes
    links = trace.seq_links
    if source is not None:
        graph_nodes = graph_nodes.filter(pl.col("source") == source)
        links = links.filter(pl.col("source") == source)
    empty = pl.DataFrame(schema=ORIGIN_SCHEMA)

    if kernel is not None:
        kernels = trace.kernels if kernel_rows is None else kernel_rows
        if kernel_rows is None:
            kernels = kernels.filter((pl.col("name") == kernel) | (pl.col("kernel_id") == kernel))
        k = _filter(kernels, cid, rank)
        k = k.filter(pl.col("source") == source) if source is not None else prefer_trace(
            k, ["rank", "compile_id"])
        if k.is_empty():
            return empty
        calls = trace.kernel_calls
        flow = None
        if "reads" in calls.columns:
            calls = calls.filter(pl.struct("file", "lineno").is_in(
                k.select(pl.struct("file", "lineno")).to_series().implode()))
            flow = kernel_dataflow(calls, graph_nodes)
        cands = _kernel_nodes(k, graph_nodes, name_match, flow)
        res = _through_seq(_resolve(cands, graph_nodes), links)
        group = ["kernel_id", "rank", "compile_id", "source", "graph"]
        ch = _chains(res, group, "kernel") if not res.is_empty() else None
        # kernels whose provenance gives stack traces but no nodes (torch 2.13 backward)
        stack = k.join(res.select("kernel_id").unique(), on="kernel_id", how="anti").select(
            *group, pl.col("provenance_stack").alias("trace")
        ).explode("trace").filter(pl.col("trace").is_not_null())
        parts = [ch] if ch is not None else []
        if not stack.is_empty():
            frames = stack.with_columns(
                pl.col("trace").map_elements(stack_frame, return_dtype=pl.Struct(
                    {"user_file": _S, "user_line": _I32, "user_function": _S, "user_code": _S}))
                .alias("f")
            ).unnest("f").filter(pl.col("user_file").is_not_null())
            parts.append(
                frames.group_by(*group, "user_file", "user_line", maintain_order=True)
                .agg(pl.col("user_function").first(), pl.col("user_code").first())
                .with_columns(
                    pl.lit("provenance_stack").alias("via"), pl.lit(None, dtype=_S).alias("node_graph"),
                    pl.lit([], dtype=pl.List(_S)).alias("nodes"),
                    pl.lit([], dtype=pl.List(_S)).alias("backward_nodes"),
                    pl.lit("provenance_stack").alias("link"),
                    pl.lit([], dtype=pl.List(_I64)).alias("seq_nrs"),
                    pl.lit([], dtype=pl.List(_S)).alias("forward_nodes"),
                    pl.lit("kernel").alias("start"),
                )
            )
        chains = (pl.concat(parts, how="diagonal_relaxed").drop(group[1:])
                  if parts else pl.DataFrame(schema={"kernel_id": _S}))
        # every kernel gets at least one row (null user columns when nothing was found)
        out = (
            k.select(*group, pl.col("name").alias("kernel"), pl.col("kind").alias("kernel_kind"),
                     "file", "lineno")
            .join(chains, on="kernel_id", how="left")
            .with_columns(pl.lit("kernel").alias("start"))
        )
        return _finish(out)

    if node is not None:
        g = _filter(graph_nodes.filter(pl.col("node") == node), cid, rank)
        g = prefer_trace(g.filter(pl.col("op").is_in(COMPUTE_OPS)), ["rank", "compile_id"])
        # prefer the AOT graphs (where seq_nrs live) over post-grad/dynamo copies of a name
        order = {"aot_backward": 0, "aot_forward": 0, "aot_inference": 0, "post_grad": 1,
                 "dynamo": 2}
        g = g.with_columns(pl.col("graph_kind").replace_strict(order, default=3,
                                                              return_dtype=_I32).alias("gp"))
        best = g.group_by("rank", "compile_id", "source").agg(pl.col("gp").min().alias("b"))
        g = g.join(best, on=["rank", "compile_id", "source"], nulls_equal=True).filter(
            pl.col("gp") == pl.col("b"))
        if g.is_empty():
            return empty
        resolved = g.select(
            pl.col("graph_id").alias("kernel_id"), "rank", "compile_id", "source",
            pl.col("aot_id").alias("graph"), "node", pl.lit("node").alias("via"),
            pl.col("source").alias("g_source"), pl.col("aot_id").alias("g_aot"), "graph_kind",
            "graph_id", *USER_COLUMNS, "file", "lineno",
        )
        res = _through_seq(resolved, links)
        out = _chains(res, ["kernel_id", "rank", "compile_id", "source", "graph", "file",
                            "lineno"], "node")
        return _finish(out.with_columns(pl.lit(None, dtype=_S).alias("kernel_id")))

    if seq_nr is not None:
        lk = prefer_trace(_filter(links.filter(pl.col("seq_nr") == seq_nr), cid, rank),
                           ["rank", "compile_id"])
        if lk.is_empty():
            return empty
        rows = lk.select(
            "rank", "compile_id", "source", pl.col("backward_aot_id").alias("graph"),
            pl.col("backward_node").alias("node"), pl.lit("seq_nr").alias("via"),
            pl.lit("aot_backward").alias("graph_kind"), "backward_node", "link", "seq_nr",
            "forward_node", *USER_COLUMNS, "file", "lineno",
        )
        out = _chains(rows, ["rank", "compile_id", "source", "graph", "file", "lineno"], "seq_nr")
        return _finish(out)
    raise ValueError("origin needs one of kernel=, node= or seq_nr=")


def _finish(df: pl.DataFrame) -> pl.DataFrame:
    if "via" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=_S).alias("via"))
    df = df.with_columns(pl.col("via").replace_strict(CONFIDENCE, default=None, return_dtype=_S)
                         .alias("confidence"))
    for c, t in ORIGIN_SCHEMA.items():
        if c not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=t).alias(c))
    df = df.select(ORIGIN_SCHEMA.names()).cast(dict(ORIGIN_SCHEMA))
    # best first within each start: exact chains before name matches, then by source line
    conf = pl.col("confidence").replace_strict(_CONF_RANK, default=9, return_dtype=_I32)
    return df.sort([pl.col("rank"), pl.col("compile_id"), pl.col("source"), pl.col("graph"),
                    pl.col("kernel_id"), conf, pl.col("user_file"), pl.col("user_line")],
                   nulls_last=True)


def origin(
    trace: Trace,
    *,
    kernel: str | None = None,
    node: str | None = None,
    seq_nr: int | None = None,
    compile_id: str | None = None,
    rank: int | None = None,
    source: str | None = None,
    name_match: bool = False,
) -> list[Chain]:
    """Origin chains (see :func:`origin_table`) as :class:`Chain` objects."""
    df = origin_table(trace, kernel=kernel, node=node, seq_nr=seq_nr,
                      compile_id=compile_id, rank=rank, source=source, name_match=name_match)
    return [Chain(**{k: (v if v is not None or k not in ("nodes", "backward_nodes", "seq_nrs",
                                                          "forward_nodes") else [])
                     for k, v in row.items()})
            for row in df.iter_rows(named=True)]
