"""Compiles that have no Dynamo frame: named here, and nowhere else.

`torch._inductor.aoti_compile_and_package` (and `torch._inductor.aot_compile`) compiles an
exported program with Inductor outside Dynamo: no `dynamo_start`, no frame ids, and a
`compilation_metrics` whose `compile_id` is null (torch 2.13: `compile_fx_aot` logs it inside
its `dynamo_timed` span). The compile's records are the envelopes with no compile id before
that `compilation_metrics`: the export's `describe_*` / `create_symbol` /
`symbolic_shape_specialization`, the chromium spans (`compile_fx_aot`, the Inductor phases,
`compile_file`), the pre/post-grad graphs and the `graph_dump`s `inductor_aot_wrapper_code` /
`inductor_aot_kernel_code`.

`torch._inductor.compile`, `torch._inductor.standalone_compile` (and `compile_fx` itself) called
outside a Dynamo compile, at run time (vLLM's piecewise backend compiles each piece of the
graph Dynamo gave it on its first call for each batch size, from inside the compiled code), is
another: its records (the pre-grad, AOT and post-grad graphs, the chromium spans, the output
code, the cache artifacts) have no compile id and end with a `compilation_metrics_runtime`
whose compile id is null and whose `inductor_compile_time_s` is set (torch 2.13 `dynamo_timed`
outside a compile context: `is_runtime`). Called from inside a Dynamo compile (a backend that
compiles its pieces at once), the records carry that compile's id and are part of it.

Such a compile is named the way tlparse names its output directory, `unknown_<L>`, with `L`
the 1-based line of its `compilation_metrics` envelope in its file (tlparse `src/lib.rs`:
`compile_id.map_or(format!("unknown_{lineno}"), ...)`): stable for one file, and the
`unknown_<L>/compilation_metrics_*.html` page of tlparse's output is the same compile.

Which null-id records belong to it: those after the previous such end (a null-id
`compilation_metrics` or run-time one) of the same file (or the file start) up to its own, except the file's `torch_version` artifact
and interned strings. Two exports before one AOT compile both count for it (the log says
nothing finer). A null-id `compilation_metrics` that a strict export's failing Dynamo compile
claims (`attach_unnamed_metrics`) is not a frameless compile: it ends the Dynamo compile it
follows, and the null-id records before it belong to no frameless compile.

`compile_kind` (the `compiles` column): "dynamo" for a compile Dynamo named, "aot_inductor"
for a frameless compile with AOTInductor code (`inductor_aot_*` graph dumps), "inductor" for
another frameless compile.

Where a frameless compile came from (`called_from`), read from the Python stack torch writes on
its records (the envelope's `stack`: no compile context): the line that called Inductor (the
innermost frame outside torch before torch's own), and, when the call came from the code a
Dynamo compile produced, that code object and the piece of the backend's graph that was
running (`self.submod_0(` in the graph module's `<eval_with_key>` frame). The code object is
the frame that called, through torch's frames alone, into the innermost backend graph on the
stack; it does not rest on torch.compile's `compile_wrapper` being there (vLLM runs Dynamo's
compiled code object itself, with no wrapper; torch 2.5 named the wrapper `_fn`), and a resume
function (`torch_dynamo_resume_in_*`) called from the compiled code of the function it resumes
is the innermost. Which compile of that code object made it is read against the compiles
(parsers.compiles `_with_parents`): the one that had ended before it, or, with several, none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from parsers.code_location import is_torch, whose
from parsers.coerce import StackFrame
from parsers.compile_ids import FRAMELESS_PREFIX

AOT_DUMPS = ("inductor_aot_wrapper_code", "inductor_aot_kernel_code", "inductor_aot_header_code")
_NOT_OURS = ("str",)
RUNTIME_METRICS = ("compilation_metrics_runtime", "bwd_compilation_metrics_runtime")


def _ends(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The null-id `compilation_metrics` records, and the null-id run-time metrics of an
    Inductor compile (`inductor_compile_time_s` set: not a run-time autotune's)."""
    null_metrics = events.filter((pl.col("kind") == "compilation_metrics") & pl.col("compile_id").is_null())
    runtime = events.filter(pl.col("kind").is_in(RUNTIME_METRICS) & pl.col("compile_id").is_null())
    if runtime.height:
        took = pl.col("metadata").str.json_path_match("$.inductor_compile_time_s")
        runtime = runtime.filter(took.is_not_null() & (took != "null"))
    return null_metrics, runtime


def attach_unnamed_metrics(events: pl.DataFrame) -> pl.DataFrame:
    """Strict torch.export writes its failing `compilation_metrics` with compile id null
    (and no frame ids), after events of the compile it ends (`describe_*`,
    `dynamo_output_graph` carry 0/0): give it the id of the latest compile before it in the
    same file that has no metrics yet. One with no such compile keeps its null id (a
    frameless compile, `frameless_ids`)."""
    unnamed = events.filter((pl.col("kind") == "compilation_metrics") & pl.col("compile_id").is_null())
    if unnamed.height == 0:
        return events
    named = events.filter(pl.col("compile_id").is_not_null()).select(
        "file", "lineno", "compile_id", "kind", "frame_id", "frame_compile_id", "compiled_autograd_id"
    )
    fix: dict[tuple[str, int], tuple] = {}
    for file, lineno in unnamed.select("file", "lineno").iter_rows():
        before = named.filter((pl.col("file") == file) & (pl.col("lineno") < lineno))
        if before.height == 0:
            continue
        last = before.sort("lineno").tail(1).row(0, named=True)
        since = before.filter(pl.col("compile_id") == last["compile_id"])
        closed = since.filter(pl.col("kind") == "compilation_metrics")
        starts = since.filter(pl.col("kind") == "dynamo_start")
        if closed.height and (starts.height == 0 or closed["lineno"].max() > starts["lineno"].max()):
            continue  # that compile already has its metrics
        fix[(file, lineno)] = (last["compile_id"], last["frame_id"], last["frame_compile_id"], last["compiled_autograd_id"])
    if not fix:
        return events
    keys = pl.DataFrame(
        [{"file": f, "lineno": n, "_cid": v[0], "_fid": v[1], "_fcid": v[2], "_ca": v[3]} for (f, n), v in fix.items()],
        schema={"file": pl.String, "lineno": pl.Int64, "_cid": pl.String, "_fid": pl.Int32, "_fcid": pl.Int32, "_ca": pl.Int32},
    )
    return (
        events.join(keys, on=["file", "lineno"], how="left")
        .with_columns(
            pl.coalesce("compile_id", "_cid").alias("compile_id"),
            pl.coalesce("frame_id", "_fid").alias("frame_id"),
            pl.coalesce("frame_compile_id", "_fcid").alias("frame_compile_id"),
            pl.coalesce("compiled_autograd_id", "_ca").alias("compiled_autograd_id"),
        )
        .drop("_cid", "_fid", "_fcid", "_ca")
    )


_IDS_SCHEMA = {"file": pl.String, "lineno": pl.Int64, "_fl_id": pl.String, "_fl_kind": pl.String}


def frameless_ids(events: pl.DataFrame) -> pl.DataFrame:
    """file, lineno, `_fl_id` (the frameless compile's id) and `_fl_kind` (its compile_kind)
    of every null-id record that belongs to a frameless compile (see the module doc)."""
    null_metrics, runtime = _ends(events)
    if null_metrics.height == 0 and runtime.height == 0:
        return pl.DataFrame(schema=_IDS_SCHEMA)
    cols = ["file", "lineno", "kind", "name", "compile_id", "frame_id", "frame_compile_id", "compiled_autograd_id"]
    small = events.select([c for c in cols if c in events.columns])
    for c in ("frame_id", "frame_compile_id", "compiled_autograd_id"):
        if c not in small.columns:
            small = small.with_columns(pl.lit(None, dtype=pl.Int32).alias(c))
    claimed = attach_unnamed_metrics(small.filter(pl.col("compile_id").is_not_null() | (pl.col("kind") == "compilation_metrics")))
    ends = claimed.filter(pl.col("kind") == "compilation_metrics").select(
        pl.col("file").cast(pl.String),
        pl.col("lineno").cast(pl.Int64).alias("_end"),
        pl.when(pl.col("compile_id").is_null()).then(pl.format("{}{}", pl.lit(FRAMELESS_PREFIX), pl.col("lineno"))).alias("_fl_id"),
    ).join(null_metrics.select(pl.col("file").cast(pl.String), pl.col("lineno").cast(pl.Int64).alias("_end")), on=["file", "_end"], how="semi")
    if runtime.height:
        ends = pl.concat([ends, runtime.select(
            pl.col("file").cast(pl.String),
            pl.col("lineno").cast(pl.Int64).alias("_end"),
            pl.format("{}{}", pl.lit(FRAMELESS_PREFIX), pl.col("lineno")).alias("_fl_id"),
        )])
    if ends.filter(pl.col("_fl_id").is_not_null()).height == 0:
        return pl.DataFrame(schema=_IDS_SCHEMA)
    mine = (
        small.filter(
            pl.col("compile_id").is_null()
            & ~pl.col("kind").is_in(_NOT_OURS)
            & ~((pl.col("kind") == "artifact") & (pl.col("name") == "torch_version"))
        )
        .select(pl.col("file").cast(pl.String), pl.col("lineno").cast(pl.Int64), pl.col("kind"), pl.col("name"))
        .sort("file", "lineno")
        .join_asof(ends.sort("file", "_end"), left_on="lineno", right_on="_end", by="file", strategy="forward", check_sortedness=False)
        .filter(pl.col("_fl_id").is_not_null())
    )
    aot = (
        mine.group_by("_fl_id")
        .agg(((pl.col("kind") == "graph_dump") & pl.col("name").is_in(AOT_DUMPS)).any().alias("_aot"))
        .select("_fl_id", pl.when(pl.col("_aot")).then(pl.lit("aot_inductor")).otherwise(pl.lit("inductor")).alias("_fl_kind"))
    )
    return mine.join(aot, on="_fl_id", how="left").select(list(_IDS_SCHEMA)).cast(_IDS_SCHEMA)


def with_frameless_ids(df: pl.DataFrame, ids: pl.DataFrame | None = None, *, events: pl.DataFrame | None = None) -> pl.DataFrame:
    """`df` (rows with file, lineno, compile_id; trace_id too if it has one) with the id of
    the frameless compile each null-id row belongs to. `ids`: `frameless_ids(events)`,
    computed here from `events` (else from `df`) when not given."""
    if ids is None:
        ids = frameless_ids(df if events is None else events)
    if ids.height == 0:
        return df
    dtypes = {"file": df.schema["file"], "lineno": df.schema["lineno"]}
    out = df.join(ids.select("file", "lineno", "_fl_id").cast(dtypes), on=["file", "lineno"], how="left")
    fill = [pl.coalesce("compile_id", "_fl_id").alias("compile_id")]
    if "trace_id" in df.columns:
        fill.append(pl.coalesce("trace_id", "_fl_id").alias("trace_id"))
    return out.with_columns(fill).drop("_fl_id")


def frameless_kinds(events: pl.DataFrame) -> dict[tuple[str, str], str]:
    """(file, compile id) -> compile_kind of each frameless compile of `events`."""
    ids = frameless_ids(events)
    return {(f, i): k for f, i, k in ids.select("file", "_fl_id", "_fl_kind").unique().iter_rows()}


_PIECE = re.compile(r"\bself\.(\w+)\(")


@dataclass(frozen=True)
class CalledFrom:
    """Where a frameless compile came from (see the module doc): the line that called
    Inductor; the code object whose Dynamo-compiled code was running then, if any; the piece
    of the backend's graph module that called it."""

    filename: str | None = None
    line: int | None = None
    function: str | None = None
    code: str | None = None
    compiled_function: str | None = None
    compiled_filename: str | None = None
    compiled_line: int | None = None
    graph_piece: str | None = None


def _slashed(f: StackFrame) -> str:
    return (f.filename or "").replace("\\", "/")


def _enters_graph(f: StackFrame) -> bool:
    """A frame of the way into the function Dynamo's compiled code calls (the backend's
    output): an FX graph module's generated code (`<eval_with_key>.N`, `GraphModule.__call__`
    in torch/fx/graph_module.py), Dynamo's `__compiled_fn_N`, or the `torch._dynamo.disable`
    wrapper around it (`_fn` in torch/_dynamo/eval_frame.py)."""
    path = _slashed(f)
    return (
        path.startswith("<eval_with_key>")
        or path.endswith("torch/fx/graph_module.py")
        or (f.name or "").startswith("__compiled_fn")
        or (f.name == "_fn" and path.endswith("torch/_dynamo/eval_frame.py"))
    )


def called_from(stack: list[StackFrame]) -> CalledFrom:
    """Read a frameless compile's record stack (outermost frame first).

    The code that was running: the frame that called, through torch's frames alone, into the
    innermost backend graph on the stack (`_enters_graph`): the frame whose code is Dynamo's
    compiled code (a resume function's, `torch_dynamo_resume_in_*`, when the graph is one of
    its; the same frame whether torch.compile's wrapper, `compile_wrapper`, called it or the
    program ran the compiled code object itself, as vLLM's dispatcher does). Which compile made
    it is decided against the compiles table (parsers.compiles `_with_parents`): a frame whose
    code no Dynamo compile made ties nothing. No frame entering a graph: no compiled code."""
    first_torch = next(
        (i for i, f in enumerate(stack) if is_torch(f.filename) and "/_inductor/" in _slashed(f)),
        len(stack),
    )
    caller = next((f for f in reversed(stack[:first_torch]) if not is_torch(f.filename) and not whose(f.filename).owner == "generated"), None)
    compiled = piece = None
    inner = [i for i, f in enumerate(stack[:first_torch]) if _enters_graph(f)]
    if inner:
        # the innermost graph entered; back from it over torch's (and generated) frames
        i = inner[-1]
        while i >= 0 and (is_torch(stack[i].filename) or whose(stack[i].filename).owner == "generated" or _enters_graph(stack[i])):
            i -= 1
        compiled = stack[i] if i >= 0 else None
        # the piece: the innermost graph's own call (after the frame that entered it)
        piece = next(
            (m[1] for f in reversed(stack[i + 1 : first_torch]) if _slashed(f).startswith("<eval_with_key>") and f.loc
             and (m := _PIECE.search(f.loc))),
            None,
        )
    return CalledFrom(
        filename=caller.filename if caller else None, line=caller.line if caller else None,
        function=caller.name if caller else None, code=caller.loc if caller else None,
        compiled_function=compiled.name if compiled else None, compiled_filename=compiled.filename if compiled else None,
        compiled_line=compiled.line if compiled else None, graph_piece=piece if compiled else None,
    )
