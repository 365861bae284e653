"""`traceview watch` on a real log written while it watches.

The log is a real GPU run (fixtures/gpu/sequential_max_autotune: torch.compile(nn.Sequential)
under max-autotune, batch 64 then 128: [0/0], then [0/1] recompiles for dimension 0 of x; torch's
own "Recompiling function" line in its torch_logs.txt says so). The tests copy its bytes into an
empty directory piece by piece, cut where a writer can be caught (mid-line, mid-record), as a
running job writes it; nothing is hand-written.
"""

from __future__ import annotations

import gzip
import io
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

import orjson
import pytest

from tests.conftest import FIXTURES, ROOT, SHARED, needs_shared
from traceview.analyze.wording import seconds_text
from traceview.live.watch import Watch, watch

LOG = next((FIXTURES / "gpu" / "sequential_max_autotune" / "trace").glob("*.log.gz"))
NAME = LOG.name.removesuffix(".gz")


def _log() -> bytes:
    return gzip.decompress(LOG.read_bytes())


def _after_line(data: bytes, needle: bytes) -> int:
    """The offset just after the line holding `needle`."""
    at = data.index(needle)
    return data.index(b"\n", at) + 1


def _cuts(data: bytes) -> tuple[int, int]:
    """(end of [0/0]'s compilation_metrics line, the middle of the line after it)."""
    end00 = _after_line(data, b'{"compilation_metrics": {"compile_id": "0/0"')
    nxt = data.index(b"\n", end00)
    return end00, end00 + (nxt - end00) // 2


def _record_start_after(data: bytes, pos: int) -> int:
    """The start of the first record (a line not starting with a tab) after `pos`."""
    p = data.index(b"\n", pos) + 1
    while data[p : p + 1] == b"\t":
        p = data.index(b"\n", p) + 1
    return p


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def _watch(d: Path, **kw) -> tuple[Watch, io.StringIO]:
    out = io.StringIO()
    w = Watch([str(d)], out=out, json_lines=True, **kw)
    w.start()
    return w, out


def _lines(out: io.StringIO) -> list[dict]:
    return [orjson.loads(x) for x in out.getvalue().splitlines() if x.strip()]


def test_watch_reports_each_compile_and_the_recompile_as_the_log_grows(tmp_path: Path) -> None:
    data = _log()
    end00, mid = _cuts(data)
    f = tmp_path / NAME
    w, out = _watch(tmp_path)
    assert _lines(out)[0]["event"] == "digest" and _lines(out)[0]["files"] == 0

    # [0/0] and half of the next line: the half line is held, never an error
    _append(f, data[:mid])
    now = time.monotonic()
    first = w.step(now=now)
    assert [(e.kind, e.compile_id) for e in first] == [("compile_start", "0/0"), ("compile_end", "0/0")]
    end = first[1]
    assert end.data["outcome"] == "ok"
    assert end.text.startswith("[0/0] compiled in 19.72s: Sequential via torch.compile(model)")
    assert w.tail.files[str(f)].offset == end00  # the half-written line waits
    assert w.step(now=now + 0.1) == []  # nothing new: nothing said again

    # the rest lands: [0/1], its cause, its end
    _append(f, data[mid:])
    rest = w.step(now=now + 0.2)
    kinds = [(e.kind, e.compile_id) for e in rest]
    assert kinds == [("compile_start", "0/1"), ("recompile", "0/1"), ("compile_end", "0/1")]
    rec = rest[1]
    assert rec.data["cause"] == "dimension 0 of x (the wrapper's args[0]) varies (seen: 64, 128)"
    assert rec.data["expected"] is True
    assert rest[2].text.startswith("[0/1] compiled in 106s")

    # the same figures as the summary of the whole log, and no problem from the cut line
    from traceview.ingest.loading import LoadOptions, load_trace

    whole = load_trace(LoadOptions.of(str(tmp_path), use_cache=False))
    secs = dict(whole.compiles.select("compile_id", "total_time_s").iter_rows())
    assert (first[1].data["seconds"], rest[2].data["seconds"]) == (secs["0/0"], secs["0/1"])
    assert w.tables.trace().problems.is_empty()
    assert w.tables.bytes_parsed == len(data)  # every byte parsed once

    w.finish()
    last = _lines(out)[-1]
    assert last["event"] == "stopped"
    assert last["counts"] == {"compile_start": 2, "compile_end": 2, "recompile": 1}


def test_a_compile_in_progress_is_a_busy_line_in_the_summary_s_words(tmp_path: Path) -> None:
    """Cut inside [0/1] (in its autotuning): the busy line names the phase analyze.unfinished
    gives the same cut log in `summary`."""
    data = _log()
    start01 = data.index(b'"dynamo_start"', _cuts(data)[0])
    end01 = data.index(b'{"compilation_metrics": {"compile_id": "0/1"')
    cut = _record_start_after(data, start01 + (end01 - start01) * 6 // 10)
    f = tmp_path / NAME
    w, out = _watch(tmp_path, busy_after_s=0.0, busy_every_s=0.0)
    _append(f, data[:cut])
    w.step(now=time.monotonic())
    busy = [x for x in _lines(out) if x["event"] == "busy"]
    assert len(busy) == 1 and busy[0]["compile_id"] == "0/1"

    from traceview.analyze.unfinished import unfinished_compiles
    from traceview.ingest.loading import LoadOptions, load_trace

    (u,) = unfinished_compiles(load_trace(LoadOptions.of(str(tmp_path), use_cache=False)))
    assert busy[0]["phase"] == u["phase"] and busy[0]["innermost_span"] == u["innermost_span"]
    assert busy[0]["text"].startswith(f"[0/1] busy {seconds_text(u['running_s'])} in {u['phase']}")


def test_new_rank_files_and_ranks_are_followed(tmp_path: Path) -> None:
    """A 2-rank CPU run (fixtures/multirank, gloo): rank 1's file appears after the watch
    began; its compiles carry its rank."""
    src = sorted((FIXTURES / "multirank" / "trace").glob("*.log"))
    assert len(src) >= 2
    w, _ = _watch(tmp_path)
    (tmp_path / src[0].name).write_bytes(src[0].read_bytes())
    now = time.monotonic()
    ranks0 = {e.rank for e in w.step(now=now)}
    (tmp_path / src[1].name).write_bytes(src[1].read_bytes())
    ranks1 = {e.rank for e in w.step(now=now + 0.1)}
    assert ranks0 == {0} and ranks1 == {1}


def test_a_file_cut_and_written_again_starts_over(tmp_path: Path) -> None:
    data = _log()
    end00, _ = _cuts(data)
    f = tmp_path / NAME
    f.write_bytes(data[:end00])
    w, out = _watch(tmp_path)
    assert _lines(out)[0]["compiles"] == 1  # the digest: what was there
    f.write_bytes(data[:1000])  # the job started again: the file is shorter
    now = time.monotonic()
    w.step(now=now)
    assert w.tail.files[str(f)].offset <= 1000
    _append(f, data[1000:end00])
    again = w.step(now=now + 0.1)
    # the compile of the new run is the same id in a new file: said again
    assert [(e.kind, e.compile_id) for e in again][-1] == ("compile_end", "0/0")


def test_a_text_log_s_last_record_waits_for_its_lines(tmp_path: Path) -> None:
    """A TORCH_LOGS capture (fixtures/recompiles: torch 2.13 prints 8 recompiles of
    shape_storm, then the recompile limit): written cut inside its multi-line "Recompiling
    function" messages, every recompile is said once, with its whole cause."""
    text = (FIXTURES / "recompiles" / "torch_logs.txt").read_bytes()
    log = tmp_path / "torch_logs.txt"
    log.write_bytes(b"")
    out = io.StringIO()
    w = Watch([str(log)], out=out, json_lines=True)
    w.start()
    now = time.monotonic()
    step = 3000
    for i in range(0, len(text), step):
        _append(log, text[i : i + step])
        now += 0.2  # growing: less than settle_s between polls
        w.step(now=now)
    w.step(now=now + 5)
    recs = [x for x in _lines(out) if x["event"] == "recompile"]
    storm = [x for x in recs if x["function"] == "shape_storm"]
    assert [x["compile_id"] for x in storm] == [f"0/{i}" for i in range(1, 9)]
    assert all(x["cause"].startswith("dimension 1 of x varies") for x in storm)
    assert [x["compile_id"] for x in _lines(out) if x["event"] == "failure"] == ["0/8"]


@pytest.mark.e2e
def test_the_command_ends_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    """The real command on an empty directory: [0/0] within 5 s of its lines landing, the
    half-written line survived, [0/1] and its cause as the rest lands, exit 0 on SIGINT."""
    data = _log()
    _, mid = _cuts(data)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "traceview", "watch", str(tmp_path), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    try:
        def read_until(kind: str, cid: str, deadline: float) -> list[dict]:
            got = []
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                got.append(orjson.loads(line))
                if got[-1]["event"] == kind and got[-1].get("compile_id") == cid:
                    return got
            raise AssertionError(f"no {kind} [{cid}] in time: {got}")

        assert orjson.loads(proc.stdout.readline())["event"] == "digest"
        _append(tmp_path / NAME, data[:mid])
        landed = time.monotonic()
        read_until("compile_end", "0/0", landed + 5)
        assert time.monotonic() - landed < 5
        _append(tmp_path / NAME, data[mid:])
        got = read_until("compile_end", "0/1", time.monotonic() + 10)
        assert [x["cause"] for x in got if x["event"] == "recompile"] == ["dimension 0 of x (the wrapper's args[0]) varies (seen: 64, 128)"]
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert err == b""
    assert orjson.loads(rest.splitlines()[-1])["event"] == "stopped"


def test_watch_of_a_missing_parent_is_one_line(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "traceview", "watch", str(tmp_path / "no" / "such")],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2
    assert r.stderr.strip().endswith("no such file or directory (nor its parent directory)")
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("fs", ["nfs4", "ext4"])
def test_network_file_systems_are_polled(fs: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from traceview.live import watch as wmod

    mounts = f"server:/export {tmp_path} {fs} rw 0 0\n"
    monkeypatch.setattr(wmod.Path, "read_text", lambda self, **kw: mounts if str(self) == "/proc/mounts" else "")
    assert wmod.network_fs(str(tmp_path / "trace")) == ("nfs4" if fs == "nfs4" else None)


def test_a_rank_behind_the_others_is_said_as_summary_says_it(tmp_path: Path) -> None:
    """The 4-rank gloo run (fixtures/corpus/multirank4) with rank 1's log cut inside its first
    compile (a hand-cut copy of the real log): the watch's digest and busy line say what
    `summary` says of it: behind ranks 0, 2, 3, in AOTAutograd, for the same time."""
    for f in sorted((FIXTURES / "corpus" / "multirank4" / "trace").glob("*.log.gz")):
        data = gzip.decompress(f.read_bytes())
        if "_rank_1_" in f.name:
            data = b"\n".join(data.split(b"\n")[:500]) + b"\n"
        (tmp_path / f.name.removesuffix(".gz")).write_bytes(data)
    w, out = _watch(tmp_path, busy_after_s=0.0, busy_every_s=0.0)
    w.step(now=time.monotonic() + 5)
    digest, busy = _lines(out)[0], [x for x in _lines(out) if x["event"] == "busy"]
    assert (digest["files"], digest["compiles"], digest["finding_counts"]["unfinished"]) == (4, 11, 1)
    assert digest["findings"][0]["kind"] == "unfinished"  # the summary's order: the hang first

    from traceview.analyze.unfinished import unfinished_compiles
    from traceview.ingest.loading import LoadOptions, load_trace

    (u,) = unfinished_compiles(load_trace(LoadOptions.of(str(tmp_path), use_cache=False)))
    assert (u["rank"], u["compile_id"], u["behind"]) == (1, "0/0", True)
    assert len(busy) == 1 and busy[0]["rank"] == 1 and busy[0]["behind"] is True
    assert busy[0]["text"] == (
        f"[0/0] busy {seconds_text(u['running_s'])} in AOTAutograd (create_aot_dispatcher_function): "
        "TinyNet.forward (multirank4.py:30); ranks 0,2,3 finished it: likely behind the others"
    )


@needs_shared
def test_a_lazily_compiled_backward_completes_the_compile_s_total(tmp_path: Path) -> None:
    """A real GPU training run (shared traces gpu/train_dynamic): Block.forward [1/0]'s forward
    ends (its compilation_metrics: 2.94 s), its backward is compiled at the first backward call
    (bwd_compilation_metrics: 1.22 s). The watch says the forward when it ends and the total,
    labelled, when the backward lands: the summary's 4.16 s, never a second figure for it."""
    data = (SHARED / "gpu" / "train_dynamic" / "trace" / "dedicated_log_torch_trace_8z8_rtmc.log").read_bytes()
    fwd_end = _record_start_after(data, data.index(b'{"compilation_metrics": {"compile_id": "1/0"'))
    bwd_end = _record_start_after(data, data.index(b'{"bwd_compilation_metrics": {"compile_id": "1/0"'))
    f = tmp_path / "dedicated_log_torch_trace_8z8_rtmc.log"
    w, _ = _watch(tmp_path)
    _append(f, data[:fwd_end])
    now = time.monotonic()
    first = [e for e in w.step(now=now) if e.compile_id == "1/0"]
    assert [e.kind for e in first] == ["compile_start", "compile_end"]
    assert first[1].text == "[1/0] compiled in 2.94s: Block.forward (gpt.py:19)"
    _append(f, data[fwd_end:bwd_end])
    (bwd,) = [e for e in w.step(now=now + 1) if e.compile_id == "1/0"]
    assert bwd.kind == "backward_end"
    assert bwd.text == "[1/0] backward compiled in 1.23s: Block.forward (gpt.py:19); 4.16s in all (forward 2.94s + backward 1.23s)"
    from traceview.ingest.loading import LoadOptions, load_trace
    from traceview.output.report import build_report

    top = build_report(load_trace(LoadOptions.of(str(tmp_path), use_cache=False)))["compile_time"]["top"]
    assert bwd.data["seconds"] == pytest.approx(next(t["seconds"] for t in top if t["compile_id"] == "1/0"), abs=0.0005)
    assert seconds_text(bwd.data["seconds"]) == "4.16s"
    # a restart is said with the summary's id, tied to the id its start was said with
    _append(f, data[bwd_end:])
    later = w.step(now=now + 2)
    assert "[2/0_1] compiled (restarted after the graph break of [2/0]) in 0.03s: step (train.py:16)" in [e.text for e in later]
    w.finish()


def test_an_interrupt_lost_in_a_finalizer_still_ends_the_watch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C whose KeyboardInterrupt is raised inside a finalizer the garbage collector runs
    (Python only reports it there; the backlog's tables are freed right after the digest): the
    watch ends all the same, with its `stopped` line, and nothing is reported of it."""
    reported: list = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    out = io.StringIO()
    stop = threading.Event()
    safety = threading.Timer(20, stop.set)  # a watch that missed the interrupt ends here
    safety.start()

    class Freed:
        pass

    def interrupt_in_a_finalizer(w: Watch) -> None:
        obj = Freed()
        weakref.finalize(obj, os.kill, os.getpid(), signal.SIGINT)
        del obj

    t0 = time.monotonic()
    try:
        assert watch([str(tmp_path)], out=out, json_lines=True, stop=stop, on_step=interrupt_in_a_finalizer,
                     interval_s=0.2) == 0
    finally:
        safety.cancel()
    assert time.monotonic() - t0 < 10 and not stop.is_set()
    assert [x["event"] for x in _lines(out)] == ["digest", "stopped"]
    assert reported == [] and sys.unraisablehook == reported.append  # put back
