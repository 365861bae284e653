"""How findings are worded: the words and names every view shares, importable without polars
(the summary renders a cached findings document with these alone).

`Paths` names a report's files (module-relative for torch's and libraries' code, the shortest
unambiguous suffix for the user's) and compiled code objects as their user knows them;
`seconds_text`, `plural`, `rank_prefix` and `phases_text` write numbers, counts, ranks and a
compile's phases one way; `CATEGORY_WORDS` names failure and crash categories;
`STATUS_WORDS`, `unfinished_text` and `rank_end_text` say a compile's status (the compile
account's) and a rank's state when the capture ends (the rank account's) in the pictures.
"""

from __future__ import annotations

import re
from typing import Any

from parsers.code_location import whose
from parsers.compile_ids import bracketed, kind_label
from traceview.analyze.findings import code_label

# why a DDP wrapper's own graph break is there, in one line (analyze.ddp's explanation opens with it)
DDP_WRAPPER_WHY = "DDP's forward runs its own bookkeeping eagerly around the compiled module"

CRASH_CATEGORY_WORDS = {
    "out_of_memory": "out of device memory",
    "cuda_graphs": "CUDA-graphs error",
    "cuda_illegal_memory_access": "CUDA illegal memory access",
    "triton_assert": "Triton device-side assert (index out of bounds)",
    "triton": "Triton failure",
    "segfault": "segmentation fault",
    "runtime_error_in_compiled_code": "runtime error in compiled code",
    "user_error_after_compile": "error in the program after compiling",
    "stance_refused": "a compile stance (set_stance) refused the compile a call needed",
    "launcher_child_failed": "torchrun: a rank failed",
    "distributed_desync": "distributed desync (the ranks' collectives out of step)",
}


CATEGORY_WORDS = {
    "graph_break": "graph break",
    "compile_worker_died": "a compile worker process was killed (lost to the host, not the model)",
    "backend_compiler_failure": "backend compiler failure",
    "recompile_limit": "recompile limit",
    "internal_dynamo_error": "internal Dynamo error",
    "export_guard_data_dependent": "export / guard / data-dependent error",
    "export_data_dependent": "torch.export could not capture control flow on a tensor's value",
    "user_exception": "user exception",
    "accuracy": "accuracy failure",
    "user_error": "error in your code (fails in eager too)",
    "constraint_violation": "constraint violation",
    "other": "other failure",
    **CRASH_CATEGORY_WORDS,
}


# a compile's status (traceview.analyze.accounts.compiles.STATUSES) as the pictures and the
# compile list say it
STATUS_WORDS = {
    "finished": "finished",
    "failed": "failed",
    "interrupted": "interrupted when the job ended",
    "never_ended": "never ended",
    "unknown": "no time logged",
}


def unfinished_text(status: str | None, phase: str | None = None, part: str | None = None) -> str:
    """An unfinished piece or compile as the pictures say it: "interrupted when the job ended
    (backward, in inductor code_gen)", "never ended (in AOTAutograd)"; `status` is the compile
    account's ("interrupted", "never_ended")."""
    where = ", ".join(x for x in (part if part and part != "forward" else None, f"in {phase}" if phase else None) if x)
    words = STATUS_WORDS.get(status or "", status or "unfinished")
    return f"{words} ({where})" if where else words


def rank_end_text(entry: dict[str, Any]) -> str:
    """A rank's state when the capture ends, short, for the end of its row in a timeline: one
    entry of traceview.analyze.accounts.ranks.rank_account ("compiling [4/1] (in inductor
    code_gen)", "waiting for rank 1 (likely)", "running [4/1]", "idle 5.17s"); "" when unknown. A
    waiting rank is read from its silence: likely, not certain, and said so."""
    state = entry.get("state")
    if state == "compiling":
        c = entry.get("compile") or {}
        part = c.get("part") if c.get("part") not in (None, "forward") else None
        where = ", ".join(x for x in (part, f"in {c['phase']}" if c.get("phase") else None) if x)
        return f"compiling {bracketed(c.get('compile_id'), c.get('occurrence'))}" + (f" ({where})" if where else "")
    if state == "waiting":
        behind = entry.get("behind") or []
        return f"waiting for {'rank' if len(behind) == 1 else 'ranks'} {', '.join(str(b) for b in behind)} (likely)"
    if state == "running":
        run = entry.get("running") or {}
        return f"running {bracketed(run.get('compile_id'))}" if run.get("compile_id") else "running"
    if state == "idle":
        return f"idle {seconds_text(entry.get('idle_s'))}"
    return ""


def seconds_text(seconds: float | None) -> str:
    """Seconds as every view writes them: 2 decimals below 100 s."""
    v = float(seconds or 0.0)
    return f"{v:.2f}s" if v < 100 else f"{v:.0f}s"


def plural(n: int, word: str, plural_word: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural_word or word + 's')}"


def rank_prefix(r: int | None) -> str:
    """"rank 3 " for a ranked process, "" for one without a rank."""
    return "" if r is None else f"rank {r} "


def _of_which(ph: dict[str, Any]) -> str:
    """What of Inductor's time went to codegen and autotuning, as parts that do not overlap
    (autotuning during codegen is said to be part of it), so they never add up to more than
    Inductor's time: " (of which codegen 8.97s, 4.89s of it autotuning)"."""
    codegen, at = ph.get("codegen") or 0, ph.get("autotuning") or 0
    in_cg = min(ph.get("autotuning_in_codegen") or 0, at)
    inner = []
    if codegen:
        inner.append(f"codegen {seconds_text(codegen)}" + (f", {seconds_text(in_cg)} of it autotuning" if seconds_text(in_cg) != seconds_text(0) else ""))
    rest = at - in_cg if codegen else at
    if seconds_text(rest) != seconds_text(0):
        inner.append(f"autotuning {seconds_text(rest)}" + (" outside codegen" if codegen else ""))
    return f" (of which {', '.join(inner)})" if inner else ""


def phases_text(ph: dict[str, Any], *, backward_pieces: int | None = None) -> str:
    """Phase seconds (analyze.compile_time.compile_phases of one compile, phase_totals of
    many) in one line: the parts of the compile time, nested ones in parentheses as parts of
    their phase: "dynamo 0.64s, aot 1.87s, inductor 123s (of which codegen 118s, 111s of it
    autotuning), backward 1.22s". `backward_pieces`: how many backward graphs one compile's
    backward is (the compiles table's `bwd_pieces`; DDPOptimizer compiles one per gradient
    bucket), said when more than one: "backward 10.3s in 4 pieces"."""
    parts = [f"dynamo {seconds_text(ph.get('dynamo') or 0)}"]
    if ph.get("inductor"):
        parts.append(f"aot {seconds_text(ph.get('aot') or 0)}")
        parts.append(f"inductor {seconds_text(ph['inductor'])}" + _of_which(ph))
    else:
        parts.append(f"backend {seconds_text(ph.get('aot+backend') or 0)}")
    if ph.get("backward"):
        bwd_at = ph.get("backward_autotuning") or 0
        pieces = f" in {backward_pieces} pieces" if backward_pieces and backward_pieces > 1 else ""
        parts.append(f"backward {seconds_text(ph['backward'])}{pieces}" + (f" (of which autotuning {seconds_text(bwd_at)})" if bwd_at else ""))
    return ", ".join(parts)


class Paths:
    """Short, unambiguous names for the files of a report: module-relative for torch's, a
    library's and Python's code (parsers.code_location), else the shortest path suffix no other
    user file shares. Every view names a file through the report's Paths."""

    def __init__(self, report: dict[str, Any]) -> None:
        names: set[str] = set()
        for s in report.get("recompiles") or []:
            names.add(s.get("filename") or "")
            names.add(((s.get("code") or {}).get("call_site") or {}).get("filename") or "")
        for g in report.get("graph_breaks") or []:
            names.update((g.get("filename") or "", g.get("frame_filename") or ""))
        for f in (report.get("failures") or []) + (report.get("crashes") or []):
            names.add(f.get("filename") or "")
        for u in report.get("unfinished_compiles") or []:
            names.add(u.get("filename") or "")
        for f in report.get("failures") or []:
            names.add(((f.get("code") or {}).get("call_site") or {}).get("filename") or "")
        for c in report.get("crashes") or []:
            names.add((((c.get("compile") or {}).get("code") or {}).get("call_site") or {}).get("filename") or "")
        ct = report.get("compile_time") or {}
        for t in (ct.get("top") or []) + (ct.get("by_function") or []):
            names.add(t.get("filename") or "")
            names.add(((t.get("code") or {}).get("call_site") or {}).get("filename") or "")
        facts = report.get("facts") or {}
        for f in (facts.get("specializations") or []) + (facts.get("unbacked_symbols") or []):
            names.add(f.get("user_file") or "")
        names.discard("")
        self._short: dict[str, str] = {}
        local = [n for n in names if whose(n).is_user]
        for n in names:
            if not whose(n).is_user:
                self._short[n] = whose(n).shown
                continue
            parts = n.split("/")
            for k in range(1, len(parts) + 1):
                suffix = "/".join(parts[-k:])
                # another file with this suffix; not the same file written with a shorter
                # prefix (a text log's `wt/x/train.py` for the trace's `/work/wt/x/train.py`)
                if not any(
                    o != n and (o == suffix or o.endswith("/" + suffix)) and not (o.endswith("/" + n) or n.endswith("/" + o))
                    for o in local
                ):
                    self._short[n] = suffix
                    break
            else:
                self._short[n] = n

    def code(self, row: dict[str, Any]) -> str:
        """A compiled code object as its user knows it (findings.code_label)."""
        return code_label(row, self.show)

    def compile_name(self, r: dict[str, Any]) -> str:
        """`function (place)` of a Dynamo compile; what a compile without a frame was, and where
        it came from (the piece of a Dynamo compile's graph, or the line that called Inductor)."""
        if r.get("compile_kind") not in (None, "dynamo") and not r.get("function"):
            name = kind_label(r["compile_kind"]) + (" at run time" if r.get("at_run_time") else "")
            piece = f"{r['graph_piece']} of " if r.get("graph_piece") else ""
            if r.get("parent_compile_id"):
                return f"{name} ({piece}{bracketed(r['parent_compile_id'])}'s graph)"
            if len(r.get("parent_candidates") or []) > 1:  # which compile's code ran is not in the log
                return f"{name} ({piece}{' or '.join(bracketed(c) for c in r['parent_candidates'])}'s graph)"
            if r.get("call_filename"):
                return f"{name} (called at {self.show(r['call_filename'], r.get('call_line'))})"
            return name
        return self.code(r)

    def show(self, filename: str | None, line: Any = None) -> str:
        if not filename:
            return "?"
        s = self._short.get(filename, filename)
        return f"{s}:{line}" if line is not None else s


def stop_words(kind: str, target: str, signal: str) -> str:
    """The findings line's words for a stop (analyze.stops)."""
    if kind == "rank_killed":
        return f"{target.split(' (pid', 1)[0]} killed by {signal}"
    if kind == "interrupt":
        return "interrupted (KeyboardInterrupt)"
    return f"the job was stopped from outside ({signal})"


# The words of a cache bypass's cause (analyze.compile_facts.BYPASS_RULES: torch's reason text
# -> owner and cause): what makes the graph uncacheable and, for the user's own, how to make it
# cacheable.
BYPASS_CAUSES: dict[str, str] = {
    "ddp_optimizer": "DDPOptimizer (torch.compile of a DDP model) compiles each gradient bucket's piece of the graph "
                     "with fakify_first_call, which AOTAutograd's cache refuses",
    "no_shape_env": "Inductor was called on a graph outside a Dynamo compile (torch._inductor.compile, e.g. by a "
                    "backend compiling pieces of its graph at run time), with no shape env, which the FX graph cache "
                    "needs to keep a graph's guards: torch._inductor.standalone_compile(gm, inputs, "
                    "dynamic_shapes=\"from_example_inputs\") makes one and looks the cache up",
    "dtensor_from_local": "Dynamo puts DTensor.from_local into the graph as a function it makes anew for each "
                          "compile (`prim from_local`), which AOTAutograd's cache cannot hash",
    "torch_function": "the graph calls a function of torch's that AOTAutograd's cache has no rule for",
    "higher_order_op": "the graph holds a higher-order operator that torch marks uncacheable",
    "backward_state": "the graph holds compiled autograd's backward state (BackwardState), which the cache cannot keep",
    "custom_pass": "a custom Inductor pass that is not a CustomGraphPass with a uuid() "
                   "(torch._inductor.custom_graph_pass): give it one to make the graph cacheable",
    "custom_scheduler_pass": "a custom scheduler pass that is not a CustomSchedulerPass: make it one to make the "
                             "graph cacheable",
    "sac_context_fn": "selective activation checkpointing's context_fn has no cache_hash attribute: set one to make "
                      "the graph cacheable",
    "memory_budget_callable": "a custom activation-memory-budget estimator or solver without a uuid(): "
                              "CustomRuntimeEstimator / CustomKnapsackSolver with a uuid() make the graph cacheable",
    "user_function": "the graph calls a function outside torch that AOTAutograd's cache cannot hash (as a custom op, "
                     "torch.library.custom_op, it would be cacheable)",
    "fx_graph_cache_off": "the FX graph cache is off (torch._inductor.config.fx_graph_cache, "
                          "TORCHINDUCTOR_FX_GRAPH_CACHE=0), and AOTAutograd's cache needs it",
    "freezing": "freezing (torch._inductor.config.freezing) puts the parameters into the graph as constants, which "
                "the cache does not keep",
    "bisector": "the compiler bisector is running, which turns caching off",
    "constant_folding": "AOTInductor's run-time constant folding (aot_inductor.use_runtime_constant_folding) turns "
                        "caching off",
}
CACHE_NAMES: dict[str, str] = {"fx_graph": "FX graph", "aot_autograd": "AOTAutograd"}


def bypass_consequence(caches: list[str], cause: str | None = None) -> str:
    """What a bypass of `caches` costs: which part of the compile a warm cache cannot skip (with
    the FX graph cache off, `fx_graph_cache_off`, none of it)."""
    if set(caches) == {"aot_autograd"} and cause != "fx_graph_cache_off":
        return "AOTAutograd traces these graphs again on every run (the FX graph cache can still serve Inductor's part)"
    if set(caches) == {"fx_graph"}:
        return "Inductor compiles these graphs from scratch on every run"
    return "every run compiles these graphs from scratch"


_BOUND = re.compile(r"^(?P<sym>[a-z]+\d+) (?P<op>>=|<=) (?P<v>-?\d+)$")


def asserts_text(symbols: list[str], asserts: list[str]) -> str | None:
    """The runtime asserts on a group's symbols, short: `u0 in [0, 16]`, `each >= 0` when
    every symbol has the same bounds, else the first three expressions."""
    if not asserts:
        return None
    bounds: dict[str, dict[str, str]] = {}
    parsed = 0
    for a in asserts:
        if m := _BOUND.match(a):
            bounds.setdefault(m["sym"], {})[m["op"]] = m["v"]
            parsed += 1
    kinds = {tuple(sorted(b.items())) for b in bounds.values()}
    if parsed == len(asserts) and set(bounds) == set(symbols) and len(kinds) == 1:
        b = bounds[symbols[0]]
        who = symbols[0] if len(symbols) == 1 else "each"
        if ">=" in b and "<=" in b:
            return f"{who} in [{b['>=']}, {b['<=']}]"
        op = ">=" if ">=" in b else "<="
        return f"{who} {op} {b[op]}"
    more = f", … ({len(asserts)} in all)" if len(asserts) > 3 else ""
    return ", ".join(asserts[:3]) + more




# torch's test-only fault injection: what each setting makes Inductor (or Dynamo) do
_INJECTED = {
    "compile_error": "writes every relu as `compile error!`, so the kernel does not compile",
    "runtime_error": "makes every relu fail when the kernel runs",
    "accuracy": "makes every relu return x + 1: wrong results on purpose",
}


def injected_settings(settings: str | None) -> list[str]:
    """The fault-injection settings among a compile's test-only ones (parsers.compiles
    `testing_only_config`: `torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY =
    'compile_error'`, ...)."""
    return [s.strip() for s in (settings or "").split(";") if "inject_" in s]


def injection_words(settings: str | None) -> tuple[str, str] | None:
    """(cause, next step) of a failure the run's own config asked for (injected_settings),
    or None: torch's test-only fault injection is the cause, not a bug of torch's or of the
    model, and the minifier would only reproduce the injected bug."""
    found = injected_settings(settings)
    if not found:
        return None
    what = []
    for s in found:
        name, _, value = s.partition(" = ")
        op = re.search(r"inject_(\w+?)_bug", name)
        effect = _INJECTED.get(value.strip("'\""))
        if op and effect:
            effect = effect.replace("relu", op.group(1))
        what.append(f"{s} ({effect})" if effect else s)
    them = "it" if len(found) == 1 else "them"
    cause = (
        f"the run's own config asked for this failure: {'; '.join(what)}: torch's test-only fault injection, "
        "not a bug in torch or in your model"
    )
    step = (
        f"remove {'; '.join(s.partition(' = ')[0] for s in found)} (or set {them} to None): "
        "the setting exists for torch's tests and the minifier's documentation; minifying or reporting this "
        "failure would only reproduce the injected bug"
    )
    return cause, step
