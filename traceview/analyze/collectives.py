"""Ranks whose compiled graphs do not issue the same collectives (issue 32).

Each rank's Inductor graphs log their collective schedule (the `collectives` table,
parsers.collectives). A job only works when every rank issues the same collectives, in the
same order, with the same sizes and dtypes: otherwise the collectives pair up wrongly and the
job hangs, times out (NCCL watchdog, gloo), or aborts on a size mismatch.

`collective_mismatches(trace)` compares, per compiled graph (compile id and which Inductor
graph of it: forward, backward), each rank's sequence of collectives (the waits left out):

* ranks are grouped by identical schedule; the largest group is the reference (a tie goes to
  the group with the lowest rank);
* for every other group: the first position where it differs (an extra or a missing
  collective, another op, other sizes or dtypes);
* a graph that only some ranks compiled (a rank that recompiled alone for another shape) is
  compared with the graph of the same frame the other ranks run (their latest compile of it),
  and tied to the recompile that made it;
* a schedule that torch did not log because the graph came from the FX graph cache (or because
  the backend is not Inductor) is unknown: such a rank is listed as unknown, never as having
  no collectives.

Each finding names the ranks, the compile, the function and its line, the collective, the
consequence to expect and the next step.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import polars as pl

from parsers.compile_ids import bracketed, frame_group, sort_key
from traceview.analyze.accounts.compiles import OPEN, compile_account
from traceview.analyze.findings import ranks_text

if TYPE_CHECKING:
    from traceview.trace import Trace

CONSEQUENCE = "expect a hang, an NCCL timeout or 'Connection closed by peer'"
SIZE_CONSEQUENCE = (
    "expect an abort on the size mismatch (gloo: 'Received data size doesn't match expected size'), "
    "a hang, an NCCL timeout or wrong results"
)
_ORDINAL = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}


def _ordinal(n: int) -> str:
    return _ORDINAL.get(n, f"{n}th")


def _ranks(rs: list[int]) -> str:
    return ranks_text(rs).strip()  # the one wording of a rank list


def _tensor(shape: list[int] | None, dtype: str | None) -> str:
    if shape is None and dtype is None:
        return "a tensor of unknown size"
    return f"{dtype or '?'}{list(shape) if shape is not None else '[?]'}"


def _count(n: int, op: str) -> str:
    return f"{n} {op}"


def _schedule_text(items: list[tuple]) -> str:
    if not items:
        return "no collectives"
    return ", ".join(f"{op} {_tensor(shape, dtype)}" for op, shape, dtype in items)


def _frame(cid: str) -> str:
    return frame_group(cid)


def collective_mismatches(trace: Trace) -> dict[str, Any]:
    """{"graphs": [...], "mismatches": [...], "unknown": [...]} (docs/report.md, `collectives`)."""
    out: dict[str, Any] = {"graphs": [], "mismatches": [], "unknown": [], "waits": [], "execution": []}
    out["execution"] = execution_differences(trace)
    c = trace.collectives
    if c.height == 0:
        return out
    compiles = trace.compiles
    ranks = sorted(int(r) for r in compiles["rank"].drop_nulls().unique().to_list())
    if len(ranks) < 2:
        return out
    info: dict[tuple[int, str], dict[str, Any]] = {}
    for r in compiles.filter(pl.col("rank").is_not_null()).iter_rows(named=True):
        info[(r["rank"], r["compile_id"])] = r  # the latest compile of the id (after a reset)
    ids_of: dict[int, list[str]] = defaultdict(list)  # each rank's compile ids (read per rank below)
    for rk, cid in info:
        ids_of[rk].append(cid)
    account = compile_account(trace)
    causes = {(r, cid): why for r, cid, why in account.filter(pl.col("cause").is_not_null()).select(
        "rank", "compile_id", "cause").iter_rows()}
    sched: dict[tuple[str, int], dict[int, list[tuple]]] = defaultdict(dict)
    # the user's line of each collective, where the graph's node names it (not compared)
    lines: dict[tuple[str, int, int], list[str | None]] = defaultdict(list)
    for r in c.filter(pl.col("kind") == "collective").sort("rank", "compile_id", "graph_index", "position").iter_rows(named=True):
        shape = tuple(r["shape"]) if r["shape"] is not None else None
        sched[(r["compile_id"], r["graph_index"])].setdefault(r["rank"], []).append((r["op"], shape, r["dtype"]))
        user = f"{PurePath(r['user_file']).name}:{r['user_line']}" if r["user_file"] else None
        lines[(r["compile_id"], r["graph_index"], r["rank"])].append(user)
    # a compile with collectives on some rank: each rank's schedule, or why it is unknown
    ids_with = sorted({cid for cid, _ in sched}, key=sort_key)
    graph_indexes = sorted({gi for _, gi in sched})

    def state(rank: int, cid: str, gi: int) -> tuple[str, list[tuple] | None]:
        s = sched.get((cid, gi), {}).get(rank)
        if s is not None:
            return "known", s
        row = info.get((rank, cid))
        if row is None:
            return "not compiled", None
        if (row.get("fx_cache_hits") or 0) > 0:
            return "unknown: the graph came from the FX graph cache (torch logs no schedule then)", None
        if (row.get("fx_cache_misses") or 0) > 0 or row.get("inductor_compile_time_s") is not None:
            return "known", []
        return "unknown: not compiled by Inductor (no schedule logged)", None

    for cid in ids_with:
        for gi in graph_indexes:
            if (cid, gi) not in sched:
                continue
            states = {r: state(r, cid, gi) for r in ranks}
            known = {r: s for r, (st, s) in states.items() if st == "known"}
            for r, (st, _) in states.items():
                if st.startswith("unknown"):
                    out["unknown"].append({"rank": r, "compile_id": cid, "graph_index": gi, "why": st.removeprefix("unknown: ")})
            compiled_on = [r for r, (st, _) in states.items() if st != "not compiled"]
            groups: dict[tuple, list[int]] = defaultdict(list)
            for r, s in known.items():
                groups[tuple(s)].append(r)
            ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
            row0 = info.get((min(compiled_on), cid)) if compiled_on else None
            where = _where(row0)
            out["graphs"].append({
                "compile_id": cid, "graph_index": gi, **where,
                "schedules": [{"ranks": sorted(rs), "collectives": [_item(x) for x in s]} for s, rs in ordered],
                "not_compiled_on": [r for r, (st, _) in states.items() if st == "not compiled"],
            })
            if len(ordered) > 1:
                ref, ref_ranks = ordered[0]
                for s, rs in ordered[1:]:
                    out["mismatches"].append(_differ(cid, gi, where, list(s), sorted(rs), list(ref), sorted(ref_ranks),
                                                     at=(lines[(cid, gi, min(rs))], lines[(cid, gi, min(ref_ranks))])))
            # compiled by fewer than all ranks: against the graph of the same frame the others run
            missing = [r for r, (st, _) in states.items() if st == "not compiled"]
            if missing and len(missing) * 2 >= len(ranks) and known:
                alone = sorted(r for r in known if r not in missing)
                theirs = _sibling(cid, gi, missing, sched, ids_of)
                if theirs is not None:
                    other_cid, other_s = theirs
                    for s, rs in ordered:
                        rs_alone = sorted(r for r in rs if r in alone)
                        if rs_alone and list(s) != other_s:
                            out["mismatches"].append(
                                _differ(cid, gi, where, list(s), rs_alone, other_s, sorted(missing), other_cid=other_cid,
                                        recompile=_recompile(info, causes, rs_alone[0], cid),
                                        at=(lines[(cid, gi, rs_alone[0])], lines[(other_cid, gi, min(missing))]))
                            )
    # a compile the account says never ended (open at the capture's end): since when, per rank
    stuck: dict[int, Any] = {}
    for r, since in account.filter(pl.col("status").is_in(OPEN) & pl.col("rank").is_not_null()).select("rank", "start").iter_rows():
        if since is not None and (r not in stuck or since < stuck[r]):
            stuck[r] = since
    ended = {(r, cid): end for r, cid, end in account.filter(~pl.col("status").is_in(OPEN)).select(
        "rank", "compile_id", "end").iter_rows()}
    out["waits"] = _waits(ids_with, ranks, info, {cid for cid, _ in sched}, stuck=stuck, ended=ended)
    return out


def execution_differences(trace: Trace) -> list[dict[str, Any]]:
    """Ranks whose recorded graph executions (`graph_execution`, from
    record_and_log_graph_execution_order) differ from the largest group of ranks with the same
    sequence: the first call where they differ (a rank that ran a graph the others did not, or
    stopped earlier). Ranks without the record are not compared."""
    ge = trace.graph_execution
    if ge.height == 0:
        return []
    seqs: dict[int, list[str]] = defaultdict(list)
    for r in ge.filter(pl.col("rank").is_not_null()).sort("rank", "block", "order").iter_rows(named=True):
        seqs[r["rank"]].append(r["compile_id"] or "?")
    if len(seqs) < 2:
        return []
    groups: dict[tuple, list[int]] = defaultdict(list)
    for r, seq in seqs.items():
        groups[tuple(seq)].append(r)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
    ref, ref_ranks = ordered[0]
    out = []
    for seq, rs in ordered[1:]:
        n = next((i for i, (a, b) in enumerate(zip(seq, ref)) if a != b), min(len(seq), len(ref)))
        mine = f"ran [{seq[n]}]" if n < len(seq) else "ran no more compiled graphs"
        theirs = f"[{ref[n]}]" if n < len(ref) else "no more compiled graphs"
        out.append({
            "ranks": sorted(rs), "other_ranks": sorted(ref_ranks), "call": n, "compile_ids": list(seq), "other_compile_ids": list(ref),
            "message": (
                f"compiled graphs ran in another order: at call {n + 1} {_ranks(rs)} {mine} where {_ranks(ref_ranks)} ran {theirs} "
                f"({len(seq)} against {len(ref)} recorded calls)"
            ),
        })
    return out


# a compile shorter than this makes no wait worth naming (nor does a spread of durations below it)
WAIT_MIN_S = 1.0


def _waits(
    ids: list[str], ranks: list[int], info: dict, with_collectives: set[str], *,
    stuck: dict[int, Any], ended: dict[tuple[int, str], Any],
) -> list[dict[str, Any]]:
    """The ranks that waited at a collective while another rank compiled: a graph with
    collectives compiled by some ranks only (they waited the whole compile), or by every rank
    with one much slower (a cache miss the others did not have): they waited the difference.
    An estimate from the compiles' own times (compilation_metrics), not a measured wait.
    `stuck`: rank -> when its compile that never ended began (the compile account's open
    compiles): from then on that rank waited for nobody, the others were waiting for it; its
    open compile is no compile time, and it is not among the waiting ranks of a compile that
    ended after it got stuck (`ended`: when each compile that ended did, per rank and id)."""
    out = []
    for cid in ids:
        if cid not in with_collectives:
            continue
        took = {r: info[(r, cid)].get("total_time_s") for r in ranks if (r, cid) in info and r not in stuck}
        took = {r: t for r, t in took.items() if t is not None}
        if not took:
            continue
        ends = [ended[(r, cid)] for r in took if ended.get((r, cid)) is not None]
        done = max(ends) if ends else None
        # a rank stuck before this compile ended elsewhere was not waiting for it
        behind = {r for r, since in stuck.items() if done is None or since < done}
        if len(took) < len(ranks):
            compiling = sorted(took)
            waiting = sorted(r for r in ranks if r not in took and r not in behind)
            if not waiting:
                continue
            secs = max(took.values())
            why = ""
        else:
            slow = max(took.values())
            fast = min(took.values())
            if slow - fast < WAIT_MIN_S or slow < 2 * fast:
                continue
            compiling = sorted(r for r, t in took.items() if t - fast >= (slow - fast) / 2)
            waiting = sorted(r for r in ranks if r not in compiling)
            secs = slow - fast
            hit = [r for r in waiting if (info[(r, cid)].get("fx_cache_hits") or 0) > 0]
            miss = [r for r in compiling if (info[(r, cid)].get("fx_cache_misses") or 0) > 0]
            why = " (an FX graph cache miss the others did not have)" if hit and miss else ""
        if secs < WAIT_MIN_S:
            continue
        row = info.get((compiling[0], cid)) or {}
        fn = row.get("function") or "?"
        loc = f"{PurePath(row['filename']).name}:{row.get('line')}" if row.get("filename") else "?"
        verb = "waited" if waiting else ""
        out.append({
            "compile_id": cid, "compiling_ranks": compiling, "waiting_ranks": waiting, "seconds": round(secs, 2),
            "function": row.get("function"), "filename": row.get("filename"), "line": row.get("line"),
            "cache_miss": bool(why),
            "message": (
                f"{_ranks(waiting)} {verb} ~{secs:.1f} s at the first collective while {_ranks(compiling)} compiled "
                f"{bracketed(cid)} {fn} ({loc}){why}"
            ),
        })
    return out


def _item(x: tuple) -> dict[str, Any]:
    op, shape, dtype = x
    return {"op": op, "shape": list(shape) if shape is not None else None, "dtype": dtype}


def _where(row: dict[str, Any] | None) -> dict[str, Any]:
    if not row:
        return {"function": None, "filename": None, "line": None}
    return {"function": row.get("function"), "filename": row.get("filename"), "line": row.get("line")}


def _recompile(info: dict, causes: dict[tuple[int, str], str], rank: int, cid: str) -> str | None:
    """Why `rank` compiled `cid`: its one cause (the compile account's), else what torch logged."""
    if (rank, cid) in causes:
        return causes[(rank, cid)]
    row = info.get((rank, cid))
    return (row or {}).get("recompile_reason")


def _sibling(cid: str, gi: int, ranks: list[int], sched: dict, ids_of: dict[int, list[str]]) -> tuple[str, list[tuple]] | None:
    """The graph of the same frame that `ranks` compiled (their latest compile of it) with its
    schedule, when they all have the same one (`ids_of`: each rank's compile ids)."""
    frame = _frame(cid)
    found: set[tuple[str, tuple]] = set()
    for r in ranks:
        ids = sorted((c for c in ids_of.get(r, ()) if _frame(c) == frame and c != cid), key=sort_key)
        if not ids:
            return None
        other = ids[-1]
        s = sched.get((other, gi), {}).get(r)
        if s is None:
            return None
        found.add((other, tuple(s)))
    if len(found) != 1:
        return None
    other, s = found.pop()
    return other, list(s)


def _differ(
    cid: str, gi: int, where: dict[str, Any], mine: list[tuple], ranks: list[int], ref: list[tuple], ref_ranks: list[int],
    *, other_cid: str | None = None, recompile: str | None = None,
    at: tuple[list[str | None], list[str | None]] = ([], []),
) -> dict[str, Any]:
    """One finding: `ranks`' schedule `mine` against `ref_ranks`' `ref`, at the first difference
    (`at`: the user's line of each collective of both, where the graph names it)."""
    n = next((i for i, (a, b) in enumerate(zip(mine, ref)) if a != b), min(len(mine), len(ref)))

    def line_of(side: list[str | None]) -> str | None:
        return side[n] if n < len(side) else None

    mine_at, ref_at = line_of(at[0]), line_of(at[1])
    graph = "" if gi == 0 else " (backward)"
    fn = where.get("function") or "?"
    loc = f"{PurePath(where['filename']).name}:{where.get('line')}" if where.get("filename") else "?"
    label = f"{bracketed(cid)}{graph} {fn} ({loc})"
    theirs_label = bracketed(other_cid or cid)
    ops_mine = defaultdict(int)
    ops_ref = defaultdict(int)
    for op, _, _ in mine:
        ops_mine[op] += 1
    for op, _, _ in ref:
        ops_ref[op] += 1
    rank_word = _ranks(ranks)
    ref_word = _ranks(ref_ranks)
    poss = "'s" if len(ranks) == 1 else "'"
    verb = "issues" if len(ranks) == 1 else "issue"
    ref_verb = "issues" if len(ref_ranks) == 1 else "issue"
    if n < len(mine) and n < len(ref) and mine[n][0] == ref[n][0]:
        kind = "size" if mine[n][1] != ref[n][1] else "dtype"
        op = mine[n][0]
        k = sum(1 for x in mine[: n + 1] if x[0] == op)
        ref_take = f"{ref_word} {'in ' + theirs_label + ' ' if other_cid else ''}{'takes' if len(ref_ranks) == 1 else 'take'}"
        if other_cid:
            why = f" (recompiled: {recompile})" if recompile else ""
            lead = f"{rank_word} compiled {label} alone{why}; there its"
        else:
            lead = f"{rank_word}{poss} {label}"
        what = (f"{lead} {_ordinal(k)} {op}{f' ({mine_at})' if mine_at else ''} takes {_tensor(mine[n][1], mine[n][2])}, "
                f"{ref_take} {_tensor(ref[n][1], ref[n][2])}")
        consequence = SIZE_CONSEQUENCE
        if other_cid and kind == "size":
            # the collective runs on a tensor whose size follows the input's (an activation, a
            # loss): a dynamic graph would still send another size. Parameters' gradients have
            # the same shape on every rank whatever the batch: that wait (analyze.stalls) is the
            # one mark_dynamic fixes, not this mismatch.
            nxt = (
                f"give every rank the same shapes (drop_last=True in the DataLoader, or pad the last batch): the "
                f"{op} runs on a tensor whose size follows the input, so marking the dimension dynamic (or dropping "
                f"dynamic=False) would spare {rank_word} the recompile but still send {_tensor(mine[n][1], mine[n][2])} "
                f"against {_tensor(ref[n][1], ref[n][2])}; only equal shapes make the collectives match"
            )
        elif other_cid:
            nxt = f"give every rank tensors of the same dtype in {fn} ({loc}): {rank_word} compiled {bracketed(cid)} alone for another"
            nxt += " input, and its collective sends another dtype than the others'"
        else:
            nxt = f"make every rank pass tensors of the same size and dtype to the collectives of {fn} ({loc})"
    elif n < len(mine) and n < len(ref):
        kind = "op"
        op = mine[n][0]
        what = (
            f"{rank_word}{poss} {label} issues {mine[n][0]}{f' ({mine_at})' if mine_at else ''} where {ref_word} {ref_verb} {ref[n][0]} "
            f"(the {_ordinal(n + 1)} collective)"
        )
        consequence = CONSEQUENCE
        nxt = f"make every rank issue the same collectives in the same order in {fn} ({loc})"
    else:
        kind = "extra" if len(mine) > len(ref) else "missing"
        longer = mine if kind == "extra" else ref
        op = longer[n][0]
        k = sum(1 for x in longer[: n + 1] if x[0] == op)
        counts = f"{rank_word}{poss} {label} {verb} {_count(ops_mine[op], op)}, {ref_word} {ref_verb} {ops_ref[op]}"
        if kind == "extra":
            what = f"{counts}; the {_ordinal(k)} ({_tensor(longer[n][1], longer[n][2])}{', ' + mine_at if mine_at else ''}) has no partner"
        else:
            what = (f"{counts}; the {_ordinal(k)} {op} of {ref_word}"
                    f"{f' ({ref_at})' if ref_at else ''} has no partner on {rank_word}")
        consequence = CONSEQUENCE
        nxt = (
            f"make every rank issue the same collectives: look in {fn} ({loc}) for a branch on the rank, or on data that "
            f"differs per rank, around a collective; TORCH_DISTRIBUTED_DEBUG=DETAIL names the mismatch at run time"
        )
    return {
        "kind": kind,
        "compile_id": cid,
        "graph_index": gi,
        **where,
        "ranks": ranks,
        "other_ranks": ref_ranks,
        "other_compile_id": other_cid,
        "recompile_reason": recompile,
        "position": n,
        "op": op,
        "user_line": (ref_at if kind == "missing" else mine_at),
        "schedule": [_item(x) for x in mine],
        "other_schedule": [_item(x) for x in ref],
        "message": f"{'collective sizes' if kind in ('size', 'dtype') else 'collectives'} do not match: {what}: {consequence}",
        "next_step": nxt,
    }


def mismatch_ranks(result: dict[str, Any]) -> list[int]:
    """The ranks to look at first: those outside the reference group of each mismatch."""
    return sorted({r for m in result.get("mismatches", []) for r in m["ranks"]})


# ---------------------------------------------------------------- distributed errors (item 4)

# what a rank's process group says when the ranks are out of step or a peer is gone, as
# (kind, pattern); the first that matches names the error
_DISTRIBUTED: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("collective mismatch (TORCH_DISTRIBUTED_DEBUG=DETAIL)", re.compile(r"Detected mismatch between collectives on ranks")),
    ("collective size mismatch (gloo)", re.compile(r"Received data size doesn't match expected size")),
    ("collective mismatch (gloo)", re.compile(r"Is there a distributed collective mismatch")),
    ("NCCL watchdog timeout", re.compile(r"WorkNCCL\(SeqNum=\d+, OpType=\w+")),
    ("NCCL timeout", re.compile(r"(?:ProcessGroupNCCL|NCCL)[^\n]{0,300}?(?:[Ww]atchdog|timed? ?out|Timeout)")),
    ("collective timeout (gloo)", re.compile(r"Timed out waiting \d+ms for (?:send|recv) operation")),
    ("peer connection closed", re.compile(r"Connection closed by peer|Connection reset by peer")),
    ("c10d error", re.compile(r"DistBackendError|DistNetworkError|DistStoreError|c10d::|gloo::EnforceNotMet")),
)
# the line that says it, cut to this many characters either side of the match
_LINE_MAX = 400


def distributed_error(text: str | None) -> tuple[str, str] | None:
    """(kind, the line that says it) when `text` holds a distributed (c10d, gloo, NCCL) error
    of ranks out of step or of a lost peer; None otherwise."""
    if not text:
        return None
    for kind, pat in _DISTRIBUTED:
        m = pat.search(text)
        if m:
            start = max(text.rfind("\n", 0, m.start()) + 1, m.start() - _LINE_MAX)
            end = text.find("\n", m.end())
            end = min(len(text) if end < 0 else end, m.end() + _LINE_MAX)
            return kind, text[start:end].strip()
    return None
