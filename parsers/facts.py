"""Fact tables built the same way from TORCH_TRACE events and from TORCH_LOGS records.

Tables (schemas in ``SCHEMAS``, columns documented in docs/tables-facts.md):
``recompiles``, ``graph_break_records`` (and from them and the compiles, ``graph_breaks``),
``guards``, ``annotations``, ``limit_hits``, and
``unbacked_symbols`` (built on demand by the summary's facts, not a Trace table). Every row has
``source`` (``trace`` | ``text``), ``rank``, ``compile_id``, ``file`` and ``lineno``.

Trace builders take the ``events`` table (docs/tables.md); text builders take the
``records`` table of :func:`parsers.textlog.read_text_log` (or the ``TextLog``). Message bodies
are parsed by :mod:`parsers.messages`, the same code for both sources.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
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
    typed_frame,
)
from parsers.compile_ids import occurrence_at, text_occurrence_at, with_attempt
from parsers.messages import (
    parse_annotation,
    parse_graph_break,
    parse_guard_tree,
    parse_reason,
    parse_recompile_reasons,
    split_graph_breaks,
)
from parsers.sources import TEXT, TRACE, prefer_trace
from parsers.textlog import TextLog

__all__ = [
    "ANNOTATIONS_SCHEMA",
    "GRAPH_BREAKS_SCHEMA",
    "GRAPH_BREAK_RECORDS_SCHEMA",
    "GUARDS_SCHEMA",
    "LIMIT_HITS_SCHEMA",
    "RECOMPILES_SCHEMA",
    "SCHEMAS",
    "UNBACKED_SYMBOLS_SCHEMA",
    "annotations_from_text",
    "facts_from_text",
    "facts_from_trace",
    "graph_breaks",
    "graph_breaks_from_text",
    "graph_breaks_from_trace",
    "guards_from_text",
    "guards_from_trace",
    "limit_hits_from_text",
    "limit_hits_from_trace",
    "recompiles_from_text",
    "recompiles_from_trace",
    "runtime_asserts",
    "unbacked_symbols_from_text",
    "unbacked_symbols_from_trace",
    "user_name",
]

_S, _I32, _I64, _B = pl.String, pl.Int32, pl.Int64, pl.Boolean

_GUARD_SOURCE_ROOT = re.compile(r"\b[LG]\['([^']*)'\]")


def user_name(guard_source: str | None) -> str:
    """A guard source as the user's code names it: `L['x']` -> `x`, `G['cfg'].scale` ->
    `cfg.scale`, `len(L['xs'])` -> `len(xs)` (Dynamo's locals/globals dicts dropped)."""
    if not guard_source:
        return ""
    return _GUARD_SOURCE_ROOT.sub(lambda m: m.group(1), guard_source)
_TAIL = {"source": _S, "file": _S, "lineno": _I64}

RECOMPILES_SCHEMA = pl.Schema(
    {
        "rank": _I32, "compile_id": _S, "occurrence": _I32, "trace_id": _S, "function": _S, "filename": _S,
        "line": _I32, "reason_index": _I32, "failed_against": _S, "guard": _S, "kind": _S,
        "guard_source": _S, "dim": _I32, "expected": _S, "actual": _S, "user_code": _S,
        "user_file": _S, "user_line": _I32, "user_function": _S, **_TAIL,
    }
)
GRAPH_BREAK_RECORDS_SCHEMA = pl.Schema(
    {
        "rank": _I32, "compile_id": _S, "occurrence": _I32, "trace_id": _S, "attempt": _I32,
        "filename": _S, "line": _I32, "function": _S, "reason": _S, "reason_line": _S, "gb_id": _S,
        "explanation": _S, "hint": _S, "debug_context": _S, "frame_skipped": _B,
        "inner_reason": _S, "inner_gb_id": _S, "skipped_function": _S, "skipped_filename": _S,
        "skipped_line": _I32, "user_stack_suppressed": _B, **_TAIL,
    }
)
# one row per break (graph_breaks below): the records' columns and which record says it
GRAPH_BREAKS_SCHEMA = pl.Schema({**GRAPH_BREAK_RECORDS_SCHEMA, "origin": _S})
GUARDS_SCHEMA = pl.Schema(
    {
        "rank": _I32, "compile_id": _S, "occurrence": _I32, "trace_id": _S, "kind": _S, "code": _S,
        "guard_source": _S, "user_code": _S, "user_file": _S, "user_line": _I32,
        "user_function": _S, "depth": _I32, **_TAIL,
    }
)
ANNOTATIONS_SCHEMA = pl.Schema(
    {"rank": _I32, "compile_id": _S, "node": _S, "seq_nr": _I64, "side": _S, **_TAIL}
)
LIMIT_HITS_SCHEMA = pl.Schema(
    {
        "rank": _I32, "compile_id": _S, "limit": _I32, "limit_name": _S, "function": _S,
        "filename": _S, "line": _I32, "last_reason": _S, **_TAIL,
    }
)
UNBACKED_SYMBOLS_SCHEMA = pl.Schema(
    {
        "rank": _I32, "compile_id": _S, "occurrence": _I32, "trace_id": _S, "symbol": _S, "vr": _S,
        "node_id": _I64, "op": _S, "user_file": _S, "user_line": _I32, "user_function": _S,
        "user_code": _S, "created_by": _S, **_TAIL,
    }
)
SCHEMAS: dict[str, pl.Schema] = {
    "recompiles": RECOMPILES_SCHEMA,
    "graph_break_records": GRAPH_BREAK_RECORDS_SCHEMA,
    "graph_breaks": GRAPH_BREAKS_SCHEMA,
    "guards": GUARDS_SCHEMA,
    "annotations": ANNOTATIONS_SCHEMA,
    "limit_hits": LIMIT_HITS_SCHEMA,
    "unbacked_symbols": UNBACKED_SYMBOLS_SCHEMA,
}

_LIMIT_TEXT = re.compile(r"hit config\.(?P<name>\w+) \((?P<limit>\d+)\)")
_LIMIT_FN = re.compile(r"function: '(?P<fn>[^']*)' \((?P<file>.+):(?P<line>\d+)\)")
_LIMIT_LAST = re.compile(r"last reason: (?P<reason>.*)")
_LIMIT_METRICS = re.compile(r"(?i)recompile.limit|cache.size.limit")
_LIMIT_VALUE = re.compile(r"currently set to (\d+)")
_LIMIT_KIND = re.compile(r"Limit type: (\w+)")


def _interned(events: pl.DataFrame, cond: pl.Expr) -> dict[str, dict[int, str]]:
    """file -> interned id -> string, from the `str` records of `events` that match `cond`."""
    out: dict[str, dict[int, str]] = {}
    for r in _rows(events, cond):
        pair = list_of(json_value(r["metadata"]))
        if len(pair) == 2 and text_of(pair[0]) is not None and int_of(pair[1]) is not None:
            out.setdefault(r["file"], {})[pair[1]] = pair[0]
    return out


def _frame(rows: list[dict[str, Any]], schema: pl.Schema) -> pl.DataFrame:
    return typed_frame(rows, schema, strict=False)


def _records(log: TextLog | pl.DataFrame) -> pl.DataFrame:
    return log.records if isinstance(log, TextLog) else log


def _rows(df: pl.DataFrame, cond: pl.Expr) -> Iterable[dict[str, Any]]:
    return df.filter(cond).iter_rows(named=True)


def _at(rec: Mapping[str, Any], offset: int, *, payload: bool = False) -> int:
    """File line of line ``offset`` of a record's text (payload lines start after the header)."""
    base = rec["lineno"]
    if payload:
        return base + 1 + offset
    return base + offset if rec.get("contiguous", True) else base


# ------------------------------------------------------------------ recompiles


def recompiles_from_text(log: TextLog | pl.DataFrame) -> pl.DataFrame:
    """One row per failed guard of each ``recompiles``/``recompiles_verbose`` record."""
    out = []
    cond = pl.col("artifact").is_in(["recompiles", "recompiles_verbose"])
    for rec in _rows(_records(log), cond):
        for row in parse_recompile_reasons(rec["text"]):
            out.append(
                {**row, "rank": rec["rank"], "compile_id": rec["compile_id"],
                 "trace_id": rec["trace_id"], "source": "text", "file": rec["file"],
                 "lineno": rec["lineno"]}
            )
    return _frame(out, RECOMPILES_SCHEMA)


def _code_objects(events: pl.DataFrame, compiles: pl.DataFrame | None) -> dict[tuple, tuple]:
    """(file, compile_id) -> (function, filename, line) of the compiled code object.

    From ``compiles`` (file, compile_id, function, filename, line) where it names the
    function, else from the events' compilation_metrics / dynamo_start records.
    """
    found = _code_objects_from_events(events)
    if compiles is not None and {"file", "compile_id", "function"} <= set(compiles.columns):
        for r in compiles.filter(pl.col("function").is_not_null()).iter_rows(named=True):
            found[(r["file"], r["compile_id"])] = (r["function"], r.get("filename"), r.get("line"))
    return found


def _code_objects_from_events(events: pl.DataFrame) -> dict[tuple, tuple]:
    strings = _interned(events, pl.col("kind") == "str")
    found: dict[tuple, tuple] = {}
    frames: dict[tuple, tuple] = {}
    kinds = ["compilation_metrics", "dynamo_start"]
    for r in _rows(events, pl.col("kind").is_in(kinds)):
        meta = json_object(r["metadata"])
        key = (r["file"], r["compile_id"] or text_of(meta.get("compile_id")))
        if r["kind"] == "compilation_metrics":
            if text_of(meta.get("co_name")):
                found[key] = (meta["co_name"], text_of(meta.get("co_filename")), int_of(meta.get("co_firstlineno")))
        elif key not in found:
            try:
                stack = stack_of(meta.get("stack"), strings.get(r["file"], {}))
            except DamagedField:  # counted by the parse (parsers.coerce)
                continue
            if stack:
                found.setdefault(key, (stack[-1].name, stack[-1].filename, stack[-1].line))
        if key in found and r["frame_id"] is not None:
            frames.setdefault((r["file"], r["frame_id"]), found[key])
    # A compile that hit the recompile limit has no co_name: take another compile of the frame.
    ids = events.filter(pl.col("compile_id").is_not_null() & pl.col("frame_id").is_not_null())
    for r in ids.select("file", "compile_id", "frame_id").unique().iter_rows(named=True):
        key = (r["file"], r["compile_id"])
        if key not in found and (r["file"], r["frame_id"]) in frames:
            found[key] = frames[(r["file"], r["frame_id"])]
    return found


def recompiles_from_trace(
    events: pl.DataFrame, compiles: pl.DataFrame | None = None
) -> pl.DataFrame:
    """One row per failed guard of each ``recompile_reasons`` artifact.

    The function, filename and line come from ``compiles`` (columns file, compile_id,
    function, filename, line) when given, else from the events' ``compilation_metrics`` /
    ``dynamo_start`` records of the same compile (or of the same frame).
    """
    cond = (pl.col("kind") == "artifact") & (pl.col("name") == "recompile_reasons")
    recs = events.filter(cond)
    if recs.height == 0:
        return _frame([], RECOMPILES_SCHEMA)
    # which compile of that id (after torch._dynamo.reset() two share it): by log order
    # (logged before the compile's dynamo_start: convert_frame.py logs the reasons, then compiles)
    recs = recs.with_columns(occurrence_at(recs, events, prelude=True).alias("occurrence"))
    code = _code_objects(events, compiles)
    own: dict[tuple, tuple] = {}  # (file, compile_id, occurrence) -> code object, from compiles
    if compiles is not None and {"file", "compile_id", "occurrence", "function"} <= set(compiles.columns):
        for r in compiles.filter(pl.col("function").is_not_null()).iter_rows(named=True):
            own[(r["file"], r["compile_id"], r["occurrence"])] = (r["function"], r.get("filename"), r.get("line"))
    out = []
    for ev in recs.iter_rows(named=True):
        fn, fname, line = own.get((ev["file"], ev["compile_id"], ev["occurrence"])) or code.get(
            (ev["file"], ev["compile_id"]), (None, None, None)
        )
        for row in parse_recompile_reasons(ev["payload"] or ""):
            out.append(
                {**row, "function": fn, "filename": fname, "line": line, "rank": ev["rank"],
                 "compile_id": ev["compile_id"], "occurrence": ev["occurrence"], "trace_id": ev["trace_id"], "source": "trace",
                 "file": ev["file"], "lineno": ev["lineno"]}
            )
    return _frame(out, RECOMPILES_SCHEMA)


# ---------------------------------------------------------------- graph breaks


def _gb_row(parsed: dict[str, Any], rec: Mapping[str, Any], source: str, lineno: int) -> dict:
    return {
        **parsed, "rank": rec["rank"], "compile_id": rec["compile_id"], "occurrence": rec.get("occurrence"),
        "trace_id": rec["trace_id"], "attempt": rec["attempt"], "source": source,
        "file": rec["file"], "lineno": lineno,
    }


def graph_breaks_from_text(log: TextLog | pl.DataFrame) -> pl.DataFrame:
    """One `graph_break_records` row per graph-break message of the ``graph_breaks`` records."""
    out = []
    records = _records(log)
    # which compile of that id (after torch._dynamo.reset() two share it): the occurrence
    # of the record (1 unless TORCH_LOGS=dynamo logged where each compile starts)
    records = records.with_columns(text_occurrence_at(records, records).alias("occurrence"))
    for rec in _rows(records, pl.col("artifact") == "graph_breaks"):
        for offset, msg in split_graph_breaks(rec["text"]):
            out.append(_gb_row(parse_graph_break(msg), rec, TEXT, _at(rec, offset)))
    # "user stack suppressed due to duplicate graph break": torch logged the same break
    # (same gb type and user frames) earlier with its stack; take the function from there.
    seen: dict[tuple, str] = {}
    for row in out:
        key = (row["file"], row["rank"], row["filename"], row["line"])
        if row["function"] is not None:
            seen.setdefault(key, row["function"])
        elif row["user_stack_suppressed"]:
            row["function"] = seen.get(key)
    return _frame(out, GRAPH_BREAK_RECORDS_SCHEMA)


def graph_breaks_from_trace(events: pl.DataFrame) -> pl.DataFrame:
    """One `graph_break_records` row per ``dynamo_graph_break_reason`` artifact; `occurrence`: which compile of
    its id (parsers.compile_ids.occurrence_at)."""
    cond = (pl.col("kind") == "artifact") & (pl.col("name") == "dynamo_graph_break_reason")
    out = [
        _gb_row(parse_graph_break(ev["payload"] or ""), ev, TRACE, ev["lineno"])
        for ev in _rows(events, cond)
    ]
    df = _frame(out, GRAPH_BREAK_RECORDS_SCHEMA)
    # which compile of that id (after torch._dynamo.reset() two share it): by log order
    return df.with_columns(occurrence_at(df, events).alias("occurrence"))


# The key of one break in the records: a trace and a text log beside it log the same break
# once each (parsers.sources.prefer_trace keeps the trace's)
BREAK_KEY = ("rank", "compile_id", "filename", "line", "reason")
# restarts Dynamo does for its own analyses (exc.py: TensorifyScalarRestartAnalysis,
# SpeculationRestartAnalysis), logged as a bare class in restart_reasons: no graph break
_INTERNAL_RESTART = re.compile(r"^\s*<class 'torch\._dynamo\.exc\.\w*RestartAnalysis'>\s*$")


def graph_breaks(records: pl.DataFrame, compiles: pl.DataFrame) -> pl.DataFrame:
    """One row per graph break (`graph_breaks`; the summary counts these rows), `origin` saying
    which record tells it:

    * `message`: the graph-break messages of `records` (`graph_break_records`), a break
      logged by a trace and by a text log beside it once (the trace's row: BREAK_KEY);
    * `restart_reason`: a `restart_reasons` entry of a compile with no message (older torch,
      a trace without the artifact), one row per entry;
    * `failure`: a compile that failed as Unsupported with no message (the break ended the
      compile; `frame_skipped` null: whether the frame then ran eagerly, or fullgraph=True
      raised it to the caller, is for the analyzers to judge).

    A compile counts as having a message by its file and occurrence for trace rows (the
    second 0/0, after torch._dynamo.reset(), is another compile), by rank and id for text rows
    (every occurrence: a text log without TORCH_LOGS=dynamo does not say which)."""
    msg = prefer_trace(records, BREAK_KEY).with_columns(pl.lit("message").alias("origin"))
    comp = compiles
    if comp.height:
        text = msg.filter(pl.col("file").is_in(comp["file"].implode()).not_())
        by_rank = comp.join(text.select("rank", "compile_id").unique(), on=["rank", "compile_id"], nulls_equal=True)
        covered = pl.concat(
            [msg.select("file", "compile_id", "occurrence"), by_rank.select("file", "compile_id", "occurrence")]
        ).unique()
        comp = comp.join(covered, on=["file", "compile_id", "occurrence"], how="anti", nulls_equal=True)
    rows: list[dict[str, Any]] = []
    for r in comp.filter(pl.col("restart_reasons").list.len() > 0).iter_rows(named=True):
        for text in r["restart_reasons"]:
            if _INTERNAL_RESTART.search(text or ""):
                continue  # Dynamo re-tracing the frame for its own analysis, not a graph break
            rows.append(
                {
                    **_compile_break(r, "restart_reason", text),
                    "filename": r["filename"],
                    "function": r["function"],
                    "frame_skipped": False,
                    "attempt": None,  # a set in the metrics: which attempt each ended is not said
                }
            )
    failed = comp.filter((pl.col("status") == "failed") & pl.col("fail_type").fill_null("").str.contains("Unsupported"))
    for r in failed.iter_rows(named=True):
        low = (r["fail_reason"] or "").lower()
        if "recompile limit" in low or "recompile_limit" in low or "cache_size_limit" in low:
            continue  # the limit is a storm, not a break in user code
        rows.append(
            {
                **_compile_break(r, "failure", r["fail_reason"]),
                "filename": r["fail_user_filename"] or r["filename"],
                "line": r["fail_user_line"],
                "function": r["function"] if r["fail_user_filename"] in (None, r["filename"]) else None,
                "frame_skipped": None,
                "skipped_function": r["function"],
                "skipped_filename": r["filename"],
                "skipped_line": r["line"],
            }
        )
    return pl.concat([msg.select(list(GRAPH_BREAKS_SCHEMA)), _frame(rows, GRAPH_BREAKS_SCHEMA)], how="vertical_relaxed")


def _compile_break(r: Mapping[str, Any], origin: str, text: str | None) -> dict[str, Any]:
    """The columns of a break read from a compile's `compilation_metrics` (compiles row `r`)."""
    attempt = max((r["attempts"] or 1) - 1, 0)
    return {
        **parse_reason(text),
        "rank": r["rank"], "compile_id": r["compile_id"], "occurrence": r["occurrence"],
        "trace_id": f"[{with_attempt(r['compile_id'], attempt)}]", "attempt": attempt,
        "reason_line": (text or "").strip().split("\n", 1)[0] or None,
        "origin": origin, "source": TRACE, "file": r["file"], "lineno": r["metrics_lineno"] or r["lineno"],
    }


# ---------------------------------------------------------------------- guards


def _guard_rows(text: str, rec: Mapping[str, Any], source: str, payload: bool) -> list[dict]:
    return [
        {**g, "rank": rec["rank"], "compile_id": rec["compile_id"], "occurrence": rec.get("occurrence"),
         "trace_id": rec["trace_id"],
         "source": source, "file": rec["file"],
         "lineno": _at(rec, g["line_offset"], payload=payload)}
        for g in parse_guard_tree(text)
    ]


def guards_from_text(log: TextLog | pl.DataFrame) -> pl.DataFrame:
    """One row per guard of the ``guards`` records' guard trees (exact line of the guard)."""
    cond = (pl.col("artifact") == "guards") & pl.col("text").str.contains(
        "TREE_GUARD_MANAGER:", literal=True
    )
    out = []
    records = _records(log)
    records = records.with_columns(text_occurrence_at(records, records).alias("occurrence"))
    for rec in _rows(records, cond):
        out += _guard_rows(rec["text"], rec, "text", payload=False)
    return _frame(out, GUARDS_SCHEMA)


def guards_from_trace(events: pl.DataFrame) -> pl.DataFrame:
    """One row per guard of each ``dynamo_cpp_guards_str`` payload (exact payload line)."""
    out = []
    recs = events.filter(pl.col("kind") == "dynamo_cpp_guards_str")
    recs = recs.with_columns(occurrence_at(recs, events).alias("occurrence"))
    for ev in recs.iter_rows(named=True):
        out += _guard_rows(ev["payload"] or "", ev, "trace", payload=True)
    return _frame(out, GUARDS_SCHEMA)


# ----------------------------------------------------------------- annotations


def annotations_from_text(log: TextLog | pl.DataFrame) -> pl.DataFrame:
    """seq_nr of joint-graph nodes from the ``annotation`` records (see parse_annotation)."""
    recs = _records(log).filter(pl.col("artifact") == "annotation")
    rows = [
        {**r, "source": "text"}
        for r in parse_annotation(
            {**rec, "lineno": rec["lineno"] if rec["contiguous"] else None}
            for rec in recs.iter_rows(named=True)
        )
    ]
    # Records that are not contiguous (interleaved ranks) fall back to the record's line.
    if rows and any(r["lineno"] is None for r in rows):
        first = {(r["file"], r["rank"], r["compile_id"]): r["lineno"] for r in
                 recs.iter_rows(named=True)}
        for r in rows:
            if r["lineno"] is None:
                r["lineno"] = first.get((r["file"], r["rank"], r["compile_id"]))
    return _frame(rows, ANNOTATIONS_SCHEMA)


# ------------------------------------------------------------------ limit hits


def limit_hits_from_text(log: TextLog | pl.DataFrame) -> pl.DataFrame:
    """``torch._dynamo hit config.recompile_limit (N)`` warnings."""
    out = []
    cond = pl.col("text").str.contains(r"hit config\.\w+ \(\d+\)")
    for rec in _rows(_records(log), cond):
        m = _LIMIT_TEXT.search(rec["text"])
        if m is None:
            continue
        fn = _LIMIT_FN.search(rec["text"])
        last = _LIMIT_LAST.search(rec["text"])
        out.append(
            {
                "rank": rec["rank"], "compile_id": rec["compile_id"], "limit": int(m["limit"]),
                "limit_name": m["name"], "function": fn["fn"] if fn else None,
                "filename": fn["file"] if fn else None,
                "line": int(fn["line"]) if fn else None,
                "last_reason": last["reason"].strip() if last else None, "source": "text",
                "file": rec["file"], "lineno": rec["lineno"],
            }
        )
    return _frame(out, LIMIT_HITS_SCHEMA)


def limit_hits_from_trace(
    events: pl.DataFrame, compiles: pl.DataFrame | None = None
) -> pl.DataFrame:
    """``compilation_metrics`` whose fail_reason is the recompile (cache size) limit."""
    cond = (pl.col("kind") == "compilation_metrics") & pl.col("metadata").str.contains(
        _LIMIT_METRICS.pattern
    )
    out = []
    code: dict[tuple, tuple] | None = None
    for ev in _rows(events, cond):
        meta = json_object(ev["metadata"])
        reason = text_of(meta.get("fail_reason"))
        if reason is None or not _LIMIT_METRICS.search(reason):
            continue
        if code is None:
            code = _code_objects(events, compiles)
        cid = ev["compile_id"] or text_of(meta.get("compile_id"))
        fn, fname, line = code.get((ev["file"], cid), (None, None, None))
        value = _LIMIT_VALUE.search(reason)
        kind = _LIMIT_KIND.search(reason)
        out.append(
            {
                "rank": ev["rank"], "compile_id": cid,
                "limit": int(value.group(1)) if value else None,
                "limit_name": kind.group(1) if kind else None,
                "function": text_of(meta.get("co_name")) or fn,
                "filename": text_of(meta.get("co_filename")) or fname,
                "line": int_of(meta.get("co_firstlineno")) or line,
                "last_reason": text_of(meta.get("recompile_reason")), "source": "trace",
                "file": ev["file"], "lineno": ev["lineno"],
            }
        )
    return _frame(out, LIMIT_HITS_SCHEMA)


# ------------------------------------------------------------ unbacked symbols

# Where torch creates the symbol (the innermost frame of `stack`): the fake kernel of the op
# (torch/_subclasses/fake_impls.py `nonzero`, `local_scalar_dense`), named for the user.
_UNBACKED_OPS = {
    "nonzero": "torch.nonzero",
    "nonzero_static": "torch.nonzero_static",
    "local_scalar_dense": "Tensor.item()",
    "masked_select": "torch.masked_select",
    "unique2": "torch.unique",
    "unique_dim": "torch.unique",
    "unique_consecutive": "torch.unique_consecutive",
    "repeat_interleave_tensor": "torch.repeat_interleave",
    "bincount": "torch.bincount",
}
# the backend re-traces the Dynamo graph (fake-tensor propagation in call_user_compiler,
# AOTAutograd's make_fx in _create_graph): its symbols are not at a user line of their own
_BACKEND_FRAMES = frozenset({"call_user_compiler", "_call_user_compiler", "_create_graph", "make_fx"})
_BACKEND_FILE = re.compile(r"torch[/\\]_(?:functorch|inductor)[/\\]")
# torch.export's own files: a non-strict export traces the user's forward with make_fx (AOT's
# functional_call on the stack too), so a symbol it makes has the user's line (no Dynamo compile)
EXPORT_FILE = re.compile(r"torch[/\\]_?export[/\\]")
_TEXT_UNBACKED = re.compile(
    r"^create_unbacked_sym\w* (?P<sym>\S+) (?P<vr>\[[^\]]*\])(?: (?P<code>.*?)  # (?P<file>\S+?):(?P<line>\d+) in (?P<fn>\S+))?"
    r"(?: \((?P<where>\S+?):\d+ in (?P<op>\w+)\))?\s*$"
)
_RUNTIME_ASSERT = re.compile(r"Runtime assertion failed for expression (?P<expr>.+?) on node '")


def _is_torch_file(filename: str | None) -> bool:
    """torch's own frames (parsers.code_location: the installed package, a checkout, or a
    relative `torch/...` path of a text log)."""
    return is_torch(filename)


def _unbacked_op(name: str | None, where: str | None) -> str | None:
    if not name:
        return None
    if where and not re.search(r"fake_impls|meta_registrations|_refs|_prims", where):
        return name
    return _UNBACKED_OPS.get(name, name)


def unbacked_symbols_from_trace(events: pl.DataFrame) -> pl.DataFrame:
    """One row per ``create_unbacked_symbol`` record (a data-dependent size or value: u0, u1,
    …): its value range at creation (`vr`), the op whose fake kernel made it (innermost
    frame of `stack`), the innermost user frame of `user_stack` (frames in torch and generated
    code such as ``<string>`` left out) and who created it: ``dynamo`` (tracing the user's
    code) or ``backend`` (the backend re-tracing Dynamo's graph: fake-tensor propagation in
    call_user_compiler, AOTAutograd's make_fx). A backend's symbol has no user line here: the
    user_stack torch logs with it is where the frame starts, not where the op is."""
    recs = events.filter(pl.col("kind") == "create_unbacked_symbol")
    if recs.height == 0:
        return _frame([], UNBACKED_SYMBOLS_SCHEMA)
    files = recs["file"].unique().implode()
    strings = _interned(events, (pl.col("kind") == "str") & pl.col("file").is_in(files))
    recs = recs.with_columns(occurrence_at(recs, events).alias("occurrence"))

    out = []
    for ev in recs.iter_rows(named=True):
        m = json_object(ev["metadata"])
        m = m.get("create_unbacked_symbol") if type(m.get("create_unbacked_symbol")) is dict else m
        interned = strings.get(ev["file"], {})
        try:
            stack = stack_of(m.get("stack"), interned)
            user_stack = stack_of(m.get("user_stack"), interned)
        except DamagedField:  # the record is skipped; the parse counted it (parsers.coerce)
            continue
        symbol = text_of(m.get("symbol"))
        if symbol is None:  # no symbol (or a damaged one) is no fact
            continue
        last = stack[-1] if stack else None
        exported = ev["compile_id"] is None and any(EXPORT_FILE.search(fr.filename or "") for fr in stack)
        backend = not exported and any(fr.name in _BACKEND_FRAMES or _BACKEND_FILE.search(fr.filename or "") for fr in stack)
        user = None
        for fr in [] if backend else reversed(user_stack):
            if fr.filename and not _is_torch_file(fr.filename) and not fr.filename.startswith("<"):
                user = fr
                break
        out.append(
            {
                "rank": ev["rank"], "compile_id": ev["compile_id"], "occurrence": ev["occurrence"],
                "trace_id": ev["trace_id"], "symbol": symbol, "vr": text_of(m.get("vr")),
                "node_id": int_of(m.get("node_id")),
                "op": _unbacked_op(last.name, last.filename) if last else None,
                "user_file": user.filename if user else None, "user_line": user.line if user else None,
                "user_function": user.name if user else None, "user_code": user.loc if user else None,
                "created_by": "backend" if backend else "export" if exported else "dynamo",
                "source": "trace", "file": ev["file"], "lineno": ev["lineno"],
            }
        )
    return _frame(out, UNBACKED_SYMBOLS_SCHEMA)


def unbacked_symbols_from_text(log: TextLog | pl.DataFrame) -> pl.DataFrame:
    """One row per ``create_unbacked_symint u0 [-int_oo, int_oo] <code>  # file:line in fn
    (_subclasses/fake_impls.py:N in nonzero)`` record (TORCH_LOGS=dynamic). The text log
    does not say who created a symbol without a user line: `created_by` is ``dynamo`` with a
    user line, null without."""
    records = _records(log)
    cond = pl.col("text").str.starts_with("create_unbacked_sym")
    if records.height == 0 or records.filter(cond).height == 0:
        return _frame([], UNBACKED_SYMBOLS_SCHEMA)
    records = records.with_columns(text_occurrence_at(records, records).alias("occurrence"))
    out = []
    for rec in _rows(records, cond):
        m = _TEXT_UNBACKED.match(rec["text"].split("\n", 1)[0])
        if m is None:
            continue
        out.append(
            {
                "rank": rec["rank"], "compile_id": rec["compile_id"], "occurrence": rec["occurrence"],
                "trace_id": rec["trace_id"], "symbol": m["sym"], "vr": m["vr"], "node_id": None,
                "op": _unbacked_op(m["op"], m["where"]), "user_file": m["file"],
                "user_line": int(m["line"]) if m["line"] else None, "user_function": m["fn"],
                "user_code": m["code"].strip() if m["code"] else None,
                "created_by": "dynamo" if m["file"] else None,
                "source": "text", "file": rec["file"], "lineno": rec["lineno"],
            }
        )
    return _frame(out, UNBACKED_SYMBOLS_SCHEMA)


def runtime_asserts(graph_code: str) -> list[str]:
    """The expressions of the runtime asserts in a graph's code (Dynamo's
    ``torch.ops.aten._assert_scalar.default(ge, "Runtime assertion failed for expression u0 >=
    0 on node 'ge'")``), in graph order, each once."""
    return list(dict.fromkeys(m["expr"] for m in _RUNTIME_ASSERT.finditer(graph_code or "")))


# --------------------------------------------------------------------- bundles


def facts_from_text(log: TextLog | pl.DataFrame) -> dict[str, pl.DataFrame]:
    """All fact tables from a text log."""
    return {
        "recompiles": recompiles_from_text(log),
        "graph_break_records": graph_breaks_from_text(log),
        "guards": guards_from_text(log),
        "annotations": annotations_from_text(log),
        "limit_hits": limit_hits_from_text(log),
    }


def facts_from_trace(
    events: pl.DataFrame, compiles: pl.DataFrame | None = None
) -> dict[str, pl.DataFrame]:
    """All fact tables from trace events (``annotations`` is empty: seq_nr is text-only)."""
    return {
        "recompiles": recompiles_from_trace(events, compiles),
        "graph_break_records": graph_breaks_from_trace(events),
        "guards": guards_from_trace(events),
        "annotations": pl.DataFrame(schema=ANNOTATIONS_SCHEMA),
        "limit_hits": limit_hits_from_trace(events, compiles),
    }
