"""CUDA-graph findings (``mode="reduce-overhead"``) from the ``cudagraphs`` table: what costs the
user, each with the fix torch's docs and messages give.

* ``not_graphed``: a compile's graph has non-cudagraphable partitions (CPU ops, device copies,
  ...): that code runs outside CUDA graphs on every call. Only for compiles that CUDA graphs
  were used for (``USED``): Inductor logs its partitions with mode="default" too.
* ``skipped``: CUDA graphs skipped for a whole compiled graph (mutated inputs, a CPU input, ...):
  the function runs without CUDA graphs.
* ``graph_per_shape``: one function recorded a CUDA graph per distinct input size (dynamic
  shapes under CUDA graphs: each graph costs a recording and its own memory pool).
* ``rerecords``: graphs recorded again for the same function and shape (torch's
  ``Re-recording ... reason=`` lines; counted by the recordings that follow them, since torch
  writes one such line per existing graph that failed its check).
* ``overwritten_output``: the program died reading a CUDA-graph output that a later run
  overwrote; tied to the compile and the graph recorded for the function in torch's message.

A function is a frame (rank, frame id of the compile id); its name comes from the trace's
``compiles`` when there is one, else from the user line torch logged, else ``frame N``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import polars as pl

from parsers.code_location import brief
from parsers.compile_ids import bracketed, frame_of, sort_key
from traceview.trace import Trace

FINDING_KINDS = ("overwritten_output", "skipped", "not_graphed", "graph_per_shape", "rerecords")
# this many distinct input sizes recorded for one function is a finding (torch itself warns
# past cudagraph_dynamic_shape_warn_limit, 8 by default; the warning makes it one anyway)
SHAPES_MIN = 3

_OVERWRITTEN = re.compile(
    r"accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run\."
    r"(?: Stack trace: File \"(?P<file>[^\"]+)\", line (?P<line>\d+), in (?P<fn>\S+))?"
)
_ARG = re.compile(r"\((arg\d+_\d+)\)")

FIX_MUTATED = (
    "do not mutate an input of the compiled function in place (return the new value instead); "
    "or keep the tensor as a module buffer/parameter, or mark it static with "
    "torch._dynamo.mark_static_address(t), so that CUDA graphs may own it"
)
FIX_CPU_INPUT = (
    "an input is a CPU tensor: move it to the GPU before the call (or pass a Python number "
    "instead of a 0-dim CPU tensor)"
)
FIX_CPU_OPS = (
    "CPU work inside the compiled function: move that tensor to the GPU (a 0-dim CPU tensor can "
    "be passed as a Python float) or do that work outside the compiled function"
)
FIX_TO_HOST = (
    "a copy to the CPU (.cpu(), .item(), .tolist()) inside the compiled function: return the GPU "
    "tensor and copy it after the call"
)
FIX_TO_DEVICE = (
    "a CPU->GPU copy on every call: create the tensor on the GPU once, outside the compiled "
    "function (a 0-dim CPU tensor can be passed as a Python float instead)"
)
FIX_SHAPES = (
    "pad or bucket the varying dimension to a few fixed sizes; or set "
    "torch._inductor.config.triton.cudagraph_skip_dynamic_graphs=True (graphs with dynamic "
    "shapes then run without CUDA graphs). Marking the dimension dynamic saves recompiles, not "
    "recordings: reduce-overhead still records one graph per size"
)
FIX_STATIC_PTR = (
    "parameters or other static inputs were replaced by new tensors (e.g. load_state_dict(..., "
    "assign=True), re-created weights): copy new values into the existing tensors "
    "(p.copy_(new), load_state_dict without assign=True) so that their addresses stay put"
)
FIX_MANAGED_PTR = (
    "an input that a CUDA graph produced changed address: call "
    "torch.compiler.cudagraph_mark_step_begin() at the start of each iteration"
)
FIX_OVERWRITTEN = (
    "clone outputs you keep across calls (y.clone()), or call "
    "torch.compiler.cudagraph_mark_step_begin() before each model invocation; outputs kept "
    "across two replays are overwritten silently (no error): check any other kept outputs"
)


def _skip_fix(reason: str) -> str:
    r = reason.lower()
    if "mutated inputs" in r or "mutation" in r:
        return FIX_MUTATED
    if "cpu device" in r:
        return FIX_CPU_INPUT
    if "re-recording limit" in r:
        return FIX_STATIC_PTR if "static input data pointer" in r else FIX_MANAGED_PTR
    if "dynamic shape" in r or "symint" in r:
        return "expected with cudagraph_skip_dynamic_graphs=True: pad/bucket shapes to keep CUDA graphs"
    return "the function runs without CUDA graphs: remove the cause torch names (TORCH_LOGS=cudagraphs shows it)"


def _op_fix(reason: str | None, fx: str | None) -> str:
    r, f = (reason or "").lower(), (fx or "")
    if "device_put" in f and re.search(r",\s*cpu\b", f):
        return FIX_TO_HOST
    if r.startswith("devicecopy"):
        return FIX_TO_DEVICE
    if r == "cpu ops":
        return FIX_CPU_OPS
    if "dynamic shape" in r or "unbacked" in r:
        return "data-dependent or dynamic-shape ops cannot be graphed: make the shape static or move the op out"
    return "this op cannot run inside a CUDA graph: move it out of the compiled function if it runs often"


def _rerecord_fix(reasons: list[str]) -> str:
    if any("static input data pointer" in r for r in reasons):
        return FIX_STATIC_PTR
    if any("managed tensor data pointer" in r for r in reasons):
        return FIX_MANAGED_PTR
    return "call torch.compiler.cudagraph_mark_step_begin() at the start of each iteration, and keep inputs' addresses stable"


class _Names:
    """A frame's function (name, file, line) from the trace's compiles."""

    def __init__(self, compiles: pl.DataFrame) -> None:
        self.by_cid: dict[tuple, tuple] = {}
        self.by_frame: dict[tuple, tuple] = {}
        self.by_name: dict[tuple, list[str]] = {}
        if compiles.height == 0:
            return
        for r in compiles.select("rank", "compile_id", "function", "filename", "line").iter_rows(named=True):
            if r["compile_id"] is None:
                continue
            v = (r["function"], r["filename"], r["line"])
            self.by_cid[(r["rank"], r["compile_id"])] = v
            if r["function"]:
                self.by_frame.setdefault((r["rank"], frame_of(r["compile_id"])), v)
                self.by_name.setdefault((r["rank"], r["function"], r["filename"]), []).append(r["compile_id"])

    def of(self, rank: Any, cid: str | None, fallback: tuple | None = None) -> tuple:
        if cid is not None:
            v = self.by_cid.get((rank, cid))
            if v and v[0]:
                return v
            v = self.by_frame.get((rank, frame_of(cid)))
            if v:
                return v
        if fallback and fallback[0]:
            return fallback
        return (f"frame {frame_of(cid)}" if cid else None, None, None)


def _finding(kind: str, rank: Any, name: tuple, cids: list[str], **kw: Any) -> dict[str, Any]:
    return {
        "kind": kind, "rank": rank, "function": name[0], "filename": name[1], "line": name[2],
        "compile_ids": sorted(set(c for c in cids if c), key=sort_key),
        **{k: None for k in ("reason", "count", "where", "fix", "headline")},
        "ops": [], "shapes": [], "graph_ids": [], **kw,
    }


def _where(r: dict[str, Any]) -> dict[str, Any] | None:
    if not r.get("user_file"):
        return None
    return {"file": r["user_file"], "line": r["user_line"], "function": r["user_function"], "code": r["user_code"]}


def _user(r: dict[str, Any]) -> tuple | None:
    return (r["user_function"], r["user_file"], r["user_line"]) if r.get("user_file") else None


def _loc(w: dict[str, Any] | None) -> str:
    if not w:
        return ""
    return f" ({brief(w['file'])}:{w['line']}" + (f" `{w['code']}`)" if w.get("code") else ")")


def _skipped(cg: pl.DataFrame, names: _Names) -> list[dict[str, Any]]:
    rows = cg.filter(pl.col("event") == "skip").to_dicts()
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        reason = _ARG.sub("", r["reason"] or "").strip()
        key = (r["rank"], frame_of(r["compile_id"]) if r["compile_id"] else None, reason, r["user_file"], r["user_line"])
        groups.setdefault(key, []).append(r)
    out = []
    for (rank, _, reason, _, _), rs in groups.items():
        text = [r for r in rs if r["source"] == "text"] or rs  # the trace repeats the text's compile-time skip
        cids = [r["compile_id"] for r in rs]
        name = names.of(rank, cids[0], _user(rs[0]))
        args = sorted({a for r in rs for a in _ARG.findall(r["reason"] or "")})
        w = _where(rs[0])
        shown = reason + (f" ({', '.join(args)})" if args else "")
        out.append(_finding(
            "skipped", rank, name, cids, reason=shown, count=len(text), where=w, fix=_skip_fix(reason),
            headline=f"CUDA graphs skipped for {name[0] or '?'} [{', '.join(sorted(set(c for c in cids if c), key=sort_key))}]: "
                     f"{shown}{_loc(w)}; it runs without CUDA graphs",
        ))
    return out


# events that show a compile's code went to CUDA-graph trees (Inductor logs graph partitions
# with mode="default" too: "non-cudagraphable" means nothing when no CUDA graph is used)
USED = ("cudagraphify", "tree", "warmup", "eager", "recording", "rerecord", "skip")


def _not_graphed(cg: pl.DataFrame, names: _Names) -> list[dict[str, Any]]:
    out = []
    used = set(cg.filter(pl.col("event").is_in(USED)).select("rank", "compile_id").iter_rows())
    parts = cg.filter(pl.col("event").is_in(["partitions", "partition", "op"]))
    for (rank, cid), g in parts.group_by("rank", "compile_id", maintain_order=True):
        bad = g.filter((pl.col("event") == "partition") & ~pl.col("cudagraphable").fill_null(True))
        if bad.height == 0 or (rank, cid) not in used:
            continue
        ops = [
            {"op": r["op"], "reason": r["reason"], "ir": r["ir"], "fx": r["fx"], "where": _where(r),
             "fix": _op_fix(r["reason"], r["fx"])}
            for r in g.filter(pl.col("event") == "op").iter_rows(named=True)
        ]
        first_user = next((o["where"] for o in ops if o["where"]), None)
        name = names.of(rank, cid, (first_user["function"], first_user["file"], first_user["line"]) if first_user else None)
        total = g.filter(pl.col("event") == "partition").height
        reasons = Counter(o["reason"] for o in ops)
        why = ", ".join(f"{n} {r}" if n > 1 else r for r, n in reasons.items()) or "no reason logged"
        fixes = list(dict.fromkeys(o["fix"] for o in ops))
        nodes = int(bad["nodes"].fill_null(0).sum())
        out.append(_finding(
            "not_graphed", rank, name, [cid], reason=why, count=bad.height, ops=ops, where=first_user,
            fix="; ".join(fixes) if fixes else _op_fix(None, None),
            headline=f"{name[0] or '?'} {bracketed(cid)}: {bad.height} of {total} graph partitions run outside CUDA graphs "
                     f"({nodes} {'node' if nodes == 1 else 'nodes'}: {why}){_loc(first_user)}",
        ))
    return out


def _varying(shapes: list[str]) -> tuple[int | None, list[str]]:
    """The first input position whose shape differs between recordings, and its shapes in
    order of first appearance (None and the whole signatures when no position does: a
    recording with a dynamic shape also passes the size as an extra int input)."""
    split = [s.split("; ") for s in shapes]
    for i in range(min(len(s) for s in split)):
        col = list(dict.fromkeys(s[i] for s in split))
        if len(col) > 1:
            return i, col
    return None, list(dict.fromkeys(shapes))


def _recordings_by_frame(cg: pl.DataFrame) -> Any:
    rec = cg.filter(pl.col("event") == "recording").with_columns(
        pl.col("compile_id").map_elements(frame_of, return_dtype=pl.Int64).alias("_frame")
    )
    return rec.group_by("rank", "_frame", maintain_order=True)


def recordings_per_function(trace: Trace) -> list[dict[str, Any]]:
    """Every function that recorded CUDA graphs: how many, for which shapes (of the first input
    whose shape varies; every recording's input shapes when none does), in which compiles."""
    cg = trace.cudagraphs
    if cg.height == 0:
        return []
    names = _Names(trace.compiles)
    out = []
    for (rank, _), g in _recordings_by_frame(cg):
        shapes = list(dict.fromkeys(s or "" for s in g["input_shapes"].to_list()))
        pos, sizes = _varying(shapes)
        name = names.of(rank, g["compile_id"][0])
        out.append({
            "rank": rank, "function": name[0], "filename": name[1], "line": name[2],
            "compile_ids": sorted(set(g["compile_id"].drop_nulls().to_list()), key=sort_key),
            "graphs": g.height, "input": pos, "shapes": sizes,
            "graph_ids": [int(x) for x in g["graph_id"].to_list() if x is not None],
        })
    return out


def _per_shape(cg: pl.DataFrame, names: _Names) -> list[dict[str, Any]]:
    warn = cg.filter(pl.col("event") == "dynamic_shapes_warning")
    out = []
    for (rank, _), g in _recordings_by_frame(cg):
        shapes = [s or "" for s in g["input_shapes"].to_list()]
        distinct = list(dict.fromkeys(shapes))
        cids = g["compile_id"].to_list()
        warned = warn.filter(pl.col("rank").eq_missing(rank) & pl.col("compile_id").is_in(list(set(cids))))
        if len(distinct) < SHAPES_MIN and warned.height == 0:
            continue
        pos, sizes = _varying(distinct)
        name = names.of(rank, cids[0])
        ncomp = len(set(cids))
        what = f"input {pos}" if pos is not None else "inputs"
        head = (f"{name[0] or '?'}: {g.height} CUDA graphs recorded for {len(sizes)} distinct shapes of {what} "
                f"({', '.join(sizes[:8])}{' …' if len(sizes) > 8 else ''})")
        if ncomp > 1:
            head += f" over {ncomp} compiles"
        if warned.height:
            head += f"; torch warned at {warned['count'][0]} distinct sizes"
        out.append(_finding(
            "graph_per_shape", rank, name, cids, count=g.height, shapes=sizes,
            graph_ids=[int(x) for x in g["graph_id"].to_list() if x is not None], fix=FIX_SHAPES, headline=head,
            reason=f"{len(sizes)} distinct shapes of {what}",
        ))
    return out


def _rerecords(cg: pl.DataFrame, names: _Names) -> list[dict[str, Any]]:
    rows = cg.filter(pl.col("event").is_in(["recording", "rerecord"]))
    out = []
    for (rank, cid, fn), g in rows.group_by("rank", "compile_id", "function", maintain_order=True):
        n, pending, reasons, inputs, gids = 0, False, Counter(), {}, []
        for r in g.iter_rows(named=True):
            if r["event"] == "rerecord":
                pending = True
                reasons[r["reason"] or "?"] += 1
                for a in (r["detail"] or "").split(", "):
                    if a:
                        inputs[a] = None
            elif pending:
                n, pending = n + 1, False
                gids.append(r["graph_id"])
        if n == 0:
            continue
        name = names.of(rank, cid)
        why = "; ".join(reasons)
        changed = f" (inputs {', '.join(inputs)})" if inputs else ""
        out.append(_finding(
            "rerecords", rank, name, [cid], count=n, reason=why, graph_ids=[int(x) for x in gids if x is not None],
            fix=_rerecord_fix(list(reasons)),
            headline=f"{name[0] or '?'} {bracketed(cid)} {fn}: {n} CUDA-graph re-recording{'s' if n != 1 else ''}: {why}{changed}",
        ))
    return out


def _overwritten(trace: Trace, cg: pl.DataFrame, names: _Names) -> list[dict[str, Any]]:
    needle = "accessing tensor output of CUDAGraphs that has been overwritten"
    texts = [
        *trace.other_lines.filter(pl.col("text").str.contains(needle, literal=True)).select("rank", "text").iter_rows(),
        *trace.log_records.filter(pl.col("text").str.contains(needle, literal=True)).select("rank", "text").iter_rows(),
    ]
    out = []
    for rank, text in texts:
        m = _OVERWRITTEN.search(text or "")
        if m is None:
            continue
        cids = []
        if m["fn"]:
            # the compiles of the function torch's message names (compiles holds its code object)
            cids = [c for (r, fn, f), cs in names.by_name.items() if r == rank and fn == m["fn"] and f == m["file"] for c in cs]
        rec = cg.filter((pl.col("event") == "recording") & pl.col("rank").eq_missing(rank) & pl.col("compile_id").is_in(cids))
        gids = [int(x) for x in rec["graph_id"].to_list() if x is not None]
        name = names.of(rank, cids[0]) if cids else (m["fn"], m["file"], int(m["line"]) if m["line"] else None)
        w = {"file": m["file"], "line": int(m["line"]), "function": m["fn"], "code": None} if m["file"] else None
        tie = f" [{', '.join(cids)}], CUDA graph {', '.join(map(str, gids))}" if cids and gids else (f" [{', '.join(cids)}]" if cids else "")
        out.append(_finding(
            "overwritten_output", rank, name, cids, reason="accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run",
            count=1, where=w, graph_ids=gids, fix=FIX_OVERWRITTEN,
            headline=f"the program read an output of {m['fn'] or 'a CUDA-graphed function'}{tie}{_loc(w)} after a later run "
                     "overwrote it (RuntimeError)",
        ))
    return out


def cudagraph_findings(trace: Trace) -> list[dict[str, Any]]:
    """The CUDA-graph findings of a trace, most costly first (see the module docstring)."""
    cg = trace.cudagraphs
    if cg.height == 0:
        return []
    names = _Names(trace.compiles)
    return [
        *_overwritten(trace, cg, names),
        *_skipped(cg, names),
        *_not_graphed(cg, names),
        *_per_shape(cg, names),
        *_rerecords(cg, names),
    ]


def cudagraph_counts(trace: Trace) -> dict[str, int]:
    """How many compiles went to CUDA graphs (trace), graphs were recorded, partitions seen,
    and graphs skipped (the summary's header); `text_log_rows` 0 means no TORCH_LOGS=cudagraphs."""
    cg = trace.cudagraphs
    ev = cg["event"].to_list() if cg.height else []
    c = Counter(ev)
    text = cg.filter(pl.col("source") == "text").height if cg.height else 0
    return {
        "cudagraphified_compiles": c.get("cudagraphify", 0),
        "text_log_rows": text,
        "recorded_graphs": c.get("recording", 0),
        "partitions": c.get("partition", 0),
        "non_cudagraphable_partitions": int(cg.filter((pl.col("event") == "partition") & ~pl.col("cudagraphable").fill_null(True)).height) if cg.height else 0,
        "skips": cg.filter(pl.col("event") == "skip").select("rank", "compile_id", "reason").unique().height if cg.height else 0,
        "rerecord_lines": c.get("rerecord", 0),
    }
