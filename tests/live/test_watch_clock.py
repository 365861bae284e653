"""`traceview watch` takes a compile's time from the log's own clock, and never calls a dead
job's compile running.

Every log here is a real torch 2.13 CPU run (fixtures/README.md says how each was made): jobs
stopped from outside (`stop_killed_in_codegen`: rank 1 SIGKILLed inside Inductor's code_gen,
torchrun then stops rank 0; `stop_backward_compiling`: `timeout` while both ranks compile the
backward; `stop_idle_torchrun`: `timeout` after every compile ended; `stop_hang_behind_rank`:
`timeout` while rank 1 hangs in a recompile rank 0 finished; `stop_interrupted_compile`:
a KeyboardInterrupt inside code_gen) and jobs that crashed (`rank_crash_spawn`,
`rank_crash_torchrun`), and a GPU run stopped while its backward autotuned
(`gpu/stop_backward_autotuning`). The oracle is `summary --json` of the same files: the watch says the
job ended, with the summary's words and figures, and says no compile is running. A live follow
grows `stop_killed_in_codegen`'s own bytes piece by piece, as its job wrote them.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import FIXTURES
from traceview.cli import main
from traceview.live.watch import END_QUIET_S, QUIET_S, Watch

DEAD = ["stop_killed_in_codegen", "stop_interrupted_compile", "stop_backward_compiling", "stop_idle_torchrun",
        "stop_hang_behind_rank", "rank_crash_spawn", "rank_crash_torchrun",
        # a GPU run (torch 2.11, H200): `timeout` while the backward autotunes a GEMM
        "gpu/stop_backward_autotuning"]


def _summary(capsys: pytest.CaptureFixture[str], *paths: str, as_json: bool = True) -> dict | str:
    capsys.readouterr()
    assert main(["summary", *paths, *(["--json"] if as_json else []), "--no-cache"]) == 0
    out = capsys.readouterr().out
    return orjson.loads(out) if as_json else out


def _watch(paths: list[str], logs: list[str], *, json_lines: bool = True, **kw: object) -> tuple[Watch, io.StringIO]:
    out = io.StringIO()
    w = Watch(paths, logs, out=out, json_lines=json_lines, busy_after_s=0.0, busy_every_s=0.0, **kw)
    w.start()
    return w, out


def _lines(out: io.StringIO) -> list[dict]:
    return [orjson.loads(x) for x in out.getvalue().splitlines() if x.strip()]


def _no_figure_of_its_own(text: str, summary: str) -> None:
    """Every duration the watch printed is one the summary prints."""
    figures = set(re.findall(r"\b\d+(?:\.\d+)?s\b", text))
    assert figures <= set(re.findall(r"\b\d+(?:\.\d+)?s\b", summary)), figures - set(re.findall(r"\b\d+(?:\.\d+)?s\b", summary))


@pytest.mark.parametrize("name", DEAD)
def test_a_dead_job_s_watch_says_it_ended_with_the_summary_s_words(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    d = FIXTURES / name
    paths, logs = [str(d / "trace")], [str(d / "torch_logs.txt")]
    ref = _summary(capsys, *paths, *logs)
    ends = [f for f in ref["findings"] if f["kind"] in ("stop", "crash")]
    assert ends, "the summary says how the job ended"

    w, out = _watch(paths, logs)
    w.step(now=time.monotonic() + 60)  # a minute later: nothing was written
    w.finish()
    lines = _lines(out)
    digest, ended = lines[0], [x for x in lines if x["event"] == "ended"]
    assert digest["state"] == "ended"
    assert len(ended) == 1 and ended[0]["text"].startswith("the job ended: ")
    # never running, never a figure from the watcher's clock
    assert not [x for x in lines if x["event"] in ("busy", "quiet")]
    said = " ".join([x.get("text") or "" for x in lines] + [f["claim"] for x in ended for f in x["findings"]])
    assert "running" not in said and "busy" not in said
    # the summary's findings: the same claims, lines and figures
    mine = {f["key"]: f for f in ended[0]["findings"]}
    theirs = {f["key"]: f for f in ref["findings"] if f["kind"] in ("stop", "crash", "unfinished")}
    assert mine == theirs
    assert ended[0]["stops"] == [
        {**{k: st[k] for k in ("kind", "signal", "target", "by", "at")},
         "ranks": [{k: v for k, v in r.items() if k != "file"} for r in st["ranks"]]}
        for st in ref["stops"]
    ]
    # each compile a rank was inside: the unfinished compile's time, the summary's
    inside = {(r["rank"], r["compile_id"]): r["running_s"] for st in ended[0]["stops"] for r in st["ranks"]
              if r["state"] == "compiling"}
    assert inside == {(r["rank"], r["compile_id"]): r["running_s"] for st in ref["stops"] for r in st["ranks"]
                      if r["state"] == "compiling"}


@pytest.mark.parametrize("name", DEAD)
def test_a_dead_job_s_watch_text_is_the_summary_s(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    d = FIXTURES / name
    paths, logs = [str(d / "trace")], [str(d / "torch_logs.txt")]
    summary = _summary(capsys, *paths, *logs, as_json=False)
    w, out = _watch(paths, logs, json_lines=False)
    w.step(now=time.monotonic() + 60)
    text = out.getvalue()
    head, _, rest = text.partition("\n\n")
    assert summary.startswith(head)  # the summary's head
    block, _, last = rest.rstrip("\n").rpartition("\n")
    assert block.strip() and block in summary  # its sections of how the job ended, as it prints them
    assert re.fullmatch(r"the job ended: .+; watching \d log files; Ctrl-C ends", last)
    assert last.removeprefix("the job ended: ").split(";")[0] in " ".join(head.split())  # the head's words
    own = text.replace(block, "")  # what the watch says besides the summary's sections
    assert "busy" not in own and "running" not in own
    _no_figure_of_its_own(text, summary)


def test_a_killed_job_s_trace_alone_is_no_record_since_never_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without the launcher's lines nothing says the job ended: the two compiles rank 0 and 1
    were inside are said at the log's figure (the summary's) with how long nothing was
    written, an hour here (the files' own modification time), never as running."""
    trace = tmp_path / "trace"
    shutil.copytree(FIXTURES / "stop_killed_in_codegen" / "trace", trace)
    hour_ago = time.time() - 3600
    for f in trace.iterdir():
        os.utime(f, (hour_ago, hour_ago))
    ref = _summary(capsys, str(trace))
    figures = {(u["rank"], u["compile_id"]): u["running_s"] for u in ref["unfinished_compiles"]}
    assert figures == {(0, "0/0"): 8.233, (1, "0/0"): 8.299}

    w, out = _watch([str(trace)], [])
    w.step()
    lines = _lines(out)
    assert lines[0]["state"] == "quiet" and lines[0]["unfinished"] == 2
    quiet = [x for x in lines if x["event"] == "quiet"]
    assert {(x["rank"], x["compile_id"]): x["seconds"] for x in quiet} == figures
    assert all(3600 <= x["no_record_s"] < 3700 and "running_s" not in x for x in quiet)
    assert not [x for x in lines if x["event"] == "busy"]

    w, out = _watch([str(trace)], [], json_lines=False)
    w.step()
    text = out.getvalue()
    assert "watching 2 log files; 2 compiles not ended, no record for 60 min; Ctrl-C ends" in text
    assert "rank 1  [0/0] in inductor code_gen (code_gen) for 8.30s up to the last record, then no record for 60 min: forward (stops_torchrun.py:54)" in text
    assert "running" not in text and "busy" not in text


def _write(path: Path, data: bytes, at: float) -> None:
    """Append `data` as the job wrote it at `at` (time.monotonic): the file's modification time
    says so (a file the watch finds says by its mtime when it was last written)."""
    with open(path, "ab") as fh:
        fh.write(data)
    wall = time.time() - (time.monotonic() - at)
    os.utime(path, (wall, wall))


def _lines_upto(data: bytes, n: int) -> bytes:
    """The first `n` lines of a log."""
    return b"".join(data.splitlines(keepends=True)[:n])


def _record_starts(data: bytes) -> list[int]:
    """The offsets where a trace log's records start (a line not starting with a tab)."""
    return [m.start() + 1 for m in re.finditer(rb"\n(?!\t)", data)][:-1]


def test_a_live_follow_runs_the_clock_while_records_land_and_ends_with_the_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """stop_killed_in_codegen's bytes land as its job wrote them: both ranks' traces into their
    compile in two pieces, then, after a silence, torchrun's lines. While records land the
    compiles are running, at the summary's figure of what landed; the wall clock adds to it
    only while files grow; silent for QUIET_S, "no record for"; the stop's lines end it with
    the summary's STOPPED and no compile is called running again."""
    src = FIXTURES / "stop_killed_in_codegen"
    trace = tmp_path / "trace"
    trace.mkdir()
    text_log = tmp_path / "torch_logs.txt"
    ranks = {f.name.removesuffix(".gz"): gzip.decompress(f.read_bytes()) for f in sorted((src / "trace").glob("*.log.gz"))}
    halves = {}
    for name, data in ranks.items():
        start = data.index(b'"dynamo_start"')
        halves[name] = next(p for p in _record_starts(data) if p > start + (len(data) - start) // 2)

    t0 = time.monotonic() - 60  # the job's clock: it began a minute ago
    write = _write
    w, out = _watch([str(trace)], [str(text_log)])
    text = src.joinpath("torch_logs.txt").read_bytes()
    banner = text[: text.index(b"\nW1126") + 1]  # torchrun's banner: written at the start
    write(text_log, banner, t0)
    for name, data in ranks.items():
        write(trace / name, data[: halves[name]], t0)
    w.step(now=t0)

    def said(*kinds: str) -> list[dict]:
        """What was said since the last call, of these kinds (all of them are read and cleared)."""
        got = [x for x in _lines(out) if x["event"] in kinds]
        out.seek(0)
        out.truncate()
        return got

    first = said("busy")
    assert {x["rank"] for x in first} == {0, 1}
    assert all(x["running_s"] == x["seconds"] for x in first)  # just landed: the log's own figure
    capsys.readouterr()
    ref = {(u["rank"], u["compile_id"]): u["running_s"] for u in _summary(capsys, str(trace))["unfinished_compiles"]}
    assert {(x["rank"], x["compile_id"]): x["seconds"] for x in first} == ref

    for name, data in ranks.items():  # more records of the same compiles: the clock moves on
        write(trace / name, data[halves[name]:], t0 + 1)
    w.step(now=t0 + 1)
    second = said("busy")
    ref = {(u["rank"], u["compile_id"]): u["running_s"] for u in _summary(capsys, str(trace))["unfinished_compiles"]}
    assert {(x["rank"], x["compile_id"]): x["seconds"] for x in second} == ref == {(0, "0/0"): 8.233, (1, "0/0"): 8.299}
    assert all(x["seconds"] > y["seconds"] for x, y in zip(second, first, strict=True))

    # 3 s without a record: alive (a file grew within QUIET_S), the watcher's clock adds 3 s
    w.step(now=t0 + 4)
    third = said("busy")
    assert [round(x["running_s"] - x["seconds"], 3) for x in third] == [3.0, 3.0]
    # silent for longer than QUIET_S: the log's figure and the silence, not running
    w.step(now=t0 + 1 + QUIET_S + 1)
    quiet = said("quiet", "busy")
    assert [x["event"] for x in quiet] == ["quiet", "quiet"]
    assert {(x["rank"], x["compile_id"]): x["seconds"] for x in quiet} == ref
    assert [x["no_record_s"] for x in quiet] == [QUIET_S + 1] * 2

    # torchrun's lines land: rank 1 was killed, rank 0 stopped
    t1 = t0 + 20
    write(text_log, text[len(banner):], t1)
    w.step(now=t1)
    assert said("busy", "quiet", "ended") == []  # lines that may end the job: never running meanwhile
    w.step(now=t1 + 1.5)  # the launcher's last record is whole once the file stops growing
    w.step(now=t1 + 1.5 + END_QUIET_S)
    got = said("busy", "quiet", "ended")
    (ended,) = [x for x in got if x["event"] == "ended"]
    whole = _summary(capsys, str(trace), str(text_log))
    assert ended["text"] == "the job ended: rank 1 killed by SIGKILL, 2 unfinished compiles"
    assert ended["findings"] == [f for f in whole["findings"] if f["kind"] in ("stop", "crash", "unfinished")]
    assert [r["running_s"] for r in ended["stops"][0]["ranks"]] == [r["running_s"] for r in whole["stops"][0]["ranks"]] == [10.744, 10.81]
    assert not [x for x in got if x["event"] in ("busy", "quiet")]
    w.step(now=t1 + 30)  # said once; the job stays ended
    w.finish()
    assert said("busy", "quiet", "ended") == []
    assert w.counts["ended"] == 1


def test_a_traceback_the_program_caught_holds_the_busy_line_only_while_it_is_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixtures/corpus/reset_same_id: the program catches a failed compile's exception, prints
    its traceback and compiles again. The traceback lands while that next compile is open: the
    busy line waits until the capture is judged (no stop, no crash), then goes on; the
    program's next traceback, a second later, does not hold it again."""
    src = FIXTURES / "corpus" / "reset_same_id"
    trace = tmp_path / "trace"
    trace.mkdir()
    text_log = tmp_path / "torch_logs.txt"
    (log,) = (src / "trace").glob("*.log")
    data, text = log.read_bytes(), (src / "torch_logs.txt").read_bytes()
    second = data.index(b'"dynamo_start"', data.index(b'"dynamo_start"') + 1)  # the compile after the reset
    w, out = _watch([str(trace)], [str(text_log)])
    t0 = time.monotonic() - 60
    _write(trace / log.name, data[: next(p for p in _record_starts(data) if p > second + 10000)], t0)
    first = _lines_upto(text, 32)  # the first traceback, then torch._dynamo.reset's records
    assert first.count(b"Traceback (most recent call last):") == 1
    _write(text_log, first, t0)
    events = w.step(now=t0)
    assert ("compile_start", "0/0") in [(e.kind, e.compile_id) for e in events]
    assert not [x for x in _lines(out) if x["event"] in ("busy", "quiet", "ended")]  # held while judged

    now = t0 + END_QUIET_S
    w.step(now=now)  # judged: nothing ended
    for _ in range(30):  # quiet is read from the files' growth by the wall clock: a loaded machine lags it
        if w._end_since is None:
            break
        now += 1.0
        w.step(now=now)
    got = _lines(out)
    assert not [x for x in got if x["event"] == "ended"]
    busy = [x for x in got if x["event"] == "busy"]
    # the compiles the summary of the same bytes calls unfinished, at its figures
    ref = _summary(capsys, str(trace), str(text_log))
    assert not [f for f in ref["findings"] if f["kind"] in ("stop", "crash")]
    assert {(x["compile_id"], x["seconds"]) for x in busy} == {
        (u["compile_id"], u["running_s"]) for u in ref["unfinished_compiles"]}
    assert "[0/0 #2]" in {x["text"].split(" busy ")[0] for x in busy}  # the compile after the reset

    out.seek(0)
    out.truncate()
    rest = _lines_upto(text, 64)[len(first):]  # the second traceback
    assert rest.count(b"Traceback (most recent call last):") == 1
    _write(text_log, rest, now + 1)
    w.step(now=now + 1)
    assert {x["event"] for x in _lines(out)} == {"busy"}  # not held again so soon


def test_a_compile_after_the_end_is_followed_as_running_again(tmp_path: Path) -> None:
    """A job that ended (fixtures/stop_idle_torchrun, stopped by `timeout`), then new rank
    files in its trace directory, a compile in them (a restarted job writes new files:
    here the real log of fixtures/stop_killed_in_codegen's rank 0, up to inside its compile):
    the compile is running again, said with a note, not held back by the old stop."""
    src = FIXTURES / "stop_idle_torchrun"
    shutil.copytree(src / "trace", tmp_path / "trace")
    shutil.copy(src / "torch_logs.txt", tmp_path / "torch_logs.txt")
    w, out = _watch([str(tmp_path / "trace")], [str(tmp_path / "torch_logs.txt")])
    assert [x["event"] for x in _lines(out)] == ["digest", "ended"]
    (again,) = sorted((FIXTURES / "stop_killed_in_codegen" / "trace").glob("*rank_0*.log.gz"))
    (tmp_path / "trace" / again.name.removesuffix(".gz")).write_bytes(gzip.decompress(again.read_bytes()))
    w.step()
    got = _lines(out)[2:]
    kinds = [x["event"] for x in got]
    assert kinds[:2] == ["compile_start", "note"]
    assert got[1]["text"] == "a compile began after the job ended: following it as running again"
    assert kinds[2:] == ["busy"] and got[2]["rank"] == 0 and got[2]["running_s"] >= got[2]["seconds"]
