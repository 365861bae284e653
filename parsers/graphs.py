"""``graphs``, ``graph_nodes``, ``kernels``, ``kernel_calls`` and ``provenance`` tables.

Built from the ``events`` table (TORCH_TRACE) and, when given, the ``log_records`` table
(TORCH_LOGS text: ``aot_graphs`` / ``graph_code`` / ``post_grad_graphs`` blocks and
``output_code`` records). Graph texts are parsed all at once with
:func:`parsers.fxgraph.parse_fx_graphs`, wrappers one by one with :mod:`parsers.outputcode`;
linking rows to each other (which output code a post-grad graph belongs to, which provenance
artifact describes which wrapper) is done with polars joins. Columns are documented in
docs/tables-graphs.md.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from parsers.compile_ids import occurrence_at, text_occurrence_at
from parsers.frameless import AOT_DUMPS, with_frameless_ids
from parsers.fxgraph import (
    GRAPH_KINDS,
    NODE_SCHEMA,
    parse_fx_graphs,
    split_traced_graphs,
)
from parsers.outputcode import (
    CALL_SCHEMA,
    KERNEL_SCHEMA,
    PROVENANCE_ARTIFACTS,
    PROVENANCE_SCHEMA,
    output_code_from_log_text,
    parse_aot_code,
    parse_output_code,
    parse_provenance,
)

__all__ = [
    "GRAPHS_SCHEMA",
    "GRAPH_NODES_SCHEMA",
    "KERNELS_SCHEMA",
    "KERNEL_CALLS_SCHEMA",
    "PROVENANCE_TABLE_SCHEMA",
    "build_graph_nodes",
    "build_graphs",
    "build_kernel_calls",
    "build_kernels",
    "build_provenance",
]

_S, _I32, _I64 = pl.String, pl.Int32, pl.Int64

GRAPHS_SCHEMA = pl.Schema(
    {
        "graph_id": _S, "rank": _I32, "compile_id": _S, "occurrence": _I32, "trace_id": _S, "kind": _S,
        "name": _S, "label": _S, "aot_id": _S, "text": _S, "source": _S, "file": _S,
        "lineno": _I64, "text_lineno": _I64,
    }
)
GRAPH_NODES_SCHEMA = pl.Schema(
    {
        "graph_id": _S, "rank": _I32, "compile_id": _S, "occurrence": _I32, "trace_id": _S, "graph_kind": _S,
        "aot_id": _S, "source": _S, **{k: v for k, v in NODE_SCHEMA.items()},
        "file": _S, "lineno": _I64,
    }
)
KERNELS_SCHEMA = pl.Schema(
    {
        "kernel_id": _S, "rank": _I32, "compile_id": _S, "occurrence": _I32, "trace_id": _S, "graph": _S,
        "name": _S, "kind": _S, "variant": _S, "code": _S, "source_nodes": pl.List(_S),
        "aten_ops": pl.List(_S), "post_grad_nodes": pl.List(_S),
        "provenance_nodes": pl.List(_S), "provenance_stack": pl.List(_S),
        "kernel_path": _S, "debug_handles": pl.List(_S), "calls": pl.List(_I32),
        "order": _I32, "line": _I32, "file": _S, "lineno": _I64, "source": _S,
    }
)
KERNEL_CALLS_SCHEMA = pl.Schema(
    {
        "kernel_id": _S, "rank": _I32, "compile_id": _S, "occurrence": _I32, "trace_id": _S, "graph": _S,
        **{k: v for k, v in CALL_SCHEMA.items() if k != "kernel_order"},
        "file": _S, "lineno": _I64, "source": _S,
    }
)
PROVENANCE_TABLE_SCHEMA = pl.Schema(
    {
        "rank": _I32, "compile_id": _S, "trace_id": _S, "graph": _S,
        "output_lineno": _I64, **PROVENANCE_SCHEMA, "file": _S, "lineno": _I64,
    }
)

_GRAPH_TEXT_RE = r"^(?:\x1b\[[0-9;]*m)*class [^\s(]+\(torch\.nn\.Module\):"
_LOG_COLUMNS = ("file", "lineno", "rank", "compile_id", "trace_id", "artifact", "text")
# part of the AOT id a graph kind belongs to
_PART = {"aot_forward": "forward", "aot_backward": "backward", "aot_inference": "inference"}


def _col(df: pl.DataFrame, name: str, dtype: Any) -> pl.Expr:
    return pl.col(name).cast(dtype) if name in df.columns else pl.lit(None, dtype=dtype).alias(name)


def _events(events: pl.DataFrame) -> pl.DataFrame:
    """The columns read here; the records of a compile without a Dynamo frame carry its id
    (parsers.frameless)."""
    cols = {"file": _S, "lineno": _I64, "rank": _I32, "kind": _S, "name": _S,
            "compile_id": _S, "trace_id": _S, "payload": _S, "metadata": _S}
    return with_frameless_ids(events.select([_col(events, c, t) for c, t in cols.items()]))


def _log_records(log_records: pl.DataFrame | None) -> pl.DataFrame:
    cols = {"file": _S, "lineno": _I64, "rank": _I32, "compile_id": _S, "trace_id": _S,
            "attempt": _I32, "artifact": _S, "text": _S}
    if log_records is None:
        return pl.DataFrame(schema=cols)
    return log_records.select([_col(log_records, c, t) for c, t in cols.items()])


def _nullsafe(df: pl.DataFrame) -> pl.DataFrame:
    """Join keys that are never null (join_asof's ``by`` does not match nulls)."""
    return df.with_columns(
        pl.col("rank").fill_null(-1).alias("_rk"), pl.col("compile_id").fill_null("").alias("_cid")
    )


def _aot_part(aot_id: pl.Expr) -> pl.Expr:
    return aot_id.str.extract(r"_(forward|backward|inference)$")


# ------------------------------------------------------------------------- graphs
def _trace_graphs(ev: pl.DataFrame) -> pl.DataFrame:
    name = pl.when(pl.col("kind") == "artifact").then(pl.col("name")).otherwise(pl.col("kind"))
    is_graph = pl.col("payload").is_not_null() & (
        pl.col("kind").is_in(list(GRAPH_KINDS))
        | ((pl.col("kind") == "artifact") & pl.col("name").is_in(list(GRAPH_KINDS)))
        | pl.col("payload").str.contains(_GRAPH_TEXT_RE)
    )
    g = ev.filter(is_graph & (pl.col("kind") != "dump_file")).with_columns(name.alias("gname"))
    return g.select(
        pl.format("{}:{}", pl.col("file"), pl.col("lineno") + 1).alias("graph_id"),
        "rank", "compile_id", "trace_id",
        pl.col("gname").replace_strict(GRAPH_KINDS, default=pl.col("gname")).alias("kind"),
        pl.col("gname").alias("name"),
        pl.when(pl.col("kind") != "artifact").then(pl.col("name")).alias("label"),
        pl.lit(None, dtype=_S).alias("aot_id"),
        pl.col("payload").alias("text"),
        pl.lit("trace").alias("source"),
        "file", "lineno",
        (pl.col("lineno") + 1).alias("text_lineno"),
    )


def _debug_graphs(lr: pl.DataFrame) -> pl.DataFrame:
    """The graph files of TORCH_COMPILE_DEBUG folders (parsers.debugdir): the graph Inductor
    received (`fx_graph_readable.py`: the AOT forward, backward or inference graph the folder
    is named after) and the one after its FX passes (`fx_graph_transformed.py`: post-grad)."""
    from parsers.debugdir import DEBUG_GRAPH_ARTIFACTS, GRAPH_DIR_RE

    recs = lr.filter(pl.col("artifact").is_in(list(DEBUG_GRAPH_ARTIFACTS)))
    if recs.is_empty():
        return pl.DataFrame(schema=GRAPHS_SCHEMA)
    folder = pl.col("file").str.replace(r"[/\\][^/\\]*$", "").str.extract(r"([^/\\]+)$")
    parts = folder.str.extract_groups(GRAPH_DIR_RE.pattern.replace("?P<", "?<"))
    return recs.with_columns(folder.alias("folder"), parts.alias("p")).unnest("p").select(
        pl.format("{}:{}", pl.col("file"), pl.col("lineno")).alias("graph_id"),
        "rank", "compile_id", pl.lit(None, dtype=_I32).alias("occurrence"), "trace_id",
        pl.when(pl.col("artifact") == "debug_fx_graph_transformed").then(pl.lit("post_grad"))
        .otherwise(pl.format("aot_{}", pl.col("part"))).alias("kind"),
        pl.col("artifact").alias("name"),
        pl.col("folder").alias("label"),
        pl.format("{}_{}", pl.col("aot"), pl.col("part")).alias("aot_id"),
        "text", pl.lit("text").alias("source"), "file", "lineno",
        pl.col("lineno").alias("text_lineno"),
    ).cast({"rank": _I32, "lineno": _I64, "text_lineno": _I64})


def _text_graphs(lr: pl.DataFrame) -> pl.DataFrame:
    if lr.is_empty():
        return pl.DataFrame(schema=GRAPHS_SCHEMA)
    recs = lr.filter(pl.col("text").str.contains(r"(?m)^\s*===== .* =====\s*$"))
    rows: list[dict[str, Any]] = []
    for rec in recs.iter_rows(named=True):
        for d in split_traced_graphs(rec["text"]):
            if not d.text.strip():
                continue
            tl = rec["lineno"] + d.line_offset
            rows.append({
                "graph_id": f"{rec['file']}:{tl}", "rank": rec["rank"],
                "compile_id": rec["compile_id"], "trace_id": rec["trace_id"], "kind": d.kind,
                "name": rec["artifact"] or "", "label": d.title, "n": d.aot_graph,
                "text": d.text, "source": "text", "file": rec["file"], "lineno": rec["lineno"],
                "text_lineno": tl,
            })
    schema = {**GRAPHS_SCHEMA, "n": _I64}
    del schema["aot_id"]
    g = pl.DataFrame(rows, schema=schema)
    # The inference path logs "Forward graph N" too: no "Backward graph N" in the same
    # compile means it was an inference graph.
    bwd = g.filter(pl.col("kind") == "aot_backward").select(
        "file", "rank", "compile_id", "n", pl.lit(True).alias("has_bwd")
    ).unique()
    g = g.join(bwd, on=["file", "rank", "compile_id", "n"], how="left", nulls_equal=True)
    kind = (
        pl.when((pl.col("kind") == "aot_forward") & pl.col("has_bwd").is_null())
        .then(pl.lit("aot_inference")).otherwise(pl.col("kind"))
    )
    g = g.with_columns(kind.alias("kind")).with_columns(
        pl.when(pl.col("kind").is_in(list(_PART)) & pl.col("n").is_not_null())
        .then(pl.format("{}_{}", pl.col("n"), pl.col("kind").replace_strict(_PART, default="")))
        .alias("aot_id")
    )
    return pl.concat([g.select(GRAPHS_SCHEMA.names()), _debug_graphs(lr).select(GRAPHS_SCHEMA.names())], how="vertical_relaxed")


def _output_code_index(ev: pl.DataFrame, lr: pl.DataFrame) -> pl.DataFrame:
    """One row per wrapper: file, rank, compile_id, lineno, aot_id, part, source."""
    t = ev.filter((pl.col("kind") == "inductor_output_code") & pl.col("payload").is_not_null())
    t = t.select(
        "file", "rank", "compile_id", "lineno",
        pl.col("payload").str.extract(r"^# AOT ID: \['([^']*)'").alias("aot_id"),
        pl.lit("trace").alias("source"),
    )
    x = lr.filter(((pl.col("artifact") == "output_code") & pl.col("text").str.contains(r"^\s*Output code:"))
                  | (pl.col("artifact") == "debug_output_code"))
    x = x.select(
        "file", "rank", "compile_id", "lineno",
        pl.col("text").str.extract(r"(?m)^# AOT ID: \['([^']*)'").alias("aot_id"),
        pl.lit("text").alias("source"),
    )
    out = pl.concat([t, x], how="vertical_relaxed")
    return out.with_columns(_aot_part(pl.col("aot_id")).alias("part"))


def _assign_aot_ids(g: pl.DataFrame, oc: pl.DataFrame) -> pl.DataFrame:
    """aot_id of graphs that precede the wrapper they were compiled into (join_asof forward).

    aot_forward/backward/inference graphs take the next wrapper of the same part; post-grad
    graphs (``before_post_grad_graph``, ``inductor_post_grad_graph``) the next wrapper.
    """
    if g.is_empty() or oc.is_empty():
        return g
    keys = ["source", "file", "_rk", "_cid"]
    g = _nullsafe(g).with_row_index("_r")
    oc = _nullsafe(oc)
    need = pl.col("aot_id").is_null()
    by_part = g.filter(need & pl.col("kind").is_in(list(_PART))).with_columns(
        pl.col("kind").replace_strict(_PART, default=None).alias("part")
    )
    post = g.filter(need & pl.col("kind").is_in(["post_grad", "post_grad_before"]))
    ocs = oc.select(*keys, "part", pl.col("lineno").alias("oc_lineno"), pl.col("aot_id").alias("oc_aot"))
    parts = []
    if not by_part.is_empty():
        parts.append(
            by_part.sort("lineno").join_asof(
                ocs.sort("oc_lineno"), left_on="lineno", right_on="oc_lineno",
                by=[*keys, "part"], strategy="forward", check_sortedness=False,
            ).select("_r", "oc_aot")
        )
    if not post.is_empty():
        parts.append(
            post.sort("lineno").join_asof(
                ocs.drop("part").sort("oc_lineno"), left_on="lineno", right_on="oc_lineno",
                by=keys, strategy="forward", check_sortedness=False,
            ).select("_r", "oc_aot")
        )
    if not parts:
        return g.drop("_r", "_rk", "_cid")
    found = pl.concat(parts)
    return (
        g.join(found, on="_r", how="left")
        .with_columns(pl.coalesce("aot_id", "oc_aot").alias("aot_id"))
        .drop("_r", "oc_aot", "_rk", "_cid")
    )


def build_graphs(events: pl.DataFrame, log_records: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per FX graph dump (trace payloads and TORCH_LOGS ``TRACED GRAPH`` blocks);
    `occurrence`: which compile of its id it belongs to (parsers.compile_ids)."""
    ev = _events(events)
    lr = _log_records(log_records)
    tg, xg = _trace_graphs(ev), _text_graphs(lr)
    # which compile of that id (two share it after torch._dynamo.reset()): by log order
    tg = tg.with_columns(occurrence_at(tg, ev).alias("occurrence"))
    xg = xg.with_columns(text_occurrence_at(xg, lr).alias("occurrence"))
    g = pl.concat([tg, xg.select(tg.columns)], how="vertical_relaxed")
    g = _assign_aot_ids(g, _output_code_index(ev, lr))
    return g.select(GRAPHS_SCHEMA.names()).cast(dict(GRAPHS_SCHEMA)).sort(
        ["source", "file", "lineno", "text_lineno"]
    )


def build_graph_nodes(graphs: pl.DataFrame) -> pl.DataFrame:
    """One row per node of every graph in ``graphs`` (all texts parsed at once by
    parsers.fxgraph.parse_fx_graphs)."""
    keys = ("graph_id", "rank", "compile_id", "occurrence", "trace_id", "aot_id", "source", "file", "lineno")
    meta = graphs.select(*keys, pl.col("kind").alias("graph_kind")).cast(
        {k: GRAPH_NODES_SCHEMA[k] for k in (*keys, "graph_kind")})
    nodes = parse_fx_graphs(graphs["text"])
    return pl.concat([meta[nodes["graph"]], nodes.drop("graph")], how="horizontal").select(
        GRAPH_NODES_SCHEMA.names())


# ------------------------------------------------------------------------ kernels
def _wrappers(ev: pl.DataFrame, lr: pl.DataFrame) -> list[dict[str, Any]]:
    """Every output-code wrapper, with the occurrence of its compile id (parsers.compile_ids)."""
    out: list[dict[str, Any]] = []
    t = ev.filter((pl.col("kind") == "inductor_output_code") & pl.col("payload").is_not_null())
    t = t.with_columns(occurrence_at(t, ev).alias("occurrence"))
    for r in t.select("file", "lineno", "rank", "compile_id", "occurrence", "trace_id", "payload").iter_rows(named=True):
        out.append({**r, "text": r.pop("payload"), "source": "trace"})
    # AOTInductor: the C++ wrapper, with the kernel file of the same compile
    aot = ev.filter((pl.col("kind") == "graph_dump") & pl.col("name").is_in(list(AOT_DUMPS[:2])) & pl.col("payload").is_not_null())
    if aot.height:
        aot = aot.with_columns(occurrence_at(aot, ev).alias("occurrence")).sort("file", "lineno")
        kernel_code: dict[tuple, str] = {}
        for r in aot.filter(pl.col("name") == AOT_DUMPS[1]).iter_rows(named=True):
            kernel_code.setdefault((r["file"], r["compile_id"], r["occurrence"]), r["payload"])
        for r in aot.filter(pl.col("name") == AOT_DUMPS[0]).iter_rows(named=True):
            out.append({**{k: r[k] for k in ("file", "lineno", "rank", "compile_id", "occurrence", "trace_id")},
                        "text": r["payload"], "source": "trace", "aot_kernels": kernel_code.get((r["file"], r["compile_id"], r["occurrence"]), "")})
    x = lr.filter(((pl.col("artifact") == "output_code") & pl.col("text").str.contains(r"^\s*Output code:"))
                  | (pl.col("artifact") == "debug_output_code"))
    x = x.with_columns(text_occurrence_at(x, lr).alias("occurrence"))
    for r in x.iter_rows(named=True):
        # a TORCH_COMPILE_DEBUG folder's output_code.py is the wrapper itself
        code = r["text"] if r["artifact"] == "debug_output_code" else output_code_from_log_text(r["text"])
        if code:
            out.append({**{k: r[k] for k in ("file", "lineno", "rank", "compile_id", "occurrence", "trace_id")},
                        "text": code, "source": "text"})
    return out


def _parse_wrappers(ev: pl.DataFrame, lr: pl.DataFrame, what: str) -> pl.DataFrame:
    """The ``kernels`` or ``kernel_calls`` rows of every wrapper (built column by column)."""
    schema = KERNELS_SCHEMA if what == "kernels" else KERNEL_CALLS_SCHEMA
    cols: dict[str, list[Any]] = {c: [] for c in schema.names()}
    own = [c for c in (KERNEL_SCHEMA if what == "kernels" else CALL_SCHEMA) if c in cols]
    for w in _wrappers(ev, lr):
        oc = parse_aot_code(w["text"], w["aot_kernels"]) if "aot_kernels" in w else parse_output_code(w["text"])
        rows = oc.kernels if what == "kernels" else oc.calls
        n = len(rows)
        if not n:
            continue
        base = {"rank": w["rank"], "compile_id": w["compile_id"], "occurrence": w["occurrence"], "trace_id": w["trace_id"],
                "graph": oc.aot_id, "file": w["file"], "lineno": w["lineno"], "source": w["source"]}
        for c, v in base.items():
            cols[c].extend([v] * n)
        for c in own:
            cols[c].extend([r[c] for r in rows])
        prefix = f"{w['file']}:{w['lineno']}#"
        key = "order" if what == "kernels" else "kernel_order"
        cols["kernel_id"].extend([None if r[key] is None else prefix + str(r[key]) for r in rows])
        if what == "kernels":
            cols["provenance_nodes"].extend([[]] * n)
            cols["provenance_stack"].extend([[]] * n)
    return _frame(cols, schema)


def _frame(cols: dict[str, list[Any]], schema: pl.Schema) -> pl.DataFrame:
    """DataFrame from column lists; list columns go through Arrow (much faster than polars'
    element-by-element conversion of nested lists)."""
    import pyarrow as pa

    out = []
    for name, dtype in schema.items():
        if isinstance(dtype, pl.List):
            inner = pa.large_string() if dtype.inner == pl.String else pa.int32()
            arr = pa.array(cols[name], type=pa.large_list(inner))
            out.append(pl.Series(name, pl.from_arrow(arr)).cast(dtype))
        else:
            out.append(pl.Series(name, cols[name], dtype=dtype))
    return pl.DataFrame(out)


def build_provenance(events: pl.DataFrame) -> pl.DataFrame:
    """One row per kernel key of the Inductor provenance artifacts of a trace.

    ``output_lineno``/``graph`` name the ``inductor_output_code`` envelope the artifact
    describes: the last one before it in the same file and compile (torch logs the
    provenance artifacts right after the wrapper); null for AOTInductor (``graph_dump``).
    """
    ev = _events(events)
    arts = ev.filter((pl.col("kind") == "artifact") & pl.col("name").is_in(list(PROVENANCE_ARTIFACTS)))
    rows: list[dict[str, Any]] = []
    for a in arts.select("file", "lineno", "rank", "compile_id", "trace_id", "name", "payload").iter_rows(named=True):
        for r in parse_provenance(a["name"], a["payload"]):
            rows.append({**r, "rank": a["rank"], "compile_id": a["compile_id"],
                         "trace_id": a["trace_id"], "file": a["file"], "lineno": a["lineno"],
                         "graph": None, "output_lineno": None})
    prov = pl.DataFrame(rows, schema=PROVENANCE_TABLE_SCHEMA)
    oc = _nullsafe(_output_code_index(ev, _log_records(None))).select(
        "file", "_rk", "_cid", pl.col("lineno").alias("oc_lineno"), pl.col("aot_id").alias("oc_graph"),
    )
    if prov.is_empty() or oc.is_empty():
        return prov
    prov = _nullsafe(prov).sort("lineno").join_asof(
        oc.sort("oc_lineno"), left_on="lineno", right_on="oc_lineno",
        by=["file", "_rk", "_cid"], strategy="backward", check_sortedness=False,
    )
    return prov.with_columns(
        pl.col("oc_lineno").alias("output_lineno"), pl.col("oc_graph").alias("graph")
    ).select(PROVENANCE_TABLE_SCHEMA.names()).sort("file", "lineno")


def _attach_provenance(kernels: pl.DataFrame, prov: pl.DataFrame) -> pl.DataFrame:
    if kernels.is_empty() or prov.is_empty():
        return kernels
    # keys a kernel answers to: its debug handles (``name:N``) and its plain name
    keys = kernels.filter(pl.col("source") == "trace").select(
        "kernel_id", "file", "lineno",
        pl.concat_list(pl.col("debug_handles"), pl.concat_list(pl.col("name"))).alias("key"),
    ).explode("key").unique()
    p = prov.filter(pl.col("output_lineno").is_not_null()).select(
        "file", pl.col("output_lineno").alias("lineno"), pl.col("kernel_key").alias("key"),
        "post_grad_nodes", "stack_traces",
    )
    hit = (
        keys.join(p, on=["file", "lineno", "key"], how="inner")
        .group_by("kernel_id", maintain_order=True)
        .agg(
            pl.col("post_grad_nodes").list.explode(keep_nulls=False, empty_as_null=False).unique(maintain_order=True).alias("p_nodes"),
            pl.col("stack_traces").list.explode(keep_nulls=False, empty_as_null=False).unique(maintain_order=True).alias("p_stack"),
        )
    )
    return (
        kernels.join(hit, on="kernel_id", how="left")
        .with_columns(
            pl.coalesce("p_nodes", "provenance_nodes").alias("provenance_nodes"),
            pl.coalesce("p_stack", "provenance_stack").alias("provenance_stack"),
        )
        .drop("p_nodes", "p_stack")
    )


def build_kernels(events: pl.DataFrame, log_records: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per generated kernel definition and per extern/fallback launch of each wrapper."""
    kernels = _parse_wrappers(_events(events), _log_records(log_records), "kernels")
    kernels = _attach_provenance(kernels, build_provenance(events))
    return kernels.select(KERNELS_SCHEMA.names()).sort("source", "file", "lineno", "order")


def build_kernel_calls(events: pl.DataFrame, log_records: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per kernel launch in each wrapper's ``call()``, in execution order."""
    calls = _parse_wrappers(_events(events), _log_records(log_records), "calls")
    return calls.sort("source", "file", "lineno", "call_index")

