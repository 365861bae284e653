"""Recompile storms: per code object and rank, how often it compiled, why, and the fix.

Failed guards are clustered into causes by (guard kind, guarded source, dimension):
"tensor 'x' size mismatch at index 1" seen across recompiles means dimension 1 of x varies;
`L['scale'] == 1.0` means a changing Python scalar; `___check_obj_id` means a new object each
call; and so on. Each cause gets the fix people apply for it today.
"""

from __future__ import annotations

from typing import Any

import orjson
import polars as pl

from traceview.trace import Trace

FIXES: dict[str, str] = {
    "size": (
        "mark the dimension dynamic before the call: torch._dynamo.mark_dynamic({src}, {dim}); "
        "or compile with dynamic=None (the default: automatic dynamic after one recompile) or dynamic=True"
    ),
    "size_static": (
        "this code forces dynamic=False, so every new size compiles again: drop dynamic=False "
        "(dynamic=None is the default) or mark the dimension dynamic: torch._dynamo.mark_dynamic({src}, {dim})"
    ),
    "stride": "pass contiguous inputs (x.contiguous()) or mark the dimension dynamic: torch._dynamo.mark_dynamic({src}, {dim})",
    "value_float": (
        "pass the changing Python number as a tensor (torch.tensor({src_bare})) instead of a float "
        "constant, or let it be dynamic (torch._dynamo.config.specialize_float=False, the default)"
    ),
    "value_int": "pass the changing Python int as a tensor, or mark it dynamic (torch._dynamo.config.specialize_int=False / automatic dynamic)",
    "value_bool": (
        "one compile per flag value is expected; if the flag changes often, hoist the branch out "
        "of the compiled function, or make it a tensor and use torch.where / torch.cond"
    ),
    "value": "a guarded Python value changes between calls: pass it as a tensor or keep it constant",
    "type": "pass arguments of one consistent type (e.g. always a tensor, never sometimes a list or None)",
    "id": (
        "a new object is passed (or read from a global) on each call and its identity is guarded: "
        "create modules/optimizers once and pass state as arguments instead of globals"
    ),
    "global_state": (
        "global torch state changed between calls (grad mode, autocast, default dtype, "
        "deterministic algorithms): keep it the same around the compiled call"
    ),
    "deallocated": "a guarded object was freed and recreated (e.g. a new optimizer each step): create it once and keep it alive",
    "requires_grad": "inputs alternate requires_grad: make them consistent (detach, or require grad every call)",
    "dtype": "inputs change dtype: cast to one dtype before the compiled call",
    "device": "inputs change device: move them to one device before the compiled call",
    "ndim": "inputs change rank (number of dimensions): reshape to a fixed rank before the call",
    "other": "run with TORCH_LOGS=recompiles_verbose to see every failed guard of each cache entry",
}

STORM_SCHEMA_KEYS = (
    "rank",
    "function",
    "filename",
    "line",
    "compiles",
    "compile_seconds",
    "hit_recompile_limit",
    "forced_dynamic_false",
    "compile_ids",
    "causes",
    "file",
    "lineno",
)


def _bare(src: str | None) -> str:
    if not src:
        return "x"
    s = src
    for pre in ("L['", "G['"):
        if s.startswith(pre) and s.endswith("']"):
            return s[len(pre) : -2]
    return s


def _value_type(expected: Any, guard: str) -> str:
    text = f"{expected} {guard}"
    if "True" in text or "False" in text:
        return "value_bool"
    try:
        v = str(expected).strip()
        if v and ("." in v or "e" in v.lower() or v in ("inf", "nan")):
            float(v)
            return "value_float"
        if v:
            int(v)
            return "value_int"
    except ValueError:
        pass
    return "value"


def _cause_text(kind: str, src: str, dim: Any, values: list[str], guard: str) -> str:
    seen = f" (seen: {', '.join(values[:6])}{', …' if len(values) > 6 else ''})" if values else ""
    if kind == "size":
        return f"dimension {dim} of {src} varies{seen}"
    if kind == "stride":
        return f"stride {dim} of {src} varies{seen}"
    if kind == "value":
        return f"the Python value {src} changes{seen}"
    if kind == "type":
        return f"the type of {src} changes{seen}"
    if kind == "id":
        return f"{src} is a different object on each call"
    if kind == "global_state":
        return "global torch state changed"
    if kind == "deallocated":
        return f"{src} was freed and recreated"
    if kind in ("dtype", "device", "requires_grad", "ndim"):
        return f"{kind} of {src} changes{seen}"
    return guard.split("#")[0].strip() or "guard failed"


def _forced_static(trace: Trace) -> set[tuple[str, str]]:
    """(file, compile_id) of compiles whose Dynamo config had automatic dynamic shapes off
    (what torch.compile(dynamic=False) sets)."""
    ev = trace.events.filter(pl.col("kind") == "compilation_metrics").select("file", "compile_id", "metadata")
    out: set[tuple[str, str]] = set()
    for file, cid, meta in ev.iter_rows():
        if '"automatic_dynamic_shapes' not in (meta or "") and "automatic_dynamic_shapes" not in (meta or ""):
            continue
        try:
            m = orjson.loads(meta)
            cfg = m.get("dynamo_config")
            cfg = orjson.loads(cfg) if isinstance(cfg, str) else (cfg or {})
        except (orjson.JSONDecodeError, TypeError):
            continue
        if cfg.get("automatic_dynamic_shapes") is False and cfg.get("assume_static_by_default", True):
            out.add((file, cid))
    return out


def recompile_storms(trace: Trace) -> list[dict[str, Any]]:
    """Code objects that compiled more than once, most severe first (limit hit, compiles, seconds)."""
    rec = trace.recompiles
    comp = trace.compiles
    limit = trace.limit_hits
    # dedupe: the same recompile seen in the trace and in the text log counts once
    if rec.height and "source" in rec.columns and rec["source"].n_unique() > 1:
        trace_keys = rec.filter(pl.col("source") == "trace").select("rank", "compile_id").unique()
        rec = pl.concat(
            [
                rec.filter(pl.col("source") == "trace"),
                rec.filter(pl.col("source") != "trace").join(trace_keys, on=["rank", "compile_id"], how="anti", nulls_equal=True),
            ]
        )
    forced = _forced_static(trace)
    frames: dict[tuple, dict[str, Any]] = {}

    def frame_key(rank: Any, file: str | None, compile_id: str | None) -> tuple:
        fid = (compile_id or "").split("/")[0]
        return (rank, file if file is not None else "", fid)

    # trace compiles: the authoritative count and cost per frame
    for r in comp.filter(pl.col("frame_id").is_not_null() & pl.col("compiled_autograd_id").is_null()).iter_rows(named=True):
        k = frame_key(r["rank"], r["file"], r["compile_id"])
        f = frames.setdefault(k, _new_frame(r["rank"], r["file"]))
        f["compile_ids"].add(r["compile_id"])
        f["seconds"] += r["total_time_s"] or 0.0
        f["function"] = f["function"] or r["function"]
        f["filename"] = f["filename"] or r["filename"]
        f["line"] = f["line"] or r["line"]
        if r["fail_reason"] and "recompile limit" in r["fail_reason"].lower():
            f["limit"] = True
        if (r["file"], r["compile_id"]) in forced:
            f["forced_static"] = True
    trace_files = set(comp["file"].unique().to_list()) if comp.height else set()
    # text-only recompiles (no trace for that process): count from the log records
    by_text_frame: dict[tuple, str] = {}
    for r in rec.iter_rows(named=True):
        file_for_key = r["file"] if r.get("source") == "trace" else None
        if file_for_key is None:
            # a text record: attach it to the trace frame of the same rank when there is one
            match = [k for k in frames if k[0] == r["rank"] and k[2] == (r["compile_id"] or "").split("/")[0]]
            k = match[0] if match and trace_files else frame_key(r["rank"], f"text:{r['file']}", r["compile_id"])
        else:
            k = frame_key(r["rank"], file_for_key, r["compile_id"])
        f = frames.setdefault(k, _new_frame(r["rank"], r["file"]))
        f["compile_ids"].add(r["compile_id"])
        f["function"] = f["function"] or r["function"]
        f["filename"] = f["filename"] or r["filename"]
        f["line"] = f["line"] or r["line"]
        f["guards"].append(r)
        if f["lineno"] is None or (r["lineno"] is not None and r["lineno"] < f["lineno"]):
            f["lineno"], f["record_file"] = r["lineno"], r["file"]
        by_text_frame[k] = r["file"]
    for r in limit.iter_rows(named=True):
        match = [k for k in frames if k[0] == r["rank"] and k[2] == (r["compile_id"] or "").split("/")[0]]
        for k in match:
            frames[k]["limit"] = True
            frames[k]["function"] = frames[k]["function"] or r.get("function")
    storms = []
    for f in frames.values():
        ids = {c for c in f["compile_ids"] if c}
        n = len(ids)
        # a recompile record names compile N/M: the frame compiled at least M+1 times
        for c in ids:
            try:
                n = max(n, int(c.split("/")[1].split("_")[0]) + 1)
            except (IndexError, ValueError):
                pass
        if n < 2 and not f["guards"]:
            continue
        storms.append(
            {
                "rank": f["rank"],
                "function": f["function"],
                "filename": f["filename"],
                "line": f["line"],
                "compiles": n,
                "compile_seconds": round(f["seconds"], 3),
                "hit_recompile_limit": bool(f["limit"]),
                "forced_dynamic_false": bool(f["forced_static"]),
                "compile_ids": sorted(ids, key=_cid_sort),
                "causes": _causes(f["guards"], bool(f["forced_static"])),
                "file": f["record_file"] or f["file"],
                "lineno": f["lineno"],
            }
        )
    storms.sort(key=lambda s: (not s["hit_recompile_limit"], -s["compiles"], -s["compile_seconds"], str(s["function"])))
    return storms


def _new_frame(rank: Any, file: str | None) -> dict[str, Any]:
    return {
        "rank": rank,
        "file": file,
        "record_file": None,
        "compile_ids": set(),
        "seconds": 0.0,
        "function": None,
        "filename": None,
        "line": None,
        "limit": False,
        "forced_static": False,
        "guards": [],
        "lineno": None,
    }


def _cid_sort(cid: str) -> tuple:
    out = []
    for part in cid.lstrip("!").replace("_", "/").split("/"):
        out.append(int(part) if part.isdigit() else -1)
    return tuple(out)


def _causes(guards: list[dict[str, Any]], forced_static: bool) -> list[dict[str, Any]]:
    # one failed guard per (recompile, cause): the first listed, against the newest cache entry
    clusters: dict[tuple, dict[str, Any]] = {}
    for g in guards:
        kind = g.get("kind") or "other"
        src = g.get("guard_source") or ""
        dim = g.get("dim")
        key = (kind, src, dim if kind in ("size", "stride") else None)
        c = clusters.setdefault(
            key, {"kind": kind, "src": src, "dim": dim, "compiles": set(), "values": [], "guard": g.get("guard") or ""}
        )
        c["compiles"].add(g.get("compile_id"))
        for v in (g.get("expected"), g.get("actual")):
            if v is not None and str(v) not in c["values"]:
                c["values"].append(str(v))
    out = []
    for c in clusters.values():
        kind = c["kind"]
        src = c["src"] or "the input"
        fix_key = kind
        if kind == "size" and forced_static:
            fix_key = "size_static"
        elif kind == "value":
            fix_key = _value_type(c["values"][0] if c["values"] else "", c["guard"])
        fix = FIXES.get(fix_key, FIXES["other"]).format(src=_bare(src), dim=c["dim"], src_bare=_bare(src))
        out.append(
            {
                "kind": kind if fix_key not in ("value_bool", "value_float", "value_int") else fix_key.replace("value_", "value:"),
                "text": _cause_text(kind, _bare(src) if kind != "id" else src, c["dim"], c["values"], c["guard"]),
                "count": len(c["compiles"]),
                "fix": fix,
                "guard": c["guard"],
            }
        )
    out.sort(key=lambda c: -c["count"])
    return out
