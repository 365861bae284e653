"""The ``collectives`` and ``graph_execution`` tables: what each rank's compiled graphs
communicate, and in which order its compiled graphs ran.

``collectives``: one row per entry of each ``inductor_collective_schedule`` artifact
(torch/_inductor/debug.py ``log_collective_schedule``, logged for every Inductor graph with at
least one collective, on by default; not logged when the graph came from the FX graph cache).
The payload is a JSON list of the scheduler's collective kernels in order, each its
``python_kernel_name`` (``torch.ops._c10d_functional.all_reduce_.default``; ``wait_tensor`` is
one of them). Added to each entry where the trace says it:

* ``estimated_runtime_ns`` from ``inductor_runtime_and_tensor_meta`` (``LOG_TLPARSE=1``;
  ``{"ops": [{name, type, estimated_runtime_ns, outputs: [{shape, stride, dtype}]}]}``), the
  k-th op of that name for the k-th schedule entry of that name; its ``outputs`` shapes/dtypes
  when torch filled them (for collectives torch 2.13 logs them empty);
* ``shape``/``dtype``/``node`` of the tensor the collective takes, from the compile's Dynamo
  graph (``dynamo_output_graph``: ``tensor: "f32[8, 16][16, 1]cpu" =
  torch.ops._c10d_functional.all_reduce(h, 'sum', '0')``), the k-th node of that op for the
  k-th schedule entry of that op, for the first schedule of a compile (its forward graph);
  ``user_file``/``user_line`` from that node's ``# File:`` comment when it is the user's code
  (a functional collective called directly has torch's own file there: null).

``graph_execution``: one row per entry of each ``graph_execution`` artifact
(``torch._inductor.debug.record_and_log_graph_execution_order()``, logged when the context
manager exits: ``{"graph_execution_order": [{"compile_id": "0/0"}, ...]}``).

``ddp_splits``: one row per submodule of each ``optimize_ddp_split_graph`` (DDPOptimizer,
torch/_dynamo/backends/distributed.py: the compiled graph split at the gradient-bucket
boundaries, logged once per split; one ``optimize_ddp_split_child`` per submodule follows). The
payload is the split parent's ``print_readable`` text: a nested ``class submod_N`` per
submodule, its ``forward(self, name: "f32[1024, 1024]", ...)`` signature naming what it takes.
The submodule's parameters are the arguments Dynamo named after a module parameter
(``..._parameters_<name>_``, from ``L['self']._modules[...]._parameters[...]``); their bytes are
numel x dtype size of the annotated shapes (null when a size is symbolic or the dtype unknown).
DDPOptimizer fills buckets from the last layer back: submodule i of n holds the parameters of
torch's bucket n-1-i (its log's "bucket assignments" table, at debug level).

All read only the ``events`` table (payloads of these artifacts are parse-time ones,
parsers.kinds.SUMMARY_PAYLOAD_ARTIFACTS; the Dynamo graph's payload is kept when it names a
functional collective, SUMMARY_PAYLOAD_GRAPH_MARKS).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import orjson
import polars as pl

from parsers.code_location import is_torch
from parsers.coerce import json_value, text_of, typed_frame
from parsers.compile_ids import occurrence_at

__all__ = [
    "COLLECTIVES_SCHEMA",
    "DDP_SPLITS_SCHEMA",
    "GRAPH_EXECUTION_SCHEMA",
    "build_collectives",
    "build_ddp_splits",
    "build_graph_execution",
    "op_name",
]

_S, _I32, _I64, _F64 = pl.String, pl.Int32, pl.Int64, pl.Float64

COLLECTIVES_SCHEMA = pl.Schema(
    {
        "rank": _I32, "compile_id": _S, "occurrence": _I32, "trace_id": _S,
        "graph_index": _I32, "position": _I32, "collective_index": _I32,
        "op": _S, "kind": _S, "target": _S,
        "node": _S, "shape": pl.List(_I64), "dtype": _S,
        "output_shapes": _S, "output_dtypes": _S, "estimated_runtime_ns": _F64,
        "user_file": _S, "user_line": _I32,
        "source": _S, "file": _S, "lineno": _I64,
    }
)
GRAPH_EXECUTION_SCHEMA = pl.Schema(
    {"rank": _I32, "block": _I32, "order": _I32, "compile_id": _S, "source": _S, "file": _S, "lineno": _I64}
)

DDP_SPLITS_SCHEMA = pl.Schema(
    {
        "rank": _I32, "compile_id": _S, "occurrence": _I32, "split": _I32,
        "submodule": _S, "position": _I32, "submodules": _I32,
        "params": pl.List(_S), "param_count": _I32, "param_bytes": _I64,
        "source": _S, "file": _S, "lineno": _I64,
    }
)

_SCHEDULE = "inductor_collective_schedule"
_RUNTIME_META = "inductor_runtime_and_tensor_meta"
_EXECUTION = "graph_execution"

_DTYPES = {
    "f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i64": "int64",
    "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8", "b8": "bool",
    "c64": "complex64", "c128": "complex128", "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}
# a collective node of a Dynamo graph: `name: "f32[8, 16][16, 1]cpu" = torch.ops._c10d_functional.all_reduce(`
_NODE = re.compile(
    r'^\s*(?P<node>\w+): "(?P<dtype>[a-z0-9]+)\[(?P<shape>[^\]]*)\]\[[^\]]*\][^"]*" = '
    r"torch\.ops\.(?:_c10d_functional|c10d_functional)\.(?P<op>\w+)(?:\.\w+)?\("
)
_FILE = re.compile(r"^\s*# File: (?P<file>.+?):(?P<line>\d+)(?: in |, code: |$)")


def op_name(target: str | None) -> str:
    """The collective's name as the user calls it: ``torch.ops._c10d_functional.all_reduce_.default``
    -> ``all_reduce`` (the in-place form Inductor schedules is the same collective)."""
    if not target:
        return ""
    parts = target.split(".")
    if parts[-1] in ("default", "Tensor") and len(parts) > 1:
        parts = parts[:-1]
    return parts[-1].rstrip("_") if parts else target


def _kind(target: str) -> str:
    return "wait" if op_name(target) == "wait_tensor" else "collective"


def _graph_collectives(payload: str | None) -> list[dict[str, Any]]:
    """The functional-collective nodes of a Dynamo graph's text, in order."""
    out: list[dict[str, Any]] = []
    where: tuple[str, int] | None = None
    for line in (payload or "").split("\n"):
        fm = _FILE.match(line)
        if fm:
            where = (fm.group("file"), int(fm.group("line")))
            continue
        m = _NODE.match(line)
        if not m:
            continue
        shape = [int(x) for x in m.group("shape").split(",") if x.strip().lstrip("-").isdigit()]
        if m.group("shape").strip() and len(shape) != len(m.group("shape").split(",")):
            shape = None  # symbolic sizes (s0): not a concrete shape
        user = where if where is not None and not is_torch(where[0]) else None
        out.append({
            "op": op_name(m.group("op")), "node": m.group("node"), "shape": shape,
            "dtype": _DTYPES.get(m.group("dtype"), m.group("dtype")),
            "user_file": user[0] if user else None, "user_line": user[1] if user else None,
        })
    return out


def _nth_by(items: list[dict[str, Any]], key: str) -> dict[tuple[str, int], dict[str, Any]]:
    seen: dict[str, int] = defaultdict(int)
    out = {}
    for it in items:
        k = it[key]
        out[(k, seen[k])] = it
        seen[k] += 1
    return out


def build_collectives(events: pl.DataFrame) -> pl.DataFrame:
    """The ``collectives`` table from the events (see the module's doc)."""
    names = (_SCHEDULE, _RUNTIME_META)
    cond = (pl.col("kind") == "artifact") & pl.col("name").is_in(names)
    recs = events.filter(cond | (pl.col("kind") == "dynamo_output_graph"))
    # only the Dynamo graphs with a functional collective (their payloads searched on these rows only)
    recs = recs.filter(pl.col("kind").ne_missing("dynamo_output_graph") | pl.col("payload").str.contains("c10d_functional.", literal=True))
    schedules = recs.filter(pl.col("name") == _SCHEDULE)
    if schedules.height == 0:
        return pl.DataFrame(schema=dict(COLLECTIVES_SCHEMA))
    occ = occurrence_at(schedules, events)
    schedules = schedules.with_columns(occ.alias("occurrence"))
    # the other records of the same compile, by (file, compile_id), in log order
    meta: dict[tuple, list[tuple[int, Any]]] = defaultdict(list)
    graphs: dict[tuple, list[tuple[int, str]]] = defaultdict(list)
    for r in recs.filter(pl.col("name").ne_missing(_SCHEDULE)).select("file", "compile_id", "lineno", "kind", "name", "payload").iter_rows():
        file, cid, lineno, kind, name, payload = r
        if kind == "dynamo_output_graph":
            graphs[(file, cid)].append((lineno, payload))
        elif name == _RUNTIME_META:
            meta[(file, cid)].append((lineno, json_value(payload)))
    rows: list[dict[str, Any]] = []
    graph_index: dict[tuple, int] = defaultdict(int)
    previous: dict[tuple, int] = {}
    for ev in schedules.sort("file", "lineno").iter_rows(named=True):
        key = (ev["file"], ev["compile_id"])
        gi_key = (*key, ev["occurrence"])
        gi = graph_index[gi_key]
        graph_index[gi_key] += 1
        schedule = json_value(ev["payload"])
        if not isinstance(schedule, list):
            continue
        targets = [str(x) for x in schedule if x is not None]
        # this graph's runtime meta: the last one logged before the schedule, after the previous schedule
        after = previous.get(key, -1)
        previous[key] = ev["lineno"]
        ops_meta = [m for ln, m in meta.get(key, []) if after < ln < ev["lineno"]]
        ops = (ops_meta[-1] or {}).get("ops") if ops_meta and isinstance(ops_meta[-1], dict) else None
        by_name = _nth_by([o for o in ops or [] if isinstance(o, dict)], "name") if ops else {}
        nodes: dict[tuple[str, int], dict[str, Any]] = {}
        if gi == 0:
            before = [p for ln, p in graphs.get(key, []) if ln < ev["lineno"]]
            if before:
                found = _graph_collectives(before[-1])
                nodes = _nth_by(found, "op")
        seen_target: dict[str, int] = defaultdict(int)
        seen_op: dict[str, int] = defaultdict(int)
        ci = 0
        for pos, target in enumerate(targets):
            op, kind = op_name(target), _kind(target)
            m = by_name.get((target, seen_target[target]))
            seen_target[target] += 1
            node = nodes.get((op, seen_op[op]))
            seen_op[op] += 1
            outs = (m or {}).get("outputs") or []
            shapes = [o.get("shape") for o in outs if isinstance(o, dict) and o.get("dtype") is not None]
            dtypes = [text_of(o.get("dtype")) for o in outs if isinstance(o, dict) and text_of(o.get("dtype")) is not None]
            rows.append({
                "rank": ev["rank"], "compile_id": ev["compile_id"], "occurrence": ev["occurrence"],
                "trace_id": ev["trace_id"], "graph_index": gi, "position": pos,
                "collective_index": ci if kind == "collective" else None,
                "op": op, "kind": kind, "target": target,
                "node": (node or {}).get("node"), "shape": (node or {}).get("shape"), "dtype": (node or {}).get("dtype"),
                "output_shapes": orjson.dumps(shapes).decode() if shapes else None,
                "output_dtypes": ", ".join(dtypes) if dtypes else None,
                "estimated_runtime_ns": (m or {}).get("estimated_runtime_ns"),
                "user_file": (node or {}).get("user_file"), "user_line": (node or {}).get("user_line"),
                "source": "trace", "file": ev["file"], "lineno": ev["lineno"],
            })
            ci += kind == "collective"
    return typed_frame(rows, COLLECTIVES_SCHEMA, strict=False)


def build_graph_execution(events: pl.DataFrame) -> pl.DataFrame:
    """The ``graph_execution`` table from the events (see the module's doc)."""
    recs = events.filter((pl.col("kind") == "artifact") & (pl.col("name") == _EXECUTION))
    rows: list[dict[str, Any]] = []
    block: dict[str, int] = defaultdict(int)
    for ev in recs.sort("file", "lineno").iter_rows(named=True):
        doc = json_value(ev["payload"])
        order = doc.get("graph_execution_order") if isinstance(doc, dict) else None
        b = block[ev["file"]]
        block[ev["file"]] += 1
        for i, entry in enumerate(order or []):
            cid = entry.get("compile_id") if isinstance(entry, dict) else None
            rows.append({"rank": ev["rank"], "block": b, "order": i, "compile_id": None if cid is None else str(cid),
                         "source": "trace", "file": ev["file"], "lineno": ev["lineno"]})
    return typed_frame(rows, GRAPH_EXECUTION_SCHEMA, strict=False)


_DDP_SPLIT = "optimize_ddp_split_graph"
_SUBMOD = re.compile(r"^\s*class (submod_\d+)\(")
_FORWARD = re.compile(r"^\s*def forward\(self(?:, )?(?P<args>.*)\):\s*$")
_ARG = re.compile(r'(?P<name>\w+): "(?P<dtype>[a-z]+\d*)\[(?P<shape>[^\]]*)\]')
_DTYPE_BYTES = {
    "f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1, "b8": 1,
    "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1,
}


def _nbytes(dtype: str, shape: str) -> int | None:
    size = _DTYPE_BYTES.get(dtype)
    if size is None:
        return None
    n = 1
    for d in (x.strip() for x in shape.split(",") if x.strip()):
        if not d.isdigit():
            return None
        n *= int(d)
    return n * size


def _split_submodules(payload: str | None) -> list[dict[str, Any]]:
    """The submodules of a DDPOptimizer split parent's readable text, in order."""
    out: list[dict[str, Any]] = []
    current: str | None = None
    for line in (payload or "").split("\n"):
        m = _SUBMOD.match(line)
        if m:
            current = m.group(1)
            continue
        f = _FORWARD.match(line)
        if f and current is not None:
            params = [a for a in _ARG.finditer(f.group("args")) if "_parameters_" in a.group("name")]
            sizes = [_nbytes(a.group("dtype"), a.group("shape")) for a in params]
            out.append({
                "submodule": current, "params": [a.group("name") for a in params], "param_count": len(params),
                "param_bytes": None if any(b is None for b in sizes) else sum(sizes),  # type: ignore[arg-type]
            })
            current = None
    return out


def build_ddp_splits(events: pl.DataFrame) -> pl.DataFrame:
    """The ``ddp_splits`` table from the events (see the module's doc)."""
    recs = events.filter(pl.col("kind") == _DDP_SPLIT)
    if recs.height == 0:
        return pl.DataFrame(schema=dict(DDP_SPLITS_SCHEMA))
    recs = recs.with_columns(occurrence_at(recs, events).alias("occurrence"))
    rows: list[dict[str, Any]] = []
    split: dict[tuple, int] = defaultdict(int)
    for ev in recs.sort("file", "lineno").iter_rows(named=True):
        key = (ev["file"], ev["compile_id"], ev["occurrence"])
        k = split[key]
        split[key] += 1
        subs = _split_submodules(ev["payload"])
        for pos, sub in enumerate(subs):
            rows.append({
                "rank": ev["rank"], "compile_id": ev["compile_id"], "occurrence": ev["occurrence"], "split": k,
                "position": pos, "submodules": len(subs), **sub,
                "source": "trace", "file": ev["file"], "lineno": ev["lineno"],
            })
    return typed_frame(rows, DDP_SPLITS_SCHEMA, strict=False)
