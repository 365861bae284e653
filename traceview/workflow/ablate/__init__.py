"""`traceview ablate`: the torch.compile troubleshooting ladder, run for the user.

PyTorch's troubleshooting guide says: when torch.compile fails, rerun with backend="eager"
(Dynamo only), "aot_eager" (+ AOTAutograd), "aot_eager_decomp_partition" (+ Inductor's
decompositions and the partitioner), then "inductor"; the first backend that fails holds the
bug. Then try Inductor's modes and the dynamic-shape settings, and run the minifier. This
module runs the user's program once per rung without editing it (each rung's settings are
applied to every torch.compile call by traceview/workflow/ablate/bootstrap.py), reads each rung's
TORCH_TRACE and TORCH_LOGS with traceview's own analysis (`build_report`), and draws the
verdict.

Everything here works on plain data: `run_ablation` returns the report dict (schema in
docs/ablate-and-repro.md) and `render_ablation` lays it out; the CLI only parses arguments.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traceview.errors import UserError
from traceview.printable import one_line, printable
from traceview.workflow.ablate.rung import (
    BACKENDS,
    BOOTSTRAP,
    BOOTSTRAP_ENV,
    TORCH_LOGS,
    Progress,
    Rung,
    RungRun,
    StopRequested,
    parse_rungs,
    run_rung,
)
from traceview.workflow.ablate.verdict import (
    asked_settings,
    compare_all,
    difference,
    follow_ups,
    minify_plan,
    verdict,
)

__all__ = [
    "BACKENDS",
    "AblationOptions",
    "Progress",
    "Rung",
    "RungRun",
    "ablation_report",
    "exit_code",
    "parse_rungs",
    "render_ablation",
    "run_ablation",
    "split_python_command",
]

ABLATION_SCHEMA_VERSION = 1
DEFAULT_TIMEOUT_S = 1800.0
DEFAULT_LADDER = BACKENDS


# ---------------------------------------------------------------------- the command
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_PY_FLAGS_WITH_ARG = "WX"


def split_python_command(cmd: Sequence[str]) -> tuple[list[str], list[str]]:
    """`python -u train.py --lr 1` -> (["python", "-u"], ["train.py", "--lr", "1"]).

    The target is `script ARGS`, `-m module ARGS` or `-c code ARGS`; a script file with a python
    shebang is run with that interpreter. Anything else is a UserError: the rungs are applied
    inside the Python process, so it has to be one we start."""
    cmd = list(cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UserError("nothing to run: use `traceview ablate [-o DIR] -- python train.py ARGS...`")
    interp, rest = [cmd[0]], cmd[1:]
    if not _is_python(cmd[0]):
        shebang = _python_shebang(cmd[0])
        if shebang is None:
            raise UserError(
                f"{cmd[0]}: ablate runs Python programs: give `python script.py ARGS`, `python -m module "
                "ARGS` or a script with a python shebang (launchers such as torchrun or a shell script "
                "start their own Python processes, which the rungs cannot reach)"
            )
        interp, rest = shebang, cmd
    opts: list[str] = []
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "--":
            i += 1
            break
        if a == "-" or not a.startswith("-"):
            break
        if a.startswith("--"):
            if a == "--check-hash-based-pycs" and i + 1 < len(rest):
                opts += rest[i : i + 2]
                i += 2
                continue
            raise UserError(f"python option {a} is not supported by ablate")
        for j, ch in enumerate(a[1:], start=1):
            if ch in "mc":  # -m module / -c code end the interpreter options
                value = a[j + 1 :]
                if j > 1:
                    opts.append(a[:j])
                target = ([f"-{ch}", value] if value else [f"-{ch}"]) + rest[i + 1 :]
                if len(target) < 2:
                    raise UserError(f"python -{ch} needs an argument")
                return interp + opts, target
            if ch in _PY_FLAGS_WITH_ARG:
                if j + 1 < len(a):
                    opts.append(a)
                    i += 1
                else:
                    opts += rest[i : i + 2]
                    i += 2
                break
        else:
            opts.append(a)
            i += 1
    if i >= len(rest) or rest[i] == "-":
        raise UserError("ablate needs a script, `-m module` or `-c code` to run (not a program on stdin)")
    return interp + opts, rest[i:]


def _is_python(arg: str) -> bool:
    if _PYTHON.match(os.path.basename(arg)):
        return True
    path = shutil.which(arg) or arg
    try:
        return os.path.samefile(path, sys.executable)
    except OSError:
        return False


def _python_shebang(arg: str) -> list[str] | None:
    path = arg if os.sep in arg else (shutil.which(arg) or arg)
    try:
        with open(path, "rb") as f:
            first = f.readline(200).decode("utf-8", "replace")
    except OSError:
        return None
    if first.startswith("#!") and "python" in first:
        return shlex.split(first[2:].strip())
    return None


def _minify(plan_rung: Rung, env: dict[str, str], base_env: dict[str, str], argv: list[str], out_dir: Path,
            timeout_s: float | None, progress: Progress) -> dict[str, Any]:
    mdir = out_dir / "minify"
    debug_root = mdir / "debug"
    full = {**base_env, **env, "TORCH_COMPILE_DEBUG_DIR": str(debug_root.resolve())}
    if "TORCHINDUCTOR_CACHE_DIR" in full and full["TORCHINDUCTOR_CACHE_DIR"] != os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        # the launcher torch writes names this directory: one that outlives the ablation
        full["TORCHINDUCTOR_CACHE_DIR"] = str((mdir / "inductor-cache").resolve())
    run = run_rung(plan_rung, argv, mdir, env=full, timeout_s=timeout_s, progress=progress, label=f"[minify] {plan_rung.name}")
    launchers = sorted(str(p) for p in debug_root.rglob("minifier_launcher.py"))
    repros = sorted(str(p) for p in debug_root.rglob("repro.py"))
    note = None
    if launchers:
        note = (
            f"run `python {launchers[0]}` to shrink the failing graph: it writes the smallest graph that still "
            "fails as repro.py next to itself (and into the directory it runs in)"
        )
    elif repros:
        note = f"the repro is {repros[0]}"
    else:
        note = "the minifier wrote nothing: the failure did not happen in the graph it watches (see the rung's torch_logs.txt)"
    return {
        "rung": plan_rung.name,
        "dir": str(mdir),
        "env": env,
        "status": run.status,
        "exit_code": run.exit_code,
        "minifier_launcher": launchers[0] if launchers else None,
        "repro": repros[0] if repros else None,
        "note": note,
    }


# ---------------------------------------------------------------------- the ablation
@dataclass
class AblationOptions:
    out_dir: Path | None = None
    rungs: list[Rung] | None = None  # None: the default ladder plus follow-ups
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    compare_output: bool = False
    rtol: float = 1e-3
    minify: bool = False
    warm_cache: bool = False


def default_out_dir() -> Path:
    return Path(f"traceview-ablate-{_dt.datetime.now():%Y%m%d-%H%M%S}")


def _base_env(warm_cache: bool, cache_dir: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDYNAMO_REPRO_") and k != BOOTSTRAP_ENV}
    if not warm_cache and cache_dir is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir)
    return env


def run_ablation(
    cmd: Sequence[str],
    options: AblationOptions,
    *,
    progress: Progress | None = None,
    on_update: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the ladder for `cmd`; returns the ablation report (also written to DIR/ablation.json
    after every rung, so an interrupted ablation keeps what finished)."""
    prefix, target = split_python_command(cmd)
    if not target[0].startswith("-") and not Path(target[0]).is_file():
        raise UserError(f"{target[0]}: no such file")
    argv = [*prefix, str(BOOTSTRAP), *target]
    cmd = list(cmd[1:] if cmd and cmd[0] == "--" else cmd)
    out = options.out_dir or default_out_dir()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out}: exists and is not empty; choose another -o")
    out.mkdir(parents=True, exist_ok=True)
    progress = progress or Progress()
    explicit = options.rungs is not None
    planned = list(options.rungs) if explicit else [Rung(b) for b in DEFAULT_LADDER]
    runs: list[RungRun] = []
    skipped: list[dict[str, str]] = []
    state: dict[str, Any] = {"interrupted": False, "minify": None, "reference": None}
    cache = None if options.warm_cache else Path(tempfile.mkdtemp(prefix="traceview-ablate-inductor-cache-"))
    base_env = _base_env(options.warm_cache, cache)
    t0 = time.monotonic()

    def report() -> dict[str, Any]:
        return ablation_report(cmd, out, runs, skipped, state, options, time.monotonic() - t0)

    def save() -> dict[str, Any]:
        rep = report()
        _write_json(out / "ablation.json", rep)
        if on_update:
            on_update(rep)
        return rep

    progress.line(f"traceview ablate: {shlex.join(list(cmd))}")
    progress.line(f"  output in {out}/<rung>/ (trace/, torch_logs.txt, stdout.txt); TORCH_LOGS={TORCH_LOGS}")
    handlers = _stop_on_signals()
    try:
        i = 0
        followed = explicit
        while True:
            if i >= len(planned):
                if followed:
                    break
                followed = True
                more, skip = follow_ups(runs, {r.name for r in planned})
                skipped.extend(skip)
                for r in more:
                    progress.line(f"  + {r.name}: {r.why}")
                planned += more
                if not more:
                    break
                continue
            rung = planned[i]
            i += 1
            label = f"[{i}/{len(planned)}] {rung.name}"
            run = run_rung(rung, argv, out / rung.dir_name, env=base_env, timeout_s=options.timeout_s, progress=progress, label=label)
            runs.append(run)
            if run.status == "interrupted":
                state["interrupted"] = True
                break
            save()
        if options.compare_output and not state["interrupted"]:
            state["reference"] = compare_all(runs, options.rtol)
        if options.minify and not state["interrupted"]:
            v = verdict(runs, out)
            rung, menv, why = minify_plan(v, runs)
            if rung is None:
                state["minify"] = {"rung": None, "note": why}
            else:
                state["minify"] = _minify(rung, menv, base_env, argv, out, options.timeout_s, progress)
                if state["minify"]["status"] == "interrupted":
                    state["interrupted"] = True
    except (KeyboardInterrupt, StopRequested):
        state["interrupted"] = True
    finally:
        _restore_signals(handlers)
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
    return save()


def _stop_on_signals() -> dict[int, Any]:
    """SIGTERM and SIGHUP (a closed SSH session) stop the ablation like Ctrl-C does."""
    old: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return old

    def stop(signum: int, frame: Any) -> None:
        raise StopRequested()

    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            old[sig] = signal.signal(sig, stop)
    return old


def _restore_signals(old: dict[int, Any]) -> None:
    for sig, h in old.items():
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, h)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def ablation_report(
    cmd: Sequence[str],
    out: Path,
    runs: list[RungRun],
    skipped: list[dict[str, str]],
    state: dict[str, Any],
    options: AblationOptions,
    elapsed_s: float,
) -> dict[str, Any]:
    """The ablation as plain data (schema: docs/ablate-and-repro.md)."""
    devices = sorted({d for r in runs for d in r.analysis.get("devices", [])})
    asked = asked_settings(runs)
    return {
        "schema_version": ABLATION_SCHEMA_VERSION,
        "command": list(cmd),
        "output_dir": str(out),
        "devices": devices,
        "program_asked": asked,
        "torch_logs": TORCH_LOGS,
        "fresh_inductor_cache": not options.warm_cache,
        "timeout_s": options.timeout_s,
        "elapsed_s": round(elapsed_s, 1),
        "interrupted": bool(state.get("interrupted")),
        "rungs": [_rung_row(r) for r in runs],
        "not_run": skipped,
        "output_reference": state.get("reference"),
        "verdict": verdict(runs, out, minified=bool((state.get("minify") or {}).get("rung"))),
        "minify": state.get("minify"),
    }


def _rung_row(r: RungRun) -> dict[str, Any]:
    a = r.analysis
    first = (a.get("failures") or [None])[0]
    return {
        "name": r.rung.name,
        "backend": r.rung.backend,
        "mode": r.rung.mode if r.rung.set_mode else None,
        "dynamic": r.rung.dynamic if r.rung.set_dynamic else "as-written",
        "why": r.rung.why or None,
        "dir": str(r.dir),
        "status": r.status,
        "exit_code": r.exit_code,
        "elapsed_s": r.elapsed_s,
        "error_line": r.error_line,
        "compiles": a.get("compiles", 0),
        "failed_compiles": a.get("failed_compiles", 0),
        "graph_breaks": a.get("graph_breaks", 0),
        "graph_break_sites": a.get("graph_break_sites", 0),
        "recompiles": a.get("recompiles", 0),
        "compile_time_s": a.get("compile_time_s", 0.0),
        "first_failure": first,
        "devices": a.get("devices", []),
        "dynamic_shapes": a.get("dynamic_shapes", False),
        "unreached_compiles": a.get("unreached_compiles", 0),
        "note": a.get("note"),
        "output": r.output,
    }


def exit_code(report: dict[str, Any]) -> int:
    """0 when every rung passed (and printed the same output), 1 when one did not, 130 when
    the ablation was interrupted."""
    if report["interrupted"]:
        return 130
    bad = [r for r in report["rungs"] if r["status"] != "pass" or (r.get("output") and not r["output"]["same"])]
    return 1 if bad else 0


# ---------------------------------------------------------------------- text
def render_ablation(report: dict[str, Any], *, width: int = 100) -> str:
    """The ablation for a terminal: the table, then the verdict and the next step."""
    w = max(width, 60)
    lines: list[str] = [""]
    compared = report.get("output_reference") is not None
    head = ("rung", "result", "exit", "failed", "breaks", "recompiles", "compile s", "time s") + (("output",) if compared else ())
    rows = [head]
    for r in report["rungs"]:
        result = {"pass": "pass", "fail": "FAIL", "compile-error": "COMPILE ERR", "timeout": "TIMEOUT", "interrupted": "interrupted"}.get(r["status"], r["status"])
        row: tuple[str, ...] = (
            r["name"], result, "" if r["exit_code"] is None else str(r["exit_code"]), str(r["failed_compiles"]),
            str(r["graph_breaks"]), str(r["recompiles"]), f"{r['compile_time_s']:.2f}", f"{r['elapsed_s']:.1f}",
        )
        if compared:
            o = r.get("output")
            row += ("reference" if r["name"] == report["output_reference"] else "-" if not o else "same" if o["same"] else "DIFFERS",)
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for row in rows:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])] + [
            c.ljust(widths[i]) if head[i] == "output" else c.rjust(widths[i]) for i, c in enumerate(row[2:], start=2)
        ]
        lines.append(printable("  ".join(cells)).rstrip())
    devices = ", ".join(report["devices"]) or "unknown"
    lines.append(f"(devices: {devices}; failed = failed compiles, breaks = graph breaks, as traceview reads each rung's logs)")

    def para(label: str, text: str) -> None:
        lines.extend(textwrap.wrap(printable(f"{label}{text}"), width=w, subsequent_indent=" " * min(len(label), 12),
                                   break_on_hyphens=False, break_long_words=False))

    for r in report["rungs"]:
        if r["status"] != "pass" or (r.get("output") and not r["output"]["same"]):
            detail = r["error_line"] or (f"[{r['first_failure']['compile_id']}] {r['first_failure']['reason']}" if r["first_failure"] else r["note"] or "")
            if r["status"] == "compile-error" and r["first_failure"]:
                detail = f"[{r['first_failure']['compile_id']}] {r['first_failure'].get('fail_type')}: {r['first_failure']['reason']}"
            if r.get("output") and not r["output"]["same"]:
                o = r["output"]
                detail = f"stdout differs from {o['compared_with']}'s at {difference(o)}"
            if detail:
                para(f"  {r['name']}: ", one_line(detail, 400))
    for r in report["rungs"]:
        if r.get("unreached_compiles"):
            para(f"  {r['name']}: ", r["note"])
    for s in report["not_run"]:
        para(f"  {s['rung']}: ", s["why"])
    lines.append("")
    v = report["verdict"]
    para("verdict: ", v["summary"])
    for d in v["details"]:
        para("  - ", d)
    if v["next_step"]:
        para("next step: ", v["next_step"])
    m = report.get("minify")
    if m:
        if m.get("rung") is None:
            para("minify: ", m["note"])
        else:
            para("minify: ", f"{m['rung']} rerun with {' '.join(f'{k}={v}' for k, v in m['env'].items())} -> {m['status']}")
            if m.get("minifier_launcher"):
                para("  minifier_launcher.py: ", m["minifier_launcher"])
            if m.get("repro"):
                para("  repro.py: ", m["repro"])
            para("  ", m["note"])
    if report["interrupted"]:
        lines.append("interrupted: the rungs above finished; the rest did not run")
    lines.append(f"every rung's trace and logs: {report['output_dir']}/<rung>/; this report: {report['output_dir']}/ablation.json")
    return "\n".join(lines) + "\n"
