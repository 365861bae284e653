"""Recompile storms: per code object and rank, how often it compiled, why, and the fix.

Failed guards are clustered into causes by (guard kind, guarded source, dimension):
"tensor 'x' size mismatch at index 1" seen across recompiles means dimension 1 of x varies;
`L['scale'] == 1.0` means a changing Python scalar; `___check_obj_id` means a new object each
call; and so on. Each cause gets the fix people apply for it today:

* a dimension that varies: `torch._dynamo.mark_dynamic(x, dim)`, or drop `dynamic=False`
  (the default `dynamic=None` makes a dimension dynamic after its first recompile);
* a Python number that changes: pass it as a tensor;
* a flag: one compile per value is expected, more means it is hoisted badly;
* type / id / global-state guards: consistent argument types, create objects once, pass state
  as arguments instead of reading globals, keep grad mode / autocast the same.

Whether the code forced `dynamic=False` is read from the Dynamo config of each compile
(`compiles.automatic_dynamic_shapes` / `assume_static_by_default`); a text log alone shows it
only through repeated static size guards.

A frame is identified by (rank, process, frame id): the compile that hit the recompile limit
has no function name in its metrics, so it is attributed to its frame through the frame id.
Recompiles read from a text log attach to the trace's frame of the same rank and frame id.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import polars as pl

from parsers.compile_ids import compile_number, frame_of, sort_key
from parsers.facts import user_name
from parsers.sources import prefer_trace
from traceview.trace import Trace

STORM_SCHEMA_KEYS = (
    "rank",
    "function",
    "filename",
    "line",
    "compiles",
    "failed_compiles",
    "compile_seconds",
    "hit_recompile_limit",
    "recompile_limit",
    "limit_compile_id",
    "forced_dynamic_false",
    "forced_dynamic_false_from",
    "compile_ids",
    "causes",
    "compile_id",
    "file",
    "lineno",
)

CAUSE_KINDS = (
    "size",
    "stride",
    "value",
    "value:float",
    "value:int",
    "value:bool",
    "type",
    "id",
    "global_state",
    "deallocated",
    "requires_grad",
    "dtype",
    "device",
    "ndim",
    "other",
)

_TENSOR_MATCH_SIZE = re.compile(r"size mismatch at index")


def _value_kind(expected: str | None, guard: str) -> str:
    v = (expected or "").strip()
    if v in ("True", "False") or re.search(r"==\s*(True|False)\b", guard):
        return "value:bool"
    if guard.lstrip().startswith("len("):
        return "value:int"
    try:
        int(v)
        return "value:int"
    except ValueError:
        pass
    try:
        float(v)
        return "value:float"
    except ValueError:
        return "value"


def _seen(values: list[str], n: int = 6) -> str:
    if not values:
        return ""
    more = ", …" if len(values) > n else ""
    return f" (seen: {', '.join(values[:n])}{more})"


def cause_text(kind: str, src: str, dim: Any, values: list[str], guard: str) -> str:
    """One line saying what changes between calls, in the user's terms."""
    if kind == "size":
        return f"dimension {dim} of {src} varies{_seen(values)}"
    if kind == "stride":
        return f"stride {dim} of {src} varies{_seen(values)}"
    compiled_for = f" (compiled for {', '.join(values[:6])}{', …' if len(values) > 6 else ''})" if values else ""
    if kind == "value:float":
        return f"the Python float {src} changes between calls{compiled_for}"
    if kind == "value:int":
        what = f"the length of {src}" if guard.lstrip().startswith("len(") else f"the Python int {src}"
        return f"{what} changes between calls{compiled_for}"
    if kind == "value:bool":
        return f"the bool flag {src} changes between calls{compiled_for}"
    if kind == "value":
        return f"the Python value {src} changes between calls{compiled_for}"
    if kind == "type":
        return f"the type of {src} changes between calls{_seen(values)}"
    if kind == "id":
        return f"{src} is a different object on each call"
    if kind == "global_state":
        return f"global torch state changed between calls ({src})" if src else "global torch state changed between calls"
    if kind == "deallocated":
        return f"{src} was freed and recreated between calls"
    if kind in ("dtype", "device", "requires_grad", "ndim"):
        name = {"ndim": "number of dimensions"}.get(kind, kind)
        if kind == "requires_grad" and len(values) == 1:
            return f"requires_grad of {src} changes between calls (compiled for requires_grad={values[0]})"
        return f"{name} of {src} changes between calls{_seen(values)}"
    return guard or "a guard failed"


def cause_fix(kind: str, src: str, dim: Any, *, forced_static: bool | None, count: int) -> str:
    """The fix people apply for this cause today (torch 2.x). `forced_static` is None when the
    logs do not say whether the code compiled with dynamic=False."""
    if kind in ("size", "stride"):
        mark = f"torch._dynamo.mark_dynamic({src}, {dim})"
        if forced_static:
            return (
                f"the code forces dynamic=False (torch.compile(..., dynamic=False)), so every new "
                f"{'size' if kind == 'size' else 'stride'} compiles again: call {mark} on the input "
                f"before the call (works with dynamic=False), or drop dynamic=False (the default "
                f"dynamic=None makes the dimension dynamic after one recompile)"
            )
        if kind == "stride":
            return f"pass contiguous inputs ({src}.contiguous()) or call {mark} before the call"
        if forced_static is None:
            return (
                f"call {mark} on the input before the call; if the code compiles with "
                f"dynamic=False every new size compiles again (drop it: the default dynamic=None "
                f"makes the dimension dynamic after one recompile)"
            )
        if count <= 1:
            return (
                f"automatic dynamic shapes (dynamic=None) recompiled it once as dynamic; to avoid "
                f"even that recompile, call {mark} on the input before the first call, or "
                f"compile with dynamic=True"
            )
        return (
            f"call {mark} on the input before the call, or compile with dynamic=True; if it "
            f"still recompiles, TORCH_LOGS=dynamic shows the guard that specializes it"
        )
    if kind == "value:float":
        tail = {
            True: "dynamic=False specializes every float, so each new value compiles again",
            False: "with dynamic=None Dynamo makes a float that changed dynamic after one recompile",
            None: "with dynamic=False every new value compiles again",
        }[forced_static]
        return (
            f"pass {src} as a tensor (torch.tensor({src}), a 0-d tensor the compiled code reads) "
            f"instead of a Python float; {tail}"
        )
    if kind == "value:int":
        tail = {
            True: "dynamic=False specializes every int, so each new value compiles again",
            False: "with dynamic=None a changing int becomes a symbolic int after one recompile",
            None: "with dynamic=False every new value compiles again",
        }[forced_static]
        return f"pass {src} as a tensor if it changes often, or keep it constant; {tail}"
    if kind == "value:bool":
        return (
            "one compile per flag value is expected (two for a bool); if it keeps recompiling, "
            "hoist the branch out of the compiled function (compile one function per value) or "
            "make the flag a tensor and use torch.where / torch.cond"
        )
    if kind == "value":
        return f"pass {src} as a tensor if it changes, or keep it constant between calls"
    if kind == "type":
        return f"pass {src} with one consistent type every call (always a tensor, never sometimes a list, a number or None)"
    if kind == "id":
        return (
            f"a new object is passed or read from a global on each call and its identity is "
            f"guarded: create {src} once (modules, optimizers, functions), and pass changing "
            f"state as arguments instead of globals"
        )
    if kind == "global_state":
        return (
            "global torch state differs between calls (grad mode, autocast, default dtype, "
            "deterministic algorithms, torch function mode): keep it the same around the "
            "compiled call, or pass what changes as an argument"
        )
    if kind == "deallocated":
        return f"{src} was freed and a new one created (e.g. a new optimizer each step): create it once and keep it alive"
    if kind == "requires_grad":
        return f"{src} alternates requires_grad: make it consistent (detach it, or make it require grad every call)"
    if kind == "dtype":
        return f"{src} changes dtype: cast it to one dtype before the compiled call"
    if kind == "device":
        return f"{src} changes device: move it to one device before the compiled call"
    if kind == "ndim":
        return f"{src} changes its number of dimensions: reshape it to a fixed rank before the call"
    return "run with TORCH_LOGS=recompiles_verbose to see every failed guard of each cache entry"


def dynamic_config(events: pl.DataFrame) -> dict[tuple[str, str], bool]:
    """(file, compile_id) -> whether the compile ran with automatic dynamic shapes off and
    static by default (what `torch.compile(dynamic=False)` sets), for every compile whose
    `compilation_metrics` carries the Dynamo config."""
    ev = events.filter(
        (pl.col("kind") == "compilation_metrics") & pl.col("metadata").str.contains("automatic_dynamic_shapes", literal=True)
    ).select("file", "compile_id", "metadata")
    out: dict[tuple[str, str], bool] = {}
    for file, cid, meta in ev.iter_rows():
        try:
            m = orjson.loads(meta)
            cfg = m.get("dynamo_config")
            cfg = orjson.loads(cfg) if isinstance(cfg, str) else (cfg or {})
        except (orjson.JSONDecodeError, TypeError, AttributeError):
            continue
        if isinstance(cfg, dict) and "automatic_dynamic_shapes" in cfg:
            out[(file, cid)] = cfg["automatic_dynamic_shapes"] is False and bool(cfg.get("assume_static_by_default", True))
    return out


def _new_frame(rank: Any, proc: str) -> dict[str, Any]:
    return {
        "rank": rank,
        "proc": proc,
        "compile_ids": set(),
        "failed": set(),
        "seconds": 0.0,
        "function": None,
        "filename": None,
        "line": None,
        "limit": False,
        "limit_value": None,
        "limit_cid": None,
        "forced_static": False,
        "has_config": False,
        "guards": [],
        "records": {},  # compile id -> (file, lineno) of its first trace record
    }


def recompile_storms(trace: Trace) -> list[dict[str, Any]]:
    """Code objects that compiled more than once, per rank, most costly first: frames that hit
    the recompile limit, then by compiles, then by compile seconds."""
    comp = trace.compiles
    rec = prefer_trace(trace.recompiles, ["rank", "compile_id"])  # logged twice: counted once
    limit = trace.limit_hits
    if "automatic_dynamic_shapes" in comp.columns:
        known = comp.filter(pl.col("automatic_dynamic_shapes").is_not_null())
        config = {
            (f, c): (a is False and st is not False)
            for f, c, a, st in known.select("file", "compile_id", "automatic_dynamic_shapes", "assume_static_by_default").iter_rows()
        }
    else:  # tables from before the compiles table carried the config
        config = dynamic_config(trace.events)
    frames: dict[tuple, dict[str, Any]] = {}
    by_rank_frame: dict[tuple, tuple] = {}  # (rank, frame id) -> key of the trace frame

    # trace compiles: the count and cost per frame
    dyn = comp.filter(pl.col("frame_id").is_not_null() & pl.col("compiled_autograd_id").is_null())
    for r in dyn.iter_rows(named=True):
        k = (r["rank"], r["file"], r["frame_id"])
        f = frames.setdefault(k, _new_frame(r["rank"], r["file"]))
        by_rank_frame.setdefault((r["rank"], r["frame_id"]), k)
        f["compile_ids"].add(r["compile_id"])
        f["records"][r["compile_id"]] = (r["file"], r["lineno"])
        f["seconds"] += r["total_time_s"] or 0.0
        f["function"] = f["function"] or r["function"]
        f["filename"] = f["filename"] or r["filename"]
        f["line"] = f["line"] or r["line"]
        if (r["file"], r["compile_id"]) in config:
            f["has_config"] = True
            f["forced_static"] = f["forced_static"] or config[(r["file"], r["compile_id"])]
        if r["status"] == "failed":
            f["failed"].add(r["compile_id"])

    def key_for(rank: Any, file: str, compile_id: str | None, source: str | None) -> tuple:
        fid = frame_of(compile_id)
        if source == "trace":
            return (rank, file, fid)
        return by_rank_frame.get((rank, fid), (rank, file, fid))

    for r in rec.iter_rows(named=True):
        k = key_for(r["rank"], r["file"], r["compile_id"], r.get("source"))
        f = frames.setdefault(k, _new_frame(r["rank"], r["file"]))
        f["compile_ids"].add(r["compile_id"])
        f["function"] = f["function"] or r["function"]
        f["filename"] = f["filename"] or r["filename"]
        f["line"] = f["line"] or r["line"]
        f["guards"].append(r)
    for r in limit.iter_rows(named=True):
        k = key_for(r["rank"], r["file"], r["compile_id"], r.get("source"))
        f = frames.setdefault(k, _new_frame(r["rank"], r["file"]))
        f["compile_ids"].add(r["compile_id"])
        f["limit"] = True
        f["limit_value"] = f["limit_value"] or r.get("limit")
        f["limit_cid"] = f["limit_cid"] or r["compile_id"]
        f["failed"].add(r["compile_id"])
        f["function"] = f["function"] or r.get("function")
        f["filename"] = f["filename"] or r.get("filename")
        f["line"] = f["line"] or r.get("line")

    storms = []
    for f in frames.values():
        ids = {c for c in f["compile_ids"] if c}
        n = len(ids)
        # a record naming compile N/M means the frame compiled at least M+1 times
        for c in ids:
            m = compile_number(c)
            if m is not None:
                n = max(n, m + 1)
        if n < 2:
            continue
        guards = sorted(f["guards"], key=lambda g: (sort_key(g["compile_id"]), g.get("reason_index") or 0))
        forced_static: bool | None = f["forced_static"]
        known_from: str | None = "config" if f["has_config"] else None
        if not f["has_config"] and not forced_static:
            # no compilation_metrics for this frame (text log only): only what the guards show
            forced_static = True if _static_sizes_evident(guards) else None
            known_from = "guards" if forced_static else None
        causes = _causes(guards, forced_static)
        first = guards[0] if guards else None
        if first is None:
            # no failed guard logged: point at the first recompile's own record
            recompiled = sorted((c for c in ids if (compile_number(c) or 0) > 0), key=sort_key) or sorted(ids, key=sort_key)
            cid = recompiled[0]
            rec_file, rec_line = f["records"].get(cid, (f["proc"], None))
            first = {"compile_id": cid, "file": rec_file, "lineno": rec_line}
        storms.append(
            {
                "rank": f["rank"],
                "function": f["function"],
                "filename": f["filename"],
                "line": f["line"],
                "compiles": n,
                "failed_compiles": len(f["failed"]),
                "compile_seconds": round(f["seconds"], 3),
                "hit_recompile_limit": bool(f["limit"]),
                "recompile_limit": f["limit_value"],
                "limit_compile_id": f["limit_cid"],
                "forced_dynamic_false": bool(forced_static),
                "forced_dynamic_false_from": known_from,
                "compile_ids": sorted(ids, key=sort_key),
                "causes": causes,
                "compile_id": first["compile_id"],
                "file": first["file"],
                "lineno": first["lineno"],
            }
        )
    storms.sort(
        key=lambda s: (not s["hit_recompile_limit"], -s["compiles"], -s["compile_seconds"], str(s["function"]), s["rank"] or -1)
    )
    return storms


def _static_sizes_evident(guards: list[dict[str, Any]]) -> bool:
    """Without the compile's config (text log only): a static size guard of the newest cache
    entry failed on the same dimension in two recompiles. Automatic dynamic shapes would have
    made that dimension dynamic after the first, so they were off (dynamic=False)."""
    seen: dict[tuple, int] = {}
    for g in guards:
        if g.get("kind") == "size" and (g.get("reason_index") or 0) == 0 and _TENSOR_MATCH_SIZE.search(g.get("guard") or ""):
            k = (g.get("guard_source"), g.get("dim"))
            seen[k] = seen.get(k, 0) + 1
            if seen[k] >= 2:
                return True
    return False


def _causes(guards: list[dict[str, Any]], forced_static: bool | None) -> list[dict[str, Any]]:
    clusters: dict[tuple, dict[str, Any]] = {}
    for g in guards:
        kind = g.get("kind") or "other"
        src = user_name(g.get("guard_source"))
        guard = g.get("guard") or ""
        if kind == "value":
            kind = _value_kind(g.get("expected"), guard)
        dim = g.get("dim") if kind in ("size", "stride") else None
        key = (kind, src, dim, guard if kind == "other" else None)
        c = clusters.get(key)
        if c is None:
            c = clusters[key] = {
                "kind": kind,
                "src": src,
                "dim": dim,
                "compiles": set(),
                "values": [],
                "guard": guard,
                "compile_id": g.get("compile_id"),
                "file": g.get("file"),
                "lineno": g.get("lineno"),
            }
        c["compiles"].add(g.get("compile_id"))
        vals = (g.get("expected"),) if kind.startswith("value") else (g.get("expected"), g.get("actual"))
        for v in vals:
            if v is not None and str(v) not in c["values"]:
                c["values"].append(str(v))
    out = []
    for c in clusters.values():
        src = c["src"] or "the input"
        count = len(c["compiles"])
        out.append(
            {
                "kind": c["kind"],
                "text": cause_text(c["kind"], src, c["dim"], c["values"], c["guard"]),
                "count": count,
                "fix": cause_fix(c["kind"], src, c["dim"], forced_static=forced_static, count=count),
                "guard": c["guard"],
                "source": src,
                "dim": c["dim"],
                "values": c["values"],
                "compile_id": c["compile_id"],
                "file": c["file"],
                "lineno": c["lineno"],
            }
        )
    out.sort(key=lambda c: -c["count"])
    return out
