"""Rank divergence: ranks whose compiles differ from the majority of ranks.

A rank that compiles something the others do not (or skips a compile they do) is the classic
cause of collective hangs and of one slow rank. Compared per compile id: presence, the code
object, the recompile reason, the number of graph breaks and the cache behaviour.
"""

from __future__ import annotations

import polars as pl

SCHEMA = {
    "rank": pl.Int32,
    "extra_compile_ids": pl.List(pl.String),
    "missing_compile_ids": pl.List(pl.String),
    "different": pl.List(pl.String),
    "detail": pl.String,
}


def rank_divergence(compiles: pl.DataFrame, graph_breaks: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per rank that differs from the majority; empty with fewer than two ranks."""
    c = compiles.filter(pl.col("rank").is_not_null())
    ranks = sorted(c["rank"].unique().to_list())
    if len(ranks) < 2:
        return pl.DataFrame(schema=SCHEMA)
    nranks = len(ranks)
    sig = c.select(
        "rank",
        "compile_id",
        pl.concat_str(
            pl.col("function").fill_null("?"),
            pl.lit(" | status="),
            pl.col("status"),
            pl.lit(" | breaks="),
            pl.col("graph_breaks").cast(pl.String),
            pl.lit(" | cache="),
            (pl.col("fx_cache_hits") > 0).cast(pl.String),
            pl.lit("/"),
            (pl.col("aot_cache_hits") > 0).cast(pl.String),
            pl.lit(" | reason="),
            # object ids and addresses differ between processes by nature: not a divergence
            pl.col("recompile_reason")
            .fill_null("")
            .str.replace_all(r"0x[0-9a-fA-F]+", "0x…")
            .str.replace_all(r"\b\d{7,}\b", "<id>")
            .str.replace_all(r"\s+", " ")
            .str.strip_chars(),
        ).alias("sig"),
    )
    present = sig.group_by("compile_id").agg(pl.col("rank").n_unique().alias("n"))
    majority = set(present.filter(pl.col("n") * 2 > nranks)["compile_id"].to_list())
    # majority signature per compile id
    sig_major = (
        sig.group_by("compile_id", "sig")
        .agg(pl.len().alias("votes"))
        .sort("votes", "sig", descending=[True, False])
        .group_by("compile_id", maintain_order=True)
        .first()
        .select("compile_id", pl.col("sig").alias("major"))
    )
    diff = sig.join(sig_major, on="compile_id").filter(pl.col("sig") != pl.col("major"))
    rows = []
    for r in ranks:
        mine = set(sig.filter(pl.col("rank") == r)["compile_id"].to_list())
        extra = sorted(mine - majority, key=_cid_key)
        missing = sorted(majority - mine, key=_cid_key)
        d = diff.filter(pl.col("rank") == r)
        different = sorted(d["compile_id"].to_list(), key=_cid_key)
        if not (extra or missing or different):
            continue
        parts = []
        if extra:
            parts.append(f"compiles {', '.join(extra)} that most ranks do not")
        if missing:
            parts.append(f"lacks {', '.join(missing)} that most ranks compile")
        for cid, s, m in d.select("compile_id", "sig", "major").iter_rows():
            parts.append(f"{cid}: {_explain(s, m)}")
        rows.append(
            {
                "rank": r,
                "extra_compile_ids": extra,
                "missing_compile_ids": missing,
                "different": different,
                "detail": "; ".join(parts),
            }
        )
    return pl.DataFrame(rows, schema=SCHEMA)


def _explain(sig: str, major: str) -> str:
    names = ["function", "status", "graph breaks", "cache hits", "recompile reason"]
    a = sig.split(" | ")
    b = major.split(" | ")
    out = []
    for name, x, y in zip(names, a, b):
        if x != y:
            out.append(f"{name} {x.split('=', 1)[-1] or '-'} (most ranks: {y.split('=', 1)[-1] or '-'})")
    return ", ".join(out) or "differs"


def _cid_key(cid: str) -> tuple:
    parts = cid.lstrip("!").replace("_", "/").split("/")
    return (cid.startswith("!"), *[int(p) if p.isdigit() else 0 for p in parts])
