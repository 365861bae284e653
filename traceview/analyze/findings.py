"""Finding identity: when two ranks' findings are the same finding, and how a finding that is
the same on several ranks is shown once with its ranks. Used by the text report and the UI
alike (traceview.report, traceview.tui.model), on the rows of `build_report`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from parsers.compiles import STATUSES  # the compile statuses counted per rank


def storm_key(s: dict[str, Any]) -> tuple:
    """What makes two ranks' recompile storms the same finding."""
    return (s["function"], s["filename"], s["line"], s["compiles"], s["hit_recompile_limit"],
            tuple((c["kind"], c["text"], c["count"]) for c in s["causes"]))


def failure_key(f: dict[str, Any]) -> tuple:
    """What makes two ranks' failed compiles the same finding."""
    return (f["compile_id"], f.get("occurrence"), f.get("function"), f["filename"], f["line"], f["category"], f["reason"])


def slow_compile_key(r: dict[str, Any]) -> tuple:
    """What makes two ranks' slowest compiles the same line."""
    return (r["seconds"], r["compile_id"], r["function"], r["filename"], r["line"])


def group_ranks(
    items: list[dict[str, Any]], key: Callable[[dict[str, Any]], Hashable]
) -> list[tuple[dict[str, Any], list[Any]]]:
    """Findings that are the same on several ranks, shown once with the list of ranks (in the
    order of their first appearance; each with its first item)."""
    groups: dict[Any, tuple[dict[str, Any], list[Any]]] = {}
    for it in items:
        k = key(it)
        if k in groups:
            groups[k][1].append(it["rank"])
        else:
            groups[k] = (it, [it["rank"]])
    return list(groups.values())


def per_rank_key(r: dict[str, Any]) -> tuple:
    """What makes two ranks' per-rank lines the same (they compiled alike)."""
    return (r["compiles"], *(r[k] for k in STATUSES), r["compile_time_s"])


def divergence_key(d: dict[str, Any]) -> tuple:
    """What makes two ranks' divergence the same line (they differ from the majority alike)."""
    return (tuple(d["extra_compile_ids"]), tuple(d["missing_compile_ids"]), tuple(d["different"]), d["detail"])


# Pieces of a rank list shown before it is cut ("… 812 ranks in all"): one screen line.
_MAX_RANK_PIECES = 12


def ranks_text(ranks: list[Any]) -> str:
    """"rank 3 ", "ranks 0-47 ", "ranks 1,5 ", "ranks 0-99,120-1023 " (runs of three or more
    as ranges; a long list cut, with the count); empty for a process without a rank."""
    rs = sorted({r for r in ranks if r is not None})
    if not rs:
        return ""
    if len(rs) == 1:
        return f"rank {rs[0]} "
    if rs == list(range(rs[0], rs[-1] + 1)):
        return f"ranks {rs[0]}-{rs[-1]} "
    pieces: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        pieces += [f"{rs[i]}-{rs[j]}"] if j - i >= 2 else [str(r) for r in rs[i : j + 1]]
        i = j + 1
    if len(pieces) > _MAX_RANK_PIECES:
        return f"ranks {','.join(pieces[:_MAX_RANK_PIECES])},… ({len(rs)} ranks) "
    return f"ranks {','.join(pieces)} "
