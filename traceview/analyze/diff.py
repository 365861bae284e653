"""What changed between two runs (or two ranks), by what things are: `traceview diff`'s computation.

Compiles are matched by their code object, not by compile id: (function, file name, first
line), file paths compared by their last component so runs from different machines (or
checkouts) match; a code object whose line moved is matched by (function, file name) when that
is unambiguous. The compiles of one code object are paired in compile-id order. Dynamo graphs
are compared by structure (the ops they call, counted by target), guards by their code (object
ids and addresses blanked out: they differ between processes), kernels by the ops they fuse
(`cpp_fused_relu_sin_1` -> `cpp_fused_relu_sin`); the summaries' typed findings by what each
is about.

`compare_runs(a, against=b)` returns plain data (docs/diff.md documents it); its text and the
CI gate are traceview.workflow.diff's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from parsers.code_location import brief
from parsers.compile_ids import epoch_expr, sort_key
from traceview.analyze import compile_time as ct
from traceview.analyze.code_objects import describe, of_compile
from traceview.analyze.divergence import rank_divergence
from traceview.analyze.failures import failures
from traceview.analyze.finding import Finding
from traceview.analyze.findings import code_label, ranks_text
from traceview.analyze.hotspots import graph_break_hotspots
from traceview.analyze.storms import recompile_storms
from traceview.analyze.unfinished import unfinished_compiles
from traceview.errors import UserError
from traceview.printable import one_line
from traceview.trace import TABLES, Trace
from traceview.versions import DIFF_SCHEMA_VERSION

# Sections that count as changes, most important first (compile time is apart: see `noise`).
SECTIONS = (
    "unfinished",
    "functions",
    "recompile_causes",
    "graph_breaks",
    "frames_eager",
    "failures",
    "graphs",
    "guards",
    "kernels",
    "autotuning",
    "cache",
    "cache_keys",
    "pgo",
    "rank_divergence",
    "collectives",
)
_ANY_RANK = object()  # no --rank: every rank, each matched with the same rank on the other side


@dataclass(frozen=True)
class Noise:
    """A compile-time change is noise unless it is at least `pct` percent AND `seconds` long."""

    pct: float = 10.0
    seconds: float = 0.2

    def significant(self, a: float, b: float) -> bool:
        d = abs(b - a)
        return d >= self.seconds and (a == 0 or d * 100.0 >= self.pct * abs(a))


def file_tail(path: str | None) -> str:
    """The part of a file path compared between runs: module-relative for torch's, a
    library's and Python's code (parsers.code_location), else the file name."""
    return brief(path)


def code_object(function: str | None, filename: str | None, line: int | None) -> str:
    """How a code object is shown: `step (train.py:4)`."""
    where = file_tail(filename) + (f":{line}" if line is not None else "")
    return f"{function or '?'} ({where})" if where else str(function or "?")


_IDS = r"\b0x[0-9a-fA-F]+\b|\b\d{7,}\b"
_DEVICE = r"\b(device=|cuda:)\d+\b"
_KERNEL_SUFFIX = r"_\d+$"
_FUSED_KINDS = ("triton", "template", "cpp")


def guard_key(kind: pl.Expr, code: pl.Expr, *, blank_device: bool = False) -> pl.Expr:
    """A guard as compared: `KIND: code`, the code without its `# user code  # file:line`
    comment (paths differ between checkouts), object ids and addresses blanked to `#` (they
    differ between processes), and with `blank_device` device indices too."""
    c = code.str.split("  # ").list.first().str.strip_chars_end().str.replace_all(_IDS, "#")
    if blank_device:
        c = c.str.replace_all(_DEVICE, "${1}#")
    return pl.when(code.is_null() | (code == "")).then(kind).otherwise(pl.concat_str(kind, pl.lit(": "), c))


def kernel_key(name: pl.Expr, kind: pl.Expr) -> pl.Expr:
    """A kernel by the ops it fuses: a generated kernel's name without its trailing counter
    (`cpp_fused_relu_sin_1` -> `cpp_fused_relu_sin`); extern and fallback calls by name."""
    name = name.fill_null("?")
    return pl.when(kind.is_in(_FUSED_KINDS)).then(name.str.replace(_KERNEL_SUFFIX, "")).otherwise(name)


# ------------------------------------------------------------------------------ one side
def _of_rank(df: pl.DataFrame, rank: Any) -> pl.DataFrame:
    return df.filter(pl.col("rank").eq_missing(rank)) if "rank" in df.columns else df


def _rank_view(trace: Trace, rank: Any) -> Trace:
    """The rows of one rank of `trace` as a Trace of their own (each table filtered when first
    read), for the analyzers that compare one rank with another."""

    def of_rank(name: str) -> Callable[[], pl.DataFrame]:
        return lambda: _of_rank(trace.table(name), rank)

    return Trace.from_tables(
        {name: of_rank(name) for name in TABLES}, inputs=trace.inputs, index=lambda: _of_rank(trace.index_events(), rank)
    )


class _Side:
    """What one run (or one rank of it) compiled, keyed by code object.

    `trace` is the whole run (analyzers that give each row its rank run on it, `keep` picks
    this side's rows); `view` is this side's rank of it (the whole run without --rank), for
    the analyzers that sum or compare over a run: failures, compile time, cache."""

    def __init__(self, trace: Trace, rank: Any) -> None:
        self.trace = trace
        self.rank = rank
        self.view = trace if rank is _ANY_RANK else _rank_view(trace, rank)
        self.all_compiles = self.view.compiles
        # the compiles matched by code object: a Dynamo frame's, outside compiled autograd
        self.compiles = self.all_compiles.filter(
            pl.col("frame_id").is_not_null() & pl.col("compiled_autograd_id").is_null()
        )
        self._places: dict[tuple, tuple[Any, str | None]] = {}  # frames()' key -> (rank, filename) as logged
        self._labels: dict[tuple, str] = {}

    def label(self, rank: Any, function: str | None, filename: str | None, line: Any, *,
              compile_id: str | None = None, occurrence: int | None = None) -> str:
        """A code object as the summary names it (findings.code_label over
        analyze.code_objects: `Sequential via torch.compile(model), called at train.py:21 …`,
        not torch's wrapper `inner`), with the call site of `compile_id` when given; `rank`
        and `filename` as the compiles table holds them."""
        key = (rank, function, filename, line, compile_id, occurrence)
        if key not in self._labels:
            code = describe(self.view, rank=rank, function=function, filename=filename, line=line)
            code = of_compile(code, self.view, rank=rank, compile_id=compile_id, occurrence=occurrence)
            row = {"function": function, "filename": filename, "line": line, "code": code}
            self._labels[key] = code_label(row, lambda f, ln: f"{file_tail(f)}:{ln}")
        return self._labels[key]

    def label_of(self, k: tuple, ids: tuple[str, int] | None = None) -> str:
        """The label of a code object of `frames()` (its key), with the call site of one of
        its compiles (`ids`: compile id, occurrence)."""
        rank, filename = self._places.get(k, (k[0], k[2]))
        cid, occ = ids if ids is not None else (None, None)
        return self.label(rank, k[1], filename, k[3], compile_id=cid, occurrence=occ)

    def keep(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows of an analyzer (each with `rank`) of this side's rank."""
        if self.rank is _ANY_RANK:
            return rows
        return [r for r in rows if r.get("rank") == self.rank]

    def rank_of(self, r: dict[str, Any]) -> Any:
        """The rank a row is matched under: its own without --rank, none with it."""
        return r.get("rank") if self.rank is _ANY_RANK else None

    def failed(self) -> set[tuple]:
        """(rank, compile_id, occurrence) of the compiles that failed."""
        f = self.compiles.filter(pl.col("status") == "failed")
        return {
            (self.rank_of(r), r["compile_id"], r["occurrence"])
            for r in f.select("rank", "compile_id", "occurrence").iter_rows(named=True)
        }

    def frames(self) -> dict[tuple, list[tuple[str, int]]]:
        """(rank, function, file tail, line) -> its compiles, (compile id, occurrence), in
        order: by epoch (a code object compiled again after a torch._dynamo.reset() has
        compiles in two epochs, with the ids of the first again), then by id. A code object is
        its function, file and line, never its frame id: after a reset another function
        may have the same frame id."""
        c = self.compiles.with_columns(epoch_expr(order="lineno").alias("_epoch"))
        out: dict[tuple, list[tuple[int, str, int]]] = {}
        for r in c.select("rank", "function", "filename", "line", "compile_id", "occurrence", "_epoch").iter_rows(named=True):
            k = (self.rank_of(r), r["function"], file_tail(r["filename"]), r["line"])
            out.setdefault(k, []).append((r["_epoch"], r["compile_id"], r["occurrence"]))
            self._places.setdefault(k, (r["rank"], r["filename"]))
        return {
            k: [(cid, occ) for _, cid, occ in sorted(v, key=lambda e: (e[0], sort_key(e[1]), e[2]))] for k, v in out.items()
        }

    def table(self, name: str) -> pl.DataFrame:
        """Table `name` of this side's rank (of the whole run without --rank)."""
        return self.view.table(name)

    def per_compile(self, name: str, key: pl.Expr) -> dict[tuple, Counter]:
        """(rank, compile_id, occurrence) -> Counter of `key` (null: not counted) over table
        `name` (each compile its own rows: the table's `occurrence`, from log order)."""
        counts = (
            self.table(name)
            .select("rank", "compile_id", "occurrence", key.alias("_key"))
            .filter(pl.col("_key").is_not_null())
            .group_by("rank", "compile_id", "occurrence", "_key")
            .len()
        )
        out: dict[tuple, Counter] = {}
        for r in counts.iter_rows(named=True):
            out.setdefault((self.rank_of(r), r["compile_id"], r["occurrence"]), Counter())[r["_key"]] += r["len"]
        return out


def _match_frames(fa: dict[tuple, list[str]], fb: dict[tuple, list[str]]) -> list[tuple[tuple | None, tuple | None]]:
    """Code objects of A and B paired: the same (rank, function, file, line), then the same
    (rank, function, file) where each side has exactly one left, then Dynamo's resume
    functions by the function they resume (`torch_dynamo_resume_in_step_at_7` and `..._at_6`:
    the break moved) where each side has exactly one; the rest unmatched."""
    pairs = [(k, k) for k in fa if k in fb]
    left_a = [k for k in fa if k not in fb]
    left_b = [k for k in fb if k not in fa]
    for name_of in (lambda k: k[:3], lambda k: (k[0], _RESUME_AT.sub(r"\1", k[1] or ""), k[2])):
        by_name_a: dict[tuple, list[tuple]] = {}
        by_name_b: dict[tuple, list[tuple]] = {}
        for k in left_a:
            by_name_a.setdefault(name_of(k), []).append(k)
        for k in left_b:
            by_name_b.setdefault(name_of(k), []).append(k)
        for name, ks in by_name_a.items():
            if len(ks) == 1 and len(by_name_b.get(name, [])) == 1:
                pairs.append((ks[0], by_name_b[name][0]))
                left_a.remove(ks[0])
                left_b.remove(by_name_b[name][0])
    pairs += [(k, None) for k in left_a] + [(None, k) for k in left_b]
    return pairs


_RESUME_AT = re.compile(r"^(torch_dynamo_resume_in_.*)_at_\d+$")


def _counter_change(ca: Counter, cb: Counter) -> tuple[dict[str, int], dict[str, int]]:
    added = {k: cb[k] - ca[k] for k in sorted(cb) if cb[k] > ca[k]}
    removed = {k: ca[k] - cb[k] for k in sorted(ca) if ca[k] > cb[k]}
    return added, removed


# ------------------------------------------------------------------------------ sections
def _unfinished_of(side: _Side) -> list[dict[str, Any]]:
    """This side's unfinished compiles (analyze.unfinished, run on the whole run so a rank
    behind the others is known), each as the diff shows it: rank, compile id, the code object
    (`label` as its user knows it, findings.code_label), the phase, innermost open span, how
    long it had been running up to the log's last line, and whether it is behind other ranks."""
    out = []
    for u in side.keep(unfinished_compiles(side.trace)):
        out.append({
            "rank": side.rank_of(u), "compile_id": u["compile_id"], "occurrence": u["occurrence"],
            "function": u["function"], "file": file_tail(u["filename"]), "line": u["line"],
            "label": code_label(u, lambda f, ln: f"{file_tail(f)}:{ln}"),
            "phase": u["phase"], "innermost_span": u["innermost_span"], "running_s": u["running_s"],
            "behind": u["behind"],
        })
    return out


def _unfinished(
    pairs: list, fa: dict, fb: dict, sa: _Side, sb: _Side, ua: list[dict[str, Any]], ub: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Compiles one run left unfinished and the other finished (or failed, or did not
    compile): `new` unfinished in B, `fixed` unfinished in A. The compile on the other side
    is the one in the same place of the matched code object's compiles (as graphs, guards and
    kernels are paired). A compile unfinished in both runs is no change (each side's
    `unfinished` lists it)."""
    b_to_a = {kb: ka for ka, kb in pairs if kb is not None}
    a_to_b = {ka: kb for ka, kb in pairs if ka is not None}

    def done(side: _Side) -> dict[tuple, dict[str, Any]]:
        c = side.compiles.select("rank", "compile_id", "occurrence", "status", "compile_time_s")
        return {(side.rank_of(r), r["compile_id"], r["occurrence"]): r for r in c.iter_rows(named=True)}

    out = []
    for change, mine, frames, partner, other_frames, other_done, other_open in (
        ("new", ub, fb, b_to_a, fa, done(sa), ua), ("fixed", ua, fa, a_to_b, fb, done(sb), ub),
    ):
        still = {(u["rank"], u["compile_id"], u["occurrence"]) for u in other_open}
        where = {(k[0], cid, occ): (k, i) for k, ids in frames.items() for i, (cid, occ) in enumerate(ids)}
        for u in mine:
            k, nth = where.get((u["rank"], u["compile_id"], u["occurrence"]), (None, None))
            ko = partner.get(k) if k is not None else None
            ids = other_frames.get(ko, []) if ko is not None else []
            twin = ids[nth] if ko is not None and nth is not None and nth < len(ids) else None
            if twin is not None and (ko[0], *twin) in still:
                continue  # unfinished in both runs
            row = other_done.get((ko[0], *twin)) if twin is not None else None
            ids_here = (u["compile_id"], u["occurrence"])
            a_id, b_id = (twin, ids_here) if change == "new" else (ids_here, twin)
            out.append({
                "change": change, "unfinished_in": "b" if change == "new" else "a",
                "rank": u["rank"], "function": u["function"], "file": u["file"], "line": u["line"], "label": u["label"],
                "nth": nth,
                "compile_id_a": a_id[0] if a_id else None, "occurrence_a": a_id[1] if a_id else None,
                "compile_id_b": b_id[0] if b_id else None, "occurrence_b": b_id[1] if b_id else None,
                "phase": u["phase"], "innermost_span": u["innermost_span"], "running_s": u["running_s"],
                "behind": u["behind"],
                "other_status": row["status"] if row else None,
                "other_compile_time_s": row["compile_time_s"] if row else None,
            })
    return out


def _functions(pairs: list, fa: dict, fb: dict, sa: _Side, sb: _Side) -> list[dict[str, Any]]:
    out = []
    for ka, kb in pairs:
        na = len(fa[ka]) if ka else 0
        nb = len(fb[kb]) if kb else 0
        k = kb or ka  # B's name: a moved resume function is named after its new line
        moved = ka is not None and kb is not None and ka != kb
        if na == nb and not moved:
            continue
        change = "new" if not na else "gone" if not nb else "more" if nb > na else "fewer" if nb < na else "moved"
        out.append({
            "change": change, "rank": k[0], "function": k[1], "file": k[2],
            "line_a": ka[3] if ka else None, "line_b": kb[3] if kb else None,
            "compiles_a": na, "compiles_b": nb,
            "compile_ids_a": [cid for cid, _ in fa.get(ka, [])] if ka else [],
            "compile_ids_b": [cid for cid, _ in fb.get(kb, [])] if kb else [],
            "label": sb.label_of(kb) if kb else sa.label_of(ka),
        })
    order = {"new": 0, "more": 1, "gone": 2, "fewer": 3, "moved": 4}
    return sorted(out, key=lambda r: (order[r["change"]], -abs(r["compiles_b"] - r["compiles_a"])))


def _causes(sa: _Side, sb: _Side, pairs: list) -> list[dict[str, Any]]:
    """Recompile causes per code object, A's against B's of the code object `pairs` matched
    it with (a code object is function, file and line: never a frame id, which after a
    torch._dynamo.reset() may name another function). Storms are per epoch; the causes of
    one code object's storms in several epochs (compiled again after a reset) are summed."""

    def collect(side: _Side) -> dict[tuple, dict[tuple, dict[str, Any]]]:
        out: dict[tuple, dict[tuple, dict[str, Any]]] = {}
        for s in side.keep(recompile_storms(side.trace)):
            code = out.setdefault((side.rank_of(s), s["function"], file_tail(s["filename"]), s["line"]), {})
            for c in s["causes"]:
                k = (c["kind"], c["source"], c["dim"])
                if k in code:  # the same code object's storm in another epoch
                    code[k]["count"] += c["count"]
                    continue
                code[k] = {**c, "function": s["function"], "filename": s["filename"], "line": s["line"],
                           "label": _label_of(s)}
        return out

    ca, cb = collect(sa), collect(sb)
    paired_a = {ka for ka, _ in pairs if ka is not None}
    paired_b = {kb for _, kb in pairs if kb is not None}
    # code objects without compiles (a text log alone): matched by their own key
    rest_a = [k for k in ca if k not in paired_a]
    rest_b = [k for k in cb if k not in paired_b]
    codes = [(ka, kb) for ka, kb in pairs if ka in ca or kb in cb]
    codes += [(k, k if k in rest_b else None) for k in rest_a] + [(None, k) for k in rest_b if k not in rest_a]
    out = []
    for ka, kb in codes:
        code_a, code_b = ca.get(ka, {}), cb.get(kb, {})
        for k in [*code_a, *(k for k in code_b if k not in code_a)]:
            a, b = code_a.get(k), code_b.get(k)
            if a and b and a["count"] == b["count"] and a["text"] == b["text"]:
                continue
            out.append(_cause_row(a, b, (kb or ka)[0], (kb or ka)[2], k))
    return sorted(out, key=lambda r: ["new", "changed", "gone"].index(r["change"]))


def _label_of(storm: dict[str, Any]) -> str | None:
    """The storm's code object as its user knows it (findings.code_label), where that says more
    than the function's name: a class, a library, torch's wrapper, the user's call site."""
    code = storm.get("code") or {}
    if not code or (code.get("owner") == "user" and not code.get("qualname")):
        return None
    return code_label(storm, lambda f, ln: f"{file_tail(f)}:{ln}")


def _cause_row(a: dict[str, Any] | None, b: dict[str, Any] | None, rank: Any, file: str, k: tuple) -> dict[str, Any]:
    change = "new" if not a else "gone" if not b else "changed"
    c = b if b is not None else a
    assert c is not None  # one side has the cause
    return {
        "change": change, "rank": rank, "function": c["function"], "file": file, "line": c["line"],
        "kind": k[0], "source": k[1], "dim": k[2],
        "count_a": a["count"] if a else 0, "count_b": b["count"] if b else 0,
        "text_a": a["text"] if a else None, "text_b": b["text"] if b else None,
        "fix": c.get("fix"),
        "label": c.get("label"),
    }


def _breaks(sa: _Side, sb: _Side) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    def collect(side: _Side) -> dict[tuple, dict[str, Any]]:
        out = {}
        for g in graph_break_hotspots(side.trace):
            ranks = g.get("ranks") or [None]
            for r in ranks:
                if side.rank is not _ANY_RANK and r != side.rank:
                    continue
                k = (r if side.rank is _ANY_RANK else None, g["reason"], file_tail(g["filename"]), g["line"])
                out[k] = {**g, "rank": k[0]}
        return out

    ba, bb = collect(sa), collect(sb)
    new = [k for k in bb if k not in ba]
    fixed = [k for k in ba if k not in bb]
    out: list[dict[str, Any]] = []
    for k in list(new):  # the same reason in the same file at another line: moved
        twin = next((f for f in fixed if f[:3] == k[:3]), None)
        if twin is not None:
            new.remove(k)
            fixed.remove(twin)
            out.append(_break_row("moved", bb[k], line_a=twin[3]))
    out = [_break_row("new", bb[k]) for k in new] + [_break_row("fixed", ba[k]) for k in fixed] + out
    for k in ba.keys() & bb.keys():
        if ba[k]["count"] != bb[k]["count"]:
            out.append(_break_row("count", bb[k], count_a=ba[k]["count"]))
    eager = []
    skip_a, skip_b = _skipped(ba), _skipped(bb)
    for change, src, other in (("new", skip_b, skip_a), ("fixed", skip_a, skip_b)):
        for k, g in src.items():
            if k not in other:
                eager.append({"change": change, "rank": k[0], "function": k[1], "file": k[2],
                              "line": g["frame_line"], "why": g.get("frame_skipped_why")})
    return out, eager


def _skipped(breaks: dict[tuple, dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """(rank, function, file tail) of the frames a graph break sent back to eager."""
    return {(k[0], g["frame_function"], file_tail(g["frame_filename"])): g for k, g in breaks.items() if g["frame_skipped"]}


def _break_row(change: str, g: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "change": change, "rank": g["rank"], "reason": g["reason"], "gb_id": g.get("gb_id"),
        "function": g.get("function"), "file": file_tail(g["filename"]), "line": g["line"],
        "count": g["count"], "line_a": None, "count_a": None, **extra,
    }


def _failures(sa: _Side, sb: _Side) -> list[dict[str, Any]]:
    def collect(side: _Side) -> dict[tuple, dict[str, Any]]:
        rows = failures(side.view, caught=False)
        out = {}
        for r in rows.iter_rows(named=True):
            k = (side.rank_of(r), r.get("function"), file_tail(r.get("filename")), r["category"])
            out.setdefault(k, r)
        return out

    fa, fb = collect(sa), collect(sb)
    out = []
    for change, src, other, side in (("new", fb, fa, sb), ("fixed", fa, fb, sa)):
        for k, r in src.items():
            if k not in other:
                out.append({"change": change, "rank": k[0], "function": k[1], "file": k[2], "line": r.get("line"),
                            "category": k[3], "reason": one_line(r.get("headline"), 300),
                            "compile_id": r["compile_id"], "label": _failure_label(side, r)})
    return out


def _failure_label(side: _Side, r: dict[str, Any]) -> str:
    """The failed compile's code object as every other line names it (findings.code_label over
    analyze.code_objects, the call site of that compile): `Sequential via torch.compile(model),
    called at train.py:29`, not torch's wrapper `inner`."""
    code = describe(side.view, rank=r["rank"], function=r.get("function"), filename=r.get("code_filename") or r.get("filename"),
                    line=r.get("code_line"))
    code = of_compile(code, side.view, rank=r["rank"], compile_id=r.get("compile_id"), occurrence=r.get("occurrence"))
    return code_label({**r, "code": code}, lambda f, ln: f"{file_tail(f)}:{ln}")


def _per_compile(
    pairs: list, fa: dict, fb: dict, ca: dict, cb: dict, what: str, failed: set[tuple], sb: _Side
) -> list[dict[str, Any]]:
    """Added/removed items (`what`: ops, guards, kernels) of each pair of matched compiles
    (not of a compile that failed on either side: the failures section says so)."""
    out = []
    for ka, kb in pairs:
        if ka is None or kb is None:
            continue
        ids_a, ids_b = fa[ka], fb[kb]
        for i in range(max(len(ids_a), len(ids_b))):
            ia = ids_a[i] if i < len(ids_a) else None
            ib = ids_b[i] if i < len(ids_b) else None
            if ia is None or ib is None or ("a", ka[0], *ia) in failed or ("b", kb[0], *ib) in failed:
                continue  # a compile only one side has: the functions section says so
            added, removed = _counter_change(ca.get((ka[0], *ia), Counter()), cb.get((kb[0], *ib), Counter()))
            if added or removed:
                out.append({"rank": kb[0], "function": kb[1], "file": kb[2], "line": kb[3], "nth": i,
                            "label": sb.label_of(kb, ib), "compile_id_a": ia[0], "compile_id_b": ib[0],
                            "occurrence_a": ia[1], "occurrence_b": ib[1], f"{what}_added": added,
                            f"{what}_removed": removed})
    return out


def _schedules(side: _Side) -> tuple[dict[tuple, list[str]], set[tuple]]:
    """(rank, compile_id, occurrence, graph_index) -> the graph's collectives in order
    (`all_reduce float32[8, 16]`, waits left out), and the (rank, compile_id, occurrence)
    whose graph came from the FX graph cache (torch logs no schedule then: unknown)."""
    out: dict[tuple, list[str]] = {}
    c = side.table("collectives").filter(pl.col("kind") == "collective").sort("rank", "compile_id", "occurrence", "graph_index", "position")
    for r in c.iter_rows(named=True):
        shape = r["shape"] if r["shape"] is not None else "[?]"
        out.setdefault((side.rank_of(r), r["compile_id"], r["occurrence"], r["graph_index"]), []).append(
            f"{r['op']} {r['dtype'] or '?'}{shape}")
    hits = side.compiles.filter(pl.col("fx_cache_hits").fill_null(0) > 0)
    cached = {(side.rank_of(r), r["compile_id"], r["occurrence"]) for r in hits.select("rank", "compile_id", "occurrence").iter_rows(named=True)}
    return out, cached


def _collectives(pairs: list, fa: dict, fb: dict, sa: _Side, sb: _Side, unfinished: set[tuple]) -> list[dict[str, Any]]:
    """The collectives of each pair of matched compiles (per Inductor graph: 0 the forward, 1
    the backward) where they differ; a graph whose schedule one side did not log because it
    came from the FX graph cache, or a compile unfinished on either side (`unfinished`:
    ("a"|"b", rank, compile_id, occurrence)), is not compared (unknown, not "no
    collectives")."""
    (xa, hit_a), (xb, hit_b) = _schedules(sa), _schedules(sb)
    if not xa and not xb:
        return []
    out = []
    for ka, kb in pairs:
        if ka is None or kb is None:
            continue
        for i, (ia, ib) in enumerate(zip(fa[ka], fb[kb])):
            if ("a", ka[0], *ia) in unfinished or ("b", kb[0], *ib) in unfinished:
                continue
            gis = {k[3] for k in xa if k[:3] == (ka[0], *ia)} | {k[3] for k in xb if k[:3] == (kb[0], *ib)}
            for gi in sorted(gis):
                a, b = xa.get((ka[0], *ia, gi)), xb.get((kb[0], *ib, gi))
                if a == b or (a is None and (ka[0], *ia) in hit_a) or (b is None and (kb[0], *ib) in hit_b):
                    continue
                out.append({"change": "new" if a is None else "gone" if b is None else "changed",
                            "rank": kb[0], "function": kb[1], "file": kb[2], "line": kb[3], "nth": i,
                            "label": sb.label_of(kb, ib),
                            "compile_id_a": ia[0], "compile_id_b": ib[0], "graph_index": gi,
                            "collectives_a": a or [], "collectives_b": b or []})
    return out


_CALLS = ("call_function", "call_method", "call_module")


def _graph_ops(side: _Side) -> dict[tuple, Counter]:
    dynamo_call = (pl.col("graph_kind") == "dynamo") & pl.col("op").is_in(_CALLS)
    return side.per_compile("graph_nodes", pl.when(dynamo_call).then(pl.col("target")))


def _guards(side: _Side, *, other_rank: bool) -> dict[tuple, Counter]:
    """Guards per compile; against another rank, device indices blanked too (each rank drives
    its own device: `device=0` on rank 0 is `device=1` on rank 1)."""
    return side.per_compile("guards", guard_key(pl.col("kind"), pl.col("code"), blank_device=other_rank))


def _kernels(side: _Side) -> dict[tuple, Counter]:
    return side.per_compile("kernels", kernel_key(pl.col("name"), pl.col("kind")))


def _time_rows(a: dict[str, float], b: dict[str, float], noise: Noise, label: str) -> list[dict[str, Any]]:
    rows = []
    for k in [*a, *(k for k in b if k not in a)]:
        va, vb = float(a.get(k) or 0.0), float(b.get(k) or 0.0)
        if va == vb:
            continue
        rows.append({label: k, "seconds_a": round(va, 3), "seconds_b": round(vb, 3), "delta_s": round(vb - va, 3),
                     "pct": round((vb - va) * 100.0 / va, 1) if va else None,
                     "significant": noise.significant(va, vb)})
    return sorted(rows, key=lambda r: -abs(r["delta_s"]))


def _phase_order() -> dict[str, tuple[int, str | None]]:
    """Each phase's place in the tree of phases (compile_time.PHASE_WITHIN: a phase, then the
    phases within it, depth first; the run-time phases last) and the phase it is within."""
    children: dict[str | None, list[str]] = {}
    for k, parent in ct.PHASE_WITHIN.items():
        children.setdefault(parent, []).append(k)
    order: list[str] = []

    def walk(parent: str | None) -> None:
        for k in children.get(parent, []):
            order.append(k)
            walk(k)

    walk(None)
    order += [k for k in ct.RUN_TIME_PHASES if k not in order]
    return {k: (i, ct.PHASE_WITHIN.get(k)) for i, k in enumerate(order)}


def _compile_time(sa: _Side, sb: _Side, noise: Noise) -> dict[str, Any]:
    def total(s: _Side) -> float:
        return float(s.all_compiles["total_time_s"].fill_null(0).sum())

    labels: dict[str, str] = {}

    def by_fn(s: _Side) -> dict[str, float]:
        out: dict[str, float] = {}
        for r in ct.by_function(s.view, frames_only=True).iter_rows(named=True):
            k = code_object(r["function"], r["filename"], r["line"])
            if s.rank is _ANY_RANK and r["rank"] is not None:
                k = f"rank {r['rank']} {k}"
            out[k] = out.get(k, 0.0) + float(r["seconds"] or 0.0)
            # as the summary's compile time by function names it (B's name where both have it)
            labels[k] = (f"rank {r['rank']} " if s.rank is _ANY_RANK and r["rank"] is not None else "") + s.label(
                r["rank"], r["function"], r["filename"], r["line"])
        return out

    ta, tb = total(sa), total(sb)
    place = _phase_order()
    phases = sorted(_time_rows(ct.phase_totals(sa.view), ct.phase_totals(sb.view), noise, "phase"),
                    key=lambda r: place.get(r["phase"], (len(place), None))[0])
    for r in phases:  # nested phases marked as the summary's are (compile_time.phase_rows)
        r["within"] = place.get(r["phase"], (0, None))[1]
        r["compile_time"] = r["phase"] not in ct.RUN_TIME_PHASES
    fa_, fb_ = by_fn(sa), by_fn(sb)  # A first: B's names win
    fns = _time_rows(fa_, fb_, noise, "function")
    for r in fns:
        r["label"] = labels.get(r["function"], r["function"])
    return {
        "noise": {"pct": noise.pct, "seconds": noise.seconds},
        "total_a_s": round(ta, 3), "total_b_s": round(tb, 3),
        "total_pct": round((tb - ta) * 100.0 / ta, 1) if ta else None,
        "total_significant": noise.significant(ta, tb),
        "phases": [r for r in phases if r["significant"]],
        "functions": [r for r in fns if r["significant"]],
        "within_noise": [{**r, "what": "phase"} for r in phases if not r["significant"]]
        + [{**r, "what": "function"} for r in fns if not r["significant"]],
    }


def _cache(sa: _Side, sb: _Side) -> list[dict[str, Any]]:
    a, b = ct.cache_summary(sa.view), ct.cache_summary(sb.view)
    counters = [k for k in a if k.endswith(("_hits", "_misses", "_bypasses"))]  # (not ratios or where they came from)
    return [{"counter": k, "a": a.get(k), "b": b.get(k)} for k in counters if a.get(k) != b.get(k)]


def _cache_keys(sa: _Side, sb: _Side) -> list[dict[str, Any]]:
    """B's cache misses of a graph A also looked up, with the key inputs that changed
    (analyze.cache_keys.diff_lookups; worded by judge.cache_pair_words): the FX graph and
    AOTAutograd lookups of one graph with the same words are one row (`caches`); a cache whose
    components were not logged is left out where the other explains the graph, and a miss of A's
    very key that A missed too (both cold) is no change."""
    from traceview.analyze.cache_keys import diff_lookups
    from traceview.analyze.judge import cache_pair_words

    every = sa.rank is _ANY_RANK and sb.rank is _ANY_RANK
    rows = diff_lookups(sa.trace, against=sb.trace, rank_a=None if every else sa.rank, rank_b=None if every else sb.rank,
                        every_rank=every, ignore_device_index=not every and sa.rank != sb.rank)
    explained = {(r["rank"], r["function"], r["filename"], r["line"], r["nth"]) for r in rows if r["changes"] or r["same_key"]}
    out: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        g = (r["rank"], r["function"], r["filename"], r["line"], r["nth"])
        if not (r["changes"] or r["same_key"]) and g in explained:
            continue
        if r["same_key"] and r["state_a"] == "miss":  # both cold for the same key: nothing changed
            continue
        words = cache_pair_words(r)
        e = out.get((*g, words))
        if e is None:
            c = sb.view.compiles.filter((pl.col("file") == r["file"]) & (pl.col("compile_id") == r["compile_id_b"])
                                        & pl.col("occurrence").eq_missing(r["occurrence_b"]))
            label = (sb.label(c["rank"][0], c["function"][0], c["filename"][0], c["line"][0], compile_id=r["compile_id_b"],
                              occurrence=r["occurrence_b"]) if c.height else code_object(r["function"], r["filename"], r["line"]))
            e = out[(*g, words)] = {**{k: v for k, v in r.items() if k not in ("cache", "lookup")}, "caches": [], "words": words,
                                     "key_changed": not r["same_key"], "label": label}
        if r["cache"] not in e["caches"]:
            e["caches"] = sorted([*e["caches"], r["cache"]], key=lambda c: (c != "fx_graph", c))
    return list(out.values())


def _autotuning(sa: _Side, sb: _Side) -> list[dict[str, Any]]:
    """Autotuned template ops (by op, input shapes and dtypes, in order) whose winner or
    number of choices changed, or that one side only autotuned."""
    def collect(s: _Side) -> dict[tuple, dict[str, Any]]:
        out: dict[tuple, dict[str, Any]] = {}
        seen: Counter = Counter()
        rows = ct.autotuning(s.trace).to_dicts()
        for r in s.keep(rows):
            k = (s.rank_of(r), r["op"], r["shape"], r["dtypes"])
            seen[k] += 1
            out[(*k, seen[k])] = r
        return out

    aa, ab = collect(sa), collect(sb)
    out = []
    for k in [*aa, *(k for k in ab if k not in aa)]:
        a, b = aa.get(k), ab.get(k)
        if a and b and (a["best_kernel"], a["choices"]) == (b["best_kernel"], b["choices"]):
            continue
        out.append({"change": "new" if not a else "gone" if not b else "changed", "rank": k[0], "op": k[1],
                    "shape": k[2], "dtypes": k[3], "best_a": a and a["best_kernel"], "best_b": b and b["best_kernel"],
                    "choices_a": a and a["choices"], "choices_b": b and b["choices"]})
    return out


_LOAD_PHASES = ("dynamo", "aot", "inductor", "backward")


def _cache_load(pairs: list, fa: dict, fb: dict, sa: _Side, sb: _Side) -> dict[str, Any] | None:
    """Where a side loaded portable cache artifacts (analyze.portable_caches): what the load
    served against the other side, per matched compile and in all: each side's FX graph and
    AOTAutograd hits and misses (the sum torch's counters keep) and seconds per phase (Dynamo,
    AOTAutograd, Inductor, the backward's compile), and the kernels the loaded side built again.
    None where neither side shows a load."""
    from traceview.analyze.portable_caches import cache_loads

    la, lb = cache_loads(sa.view), cache_loads(sb.view)
    if not la and not lb:
        return None

    def rows(side: _Side) -> dict[tuple, dict[str, Any]]:
        out: dict[tuple, dict[str, Any]] = {}
        for r in side.compiles.iter_rows(named=True):
            ph = ct.compile_phases(r)
            out[(side.rank_of(r), r["compile_id"], r["occurrence"])] = {
                **{f"{k}_s": round(ph[k], 3) for k in _LOAD_PHASES},
                "total_s": round(float(r.get("total_time_s") or 0.0), 3),
                "fx_hits": int(r.get("fx_cache_hits") or 0), "fx_misses": int(r.get("fx_cache_misses") or 0),
                "aot_hits": int(r.get("aot_cache_hits") or 0), "aot_misses": int(r.get("aot_cache_misses") or 0),
            }
        return out

    ra, rb = rows(sa), rows(sb)
    built = {(x["rank"], x["compile_id"]): x["kernel_build_s"] for ld in lb for x in ld["compiles"]}
    compiles = []
    for ka, kb in pairs:
        if ka is None or kb is None:
            continue
        for (ia, ib) in zip(fa[ka], fb[kb]):
            a, b = ra.get((ka[0], *ia)), rb.get((kb[0], *ib))
            if a is None or b is None:
                continue
            compiles.append({
                "rank": kb[0], "function": kb[1], "file": kb[2], "line": kb[3], "label": sb.label_of(kb, ib),
                "compile_id": ib[0], "occurrence": ib[1],
                **{k: [a[k], b[k]] for k in a},
                "kernel_build_s": built.get((kb[0], ib[0])),
            })
    matched = {(c["rank"], c["compile_id"], c["occurrence"]) for c in compiles}
    only_b = [{"rank": k[0], "compile_id": k[1], "occurrence": k[2], **{x: v[x] for x in ("fx_hits", "fx_misses", "aot_hits", "aot_misses", "total_s")}}
              for k, v in rb.items() if k not in matched and (v["fx_hits"] or v["fx_misses"] or v["aot_hits"] or v["aot_misses"])]
    ca, cb = ct.cache_summary(sa.view), ct.cache_summary(sb.view)
    keys = {"fx_hits": "fx_graph_hits", "fx_misses": "fx_graph_misses", "aot_hits": "aot_autograd_hits", "aot_misses": "aot_autograd_misses"}
    return {
        "loaded": "b" if lb and not la else "a" if la and not lb else "both",
        "certainty": (lb or la)[0]["certainty"],
        "a": {k: ca[v] for k, v in keys.items()},
        "b": {k: cb[v] for k, v in keys.items()},
        "compiles": compiles,
        "only_b": only_b,
        "phases_s": {f"{k}_s": [round(sum(c[f"{k}_s"][0] for c in compiles), 3), round(sum(c[f"{k}_s"][1] for c in compiles), 3)]
                     for k in (*_LOAD_PHASES, "total")},
        "kernel_build_s": round(sum(ld["kernel_build_s"] for ld in lb), 3),
    }


_PGO = re.compile(r"^(get|put)_(local|remote)_code_state$")


def _pgo(sa: _Side, sb: _Side) -> list[dict[str, Any]]:
    """Profile-guided dynamic shapes: how often each side read (`get_*_code_state`) or
    wrote (`put_*_code_state`) a PGO profile, where the counts differ."""

    def count(s: _Side) -> Counter:
        ev = s.trace.index_events().select("rank", "kind", "name")
        ev = ev.filter((pl.col("kind") == "artifact") & pl.col("name").str.contains(_PGO.pattern))
        if s.rank is not _ANY_RANK:
            ev = ev.filter(pl.col("rank").eq_missing(s.rank))
        return Counter(ev["name"].to_list())

    ca, cb = count(sa), count(sb)
    return [{"artifact": k, "a": ca[k], "b": cb[k]} for k in sorted(ca.keys() | cb.keys()) if ca[k] != cb[k]]


def _divergence(sa: _Side, sb: _Side) -> list[dict[str, Any]]:
    if sa.rank is not _ANY_RANK or sb.rank is not _ANY_RANK:
        return []  # one rank against another: the whole diff is their divergence

    def collect(s: _Side) -> dict[int, dict[str, Any]]:
        rows = rank_divergence(s.trace)
        return {r["rank"]: r for r in rows.iter_rows(named=True)}

    da, db = collect(sa), collect(sb)
    out = []
    for rank in sorted(da.keys() | db.keys()):
        a, b = da.get(rank), db.get(rank)
        if a and b and sorted(a["different"] or []) == sorted(b["different"] or []):
            continue
        out.append({"change": "new" if not a else "gone" if not b else "changed", "rank": rank,
                    "detail": one_line((b or a)["detail"], 300)})
    return out


# ------------------------------------------------------------------------------ the diff
def compare_runs(
    a: Trace,
    *,
    against: Trace,
    rank: int | None = None,
    against_rank: int | None = None,
    noise: Noise | None = None,
    names: tuple[str, str] = ("A", "B"),
    judged: Callable[[Trace], list[Finding]] | None = None,
) -> dict[str, Any]:
    """What changed from `a` to `against` (B; see docs/diff.md for the schema). `rank` picks one
    rank of `a` (and the same of B unless `against_rank` names another); without, every rank of
    `a` is compared with the same rank of B. `judged`: a side's typed findings (the summary's:
    the report is built above this package), compared by what they are about; without it the
    `findings` section is empty."""
    b = against
    noise = noise or Noise()
    if against_rank is not None and rank is None:
        raise UserError("--against-rank needs --rank (the rank of A to compare it with)")
    ra = _ANY_RANK if rank is None else rank
    rb = ra if against_rank is None else against_rank
    for trace, r, name in ((a, ra, names[0]), (b, rb, names[1])):
        if r is not _ANY_RANK and r not in trace.ranks:
            have = ranks_text(trace.ranks).strip() or "no ranks"
            raise UserError(f"{name} has no rank {r} (it has {have})")
    sa, sb = _Side(a, ra), _Side(b, rb)
    fa, fb = sa.frames(), sb.frames()
    pairs = _match_frames(fa, fb)
    breaks, eager = _breaks(sa, sb)
    ua, ub = _unfinished_of(sa), _unfinished_of(sb)
    # a compile unfinished on either side logged no guards or kernels yet: not compared
    # (the unfinished section says it), as a failed one is not
    unfinished = {("a", u["rank"], u["compile_id"], u["occurrence"]) for u in ua} | {
        ("b", u["rank"], u["compile_id"], u["occurrence"]) for u in ub}
    failed = {("a", *k) for k in sa.failed()} | {("b", *k) for k in sb.failed()} | unfinished
    fails = _failures(sa, sb)
    # a frame whose compile newly fails (fixed) is in `failures`; whether it then ran eagerly
    # depends on the program (suppress_errors), not on the trace: not said twice
    failing = {(f["change"], f["rank"], f["function"], f["file"]) for f in fails}
    eager = [e for e in eager if (e["change"], e["rank"], e["function"], e["file"]) not in failing]
    result: dict[str, Any] = {
        "diff_schema_version": DIFF_SCHEMA_VERSION,
        "a": _about(sa, names[0], fa, ua),
        "b": _about(sb, names[1], fb, ub),
        "unfinished": _unfinished(pairs, fa, fb, sa, sb, ua, ub),
        "functions": _functions(pairs, fa, fb, sa, sb),
        "recompile_causes": _causes(sa, sb, pairs),
        "graph_breaks": breaks,
        "frames_eager": eager,
        "failures": fails,
        "graphs": _per_compile(pairs, fa, fb, _graph_ops(sa), _graph_ops(sb), "ops", failed, sb),
        "guards": _per_compile(
            pairs, fa, fb, _guards(sa, other_rank=ra != rb), _guards(sb, other_rank=ra != rb), "guards", failed, sb
        ),
        "kernels": _per_compile(pairs, fa, fb, _kernels(sa), _kernels(sb), "kernels", failed, sb),
        "autotuning": _autotuning(sa, sb),
        "cache": _cache(sa, sb),
        "cache_keys": _cache_keys(sa, sb),
        "pgo": _pgo(sa, sb),
        "cache_load": _cache_load(pairs, fa, fb, sa, sb),
        "rank_divergence": _divergence(sa, sb),
        "collectives": _collectives(pairs, fa, fb, sa, sb, unfinished),
        "compile_time": _compile_time(sa, sb, noise),
        "findings": _findings(sa, sb, judged),
    }
    result["changes"] = sum(len(result[s]) for s in SECTIONS)
    ctime = result["compile_time"]
    result["no_changes"] = result["changes"] == 0 and not (
        ctime["total_significant"] or ctime["phases"] or ctime["functions"]
    )
    return result


def _findings(
    sa: _Side, sb: _Side, judged: Callable[[Trace], list[Finding]] | None
) -> dict[str, list[dict[str, Any]]]:
    """The typed findings (the summary's, traceview.analyze.judge) of each side compared by what
    they are about (Finding.identity): `new` in B, `gone` from A, each as B's or A's finding
    says it. Not counted in `changes`: the sections above say what changed in the compiles."""
    if judged is None:
        return {"new": [], "gone": []}
    fa, fb = judged(sa.view), judged(sb.view)
    ia, ib = {f.identity() for f in fa}, {f.identity() for f in fb}
    return {
        "new": [f.to_json() for f in fb if f.identity() not in ia],
        "gone": [f.to_json() for f in fa if f.identity() not in ib],
    }


def _about(side: _Side, name: str, frames: dict, unfinished: list[dict[str, Any]]) -> dict[str, Any]:
    inp = side.trace.inputs
    return {
        "name": name,
        "root": inp.root if inp else None,
        "rank": None if side.rank is _ANY_RANK else side.rank,
        "compiles": side.all_compiles.height,
        "code_objects": len(frames),
        "unfinished": unfinished,
    }
