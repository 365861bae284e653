"""Rank divergence: ranks whose compiles differ from the majority of ranks.

A rank that compiles something the others do not (or skips a compile they do) is the classic
cause of collective hangs and of one slow rank. Compared per compile id: presence, the code
object, the status, the graph breaks (reason and line) and the recompile reason. Not the cache:
ranks sharing a cache directory race to write each entry, so which rank hits is timing, not a
divergence (why a rank missed a key others hit is analyze.cache_keys'). Object ids and
addresses in guard texts differ between processes by nature and are normalised before
comparing. Ties (two ranks, two behaviours) go to the lowest rank's.

Without a trace (text logs only) the compile ids each rank logged are compared, with the
graph breaks and recompile reasons the text shows; a compile that logged nothing is not seen.
"""

from __future__ import annotations

import polars as pl

from parsers.compile_ids import sort_key
from traceview.analyze.accounts.compiles import OPEN, compile_account
from traceview.analyze.findings import ADDRESS
from traceview.trace import Trace

SCHEMA = {
    "rank": pl.Int32,
    "extra_compile_ids": pl.List(pl.String),
    "missing_compile_ids": pl.List(pl.String),
    "different": pl.List(pl.String),
    "detail": pl.String,
    "source": pl.String,
    "compile_id": pl.String,
    "file": pl.String,
    "lineno": pl.Int64,
}

_FIELDS = ("function", "status", "graph breaks", "recompile reason")


def _normalise(expr: pl.Expr) -> pl.Expr:
    # object ids and addresses differ between processes by nature: not a divergence
    return (
        expr.fill_null("")
        .str.replace_all(ADDRESS, "0x…")
        .str.replace_all(r"\b\d{7,}\b", "<id>")
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
    )


def _breaks(graph_breaks: pl.DataFrame | None, source: str, by: tuple[str, ...] = ("rank", "compile_id")) -> pl.DataFrame:
    """Per `by` (rank, compile_id; and occurrence for a trace's compiles): the sorted graph
    breaks of one source's records (`graph_break_records`) as `reason @ line`."""
    if graph_breaks is None or graph_breaks.height == 0:
        return pl.DataFrame(schema={"rank": pl.Int32, "compile_id": pl.String, "occurrence": pl.Int32, "breaks": pl.String}).select(*by, "breaks")
    gb = graph_breaks.filter(pl.col("source") == source)
    return (
        gb.with_columns(
            pl.concat_str(pl.col("reason").fill_null("?"), pl.lit(" @ "), pl.col("line").cast(pl.String).fill_null("?")).alias("b")
        )
        .group_by(*by)
        .agg(pl.col("b").sort().str.join("; ").alias("breaks"))
    )


def _signatures_from_compiles(
    compiles: pl.DataFrame, graph_breaks: pl.DataFrame | None, account: pl.DataFrame | None = None
) -> pl.DataFrame:
    """One signature per compile. With the compile account (analyze.accounts.compiles): the
    recompile's reason is its one primary cause, and a compile still open when the capture
    ended (a rank stuck inside it) has no signature: its status, breaks and cache are only
    partly logged, and the stop and the unfinished compile say it."""
    c = compiles.filter(pl.col("rank").is_not_null())
    # each compile its own breaks (the second 0/0, after a torch._dynamo.reset(), is another)
    br = _breaks(graph_breaks, "trace", ("rank", "compile_id", "occurrence"))
    c = c.join(br, on=["rank", "compile_id", "occurrence"], how="left")
    if account is not None and account.height:
        acc = account.select(
            "rank", "compile_id", pl.col("occurrence").fill_null(1).alias("_occ"),
            pl.col("status").alias("_account_status"),
            # the cause by what it is, not its words (they quote the values each rank saw)
            pl.when(pl.col("cause_kind").is_not_null()).then(pl.concat_str(
                pl.col("cause_kind"), pl.lit(" of "), pl.col("cause_source").fill_null("?"),
                pl.lit(" dim "), pl.col("cause_dim").cast(pl.String).fill_null("-"))).alias("_cause_key"),
            pl.col("cause").alias("_cause"),
        ).unique(subset=["rank", "compile_id", "_occ"], keep="first")
        c = (
            c.with_columns(pl.col("occurrence").fill_null(1).alias("_occ"))
            .join(acc, on=["rank", "compile_id", "_occ"], how="left")
            .with_columns(pl.coalesce("_cause_key", "recompile_reason").alias("_reason_key"),
                          pl.coalesce("_cause", "recompile_reason").alias("recompile_reason"))
        )
        still_open = pl.col("_account_status").is_in(OPEN).fill_null(False)
    else:
        still_open = pl.lit(False)
    return c.select(
        "rank",
        "compile_id",
        pl.when(still_open).then(None).otherwise(pl.concat_str(
            pl.col("function").fill_null("?"),
            pl.lit(" | status="),
            pl.col("status"),
            pl.lit(" | breaks="),
            pl.col("graph_breaks").cast(pl.String),
            pl.lit(": "),
            pl.col("breaks").fill_null(""),
            pl.lit(" | reason="),
            _normalise(pl.col("_reason_key") if "_reason_key" in c.columns else pl.col("recompile_reason")),
        )).alias("sig"),
        pl.col("function"),
        pl.col("recompile_reason").str.split("\n").list.first().alias("why"),
        "file",
        "lineno",
    )


def _signatures_from_text(
    log_records: pl.DataFrame, graph_breaks: pl.DataFrame | None, recompiles: pl.DataFrame | None
) -> pl.DataFrame:
    ids = (
        log_records.filter(pl.col("rank").is_not_null() & pl.col("compile_id").is_not_null())
        .group_by("rank", "compile_id")
        .agg(pl.col("file").first(), pl.col("lineno").min())
    )
    br = _breaks(graph_breaks, "text")
    if recompiles is not None and recompiles.height:
        rr = (
            recompiles.filter((pl.col("source") == "text") & (pl.col("reason_index").fill_null(0) == 0))
            .group_by("rank", "compile_id")
            .agg(pl.col("function").first(), pl.col("guard").sort().str.join("; ").alias("reason"))
        )
    else:
        rr = pl.DataFrame(schema={"rank": pl.Int32, "compile_id": pl.String, "function": pl.String, "reason": pl.String})
    s = ids.join(br, on=["rank", "compile_id"], how="left").join(rr, on=["rank", "compile_id"], how="left")
    return s.select(
        "rank",
        "compile_id",
        pl.concat_str(
            pl.col("function").fill_null("?"),
            pl.lit(" | status=?"),
            pl.lit(" | breaks="),
            pl.col("breaks").fill_null(""),
            pl.lit(" | reason="),
            _normalise(pl.col("reason")),
        ).alias("sig"),
        pl.col("function"),
        pl.col("reason").alias("why"),
        "file",
        "lineno",
    )


def rank_divergence(trace: Trace) -> pl.DataFrame:
    """One row per rank that differs from the majority (SCHEMA); empty with fewer than two ranks."""
    return _divergence_rows(trace.compiles, trace.graph_break_records, log_records=trace.log_records, recompiles=trace.recompiles,
                            account=compile_account(trace))


def _divergence_rows(
    compiles: pl.DataFrame,
    graph_breaks: pl.DataFrame | None = None,
    *,
    log_records: pl.DataFrame | None = None,
    recompiles: pl.DataFrame | None = None,
    account: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """`rank_divergence` over the tables."""
    source = "trace"
    sig = _signatures_from_compiles(compiles, graph_breaks, account)
    if sig["rank"].n_unique() < 2 and log_records is not None and log_records.height:
        source = "text"
        sig = _signatures_from_text(log_records, graph_breaks, recompiles)
    ranks = sorted(sig["rank"].unique().to_list())
    if len(ranks) < 2:
        return pl.DataFrame(schema=SCHEMA)
    nranks = len(ranks)
    # two ranks have no majority: the lower one is the reference, and the text says so
    others = "most ranks" if nranks > 2 else f"rank {ranks[0]}"
    others_do = "do" if nranks > 2 else "does"  # the verb agrees with `others`
    present = sig.group_by("compile_id").agg(pl.col("rank").n_unique().alias("n"), pl.col("rank").min().alias("first"))
    # present on more than half of the ranks; a tie (2 of 4) goes to the group with the lowest rank
    majority = set(
        present.filter((pl.col("n") * 2 > nranks) | ((pl.col("n") * 2 == nranks) & (pl.col("first") == ranks[0])))[
            "compile_id"
        ].to_list()
    )
    sig_major = (
        sig.filter(pl.col("sig").is_not_null())  # a compile left open compares with none
        .group_by("compile_id", "sig")
        .agg(pl.len().alias("votes"), pl.col("rank").min().alias("first"))
        .sort(["votes", "first"], descending=[True, False])
        .group_by("compile_id", maintain_order=True)
        .first()
        .select("compile_id", pl.col("sig").alias("major"))
    )
    diff = sig.join(sig_major, on="compile_id").filter(pl.col("sig") != pl.col("major"))
    # per rank in one pass each (not one filter per rank: thousands of ranks)
    ids_of: dict[int, set[str]] = {}
    for r, cid in sig.select("rank", "compile_id").iter_rows():
        ids_of.setdefault(r, set()).add(cid)
    diff_of: dict[int, list[tuple[str, str, str]]] = {}
    for r, cid, s, m in diff.select("rank", "compile_id", "sig", "major").iter_rows():
        diff_of.setdefault(r, []).append((cid, s, m))
    rows = []
    verb = "compiles" if source == "trace" else "logs"
    differing = []
    for r in ranks:
        mine = ids_of.get(r, set())
        extra = sorted(mine - majority, key=sort_key)
        missing = sorted(majority - mine, key=sort_key)
        d = sorted(diff_of.get(r, []), key=lambda t: sort_key(t[0]))
        if extra or missing or d:
            differing.append((r, extra, missing, d))
    # the differing ranks' signature rows, in order, read in one pass
    sig_of: dict[int, list[tuple]] = {}
    for row in sig.filter(pl.col("rank").is_in([x[0] for x in differing])).select(
        "rank", "compile_id", "function", "why", "file", "lineno"
    ).iter_rows():
        sig_of.setdefault(row[0], []).append(row[1:])
    for r, extra, missing, d in differing:
        different = [t[0] for t in d]
        parts = []
        if extra:
            mine_rows = {c: (fn, why) for c, fn, why, _file, _lineno in sig_of.get(r, [])}
            described = []
            for i, cid in enumerate(extra):
                if i >= 3:
                    rest = extra[3:]
                    more = ", ".join(rest[:8]) + (", …" if len(rest) > 8 else "")
                    described.append(f"and {len(rest)} more ({more})")
                    break
                fn, why = mine_rows.get(cid, (None, None))
                what = ", ".join(x for x in (fn, f"recompiled because {why}" if why else None) if x)
                described.append(f"{cid} ({what})" if what else cid)
            parts.append(f"{verb} {', '.join(described)} that {others} {others_do} not")
        if missing:
            parts.append(f"lacks {', '.join(missing)} that {others} {verb[:-1] if nranks > 2 else verb}")
        for cid, s, m in d:
            parts.append(f"{cid}: {_explain(s, m, others)}")
        # the record to jump to: the first extra or different compile of this rank
        first = (extra + different)[:1]
        file, lineno = next(((f, ln) for c, _fn, _why, f, ln in sig_of.get(r, []) if c in first), (None, None))
        rows.append(
            {
                "rank": r,
                "extra_compile_ids": extra,
                "missing_compile_ids": missing,
                "different": different,
                "detail": "; ".join(parts),
                "source": source,
                "compile_id": (first or missing or [None])[0],
                "file": file,
                "lineno": lineno,
            }
        )
    return pl.DataFrame(rows, schema=SCHEMA)


def _explain(sig: str, major: str, others: str = "most ranks") -> str:
    a = sig.split(" | ")
    b = major.split(" | ")
    out = []
    for name, x, y in zip(_FIELDS, a, b):
        if x != y:
            out.append(f"{name} {x.split('=', 1)[-1] or '-'} ({others}: {y.split('=', 1)[-1] or '-'})")
    return ", ".join(out) or "differs"
