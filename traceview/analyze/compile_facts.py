"""Facts the logs carry about how torch compiled, that are not problems by themselves but
explain what the summary shows (issue 13 class 6):

* symbolic shape specializations: a dynamic dimension forced to a constant (trace
  `symbolic_shape_specialization`; text `set_replacement sN = V (reason)` with the
  `create_symbol sN … for <source>` and `eval Eq(sN, V) [guard added] <code>  # file:line` of
  the same compile);
* PGO code state: `get_local_code_state` / `put_local_code_state` artifacts (text:
  `get_code_state … hit local`, `put_code_state: …`): a warm run starts with the dimensions the
  profile marked dynamic;
* compiled-autograd graphs (`!N` compile ids), named as such;
* higher-order ops in the captured graphs (`torch.ops.higher_order.cond`, `…checkpoint`,
  `invoke_subgraph`, …);
* compile caches: bypass reasons (trace `fx_graph_cache_bypass` / `aotautograd_cache_bypass`,
  text `Bypassing FX Graph Cache because '…'`, `Bypassing autograd cache due to: …`), and hits
  and misses from text logs alone (`fx graph cache hit for key`, `AOTAutograd cache miss …`).

Every fact carries the compile id and the `file`/`lineno` of its evidence.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import polars as pl

from parsers.compile_ids import CompileId, sort_key
from parsers.facts import user_name
from parsers.frameless import with_frameless_ids
from parsers.fxgraph import split_traced_graphs
from parsers.kinds import SUMMARY_PAYLOAD_GRAPH_MARK
from traceview.trace import Trace

FACT_KEYS = ("specializations", "export_dims", "pgo", "compiled_autograd_graphs", "higher_order_ops", "cache_events")

_SET_REPLACEMENT = re.compile(r"^set_replacement (?P<sym>\w+) = (?P<v>\S+) \((?P<why>[^)]+)\)")
_CREATE_SYMBOL = re.compile(r"^create_symbol (?P<sym>\w+) = \S+ for (?P<src>\S+)")
_GUARD_ADDED = re.compile(r"^eval Eq\((?P<sym>\w+), (?P<v>[^)]+)\) \[guard added\] (?P<code>.*?)\s+# (?P<file>[^\s:]+):(?P<line>\d+) in ")
_GET_STATE = re.compile(r"^get_code_state (?P<path>\S+) (?P<how>hit \w+)")
_PUT_STATE = re.compile(r"^put_code_state: (?P<what>.*)$")
_HOP = re.compile(r"torch\.ops\.higher_order\.(\w+)")
_TEXT_CACHE = (
    (re.compile(r"^fx graph cache hit for key"), "fx_graph", "hit"),
    (re.compile(r"^fx graph cache miss for key"), "fx_graph", "miss"),
    (re.compile(r"^Bypassing FX Graph Cache because '?(?P<why>.*?)'?$"), "fx_graph", "bypass"),
    (re.compile(r"^AOTAutograd cache hit for key"), "aot_autograd", "hit"),
    (re.compile(r"^AOTAutograd cache miss for key"), "aot_autograd", "miss"),
    (re.compile(r"^Bypassing autograd cache due to: (?P<why>.*)$"), "aot_autograd", "bypass"),
)
_TRACE_BYPASS = {"fx_graph_cache_bypass": "fx_graph", "aotautograd_cache_bypass": "aot_autograd"}


def _meta(text: str | None) -> Any:
    try:
        return orjson.loads(text or "null")
    except orjson.JSONDecodeError:
        return None


def _strings(events: pl.DataFrame) -> dict[tuple[str, int], str]:
    out: dict[tuple[str, int], str] = {}
    for file, meta in events.filter(pl.col("kind") == "str").select("file", "metadata").iter_rows():
        m = _meta(meta)
        if isinstance(m, list) and len(m) == 2 and isinstance(m[1], int):
            out[(file, m[1])] = str(m[0])
    return out


def _user_frame(stack: Any, file: str, strings: dict[tuple[str, int], str]) -> tuple[str | None, int | None, str | None]:
    """(filename, line, code) of the innermost frame outside torch of an interned stack."""
    if not isinstance(stack, list):
        return None, None, None
    for fr in reversed(stack):
        if not isinstance(fr, dict):
            continue
        fname = fr.get("filename")
        fname = strings.get((file, fname), str(fname)) if isinstance(fname, int) else fname
        if fname and not re.search(r"[/\\]torch[/\\]", fname):
            return fname, fr.get("line"), fr.get("loc")
    return None, None, None


def specializations(trace: Trace) -> list[dict[str, Any]]:
    # the payloads read here are parse-time ones (parsers.kinds); an export's records take
    # the id of the AOTInductor compile they belong to (parsers.frameless)
    ev = with_frameless_ids(trace.index_events())
    out: list[dict[str, Any]] = []
    rows = ev.filter(pl.col("kind") == "symbolic_shape_specialization")
    strings = _strings(ev) if rows.height else {}
    for r in rows.iter_rows(named=True):
        m = _meta(r["metadata"])
        if not isinstance(m, dict):
            continue
        ufile, uline, code = _user_frame(m.get("user_stack") or m.get("stack"), r["file"], strings)
        srcs = m.get("sources") or []
        out.append(
            {
                "compile_id": r["compile_id"], "symbol": m.get("symbol"),
                "source": user_name(srcs[0]) if srcs else None, "value": m.get("value"),
                "reason": m.get("reason"), "user_file": ufile, "user_line": uline, "user_code": code,
                "rank": r["rank"], "file": r["file"], "lineno": r["lineno"],
            }
        )
    if out:
        return out
    # text: set_replacement lines, with the symbol's source and the guard's user line
    lr = trace.log_records
    if lr.is_empty():
        return out
    sym_src: dict[tuple, str] = {}
    sym_line: dict[tuple, tuple] = {}
    for r in lr.filter(pl.col("text").str.contains(r"^(create_symbol|eval Eq\(|set_replacement)")).iter_rows(named=True):
        key = (r["rank"], r["compile_id"])
        text = r["text"]
        if m := _CREATE_SYMBOL.match(text):
            sym_src[(*key, m["sym"])] = user_name(m["src"])
        elif m := _GUARD_ADDED.match(text):
            sym_line[(*key, m["sym"])] = (m["file"], int(m["line"]), m["code"].strip())
        elif m := _SET_REPLACEMENT.match(text):
            if m["why"] != "range_refined_to_singleton" and "specializ" not in m["why"]:
                continue
            k = (*key, m["sym"])
            ufile, uline, code = sym_line.get(k, (None, None, None))
            out.append(
                {
                    "compile_id": r["compile_id"], "symbol": m["sym"], "source": sym_src.get(k),
                    "value": m["v"], "reason": m["why"], "user_file": ufile, "user_line": uline,
                    "user_code": code, "rank": r["rank"], "file": r["file"], "lineno": r["lineno"],
                }
            )
    return out


def export_dims(trace: Trace) -> list[dict[str, Any]]:
    """The dynamic dimensions of an exported program compiled without a Dynamo frame
    (torch.export + AOTInductor): the `create_symbol` records of each such compile, with the
    value range torch gave the symbol and the constant it was specialized to, if any."""
    ev = with_frameless_ids(trace.index_events())
    rows = ev.filter((pl.col("kind") == "create_symbol") & pl.col("compile_id").str.starts_with("unknown_"))
    if rows.height == 0:
        return []
    fixed = {(f, c, m.get("symbol")): m.get("value") for f, c, m in (
        (r["file"], r["compile_id"], _meta(r["metadata"]) or {})
        for r in ev.filter(pl.col("kind") == "symbolic_shape_specialization").iter_rows(named=True)
    ) if isinstance(m, dict)}
    strings = _strings(ev)
    out: list[dict[str, Any]] = []
    for r in rows.iter_rows(named=True):
        m = _meta(r["metadata"])
        if not isinstance(m, dict):
            continue
        ufile, uline, code = _user_frame(m.get("user_stack") or m.get("stack"), r["file"], strings)
        out.append(
            {
                "compile_id": r["compile_id"], "symbol": m.get("symbol"),
                "source": user_name(m["source"]) if isinstance(m.get("source"), str) else None,
                "range": m.get("vr"), "example": m.get("val"),
                "specialized_to": fixed.get((r["file"], r["compile_id"], m.get("symbol"))),
                "user_file": ufile, "user_line": uline, "user_code": code,
                "rank": r["rank"], "file": r["file"], "lineno": r["lineno"],
            }
        )
    return out


def pgo(trace: Trace) -> list[dict[str, Any]]:
    ev = trace.index_events()  # the payloads read here are parse-time ones (parsers.kinds)
    out: list[dict[str, Any]] = []
    names = ["get_local_code_state", "put_local_code_state", "get_remote_code_state", "put_remote_code_state"]
    for r in ev.filter((pl.col("kind") == "artifact") & pl.col("name").is_in(names)).iter_rows(named=True):
        payload = r["payload"] or ""
        dynamic = [ln.strip() for ln in payload.split("\n") if "?" in ln and ": tensor size=" in ln]
        out.append(
            {
                "action": "get" if r["name"].startswith("get") else "put", "where": r["name"].split("_")[1],
                "detail": "; ".join(dynamic) or None, "compile_id": r["compile_id"], "rank": r["rank"],
                "file": r["file"], "lineno": r["lineno"],
            }
        )
    if out:
        return out
    lr = trace.log_records
    if lr.is_empty():
        return out
    for r in lr.filter(pl.col("text").str.contains(r"^(get|put)_code_state")).iter_rows(named=True):
        if m := _GET_STATE.match(r["text"]):
            out.append({"action": "get", "where": m["how"].split()[-1], "detail": m["path"], "compile_id": r["compile_id"],
                        "rank": r["rank"], "file": r["file"], "lineno": r["lineno"]})
        elif m := _PUT_STATE.match(r["text"]):
            out.append({"action": "put", "where": None, "detail": m["what"].strip(), "compile_id": r["compile_id"],
                        "rank": r["rank"], "file": r["file"], "lineno": r["lineno"]})
    return out


def _ca_id(compiled_autograd_id: int) -> str:
    """`!N`, as parsers.compile_ids writes a compiled-autograd graph's id."""
    return str(CompileId(frame=None, compile=None, compiled_autograd=compiled_autograd_id).compile_id)


def compiled_autograd_graphs(trace: Trace) -> list[dict[str, Any]]:
    """One per compiled-autograd graph id (`!N`), with the Dynamo compiles of its code."""
    comp = trace.compiles.filter(pl.col("compiled_autograd_id").is_not_null())
    ids: dict[tuple, dict[str, Any]] = {}
    for r in comp.sort("file", "lineno").iter_rows(named=True):
        k = (r["rank"], r["compiled_autograd_id"])
        g = ids.setdefault(k, {"id": _ca_id(r["compiled_autograd_id"]), "compiles": [], "rank": r["rank"],
                               "file": r["file"], "lineno": r["lineno"]})
        if r["frame_id"] is not None:
            g["compiles"].append(r["compile_id"])
    if not ids:
        lr = trace.log_records
        if not lr.is_empty() and "compiled_autograd_id" in lr.columns:
            for r in lr.filter(pl.col("compiled_autograd_id").is_not_null()).sort("file", "lineno").iter_rows(named=True):
                k = (r["rank"], r["compiled_autograd_id"])
                g = ids.setdefault(k, {"id": _ca_id(r["compiled_autograd_id"]), "compiles": [], "rank": r["rank"],
                                       "file": r["file"], "lineno": r["lineno"]})
                if r["frame_id"] is not None and r["compile_id"] not in g["compiles"]:
                    g["compiles"].append(r["compile_id"])
    return sorted(ids.values(), key=lambda g: (g["rank"] or -1, sort_key(g["id"])))


def higher_order_ops(trace: Trace) -> list[dict[str, Any]]:
    """Higher-order ops per captured Dynamo graph (each op once per compile, with its count).
    Read from the Dynamo graphs that name one (a lazy parse keeps those payloads, see
    parsers.kinds.SUMMARY_PAYLOAD_GRAPH_MARK) and from the text log's Dynamo graphs."""
    out: dict[tuple, dict[str, Any]] = {}

    def add(text: str, r: dict[str, Any]) -> None:
        for op in _HOP.findall(text):
            k = (r["rank"], r["compile_id"], op)
            h = out.setdefault(k, {"op": op, "count": 0, "compile_id": r["compile_id"], "rank": r["rank"],
                                   "file": r["file"], "lineno": r["lineno"]})
            h["count"] += 1

    ev = trace.index_events()
    hop = pl.col("payload").str.contains(SUMMARY_PAYLOAD_GRAPH_MARK, literal=True)
    for r in ev.filter((pl.col("kind") == "dynamo_output_graph") & hop).iter_rows(named=True):
        add(r["payload"], r)
    lr = trace.log_records
    if not lr.is_empty():
        for r in lr.filter(pl.col("text").str.contains(SUMMARY_PAYLOAD_GRAPH_MARK, literal=True)).iter_rows(named=True):
            for d in split_traced_graphs(r["text"]):
                if d.kind == "dynamo":
                    add(d.text, r)
    return list(out.values())


def cache_events(trace: Trace) -> list[dict[str, Any]]:
    """Cache bypasses with their reason (trace and text), and hits/misses from text logs."""
    out: list[dict[str, Any]] = []
    ev = trace.index_events()  # the payloads read here are parse-time ones (parsers.kinds)
    for r in ev.filter((pl.col("kind") == "artifact") & pl.col("name").is_in(list(_TRACE_BYPASS))).iter_rows(named=True):
        m = _meta(r["payload"])
        why = m.get("cache_bypass_reason") if isinstance(m, dict) else None
        out.append({"cache": _TRACE_BYPASS[r["name"]], "event": "bypass", "reason": why, "compile_id": r["compile_id"],
                    "rank": r["rank"], "source": "trace", "file": r["file"], "lineno": r["lineno"]})
    lr = trace.log_records
    if lr.is_empty():
        return out
    rows = lr.filter(pl.col("text").str.contains(r"(?i)^(fx graph cache|AOTAutograd cache|Bypassing)"))
    for r in rows.iter_rows(named=True):
        for rx, cache, event in _TEXT_CACHE:
            if m := rx.match(r["text"]):
                why = m.groupdict().get("why")
                out.append({"cache": cache, "event": event, "reason": why.strip() if why else None,
                            "compile_id": r["compile_id"], "rank": r["rank"], "source": "text",
                            "file": r["file"], "lineno": r["lineno"]})
                break
    return out


def compile_facts(trace: Trace) -> dict[str, list[dict[str, Any]]]:
    return {
        "specializations": specializations(trace),
        "export_dims": export_dims(trace),
        "pgo": pgo(trace),
        "compiled_autograd_graphs": compiled_autograd_graphs(trace),
        "higher_order_ops": higher_order_ops(trace),
        "cache_events": cache_events(trace),
    }
