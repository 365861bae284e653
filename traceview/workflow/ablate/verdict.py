"""The verdict of `traceview ablate`: which follow-up rungs tell something after the backend
ladder, whether the rungs printed the same output, which component fails first in the terms of
PyTorch's troubleshooting guide, the next step, and whether the minifier applies.

Pure functions of the rungs' results (`RungRun`); nothing here runs a process.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from traceview.printable import one_line
from traceview.workflow.ablate.rung import BACKENDS, COMPILER_FAILURES, Rung, RungRun

COMPONENT = {
    "eager": "dynamo",
    "aot_eager": "aot_autograd",
    "aot_eager_decomp_partition": "decompositions",
    "inductor": "inductor",
}
COMPONENT_WORDS = {
    "dynamo": "a Dynamo problem (a graph break, a Dynamo bug, or the program's own code under Dynamo)",
    "aot_autograd": "an AOTAutograd problem (tracing the forward/backward graphs)",
    "decompositions": "a problem in Inductor's decompositions or the min-cut partitioner",
    "inductor": "an Inductor problem (lowering, code generation or compiling the generated code)",
    "cudagraphs": "a CUDA-graphs problem (Inductor's code runs in its default mode; the CUDA graphs of the program's mode fail)",
    "custom_backend": "a problem in the program's own backend",
    "program": "a problem in the program itself: it fails without torch.compile too",
    "accuracy": "an accuracy problem",
    "none": "no problem reproduced",
    "nothing_compiled": "nothing to ablate",
    "inconclusive": "inconclusive",
}
COMPONENT_SHORT = {
    "dynamo": "Dynamo",
    "aot_autograd": "AOTAutograd",
    "decompositions": "Inductor's decompositions and the partitioner",
    "inductor": "Inductor",
}


# ---------------------------------------------------------------------- follow-up rungs
def follow_ups(runs: list[RungRun], done: set[str]) -> tuple[list[Rung], list[dict[str, str]]]:
    """Rungs worth adding after the backend ladder (each with why), and those not worth it."""
    add: list[Rung] = []
    skip: list[dict[str, str]] = []
    ladder = [r for r in runs if r.rung.is_ladder]
    by_backend = {r.rung.backend: r for r in ladder}
    first_fail = next((r for r in sorted(ladder, key=lambda r: BACKENDS.index(r.rung.backend)) if not r.passed), None)
    asked = asked_settings(runs)
    devices = sorted({d for r in runs for d in r.analysis.get("devices", [])})
    gpu = any(d != "cpu" for d in devices)

    def want(rung: Rung, why: str) -> None:
        if rung.name not in done and all(r.name != rung.name for r in add):
            add.append(replace(rung, why=why))

    custom = sorted({b for b in asked["backends"] if b not in (*BACKENDS, None)})
    if custom:
        want(Rung(None), f"the program asks for backend {', '.join(repr(b) for b in custom)}, which the ladder replaces: this rung runs the program as written")
    if first_fail is not None and first_fail.rung.backend == "eager":
        want(Rung(None, disable=True), "eager fails: does the program fail without torch.compile as well?")
    if first_fail is not None and first_fail.rung.backend == "inductor":
        own_modes = sorted({m for m in asked["modes"] if m and m != "default"})
        if own_modes:
            want(Rung("inductor", mode="default", set_mode=True), f"the program asks for mode {', '.join(own_modes)}: does Inductor's default mode pass?")
        if gpu:
            want(Rung("inductor", mode="reduce-overhead", set_mode=True), "Inductor fails: does it with CUDA graphs (reduce-overhead)?")
            want(Rung("inductor", mode="max-autotune", set_mode=True), "Inductor fails: does it with other kernel choices (max-autotune)?")
        else:
            skip.append({
                "rung": "inductor:mode=reduce-overhead",
                "why": "not run: reduce-overhead adds CUDA graphs, which apply to CUDA tensors only; on CPU it compiles the same code as the default mode",
            })
            want(
                Rung("inductor", mode="max-autotune", set_mode=True),
                "Inductor fails: does it with other kernel choices? On CPU max-autotune only autotunes matrix "
                "multiplies (ATen against Inductor's C++ GEMM templates, for constant weights and bmm); "
                "its coordinate-descent tuning and CUDA graphs apply to GPU code only",
            )
    if first_fail is not None and first_fail.rung.backend in BACKENDS and first_fail.rung.backend != "eager":
        b = first_fail.rung.backend
        if first_fail.analysis.get("dynamic_shapes"):
            want(Rung(b, dynamic=False, set_dynamic=True), f"the failing {b} compiles have symbolic (dynamic) shapes: does {b} pass with static shapes?")
        elif False not in asked["dynamics"]:
            skip.append({"rung": f"{b}:dynamic=false", "why": f"not run: the failing {b} compiles have static shapes already"})
    if first_fail is None and "inductor" in by_backend:
        ind = by_backend["inductor"]
        n = int(ind.analysis.get("recompiles") or 0)
        if n and True not in asked["dynamics"]:
            want(Rung("inductor", dynamic=True, set_dynamic=True), f"{n} recompiles with inductor: does dynamic=True avoid them?")
        elif not n:
            skip.append({"rung": "inductor:mode=*, :dynamic=*", "why": "not run: every backend passes and inductor does not recompile, so modes and dynamic settings have nothing to explain"})
    return add, skip


def asked_settings(runs: list[RungRun]) -> dict[str, list[Any]]:
    """What the program's torch.compile calls asked for, as the bootstrap recorded it."""
    calls = [c.get("asked") or {} for r in runs for c in r.calls]
    return {
        "backends": sorted({c.get("backend") for c in calls}, key=str),
        "modes": sorted({c.get("mode") for c in calls}, key=str),
        "dynamics": sorted({c.get("dynamic") for c in calls}, key=str),
        "fullgraph": sorted({bool(c.get("fullgraph")) for c in calls}),
        "calls": len(calls),
    }


# ---------------------------------------------------------------------- outputs
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)\b")


def compare_outputs(reference: str, other: str, *, rtol: float = 1e-3) -> dict[str, Any]:
    """Compare two runs' stdout line by line; numbers may differ by `rtol` (relative) plus one
    unit of their last printed digit, everything else must be equal."""
    a, b = reference.splitlines(), other.splitlines()
    worst = 0.0
    for i, (x, y) in enumerate(zip(a, b), start=1):
        if x == y:
            continue
        xs, ys = _NUMBER.split(x), _NUMBER.split(y)
        xn, yn = _NUMBER.findall(x), _NUMBER.findall(y)
        if xs != ys or len(xn) != len(yn):
            return {"same": False, "line": i, "reference": x, "this": y, "max_rel_diff": None}
        for p, q in zip(xn, yn):
            fp, fq = float(p), float(q)
            if p == q or (math.isnan(fp) and math.isnan(fq)):
                continue
            if math.isinf(fp) or math.isinf(fq) or math.isnan(fp) or math.isnan(fq):
                return {"same": False, "line": i, "reference": x, "this": y, "max_rel_diff": None}
            ulp = max(_last_digit(p), _last_digit(q))
            diff = abs(fp - fq)
            rel = diff / max(abs(fp), 1e-12)
            if diff > rtol * abs(fp) + ulp:
                return {"same": False, "line": i, "reference": x, "this": y, "max_rel_diff": round(rel, 6),
                        "values": [p, q]}
            worst = max(worst, rel)
    if len(a) != len(b):
        i = min(len(a), len(b)) + 1
        return {
            "same": False,
            "line": i,
            "reference": a[i - 1] if i <= len(a) else "(no more output)",
            "this": b[i - 1] if i <= len(b) else "(no more output)",
            "max_rel_diff": None,
        }
    return {"same": True, "line": None, "reference": None, "this": None, "max_rel_diff": round(worst, 6)}


def _last_digit(number: str) -> float:
    """One unit of the last printed digit (`1.25` -> 0.01, `3e-5` -> 1e-5, `12` -> 1)."""
    mant, _, exp = number.lower().partition("e")
    decimals = len(mant.split(".", 1)[1]) if "." in mant else 0
    return 10.0 ** (-decimals + (int(exp) if exp else 0))


def compare_all(runs: list[RungRun], rtol: float) -> str | None:
    passing = [r for r in runs if r.passed]
    ref = next((r for r in passing if r.rung.name == "eager"), passing[0] if passing else None)
    if ref is None:
        return None
    ref_text = (ref.dir / "stdout.txt").read_text(encoding="utf-8", errors="replace")
    for r in passing:
        if r is ref:
            continue
        text = (r.dir / "stdout.txt").read_text(encoding="utf-8", errors="replace")
        r.output = {"compared_with": ref.rung.name, **compare_outputs(ref_text, text, rtol=rtol)}
    return ref.rung.name


# ---------------------------------------------------------------------- verdict
def _failure_text(run: RungRun) -> str:
    first = (run.analysis.get("failures") or [None])[0]
    if run.status == "timeout":
        return "timed out"
    if run.status == "interrupted":
        return "interrupted"
    if first and (run.status == "compile-error" or first.get("category") in COMPILER_FAILURES or run.error_line is None):
        return f"[{first['compile_id']}] {first.get('fail_type') or first['category']}: {first['reason']}"
    if run.error_line:
        return run.error_line
    return f"exit code {run.exit_code}"


def verdict(runs: list[RungRun], out_dir: Path, *, minified: bool = False) -> dict[str, Any]:
    """Which component fails first, in the guide's terms, and the next step (`minified`: the
    minifier ran already, so the step does not suggest it)."""
    ladder = sorted((r for r in runs if r.rung.is_ladder and r.status not in ("interrupted", "not-run")), key=lambda r: BACKENDS.index(r.rung.backend))
    by_name = {r.rung.name: r for r in runs}
    first_fail = next((r for r in ladder if not r.passed), None)
    v: dict[str, Any] = {"component": "none", "first_failing_rung": None, "last_passing_rung": None, "summary": "", "details": [], "next_step": ""}
    if not any(r.calls for r in runs) and not any(r.analysis.get("compiles") for r in runs):
        v.update(
            component="nothing_compiled",
            summary=f"{COMPONENT_WORDS['nothing_compiled']}: the program never called torch.compile (or "
            "torch._dynamo.optimize), so every rung ran the same code",
            next_step="check that the command runs the code that compiles (and that it does not start it in "
            "another process, which the rungs do not reach)",
        )
        return v
    counted = [r for r in ladder if r.analysis.get("compiles")]
    if counted and all(r.analysis.get("unreached_compiles") == r.analysis.get("compiles") for r in counted):
        v.update(
            component="inconclusive",
            summary=f"{COMPONENT_WORDS['inconclusive']}: every compile ran in processes the program starts itself "
            "(multiprocessing workers, a launcher's ranks), which the rungs do not reach, so every rung ran the "
            "program's own settings there",
            next_step="ablate the code that compiles in a single process (e.g. one rank without the launcher), "
            "or set the backend in the program and compare runs with `traceview run`",
        )
        return v
    if not ladder:
        v.update(component="inconclusive", summary="no backend rung (eager, aot_eager, aot_eager_decomp_partition, inductor) finished, so no component can be named")
        return v
    if first_fail is None:
        return _verdict_all_pass(v, ladder, by_name, out_dir)
    below = [r for r in ladder if BACKENDS.index(r.rung.backend) < BACKENDS.index(first_fail.rung.backend)]
    last_pass = below[-1] if below else None
    above_pass = [r for r in ladder if BACKENDS.index(r.rung.backend) > BACKENDS.index(first_fail.rung.backend) and r.passed]
    comp = COMPONENT[first_fail.rung.backend]
    v["first_failing_rung"] = first_fail.rung.name
    v["last_passing_rung"] = last_pass.rung.name if last_pass else None
    why = _failure_text(first_fail)
    fail_dir = out_dir / first_fail.rung.dir_name
    cid = next((f["compile_id"] for f in first_fail.analysis.get("failures", []) if f.get("category") in COMPILER_FAILURES), None)
    if comp == "dynamo":
        nc = by_name.get("no-compile")
        if nc is not None and nc.status in ("fail", "timeout"):
            comp = "program"
            v["summary"] = f"fails without torch.compile as well (no-compile: {_failure_text(nc)}): not a torch.compile problem"
            v["next_step"] = f"fix the program; its error is in {out_dir / 'no-compile' / 'torch_logs.txt'}"
        else:
            v["summary"] = f"fails already with backend='eager' (Dynamo alone): {why}"
            if True in asked_settings(runs)["fullgraph"]:
                v["details"].append("the program compiles with fullgraph=True, so any graph break is an error")
            if nc is not None and nc.passed:
                v["details"].append("passes without torch.compile (no-compile), so Dynamo's handling of the program is what fails")
            v["next_step"] = _dynamo_next_step(first_fail, fail_dir)
    elif comp == "inductor" and _cudagraphs_only(runs, first_fail):
        comp = "cudagraphs"
        failing = [r.rung.name for r in runs if r.rung.backend == "inductor" and not r.passed and r.status not in ("interrupted", "not-run")]
        v["summary"] = (
            f"passes with inductor:mode=default, fails with {', '.join(failing)} (CUDA graphs"
            f"{', the mode the program asks for' if first_fail.rung.name == 'inductor' else ''}): {why}"
        )
        v["next_step"] = _cudagraphs_next_step(first_fail, fail_dir)
    else:
        passed = f"passes with {last_pass.rung.name}, " if last_pass else ""
        v["summary"] = f"{passed}fails with {first_fail.rung.name}: {why}"
        v["next_step"] = _backend_next_step(first_fail, comp, cid, fail_dir, minified)
    if above_pass:
        v["details"].append(
            f"but {', '.join(r.rung.name for r in above_pass)} passes: a deterministic problem in "
            f"{first_fail.rung.name}'s piece would fail there too; the failing piece is one the later "
            "backend replaces (e.g. an op Inductor decomposes), or the failure is intermittent (rerun to check)"
        )
    v["details"] += _follow_up_details(runs, first_fail)
    v["details"] += _unreached_details(ladder)
    v["component"] = comp
    v["summary"] = f"{COMPONENT_WORDS[comp]}: {v['summary']}"
    return v


def _unreached_details(ladder: list[RungRun]) -> list[str]:
    n = max((int(r.analysis.get("unreached_compiles") or 0) for r in ladder), default=0)
    if not n:
        return []
    return [
        f"up to {n} compiles per rung ran in processes the program started itself, with the program's own "
        "settings: the verdict rests on the other compiles"
    ]


def _verdict_all_pass(v: dict[str, Any], ladder: list[RungRun], by_name: dict[str, RungRun], out_dir: Path) -> dict[str, Any]:
    v["last_passing_rung"] = ladder[-1].rung.name
    v["details"] += _unreached_details(ladder)
    aw = by_name.get("as-written")
    if aw is not None and not aw.passed and aw.status != "interrupted":
        backends = sorted({str((c.get("asked") or {}).get("backend")) for c in aw.calls} - {"None", *BACKENDS})
        cid = next((f["compile_id"] for f in aw.analysis.get("failures", []) if f.get("category") in COMPILER_FAILURES), "ID")
        v.update(
            component="custom_backend",
            first_failing_rung="as-written",
            summary=f"{COMPONENT_WORDS['custom_backend']}: every built-in backend passes, the program as written "
            f"(backend {', '.join(backends) or '?'}) fails: {_failure_text(aw)}",
            next_step="debug the backend on the graph it receives: `traceview repro "
            f"{out_dir / 'as-written' / 'trace'} --compile-id {cid} --backend eager` writes that graph as a script",
        )
        return v
    differs = [r for r in ladder if r.output and not r.output["same"]]
    if differs:
        first = differs[0]
        o = first.output or {}
        idx = BACKENDS.index(first.rung.backend)
        same_before = [r.rung.name for r in ladder if BACKENDS.index(r.rung.backend) < idx]
        comp = COMPONENT[first.rung.backend]
        v.update(
            component="accuracy",
            first_failing_rung=first.rung.name,
            last_passing_rung=same_before[-1] if same_before else None,
            summary=f"{COMPONENT_WORDS['accuracy']}: every rung runs, but the output with {first.rung.name} differs "
            f"from {o.get('compared_with')} ({difference(o)}); the first rung that differs adds {COMPONENT_SHORT[comp]}",
            next_step=(
                "rerun with `--minify` (TORCHDYNAMO_REPRO_LEVEL=4 compares each graph's result with eager "
                "and dumps the first that differs); if the program draws random numbers inside compiled code, "
                "Inductor's differ by design (torch._inductor.config.fallback_random=True makes it use eager's)"
            ),
        )
        return v
    ind = by_name.get("inductor")
    extras = ""
    if ind is not None and (ind.analysis.get("graph_breaks") or ind.analysis.get("recompiles")):
        extras = (
            f"; with inductor: {ind.analysis.get('graph_breaks', 0)} graph breaks, "
            f"{ind.analysis.get('recompiles', 0)} recompiles (`traceview summary {out_dir / 'inductor'}` says why)"
        )
    v.update(
        component="none",
        summary=f"{COMPONENT_WORDS['none']}: the program runs with every rung{extras}",
        next_step="if it fails elsewhere, the difference is in that run (inputs, environment, GPU, torch version): "
        "run `traceview ablate` there, or `traceview run` to capture its logs",
    )
    return v


def difference(o: dict[str, Any]) -> str:
    if o.get("values"):
        a, b = o["values"]
        return f"line {o.get('line')}: {a} vs {b}"
    return f"line {o.get('line')}: {one_line(o.get('reference'), 60)!r} vs {one_line(o.get('this'), 60)!r}"


def _dynamo_next_step(run: RungRun, fail_dir: Path) -> str:
    first = (run.analysis.get("failures") or [None])[0]
    cat = first.get("category") if first else None
    where = f" at {first['filename']}:{first['line']}" if first and first.get("filename") else ""
    if cat == "graph_break":
        hint = f" (torch's hint: {one_line(first.get('hint'), 200)})" if first and first.get("hint") else ""
        return (
            f"a graph break{where} stops a fullgraph=True compile: fix the construct{hint}, or drop "
            f"fullgraph=True so that Dynamo splits the graph there (`traceview summary {fail_dir}` has the "
            "details); the minifier cannot shrink Dynamo failures"
        )
    if cat == "user_exception":
        return f"the program's own exception{where} inside the compiled function: fix it there"
    return (
        f"rerun with TORCHDYNAMO_VERBOSE=1 for Dynamo's internal stack (`traceview summary {fail_dir}`); "
        "a Dynamo bug is reported to pytorch/pytorch with the smallest program that fails with backend='eager' "
        "(the minifier cannot shrink Dynamo failures); torch._dynamo.config.suppress_errors=True runs such frames eagerly meanwhile"
    )


CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes that turn on Inductor's CUDA graphs


def _cudagraphs_only(runs: list[RungRun], first_fail: RungRun) -> bool:
    """Inductor fails only where CUDA graphs are on: its default mode passes, and every failing
    Inductor rung ran a CUDA-graph mode (the program's own, or a follow-up's)."""
    default = next((r for r in runs if r.rung.name == "inductor:mode=default"), None)
    if default is None or not default.passed or not any(d != "cpu" for d in first_fail.analysis.get("devices", [])):
        return False
    asked = asked_settings(runs)["modes"]
    for r in runs:
        if r.rung.backend != "inductor" or r.passed or r.status in ("interrupted", "not-run"):
            continue
        modes = [r.rung.mode] if r.rung.set_mode else asked
        if not modes or not all(m in CUDAGRAPH_MODES for m in modes):
            return False
    return True


def _cudagraphs_next_step(run: RungRun, fail_dir: Path) -> str:
    text = _failure_text(run)
    if "overwritten by a subsequent run" in text:
        fix = (
            "the program reads a CUDA-graph output after a later call of the compiled function replayed the graph "
            "into the same memory: call torch.compiler.cudagraph_mark_step_begin() before each call (each "
            "training/inference step), or clone the output (`y = f(x).clone()`) before calling again"
        )
    else:
        fix = (
            f"rerun with TORCH_LOGS=cudagraphs,perf_hints (`traceview run`) and `traceview summary {fail_dir}`: "
            "it shows which graphs were recorded, skipped or re-recorded and why"
        )
    return (
        f"{fix}; mode='max-autotune-no-cudagraphs' (or Inductor's default mode) runs the program without CUDA graphs "
        "meanwhile. The minifier does not apply: the compiled code is right, its CUDA graphs' memory reuse is what fails"
    )


def _backend_next_step(run: RungRun, comp: str, cid: str | None, fail_dir: Path, minified: bool) -> str:
    repro = f"`traceview repro {fail_dir / 'trace'} --compile-id {cid}` writes a script for the failing compile; " if cid else ""
    after = "aot" if comp == "inductor" else "dynamo"
    fallback = {
        "inductor": "backend='aot_eager_decomp_partition' runs the program without Inductor meanwhile (slower)",
        "decompositions": "backend='aot_eager' runs the program without the decompositions meanwhile",
        "aot_autograd": "backend='eager' runs the program without AOTAutograd meanwhile",
    }[comp]
    minify = "" if minified else (
        f"`--minify` reruns {run.rung.name} with TORCHDYNAMO_REPRO_AFTER={after} TORCHDYNAMO_REPRO_LEVEL=2 for the minifier; "
    )
    return f"{repro}{minify}{fallback}"


def _follow_up_details(runs: list[RungRun], first_fail: RungRun) -> list[str]:
    out = []
    for r in runs:
        if r.rung.is_ladder or r.status in ("interrupted", "not-run") or r.rung.disable:
            continue
        if r.rung.backend is None:
            out.append(f"as written (the program's own settings): {r.status}" + ("" if r.passed else f": {_failure_text(r)}"))
            continue
        if r.rung.set_mode:
            what = f"with mode={r.rung.mode}"
        elif r.rung.set_dynamic:
            what = f"with dynamic={r.rung.dynamic}"
        else:
            continue
        if r.passed:
            hint = " (dynamic shapes take part in the failure)" if r.rung.set_dynamic and r.rung.dynamic is False else ""
            out.append(f"{r.rung.backend} {what} passes{hint}")
        else:
            same = _failure_text(r) == _failure_text(first_fail)
            out.append(f"{r.rung.backend} {what} fails too" + (" (the same error)" if same else f": {_failure_text(r)}"))
    return out


# ---------------------------------------------------------------------- minifier
def minify_plan(v: dict[str, Any], runs: list[RungRun]) -> tuple[Rung | None, dict[str, str], str | None]:
    """(rung to rerun, minifier environment, or why the minifier does not apply)."""
    name = v.get("first_failing_rung")
    run = next((r for r in runs if r.rung.name == name), None)
    if run is None:
        return None, {}, "nothing failed, so there is nothing to minify"
    if v["component"] == "cudagraphs":
        return None, {}, (
            "Inductor's code runs in its default mode: the failure is in CUDA graphs' replay and memory reuse, "
            "which the minifier (it shrinks the graph a compile fails on) does not reach"
        )
    if v["component"] in ("dynamo", "program"):
        return None, {}, (
            "the first failure is in Dynamo (or the program), which the minifier cannot shrink: it works on the "
            "graph Dynamo hands to the backend"
        )
    backend = run.rung.backend
    after = "aot" if backend == "inductor" else "dynamo"
    level = "4" if v["component"] == "accuracy" else "2"
    return run.rung, {"TORCHDYNAMO_REPRO_AFTER": after, "TORCHDYNAMO_REPRO_LEVEL": level}, None
