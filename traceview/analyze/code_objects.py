"""What a compiled code object is, told the way its user knows it.

Whose code it is (parsers.code_location: torch, a named library, the user's), the class of the
module whose method it is (the guard tree's `L['self']` type: `LlamaDecoderLayer.forward`), what
torch.compile wrapped when the frame is a torch wrapper (`inner` in torch/_dynamo/external_utils.py
compiles a module whose forward is torch's own, e.g. an `nn.Sequential`: its `L['fn']` is that
module), and the user's line that called it (the innermost frame of the user's code in
`dynamo_start`'s stack, the compiles table's call_* columns). Computed once per code object
and shared by the report, the UI and the diff.

How sure: the owner and the call site are read from the trace as they are; the class is the
type torch guarded on for `self` (or the wrapper's `fn`) in the code object's first compile,
exact for that compile (a forward inherited by several classes names the first one's).
"""

from __future__ import annotations

import re
import weakref
from typing import Any

import polars as pl

from parsers.code_location import whose
from parsers.torch_trace import InputChanged, hydrate
from traceview.trace import Trace

# torch's own frames that wrap user code, by module-relative path (and function)
_WRAPPERS: tuple[tuple[str, str | None, str], ...] = (
    ("torch/_dynamo/external_utils.py", "inner", "torch.compile(model)"),
    ("torch/nn/parallel/distributed.py", None, "DistributedDataParallel"),
    ("torch/distributed/fsdp/", None, "FSDP"),
    ("torch/_dynamo/compiled_autograd.py", None, "compiled autograd"),
    ("torch/_functorch/", None, "functorch"),
)
_GUARD_TYPE = re.compile(r"type=<class '(?P<cls>[^']+)'>")
# the class of each code object, per Trace: read from the guard tree once
_CLASSES: weakref.WeakKeyDictionary[Trace, dict[tuple, tuple[str | None, bool | None]]] = weakref.WeakKeyDictionary()
# the user's line that called each compile, per Trace: (rank, compile_id, occurrence) -> site
_SITES: weakref.WeakKeyDictionary[Trace, dict[tuple, dict[str, Any]]] = weakref.WeakKeyDictionary()
# each code object's compiles, per Trace: (rank, filename) -> rows in log order
_BY_CODE: weakref.WeakKeyDictionary[Trace, dict[tuple, list[dict[str, Any]]]] = weakref.WeakKeyDictionary()


def wrapper_of(filename: str | None, function: str | None) -> str | None:
    """The torch wrapper a frame is (`torch.compile(model)`, `DistributedDataParallel`, ...), or None."""
    code = whose(filename)
    if not code.is_torch:
        return None
    for path, fn, name in _WRAPPERS:
        if code.shown.startswith(path) and (fn is None or fn == function):
            return name
    return None


def describe(trace: Trace, *, rank: Any, function: str | None, filename: str | None, line: Any,
             compile_ids: list[str] | None = None) -> dict[str, Any]:
    """One code object as its user knows it: owner, package, path (module-relative outside the
    user's code), module_class, qualname, wrapper, label (the name to show), call_site (dict of
    filename, line, function, code; None without one) and call_sites (how many distinct user
    lines entered it)."""
    code = whose(filename)
    wrapper = wrapper_of(filename, function)
    rows = _compiles_of(trace, rank, function, filename, line, compile_ids)
    sites: list[tuple] = []
    for r in rows:
        if r.get("call_filename"):
            s = (r["call_filename"], r["call_line"], r["call_function"], r["call_code"])
            if s not in sites:
                sites.append(s)
    # `layer.compile()`: nn.Module's call goes through `self._compiled_call_impl`, the module's
    # own compiled call (its hooks run inside it), seen in the stack that entered the frame
    module_compile = any(
        "self._compiled_call_impl(" in (frame or "") for r in rows for frame in (r.get("user_stack") or [])
    )
    cls, by_identity = None, None
    if rows and code.owner in ("torch", "library", "user") and function and not function.startswith("<"):
        # one guard-tree read per code object, whatever the number of ranks that compiled it
        classes = _CLASSES.setdefault(trace, {})
        key = (function, filename, line)
        if key not in classes:
            # the code object's first finished compile on any rank (an unfinished one logged no
            # guards yet), whichever rank is described first: the same class for every caller
            first = _first_finished(trace, function, filename, line) or rows[0]
            classes[key] = _module_class(trace, first, "fn" if wrapper == "torch.compile(model)" else "self")
        cls, by_identity = classes[key]
    short = cls.rsplit(".", 1)[-1] if cls else None
    if wrapper == "torch.compile(model)" and short:
        qualname = short
        label = f"{short} via torch.compile(model)"
    elif short:
        qualname = f"{short}.{function}"
        label = qualname
    elif wrapper == "torch.compile(model)":  # the guards that name the module are not logged (yet)
        qualname = None
        label = "a module via torch.compile(model)"
    else:
        qualname = None
        label = function or "?"
    return {
        "owner": code.owner,
        "package": code.package,
        "path": code.shown,
        "module_class": cls,
        "qualname": qualname,
        "wrapper": wrapper,
        "label": label,
        "call_site": (
            {"filename": sites[0][0], "line": sites[0][1], "function": sites[0][2], "code": sites[0][3]} if sites else None
        ),
        "call_sites": len(sites),
        # a method compiled for one instance (torch guards `self` by identity, ID_MATCH) or one
        # compile for every instance of the class (by type only): per-layer compiles share it
        "per_instance": by_identity if cls is not None and wrapper is None else None,
        # compiled with nn.Module.compile() (`layer.compile()`, regional compilation): its inputs
        # are made by the parent's forward, and its forward pre-hooks run inside the compiled call
        "module_compile": module_compile,
    }


def of_compile(code: dict[str, Any], trace: Trace, *, rank: Any, compile_id: Any, occurrence: Any = None) -> dict[str, Any]:
    """A code object's description (describe) for a row about one of its compiles: its
    `call_site` is that compile's own (a recompile triggered at another line than the first
    compile's is called from there), the rest shared. `code` itself is not changed."""
    if compile_id is None:
        return code
    sites = _SITES.get(trace)
    if sites is None:
        sites = {}
        c = trace.compiles
        if not c.is_empty():
            for rk, cid, occ, fn, ln, func, src in c.filter(pl.col("call_filename").is_not_null()).select(
                "rank", "compile_id", "occurrence", "call_filename", "call_line", "call_function", "call_code"
            ).iter_rows():
                sites[(rk, cid, occ or 1)] = {"filename": fn, "line": ln, "function": func, "code": src}
        _SITES[trace] = sites
    site = sites.get((rank, compile_id, occurrence or 1))
    if site is None or site == code.get("call_site"):
        return code
    return {**code, "call_site": site}


def _compiles_of(trace: Trace, rank: Any, function: Any, filename: Any, line: Any, compile_ids: list[str] | None) -> list[dict[str, Any]]:
    """The compiles of one code object on one rank, in log order (read from an index of the
    compiles table built once per Trace: a report describes hundreds of code objects)."""
    if filename is None:
        return []
    index = _BY_CODE.get(trace)
    if index is None:
        index = {}
        c = trace.compiles
        if not c.is_empty():
            stack = ["user_stack"] if "user_stack" in c.columns else []
            for r in c.sort("lineno", nulls_last=True, maintain_order=True).select(
                "file", "rank", "compile_id", "occurrence", "lineno", "metrics_lineno",
                "call_filename", "call_line", "call_function", "call_code", *stack, "function", "line", "filename",
            ).iter_rows(named=True):
                index.setdefault((r["rank"], r["filename"]), []).append(r)
        _BY_CODE[trace] = index
    wanted = set(compile_ids) if compile_ids else None
    return [
        r
        for r in index.get((rank, filename), ())
        if (function is None or r["function"] == function)
        and (line is None or r["line"] == line)
        and (wanted is None or r["compile_id"] in wanted)
    ]


def _first_finished(trace: Trace, function: Any, filename: Any, line: Any) -> dict[str, Any] | None:
    """The first compile of a code object that logged its metrics, on any rank (the lowest
    first), or None."""
    c = trace.compiles
    cond = (pl.col("filename") == filename) & (pl.col("function") == function) & pl.col("metrics_lineno").is_not_null()
    cond &= pl.col("line").is_null() if line is None else pl.col("line") == line
    rows = c.filter(cond).sort("rank", "lineno", nulls_last=True).head(1).select(
        "file", "rank", "compile_id", "occurrence", "lineno", "metrics_lineno",
    ).to_dicts()
    return rows[0] if rows else None


def _module_class(trace: Trace, row: dict[str, Any], param: str) -> tuple[str | None, bool | None]:
    """The type torch guarded `L[param]` on in this compile's guard tree (or None), and
    whether it also guarded its identity (ID_MATCH: the compile is for that one object)."""
    source = f"L['{param}']"
    known = trace.summary_guards()
    if known is not None:
        return _class_from_guards(known, row, source)
    ev = trace.index_events().filter(
        (pl.col("kind") == "dynamo_cpp_guards_str") & (pl.col("file") == row["file"]) & (pl.col("compile_id") == row["compile_id"])
    )
    if row.get("lineno") is not None:
        ev = ev.filter(pl.col("lineno") >= row["lineno"])
    if row.get("metrics_lineno") is not None:
        ev = ev.filter(pl.col("lineno") <= row["metrics_lineno"])
    if ev.is_empty():
        return None, None
    ev = ev.head(1)
    if "payload_start" not in ev.columns and ev["payload"].null_count() == ev.height:
        return _class_from_guards(trace.guards, row, source)  # read from an export: its guards table
    try:
        payload = hydrate(ev)[0]["payload"][0] if ev["payload"].null_count() else ev["payload"][0]
    except (InputChanged, OSError):  # the log changed or went away since it was parsed
        return None, None
    cls = class_in_guard_tree(payload or "", param)
    return cls, (f"ID_MATCH: ___check_obj_id(L['{param}'], " in (payload or "")) if cls else None


def class_in_guard_tree(text: str, param: str) -> str | None:
    """The class of `L[param]` in a guard tree's text (`GuardManager: source=L['self'], …,
    type=<class 'm.Block'>` or its TYPE_MATCH guard), or None."""
    m = re.search(r"source=L\['" + re.escape(param) + r"'\], accessed_by=[^\n]*?type=<class '([^']+)'>", text)
    if m is None:
        m = re.search(r"TYPE_MATCH: ___check_type_id\(L\['" + re.escape(param) + r"'\], \d+\), type=<class '([^']+)'>", text)
    return m.group(1) if m else None


def _class_from_guards(guards: pl.DataFrame, row: dict[str, Any], source: str) -> tuple[str | None, bool | None]:
    g = guards.filter(
        (pl.col("file") == row["file"]) & (pl.col("compile_id") == row["compile_id"]) & (pl.col("guard_source") == source)
    )
    if "occurrence" in g.columns and row.get("occurrence") is not None:
        g = g.filter(pl.col("occurrence").is_null() | (pl.col("occurrence") == row["occurrence"]))
    by_identity = "ID_MATCH" in set(g["kind"].to_list())
    for code in g.filter(pl.col("code").str.contains("type=<class", literal=True))["code"].to_list():
        m = _GUARD_TYPE.search(code or "")
        if m:
            return m["cls"], by_identity
    return None, None
