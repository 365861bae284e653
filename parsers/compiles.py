"""`events` -> `compiles` (one row per compile id per process) and `spans` (compile phases).

Only the few records that describe a compile (dynamo_start, compilation_metrics and their
backward/runtime forms) are decoded per row; chromium events are decoded with polars'
vectorized JSON reader and B/E pairs are matched with window expressions, not a Python loop.
"""

from __future__ import annotations

import re

import orjson
import polars as pl

from parsers.code_location import call_site, whose
from parsers.coerce import (
    DamagedField,
    bool_of,
    float_of,
    int_of,
    json_object,
    stack_of,
    typed_frame,
)
from parsers.compile_ids import occurrence_at, occurrence_expr
from parsers.frameless import (
    RUNTIME_METRICS,
    attach_unnamed_metrics,
    called_from,
    frameless_ids,
    with_frameless_ids,
)

METRICS_KINDS = (
    "compilation_metrics",
    "bwd_compilation_metrics",
    "compilation_metrics_runtime",
    "bwd_compilation_metrics_runtime",
)
CACHE_ARTIFACTS = {
    "fx_graph_cache_hit": "fx_cache_hits",
    "fx_graph_cache_miss": "fx_cache_misses",
    "fx_graph_cache_bypass": "fx_cache_bypasses",
    "aotautograd_cache_hit": "aot_cache_hits",
    "aotautograd_cache_miss": "aot_cache_misses",
    "aotautograd_cache_bypass": "aot_cache_bypasses",
}
STATUSES = ("ok", "failed", "graph_break_restarts", "empty_graph", "no_metrics")

COMPILES_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String,
    "rank": pl.Int32,
    "pid": pl.Int32,
    "compile_id": pl.String,
    "occurrence": pl.Int32,
    "frame_id": pl.Int32,
    "frame_compile_id": pl.Int32,
    "compiled_autograd_id": pl.Int32,
    "compile_kind": pl.String,
    "function": pl.String,
    "filename": pl.String,
    "line": pl.Int32,
    "status": pl.String,
    "fail_type": pl.String,
    "fail_reason": pl.String,
    "fail_user_filename": pl.String,
    "fail_user_line": pl.Int32,
    "recompile_reason": pl.String,
    "restart_reasons": pl.List(pl.String),
    "attempts": pl.Int32,
    "graph_breaks": pl.Int32,
    "start": pl.Datetime("us"),
    "compile_time_s": pl.Float64,
    "dynamo_time_s": pl.Float64,
    "backend_compile_time_s": pl.Float64,
    "inductor_compile_time_s": pl.Float64,
    "code_gen_time_s": pl.Float64,
    "bwd_compile_time_s": pl.Float64,
    "bwd_pieces": pl.Int32,
    "bwd_piece_start_us": pl.List(pl.Float64),
    "bwd_piece_end_us": pl.List(pl.Float64),
    "total_time_s": pl.Float64,
    "guard_count": pl.Int64,
    "shape_env_guard_count": pl.Int64,
    "graph_op_count": pl.Int64,
    "graph_node_count": pl.Int64,
    "graph_input_count": pl.Int64,
    "cache_size": pl.Int64,
    "accumulated_cache_size": pl.Int64,
    "has_guarded_code": pl.Boolean,
    "suppress_errors": pl.Boolean,
    "automatic_dynamic_shapes": pl.Boolean,
    "assume_static_by_default": pl.Boolean,
    "capture_scalar_outputs": pl.Boolean,
    "capture_dynamic_output_shape_ops": pl.Boolean,
    "optimize_ddp": pl.Boolean,
    "testing_only_config": pl.String,
    "cudagraph_skip_reason": pl.String,
    "fx_cache_hits": pl.Int32,
    "fx_cache_misses": pl.Int32,
    "fx_cache_bypasses": pl.Int32,
    "aot_cache_hits": pl.Int32,
    "aot_cache_misses": pl.Int32,
    "aot_cache_bypasses": pl.Int32,
    "at_run_time": pl.Boolean,
    "parent_compile_id": pl.String,
    "parent_candidates": pl.List(pl.String),
    "graph_piece": pl.String,
    "user_stack": pl.List(pl.String),
    "call_filename": pl.String,
    "call_line": pl.Int32,
    "call_function": pl.String,
    "call_code": pl.String,
    "code_owner": pl.String,
    "code_package": pl.String,
    "metrics_lineno": pl.Int64,
    "lineno": pl.Int64,
}

SPANS_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String,
    "rank": pl.Int32,
    "compile_id": pl.String,
    "occurrence": pl.Int32,
    "name": pl.String,
    "cat": pl.String,
    "ph": pl.String,
    "start": pl.Datetime("us"),
    "start_us": pl.Float64,
    "duration_s": pl.Float64,
    "lineno": pl.Int64,
    "end_lineno": pl.Int64,
}



def _optimize_ddp(value: object) -> bool | None:
    """`torch._dynamo.config.optimize_ddp` as DDPOptimizer's split: true or "ddp_optimizer" split
    at the buckets, false or "no_optimization" one graph; the python_reducer modes (compiled
    autograd's reducer) are neither: null."""
    if type(value) is bool:
        return value
    return {"ddp_optimizer": True, "no_optimization": False}.get(value) if isinstance(value, str) else None

def _stack(frames: object, strings: dict[int, str]) -> list[str]:
    """A stack field as `path:line in name[: loc]` texts ([] when it is damaged: the parse
    counted it as a problem, parsers.coerce)."""
    try:
        parsed = stack_of(frames, strings)
    except DamagedField:
        return []
    out: list[str] = []
    for fr in parsed:
        s = f"{fr.filename or '?'}:{fr.line} in {fr.name}"
        if fr.loc:
            s += f": {fr.loc}"
        out.append(s)
    return out


# Records made while Dynamo traces a frame whose payload carries the whole Python stack
# (CapturedTraceback): the frames above torch/_dynamo/convert_frame.py are the compiled
# frame's callers.
_FULL_STACK_KINDS = ("create_symbol", "create_unbacked_symbol", "guard_added_fast", "guard_added")
_CONVERT_FRAME = "torch/_dynamo/convert_frame.py"


def _caller_stacks(with_id: pl.DataFrame, key: list[str], strings: dict[str, dict[int, str]]) -> dict[tuple, list[str]]:
    """Per compile, the callers of the compiled frame as the first record with a whole stack
    saw them (the frames before the first of torch/_dynamo/convert_frame.py's)."""
    first = (
        with_id.filter(pl.col("kind").is_in(_FULL_STACK_KINDS) & pl.col("metadata").str.contains('"stack"', literal=True))
        .group_by(*key)
        .agg(pl.col("metadata").sort_by("lineno").first())
    )
    out: dict[tuple, list[str]] = {}
    for file, cid, occ, meta_text in first.select(*key, "metadata").iter_rows():
        stack = _stack(json_object(meta_text).get("stack"), strings.get(file, {}))
        cut = next((i for i, s in enumerate(stack) if _CONVERT_FRAME in s.replace("\\", "/")), None)
        if cut:
            out[(file, cid, occ)] = stack[:cut]
    return out


def _with_callers(start: list[str], callers: list[str] | None) -> list[str]:
    """dynamo_start's stack, completed with the callers a whole stack of the same compile shows.
    torch 2.11's dynamo_start drops the compiled frame's two innermost callers (for
    `flex = torch.compile(flex_attention)` called in a module's forward: the forward's
    `o = flex(q, k, v)` line and eval_frame's compile_wrapper), so the user's line that entered
    the frame is missing from it. Used only when dynamo_start's callers are a prefix of the
    whole stack's, i.e. the same call chain; a compile without a whole stack of its own takes
    the callers of another compile entered through the same dynamo_start stack."""
    if not start or not callers or len(callers) <= len(start) - 1 or callers[: len(start) - 1] != start[:-1]:
        return start
    return [*callers, start[-1]]


# a `*_TESTING_ONLY` setting of a config JSON turned on: a string, true or a non-zero number
_TESTING_ONLY = re.compile(r'"([\w.]*_TESTING_ONLY)": ("(?:[^"\\]|\\.)*"|true|-?[1-9][\d.]*)')


def testing_only_settings(dynamo_config: object, inductor_config: object) -> str | None:
    """torch's test-only settings a compile's config turned on, as assignments joined by "; "
    (`torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'compile_error'`): torch's own
    fault injection (a relu written as a compile error, a runtime error or a wrong result),
    sleeps and switches meant for its tests. Read from the JSON text of compilation_metrics'
    `dynamo_config` / `inductor_config` without decoding it (most compiles have none set)."""
    out = []
    for module, cfg in (("torch._dynamo.config", dynamo_config), ("torch._inductor.config", inductor_config)):
        if isinstance(cfg, dict):
            cfg = orjson.dumps(cfg).decode()
        if not isinstance(cfg, str) or "TESTING_ONLY" not in cfg:
            continue
        for name, value in _TESTING_ONLY.findall(cfg):
            if value.startswith('"'):
                value = repr(orjson.loads(value))
            elif value == "true":
                value = "True"
            out.append(f"{module}.{name} = {value}")
    return "; ".join(out) or None


def _call_columns(stack: list[str] | None) -> dict[str, object]:
    """The user's line that entered the compiled frame (parsers.code_location.call_site)."""
    site = call_site(stack)
    if site is None:
        return {"call_filename": None, "call_line": None, "call_function": None, "call_code": None}
    return {"call_filename": site[0], "call_line": site[1], "call_function": site[2], "call_code": site[3]}


def build_compiles(events: pl.DataFrame, strings: pl.DataFrame, chromium: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per (file, compile_id): what the compile was, how it ended, what it cost.
    `chromium`: the chromium events a lazy parse decoded (see build_spans), for the phases of
    a compile without a Dynamo frame."""
    fl = frameless_ids(events)
    kinds = dict(fl.select("_fl_id", "_fl_kind").unique().iter_rows())
    phase_s = _frameless_phases(events, chromium) if kinds else {}
    with_id = with_frameless_ids(attach_unnamed_metrics(events), fl).filter(pl.col("compile_id").is_not_null())
    if with_id.height == 0:
        return pl.DataFrame(schema=COMPILES_SCHEMA)
    # one row per compile: a compile id seen again after its compilation_metrics (after
    # torch._dynamo.reset()) is another compile (parsers.compile_ids.occurrence_expr)
    with_id = with_id.with_columns(occurrence_expr().alias("occurrence"))
    key = ["file", "compile_id", "occurrence"]
    base = with_id.group_by(*key, maintain_order=True).agg(
        pl.col("rank").drop_nulls().first(),
        pl.col("pid").drop_nulls().first(),
        pl.col("frame_id").drop_nulls().first(),
        pl.col("frame_compile_id").drop_nulls().first(),
        pl.col("compiled_autograd_id").drop_nulls().first(),
        (pl.col("attempt").max().fill_null(0) + 1).alias("attempts"),
        pl.col("lineno").min(),
        ((pl.col("kind") == "artifact") & (pl.col("name") == "dynamo_graph_break_reason"))
        .sum()
        .alias("graph_breaks"),
        *[
            ((pl.col("kind") == "artifact") & (pl.col("name") == art)).sum().alias(col)
            for art, col in CACHE_ARTIFACTS.items()
        ],
    )
    # the few per-compile records, decoded in Python
    recs = with_id.filter(
        pl.col("kind").is_in(("dynamo_start", *METRICS_KINDS))
        | ((pl.col("kind") == "artifact") & (pl.col("name") == "recompile_reasons"))
    ).select("file", "compile_id", "occurrence", "lineno", "kind", "metadata", "payload")
    str_tables: dict[str, dict[int, str]] = {}
    for f, i, s in strings.iter_rows():
        str_tables.setdefault(f, {})[i] = s
    info: dict[tuple[str, str, int], dict] = {}
    callers = _caller_stacks(with_id, key, str_tables)
    for file, cid, occ, lineno, kind, meta_text, payload in recs.iter_rows():
        row = info.setdefault((file, cid, occ), {})
        meta = json_object(meta_text)
        if kind == "dynamo_start":
            stack = _stack(meta.get("stack"), str_tables.get(file, {}))
            row["user_stack"] = stack
            row["callers"] = callers.get((file, cid, occ))
            try:
                frames = stack_of(meta.get("stack"), str_tables.get(file, {}))
            except DamagedField:
                frames = []
            if frames:
                row.setdefault("start_function", frames[-1].name)
                row.setdefault("start_filename", frames[-1].filename)
                row.setdefault("start_line", frames[-1].line)
        elif kind == "artifact":
            row["recompile_reasons_text"] = payload
        elif kind == "compilation_metrics" or (kind in RUNTIME_METRICS and cid in kinds):
            # a compile without a Dynamo frame at run time ends with its run-time metrics
            row["metrics"] = meta
            row["metrics_lineno"] = lineno
            row["at_run_time"] = kind in RUNTIME_METRICS
        elif kind == "bwd_compilation_metrics":
            # one per backward piece: DDPOptimizer compiles each gradient bucket's backward
            # on its own and torch writes one record per piece under the same compile id
            row.setdefault("bwd", []).append(meta)
    for at, stack in _frameless_stacks(with_id, set(kinds), str_tables).items():
        r = info.setdefault(at, {})
        came = called_from(stack)
        r["user_stack"] = _stack_texts(stack)
        r["called_from"] = came
    # a compile with no record of the whole stack (no symbol or guard made while tracing it)
    # takes the callers seen by another compile entered through the same dynamo_start stack
    seen_callers: dict[tuple, list[str]] = {}
    for (file, _, _), r in info.items():
        if r.get("callers") and r.get("user_stack"):
            seen_callers.setdefault((file, tuple(r["user_stack"])), r["callers"])
    for (file, _, _), r in info.items():
        if r.get("user_stack") and "called_from" not in r:
            found = r.get("callers") or seen_callers.get((file, tuple(r["user_stack"])))
            r["user_stack"] = _with_callers(r["user_stack"], found)
    rows = []
    for (file, cid, occ), r in info.items():
        m = r.get("metrics", {})
        pieces = r.get("bwd", [])
        entire = float_of(m.get("entire_frame_compile_time_s"))
        kind = kinds.get(cid, "dynamo")
        if entire is None and kind != "dynamo" and float_of(m.get("end_time_us")) is not None and float_of(m.get("start_time_us")) is not None:
            # a frameless compile's metrics time it by its span only (compile_fx_aot)
            entire = ((float_of(m.get("end_time_us")) or 0.0) - (float_of(m.get("start_time_us")) or 0.0)) / 1e6
        backend = float_of(m.get("backend_compile_time_s"))
        piece_s = [_backward_piece_s(b) for b in pieces]
        bwd_t = sum(s for s in piece_s if s is not None) if any(s is not None for s in piece_s) else None
        restarts = m.get("restart_reasons") or []
        if not isinstance(restarts, list):
            restarts = [restarts]
        cfg = m.get("dynamo_config")
        if isinstance(cfg, str):
            cfg = json_object(cfg)
        cfg = cfg if isinstance(cfg, dict) else {}
        start_us = float_of(m.get("start_time_us"))
        if start_us is None and float_of(m.get("start_time")) is not None:
            start_us = (float_of(m.get("start_time")) or 0.0) * 1e6
        if kind != "dynamo":
            # no Dynamo: the whole compile is the backend (AOTAutograd + Inductor); Inductor
            # and codegen (with the C++ build) from its spans
            backend = entire
            ph = phase_s.get((file, cid), {})
            m = {**m, "inductor_compile_time_s": ph.get("inductor_compile"), "code_gen_time_s": ph.get("GraphLowering.compile_to_fn")}
        rows.append(
            {
                "file": file,
                "compile_id": cid,
                "occurrence": occ,
                "compile_kind": kind,
                "function": m.get("co_name") or r.get("start_function"),
                "filename": m.get("co_filename") or r.get("start_filename"),
                "line": int_of(m.get("co_firstlineno")) or r.get("start_line"),
                "has_metrics": "metrics" in r,
                "fail_type": m.get("fail_type"),
                "fail_reason": m.get("fail_reason"),
                "fail_user_filename": m.get("fail_user_frame_filename"),
                "fail_user_line": int_of(m.get("fail_user_frame_lineno")),
                "recompile_reason": m.get("recompile_reason") or r.get("recompile_reasons_text"),
                "restart_reasons": [str(x) for x in restarts],
                "start_us": start_us,
                "compile_time_s": entire,
                "dynamo_time_s": None if kind != "dynamo" else (entire - backend) if entire is not None and backend is not None else entire,
                "backend_compile_time_s": backend,
                "inductor_compile_time_s": float_of(m.get("inductor_compile_time_s")),
                "code_gen_time_s": float_of(m.get("code_gen_time_s")),
                "bwd_compile_time_s": bwd_t,
                "bwd_pieces": len(pieces),
                "bwd_piece_start_us": [float_of(b.get("start_time_us")) for b in pieces],
                "bwd_piece_end_us": [float_of(b.get("end_time_us")) for b in pieces],
                "guard_count": int_of(m.get("guard_count")),
                "shape_env_guard_count": int_of(m.get("shape_env_guard_count")),
                "graph_op_count": int_of(m.get("graph_op_count")),
                "graph_node_count": int_of(m.get("graph_node_count")),
                "graph_input_count": int_of(m.get("graph_input_count")),
                "cache_size": int_of(m.get("cache_size")),
                "accumulated_cache_size": int_of(m.get("accumulated_cache_size")),
                "has_guarded_code": m.get("has_guarded_code") if isinstance(m.get("has_guarded_code"), bool) else None,
                # torch._dynamo.config.suppress_errors: a failed frame runs eagerly (WON'T CONVERT)
                "suppress_errors": bool_of(m.get("config_suppress_errors")),
                # torch.compile(dynamic=False) turns automatic dynamic shapes off
                "automatic_dynamic_shapes": bool_of(cfg.get("automatic_dynamic_shapes")),
                "assume_static_by_default": bool_of(cfg.get("assume_static_by_default")),
                # the settings torch's graph-break hints name as the fix of .item() / nonzero
                "capture_scalar_outputs": bool_of(cfg.get("capture_scalar_outputs")),
                "capture_dynamic_output_shape_ops": bool_of(cfg.get("capture_dynamic_output_shape_ops")),
                # DDPOptimizer: split a DDP module's graph at its gradient buckets (off: one graph)
                "optimize_ddp": _optimize_ddp(cfg.get("optimize_ddp")),
                # torch's test-only settings the run turned on (fault injection: a failure asked for)
                "testing_only_config": testing_only_settings(m.get("dynamo_config"), m.get("inductor_config")),
                # set at compile time when CUDA graphs were refused (graph partition off)
                "cudagraph_skip_reason": m.get("cudagraph_skip_reason") if isinstance(m.get("cudagraph_skip_reason"), str) else None,
                "user_stack": r.get("user_stack", []),
                **(_call_columns(r.get("user_stack")) if "called_from" not in r else _frameless_call_columns(r["called_from"])),
                "at_run_time": r.get("at_run_time", False),
                "metrics_lineno": r.get("metrics_lineno"),
            }
        )
    detail_schema = {
        "file": pl.String,
        "compile_id": pl.String,
        "occurrence": pl.Int32,
        "compile_kind": pl.String,
        "function": pl.String,
        "filename": pl.String,
        "line": pl.Int32,
        "has_metrics": pl.Boolean,
        "fail_type": pl.String,
        "fail_reason": pl.String,
        "fail_user_filename": pl.String,
        "fail_user_line": pl.Int32,
        "recompile_reason": pl.String,
        "restart_reasons": pl.List(pl.String),
        "start_us": pl.Float64,
        **{
            k: COMPILES_SCHEMA[k]
            for k in (
                "compile_time_s",
                "dynamo_time_s",
                "backend_compile_time_s",
                "inductor_compile_time_s",
                "code_gen_time_s",
                "bwd_compile_time_s",
                "bwd_pieces",
                "bwd_piece_start_us",
                "bwd_piece_end_us",
                "guard_count",
                "shape_env_guard_count",
                "graph_op_count",
                "graph_node_count",
                "graph_input_count",
                "cache_size",
                "accumulated_cache_size",
                "has_guarded_code",
                "suppress_errors",
                "automatic_dynamic_shapes",
                "assume_static_by_default",
                "capture_scalar_outputs",
                "capture_dynamic_output_shape_ops",
                "optimize_ddp",
                "testing_only_config",
                "cudagraph_skip_reason",
                "user_stack",
                "call_filename",
                "call_line",
                "call_function",
                "call_code",
                "at_run_time",
                "metrics_lineno",
            )
        },
        "graph_piece": pl.String,
        "_cf_function": pl.String,
        "_cf_filename": pl.String,
        "_cf_line": pl.Int32,
    }
    detail = typed_frame(rows, detail_schema)  # (a field of an odd type is null, or text)
    out = base.join(detail, on=key, how="left")
    # A compile whose metrics lack the code object (the one that hit the recompile limit
    # has co_name null): take it from another compile of the same frame in the same process.
    frame_fill = (
        out.filter(pl.col("function").is_not_null() & pl.col("frame_id").is_not_null())
        .group_by("file", "frame_id")
        .agg(
            pl.col("function").first().alias("_fn"),
            pl.col("filename").first().alias("_fname"),
            pl.col("line").first().alias("_line"),
        )
    )
    out = (
        out.join(frame_fill, on=["file", "frame_id"], how="left")
        .with_columns(
            pl.coalesce("function", "_fn").alias("function"),
            pl.coalesce("filename", "_fname").alias("filename"),
            pl.coalesce("line", "_line").alias("line"),
        )
        .drop("_fn", "_fname", "_line")
    )
    status = (
        pl.when(~pl.col("has_metrics").fill_null(False))
        .then(pl.lit("no_metrics"))
        .when(pl.col("fail_type").is_not_null())
        .then(pl.lit("failed"))
        .when((pl.col("restart_reasons").list.len().fill_null(0) > 0) | (pl.col("attempts") > 1))
        .then(pl.lit("graph_break_restarts"))
        .when((pl.col("graph_op_count").fill_null(1) == 0) | (pl.col("has_guarded_code") == False))  # noqa: E712
        .then(pl.lit("empty_graph"))
        .otherwise(pl.lit("ok"))
    )
    out = out.with_columns(
        status.alias("status"),
        # a time beyond what a datetime holds (ts 1e30, NaN) has no start
        pl.from_epoch(pl.col("start_us").cast(pl.Int64, strict=False), time_unit="us").alias("start"),
        (pl.col("compile_time_s").fill_null(0.0) + pl.col("bwd_compile_time_s").fill_null(0.0)).alias(
            "total_time_s"
        ),
        pl.col("restart_reasons").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        pl.col("user_stack").fill_null(pl.lit([], dtype=pl.List(pl.String))),
    )
    out = _with_parents(out)
    owners = {p: whose(p) for p in out["filename"].drop_nulls().unique().to_list()}
    out = out.with_columns(
        pl.col("filename").replace_strict({p: c.owner for p, c in owners.items()}, default=None, return_dtype=pl.String).alias("code_owner"),
        pl.col("filename").replace_strict({p: c.package for p, c in owners.items()}, default=None, return_dtype=pl.String).alias("code_package"),
    )
    return out.select([pl.col(c).cast(t) for c, t in COMPILES_SCHEMA.items()]).sort(
        "rank", "file", "frame_id", "frame_compile_id", "compiled_autograd_id", "occurrence", nulls_last=True
    )


def _backward_piece_s(meta: dict) -> float | None:
    """One backward piece's seconds from its `bwd_compilation_metrics`: `end_time_us -
    start_time_us`, the window torch timed it in (its metrics context, around the whole lazy
    backward compile: the `entire_backward_compile` span, `duration_us`, and the record's own
    bookkeeping, well under a millisecond), the figure the compile account draws each piece
    with; a torch that writes no such times: `duration_us`, else `inductor_compile_time_s`
    (Inductor's part)."""
    start, end = float_of(meta.get("start_time_us")), float_of(meta.get("end_time_us"))
    if start is not None and end is not None and end >= start:
        return (end - start) / 1e6
    us = float_of(meta.get("duration_us"))
    if us is not None:
        return us / 1e6
    return float_of(meta.get("inductor_compile_time_s"))


def _stack_texts(frames: list) -> list[str]:
    out = []
    for fr in frames:
        s = f"{fr.filename or '?'}:{fr.line} in {fr.name}"
        out.append(s + f": {fr.loc}" if fr.loc else s)
    return out


def _frameless_stacks(with_id: pl.DataFrame, ids: set[str], strings: dict[str, dict[int, str]]) -> dict[tuple, list]:
    """(file, compile id, occurrence) -> the Python stack torch wrote on a record of each
    compile without a Dynamo frame (the envelope's `stack`): the first pre-grad graph's (it is
    written inside Inductor), else the first record's that has one."""
    if not ids or "extra" not in with_id.columns:
        return {}
    cands = (
        with_id.filter(pl.col("compile_id").is_in(list(ids)) & pl.col("extra").str.contains('"stack"', literal=True))
        .with_columns(((pl.col("kind") == "artifact") & (pl.col("name") == "before_pre_grad_graph")).alias("_pre"))
        .sort("file", "compile_id", "occurrence", "_pre", "lineno", descending=[False, False, False, True, False])
        .group_by("file", "compile_id", "occurrence", maintain_order=True)
        .agg(pl.col("extra").first())
    )
    out: dict[tuple, list] = {}
    for file, cid, occ, extra in cands.iter_rows():
        try:
            out[(file, cid, occ)] = stack_of(json_object(extra).get("stack"), strings.get(file, {}))
        except DamagedField:
            continue
    return out


def _frameless_call_columns(came) -> dict[str, object]:
    """A frameless compile's call columns: the line that called Inductor, and the code object
    whose compiled code was running (resolved to its compile by `_with_parents`)."""
    return {
        "call_filename": came.filename, "call_line": came.line, "call_function": came.function, "call_code": came.code,
        "graph_piece": came.graph_piece, "_cf_function": came.compiled_function, "_cf_filename": came.compiled_filename,
        "_cf_line": came.compiled_line,
    }


def _with_parents(out: pl.DataFrame) -> pl.DataFrame:
    """`parent_candidates` and `parent_compile_id` of each compile without a Dynamo frame whose
    record stack shows Dynamo's compiled code running (parsers.frameless.called_from: the
    function, file and line of that frame). The candidates: the compiles of that code object in
    the same file (process) that ended before this one began, not failed (a failed compile
    made no code); the code object is the function and file of the frame, at the frame's line
    (its first line: Dynamo's code reports it) or else the one of that name whose first line is
    the nearest before the frame's. `parent_compile_id` is the candidate when there is exactly
    one; with several, which of them ran is not in the log, and none is picked."""
    found: dict[tuple, list[str]] = {}
    todo = out.filter(pl.col("_cf_function").is_not_null())
    if todo.height:
        ended = pl.coalesce("metrics_lineno", "lineno")
        dyn = out.filter((pl.col("compile_kind") == "dynamo") & ~pl.col("status").is_in(["failed", "no_metrics"])).sort("lineno")
        for r in todo.iter_rows(named=True):
            same = dyn.filter(
                (pl.col("file") == r["file"]) & (pl.col("function") == r["_cf_function"])
                & (pl.col("filename") == r["_cf_filename"]) & (ended < r["lineno"])
            )
            line = r["_cf_line"]
            pick = same.filter(pl.col("line") == line)
            if not pick.height and line is not None:
                before = same.filter(pl.col("line") <= line)
                pick = before.filter(pl.col("line") == before["line"].max()) if before.height else before
            found[(r["file"], r["compile_id"], r["occurrence"])] = pick["compile_id"].unique(maintain_order=True).to_list()
    keys = pl.DataFrame(
        [{"file": f, "compile_id": c, "occurrence": o, "parent_candidates": ids, "parent_compile_id": ids[0] if len(ids) == 1 else None}
         for (f, c, o), ids in found.items()],
        schema={"file": pl.String, "compile_id": pl.String, "occurrence": pl.Int32, "parent_candidates": pl.List(pl.String),
                "parent_compile_id": pl.String},
    )
    out = out.join(keys, on=["file", "compile_id", "occurrence"], how="left")
    return out.with_columns(pl.col("parent_candidates").fill_null(pl.lit([], dtype=pl.List(pl.String)))).drop(
        "_cf_function", "_cf_filename", "_cf_line"
    )


_FRAMELESS_PHASES = ("inductor_compile", "GraphLowering.compile_to_fn")


def _frameless_phases(events: pl.DataFrame, chromium: pl.DataFrame | None) -> dict[tuple[str, str], dict[str, float]]:
    """(file, frameless compile id) -> seconds of its `inductor_compile` and
    `GraphLowering.compile_to_fn` spans (the metrics of a compile without a Dynamo frame hold
    no phase times)."""
    null_id = pl.col("compile_id").is_null()
    spans = build_spans(events.filter(null_id), None if chromium is None else chromium.filter(null_id))
    got = (
        spans.filter(pl.col("name").is_in(_FRAMELESS_PHASES) & pl.col("compile_id").is_not_null())
        .group_by("file", "compile_id", "name")
        .agg(pl.col("duration_s").sum())
    )
    out: dict[tuple[str, str], dict[str, float]] = {}
    for file, cid, name, secs in got.iter_rows():
        out.setdefault((file, cid), {})[name] = secs
    return out


def _decode_chromium(events: pl.DataFrame) -> pl.DataFrame:
    """file, rank, lineno, compile_id and the span fields of every chromium event payload."""
    # payload_ok is null when the md5 has not been checked: only a payload known to be
    # damaged is left out
    ch = events.filter(
        (pl.col("kind") == "chromium_event") & pl.col("payload").is_not_null() & pl.col("payload_ok").fill_null(True)
    )
    try:
        dec = ch.select(
            "file", "rank", "lineno", "compile_id", pl.col("payload").str.json_decode(_CHROMIUM).alias("j")
        )
    except pl.exceptions.PolarsError:
        decoded = []
        for p in ch["payload"].to_list():
            try:
                decoded.append(orjson.loads(p))
            except orjson.JSONDecodeError:
                decoded.append(None)
        dec = ch.select("file", "rank", "lineno", "compile_id").with_columns(
            pl.Series("j", decoded, dtype=_CHROMIUM, strict=False)
        )
    j = pl.col("j").struct
    return dec.select(
        "file",
        "rank",
        "lineno",
        "compile_id",
        j.field("name").alias("name"),
        j.field("cat").alias("cat"),
        j.field("ph").alias("ph"),
        j.field("ts").alias("ts"),
        j.field("dur").alias("dur"),
        j.field("args").struct.field("compile_id").alias("args_compile_id"),
    )


_CHROMIUM = pl.Struct(
    {
        "name": pl.String,
        "ts": pl.Float64,
        "ph": pl.String,
        "cat": pl.String,
        "dur": pl.Float64,
        "args": pl.Struct({"compile_id": pl.String}),
    }
)


def build_spans(events: pl.DataFrame, chromium: pl.DataFrame | None = None) -> pl.DataFrame:
    """Compile phases from chromium events: B/E pairs matched per name and nesting depth,
    X (complete) events as they are; instant events are left out. `occurrence`: which
    compile of its id the span belongs to (parsers.compile_ids.occurrence_at, at its end). `chromium`: the events
    already decoded by a lazy parse (parsers.torch_trace.CHROMIUM_SCHEMA); else the payloads of
    `events` are decoded."""
    dec = _decode_chromium(events) if chromium is None else chromium
    # the spans of a compile without a Dynamo frame (parsers.frameless)
    dec = with_frameless_ids(dec, frameless_ids(events))
    if dec.height == 0:
        return pl.DataFrame(schema=SPANS_SCHEMA)
    ev = dec.select(
        "file",
        "rank",
        "lineno",
        pl.coalesce(pl.col("args_compile_id").replace("None", None), pl.col("compile_id")).alias("compile_id"),
        "name",
        "cat",
        "ph",
        "ts",
        "dur",
    ).filter(pl.col("name").is_not_null() & pl.col("ts").is_not_null())
    key = ["file", "name"]
    be = ev.filter(pl.col("ph").is_in(["B", "E"])).with_columns(
        pl.when(pl.col("ph") == "B").then(1).otherwise(-1).alias("_d")
    )
    be = be.with_columns(pl.col("_d").cum_sum().over(key, order_by="lineno").alias("_after")).with_columns(
        pl.when(pl.col("ph") == "B").then(pl.col("_after")).otherwise(pl.col("_after") + 1).alias("_depth")
    )
    be = be.with_columns(pl.int_range(pl.len()).over([*key, "_depth", "ph"], order_by="lineno").alias("_k"))
    b = be.filter(pl.col("ph") == "B")
    e = be.filter(pl.col("ph") == "E").select(
        *key, "_depth", "_k", pl.col("ts").alias("_end"), pl.col("lineno").alias("end_lineno")
    )
    pairs = b.join(e, on=[*key, "_depth", "_k"], how="left").select(
        "file",
        "rank",
        "compile_id",
        "name",
        "cat",
        pl.lit("B").alias("ph"),
        pl.col("ts").alias("start_us"),
        ((pl.col("_end") - pl.col("ts")) / 1e6).alias("duration_s"),
        "lineno",
        "end_lineno",
    )
    complete = ev.filter(pl.col("ph") == "X").select(
        "file",
        "rank",
        "compile_id",
        "name",
        "cat",
        "ph",
        pl.col("ts").alias("start_us"),
        (pl.col("dur") / 1e6).alias("duration_s"),
        "lineno",
        pl.col("lineno").alias("end_lineno"),
    )
    out = pl.concat([pairs, complete], how="vertical_relaxed").with_columns(
        # a time beyond what a datetime holds (ts 1e30, NaN) has no start
        pl.from_epoch(pl.col("start_us").cast(pl.Int64, strict=False), time_unit="us").alias("start")
    )
    # which compile of that id (after torch._dynamo.reset() two compiles share it): the one
    # the span ends in (its B is logged just before the compile's dynamo_start); a span never
    # ended is open at the end of its log: the id's last compile there
    at = out.select(
        "file", "compile_id",
        pl.coalesce("end_lineno", pl.when(pl.col("ph") == "B").then(pl.lit(2**40)), "lineno").alias("at"),
    )
    out = out.with_columns(occurrence_at(at, events, at="at").alias("occurrence"))
    return out.select([pl.col(c).cast(t) for c, t in SPANS_SCHEMA.items()]).sort("file", "lineno")
