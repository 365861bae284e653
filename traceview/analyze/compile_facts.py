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
* data-dependent sizes: unbacked symbols (trace `create_unbacked_symbol`, text
  `create_unbacked_symint u0 … # file:line`), grouped by the user line that made them, with
  the runtime asserts of the compile's Dynamo graph on them and the graph breaks they caused;
* compile caches: bypass reasons (trace `fx_graph_cache_bypass` / `aotautograd_cache_bypass`,
  text `Bypassing FX Graph Cache because '…'`, `Bypassing autograd cache due to: …`), and hits
  and misses from text logs alone (`fx graph cache hit for key`, `AOTAutograd cache miss …`);
  the bypasses grouped into one fact per reason (addresses aside), with whose it is: torch's
  own (DDPOptimizer, Dynamo's DTensor.from_local closure: nothing in the user's code causes
  it), the user's code (a custom pass, Inductor called without a shape env), a setting, or
  not known.

Every fact carries the compile id and the `file`/`lineno` of its evidence.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from parsers.code_location import is_torch
from parsers.coerce import (
    DamagedField,
    int_of,
    json_object,
    json_value,
    list_of,
    stack_of,
    text_of,
    texts_of,
)
from parsers.compile_ids import CompileId, occurrence_at, sort_key
from parsers.facts import (
    runtime_asserts,
    unbacked_symbols_from_text,
    unbacked_symbols_from_trace,
    user_name,
)
from parsers.frameless import with_frameless_ids
from parsers.fxgraph import split_traced_graphs
from parsers.kinds import SUMMARY_PAYLOAD_ASSERT_MARK, SUMMARY_PAYLOAD_GRAPH_MARK
from traceview.analyze.findings import same_text
from traceview.trace import Trace

FACT_KEYS = ("specializations", "unbacked_symbols", "export_dims", "pgo", "compiled_autograd_graphs", "higher_order_ops", "cache_events",
             "cache_bypasses")

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
# Whose a cache bypass is, by the reason torch gives (torch 2.13 `_inductor/codecache.py`
# CacheabilityValidator and `_functorch/_aot_autograd/autograd_cache.py` check_cacheable /
# check_node_safe; torch 2.11's texts are the same): (pattern, owner, cause), first match wins.
# `torch`: a part of torch makes the graph uncacheable, nothing in the user's code causes it or
# can make it cacheable; `user`: the user's code or its custom passes; `setting`: a setting
# that turns the cache off or a feature that precludes it. A reason none matches is unknown.
# The words of each cause: traceview.analyze.wording.BYPASS_CAUSES.
BYPASS_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    # torch._dynamo.backends.distributed (DDPOptimizer) compiles each bucket's submodule with
    # TracingContext.fakify_first_call set; check_cacheable refuses such graphs
    (re.compile(r"^Won't cache a graph with fakify_first_call enabled"), "torch", "ddp_optimizer"),
    # CacheabilityValidator._check_shape_env: Inductor called on a graph outside a Dynamo
    # compile (torch._inductor.compile: a backend compiling its pieces at run time) has no shape
    # env. The caller's choice: torch._inductor.standalone_compile makes one and looks the cache
    # up (corpus piecewise_backend: its standalone_compile pieces miss, its
    # torch._inductor.compile ones bypass)
    (re.compile(r"^No shape env$"), "user", "no_shape_env"),
    # torch 2.11 Dynamo: DTensor.from_local becomes a closure made per compile (`fn_with_prim_types`,
    # named "prim from_local"); check_node_safe cannot hash it
    (re.compile(r"Function name: prim from_local\b"), "torch", "dtensor_from_local"),
    # check_node_safe: a function of torch's own that AOTAutograd's cache has no rule for
    (re.compile(r"Function module: torch(?:\.|,|$)", re.M), "torch", "torch_function"),
    (re.compile(r"^Can't cache HigherOrderOperator"), "torch", "higher_order_op"),
    (re.compile(r"^Reduce unsupported$"), "torch", "backward_state"),
    # _check_custom_passes: a custom pass that is not a CustomGraphPass with a uuid()
    (re.compile(r"^Unsupported (?:pre grad|post grad|joint) custom pass"), "user", "custom_pass"),
    (re.compile(r"^Unsupported _(?:pre|post)_fusion_custom_pass|^Unsupported _fuse_ddp_communication_pass"), "user", "custom_scheduler_pass"),
    (re.compile(r"^SAC context_fn does not have a cache_hash"), "user", "sac_context_fn"),
    (re.compile(r"uuid\(\) returned None|raw callable without uuid\(\)"), "user", "memory_budget_callable"),
    # check_node_safe on a function that is not torch's (the user's, a library's)
    (re.compile(r"^Unsupported call_(?:function|method) target .*Function module: (?!torch\b|None\b)", re.S), "user", "user_function"),
    (re.compile(r"^FX graph cache is not enabled"), "setting", "fx_graph_cache_off"),
    (re.compile(r"freezing enabled|^Skipping graph with frozen constants"), "setting", "freezing"),
    (re.compile(r"^compiler bisector enabled"), "setting", "bisector"),
    (re.compile(r"^Runtime constant folding"), "setting", "constant_folding"),
)


def _strings(events: pl.DataFrame) -> dict[str, dict[int, str]]:
    """file -> interned id -> string."""
    out: dict[str, dict[int, str]] = {}
    for file, meta in events.filter(pl.col("kind") == "str").select("file", "metadata").iter_rows():
        pair = list_of(json_value(meta))
        if len(pair) == 2 and int_of(pair[1]) is not None:
            out.setdefault(file, {})[pair[1]] = str(pair[0])
    return out


def _user_frame(m: dict[str, Any], file: str, strings: dict[str, dict[int, str]]) -> tuple[str | None, int | None, str | None]:
    """(filename, line, code) of the innermost frame outside torch of a record's user stack
    (else its stack). Raises DamagedField when that stack is damaged (parsers.coerce)."""
    stack = stack_of(m.get("user_stack") or m.get("stack"), strings.get(file, {}))
    for fr in reversed(stack):
        if fr.filename and not re.search(r"[/\\]torch[/\\]", fr.filename):
            return fr.filename, fr.line, fr.loc
    return None, None, None


def specializations(trace: Trace) -> list[dict[str, Any]]:
    # the payloads read here are parse-time ones (parsers.kinds); an export's records take
    # the id of the AOTInductor compile they belong to (parsers.frameless)
    ev = with_frameless_ids(trace.index_events())
    out: list[dict[str, Any]] = []
    rows = ev.filter(pl.col("kind") == "symbolic_shape_specialization")
    strings = _strings(ev) if rows.height else {}
    for r in rows.iter_rows(named=True):
        m = json_object(r["metadata"])
        try:
            ufile, uline, code = _user_frame(m, r["file"], strings)
        except DamagedField:  # the record is skipped; the parse counted it
            continue
        srcs = texts_of(m.get("sources"))
        value = m.get("value")
        out.append(
            {
                "compile_id": r["compile_id"], "symbol": text_of(m.get("symbol")),
                "source": user_name(srcs[0]) if srcs else None,
                "value": value if type(value) in (int, float, bool, str) else None,
                "reason": text_of(m.get("reason")), "user_file": ufile, "user_line": uline, "user_code": code,
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


_SYMBOL_NUMBER = re.compile(r"^([a-z]+)(\d+)$")
_DATA_DEPENDENT = re.compile(r"(?i)data[- ]dependent")


def symbol_ranges(symbols: list[str]) -> str:
    """`u0-u3`, `u0, u2, u5-u6`: runs of consecutive symbols written as a range."""
    parts: list[list[tuple[str, int]]] = []
    for sym in symbols:
        m = _SYMBOL_NUMBER.match(sym)
        if m is None:
            parts.append([(sym, -1)])
            continue
        key = (m[1], int(m[2]))
        last = parts[-1][-1] if parts else None
        if last and last[1] >= 0 and _SYMBOL_NUMBER.match(last[0]) and last[0].rstrip("0123456789") == m[1] and last[1] + 1 == key[1]:
            parts[-1].append((sym, key[1]))
        else:
            parts.append([(sym, key[1])])
    return ", ".join(p[0][0] if len(p) == 1 else f"{p[0][0]}-{p[-1][0]}" for p in parts)


def _graph_asserts(trace: Trace, ev: pl.DataFrame) -> dict[tuple, list[str]]:
    """(file, rank, compile_id, occurrence) -> the runtime-assert expressions of the compile's
    Dynamo graph (trace `dynamo_output_graph`, kept by a lazy parse when it has one)."""
    graphs = ev.filter(
        (pl.col("kind") == "dynamo_output_graph")
        & pl.col("payload").str.contains(SUMMARY_PAYLOAD_ASSERT_MARK, literal=True).fill_null(False)
    )
    out: dict[tuple, list[str]] = {}
    if graphs.height == 0:
        return out
    graphs = graphs.with_columns(occurrence_at(graphs, ev).alias("occurrence"))
    for r in graphs.iter_rows(named=True):
        out.setdefault((r["file"], r["rank"], r["compile_id"], r["occurrence"]), []).extend(runtime_asserts(r["payload"]))
    return out


def unbacked_symbols(trace: Trace) -> list[dict[str, Any]]:
    """Data-dependent sizes and values (unbacked symbols u0, u1, …), one entry per compile and
    user line (and op): the symbols Dynamo made there, the runtime asserts of the compile's
    Dynamo graph on them, and the graph breaks of the compile at that line or on a
    data-dependent value after it. The symbols the backend re-creates when it re-traces the
    graph are one entry per compile, `created_by` "backend", without a user line. Trace rows
    first; the text log's (TORCH_LOGS=dynamic) only for compiles the trace does not have."""
    ev = trace.index_events()
    rows = unbacked_symbols_from_trace(ev)
    lr = trace.log_records
    if not lr.is_empty():
        text = unbacked_symbols_from_text(lr)
        if rows.height and text.height:
            text = text.join(rows.select("rank", "compile_id").unique(), on=["rank", "compile_id"], how="anti", nulls_equal=True)
        rows = pl.concat([rows, text], how="vertical_relaxed") if text.height else rows
    if rows.height == 0:
        return []
    asserts = _graph_asserts(trace, ev) if (rows["source"] == "trace").any() else {}
    gbs = trace.graph_breaks
    out: dict[tuple, dict[str, Any]] = {}
    for r in rows.iter_rows(named=True):
        backend = r["created_by"] == "backend" or r["user_line"] is None
        key = (r["file"], r["rank"], r["compile_id"], r["occurrence"], backend, r["user_file"], r["user_line"], r["op"])
        g = out.get(key)
        if g is None:
            g = out[key] = {
                "compile_id": r["compile_id"], "occurrence": r["occurrence"], "rank": r["rank"], "symbols": [],
                "op": r["op"], "created_by": r["created_by"], "user_file": r["user_file"], "user_line": r["user_line"],
                "user_function": r["user_function"], "user_code": r["user_code"], "vr": r["vr"], "asserts": [],
                "graph_breaks": [], "source": r["source"], "file": r["file"], "lineno": r["lineno"],
            }
        g["symbols"].append(r["symbol"])
    groups = sorted(out.values(), key=lambda g: (g["file"] or "", g["lineno"] or 0))
    for g in groups:
        g["symbols_text"] = symbol_ranges(g["symbols"])
        if g["user_line"] is None:
            continue
        syms = set(g["symbols"])
        mentioned = re.compile(r"\b(" + "|".join(map(re.escape, g["symbols"])) + r")\b")
        compile_asserts = asserts.get((g["file"], g["rank"], g["compile_id"], g["occurrence"]), [])
        g["asserts"] = [a for a in compile_asserts if syms & set(mentioned.findall(a))]
    # graph breaks: at a group's line, or data-dependent (a branch on the value) after it
    if gbs.height:
        same = [g for g in groups if g["user_line"] is not None]
        seen: set[tuple] = set()
        for b in gbs.sort("file", "lineno").iter_rows(named=True):
            mine = [
                g for g in same
                if (g["rank"], g["compile_id"], g["occurrence"] or 1) == (b["rank"], b["compile_id"], b["occurrence"] or 1)
            ]
            at_line = [g for g in mine if (g["user_file"], g["user_line"]) == (b["filename"], b["line"])]
            target = at_line
            if not target and _DATA_DEPENDENT.search(" ".join(filter(None, (b["reason"], b["explanation"])))):
                before = [g for g in mine if b["source"] != g["source"] or (g["lineno"] or 0) < (b["lineno"] or 0)]
                target = before[-1:]
            for g in target:
                k = (id(g), b["filename"], b["line"], b["reason"])
                if k in seen:
                    continue
                seen.add(k)
                g["graph_breaks"].append({"filename": b["filename"], "line": b["line"], "reason": b["reason"], "gb_id": b["gb_id"]})
    return groups


def export_dims(trace: Trace) -> list[dict[str, Any]]:
    """The dynamic dimensions of an exported program compiled without a Dynamo frame
    (torch.export + AOTInductor): the `create_symbol` records of each such compile, with the
    value range torch gave the symbol and the constant it was specialized to, if any."""
    ev = with_frameless_ids(trace.index_events())
    rows = ev.filter((pl.col("kind") == "create_symbol") & pl.col("compile_id").str.starts_with("unknown_"))
    if rows.height == 0:
        return []
    fixed = {
        (r["file"], r["compile_id"], text_of(m.get("symbol"))): m.get("value")
        for r in ev.filter(pl.col("kind") == "symbolic_shape_specialization").iter_rows(named=True)
        if type((m := json_object(r["metadata"])).get("value")) in (int, float, bool, str)
    }
    strings = _strings(ev)
    out: list[dict[str, Any]] = []
    for r in rows.iter_rows(named=True):
        m = json_object(r["metadata"])
        try:
            ufile, uline, code = _user_frame(m, r["file"], strings)
        except DamagedField:  # the record is skipped; the parse counted it
            continue
        symbol, example = text_of(m.get("symbol")), m.get("val")
        out.append(
            {
                "compile_id": r["compile_id"], "symbol": symbol,
                "source": user_name(text_of(m.get("source"))) or None,
                "range": text_of(m.get("vr")), "example": example if type(example) in (int, float, bool, str) else None,
                "specialized_to": fixed.get((r["file"], r["compile_id"], symbol)),
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
        why = text_of(json_object(r["payload"]).get("cache_bypass_reason"))
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


def bypass_owner(reason: str | None) -> tuple[str, str | None]:
    """(owner, cause) of a cache bypass reason (BYPASS_RULES): ("unknown", None) where no rule
    matches or no reason was logged."""
    for rx, owner, cause in BYPASS_RULES:
        if reason and rx.search(reason):
            return owner, cause
    return "unknown", None


def cache_bypasses(trace: Trace, *, events: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The cache bypasses as facts: one per reason, its texts that differ only in an object's
    address (a closure made per compile) being one reason, over every rank and cache. A lookup
    logged both in the trace and in a text log counts once (per rank, compile id and cache the
    trace's, as compile_time.cache_counts). Each: `owner` and `cause` (bypass_owner), `reason`
    (the first text on one line, addresses as `0x…`), `count` (bypasses), `caches` ({cache:
    bypasses}), `compiles` (compile ids, as labels), `frameless` (bypasses of compiles without a
    Dynamo frame: no compile id), `ranks`, `texts` (distinct texts before the addresses were
    left out), and the first one's evidence (`rank`, `file`, `lineno`). Torch's own first, then
    the most frequent."""
    from parsers.sources import TEXT

    evs = [e for e in (cache_events(trace) if events is None else events) if e["event"] == "bypass"]
    traced = {(e["rank"], e["compile_id"], e["cache"]) for e in evs if e["source"] != TEXT}
    groups: dict[str, dict[str, Any]] = {}
    for e in evs:
        if e["source"] == TEXT and (e["rank"], e["compile_id"], e["cache"]) in traced:
            continue  # the trace's record of the same lookup
        raw = " ".join((e["reason"] or "").split())  # torch's reasons span lines ("\n Function module: …")
        key = same_text(raw) or ""
        g = groups.get(key)
        if g is None:
            owner, cause = bypass_owner(e["reason"])
            g = groups[key] = {
                "owner": owner, "cause": cause, "reason": key or None, "count": 0, "caches": {}, "compiles": [],
                "frameless": 0, "ranks": [], "texts": set(), "rank": e["rank"], "file": e["file"], "lineno": e["lineno"],
            }
        g["count"] += 1
        g["caches"][e["cache"]] = g["caches"].get(e["cache"], 0) + 1
        g["texts"].add(raw)
        if e["compile_id"] is None:
            g["frameless"] += 1
        elif e["compile_id"] not in g["compiles"]:
            g["compiles"].append(e["compile_id"])
        if e["rank"] not in g["ranks"]:
            g["ranks"].append(e["rank"])
    out = []
    for g in groups.values():
        g["texts"] = len(g["texts"])
        g["compiles"] = sorted(g["compiles"], key=sort_key)
        g["ranks"] = sorted(g["ranks"], key=lambda r: (r is not None, r or 0))
        out.append(g)
    return sorted(out, key=lambda g: (g["owner"] != "torch", -g["count"], g["reason"] or ""))


_PARAM_PART = re.compile(r"(?:^|_)(modules|parameters|buffers)_")


def param_module(name: str) -> str:
    """The module path of a parameter as Dynamo names the graph argument
    (`l_self_modules_blocks_modules_0_modules_fc_parameters_weight_` -> `blocks.0.fc`, from
    `L['self']._modules['blocks']._modules['0']._modules['fc']._parameters['weight']`); the
    compiled module's own parameter is `self`."""
    s = re.sub(r"^[lL]_(?:self_)?", "", name).rstrip("_")
    parts = _PARAM_PART.split(s)
    mods = [parts[i + 1] for i in range(1, len(parts) - 1, 2) if parts[i] == "modules"]
    return ".".join(mods) or "self"


def _layers(params: list[str]) -> list[str]:
    """The modules of a piece's parameters, in order, each once."""
    return list(dict.fromkeys(param_module(p) for p in params))


def ddp_splits(trace: Trace) -> list[dict[str, Any]]:
    """DDPOptimizer's splits (parsers.collectives ``ddp_splits``): one entry per split of a
    compile, the ranks that split it the same way together (first rank's evidence). Each also
    has `layers` (per submodule, the module paths of its parameters: `blocks.0.fc`), `function`,
    `filename`, `line` (the split compile's code object), `fx_cache` (per rank of the entry, the FX graph cache hits and misses
    of the split compile: its pieces' Inductor compiles, forward and backward, where identical
    pieces hit the cache in the process) and `graph_breaks` (the compile's own, summed over the
    ranks: a split is not a break)."""
    df = trace.ddp_splits
    if df.is_empty():
        return []
    groups: dict[tuple, dict[str, Any]] = {}
    keys = ("compile_id", "occurrence", "split")
    for (cid, occ, split), g in df.sort("rank", "position", nulls_last=False).group_by(keys, maintain_order=True):
        for (rank,), r in g.group_by("rank", maintain_order=True):
            sig = (tuple(r["submodule"].to_list()), tuple(r["param_count"].to_list()), tuple(r["param_bytes"].to_list()))
            k = (cid, occ, split, sig)
            if k in groups:
                groups[k]["ranks"].append(rank)
                continue
            groups[k] = {
                "compile_id": cid, "occurrence": occ, "split": split, "ranks": [rank],
                "submodules": r.height, "names": list(sig[0]), "param_counts": list(sig[1]), "param_bytes": list(sig[2]),
                "layers": [_layers(list(p or [])) for p in r["params"].to_list()],
                "rank": rank, "file": r["file"][0], "lineno": r["lineno"][0],
            }
    c = trace.compiles
    for e in groups.values():
        mine = c.filter(pl.col("compile_id") == e["compile_id"]) if c.height else c
        if mine.height and e["occurrence"] is not None:
            mine = mine.filter(pl.col("occurrence") == e["occurrence"])
        rows = {r["rank"]: r for r in mine.iter_rows(named=True)} if mine.height else {}
        first = next((r for r in rows.values() if r.get("function")), {})
        e["function"], e["filename"], e["line"] = first.get("function"), first.get("filename"), first.get("line")
        e["fx_cache"] = [
            {"rank": rk, "hits": rows[rk]["fx_cache_hits"] or 0, "misses": rows[rk]["fx_cache_misses"] or 0}
            for rk in e["ranks"]
            # a cache whose lookups the log never recorded is unknown, not "0 hits / 0 misses"
            if rk in rows and (rows[rk].get("fx_cache_hits") or 0) + (rows[rk].get("fx_cache_misses") or 0) > 0
        ]
        e["graph_breaks"] = sum(rows[rk]["graph_breaks"] or 0 for rk in e["ranks"] if rk in rows) if rows else None
    return sorted(groups.values(), key=lambda e: (sort_key(e["compile_id"] or ""), e["occurrence"] or 0, e["split"], e["ranks"]))


def _ddp_forward_call(stack: list[str] | None) -> bool:
    """Whether a compile's user stack shows DDP's forward calling the compiled frame
    (torch/nn/parallel/distributed.py `_run_ddp_forward`, or DDP's `forward` in torch builds
    without that helper)."""
    for frame in stack or []:
        m = re.match(r"^(.*):\d+ in (\w+)", frame)
        if m and m.group(1).replace("\\", "/").endswith("torch/nn/parallel/distributed.py") and m.group(2) in ("_run_ddp_forward", "forward"):
            return True
    return False


def ddp_unsplit(trace: Trace) -> list[dict[str, Any]]:
    """Compiles of a DDP module's forward (DDP's forward on their user stack, graph ops > 0)
    under `torch._dynamo.config.optimize_ddp = False` (compilation_metrics' dynamo_config): one
    graph, not split at the gradient buckets, so DDP's all-reduce (a hook in the backward) waits
    for the whole compiled backward. One entry per compile id and occurrence: `compile_id`,
    `occurrence`, `function`, `filename`, `line`, `ranks`, and the first rank's evidence."""
    c = trace.compiles
    if c.is_empty() or "optimize_ddp" not in c.columns:
        return []
    off = c.filter((pl.col("optimize_ddp") == False) & (pl.col("graph_op_count").fill_null(0) > 0))  # noqa: E712
    out: dict[tuple, dict[str, Any]] = {}
    for r in off.sort("rank", "lineno", nulls_last=False).iter_rows(named=True):
        if not _ddp_forward_call(r.get("user_stack")):
            continue
        k = (r["compile_id"], r["occurrence"])
        if k in out:
            out[k]["ranks"].append(r["rank"])
            continue
        out[k] = {"compile_id": r["compile_id"], "occurrence": r["occurrence"], "function": r["function"],
                  "filename": r["filename"], "line": r["line"], "ranks": [r["rank"]], "rank": r["rank"],
                  "file": r["file"], "lineno": r["metrics_lineno"] if r["metrics_lineno"] is not None else r["lineno"]}
    return sorted(out.values(), key=lambda e: (sort_key(e["compile_id"] or ""), e["occurrence"] or 0))


def draft_export_issues(trace: Trace) -> list[dict[str, Any]]:
    """What torch.export.draft_export could not decide from shapes and decided from the example
    input's real values instead (its `propagate_real_tensors_provenance` records: the
    expression, the value it took, the user's line): the exported program assumes that value
    for every input (a runtime assert checks it), so another input can fail or take the branch
    the export did not capture. One entry per record: `expr`, `result`, `user_file`,
    `user_line`, `user_function`, `user_code`, `rank`, `file`, `lineno`."""
    ev = trace.index_events()
    if ev.is_empty():
        return []
    recs = ev.filter(pl.col("kind") == "propagate_real_tensors_provenance")
    if recs.height == 0:
        return []
    strings: dict[str, dict[int, str]] = {}
    for file, meta in ev.filter((pl.col("kind") == "str") & pl.col("file").is_in(recs["file"].unique().implode())).select("file", "metadata").iter_rows():
        pair = list_of(json_value(meta))
        if len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], int):
            strings.setdefault(file, {})[pair[1]] = pair[0]
    out = []
    for r in recs.sort("file", "lineno").iter_rows(named=True):
        m = json_object(r["metadata"])
        m = m.get("propagate_real_tensors_provenance") if isinstance(m.get("propagate_real_tensors_provenance"), dict) else m
        try:
            user = [fr for fr in stack_of(m.get("user_stack"), strings.get(r["file"], {}))
                    if fr.filename and not is_torch(fr.filename) and not fr.filename.startswith("<")]
        except DamagedField:
            user = []
        last = user[-1] if user else None
        out.append({
            "expr": text_of(m.get("expr")), "result": text_of(m.get("result")),
            "user_file": last.filename if last else None, "user_line": last.line if last else None,
            "user_function": last.name if last else None, "user_code": last.loc if last else None,
            "rank": r["rank"], "file": r["file"], "lineno": r["lineno"],
        })
    return out


def compile_facts(trace: Trace) -> dict[str, list[dict[str, Any]]]:
    events = cache_events(trace)
    return {
        "specializations": specializations(trace),
        "unbacked_symbols": unbacked_symbols(trace),
        "export_dims": export_dims(trace),
        "pgo": pgo(trace),
        "compiled_autograd_graphs": compiled_autograd_graphs(trace),
        "higher_order_ops": higher_order_ops(trace),
        "cache_events": events,
        "cache_bypasses": cache_bypasses(trace, events=events),
        "ddp_splits": ddp_splits(trace),
        "ddp_unsplit": ddp_unsplit(trace),
        "draft_export_issues": draft_export_issues(trace),
    }
