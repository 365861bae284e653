"""The `seq_links` table: forward node <-> backward node(s) of one compile.

Forward and backward nodes of one autograd op share a ``seq_nr``; torch 2.13 only logs it in
the TORCH_LOGS ``annotation`` walk over the joint graph (``node: n`` / ``seq_nr: N``), whose
node names are kept in the partitioned ``aot_forward``/``aot_backward`` graphs, so the link
is a join on (rank, compile_id, node). Backward nodes without a logged seq_nr are linked to
the forward nodes that share their user source line (every backward node carries the stack
trace of the forward op it differentiates, printed as the ``# File:`` comment).

Built from the ``graph_nodes`` (parsers.graphs) and ``annotations`` (parsers.facts) tables
with polars joins; columns documented in docs/tables-graphs.md. traceview.analyze.origin
follows these links from a kernel or backward node to the forward source line.
"""

from __future__ import annotations

import polars as pl

_S, _I32, _I64 = pl.String, pl.Int32, pl.Int64

SEQ_LINKS_SCHEMA = pl.Schema(
    {
        "rank": _I32, "compile_id": _S, "source": _S, "link": _S, "seq_nr": _I64,
        "forward_graph_id": _S, "forward_aot_id": _S, "forward_node": _S, "forward_target": _S,
        "backward_graph_id": _S, "backward_aot_id": _S, "backward_node": _S,
        "backward_target": _S, "user_file": _S, "user_line": _I32, "user_function": _S,
        "user_code": _S, "backward_user_line": _I32, "file": _S, "lineno": _I64,
    }
)


COMPUTE_OPS = ["call_function", "call_method", "call_module"]
USER_COLUMNS = ["user_file", "user_line", "user_function", "user_code"]


def compute_nodes(graph_nodes: pl.DataFrame, kinds: list[str]) -> pl.DataFrame:
    """Top-level compute nodes (no placeholders/outputs/get_attr, no HOP-body nodes)."""
    return graph_nodes.filter(
        pl.col("graph_kind").is_in(kinds)
        & pl.col("op").is_in(COMPUTE_OPS)
        & ~pl.col("module").str.contains(".", literal=True)
    )


def seq_links(graph_nodes: pl.DataFrame, annotations: pl.DataFrame | None = None) -> pl.DataFrame:
    """Forward <-> backward node pairs of each compile (see the module doc); SEQ_LINKS_SCHEMA."""
    keys = ["rank", "compile_id", "source"]
    fw = compute_nodes(graph_nodes, ["aot_forward"]).select(
        *keys, pl.col("graph_id").alias("forward_graph_id"),
        pl.col("aot_id").alias("forward_aot_id"), pl.col("node").alias("forward_node"),
        pl.col("target").alias("forward_target"), *USER_COLUMNS,
    )
    bw = compute_nodes(graph_nodes, ["aot_backward"]).select(
        *keys, pl.col("graph_id").alias("backward_graph_id"),
        pl.col("aot_id").alias("backward_aot_id"), pl.col("node").alias("backward_node"),
        pl.col("target").alias("backward_target"),
        pl.col("user_file").alias("b_file"), pl.col("user_line").alias("backward_user_line"),
        "file", "lineno",
    )
    # Each backward graph belongs to the forward graph of the same compile logged before it
    # in the same file (a file can hold a compile id more than once, e.g. concatenated logs):
    # links are only made within that pair, which also keeps the joins linear.
    # graph_id is "<file>:<line>": the file and the position of the graph in it
    where = [
        pl.col("_g").str.replace(r":\d+$", "").alias("_gfile"),
        pl.col("_g").str.extract(r":(\d+)$").cast(_I64).alias("_pos"),
        # join_asof matches no null keys: give them a value
        *[pl.col(k).cast(_S).fill_null("\0").alias(f"_{k}") for k in keys],
    ]
    fwg = (
        fw.select(*keys, pl.col("forward_graph_id").alias("_g")).unique()
        .with_columns(where).rename({"_g": "_fg"}).sort("_pos")
    )
    bwg = bw.select(*keys, pl.col("backward_graph_id").alias("_g")).unique().with_columns(where).sort("_pos")
    fwg = fwg.drop(keys)
    pairs = bwg.join_asof(
        fwg, on="_pos", by=[*[f"_{k}" for k in keys], "_gfile"], strategy="backward", check_sortedness=False
    ).select(
        pl.col("_g").alias("backward_graph_id"), pl.col("_fg").alias("forward_graph_id")
    )
    bw = bw.join(pairs, on="backward_graph_id", how="left")
    fw = fw.rename({"forward_graph_id": "_fg"}).with_columns(pl.col("_fg").alias("forward_graph_id"))
    pair_keys = [*keys, "forward_graph_id"]
    parts: list[pl.DataFrame] = []
    if annotations is not None and not annotations.is_empty():
        ann = (
            annotations.filter(pl.col("seq_nr").is_not_null())
            .select(pl.col("rank").cast(_I32), pl.col("compile_id").cast(_S), "node",
                    pl.col("seq_nr").cast(_I64))
            .unique()
        )
        fws = fw.join(ann, left_on=["rank", "compile_id", "forward_node"],
                      right_on=["rank", "compile_id", "node"], nulls_equal=True)
        bws = bw.join(ann, left_on=["rank", "compile_id", "backward_node"],
                      right_on=["rank", "compile_id", "node"], nulls_equal=True)
        by_seq = bws.join(fws.drop("_fg"), on=[*pair_keys, "seq_nr"], nulls_equal=True).with_columns(
            pl.lit("seq_nr").alias("link")
        )
        parts.append(by_seq)
        linked = by_seq.select(*keys, "backward_graph_id", "backward_node").unique()
        bw = bw.join(linked, on=[*keys, "backward_graph_id", "backward_node"], how="anti",
                     nulls_equal=True)
    by_line = (
        bw.filter(pl.col("b_file").is_not_null())
        .join(fw.filter(pl.col("user_file").is_not_null()).drop("_fg"),
              left_on=[*pair_keys, "b_file", "backward_user_line"],
              right_on=[*pair_keys, "user_file", "user_line"], nulls_equal=True)
        .with_columns(
            pl.col("b_file").alias("user_file"), pl.col("backward_user_line").alias("user_line"),
            pl.lit(None, dtype=_I64).alias("seq_nr"), pl.lit("source_line").alias("link"),
        )
    )
    parts.append(by_line)
    out = pl.concat([p.select(SEQ_LINKS_SCHEMA.names()).cast(dict(SEQ_LINKS_SCHEMA))
                     for p in parts], how="vertical")
    return out.sort(["rank", "compile_id", "source", "backward_graph_id", "link", "seq_nr",
                     "backward_node", "forward_node"], nulls_last=True)
