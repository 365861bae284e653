"""torch.compile applied, nothing compiled: the model ran eagerly (issue 39, item 4).

Dynamo compiled frames (the trace has their `compilation_metrics`), yet no graph reached a
backend: every compile that finished ended with 0 graph ops (torch's `graph_op_count`) and
no backend compile time. Then torch.compile had no effect at all, whatever else the summary
lists (graph breaks, recompiles of empty frames), and that is the first thing to say.

Why, read from the records:

* **DDP's wrapper compiled, the module never** (analyze.ddp): `torch.compile(DDP(model))`
  breaks at DDP's own `_inside_ddp_forward` by design, so that the wrapped module's forward is
  compiled as a frame of its own; when no compiled frame is outside torch's and Python's own
  files, the module's forward never was: it is torch's own code (an `nn.Sequential`, any
  torch module), and Dynamo starts frames only outside torch's files (torch 2.13,
  torch/_dynamo/trace_rules.py `check_file`: torch's files are inlined only into a frame being
  traced). The fix, checked on a real run (fixtures/corpus/ddp_sequential_inner_compile): the
  module compiled inside the wrapper, `DDP(torch.compile(model))`; torch._dynamo.config.
  optimize_ddp does not change it (checked: with it off the same model still ran eagerly).
* **frames skipped**: a graph break that sent a whole frame to eager (analyze.hotspots).
* otherwise: the frames Dynamo compiled hold no tensor operations, so the work runs in frames
  it did not compile.

Scope: a trace whose compiles report their op counts (torch 2.x `compilation_metrics`), at
least one compile that finished (when every compile failed, the failure is the finding), and
no compile without a Dynamo frame (AOTInductor). A run where some graphs reached the backend
is not this finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from parsers.code_location import whose
from traceview.analyze.ddp import INSIDE_FORWARD, wrapper_break
from traceview.analyze.findings import ranks_text

if TYPE_CHECKING:
    from traceview.trace import Trace

DDP_FIX = (
    "compile the module inside the wrapper: DDP(torch.compile(model)) instead of torch.compile(DDP(model)). "
    "DDP's forward then runs eagerly around the compiled module and Dynamo compiles the module through "
    "torch.compile's wrapper, split at DDP's buckets (checked with torch 2.13 on two gloo ranks: the "
    "nn.Sequential's graph reached Inductor; torch._dynamo.config.optimize_ddp does not change it, with it off "
    "the model still ran eagerly). torch.compile(DDP(model)) compiles only a module whose forward is your own code"
)


def compiled_nothing(trace: Trace) -> dict[str, Any] | None:
    """The finding (docs/report.md, `compiled_nothing`) when torch.compile was applied and no
    graph reached a backend, else None: ranks, compiles (how many, all with 0 graph ops),
    frames (the compiled code objects, as `function (path)`), why (`ddp_wrapper`,
    `frames_skipped`, `empty_frames`), message, reason, next_step, certainty, evidence,
    rank, compile_id, file, lineno."""
    c = trace.compiles
    if c.height == 0 or "graph_op_count" not in c.columns:
        return None
    if (c["compile_kind"].fill_null("dynamo") != "dynamo").any():
        return None  # AOTInductor compiles have no Dynamo graph: another story
    dyn = c.filter(pl.col("frame_id").is_not_null())
    if dyn.height == 0 or dyn["graph_op_count"].drop_nulls().len() == 0:
        return None  # no op counts logged: nothing to say
    reached = (pl.col("graph_op_count").fill_null(0) > 0) | (pl.col("backend_compile_time_s").fill_null(0) > 0)
    if dyn.filter(reached).height:
        return None
    finished = dyn.filter(pl.col("fail_type").is_null())
    if finished.height == 0:
        return None  # every compile failed: the failures say it
    ranks = sorted({r for r in dyn["rank"].to_list() if r is not None})
    frames = []
    for fn, fname in dyn.select("function", "filename").unique(maintain_order=True).iter_rows():
        frames.append(f"{fn or '?'} ({whose(fname).shown if fname else '?'})")
    owners = {whose(f).owner for f in dyn["filename"].drop_nulls().to_list()}
    gb = trace.graph_breaks
    ddp_break = None
    skipped = None
    if gb.height:
        rows = gb.filter(pl.col("source") == "trace") if (gb["source"] == "trace").any() else gb
        for r in rows.iter_rows(named=True):
            if ddp_break is None and wrapper_break(r) == INSIDE_FORWARD:
                ddp_break = r
            if skipped is None and r.get("frame_skipped"):
                skipped = r
    first = dyn.sort("lineno", nulls_last=True).row(0, named=True)
    on = ranks_text(ranks).strip()
    where = f" on {on}" if on else ""
    n = dyn.height
    if ddp_break is not None and owners <= {"torch", "python"}:
        why = "ddp_wrapper"
        reason = (
            f"DistributedDataParallel's forward broke at {INSIDE_FORWARD} (torch's design: the wrapped module is "
            f"to be compiled as a frame of its own), and no frame of the module was compiled: every compiled frame "
            f"is torch's or Python's own code ({', '.join(frames[:4])}{' …' if len(frames) > 4 else ''}). The "
            f"module's forward is torch's own code (an nn.Sequential or another torch module), and Dynamo starts a "
            f"frame only outside torch's files (it inlines them into a frame it traces)"
        )
        evidence = ddp_break
        next_step = DDP_FIX
        certainty = "certain that nothing compiled (torch's op counts); the module's kind is inferred (the trace does not name it)"
    elif skipped is not None:
        why = "frames_skipped"
        reason = (
            f"the compiled frame {skipped.get('frame_function') or skipped.get('function') or '?'} fell back to eager as a "
            f"whole ({skipped.get('reason') or 'a graph break'}); the other compiled frames hold no tensor operations"
        )
        evidence = skipped
        next_step = "fix the graph break that skipped the frame (GRAPH BREAKS): the whole frame runs eagerly until then"
        certainty = "certain"
    else:
        why = "empty_frames"
        reason = (
            f"the frames Dynamo compiled ({', '.join(frames[:4])}{' …' if len(frames) > 4 else ''}) hold no tensor "
            f"operations: the model's work runs in frames it did not compile"
        )
        evidence = first
        next_step = (
            "compile the function or module that does the tensor work (torch.compile on the model or its forward); "
            "TORCH_LOGS=graph_breaks,dynamo shows what Dynamo skipped"
        )
        certainty = "certain that nothing compiled (torch's op counts)"
    return {
        "ranks": ranks,
        "compiles": n,
        "frames": frames,
        "why": why,
        "message": (
            f"torch.compile(model) had no effect: the model ran eagerly{where}: no graph reached a backend "
            f"({n} compile{'s' if n != 1 else ''}, none with a graph op)"
        ),
        "reason": reason,
        "next_step": next_step,
        "certainty": certainty,
        "rank": evidence.get("rank"),
        "compile_id": evidence.get("compile_id"),
        "file": evidence.get("file"),
        "lineno": evidence.get("lineno"),
    }
