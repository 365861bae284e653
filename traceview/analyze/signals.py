"""A process killed by a signal of its own making (SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE):
no Python error, so the facts are read from what the dying process and its launcher left.

* **Which signal**: faulthandler's `Fatal Python error: Segmentation fault` (PYTHONFAULTHANDLER=1),
  or an exit status: torchrun's `exitcode: -11` (`Signal 11 (SIGSEGV) received by PID`), a shell's
  `PID Segmentation fault (core dumped)` (a job script), srun's `task N: Segmentation fault`
  (parsers.stops). Certain either way.
* **Where**: faulthandler's stack (innermost first, no source lines): its innermost frame says
  whose native code it died in (Inductor's kernel launcher, the module Inductor generated, torch,
  the program's own code); the frame in the generated module (`…/xx/c<hash>.py`) names the compile
  that wrote it (the trace's `inductor_output_code` record of that path), and its line is a launch
  in the trace's copy of that code (the `kernel_calls` table: the kernel). Without faulthandler
  the stack is unknown, said so.
* **When**: the rank's last trace record before it died (torch logs nothing while compiled code
  runs: the crash came after it).
* **transformers' generate**: where the stack shows transformers' generation code calling a
  `torch.compile` wrapper that calls another one, the decode step was compiled twice over
  (transformers compiles it itself for a static cache); only on that evidence.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from parsers.code_location import is_torch, is_user
from parsers.stops import SIGNAL_WORDS
from traceview.trace import Trace

_FRAME = re.compile(r"^(.*):(\d+) in (.*)$")
# the module Inductor generated for a compile (its code cache: …/xx/c<hash>.py)
_GENERATED = re.compile(r"[/\\][a-z0-9]{2}[/\\]c[a-z0-9]{50,}\.py$")
_LAUNCHER = re.compile(r"static_(?:triton|cuda)_launcher\.py|triton[/\\]backends[/\\].*driver\.py|<string>")
_CUDAGRAPHS = re.compile(r"cudagraph_trees\.py|cudagraphs?\.py")
_STATIC_LAUNCHER = re.compile(r"static_(?:triton|cuda)_launcher\.py")
_COMPILE_WRAPPER = re.compile(r"_dynamo[/\\]eval_frame\.py$")
_TRANSFORMERS_GENERATE = re.compile(r"transformers[/\\]generation[/\\]")


def signal_of(fatal: str | None) -> str | None:
    """SIGSEGV for faulthandler's "Segmentation fault" (None for words it does not use)."""
    return SIGNAL_WORDS.get((fatal or "").strip())


def _parts(frame: str) -> tuple[str, int | None, str]:
    m = _FRAME.match(frame)
    return (m.group(1), int(m.group(2)), m.group(3)) if m else (frame, None, "")


def whose(frames: list[str]) -> dict[str, Any] | None:
    """The innermost Python frame of a faulthandler stack and whose code it is: "launcher"
    (Inductor's or Triton's kernel launcher), "generated" (the module Inductor generated: it
    called into the kernel it launches there), "program" (the program's own code), "torch",
    "library" (another package). None without frames."""
    if not frames:
        return None
    path, line, fn = _parts(frames[-1])
    if _LAUNCHER.search(path):
        who = "launcher"
    elif _GENERATED.search(path):
        who = "generated"
    elif is_torch(path):
        who = "torch"
    elif is_user(path):
        who = "program"
    else:
        who = "library"
    return {"path": path, "line": line, "function": fn, "whose": who}


def generated_frame(frames: list[str]) -> tuple[str, int | None, str] | None:
    """(path, line, function) of the innermost frame in a compile's generated module."""
    for f in reversed(frames):
        path, line, fn = _parts(f)
        if _GENERATED.search(path):
            return path, line, fn
    return None


def ran_in(
    trace: Trace, *, frames: list[str], rank: int | None, modules: dict[str, list[dict[str, Any]]]
) -> dict[str, Any] | None:
    """The compile whose generated code the stack runs: module, module_line, module_function,
    statement and kernel (the launch on that line, from the trace's copy of the code: the
    kernel_calls table), compile_id, occurrence, function, filename, line, how (how the compile
    was told). None where the stack has no frame in a generated module."""
    hit = generated_frame(frames)
    if hit is None:
        return None
    path, line, fn = hit
    cands = modules.get(path) or []
    if rank is not None:
        cands = [m for m in cands if m["rank"] in (rank, None)] or cands
    ran: dict[str, Any] = {"module": path, "module_line": line, "module_function": fn, "statement": None, "kernel": None,
                           "unchecked_indexing": False,
                           "compile_id": None, "occurrence": None, "function": None, "filename": None, "line": None,
                           "how": None}
    # one compile, or the same compile on every rank (ranks of one host share the code cache)
    same = len({(m["compile_id"], m["occurrence"]) for m in cands}) == 1 and len({m["rank"] for m in cands}) == len(cands)
    if cands and same:
        k = cands[0]
        ran.update({f: k[f] for f in ("compile_id", "occurrence", "function", "filename", "line")})
        ran["how"] = "the stack's generated module is the one the trace's inductor_output_code of this compile names" + (
            f" (on each of {len(cands)} ranks)" if len(cands) > 1 else "")
        ran["unchecked_indexing"] = _unchecked_indexing(trace, k["file"], k["compile_id"])
        calls = _kernel_calls(trace, k["rank"])
        if calls.height and line is not None:
            at = calls.filter((pl.col("file") == k["file"]) & (pl.col("lineno") == k["lineno"]) & (pl.col("line") == line))
            if at.height:
                r = at.row(0, named=True)
                ran["statement"] = r["text"]
                ran["kernel"] = r["name"] if r["kind"] not in ("return",) else None
    elif cands:
        ran["how"] = f"{len(cands)} compiles wrote this generated module (the cache served it again): not told apart"
    else:
        ran["how"] = "the trace names no compile that wrote this generated module (served from the cache, or not captured)"
    return ran


# the compile's Inductor config (compilation_metrics' inductor_config, JSON text) turned off the
# index checks of its generated kernels: an index out of range then reads outside the tensor
_UNCHECKED = re.compile(r'\\?"assert_indirect_indexing\\?": false')


def _unchecked_indexing(trace: Trace, file: str, compile_id: str) -> bool:
    ev = trace.index_events()
    m = ev.filter((pl.col("kind") == "compilation_metrics") & (pl.col("file") == file) & (pl.col("compile_id") == compile_id))
    return any(_UNCHECKED.search(x or "") for x in m["metadata"].to_list())


def _kernel_calls(trace: Trace, rank: int | None) -> pl.DataFrame:
    """The kernel calls of one rank's compiles (a detail: from that rank's files alone, for an export)."""
    try:
        return trace.rank_rows("kernel_calls", rank)
    except Exception:  # an export without the graph tables
        return pl.DataFrame()


def nested_generate(frames: list[str]) -> dict[str, Any] | None:
    """transformers' generate calling a torch.compile wrapper that calls another one (outermost
    first in `frames`): {generate: the generation frame, wrappers: how many compile wrappers}.
    None without that evidence."""
    wrappers = [k for k, f in enumerate(frames) if _COMPILE_WRAPPER.search(_parts(f)[0]) and _parts(f)[2] == "compile_wrapper"]
    if len(wrappers) < 2:
        return None
    first = wrappers[0]
    caller = next((frames[k] for k in range(first - 1, -1, -1) if not is_torch(_parts(frames[k])[0])), None)
    if caller is None or not _TRANSFORMERS_GENERATE.search(_parts(caller)[0]):
        return None
    path, line, fn = _parts(caller)
    short = "/".join(re.split(r"[/\\]", path)[-3:])
    return {"generate": f"{short}:{line} in {fn}", "wrappers": len(wrappers)}


def last_record(trace: Trace, *, rank: int | None, file: str | None = None) -> dict[str, Any] | None:
    """The rank's last trace record other than a chromium span (what torch logged last before
    the process died): kind, compile_id, ts, file, lineno, and last_ts (its very last record's
    time, spans included)."""
    ev = trace.index_events()
    if ev.is_empty():
        return None
    mine = ev.filter(pl.col("rank").is_null() if rank is None else pl.col("rank") == rank)
    if file is not None and mine.filter(pl.col("file") == file).height:
        mine = mine.filter(pl.col("file") == file)
    if mine.is_empty():
        return None
    last_file = mine.sort("ts", "lineno", nulls_last=False)["file"][-1]
    mine = mine.filter(pl.col("file") == last_file).sort("lineno")
    last_ts = mine["ts"].drop_nulls()
    named = mine.filter(pl.col("kind") != "chromium_event")
    if named.is_empty():
        return None
    r = named.row(-1, named=True)
    return {"kind": r["kind"], "compile_id": r["compile_id"], "ts": r["ts"], "file": r["file"], "lineno": r["lineno"],
            "last_ts": last_ts[-1] if last_ts.len() else None}


def signal_step(
    signal: str, *, faulthandler: bool, who: dict[str, Any] | None, ran: dict[str, Any] | None,
    frames: list[str], nested: dict[str, Any] | None,
) -> str:
    """The next steps for a process killed by a crash signal, from what its stack shows."""
    joined = "\n".join(frames)
    parts = []
    if not faulthandler:
        parts.append("Rerun with PYTHONFAULTHANDLER=1: it prints the Python stack of the crash (which compile's "
                     "generated code, which kernel launch).")
    mine = who is not None and who["whose"] == "program"
    if ran is not None and ran.get("unchecked_indexing"):
        parts.append("This compile ran with torch._inductor.config.assert_indirect_indexing = False: its kernels do "
                     "not check their indices, so an index out of range reads outside the tensor and crashes instead "
                     "of raising. Turn the check back on (the default) first: an out-of-range index then raises an "
                     "error naming it; only a crash with the check on is torch's to fix.")
    elif mine:
        parts.append(f"The innermost frame is your own code ({who['function']}): a native extension or ctypes call "
                     "there died; check it outside torch.compile first.")
    elif ran is not None or (who is not None and who["whose"] in ("launcher", "generated", "torch")):
        what = {"generated": "in the kernel Inductor generated", "launcher": "in Inductor's kernel launch"}.get(
            (who or {}).get("whose", ""), "in torch's native code")
        parts.append(f"It died {what}, not in a Python error of yours: a crash in torch/Inductor to report "
                     "(a pytorch/pytorch issue with this stack and the versions).")
    if _CUDAGRAPHS.search(joined):
        parts.append("mode='default' instead of 'reduce-overhead' drops CUDA graphs (their trees run this code).")
    if _STATIC_LAUNCHER.search(joined):
        parts.append("TORCHINDUCTOR_USE_STATIC_CUDA_LAUNCHER=0 launches the kernels through Triton's own launcher "
                     "(it raises a Python error where the static launcher crashes).")
    if not (_CUDAGRAPHS.search(joined) or _STATIC_LAUNCHER.search(joined)):
        parts.append("Narrow it down: backend='aot_eager' (no Inductor) runs the same graph without generated code; "
                     "if it runs, the generated kernel is at fault.")
    if nested is not None:
        parts.append(f"transformers' generate ({nested['generate']}) already compiles the static-cache decode step "
                     "itself: compiling model.forward by hand as well nests one torch.compile inside another; "
                     "drop the manual torch.compile (or pass generation_config.compile_config / disable_compile=True).")
    return " ".join(parts)
