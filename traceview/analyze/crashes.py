"""The program crashed: the uncaught exception (or fatal signal) at the end of a TORCH_LOGS
capture, as a finding: its type and message, the user frame, the triage category PyTorch's
developers use, and their next step.

Read from `parsers.tracebacks.uncaught_from_text` over the trace's text-log lines. The user frame is the innermost frame
outside torch, Python and site-packages (the program's own code); where the exception came from
(`raised_in`) is read from the frames: torch.compile compiling the function (Dynamo/Inductor
frames under `compile_wrapper`), compiled code running (`<eval_with_key>`, Inductor's generated
module, AOTAutograd's runtime wrapper), or the program's own code after compiling.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from parsers.code_location import is_user
from parsers.compile_ids import bracketed
from parsers.messages import parse_stance_refusal
from parsers.oom import is_oom_message, oom_of
from parsers.stops import CRASH_SIGNALS, is_stop_exception
from parsers.tracebacks import uncaught_from_text
from traceview.analyze.collectives import distributed_error, mismatch_ranks
from traceview.analyze.failures import (
    EXPORT_PATH,
    categorize,
    data_dependent,
    detail_of,
    headline,
    next_step,
    user_frame_of,
)
from traceview.analyze.findings import ranks_text
from traceview.analyze.signals import (
    last_record,
    nested_generate,
    ran_in,
    signal_of,
    signal_step,
    whose,
)
from traceview.trace import Trace

_COMPILED = re.compile(r"<eval_with_key>|torchinductor|/tv_gpu_cache_|[/\\][a-z0-9]{2}[/\\]c[a-z0-9]{50,}\.py")
_RUNTIME = re.compile(r"_aot_autograd[/\\]runtime_wrappers\.py|_inductor[/\\]output_code\.py|cudagraph_trees\.py")
_COMPILING = re.compile(r"_dynamo[/\\](?:convert_frame|output_graph|symbolic_convert)\.py|_inductor[/\\]compile_fx\.py")

CRASH_STEPS: dict[str, str] = {
    "out_of_memory": (
        "Out of device memory, not a compiler bug (made specific per crash: what was asked and free, "
        "the compile whose code asked, memory's next steps)."
    ),
    "cuda_graphs": (
        "A CUDA-graphs output was read after a later replay overwrote it (mode='reduce-overhead'): "
        "call torch.compiler.cudagraph_mark_step_begin() before each model invocation, or "
        "clone the output (out.clone()) when you keep it across calls."
    ),
    "cuda_illegal_memory_access": (
        "CUDA illegal memory access: rerun with CUDA_LAUNCH_BLOCKING=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 "
        "for the kernel that faults; TORCHINDUCTOR_NAN_ASSERTS=1 checks Inductor kernels' outputs; "
        "backend='aot_eager' tells a compiled-kernel bug from one in the program."
    ),
    "triton_assert": (
        "A compiled (Triton) kernel's device-side assert fired: Inductor's index bounds check "
        "(`index out of bounds: 0 <= tmpN < size`): an index in your data is out of range (eager "
        "raises an IndexError for it too). CUDA_LAUNCH_BLOCKING=1 gives the right stack; "
        "TORCH_LOGS=output_code,schedule shows the kernel and the op it came from."
    ),
    "triton": (
        "Triton (a compiled kernel's launch or compile) failed: TORCH_LOGS=output_code,schedule "
        "shows the generated kernels; backend='aot_eager' runs without Inductor meanwhile; "
        "TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=2 minifies it."
    ),
    "segfault": (
        "The process died of a signal inside native code: the Python stack (faulthandler) shows "
        "where; rerun with PYTHONFAULTHANDLER=1 if there is none. Narrow it down: mode='default' "
        "(no CUDA graphs), backend='aot_eager' (no Inductor), backend='eager' (Dynamo only); the "
        "first that runs names the culprit."
    ),
    "runtime_error_in_compiled_code": (
        "The compiled function raised while it ran. Run it without torch.compile (or under "
        "torch.compiler.set_stance('force_eager')): if eager raises too, the bug is in the "
        "program (the inputs); if not, minify with TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4."
    ),
    "distributed_desync": (
        "A distributed desync: the ranks did not issue the same collectives (made specific per crash: "
        "tied to the ranks whose compiled graphs' collectives differ, when they do)."
    ),
    "user_error_after_compile": (
        "The program's own code raised after compiling (no torch.compile frame in the traceback): "
        "fix it at the user line; torch.compile is not involved."
    ),
    # made specific per crash by analyze.judge from the refused guard (crash["stance"])
    "stance_refused": (
        "torch.compiler.set_stance('fail_on_recompile') refused a compile the call needed: warm up "
        "every input kind before setting the stance, or use set_stance('eager_on_recompile') to run "
        "such calls eagerly instead of failing."
    ),
}

def _frame_parts(frame: str) -> tuple[str, int | None, str]:
    m = re.match(r"^(.*):(\d+) in (.*)$", frame)
    if not m:
        return frame, None, ""
    return m.group(1), int(m.group(2)), m.group(3)


def _user_frame(frames: list[str], sources: list[str]) -> tuple[str | None, int | None, str | None, str | None]:
    """The innermost frame of the program's own code (not torch, Python or site-packages)."""
    for k in range(len(frames) - 1, -1, -1):
        path, line, fn = _frame_parts(frames[k])
        if is_user(path):
            return path, line, fn, (sources[k] if k < len(sources) else "") or None
    return None, None, None, None


# the frames of a kernel launch: Inductor's `<kernel>.run(` in the generated module, then the
# launcher (Triton's driver, Inductor's static launcher); an error raised there was reported by
# that launch, so that kernel failed (CUDA_LAUNCH_BLOCKING=1 makes every launch report)
_KERNEL_RUN = re.compile(r"^\s*(\w+)\.run\(")
_LAUNCHER = re.compile(r"triton[/\\]backends[/\\].*driver\.py|static_(?:triton|cuda)_launcher\.py")


def _kernel(frames: list[str], sources: list[str]) -> tuple[str | None, bool]:
    """(the innermost Inductor kernel the traceback launches, whether the error was raised by
    that launch itself). A kernel named in an asynchronous report (the error surfaced at a later
    synchronising call, e.g. autotuning's benchmark) need not be the one that failed."""
    for k in range(len(frames) - 1, -1, -1):
        path, _, _ = _frame_parts(frames[k])
        m = _KERNEL_RUN.match(sources[k] if k < len(sources) else "")
        if m and _COMPILED.search(path):
            return m.group(1), bool(_LAUNCHER.search(_frame_parts(frames[-1])[0]))
    return None, False


def _caller(frames: list[str], sources: list[str], line: int | None, filename: str | None) -> dict[str, Any] | None:
    """Where the program called the compiled function whose frame is the user frame (that frame
    shows the `@torch.compile` line): the next user frame out."""
    seen = False
    for k in range(len(frames) - 1, -1, -1):
        path, ln, fn = _frame_parts(frames[k])
        if not is_user(path):
            continue
        if not seen:
            seen = path == filename and ln == line
            continue
        src = ((sources[k] if k < len(sources) else "") or "").strip()
        return {"filename": path, "line": ln, "function": fn, "code": src or None}
    return None


def _kernel_step(cat: str, kernel: str, at_launch: bool) -> str | None:
    """The next step once the traceback names the kernel."""
    user = not kernel.startswith(("triton_", "cpp_"))  # Inductor names its own kernels triton_*/cpp_*
    if not at_launch:
        return (
            f" The traceback passes through {kernel}, but CUDA reports errors asynchronously: the kernel "
            "that failed may be an earlier one; with CUDA_LAUNCH_BLOCKING=1 the traceback ends at the "
            "launch that failed."
        )
    if cat == "cuda_illegal_memory_access":
        who = (
            f"{kernel} is a Triton kernel of your own (not one Inductor generated): check its offsets and masks "
            f"(`traceview origin --kernel {kernel}` gives the line that launches it)"
            if user
            else f"`traceview origin --kernel {kernel}` names the ops and source lines it computes; backend='aot_eager' "
            "tells a compiled-kernel bug from one in the program, TORCHINDUCTOR_NAN_ASSERTS=1 checks the kernels' outputs"
        )
        return (
            f"{kernel} faulted: the error was raised by its launch (a synchronous report, as under "
            f"CUDA_LAUNCH_BLOCKING=1), so this is the kernel that made the illegal access. {who}; "
            "compute-sanitizer names the bad address."
        )
    if cat == "triton_assert":
        return (
            f"{kernel}'s device-side assert fired (raised by its launch, a synchronous report): Inductor's "
            "index bounds check, an index in your data is out of range (eager raises an IndexError for it "
            f"too). `traceview origin --kernel {kernel}` names the indexing op and its source line."
        )
    return None


def _category(exc_type: str, message: str, frames: list[str], other_text: str) -> tuple[str, str]:
    """(category, raised_in)."""
    low = message.lower()
    joined = "\n".join(frames)
    if parse_stance_refusal(message) is not None:  # refused before compiling: not a compile failure
        return "stance_refused", "stance"
    if is_oom_message(message):
        return "out_of_memory", _where(frames)
    if "tensor output of cudagraphs that has been overwritten" in low:
        return "cuda_graphs", "program"
    if "illegal memory access" in low:
        return "cuda_illegal_memory_access", "compiled code"
    if "device-side assert triggered" in low and "Assertion `index out of bounds" in other_text:
        return "triton_assert", "compiled code"
    if exc_type == "Segmentation fault" or exc_type.startswith(("Bus error", "Aborted", "Floating", "Illegal instruction")):
        return "segfault", _where(frames)
    if "/triton/" in joined and _where(frames) != "program":
        return "triton", "compiled code"
    short = exc_type.rsplit(".", 1)[-1]
    if data_dependent(short, message) and (EXPORT_PATH.search(joined) or "calling torch.export" in message):
        # torch.export (strict or not) could not trace a branch or value that needs a tensor's data
        return "export_data_dependent", "exporting"
    if exc_type.startswith("torch.") and short not in ("AcceleratorError", "OutOfMemoryError"):
        if "._dynamo." in exc_type or "._inductor." in exc_type or short in ("ConstraintViolationError", "UserError"):
            return categorize(short, message), "compiling"
    where = _where(frames)
    if where == "compiled code":
        return "runtime_error_in_compiled_code", where
    if where == "compiling":
        return categorize(short, message), where
    return "user_error_after_compile", where


def _where(frames: list[str]) -> str:
    joined = "\n".join(frames)
    if _COMPILED.search(joined) or _RUNTIME.search(joined):
        return "compiled code"
    if _COMPILING.search(joined):
        return "compiling"
    return "program"


# what a rank's collective says when a peer process died (gloo, NCCL, the c10d store)
_PEER_LOST = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|NCCL communicator was aborted|"
    r"DistBackendError|Socket Timeout|failed to recv|ProcessGroupNCCL.*(?:Watchdog|timeout)|"
    r"TCPStore.*(?:closed|reset)|recvBytes failed|Timed out waiting",
    re.I,
)
_EXITCODE = re.compile(r"Root Cause \(first observed failure\):(?:[^\n]*\n)*?\s*exitcode\s*:\s*(-?\d+)")


def _root_of(crashes: pl.DataFrame) -> dict[str, int]:
    """file -> the rank whose failure came first: torchrun's first observed failure, else the
    one rank whose error is not a collective that lost its peer."""
    out: dict[str, int] = {}
    for (file,), part in crashes.group_by(["file"]):
        root = part["root_rank"].drop_nulls()
        if root.len():
            out[file] = int(root[0])
            continue
        own = [r["rank"] for r in part.iter_rows(named=True)
               if r["rank"] is not None and not _PEER_LOST.search(r["message"] or "")]
        if len(own) == 1 and part.height > 1:
            out[file] = own[0]
    return out


def compile_of_crash(crash: dict[str, Any], fails: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The failed compile a crash raised in compiling is (rows of analyze.failures, as the
    report has them): the last failure of the crash's rank whose exception type is the
    crash's (`InductorError`, `BackendCompilerFailed`, ...). None for a crash raised elsewhere,
    or where no failure of that type was logged. Certain where one failure matches: torch
    raises the compile's own exception to the caller."""
    if crash.get("raised_in") != "compiling" or not crash.get("exc_type"):
        return None
    short = crash["exc_type"].rsplit(".", 1)[-1]
    same = [f for f in fails if f.get("rank") == crash.get("rank") and (f.get("fail_type") or "").rsplit(".", 1)[-1] == short]
    return same[-1] if same else None


def crash_findings(
    trace: Trace, *, uncaught: pl.DataFrame | None = None, collectives: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """One finding per crashed process (see the module doc). Where several ranks crashed, the
    rank that failed first comes first and the others say they are its consequence.
    `uncaught`: the trace's parsers.tracebacks.uncaught_from_text when the caller has it
    already (failures reads it too); `collectives`: analyze.collectives.collective_mismatches
    of the trace, when the caller has it (a distributed error is tied to it)."""
    if uncaught is None:
        uncaught = uncaught_from_text(trace.other_lines, trace.log_records)
    if collectives is None and uncaught.height:
        from traceview.analyze.collectives import collective_mismatches

        collectives = collective_mismatches(trace)
    rows = _crash_rows(uncaught, trace.other_lines, collectives)
    for c in rows:
        if c["category"] == "stance_refused":
            c["stance"] = _stance(trace, c)
    _signals(trace, rows)
    if any(c["category"] == "out_of_memory" for c in rows):
        modules = _output_modules(trace)
        for c in rows:
            if c["category"] == "out_of_memory":
                _memory(c, uncaught, modules)
    return rows


# --------------------------------------------------------------------------------------
# a compile stance's refusal: set_stance("fail_on_recompile") and a call that needs a new graph


def _stance(trace: Trace, c: dict[str, Any]) -> dict[str, Any]:
    """What the stance refused (parsers.messages.parse_stance_refusal: stance, function,
    filename, line, failures, precompiled), with `refused`: the failure that is the cause (the
    newest cache entry's — the highest compile id, whichever order torch listed them in — as a
    recompile's primary cause; None where the code object had no cache entry: its first
    compile was refused), and `allowed`: the recompiles of that code object the log shows
    before the refusal, each {compile_id, occurrence, cause} (the cause as the recompile
    findings say it), in order. Where the message names no function (older torch), the code
    object is the one whose compile ids the failed entries are."""
    from traceview.analyze.storms import primary_causes

    st = parse_stance_refusal(c["message_full"]) or {}
    failures = st.get("failures") or []

    def newest(f: dict[str, Any]) -> tuple[int, int]:
        m = re.match(r"^(\d+)/(\d+)$", f.get("failed_against") or "")
        return (int(m.group(2)), -int(f.get("reason_index") or 0)) if m else (-1, -int(f.get("reason_index") or 0))

    refused = max(failures, key=newest) if failures else None
    allowed: list[dict[str, Any]] = []
    rec = trace.recompiles
    if rec.height and not st.get("function") and refused is not None and refused.get("failed_against"):
        mine = rec.filter(pl.col("rank").is_null() if c["rank"] is None else pl.col("rank") == c["rank"])
        frame = refused["failed_against"].split("/")[0]
        named = mine.filter(pl.col("compile_id").str.starts_with(f"{frame}/") & pl.col("function").is_not_null())
        if named.height:
            r0 = named.row(0, named=True)
            st = {**st, "function": r0["function"], "filename": r0["filename"]}
    if rec.height and st.get("function"):
        same = rec.filter(
            (pl.col("function") == st["function"])
            & (pl.col("rank").is_null() if c["rank"] is None else pl.col("rank") == c["rank"])
        )
        if st.get("filename"):  # the code object: its file, where the rows name one
            same = same.filter(pl.col("filename").is_null() | (pl.col("filename") == st["filename"]))
        causes = primary_causes(trace)
        seen: set[tuple[str, Any]] = set()
        # a text log's rows carry no occurrence: they are the first use of the id, as the trace's
        for r in same.sort(["occurrence", "lineno"], nulls_last=True).iter_rows(named=True):
            k = (r["compile_id"], r["occurrence"] or 1)
            if r["compile_id"] is None or k in seen:
                continue
            seen.add(k)
            cause = causes.get((r["rank"], *k))
            allowed.append({"compile_id": r["compile_id"], "occurrence": k[1],
                            "cause": (cause or {}).get("text") or r["guard"]})
    return {**st, "refused": refused, "allowed": allowed}
# killed by a signal of its own (analyze.signals): which signal, in whose code, after which record


def _signals(trace: Trace, rows: list[dict[str, Any]]) -> None:
    """Fill each crash by a fatal signal (faulthandler's dump) and add one for each process a
    launcher or a shell says died of a crash signal without one: `signal`, `exit_code`,
    `faulthandler`, `innermost` (analyze.signals.whose), `ran` (the compile whose generated
    code it died in), `after` (the rank's last trace record), `nested` (transformers' generate
    compiling the decode step over a compiled forward) and the next step."""
    from traceview.analyze.accounts.compiles import stop_lines

    frames_of = {id(c): c.pop("_frames", None) or [] for c in rows}
    deaths = [d for d in stop_lines(trace).to_dicts() if d["signal"] in CRASH_SIGNALS
              and d["kind"] in ("child_exit", "child_failed", "shell_signal", "srun_signal", "spawn_signal", "capture_signal")]
    fatal = [c for c in rows if c["category"] == "segfault" and c["kind"] == "fatal"]
    if not fatal and not deaths:
        return
    modules = _output_modules(trace)
    for c in fatal:
        sig = signal_of(c["exc_type"])
        said = [d for d in deaths if d["file"] == c["file"] and d["signal"] == sig]
        if c["rank"] is None:  # faulthandler writes to fd 2 itself: no `[rankN]:` prefix
            ranks = {d["rank"] for d in said if d["rank"] is not None}
            if len(ranks) == 1:
                c["rank"] = ranks.pop()
                c["evidence"] += f"; the launcher says rank {c['rank']} died of {sig}"
            elif ranks:  # several died of it: their dumps interleave, which one this is cannot be told
                c["signal_ranks"] = sorted(ranks)
                c["evidence"] += f"; the launcher says {ranks_text(sorted(ranks)).strip()} died of {sig}"
        if c["rank"] is not None:
            _consequences(rows, c["file"], c["rank"], sig)
        code = next((d["exit_code"] for d in said if d["rank"] in (c["rank"], None) and d["exit_code"] is not None), None)
        frames = list(frames_of.get(id(c)) or [])
        _fill_signal(trace, c, sig, code, frames, modules, faulthandler=True)
    seen = {(c["file"], c["rank"]) for c in fatal}
    by_proc: dict[tuple[str, Any], dict[str, Any]] = {}
    # a launcher's report that is already a crash row of its own (mp.spawn's ProcessExitedException)
    # or that the capture's lines explain as a distributed desync (an NCCL watchdog's SIGABRT) stays one
    explained = {c["file"] for c in rows if c["kind"] == "launcher" and c["category"] == "distributed_desync"}
    for d in deaths:
        key = (d["file"], d["rank"])
        if d["kind"] == "spawn_signal" or d["file"] in explained:
            continue
        if key in seen or (d["file"], None) in seen or key in by_proc:
            continue
        by_proc[key] = d
    for (file, rank), d in by_proc.items():
        if rank is None:
            ranks = trace.ranks
            rank = ranks[0] if len(ranks) == 1 else None
        what = {"child_exit": "torchrun", "child_failed": "torchrun", "shell_signal": "the shell that ran it",
                "srun_signal": "srun", "spawn_signal": "torch.multiprocessing.spawn",
                "capture_signal": "the capture's exit status"}[d["kind"]]
        c = {
            "rank": rank, "kind": "signal", "exc_type": d["signal"], "message": d["text"], "message_full": d["text"],
            "category": "segfault", "raised_in": "unknown", "function": None, "filename": None, "line": None,
            "code": None, "called_from": None, "kernel": None, "memory": None, "ran": None, "stance": None, "next_step": "",
            "consequence_of": None, "distributed_error": None, "look_first": [], "diverged_in": None,
            "certainty": "certain", "evidence": f"{what}: {d['text']}", "file": file, "lineno": d["lineno"],
        }
        _fill_signal(trace, c, d["signal"], d["exit_code"], [], modules, faulthandler=False)
        _consequences(rows, file, rank, d["signal"])
        rows.append(c)
    # a launcher's bare report of a rank that a signal row now says: keep one
    said_ranks = {(c["file"], c["rank"]) for c in rows if c["category"] == "segfault"}
    rows[:] = [c for c in rows if not (c["kind"] == "launcher" and (c["file"], c["rank"]) in said_ranks)]
    rows.sort(key=lambda c: (c["consequence_of"] is not None, c["category"] != "segfault"))


def _consequences(rows: list[dict[str, Any]], file: str, rank: int | None, sig: str | None) -> None:
    """The other ranks' errors in the capture of a rank that died of a signal are its
    consequence (a collective that lost its peer), unless already tied to another rank."""
    if rank is None:
        return
    for o in rows:
        if o["file"] != file or o["rank"] in (rank, None) or o["consequence_of"] is not None or o["kind"] in ("launcher", "fatal", "signal"):
            continue
        o["consequence_of"] = rank
        o["next_step"] = (
            f"Probably a consequence of rank {rank}'s death ({sig}): when one rank dies, the collectives of the "
            f"others fail. Fix rank {rank}'s crash first."
        )
        o["certainty"], o["evidence"] = "likely", f"{o['evidence']}; rank {rank} died of {sig} first"


def _fill_signal(
    trace: Trace, c: dict[str, Any], sig: str | None, code: int | None, frames: list[str],
    modules: dict[str, list[dict[str, Any]]], *, faulthandler: bool,
) -> None:
    c.setdefault("signal_ranks", None)
    c["signal"] = sig
    c["exit_code"] = code
    c["faulthandler"] = faulthandler
    c["innermost"] = whose(frames)
    ran = ran_in(trace, frames=frames, rank=c["rank"], modules=modules) if frames else None
    c["signal_ran"] = ran
    if ran and ran.get("kernel") and ran.get("compile_id"):
        c["kernel"] = ran["kernel"]
    rec = last_record(trace, rank=c["rank"])
    c["after"] = None if rec is None else {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in rec.items()}
    c["nested"] = nested_generate(frames)
    c["next_step"] = signal_step(sig or "a signal", faulthandler=faulthandler, who=c["innermost"], ran=ran,
                                 frames=frames, nested=c["nested"])
    if ran and ran.get("compile_id"):
        c["raised_in"] = "compiled code"


# --------------------------------------------------------------------------------------
# out of memory: what was asked and free, the compile whose code asked, the input that grew


_ALLOC = re.compile(r"^\s*(\w+) = empty_strided_?\w*\(\(([^)]*)\),\s*\(([^)]*)\),\s*torch\.(\w+)")
_SYMBOL = re.compile(r"\b[su]\d+\b")


def _output_modules(trace: Trace) -> dict[str, list[dict[str, Any]]]:
    """The path of each compile's generated module (Inductor's `inductor_output_code` record
    names it) -> the compiles that wrote it: [{rank, compile_id, occurrence, function,
    filename, line, recompile_reason, lineno, file}]."""
    import json as _json

    ev = trace.index_events()
    if ev.is_empty():
        return {}
    oc = ev.filter(pl.col("kind") == "inductor_output_code").select("file", "rank", "compile_id", "metadata", "lineno")
    c = trace.compiles
    out: dict[str, list[dict[str, Any]]] = {}
    for file, rank, cid, meta, lineno in oc.iter_rows():
        try:
            m = _json.loads(meta or "{}")
        except ValueError:
            continue
        path = m.get("filename") or m.get("file_path") if isinstance(m, dict) else None
        if not isinstance(path, str) or cid is None:
            continue
        row: dict[str, Any] = {"rank": rank, "compile_id": cid, "occurrence": None, "function": None, "filename": None,
                               "line": None, "recompile_reason": None, "file": file, "lineno": lineno}
        if c.height:
            mine = c.filter((pl.col("file") == file) & (pl.col("compile_id") == cid) & (pl.col("lineno") <= lineno))
            if mine.height:
                r = mine.sort("lineno").row(-1, named=True)
                row.update({k: r[k] for k in ("occurrence", "function", "filename", "line", "recompile_reason")})
        out.setdefault(path, []).append(row)
    return out


def _compiled_module_frame(frames: list[str], sources: list[str]) -> tuple[str, int | None, str] | None:
    """(path, line, source) of the innermost frame in a compile's generated module."""
    for k in range(len(frames) - 1, -1, -1):
        path, line, _ = _frame_parts(frames[k])
        if _COMPILED.search(path) and path.endswith(".py"):
            return path, line, ((sources[k] if k < len(sources) else "") or "").strip()
    return None


def _memory(c: dict[str, Any], uncaught: pl.DataFrame, modules: dict[str, list[dict[str, Any]]]) -> None:
    """Fill an out-of-memory crash: memory (parsers.oom), ran (the compile whose generated code
    raised: compile_id, occurrence, function, filename, line, module, module_line, statement,
    buffer {name, shape, dtype, symbolic}, recompile_reason, how), and its next step."""
    row = uncaught.filter((pl.col("file") == c["file"]) & (pl.col("lineno") == c["lineno"]))
    first = row.row(0, named=True) if row.height else {}
    frames = list(first.get("frames") or [])
    sources = list(first.get("sources") or [])
    mem = oom_of(c["message_full"] or "")
    ran = None
    hit = _compiled_module_frame(frames, sources)
    if hit is not None:
        path, line, src = hit
        cands = modules.get(path) or []
        if c["rank"] is not None:
            cands = [m for m in cands if m["rank"] in (c["rank"], None)] or cands
        buf = None
        if m := _ALLOC.match(src):
            shape = [d.strip() for d in m.group(2).split(",") if d.strip()]
            buf = {"name": m.group(1), "shape": "x".join(shape), "dtype": m.group(4),
                   "symbolic": any(_SYMBOL.fullmatch(d) for d in shape)}
        ran = {"module": path, "module_line": line, "statement": src or None, "buffer": buf,
               "compile_id": None, "occurrence": None, "function": None, "filename": None, "line": None,
               "recompile_reason": None, "how": None}
        if len(cands) == 1:
            k = cands[0]
            ran.update({f: k[f] for f in ("compile_id", "occurrence", "function", "filename", "line", "recompile_reason")})
            ran["how"] = "the traceback's generated module is the one the trace's inductor_output_code of this compile names"
        elif cands:
            ran["how"] = f"{len(cands)} compiles wrote this generated module (the cache served it again): not told apart"
        else:
            ran["how"] = "the trace names no compile that wrote this generated module (served from the cache, or not captured)"
    c["memory"] = mem
    c["ran"] = ran
    c["next_step"] = _memory_step(mem, ran, c["raised_in"])


def _grew(ran: dict[str, Any] | None) -> str:
    """What the trace says of the input the failing compiled code ran on."""
    if not ran or not ran.get("compile_id"):
        return ""
    why = (ran.get("recompile_reason") or "").strip()
    buf = ran.get("buffer") or {}
    if buf.get("symbolic"):
        after = f" (recompiled after {why})" if why else ""
        return (f" ({bracketed(ran['compile_id'], ran.get('occurrence'), ran.get('attempts'))} compiled its sizes as dynamic{after}: the failing call's sizes are not "
                f"in the log; {buf['name']} is {buf['shape']} {buf['dtype']})")
    if why:
        return f" ({bracketed(ran['compile_id'], ran.get('occurrence'), ran.get('attempts'))} is the recompile for the input that changed: {why})"
    return ""


def _memory_step(mem: dict[str, Any] | None, ran: dict[str, Any] | None, raised_in: str) -> str:
    """Memory's next steps (never the minifier: that is for wrong results)."""
    parts = []
    if mem is not None:
        held = mem.get("this_process")
        free = mem.get("free")
        asked = f"{mem['asked']['text']} asked"
        where = f" with {free['text']} free of {mem['capacity']['text']}" if free and mem.get("capacity") else ""
        tensors = f" ({mem['allocated']['text']} of it in PyTorch's tensors)" if mem.get("allocated") else ""
        who = f"; this process holds {held['text']}{tensors}" if held else ""
        parts.append(f"Out of device memory, not a compiler bug: {asked}{where}{who}.")
    else:
        parts.append("Out of device memory, not a compiler bug.")
    parts.append(f"Lower the batch or sequence length{_grew(ran)}.")
    parts.append(
        "Find what else holds memory: torch.cuda.memory._record_memory_history() early, then "
        "torch.cuda.memory._dump_snapshot('oom.pickle') in an except around the failing call "
        "(pytorch.org/memory_viz names each live tensor's allocation stack); "
        "torch.cuda.memory_summary() gives the totals."
    )
    if raised_in == "compiled code":
        parts.append(
            "Compare eager's peak with the compiled one on a size that fits: torch.cuda.reset_peak_memory_stats(), one "
            "step under torch.compiler.set_stance('force_eager'), torch.cuda.max_memory_allocated(); again compiled. "
            "A compiled peak above eager's is Inductor's buffer planning (worth a report); as high in eager, the model "
            "needs less per step (activation checkpointing, a smaller dtype)."
        )
    elif raised_in == "compiling":
        parts.append("It ran out while compiling (max-autotune benchmarks choices with buffers of their own): "
                     "mode='default' or a smaller batch while compiling.")
    if mem is not None and mem.get("reserved_unallocated") and mem["reserved_unallocated"]["bytes"] >= mem["asked"]["bytes"]:
        parts.append(
            f"{mem['reserved_unallocated']['text']} is reserved by PyTorch but unallocated (more than asked: "
            "fragmentation): PYTORCH_ALLOC_CONF=expandable_segments:True lets the allocator use it."
        )
    others = (mem or {}).get("other_processes") or []
    if others:
        held = ", ".join(f"process {o['pid']} {o['in_use']['text']}" for o in others)
        parts.append(f"Other processes hold memory on this device too ({held}).")
    return " ".join(parts)


# a launcher's report of a rank that died (its own error is in the capture's other lines)
_LAUNCHER_EXC = ("ProcessExitedException", "ProcessRaisedException", "ChildFailedError")


def _desync(exc_type: str, message: str, category: str, others: str) -> tuple[str, str] | None:
    """The distributed error this crash is (or, for a launcher's report of a rank that died by
    a signal, the one the capture's other lines show)."""
    found = distributed_error(message)
    # (an NCCL watchdog aborts the process: SIGABRT; a segmentation fault is the process's own)
    if found is None and (exc_type.rsplit(".", 1)[-1] in _LAUNCHER_EXC or (category == "segfault" and exc_type.startswith("Aborted"))):
        found = distributed_error(others)
    return found


def _desync_step(found: tuple[str, str], coll: dict[str, Any] | None, rank: int | None) -> tuple[str, list[int], str | None]:
    """(next step, the ranks to look at first, the compile id of the divergence)."""
    kind = found[0]
    mism = (coll or {}).get("mismatches") or []
    if mism:
        m = mism[0]
        first = mismatch_ranks(coll or {})
        who = ranks_text(first).strip()
        what = m["message"].removeprefix("collectives do not match: ").removeprefix("collective sizes do not match: ")
        what = what.rsplit(": expect ", 1)[0]
        return (
            f"A distributed desync ({kind}), explained by the compiled graphs (COLLECTIVES): {what}. "
            f"Look at {who} first: {m['next_step']}.",
            first,
            m["compile_id"],
        )
    unknown = (coll or {}).get("unknown") or []
    known = "" if (coll or {}).get("graphs") else " (no compiled graph logged a collective schedule: the collectives may be outside torch.compile, or the graphs came from the cache)"
    if unknown:
        known = f" (rank {unknown[0]['rank']}'s {bracketed(unknown[0]['compile_id'], unknown[0].get('occurrence'), unknown[0].get('attempts'))} schedule is unknown: {unknown[0]['why']})"
    first = [rank] if rank is not None else []
    return (
        f"A distributed desync ({kind}): the ranks did not issue the same collectives, or one stopped issuing them. "
        f"The compiled graphs' collective schedules do not explain it{known}. Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL, "
        "which checks every collective's op, sizes and dtypes across ranks and names the ranks that differ "
        "(NCCL: the flight recorder, TORCH_NCCL_TRACE_BUFFER_SIZE, shows each rank's last collectives); "
        "look for a rank-dependent branch or data of another size on one rank.",
        first,
        None,
    )


def _crash_rows(
    crashes: pl.DataFrame, other_lines: pl.DataFrame | None = None, collectives: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """`crash_findings` of `crashes` (parsers.tracebacks.uncaught_from_text rows)."""
    out: list[dict[str, Any]] = []
    roots = _root_of(crashes)
    for r in crashes.iter_rows(named=True):
        if is_stop_exception(r["exc_type"], r["message"]):
            continue  # stopped from outside (a signal, Ctrl-C): analyze.stops, not the program's error
        if r["kind"] == "launcher":
            out.append(_launcher_desync(_launcher_finding(r), other_lines, collectives))
            continue
        others = ""
        if other_lines is not None and other_lines.height:
            others = "\n".join(other_lines.filter(pl.col("file") == r["file"])["text"].to_list())
        frames = r["frames"] or []
        sources = r["sources"] or []
        message = r["message"] or ""
        cat, raised_in = _category(r["exc_type"] or "", message, frames, others)
        desync = _desync(r["exc_type"] or "", message, cat, others)
        if desync is not None:
            cat = "distributed_desync"
        filename, line, function, code = _user_frame(frames, sources)
        # a torch.compile error names the user line in its message ("from user code:", "User stack:")
        if raised_in in ("compiling", "exporting"):
            uf = user_frame_of(message)
            if uf is not None:
                filename, line, function, code = uf
        step = CRASH_STEPS.get(cat) or next_step(cat, (r["exc_type"] or "").rsplit(".", 1)[-1], message)
        if cat == "graph_break":
            step = (
                "Unsupported reached the caller: the function is compiled with fullgraph=True (or "
                "error_on_graph_break), so the graph break raised instead of running eagerly. Remove "
                "the construct at the user line (the message's hints say how), or drop fullgraph=True "
                "to let Dynamo split the graph there."
            )
        kernel, at_launch = _kernel(frames, sources)
        if kernel is not None and cat in ("cuda_illegal_memory_access", "triton_assert", "triton", "runtime_error_in_compiled_code"):
            ks = _kernel_step(cat, kernel, at_launch)
            if ks is not None:
                step = ks if at_launch else step + ks
        # a compiled frame's line is its `@torch.compile` or (out of memory) its `def`: the call is the next user frame
        opener = ("@", "def ") if cat == "out_of_memory" else ("@",)
        called_from = _caller(frames, sources, line, filename) if (code or "").lstrip().startswith(opener) else None
        if cat == "export_data_dependent":  # the program's export call: its user frame before torch.export's
            k = next((i for i, fr in enumerate(frames) if EXPORT_PATH.search(_frame_parts(fr)[0])), len(frames))
            ef, el, efn, ecode = _user_frame(frames[:k], sources[:k])
            if ef is not None and (ef, el) != (filename, line):
                called_from = {"filename": ef, "line": el, "function": efn, "code": (ecode or "").strip() or None}
        root = roots.get(r["file"])
        consequence = root if root is not None and r["rank"] is not None and r["rank"] != root else None
        certainty, evidence = r["certainty"], r["evidence"]
        look_first: list[int] = []
        diverged_in = None
        if desync is not None:
            step, look_first, diverged_in = _desync_step(desync, collectives, r["rank"])
            if diverged_in is not None:
                evidence = f"{evidence}; {desync[1]}; the ranks' collective schedules differ"
            else:
                evidence = f"{evidence}; {desync[1]}"
        if consequence is not None and diverged_in is None:
            how = "torchrun names it the first observed failure" if r["root_rank"] is not None else "its error is its own, this one is a collective that lost its peer"
            step = (
                f"Probably a consequence of rank {consequence}'s failure ({how}): when one rank dies, the "
                f"collectives of the others fail. Fix rank {consequence}'s error first."
            )
            certainty, evidence = "likely", f"{evidence}; rank {consequence} failed first ({how})"
        detail = detail_of(cat, message)
        extra = {"_frames": frames} if r["kind"] == "fatal" else {}
        out.append(
            {
                **extra,
                "rank": r["rank"],
                "kind": r["kind"],
                "exc_type": r["exc_type"],
                "message": headline(message) + (f" ({detail})" if detail else ""),
                "message_full": message,
                "category": cat,
                "raised_in": raised_in,
                "function": function,
                "filename": filename,
                "line": line,
                "code": code,
                "called_from": called_from,
                "kernel": kernel if at_launch else None,
                "memory": None,
                "ran": None,
                "stance": None,
                "next_step": step,
                "consequence_of": consequence,
                "distributed_error": None if desync is None else {"kind": desync[0], "line": desync[1]},
                "look_first": look_first,
                "diverged_in": diverged_in,
                "certainty": certainty,
                "evidence": evidence,
                "file": r["file"],
                "lineno": r["lineno"],
            }
        )
    # the rank that failed first before the ranks that failed because of it
    # (a stance's refusal before the launcher's report of it)
    out.sort(key=lambda c: (c["consequence_of"] is not None, c["category"] != "stance_refused"))
    return out


def _launcher_desync(
    finding: dict[str, Any], other_lines: pl.DataFrame | None, collectives: dict[str, Any] | None
) -> dict[str, Any]:
    """torchrun's report of a rank that died without a Python traceback (an NCCL watchdog
    aborts the process from C++: SIGABRT), where the capture's other lines show a distributed
    error: a distributed desync, read from the failed rank's lines first."""
    if other_lines is None or other_lines.height == 0:
        return finding
    mine = other_lines.filter(pl.col("file") == finding["file"])
    root = finding["rank"]
    found = None
    if root is not None:
        found = distributed_error("\n".join(mine.filter(pl.col("rank") == root)["text"].to_list()))
    if found is None:
        found = distributed_error("\n".join(mine["text"].to_list()))
    if found is None:
        return finding
    step, look_first, diverged_in = _desync_step(found, collectives, root)
    tie = "; the ranks' collective schedules differ" if diverged_in is not None else ""
    return {
        **finding,
        "message": f"{finding['message']}: {found[0]}",
        "category": "distributed_desync",
        "next_step": step,
        "distributed_error": {"kind": found[0], "line": found[1]},
        "look_first": look_first,
        "diverged_in": diverged_in,
        "evidence": f"{finding['evidence']}; {found[1]}{tie}",
    }


def _launcher_finding(r: dict[str, Any]) -> dict[str, Any]:
    """torchrun's ChildFailedError alone: the ranks' own stderr is not in the capture."""
    m = _EXITCODE.search(r["message"] or "")
    root = r["root_rank"]
    code = f" (exit code {m.group(1)})" if m else ""
    who = f"rank {root} failed first{code}" if root is not None else "a rank failed"
    return {
        "rank": root, "kind": "launcher", "exc_type": r["exc_type"],
        "message": f"torchrun: {who}", "message_full": r["message"], "category": "launcher_child_failed",
        "raised_in": "launcher", "function": None, "filename": None, "line": None, "code": None,
        "called_from": None, "kernel": None, "memory": None, "ran": None, "stance": None,
        "next_step": (
            f"torchrun says {who}, but the ranks' own tracebacks are not in this capture: read that "
            "rank's stderr (torchrun --log-dir DIR --tee 3 keeps each rank's output in a file of "
            "its own) and run traceview on it."
        ),
        "consequence_of": None, "distributed_error": None, "look_first": [], "diverged_in": None,
        "certainty": r["certainty"], "evidence": r["evidence"],
        "file": r["file"], "lineno": r["lineno"],
    }
