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

A frame is identified by (rank, process, epoch, frame id): the compile that hit the recompile
limit has no function name in its metrics, so it is attributed to its frame through the frame
id. The epoch (parsers.compile_ids.epoch_expr) counts `torch._dynamo.reset()` calls: reset
restarts frame ids, so frame 0 after a reset is another code object than frame 0 before it
(a benchmark harness or a test suite resets between models: their compiles must not add up
to one function's recompiles). Recompiles read from a text log attach to the trace's frame of
the same rank, epoch and frame id.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from parsers.code_location import brief
from parsers.compile_ids import (
    TEXT_START,
    compile_number,
    epoch_expr,
    frame_of,
    sort_key,
    text_occurrence_expr,
)
from parsers.compile_ids import label as id_label
from parsers.facts import guards_from_text, guards_from_trace, user_name
from parsers.sources import prefer_trace
from parsers.torch_trace import InputChanged, hydrate
from traceview.analyze.code_objects import describe
from traceview.analyze.findings import same_text
from traceview.analyze.per_trace import once
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
    "recompiles",
    "secondary_guards",
    "expected",
    "compile_id",
    "file",
    "lineno",
    "epoch",
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
    "signature",
    "training",
    "module_int",
    "range",
    "backend",
    "resume_value",
    "optimizer_lr",
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


_GRAD_FLAG = {"0": "False", "1": "True"}  # torch prints `expected requires_grad=0`


def _seen(values: list[str], n: int = 6) -> str:
    if not values:
        return ""
    more = ", …" if len(values) > n else ""
    return f" (seen: {', '.join(values[:n])}{more})"


@dataclass(frozen=True)
class Why:
    """What a cause's words are made of: the guard's kind, its source as the user knows it,
    the dimension, the values seen, the guard's text; for the fix: whether the code forces
    dynamic=False (None: the logs do not say), how many recompiles, whether it compiles with
    dynamic=True, whether this many recompiles is by design (_is_expected)."""

    kind: str
    src: str
    dim: Any
    values: list[str]
    guard: str
    forced_static: bool | None = None
    count: int = 1
    dynamic_true: bool = False
    expected: bool = False

    @property
    def compiled_for(self) -> str:
        v = self.values
        return f" (compiled for {', '.join(v[:6])}{', …' if len(v) > 6 else ''})" if v else ""

    @property
    def seen8(self) -> str:
        v = self.values
        return f" ({', '.join(v[:8])}{', …' if len(v) > 8 else ''})" if v else ""

    @property
    def mark(self) -> str:
        return f"torch._dynamo.mark_dynamic({self.src}, {self.dim})"


def _number_tail(w: Why, what: str) -> str:
    return {
        True: f"dynamic=False specializes every {what}, so each new value compiles again (or drop dynamic=False)",
        False: f"this {what} stayed specialized across several recompiles (TORCH_LOGS=dynamic shows why)",
        None: (
            "the text log does not say whether the code compiles with dynamic=False: if so, every "
            "new value compiles again; with the default dynamic=None one recompile is expected "
            "(the number is symbolic after it)"
        ),
    }[w.forced_static]


def _size_fix(w: Why) -> str:
    if w.forced_static:
        return (
            f"the code forces dynamic=False (torch.compile(..., dynamic=False)), so every new "
            f"{'size' if w.kind == 'size' else 'stride'} compiles again: call {w.mark} on the input "
            f"before the call (works with dynamic=False), or drop dynamic=False (the default "
            f"dynamic=None makes the dimension dynamic after one recompile)"
        )
    if w.kind == "stride":
        return f"pass contiguous inputs ({w.src}.contiguous()) or call {w.mark} before the call"
    if w.forced_static is None and w.count <= 1:
        return (
            f"the text log does not say whether the code compiles with dynamic=False: if so, "
            f"every new size compiles again ({w.mark} on the input, or drop dynamic=False); with "
            f"the default dynamic=None this one recompile is automatic dynamic shapes at work "
            f"(expected; TORCH_LOGS=dynamic would show it)"
        )
    if w.forced_static is None:
        return (
            f"call {w.mark} on the input before the call; if you compile with dynamic=False, "
            f"every new size compiles again (drop it: the default dynamic=None makes the "
            f"dimension dynamic after one recompile)"
        )
    if w.count <= 1 or w.expected:
        once = "once" if w.count <= 1 else "once per compiled variant (requires_grad, flag or mode)"
        return (
            f"nothing to fix: automatic dynamic shapes recompiled it {once} and made the dimension "
            f"dynamic; {w.mark} on the input before the first call avoids even that recompile"
        )
    if w.dynamic_true:
        return (
            f"the function already compiles with dynamic=True, yet dimension {w.dim} was "
            f"specialized: TORCH_LOGS=dynamic shows the guard that specializes it"
        )
    return (
        f"call {w.mark} on the input before the call, or compile with dynamic=True; if it "
        f"still recompiles, TORCH_LOGS=dynamic shows the guard that specializes it"
    )


def _number_fix(w: Why, what: str, fix: str) -> str:
    if w.forced_static is False and w.count <= 1:
        return (
            f"nothing to fix: automatic dynamic made {w.src} symbolic after this one recompile; a "
            f"0-d tensor argument avoids even that"
        )
    return f"{fix}; {_number_tail(w, what)}"


def _int_text(w: Why) -> str:
    what = f"the length of {w.src}" if w.guard.lstrip().startswith("len(") else f"the Python int {w.src}"
    return f"{what} changes between calls{w.compiled_for}"


def _signature_text(w: Why) -> str:
    was = f" (compiled for {', '.join(w.values)}; each recompile saw another length)" if w.values else ""
    return (
        f"call-signature change: len({w.src}) differs between calls{was}: a different set of keyword "
        f"arguments (**kwargs), or a container of another length"
    )


def _requires_grad_text(w: Why) -> str:
    was = sorted({_GRAD_FLAG.get(v, v) for v in w.values})
    if len(was) == 1:
        return f"{w.src} comes both with and without requires_grad (the cache entry was compiled for requires_grad={was[0]})"
    return f"{w.src} comes both with and without requires_grad (one cache entry per value)"


def _requires_grad_fix(w: Why) -> str:
    if w.expected:
        return (
            f"nothing to fix: torch keeps one compile per requires_grad value of {w.src} by design (e.g. the first "
            f"block's input is data without grad, the later blocks' inputs are activations that require grad); "
            f"never detach an activation to avoid it: that cuts its gradient"
        )
    return (
        f"where {w.src} is a tensor your code creates, set its requires_grad once (not per call); if it is an "
        f"activation, its requires_grad follows the parameters and this is one variant per value, never "
        f"detach it (that cuts its gradient)"
    )


def _training_text(w: Why) -> str:
    owner = _SUBMODULE.sub(r".\1", w.src.removesuffix(".training"))
    return f"the module's training flag ({owner}.training) changes between calls: model.train() / model.eval()"


def _value_fix(w: Why) -> str:
    many = f" ({len(w.values)} here)" if w.values else ""
    return (
        f"one compile per distinct value of {w.src}{many} is how Dynamo works: expected for a small "
        f"fixed set; if the set grows, choose outside the compiled function (one compiled "
        f"function per value) instead of passing it in"
    )


@dataclass(frozen=True)
class Cause:
    """One kind of failed guard: what it says changed (`text`) and the fix people apply for it
    today, torch 2.x (`fix`), each a function of the `Why`."""

    text: Callable[[Why], str]
    fix: Callable[[Why], str]


# Every kind of failed guard (refine_kind), in one table: its words and its fix.
CAUSES: dict[str, Cause] = {
    "size": Cause(lambda w: f"dimension {w.dim} of {w.src} varies{_seen(w.values)}", _size_fix),
    "stride": Cause(lambda w: f"stride {w.dim} of {w.src} varies{_seen(w.values)}", _size_fix),
    "value:float": Cause(
        lambda w: f"the Python float {w.src} changes between calls{w.compiled_for}",
        lambda w: _number_fix(w, "float", f"pass {w.src} as a tensor (torch.tensor({w.src}), a 0-d tensor the "
                                          "compiled code reads) instead of a Python float"),
    ),
    "value:int": Cause(
        _int_text, lambda w: _number_fix(w, "int", f"pass {w.src} as a tensor if it changes often, or keep it constant"),
    ),
    "value:bool": Cause(
        lambda w: f"the bool flag {w.src} changes between calls{w.compiled_for}",
        lambda w: (
            "one compile per flag value is expected (two for a bool); if it keeps recompiling, "
            "hoist the branch out of the compiled function (compile one function per value) or "
            "make the flag a tensor and use torch.where / torch.cond"
        ),
    ),
    "signature": Cause(_signature_text, lambda w: (
        "one compile per call signature is expected for a few fixed signatures; if they keep "
        "changing, call the function with the same keyword arguments every time (pass None or "
        "the defaults explicitly)"
    )),
    "training": Cause(
        _training_text,
        lambda w: "nothing to fix: one compile per mode (train and eval) is expected; later switches are cache hits",
    ),
    "module_int": Cause(
        lambda w: (
            f"the int attribute {w.src} of an nn.Module takes a new value{w.seen8}: Dynamo specializes int "
            f"attributes of nn.Modules even under automatic dynamic shapes, so one code object "
            f"(forward) compiles once per module instance"
        ),
        lambda w: (
            "compile the parent once (torch.compile(model) instead of one torch.compile per layer), "
            "or set torch._dynamo.config.allow_unspec_int_on_nn_module = True (the int becomes "
            "symbolic), or raise torch._dynamo.config.recompile_limit to at least the number of "
            "module instances"
        ),
    ),
    "optimizer_lr": Cause(
        lambda w: f"the learning rate {w.src} (a Python float, changed by the LR scheduler) is specialized{w.seen8}",
        lambda w: (
            "create the optimizer with a tensor learning rate (lr=torch.tensor(1e-3), with "
            "capturable=True for foreach/fused) so the scheduler's new values do not recompile "
            "the step"
        ),
    ),
    "range": Cause(
        lambda w: f"a branch on dimension {w.dim} of {w.src} (range guard {w.values[0] if w.values else ''}) took the other side",
        lambda w: (
            "one compile per branch of a condition on a size is expected; if one graph is wanted, "
            "use torch.cond for the branch, or torch._dynamo.decorators.mark_unbacked(tensor, dim) "
            "so no range guard is installed"
        ),
    ),
    "backend": Cause(
        lambda w: "the function was called through another torch.compile wrapper with a different backend (BACKEND_MATCH)",
        lambda w: (
            "expected when one function really is compiled with two backends; otherwise reuse one "
            "torch.compile wrapper (or functools.partial the backend, as the message says)"
        ),
    ),
    "resume_value": Cause(
        lambda w: f"a Python value carried across the graph break ({w.src}, e.g. the result of .item()) changed{w.seen8}",
        lambda w: (
            "the graph break passes this value to the rest of the function as a Python number: "
            "fix the break (keep the value a tensor, or torch._dynamo.config.capture_scalar_outputs "
            "= True for .item()); one recompile, then it is symbolic"
        ),
    ),
    "value": Cause(lambda w: f"the Python value {w.src} changes between calls{w.seen8}", _value_fix),
    "type": Cause(
        lambda w: f"the type of {w.src} changes between calls{_seen(w.values)}",
        lambda w: f"pass {w.src} with one consistent type every call (always a tensor, never sometimes a list, a number or None)",
    ),
    "id": Cause(
        lambda w: f"{w.src} is a different object on each call",
        lambda w: (
            f"a new object is passed or read from a global on each call and its identity is "
            f"guarded: create {w.src} once (modules, optimizers, functions), and pass changing "
            f"state as arguments instead of globals"
        ),
    ),
    "global_state": Cause(
        lambda w: f"global torch state changed between calls ({w.src})" if w.src else "global torch state changed between calls",
        lambda w: (
            "global torch state differs between calls (grad mode, autocast, default dtype, "
            "deterministic algorithms, torch function mode): keep it the same around the "
            "compiled call, or pass what changes as an argument"
        ),
    ),
    "deallocated": Cause(
        lambda w: f"{w.src} was freed and recreated between calls",
        lambda w: f"{w.src} was freed and a new one created (e.g. a new optimizer each step): create it once and keep it alive",
    ),
    "requires_grad": Cause(_requires_grad_text, _requires_grad_fix),
    "dtype": Cause(
        lambda w: f"dtype of {w.src} changes between calls{_seen(w.values)}",
        lambda w: f"{w.src} changes dtype: cast it to one dtype before the compiled call",
    ),
    "device": Cause(
        lambda w: f"device of {w.src} changes between calls{_seen(w.values)}",
        lambda w: f"{w.src} changes device: move it to one device before the compiled call",
    ),
    "ndim": Cause(
        lambda w: f"number of dimensions of {w.src} changes between calls{_seen(w.values)}",
        lambda w: f"{w.src} changes its number of dimensions: reshape it to a fixed rank before the call",
    ),
}
_UNKNOWN = Cause(
    lambda w: w.guard or "a guard failed",
    lambda w: "run with TORCH_LOGS=recompiles_verbose to see every failed guard of each cache entry",
)


def cause_text(kind: str, src: str, dim: Any, values: list[str], guard: str) -> str:
    """One line saying what changes between calls, in the user's terms (CAUSES)."""
    return CAUSES.get(kind, _UNKNOWN).text(Why(kind, src, dim, values, guard))


def cause_fix(
    kind: str,
    src: str,
    dim: Any,
    *,
    forced_static: bool | None,
    count: int,
    dynamic_true: bool = False,
    values: list[str] | None = None,
    expected: bool = False,
) -> str:
    """The fix people apply for this cause today (torch 2.x; CAUSES). `forced_static` is None
    when the logs do not say whether the code compiled with dynamic=False; `dynamic_true` when
    the compile's config shows dynamic=True (assume_static_by_default off); `expected` when this
    many recompiles for the cause is by design (_is_expected)."""
    w = Why(kind, src, dim, values or [], "", forced_static, count, dynamic_true, expected)
    return CAUSES.get(kind, _UNKNOWN).fix(w)


def _dynamic_config(compiles: pl.DataFrame) -> dict[tuple[str, str], bool]:
    """(file, compile_id) -> whether the compile ran with automatic dynamic shapes off and
    static by default (what `torch.compile(dynamic=False)` sets), for every compile whose
    `compilation_metrics` carries the Dynamo config (the compiles table's columns)."""
    known = compiles.filter(pl.col("automatic_dynamic_shapes").is_not_null())
    return {
        (file, cid): ads is False and asbd is not False
        for file, cid, ads, asbd in known.select(
            "file", "compile_id", "automatic_dynamic_shapes", "assume_static_by_default"
        ).iter_rows()
    }


def _epoch_starts(trace: Trace) -> pl.DataFrame:
    """(file, rank, epoch, lineno) where each epoch after the first begins in a log: in a trace at
    the first line of the epoch's first compile, in a text log at its first `Step 1: torchdynamo
    start tracing` record (the only records that open an occurrence). Empty without resets."""
    schema = {"file": pl.String, "rank": pl.Int32, "epoch": pl.Int32, "lineno": pl.Int64}
    parts = []
    comp = trace.compiles
    if comp.height:
        parts.append(
            comp.filter(pl.col("lineno").is_not_null())
            .select("file", "rank", "lineno", pl.col("occurrence").fill_null(1))
            .with_columns(epoch_expr().alias("epoch"))
        )
    lr = trace.log_records
    if lr.height and "text" in lr.columns:
        starts = lr.filter(pl.col("text").str.starts_with(TEXT_START) & (pl.col("attempt").fill_null(0) == 0))
        if starts.height:
            parts.append(
                starts.select("file", "rank", "lineno", "compile_id", "attempt", "text")
                .with_columns(text_occurrence_expr().alias("occurrence"))
                .with_columns(epoch_expr().alias("epoch"))
            )
    if not parts:
        return pl.DataFrame(schema=schema)
    return (
        pl.concat([p.select("file", "rank", "epoch", "lineno") for p in parts], how="vertical_relaxed")
        .filter(pl.col("epoch") > 1)
        .group_by("file", "rank", "epoch")
        .agg(pl.col("lineno").min())
        .cast(schema)  # type: ignore[arg-type]
        .sort("lineno")
    )


def _with_epoch(df: pl.DataFrame, starts: pl.DataFrame) -> pl.DataFrame:
    """`df` (rows with file and lineno) with the epoch of each row (1 before the first
    reset of its log), row order kept."""
    if starts.is_empty() or df.is_empty():
        return df.with_columns(pl.lit(1, dtype=pl.Int32).alias("epoch"))
    rank = pl.col("rank").fill_null(-1).alias("_rank")  # per process: a text log may hold several ranks
    indexed = df.with_row_index("_row").with_columns(pl.col("lineno").fill_null(0).alias("_at"), rank).sort("_at")
    joined = indexed.join_asof(
        starts.rename({"lineno": "_start"}).with_columns(rank).drop("rank"),
        left_on="_at", right_on="_start", by=["file", "_rank"], strategy="backward", check_sortedness=False,
    )
    return joined.sort("_row").drop("_row", "_at", "_start", "_rank").with_columns(pl.col("epoch").fill_null(1))


def _new_frame(rank: Any, proc: str, epoch: int = 1) -> dict[str, Any]:
    return {
        "rank": rank,
        "proc": proc,
        "epoch": epoch,
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
        "dynamic_true": False,
        "user_exceptions": {},  # compile id -> the exception the user's code raised in it
        "records": {},  # compile id -> (file, lineno) of its first trace record
        "occurrences": {},  # compile id -> its occurrence (the same id again after a reset)
    }


def recompile_storms(trace: Trace) -> list[dict[str, Any]]:
    """Code objects that compiled more than once, per rank, most costly first: frames that hit
    the recompile limit, then by compiles, then by compile seconds. Computed once per Trace
    (each caller gets its own copy to change)."""
    return _copied(once(trace, name="recompile_storms", build=lambda: _recompile_storms(trace))[0])


_ATOMIC = (str, int, float, bool, type(None))


def _copied(x: Any) -> Any:
    """A deep copy of the storms (plain dicts, lists and tuples of values, none shared by two
    places: copy.deepcopy's memo of shared objects is not needed), several times faster than
    copy.deepcopy on a report of thousands of ranks; anything else is deep-copied."""
    t = type(x)
    if t is dict:
        return {k: _copied(v) for k, v in x.items()}
    if t is list:
        return [_copied(v) for v in x]
    if t in _ATOMIC:
        return x
    if t is tuple:
        return tuple(_copied(v) for v in x)
    return copy.deepcopy(x)


def primary_causes(trace: Trace) -> dict[tuple[Any, str, int], dict[str, Any]]:
    """(rank, compile_id, occurrence) -> the primary cause of that recompile, as the storms
    found it (kind, text, expected, guard, source, dim, certainty): one cause per recompile,
    the one every finding and table says. Do not change what it returns."""
    return once(trace, name="recompile_storms", build=lambda: _recompile_storms(trace))[1]


def _recompile_storms(trace: Trace) -> tuple[list[dict[str, Any]], dict[tuple[Any, str, int], dict[str, Any]]]:
    starts = _epoch_starts(trace)
    comp = _with_epoch(trace.compiles, starts)
    rec = _with_epoch(prefer_trace(trace.recompiles, ["rank", "compile_id"]), starts)  # logged twice: counted once
    limit = _with_epoch(trace.limit_hits, starts)
    if "automatic_dynamic_shapes" in comp.columns:
        known = comp.filter(pl.col("automatic_dynamic_shapes").is_not_null())
        config = {
            (f, c): (a is False and st is not False)
            for f, c, a, st in known.select("file", "compile_id", "automatic_dynamic_shapes", "assume_static_by_default").iter_rows()
        }
    else:  # tables from before the compiles table carried the config
        config = _dynamic_config(trace.compiles)
    frames: dict[tuple, dict[str, Any]] = {}
    by_rank_frame: dict[tuple, tuple] = {}  # (rank, epoch, frame id) -> key of the trace frame

    # trace compiles: the count and cost per frame
    dyn = comp.filter(pl.col("frame_id").is_not_null() & pl.col("compiled_autograd_id").is_null())
    read = ("rank", "file", "epoch", "frame_id", "compile_id", "lineno", "occurrence", "total_time_s", "function", "filename",
            "line", "status", "fail_reason", "assume_static_by_default")
    for r in dyn.select(c for c in read if c in dyn.columns).iter_rows(named=True):
        k = (r["rank"], r["file"], r["epoch"], r["frame_id"])
        f = frames.setdefault(k, _new_frame(r["rank"], r["file"], r["epoch"]))
        by_rank_frame.setdefault((r["rank"], r["epoch"], r["frame_id"]), k)
        f["compile_ids"].add(r["compile_id"])
        f["records"][r["compile_id"]] = (r["file"], r["lineno"])
        f["occurrences"][r["compile_id"]] = r.get("occurrence")
        f["seconds"] += r["total_time_s"] or 0.0
        f["function"] = f["function"] or r["function"]
        f["filename"] = f["filename"] or r["filename"]
        f["line"] = f["line"] or r["line"]
        if (r["file"], r["compile_id"]) in config:
            f["has_config"] = True
            f["forced_static"] = f["forced_static"] or config[(r["file"], r["compile_id"])]
        if r["status"] == "failed":
            f["failed"].add(r["compile_id"])
            if exc := user_exception(r.get("fail_reason")):
                f["user_exceptions"][r["compile_id"]] = exc
        if r.get("assume_static_by_default") is False:
            f["dynamic_true"] = True

    def key_for(r: dict[str, Any]) -> tuple:
        rank, file, epoch, fid = r["rank"], r["file"], r["epoch"], frame_of(r["compile_id"])
        if r.get("source") == "trace":
            return (rank, file, epoch, fid)
        # a text log's record: the trace's frame, or its own frame; a text log without
        # TORCH_LOGS=dynamo shows no reset, but a frame id that names another function than
        # before is another code object (the frame counter was reset)
        return by_rank_frame.get((rank, epoch, fid), (rank, file, epoch, fid, r.get("function"), r.get("filename")))

    for r in rec.iter_rows(named=True):
        k = key_for(r)
        f = frames.setdefault(k, _new_frame(r["rank"], r["file"], r["epoch"]))
        f["compile_ids"].add(r["compile_id"])
        f["function"] = f["function"] or r["function"]
        f["filename"] = f["filename"] or r["filename"]
        f["line"] = f["line"] or r["line"]
        f["guards"].append(r)
    for r in limit.iter_rows(named=True):
        k = key_for(r)
        f = frames.setdefault(k, _new_frame(r["rank"], r["file"], r["epoch"]))
        f["compile_ids"].add(r["compile_id"])
        f["limit"] = True
        f["limit_value"] = f["limit_value"] or r.get("limit")
        f["limit_cid"] = f["limit_cid"] or r["compile_id"]
        f["failed"].add(r["compile_id"])
        f["function"] = f["function"] or r.get("function")
        f["filename"] = f["filename"] or r.get("filename")
        f["line"] = f["line"] or r.get("line")

    user_exceptions = _user_exceptions_from_graph_breaks(trace, starts)  # once, not per frame
    by_compile: dict[tuple[Any, str, int], dict[str, Any]] = {}
    storms = []
    frame_of_storm: list[dict[str, Any]] = []  # the frame of each storm, in order
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
        if ids <= f["failed"] and not f["limit"] and not f["guards"]:
            # every compile failed: none left a cache entry whose guards could fail, so none is
            # a recompile (torch counts none: corpus/disabled_callback_address); the failed
            # compiles are said as failures
            continue
        guards = sorted(f["guards"], key=lambda g: (sort_key(g["compile_id"]), g.get("reason_index") or 0))
        forced_static: bool | None = f["forced_static"]
        known_from: str | None = "config" if f["has_config"] else None
        if not f["has_config"] and not forced_static:
            # no compilation_metrics for this frame (text log only): only what the guards show,
            # or the `dynamic` log's "marking L['x'] as dynamic (from automatic dynamic/PGO)"
            forced_static = True if _static_sizes_evident(guards) else None
            known_from = "guards" if forced_static else None
            if forced_static is None and _automatic_dynamic_logged(trace, f["rank"], ids, f["epoch"], starts):
                forced_static = False
        for (rank, epoch, cid), exc in user_exceptions.items():
            if rank == f["rank"] and epoch == f["epoch"] and cid in ids:
                f["user_exceptions"].setdefault(cid, exc)
        causes, n_secondary = _causes(
            guards, forced_static, dynamic_true=f["dynamic_true"], limit=bool(f["limit"]),
            user_exceptions=f["user_exceptions"],
        )
        _add_latest_values(causes, trace, f, ids, starts)
        code = describe(trace, rank=f["rank"], function=f["function"], filename=f["filename"], line=f["line"],
                        compile_ids=sorted(ids, key=sort_key))
        if code.get("module_compile"):
            for c in causes:
                if c["kind"] == "size" and c["dim"] is not None and not any(x in f["user_exceptions"] for x in c["compile_ids"]):
                    sources = _symbols_created(trace, f["rank"], c["compile_ids"][0], f["epoch"], starts)
                    c["fix"] = submodule_size_fix(c, code, f["function"], forced_static=forced_static, sources=sources)
        outside = code["owner"] == "library" or (code["owner"] == "torch" and not code["path"].startswith("torch/optim/"))
        if outside:
            for c in causes:
                c["fix"] = outside_code_advice(f["function"], f["line"], code, c)
        for c in causes:
            for cid in c["compile_ids"]:
                by_compile[(f["rank"], cid, f["occurrences"].get(cid) or 1)] = {
                    k: c[k] for k in ("kind", "text", "expected", "guard", "source", "dim", "certainty")
                }
        recompiles = n - 1
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
                "recompiles": recompiles,
                "secondary_guards": n_secondary,
                "expected": bool(causes) and all(c["expected"] for c in causes) and not f["limit"],
                "compile_id": first["compile_id"],
                "file": first["file"],
                "lineno": first["lineno"],
                "epoch": f["epoch"],
                "code": code,
                # it kept recompiling (the limit, or two or more recompiles not by design); a one-off
                # or an expected recompile is not a storm
                "is_storm": bool(f["limit"]) or sum(c["count"] for c in causes if not c["expected"]) >= 2,
                "fixed_later": None,  # _mark_fixed_later: the fix this run applied after a reset
            }
        )
        frame_of_storm.append(f)
    _mark_fixed_later(trace, list(zip(storms, frame_of_storm)), frames, starts)
    storms.sort(
        key=lambda s: (
            not s["hit_recompile_limit"], -s["compiles"], -s["compile_seconds"], str(s["function"]), s["rank"] or -1, s["epoch"]
        )
    )
    return storms, by_compile


def _mark_fixed_later(
    trace: Trace, storms: list[tuple[dict[str, Any], dict[str, Any]]], frames: dict[tuple, dict[str, Any]],
    starts: pl.DataFrame,
) -> None:
    """A fix the run applied itself: after torch._dynamo.reset(), the same code object (same
    rank and process, function, file and line) compiled again in a later epoch with the
    varying dimension dynamic (a `create_symbol` for it in that epoch's compiles: mark_dynamic,
    dynamic=True or dynamic_sources) and never recompiled for it. Such a storm's size causes
    say the fix as applied, with that compile as the evidence, and the storm gets
    `fixed_later`; it is no longer the user's to fix. `storms`: each storm with its frame."""
    by_code: dict[tuple, list[dict[str, Any]]] = {}
    for f in frames.values():
        if f["function"] is not None:
            by_code.setdefault((f["rank"], f["proc"], f["function"], f["filename"], f["line"]), []).append(f)
    for s, frame in storms:
        code = (frame["rank"], frame["proc"], frame["function"], frame["filename"], frame["line"])
        rounds = sorted((f for f in by_code.get(code, []) if f["epoch"] > frame["epoch"]), key=lambda f: f["epoch"])
        if not rounds:
            continue
        nxt = rounds[0]
        ids = sorted((c for c in nxt["compile_ids"] if c), key=sort_key)
        if not ids:
            continue
        for c in s["causes"]:
            if c["kind"] != "size" or c["expected"] or c["dim"] is None:
                continue
            want = f"{dynamo_source(c['source'])}:{c['dim']}"
            again = any(
                g.get("kind") == "size" and user_name(g.get("guard_source")) == c["source"] and g.get("dim") == c["dim"]
                for g in nxt["guards"]
            )
            made = [(cid, sym, raw) for cid in ids for entry, sym, raw in _created_symbols(trace, nxt["rank"], cid, nxt["epoch"], starts)
                    if entry == want]
            if again or not made:
                continue
            cid, sym, raw = made[0]
            label = id_label(cid, nxt["occurrences"].get(cid))
            file, lineno = nxt["records"].get(cid, (nxt["proc"], None))
            n = len(ids)
            times = "once" if n == 1 else f"{n} times, never again for it"
            c["fix"] = (
                f"applied later in this run: after torch._dynamo.reset(), {s['function']} compiled {times} as "
                f"[{label}] with dimension {c['dim']} of {c['source']} dynamic ({sym} for {raw}): the fix worked, "
                f"nothing left to do"
            )
            c["fixed_by"] = {"compile_id": cid, "occurrence": nxt["occurrences"].get(cid), "epoch": nxt["epoch"],
                             "symbol": sym, "source": raw, "file": file, "lineno": lineno}
            s["fixed_later"] = s["fixed_later"] or {
                "compile_id": cid, "occurrence": nxt["occurrences"].get(cid), "epoch": nxt["epoch"], "compiles": n,
                "file": file, "lineno": lineno,
            }


def outside_code_advice(function: str | None, line: Any, code: dict[str, Any], cause: dict[str, Any]) -> str:
    """The fix of a recompile whose compiled frame is not the user's code (torch's wrapper
    around a module, a library's forward, torch's own function): what it is, that what the
    user's code passes in changed, and where the user can act (their call site)."""
    site = code.get("call_site")
    at = f"{_site_text(site)}" if site else "the line of your code that calls it"
    fix = cause["fix"][:1].upper() + cause["fix"][1:]
    if code.get("wrapper") == "torch.compile(model)":
        what = code.get("module_class") or "your module"
        arg = _positional_source(cause.get("source"), site)
        if arg is not None and arg[1] != cause["source"]:
            fix = fix.replace(cause["source"], arg[1])
            cause["text"] = cause["text"].replace(cause["source"], f"{arg[1]} (the wrapper's {cause['source']})")
        return (
            f"the compiled frame is torch.compile's wrapper around your {what.rsplit('.', 1)[-1]} "
            f"(torch/_dynamo/external_utils.py): its {cause.get('source') or 'inputs'} "
            + (f"is the {arg[0]} you pass at {at}" if arg else f"is what you pass at {at}")
            + f". {fix}"
        )
    if code.get("wrapper"):
        return (
            f"{function} is torch's {code['wrapper']} wrapper ({code['path']}), recompiled because what your code "
            f"passes through it changed: act at {at}, not on the wrapper. {fix}"
        )
    where = f"{code['path']}:{line}" if line is not None else code["path"]
    name = code.get("qualname") or function
    owner = f"the {code['package']} library's code" if code["owner"] == "library" else "torch's own code"
    if code.get("module_compile") and cause.get("kind") == "size" and cause.get("source"):
        # regional compile: the guarded tensor is made by the library's forward between the
        # user's call and the layer; what the user holds is the layer's compile
        return (
            f"{name} is {owner} ({where}), compiled per module with .compile(): {cause['source']} is what "
            f"{code['package'] or 'torch'} passes to each module inside your call at {at}, a tensor your code never "
            f"holds. {fix}"
        )
    if "mark_dynamic(" in fix and cause.get("source"):
        # the guarded tensor is the library's own argument: the user marks the input it comes from
        fix += f" ({cause['source']} is an argument of {name}: mark the tensor of yours it comes from, before your call)"
    return (
        f"{name} is {owner} ({where}): it recompiled because what your code passes into it changed; "
        f"act at {at}, not in {code['package'] or 'its'} source. {fix}"
    )


def submodule_size_fix(
    cause: dict[str, Any], code: dict[str, Any], function: str | None, *, forced_static: bool | None, sources: list[str]
) -> str:
    """The fix of a varying dimension of a module compiled with nn.Module.compile()
    (`layer.compile()`, regional compilation), in terms of what the user holds: the compile
    call (`dynamic=True`) or torch.compiler.config.dynamic_sources, which names the tensors
    by their source inside the compiled frame (`sources`: the `L['x']:dim` entries the
    automatic-dynamic recompile made dynamic, from its create_symbol records; the guarded
    tensor alone when there are none). mark_dynamic does not work from a forward pre-hook of
    such a module: the hooks run inside the compiled call, where Dynamo refuses to trace
    mark_dynamic (torch 2.13: "Attempt to trace forbidden callable")."""
    src, dim = cause["source"], cause["dim"]
    cls = (code.get("module_class") or "").rsplit(".", 1)[-1] or "module"
    listed = ",".join(sources) if sources else f"{dynamo_source(src)}:{dim}"
    every = "" if sources else f" (and every other input whose dimension varies with {src})"
    compile_ = f"compile each {cls} with `.compile(dynamic=True)` (e.g. `layer.compile(dynamic=True)`)"
    only = f'set torch.compiler.config.dynamic_sources = "{listed}"{every} before the first call (only those dimensions; it overrides dynamic=False)'
    if code.get("owner") == "user":
        site = code.get("call_site")
        at = f" at {_site_text(site)}" if site else ""
        why = (
            f"or call torch._dynamo.mark_dynamic({src}, {dim}) in your code before the module is called{at}, not in a "
            f"forward pre-hook: the hooks of a module compiled with .compile() run inside the compiled call, where "
            f"Dynamo refuses to trace mark_dynamic"
        )
    else:
        why = (
            f"mark_dynamic cannot reach {src}: it is made inside the forward that calls the module, and the forward "
            f"pre-hooks of a module compiled with .compile() run inside the compiled call, where Dynamo refuses to "
            f"trace mark_dynamic"
        )
    if cause.get("expected"):
        once = "once" if cause["count"] <= 1 else "once per compiled variant (requires_grad, flag or mode)"
        return (
            f"nothing to fix: automatic dynamic shapes recompiled it {once} and made dimension {dim} of {src} dynamic; "
            f"to avoid even that, {compile_}, or {only}; {why}"
        )
    if forced_static:
        return (
            f"the modules compile with dynamic=False, so every new size compiles again: {compile_} instead, or {only}; {why}"
        )
    return f"{compile_}, or {only}; {why}"


_PLAIN_SOURCE = re.compile(r"^(?P<name>[A-Za-z_]\w*)(?P<rest>(?:\[[^\]]*\]|\.\w+)*)$")
_SYMBOL_SOURCE = re.compile(r"^(?P<src>.+)\.size\(\)\[(?P<dim>\d+)\]$")


def dynamo_source(src: str) -> str:
    """Dynamo's name of a frame input as the guards show it shortened (`args[0]` ->
    `L['args'][0]`, `x` -> `L['x']`): the form torch.compiler.config.dynamic_sources matches."""
    m = _PLAIN_SOURCE.match(src or "")
    return f"L['{m['name']}']{m['rest']}" if m else src


def _symbols_created(trace: Trace, rank: Any, compile_id: str | None, epoch: int, starts: pl.DataFrame) -> list[str]:
    """The `L['x']:dim` of every size the compile made dynamic (its `create_symbol` records),
    in log order, or [] (a text log, or a compile that made none)."""
    out: list[str] = []
    for entry, _, _ in _created_symbols(trace, rank, compile_id, epoch, starts):
        if entry not in out:
            out.append(entry)
    return out


def _created_symbols(
    trace: Trace, rank: Any, compile_id: str | None, epoch: int, starts: pl.DataFrame
) -> list[tuple[str, str, str]]:
    """(`L['x']:dim`, symbol, `L['x'].size()[dim]`) of each size symbol one compile (of one
    epoch) created, from its `create_symbol` records in log order."""
    if not compile_id:
        return []
    ev = trace.index_events()
    if ev.is_empty() or "metadata" not in ev.columns:
        return []
    cond = (pl.col("kind") == "create_symbol") & (pl.col("compile_id") == compile_id)
    cond &= pl.col("rank").is_null() if rank is None else pl.col("rank") == rank
    rows = _with_epoch(ev.filter(cond).select("file", "rank", "lineno", "metadata"), starts).filter(pl.col("epoch") == epoch)
    out: list[tuple[str, str, str]] = []
    for meta in rows.sort("lineno")["metadata"].to_list():
        try:
            record = json.loads(meta or "{}")
        except ValueError:
            continue
        source = record.get("source") or ""
        m = _SYMBOL_SOURCE.match(source)
        if m:
            out.append((f"{m['src']}:{m['dim']}", str(record.get("symbol") or "?"), source))
    return out


def _site_text(site: dict[str, Any]) -> str:
    where = f"{brief(site['filename'])}:{site['line']}"
    return f"{where} `{site['code']}`" if site.get("code") else where


_ARG = re.compile(r"^args\[(\d+)\]$")


def _positional_source(source: str | None, site: dict[str, Any] | None) -> tuple[str, str] | None:
    """("model's first positional input", "x") for the wrapper's `args[0]`, reading the call's
    own text (`y = compiled(x)`) when it is one simple call; ("model's first positional input",
    "args[0]") when the call cannot be read."""
    m = _ARG.match(source or "")
    if m is None:
        return None
    k = int(m.group(1))
    nth = ("first", "second", "third", "fourth")[k] if k < 4 else f"#{k + 1}"
    what = f"model's {nth} positional input"
    code = (site or {}).get("code") or ""
    try:
        tree = ast.parse(code.strip())
    except SyntaxError:
        return what, source or ""
    def named(f: ast.expr) -> bool:  # `compiled`, `self.model`: not `compiled(x).square`
        return isinstance(f, ast.Name) or (isinstance(f, ast.Attribute) and named(f.value))

    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and named(n.func)]
    if len(calls) == 1 and len(calls[0].args) > k and not any(isinstance(a, ast.Starred) for a in calls[0].args[: k + 1]):
        seg = ast.get_source_segment(code.strip(), calls[0].args[k])
        if seg:
            return what, seg
    return what, source or ""


def _automatic_dynamic_logged(trace: Trace, rank: Any, ids: set[str], epoch: int, starts: pl.DataFrame) -> bool:
    """A text log (TORCH_LOGS=dynamic) shows automatic dynamic shapes at work in one of these
    compiles (of this epoch): `marking L['x'] as dynamic (from automatic dynamic/PGO)`."""
    lr = trace.log_records
    if lr.is_empty() or not ids or "text" not in lr.columns:
        return False
    hits = lr.filter(
        pl.col("compile_id").is_in(sorted(ids)) & pl.col("text").str.contains("(from automatic dynamic", literal=True)
        & (pl.col("rank").is_null() if rank is None else pl.col("rank") == rank)
    )
    return not _with_epoch(hits, starts).filter(pl.col("epoch") == epoch).is_empty()


def user_exception(reason: str | None) -> str | None:
    """The exception the user's own code raised while Dynamo traced it ("Observed exception",
    gb0088: Dynamo found no handler and the exception propagates to the caller), as
    `ValueError('...')`, or None."""
    if not reason or not reason.startswith("Observed exception"):
        return None
    m = re.search(r"raised exception (\w+\(.*\))", reason)
    return m.group(1) if m else "an exception"


def _user_exceptions_from_graph_breaks(trace: Trace, starts: pl.DataFrame) -> dict[tuple[Any, int, str], str]:
    """(rank, epoch, compile id) -> the user's exception, from "Observed exception" graph-break
    records (text logs have no compilation metrics)."""
    gbs = trace.graph_breaks
    if gbs.is_empty() or "reason" not in gbs.columns or "debug_context" not in gbs.columns:
        return {}
    out: dict[tuple[Any, int, str], str] = {}
    observed = _with_epoch(gbs.filter(pl.col("reason").str.starts_with("Observed exception")), starts)
    for r in observed.iter_rows(named=True):
        if r.get("compile_id"):
            out[(r.get("rank"), r["epoch"], r["compile_id"])] = (
                user_exception(r["reason"] + "\n" + (r.get("debug_context") or "")) or "an exception"
            )
    return out


_GUARD_VALUE = re.compile(r"^(?P<src>.+?)\s*(?:==\s*(?P<v>.+)|is None)$")


def _add_latest_values(
    causes: list[dict[str, Any]], trace: Trace, f: dict[str, Any], ids: set[str], starts: pl.DataFrame
) -> None:
    """The value that triggered the newest recompile is in no failed guard, only in the guards
    of the newest compile (trace `dynamo_cpp_guards_str`, text `guards`): add it to the values
    of value-like causes."""
    kinds = ("value", "value:int", "value:float", "module_int", "optimizer_lr")
    want = {c["source"]: c for c in causes if c["kind"] in kinds}
    if not want or not ids:
        return
    newest = max(ids, key=sort_key)
    rank = pl.col("rank").is_null() if f["rank"] is None else pl.col("rank") == f["rank"]
    rows = _guards_of(trace, newest, rank, f["epoch"], starts).filter(pl.col("kind").is_in(["EQUALS_MATCH", "NONE_MATCH"]))
    for code, gsrc in rows.select("code", "guard_source").iter_rows():
        c = want.get(user_name(gsrc))
        m = _GUARD_VALUE.match((code or "").strip())
        if c is None or m is None:
            continue
        v = m["v"].strip() if m["v"] is not None else "None"
        if v not in c["values"]:
            c["values"].append(v)
            c["text"] = cause_text(c["kind"], c["source"], c["dim"], c["values"], c["guard"])
            if c["kind"] == "value":
                c["fix"] = cause_fix(c["kind"], c["source"], c["dim"], forced_static=None, count=c["count"], values=c["values"])


def _guards_of(trace: Trace, compile_id: str, rank: pl.Expr, epoch: int, starts: pl.DataFrame) -> pl.DataFrame:
    """The guards of one compile (of one epoch: the same id names a compile in each). The
    summary does not build the guards table of the whole trace for this (it would read every
    payload of a big log): it reads that compile's `dynamo_cpp_guards_str` payload alone, and
    the text log's guard records."""

    def of_epoch(df: pl.DataFrame) -> pl.DataFrame:
        return _with_epoch(df, starts).filter(pl.col("epoch") == epoch).drop("epoch")

    known = trace.summary_guards()
    if known is not None:
        return of_epoch(known.filter((pl.col("compile_id") == compile_id) & rank))
    ev = of_epoch(
        trace.index_events().filter((pl.col("kind") == "dynamo_cpp_guards_str") & (pl.col("compile_id") == compile_id) & rank)
    )
    if ev.height and "payload_start" not in ev.columns and ev["payload"].null_count() == ev.height:
        # a trace read from an export: no payload to read back from a log, its guards table has them
        return of_epoch(trace.guards.filter((pl.col("compile_id") == compile_id) & rank))
    try:
        parts = [guards_from_trace(hydrate(ev)[0] if ev.height else ev)]
    except (InputChanged, OSError):  # the log changed or went away since it was parsed
        parts = [guards_from_trace(ev.clear())]
    lr = trace.log_records
    if not lr.is_empty():
        parts.append(guards_from_text(of_epoch(lr.filter((pl.col("compile_id") == compile_id) & rank))))
    return pl.concat(parts, how="vertical_relaxed")


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


_SUBMODULE = re.compile(r"\._modules\['(\w+)'\]")
_LEN_GUARD = re.compile(r"^len\((?P<src>[^()]+)\)\s*(?:==|!=)\s*(?P<n>\d+)$")
_LR_TENSORIFIED = re.compile(r"^___as_tensor\((?P<src>[^()]*param_groups\[\d+\]\['lr'\])\)\.item\(\)\s*==\s*(?P<v>[^\s#]+)")
_STACK_GUARD = re.compile(r"^(?P<src>___stack\d+)\s*==\s*(?P<v>.+)$")
_RANGE_GUARD = re.compile(r"(?:<=|>=|<|>)")
_MODULE_ATTR = re.compile(r"^self(?:\._modules\['[^']*'\])*\.[A-Za-z_]\w*$")
_USER_EXCEPTION = re.compile(r"^Observed exception|raised exception (?P<exc>\w+\(.*\))")


def refine_kind(kind: str, src: str | None, guard: str, expected: str | None) -> tuple[str, str | None, str | None]:
    """(kind, source, value) of one failed guard, refined by where the guarded value comes from
    (the parser classifies the guard's form; the advice depends on its origin)."""
    g = guard.strip()
    if g.startswith("BACKEND_MATCH"):
        return "backend", None, None
    if m := _LEN_GUARD.match(g):
        # torch logs the failing check (`len(extras) != 0`): the cache entry was compiled for 0
        return "signature", user_name(m["src"]), m["n"]
    if m := _STACK_GUARD.match(g):
        return "resume_value", m["src"], m["v"].strip()
    if m := _LR_TENSORIFIED.match(g):
        # torch 2.11: the lr read through ___as_tensor(...).item() (a float tensorified, then specialized)
        return "optimizer_lr", user_name(m["src"]), m["v"].strip()
    if kind == "size" and "size mismatch" not in g and _RANGE_GUARD.search(g.split("  #")[0]):
        return "range", src, g.split("  #")[0].strip()
    if kind == "value":
        kind = _value_kind(expected, g)
    if kind == "value:bool" and src and src.endswith(".training"):
        return "training", src, expected
    if kind in ("value:int", "value:float") and src and "param_groups" in src and "'lr'" in src:
        return "optimizer_lr", src, expected
    if kind == "value:int" and src and _MODULE_ATTR.match(src):
        return "module_int", src, expected
    return kind, src, expected


def _recompile_groups(guards: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The failed guards of each recompile (one record: one trace artifact or one text
    message), in torch's order: cache entries newest first (guards.py
    get_and_maybe_log_recompilation_reasons walks the frame's cache entry list, newest first),
    and within one entry the guards in the order they failed."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for g in guards:
        groups.setdefault((g.get("file"), g.get("lineno"), g.get("compile_id")), []).append(g)
    return [sorted(rows, key=lambda r: r.get("reason_index") or 0) for rows in groups.values()]


def _causes(
    guards: list[dict[str, Any]],
    forced_static: bool | None,
    *,
    dynamic_true: bool = False,
    limit: bool = False,
    user_exceptions: dict[str, str] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """One primary cause per recompile: the first failed guard of the newest cache entry, the
    reason torch itself stores as the compile's `recompile_reason` (convert_frame.py:
    `reasons[0]`). The failures of older entries are secondary: counted per cause in
    `secondary`, never in `count`, so the counts add up to the recompiles. Returns the causes
    and the number of secondary failed guards."""
    user_exceptions = user_exceptions or {}
    clusters: dict[tuple, dict[str, Any]] = {}
    secondary_rows: list[tuple[tuple, dict[str, Any]]] = []
    n_secondary = 0
    known: dict[tuple, dict[str, bool]] = {}  # (variant kind, source) -> cache entry -> the value it was compiled for
    for rows in _recompile_groups(guards):
        refined = []
        for g in rows:
            kind, src, value = refine_kind(g.get("kind") or "other", user_name(g.get("guard_source")) or None,
                                           g.get("guard") or "", g.get("expected"))
            refined.append((g, kind, src, value))
            if kind in VARIANT_KINDS and (v := _variant_value(kind, value)) is not None and g.get("failed_against"):
                known.setdefault((kind, src), {})[g["failed_against"]] = v  # the entry expected v
        primary = _primary_failure(refined, known)
        g0, k0, s0, v0 = refined[primary]
        if k0 in VARIANT_KINDS and (v := _variant_value(k0, v0)) is not None and g0.get("compile_id"):
            known.setdefault((k0, s0), {})[g0["compile_id"]] = not v  # the new compile is for the other value
        for i, (g, kind, src, value) in enumerate(refined):
            dim = g.get("dim") if kind in ("size", "stride", "range") else None
            guard = g.get("guard") or ""
            key = (kind, src, dim, same_text(guard) if kind == "other" else None)  # addresses aside: one cause
            if i != primary:
                n_secondary += 1
                secondary_rows.append((key, {**g, "_value": value}))
                continue
            c = clusters.get(key)
            if c is None:
                c = clusters[key] = {
                    "kind": kind, "src": src, "dim": dim, "compiles": [], "values": [], "guard": guard,
                    "secondary": 0, "compile_id": g.get("compile_id"), "file": g.get("file"),
                    "lineno": g.get("lineno"),
                }
            c["compiles"].append(g.get("compile_id"))
            _add_values(c["values"], kind, value, g.get("actual"))
    for key, g in secondary_rows:
        if key in clusters:
            clusters[key]["secondary"] += 1
            _add_values(clusters[key]["values"], key[0], g["_value"], g.get("actual"))
    # the compiled variants kept by design (one per requires_grad value, flag value, mode): each
    # needs its own automatic-dynamic recompile when a size changes
    variant_recompiles = {k: len(c["compiles"]) for k, c in clusters.items() if c["kind"] in VARIANT_KINDS}
    out = []
    for key, c in clusters.items():
        src = c["src"] or "the input"
        count = len(c["compiles"])
        failed = [user_exceptions[cid] for cid in c["compiles"] if cid in user_exceptions]
        variants = 1 + sum(n for k, n in variant_recompiles.items() if k != key)
        expected = _is_expected(c["kind"], count, forced_static=forced_static, limit=limit, variants=variants) and not failed
        if failed:
            text = cause_text(c["kind"], src, c["dim"], c["values"], c["guard"])
            fix = (
                f"the recompile ({', '.join(cid for cid in c['compiles'] if cid in user_exceptions)}) ended in an "
                f"exception raised by your own code ({failed[0]}): the call with the new input fails in eager too; "
                f"fix the input (or the check), not the compile"
            )
        else:
            text = cause_text(c["kind"], src, c["dim"], c["values"], c["guard"])
            fix = cause_fix(c["kind"], src, c["dim"], forced_static=forced_static, count=count,
                            dynamic_true=dynamic_true, values=c["values"], expected=expected)
        out.append(
            {
                "kind": c["kind"],
                "text": text,
                "count": count,
                "secondary": c["secondary"],
                "expected": expected,
                "certainty": "certain" if failed else _certainty(c["kind"], forced_static),
                "compile_ids": c["compiles"],
                "fix": fix,
                "guard": c["guard"],
                "source": src,
                "dim": c["dim"],
                "values": c["values"],
                "compile_id": c["compile_id"],
                "file": c["file"],
                "lineno": c["lineno"],
            }
        )
    out.sort(key=lambda c: (c["expected"], -c["count"]))
    return out, n_secondary


def _add_values(values: list[str], kind: str, value: str | None, actual: str | None) -> None:
    vals = (value,) if kind not in ("size", "stride", "dtype", "device", "requires_grad", "ndim", "type") else (value, actual)
    for v in vals:
        if v is not None and str(v) not in values:
            values.append(str(v))


def _certainty(kind: str, forced_static: bool | None) -> str:
    """`certain` where the guard says it all; `likely` where the reading is indirect: an int
    attribute of `self` taken for an nn.Module's, a `len()` guard taken for **kwargs, a size or
    number whose compile config the logs do not show (text log without TORCH_LOGS=dynamic)."""
    if kind in ("module_int", "signature"):
        return "likely"
    if kind in ("size", "stride", "value:int", "value:float") and forced_static is None:
        return "likely"
    return "certain"


def _is_expected(kind: str, count: int, *, forced_static: bool | None, limit: bool, variants: int = 1) -> bool:
    """Whether this many recompiles for this cause is how torch.compile works (nothing to fix).
    `variants`: the compiled variants the code object keeps by design besides this cause (1 +
    its recompiles for a requires_grad / flag / mode variant): each variant's cache entry needs
    its own automatic-dynamic recompile, and one requires_grad variant per other variant."""
    if limit:
        return False
    if kind in ("training", "backend", "range", "resume_value", "value:bool"):
        return True
    if kind == "requires_grad":
        # one compile per requires_grad value of an input (regional compile: the first block's
        # input is data without grad, the later blocks' inputs are activations with grad)
        return count <= variants
    if kind == "signature":
        return count <= 2
    if kind == "value":
        return count <= 3  # one compile per value of a small fixed set (a mode string, None)
    if kind in ("size", "value:int", "value:float"):
        # automatic dynamic shapes: one recompile per variant, then the dimension / number is
        # symbolic (only where the logs show that automatic dynamic shapes were on)
        return count <= variants and forced_static is False
    return False


# failed guards that tell apart the compiled variants torch keeps by design: one cache entry
# per value (requires_grad of an input, a bool flag, a module's training mode)
VARIANT_KINDS = ("requires_grad", "value:bool", "training")


def _variant_value(kind: str, value: str | None) -> bool | None:
    """The value a variant guard expected (`requires_grad=0`, `flag == True`), or None."""
    return {"0": False, "1": True, "False": False, "True": True}.get(str(value).strip()) if value is not None else None


def _primary_failure(refined: list[tuple[dict[str, Any], str, str | None, str | None]], known: dict[tuple, dict[str, bool]]) -> int:
    """The index of a recompile's cause among its failed guards (cache entries newest first,
    each with its first failed guard): what differs from the cache entry the call otherwise
    matches. When the newest entry failed on a variant guard (requires_grad, a flag, the mode:
    it was compiled for the other value), an older entry that has the call's value and failed
    on something else is that entry, and its failure the cause: proven for the same tensor when
    it failed on a size or stride (torch checks a tensor's requires_grad before its sizes), or
    by the value that entry is known to be compiled for (`known`: from earlier failures against
    it, or the variant recompile that made it). Otherwise the newest entry's failure, the
    reason torch itself stores as the compile's `recompile_reason` (convert_frame.py: `reasons[0]`)."""
    _, kind, src, value = refined[0]
    v = _variant_value(kind, value) if kind in VARIANT_KINDS else None
    if v is None:
        return 0
    call = not v
    for i, (g, k, s, _) in enumerate(refined[1:], 1):
        if k in VARIANT_KINDS:
            continue
        same_tensor = kind == "requires_grad" and s == src and k in ("size", "stride")
        if same_tensor or known.get((kind, src), {}).get(g.get("failed_against") or "") == call:
            return i
    return 0
