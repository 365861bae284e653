"""DistributedDataParallel as the trace shows it, and DDP's own graph breaks.

What torch 2.13 does when the DDP wrapper is compiled (`torch.compile(DDP(model))`), read in
torch/nn/parallel/distributed.py and torch/_dynamo/convert_frame.py:

* `DistributedDataParallel.forward` runs `_pre_forward` (the reducer's `prepare_for_forward`
  and `Logger.set_runtime_stats_and_log`, a C++ method Dynamo cannot trace: gb0156), then the
  wrapped module inside `_inside_ddp_forward`, a context manager marked
  `@torch._disable_dynamo(recursive=False)` on purpose ("dynamo only kicks in for the
  'module_to_run' underneath": gb0007, "marked as skipped"), then `_post_forward` (the reducer's
  `prepare_for_backward`). Both breaks are the wrapper's design: DDP's bookkeeping runs
  eagerly around the module, on every rank alike.
* While `_inside_ddp_forward` is active, a frame Dynamo compiles goes through DDPOptimizer
  (`torch._dynamo.config.optimize_ddp`, on by default), which splits its graph at DDP's bucket
  boundaries so the all-reduce of one bucket overlaps the backward of the next; the split is
  logged (`optimize_ddp_split_graph`, the `ddp_splits` table) when there is more than one
  bucket. `optimize_ddp` chooses how that graph is split; the wrapper's breaks stay.
* The module's forward is compiled only when it is a frame Dynamo starts on: a frame in
  torch's own files (an `nn.Sequential`, any torch module called directly) is never started
  on (torch/_dynamo/trace_rules.py `check_file`: torch's files are inlined only when called
  from a frame being traced), so such a model runs eagerly (analyze.eager_model).
* The gradient all-reduces are the reducer's hooks in the backward: no compiled graph holds
  them, so torch logs no collective schedule for them.

`wrapper_break(row)` names a graph break that is one of DDP's own; `ddp_evidence(trace)` says
what in the trace shows that the job ran DDP.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import polars as pl

from parsers.code_location import whose
from traceview.analyze.wording import DDP_WRAPPER_WHY

if TYPE_CHECKING:
    from traceview.trace import Trace

DDP_FILE = "torch/nn/parallel/distributed.py"
INSIDE_FORWARD = "DistributedDataParallel._inside_ddp_forward"
LOGGER = "Logger.set_runtime_stats_and_log"

_INSIDE = re.compile(r"DistributedDataParallel\._inside_ddp_forward")
_LOGGER = re.compile(r"\bset_runtime_stats_and_log\b")

WRAPPER_BREAK_EXPLANATION = (
    f"{DDP_WRAPPER_WHY}: the reducer's "
    "prepare_for_forward and Logger.set_runtime_stats_and_log (C++, not traceable) before it, "
    "prepare_for_backward after it; torch marks _inside_ddp_forward not traceable on purpose "
    "(@torch._disable_dynamo in torch/nn/parallel/distributed.py) so that Dynamo compiles the "
    "wrapped module's forward as a frame of its own, split at DDP's buckets by DDPOptimizer "
    "(torch._dynamo.config.optimize_ddp). Nothing of yours to avoid; the breaks cost only DDP's "
    "eager bookkeeping. To compile without them, compile the inner module instead: "
    "DDP(torch.compile(model))"
)


def wrapper_break(row: dict[str, Any]) -> str | None:
    """Which of DDP's own graph breaks a graph-break row (the graph_breaks table's columns:
    reason, explanation, debug_context, filename, function) is: `INSIDE_FORWARD`, `LOGGER`, or
    None for any other break."""
    text = "\n".join(str(row.get(k) or "") for k in ("reason", "explanation", "debug_context", "hint"))
    if _INSIDE.search(text):
        return INSIDE_FORWARD
    if _LOGGER.search(text) and ("Logger" in text or whose(row.get("filename")).shown == DDP_FILE):
        return LOGGER
    return None


def ddp_evidence(trace: Trace) -> list[str]:
    """What in the trace shows that the job ran DistributedDataParallel, each said as the
    record that shows it (empty when nothing does): DDP's own graph breaks, DDPOptimizer's
    split graphs, compiled frames of DDP's file."""
    out: list[str] = []
    gb = trace.graph_breaks
    if gb.height:
        found: dict[str, int] = {}
        # a break logged in the trace and in the text log is counted once: the trace's rows
        rows = gb.filter(pl.col("source") == "trace") if (gb["source"] == "trace").any() else gb
        # each distinct break once, with how many rows it has (the same break on thousands of ranks)
        keys = [k for k in ("reason", "explanation", "debug_context", "hint", "filename") if k in rows.columns]
        for r in rows.group_by(keys, maintain_order=True).agg(pl.len().alias("_rows")).iter_rows(named=True):
            which = wrapper_break(r)
            if which:
                found[which] = found.get(which, 0) + r["_rows"]
        for which, n in found.items():
            out.append(f"graph breaks at {which} ({n})")
    splits = trace.ddp_splits
    if splits.height:
        n = splits.select("rank", "compile_id", "split").unique().height if "split" in splits.columns else splits.height
        out.append(f"DDPOptimizer split graphs (optimize_ddp_split_graph: {n})")
    c = trace.compiles
    if c.height and "filename" in c.columns:
        files = [f for f in c["filename"].drop_nulls().unique().to_list() if whose(f).shown == DDP_FILE]
        if files:
            out.append(f"compiled frames of {DDP_FILE}")
    return out
