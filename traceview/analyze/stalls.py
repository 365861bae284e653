"""Ranks held at a collective while another rank compiles alone (issue 38, item 2).

In a job whose ranks meet at collectives (DDP's gradient all-reduce, FSDP, an all_reduce of the
loss), a compile that some ranks make and the others do not (one rank recompiles for a
smaller last batch) is not free: the others run their cached graphs, reach the next collective
and wait there until the compiling ranks arrive. Whatever the recompile's own verdict
(automatic dynamic shapes' one recompile is expected on a single process), on some ranks only
it costs the others that wait: `cost = seconds x ranks stalled`.

`rank_stalls(trace)` finds, per group of ranks that compiled alone, the compiles that some
ranks made and others did not, of a code object the others compiled too (a shared function:
ranks running different code, such as pipeline stages, are not compared), and estimates the
wait:

* **the estimate**: the lone compile's own time (its `compilation_metrics`: the forward, plus
  the backward compiled lazily at its first backward): the ranks stalled for about that long,
  since they ran cached graphs meanwhile and reach the collective without compiling. No record
  shows the wait itself (a waiting rank writes nothing), so the finding says it is an estimate
  and from what; where the others also compiled something in that time, their time is not
  subtracted (said as `others_compiling_s`).
* **where they wait**: with DDP (analyze.ddp: its graph breaks, DDPOptimizer's splits, its
  frames) at the first gradient all-reduce, a hook of DDP's reducer in the backward that no
  compiled graph holds; else at their next collective. Where the lone graph itself holds
  collectives, analyze.collectives already says the wait (its `waits`): such a compile is
  left to it (`collectives=`).
* **the fix**: every rank the same shapes (drop_last=True, pad the last batch), the varying
  dimension dynamic on every rank before the first step (torch._dynamo.mark_dynamic), or a
  warm-up call with each shape on every rank before training, so that no rank compiles alone.

`mark_lone_recompiles(storms, stalls)` turns a recompile storm whose compiles were made on some
ranks only into one that needs action (never "nothing to fix"), with the stall as its cost.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import polars as pl

from parsers.compile_ids import bracketed, compile_number, sort_key
from parsers.facts import user_name
from traceview.analyze.accounts.compiles import compile_account
from traceview.analyze.code_objects import describe
from traceview.analyze.ddp import ddp_evidence
from traceview.analyze.findings import ranks_text
from traceview.analyze.storms import primary_causes

if TYPE_CHECKING:
    from traceview.trace import Trace


def _ranks(rs: list[int]) -> str:
    return ranks_text(rs).strip()


def _cause(rows: list[dict[str, Any]], primary: dict[str, Any] | None = None) -> str | None:
    """The recompile's primary failed guard in words: `for another size (dim 0 of x: 6, not 8)`,
    else `(failed guard: n == 2)`. `primary`: the recompile's one cause (the compile account's,
    analyze.storms.primary_causes): its guard is the row said, not the first torch lists."""
    if primary is not None:
        def same(r: dict[str, Any]) -> bool:
            if primary.get("kind") in ("size", "stride") and r.get("kind") == primary["kind"]:
                return user_name(r.get("guard_source")) == primary.get("source") and r.get("dim") == primary.get("dim")
            return bool(primary.get("guard")) and (r.get("guard") or "") == primary["guard"]
        rows = [r for r in rows if same(r)] or rows
    for r in sorted(rows, key=lambda r: (r.get("reason_index") or 0)):
        if r.get("kind") == "size" and r.get("guard_source") is not None and r.get("dim") is not None:
            return f"for another size (dim {r['dim']} of {r['guard_source']}: {r['actual']}, not {r['expected']})"
        if r.get("guard"):
            return f"(failed guard: {r['guard']})"
    return None


def rank_stalls(trace: Trace, *, collectives: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One finding per group of ranks that compiled alone (docs/report.md, `rank_stalls`):
    compiling_ranks, waiting_ranks, compiles (rank, compile_id, function, filename, line,
    seconds, forward_s, backward_s, start, cause), seconds (the estimated wait), ranks_stalled,
    cost_s (seconds x ranks stalled), where (the collective they wait at), ddp (the records
    that show DDP), estimate (how it was estimated), message, next_step, certainty, rank,
    compile_id, file, lineno. `collectives` is analyze.collectives' result for the same trace,
    whose `waits` already cover the graphs that hold collectives."""
    c = trace.compiles
    if c.height == 0 or "rank" not in c.columns:
        return []
    c = c.filter(
        pl.col("rank").is_not_null() & pl.col("frame_id").is_not_null() & pl.col("compiled_autograd_id").is_null()
        & (pl.col("compile_kind").fill_null("dynamo") == "dynamo")
    )
    ranks = sorted(int(r) for r in c["rank"].unique().to_list())
    if len(ranks) < 2:
        return []
    covered = {w["compile_id"] for w in (collectives or {}).get("waits") or []}
    # the compiles some ranks made and others did not: only their rows are read one by one (a
    # run of 16,384 ranks has tens of thousands of compiles, made on every rank alike)
    occ = pl.col("occurrence").fill_null(1)
    partial = c.with_columns(occ.alias("_occ")).group_by("compile_id", "_occ").agg(pl.col("rank").n_unique().alias("_on"))
    partial = partial.filter(pl.col("_on") < len(ranks))
    if partial.is_empty():
        return []
    lone_rows = c.with_columns(occ.alias("_occ")).join(partial.drop("_on"), on=["compile_id", "_occ"], how="semi",
                                                       nulls_equal=True, maintain_order="left").drop("_occ")
    by_id: dict[tuple[str, int], dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in lone_rows.iter_rows(named=True):
        by_id[(r["compile_id"], r["occurrence"] or 1)][r["rank"]] = r
    code_ranks: dict[tuple, set[int]] = {
        (fn, filename, line): set(rs)
        for fn, filename, line, rs in c.group_by("function", "filename", "line").agg(pl.col("rank").unique()).iter_rows()
    }
    rec = trace.recompiles
    if rec.height and "source" in rec.columns and (rec["source"] == "trace").any():
        rec = rec.filter(pl.col("source") == "trace")  # logged twice: the trace's row
    reasons: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rec.iter_rows(named=True):
        reasons[(r["rank"], r["compile_id"])].append(r)

    primary = primary_causes(trace)
    acc = compile_account(trace).select("file", "compile_id", "occurrence", "seconds", "forward_s", "backward_s")
    acc = acc.filter(pl.col("compile_id").is_in(list({cid for cid, _ in by_id})))  # the lone compiles' (a superset)
    account = {(a["file"], a["compile_id"], a["occurrence"] or 1): a for a in acc.iter_rows(named=True)}
    groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[dict[str, Any]]] = defaultdict(list)
    for (cid, _occ), on in by_id.items():
        if len(on) == len(ranks) or cid in covered:
            continue
        any_row = next(iter(on.values()))
        code = (any_row["function"], any_row["filename"], any_row["line"])
        waiting = sorted(r for r in code_ranks[code] if r not in on)
        if not waiting:
            continue  # a function only these ranks run: nothing to compare with
        group = groups[(tuple(sorted(on)), tuple(waiting))]  # once per compile, not per rank
        for rank, row in sorted(on.items()):
            # its time is its account's: every backward piece, a compile still open up to the capture's end
            a = account.get((row["file"], cid, row["occurrence"] or 1))
            fwd = (a["forward_s"] if a else row.get("compile_time_s")) or 0.0
            bwd = (a["backward_s"] if a else row.get("bwd_compile_time_s")) or 0.0
            secs = (a["seconds"] if a and a["seconds"] is not None else fwd + bwd)
            group.append({
                "rank": rank, "compile_id": cid, "function": row["function"], "filename": row["filename"],
                "line": row["line"], "seconds": round(secs, 3), "forward_s": round(fwd, 3),
                "backward_s": round(bwd, 3) if (a and a["backward_s"] is not None) or row.get("bwd_compile_time_s") is not None else None,
                "start": row["start"], "cause": _cause(reasons.get((rank, cid), []), primary.get((rank, cid, _occ or 1))),
                "file": row["file"], "lineno": row["lineno"],
            })
    if not groups:
        return []
    ddp = ddp_evidence(trace)
    where_ddp = "the first gradient all-reduce (a hook of DDP's reducer in the backward, in no compiled graph)"
    out = []
    for (compiling, waiting), comps in groups.items():
        comps.sort(key=lambda x: (sort_key(x["compile_id"]), x["rank"]))
        # per compiling rank, its lone compiles add up; the others wait for the slowest rank
        per_rank: dict[int, float] = defaultdict(float)
        for x in comps:
            per_rank[x["rank"]] += x["seconds"]
        secs = max(per_rank.values())
        lead = max(per_rank, key=lambda r: (per_rank[r], -r))
        mine = [x for x in comps if x["rank"] == lead]
        others = _others_compiling(c, list(waiting), mine)
        # named by its costliest compile (the model's forward, not the wrapper around it)
        first = max(mine, key=lambda x: x["seconds"])
        fn = describe(trace, rank=lead, function=first["function"], filename=first["filename"], line=first["line"])["label"]
        loc = f"{PurePath(first['filename']).name}:{first['line']}" if first.get("filename") else "?"
        ids = ", ".join(f"{bracketed(x['compile_id'], x.get('occurrence'), x.get('attempts'))}" for x in mine[:3]) + (f" and {len(mine) - 3} more" if len(mine) > 3 else "")
        verb = "recompiled" if any((compile_number(x["compile_id"]) or 0) > 0 for x in mine) else "compiled"
        cause = f" {first['cause']}" if first.get("cause") else ""
        parts = "; ".join(
            f"{bracketed(x['compile_id'], x.get('occurrence'), x.get('attempts'))} {_secs(x['forward_s'])}" + (f" + its backward {_secs(x['backward_s'])}" if x.get("backward_s") else "")
            for x in mine[:3]
        )
        where = where_ddp if ddp else ("its next collective" if len(waiting) == 1 else "their next collective")
        estimate = (
            f"estimated from {_ranks([lead])}'s compile time in its compilation_metrics ({parts}); "
            f"the waiting ranks ran cached graphs meanwhile"
            + (f" (they compiled {others:.2f} s of their own in that time, not subtracted)" if others >= 0.05 else "")
            + "; no record shows the wait itself"
        )
        message = (
            f"{_ranks(list(waiting))} waited ~{_secs(secs)} at {where} while {_ranks(list(compiling))} {verb} "
            f"{ids} {fn} ({loc}) alone{cause}"
        )
        kinds = {r.get("kind") for x in mine for r in reasons.get((x["rank"], x["compile_id"]), [])}
        out.append({
            "compiling_ranks": list(compiling),
            "waiting_ranks": list(waiting),
            "compiles": [{k: v for k, v in x.items() if k not in ("file", "lineno", "start")} | {"start": _iso(x["start"])}
                         for x in comps],
            "seconds": round(secs, 3),
            "ranks_stalled": len(waiting),
            "cost_s": round(secs * len(waiting), 3),
            "where": where,
            "ddp": ddp,
            "estimate": estimate,
            "message": message,
            "next_step": _next_step(kinds, first, list(compiling)),
            "certainty": "likely",
            "rank": lead,
            "compile_id": first["compile_id"],
            "file": first["file"],
            "lineno": first["lineno"],
        })
    out.sort(key=lambda s: (-s["cost_s"], s["compiling_ranks"]))
    return out


def _secs(s: float) -> str:
    return f"{s:.2f}s" if s >= 0.01 else f"{s:.3f}s"


def _iso(ts: Any) -> str | None:
    return ts.isoformat() if ts is not None else None


def _others_compiling(c: pl.DataFrame, waiting: list[int], mine: list[dict[str, Any]]) -> float:
    """Seconds the waiting ranks spent compiling (any compile) inside the lone compiles'
    window, the most of any waiting rank: what the estimate does not subtract."""
    starts = [x["start"] for x in mine if x["start"] is not None]
    if not starts:
        return 0.0
    lo = min(starts)
    hi = max(x["start"] for x in mine if x["start"] is not None)
    span = sum(x["seconds"] for x in mine)
    hi = hi + datetime.timedelta(seconds=span)
    w = c.filter(pl.col("rank").is_in(waiting) & pl.col("start").is_not_null() & (pl.col("start") >= lo) & (pl.col("start") <= hi))
    if w.height == 0:
        return 0.0
    return float(w.group_by("rank").agg(pl.col("total_time_s").fill_null(0).sum())["total_time_s"].max())


def _next_step(kinds: set[Any], first: dict[str, Any], compiling: list[int]) -> str:
    who = _ranks(compiling)
    if "size" in kinds:
        return (
            f"give every rank the same shapes so {who} does not compile alone: drop_last=True in the DataLoader "
            f"(or pad the last batch to the others' size); or make the varying dimension dynamic on every rank "
            f"before the first step (torch._dynamo.mark_dynamic on the input, e.g. mark_dynamic(x, 0) for the batch), "
            f"so every rank compiles the dynamic graph together at step 1"
        )
    return (
        f"make every rank compile the same graphs at the same step: what made {who} compile "
        f"{first['function'] or 'this function'} again differs per rank (its recompile reason); compile before "
        f"the first step on every rank (a warm-up call with each input kind on every rank)"
    )


def mark_lone_recompiles(
    storms: list[dict[str, Any]], stalls: list[dict[str, Any]], *, waits: list[dict[str, Any]] | None = None
) -> None:
    """A recompile made on some ranks only is never "nothing to fix": each storm whose
    compiles include a stall's lone compile on its rank gets `stall` (the stall finding's
    message, seconds, ranks stalled, cost) and is no longer `expected`; its causes' fixes
    become the stall's next step (in place). `waits`: analyze.collectives' waits (a lone
    compile whose own graph holds the collective the others wait at), taken the same way."""
    lone: dict[tuple[int, str], dict[str, Any]] = {}
    for s in stalls:
        for x in s["compiles"]:
            lone[(x["rank"], x["compile_id"])] = {**s, "section": "RANK STALLS"}
    for w in waits or []:
        if not w.get("waiting_ranks"):
            continue
        n = len(w["waiting_ranks"])
        for r in w["compiling_ranks"]:
            lone.setdefault((r, w["compile_id"]), {
                "message": w["message"], "seconds": w["seconds"], "waiting_ranks": w["waiting_ranks"],
                "compiling_ranks": w["compiling_ranks"], "ranks_stalled": n, "cost_s": round(w["seconds"] * n, 3),
                "section": "COLLECTIVES", "next_step": None,
            })
    for st in storms:
        hit = next((lone[(st["rank"], cid)] for cid in st.get("compile_ids") or [] if (st["rank"], cid) in lone), None)
        if hit is None:
            continue
        # the collective runs on a tensor of the same shape on every rank (else the collectives
        # would not match: analyze.collectives' mismatch), so the shapes' fix holds
        nxt = hit["next_step"] or _next_step({c.get("kind") for c in st.get("causes") or []},
                                             {"function": (st.get("code") or {}).get("label") or st.get("function")},
                                             hit["compiling_ranks"])
        st["stall"] = {
            "message": hit["message"], "seconds": hit["seconds"], "waiting_ranks": hit["waiting_ranks"],
            "ranks_stalled": hit["ranks_stalled"], "cost_s": hit["cost_s"], "section": hit["section"], "next_step": nxt,
        }
        if st.get("expected"):
            st["expected"] = False
            for cause in st.get("causes") or []:
                if cause.get("expected"):
                    cause["expected"] = False
                    cause["fix"] = (
                        f"not free on some ranks only: {ranks_text(hit['waiting_ranks']).strip()} waited "
                        f"~{_secs(hit['seconds'])} for it ({hit['section']}): {nxt}"
                    )
