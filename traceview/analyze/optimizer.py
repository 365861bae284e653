"""Compiled optimizer steps: the compiled-optimizer + LR-scheduler pattern.

A compiled ``optimizer.step()`` (a code object of torch's ``torch/optim/``) whose recompiles are
caused by the learning rate ``self.param_groups[i]['lr']`` changing: the lr is a Python float
that the LR scheduler sets every step, so Dynamo guards on its value and recompiles each step
until the recompile limit. Torch also writes the same guard as
``___as_tensor(self.param_groups[0]['lr']).item() == v`` once the float was tensorified: it is
the same value, not another cause. The fix (torch tutorial "Running the compiled optimizer with
an LR Scheduler"): create the optimizer with a tensor lr, which the scheduler updates in place.

Pure functions of a Trace: its storms (``traceview.analyze.storms.recompile_storms``) and its
``graph_breaks`` table (the scheduler's step wrapper, which Dynamo does not trace).
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from parsers.compile_ids import bracketed
from traceview.analyze.storms import recompile_storms
from traceview.trace import Trace

_OPTIM_FILE = re.compile(r"(?:^|/)torch/optim/(?P<module>\w+)\.py$")
_LR = re.compile(r"param_groups\[(?P<group>\d+)\]\[['\"]lr['\"]\]")
_LR_SOURCE = re.compile(r"(?:___as_tensor\()?(?P<src>[\w.]*param_groups\[\d+\]\[['\"]lr['\"]\])\)?(?:\.item\(\))?")

# torch.optim module -> the class users create
_CLASSES = {
    "adam": "Adam", "adamw": "AdamW", "sgd": "SGD", "adagrad": "Adagrad", "adadelta": "Adadelta",
    "adamax": "Adamax", "asgd": "ASGD", "nadam": "NAdam", "radam": "RAdam", "rmsprop": "RMSprop",
    "rprop": "Rprop", "sparse_adam": "SparseAdam", "lbfgs": "LBFGS", "adafactor": "Adafactor",
}


def optimizer_class(filename: str | None) -> str | None:
    """`Adam` for .../torch/optim/adam.py (None for a file outside torch.optim)."""
    m = _OPTIM_FILE.search(filename or "")
    if m is None:
        return None
    return _CLASSES.get(m["module"], m["module"])


def lr_fix() -> str:
    """The documented fix (the class is an example: AdamW runs Adam.step's code)."""
    return (
        "create the optimizer with a tensor learning rate, e.g. torch.optim.AdamW(params, "
        "lr=torch.tensor(1e-3)), so that the LR scheduler updates it in place and the compiled step "
        "is reused (torch tutorial \"Running the compiled optimizer with an LR Scheduler\"); with "
        "foreach=True pass capturable=True too (torch rejects a tensor lr otherwise)"
    )


def compiled_optimizer_findings(trace: Trace, *, storms: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One finding per recompiling optimizer step whose causes are its learning rate; `storms`:
    the trace's `recompile_storms` when they were computed already."""
    out = []
    for s in recompile_storms(trace) if storms is None else storms:
        cls = optimizer_class(s.get("filename"))
        if cls is None:
            continue
        lr_causes = [c for c in s["causes"] if _LR.search(c.get("guard") or "") or _LR.search(c.get("source") or "")]
        if not lr_causes:
            continue
        sources = []
        for c in lr_causes:
            m = _LR_SOURCE.search(c.get("guard") or c.get("source") or "")
            if m and m["src"] not in sources:
                sources.append(m["src"])
        recompiles = max(len(s.get("compile_ids") or []) - 1, s["compiles"] - 1, 0)
        limit = ""
        if s["hit_recompile_limit"]:
            at = f" at {bracketed(s['limit_compile_id'])}" if s.get("limit_compile_id") else ""
            limit = f"; it hit the recompile limit{at} and runs eagerly from then on"
        src = sources[0] if sources else "the learning rate"
        out.append({
            "kind": "lr_float_recompiles",
            "rank": s["rank"], "function": s["function"], "filename": s["filename"], "line": s["line"],
            "optimizer": cls, "compiles": s["compiles"], "recompiles": recompiles,
            "hit_recompile_limit": s["hit_recompile_limit"], "limit_compile_id": s.get("limit_compile_id"),
            "compile_ids": s.get("compile_ids") or [], "lr_source": src,
            "merged_causes": len(lr_causes),
            "headline": (
                f"compiled optimizer + LR scheduler: {cls}.step recompiled {recompiles} "
                f"time{'s' if recompiles != 1 else ''} because the learning rate {src} is a Python float "
                f"the scheduler changes every step{limit}"
            ),
            "explanation": (
                f"Dynamo guards on the float's value; `___as_tensor({src}).item() == v` guards are the "
                "same value, not another cause"
            ),
            "fix": lr_fix(),
            "compile_id": s.get("compile_id"), "file": s.get("file"), "lineno": s.get("lineno"),
        })
    return out


_SCHEDULER_SKIP = re.compile(
    r"function `(?P<qual>[\w.]+\.step)` in file `[^`]*torch/optim/lr_scheduler\.py` should not be traced"
)


def scheduler_wrapper_advice(trace: Trace) -> dict[tuple, str]:
    """Advice for the graph break at `opt.step()` under an LR scheduler, keyed by the break's
    (filename, line, function): the scheduler replaces `step` with a wrapper defined in
    torch/optim/lr_scheduler.py, which Dynamo does not trace (gb0007 "Attempted to call function
    marked as skipped" naming `Adam.step` in lr_scheduler.py). Dynamo's own hint, "Avoid calling
    the function `Adam.step`", is not advice anyone can follow here."""
    graph_breaks = trace.graph_breaks
    if graph_breaks.height == 0 or "explanation" not in graph_breaks.columns:
        return {}
    rows = graph_breaks.filter(pl.col("explanation").str.contains("lr_scheduler.py", literal=True))
    out: dict[tuple, str] = {}
    for r in rows.iter_rows(named=True):
        m = _SCHEDULER_SKIP.search(r["explanation"] or "")
        if m is None:
            continue
        out[(r["filename"], r["line"], r["function"])] = (
            f"expected with a compiled optimizer step under an LR scheduler: the scheduler wraps "
            f"{m['qual']} in a function Dynamo does not trace (torch/optim/lr_scheduler.py), so the "
            "step is compiled as a frame of its own; nothing to fix (torch's tutorial compiles "
            "opt.step() and sched.step() together with fullgraph=False)"
        )
    return out
