"""`traceview watch` on logs that already hold records when it starts (its backlog): read by the
loading path (traceview.ingest: worker processes, the parse cache, the cached findings
document), then followed from where that parse ended.

The logs are a real 4-rank gloo run (fixtures/corpus/multirank4: rank 2 alone recompiles [0/1]
for batch 6; every rank graph-breaks in report(); its torch_logs.txt says both), cut where a
running job can be caught: inside a compile, mid-line, a rank whose file is not there yet, a
text log inside a multi-line message. Nothing is hand-written. What the watch says is compared
with what it says when it reads the same backlog chunk by chunk (as it read every backlog
before), and with `summary`.
"""

from __future__ import annotations

import gzip
import io
import os
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import FIXTURES
from traceview.live.watch import Watch

CORPUS = FIXTURES / "corpus" / "multirank4"


def _logs() -> dict[str, bytes]:
    """The run's files by name: its four rank logs and its text log."""
    out = {f.name.removesuffix(".gz"): gzip.decompress(f.read_bytes()) for f in sorted((CORPUS / "trace").glob("*.log.gz"))}
    out["torch_logs.txt"] = (CORPUS / "torch_logs.txt").read_bytes()
    return out


def _line_start(data: bytes, n: int) -> int:
    """The offset of line `n` (1-based)."""
    pos = 0
    for _ in range(n - 1):
        pos = data.index(b"\n", pos) + 1
    return pos


def _record_start_after(data: bytes, pos: int) -> int:
    p = data.index(b"\n", pos) + 1
    while data[p : p + 1] == b"\t":
        p = data.index(b"\n", p) + 1
    return p


def _rank(name: str) -> int | None:
    return int(name.split("_rank_")[1].split("_")[0]) if "_rank_" in name else None


def _cuts(logs: dict[str, bytes]) -> dict[str, int]:
    """Where each file stands when the watch starts: rank 0 inside its [1/0]; rank 1 inside
    [1/0] in the middle of a line; rank 2 inside its recompile [0/1]; rank 3 not there yet;
    the text log in the middle of rank 2's multi-line "Recompiling function" message."""
    cuts = {}
    for name, data in logs.items():
        r = _rank(name)
        if r == 0:
            cuts[name] = _record_start_after(data, _line_start(data, 1000))
        elif r == 1:
            at = _record_start_after(data, _line_start(data, 1000))
            cuts[name] = at + (data.index(b"\n", at) - at) // 2
        elif r == 2:
            cuts[name] = _record_start_after(data, _line_start(data, 1700))
        elif r is None:
            at = data.index(b"Recompiling function")
            cuts[name] = data.index(b"\n", at) + 1
    return cuts


def _write(d: Path, logs: dict[str, bytes], cuts: dict[str, int]) -> None:
    for name, data in logs.items():
        if name in cuts:
            (d / name).write_bytes(data[: cuts[name]])  # written just now: being written


def _lines(out: io.StringIO) -> list[dict]:
    return [orjson.loads(x) for x in out.getvalue().splitlines() if x.strip()]


def _said(events: list) -> list[tuple]:
    return [(e.kind, e.rank, e.compile_id, e.text, e.file, e.lineno) for e in events]


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch) -> list:
    """The loading path's parallel parse for these small logs: worker processes from the first
    byte, each trace log in pieces (its big-file path). Returns the workers taken for jobs."""
    from traceview.ingest import pipeline, worker_pool

    monkeypatch.setattr(worker_pool, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(pipeline, "CHUNK_BYTES", 64 * 1024)
    monkeypatch.setattr(worker_pool, "cpu_count", lambda: 2)
    taken: list = []
    take = worker_pool.take

    def counted() -> object:
        taken.append(1)
        return take()

    monkeypatch.setattr(worker_pool, "take", counted)
    return taken


def test_the_backlog_is_parsed_by_the_loading_path_and_said_as_before(tmp_path: Path, parallel: list) -> None:
    logs = _logs()
    cuts = _cuts(logs)
    d = tmp_path / "job"
    d.mkdir()
    _write(d, logs, cuts)

    new_out, old_out = io.StringIO(), io.StringIO()
    new = Watch([str(d)], out=new_out, json_lines=True)
    new.start()
    assert parallel, "the backlog was parsed in worker processes"
    old = Watch([str(d)], out=old_out, json_lines=True)
    old._start_by_chunks(digest=True)  # how every backlog was read before: chunk by chunk

    digest = _lines(new_out)
    assert [x["event"] for x in digest] == ["digest"]
    assert digest == _lines(old_out)
    # three rank logs and the text log (which names rank 3 too); ranks 0-2 each in a compile
    assert (digest[0]["files"], digest[0]["compiles"], digest[0]["ranks"]) == (4, 8, [0, 1, 2, 3])
    assert digest[0]["finding_counts"]["unfinished"] == 3
    # each file followed from its last complete record: rank 1's half line waits
    at = {p: (f.offset, f.lines) for p, f in new.tail.files.items()}
    assert at == {p: (f.offset, f.lines) for p, f in old.tail.files.items()}
    rank1 = next(n for n in logs if _rank(n) == 1)
    assert at[str(d / rank1)][0] == _record_start_after(logs[rank1], _line_start(logs[rank1], 1000))
    text = logs["torch_logs.txt"]
    assert at[str(d / "torch_logs.txt")][0] == text.rfind(b"\n", 0, text.index(b"Recompiling function")) + 1
    assert new.deriver.seen == old.deriver.seen and new.deriver.open_compiles == old.deriver.open_compiles
    assert len(new.deriver.open_compiles) == 3  # ranks 0 and 1 in [1/0], rank 2 in [0/1]

    # the rest lands, and rank 3's file appears
    for name, data in logs.items():
        with open(d / name, "ab") as fh:
            fh.write(data[cuts.get(name, 0) :])
    now = time.monotonic() + 5  # everything settled
    said_new, said_old = new.step(now=now), old.step(now=now)
    assert _said(said_new) == _said(said_old)
    kinds = {(e.kind, e.rank, e.compile_id) for e in said_new}
    # a compile begun in the backlog ends, and is not said to begin again
    assert {("compile_end", 0, "1/0"), ("compile_end", 1, "1/0"), ("compile_end", 2, "0/1")} <= kinds
    assert not {("compile_start", 0, "1/0"), ("compile_start", 1, "1/0"), ("compile_start", 2, "0/1")} & kinds
    # rank 2's recompile was in the backlog (its trace and its text log say it): not said now
    assert not [e for e in said_new if e.kind == "recompile"]
    # rank 3, which appeared later, is said whole; but for its graph break, which the text log
    # in the backlog said already (the same break: its user line)
    assert {(k, c) for k, r, c in kinds if r == 3} == {(k, c) for k in ("compile_start", "compile_end") for c in ("0/0", "1/0", "2/0")}

    # the figures are the summary's of the whole logs
    from traceview.ingest.loading import LoadOptions, load_trace

    whole = load_trace(LoadOptions.of(str(d), use_cache=False))
    secs = {(r, c): s for r, c, s in whole.compiles.select("rank", "compile_id", "total_time_s").iter_rows()}
    for e in said_new:
        if e.kind == "compile_end":
            assert e.data["seconds"] == secs[(e.rank, e.compile_id)]
    assert new.tables.trace().problems.is_empty()
    # the text log's last record, once it stopped growing
    assert _said(new.step(now=now + 5)) == _said(old.step(now=now + 5))
    new.finish()
    old.finish()
    assert _lines(new_out)[-1] == _lines(old_out)[-1]  # the same counts; every byte read once
    assert _lines(new_out)[-1]["bytes_parsed"] == sum(len(x) for x in logs.values())


def test_a_finished_job_s_digest_is_the_cached_summary_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After `summary`, a watch of the same logs reads the summary's findings document: no
    analyzer runs before the digest, which is the summary's head."""
    logs = _logs()
    d = tmp_path / "job"
    d.mkdir()
    long_ago = time.time() - 60
    for name, data in logs.items():
        (d / name).write_bytes(data)
        os.utime(d / name, (long_ago, long_ago))  # the job ended a minute ago
    from traceview.ingest.loading import LoadOptions
    from traceview.output.findings_document import findings_document
    from traceview.output.summary import render_head

    data, trace = findings_document(LoadOptions.of(str(d)))  # `traceview summary DIR`
    assert trace is not None  # parsed, and kept
    report = orjson.loads(data)

    def judged_again(*a: object, **k: object) -> None:
        raise AssertionError("the findings were judged again")

    monkeypatch.setattr("traceview.output.report.build_report", judged_again)
    out = io.StringIO()
    w = Watch([str(d)], out=out)
    w.start()
    head, watching = out.getvalue().rsplit("\n", 2)[:2]
    assert head == render_head(report)
    assert watching == "watching 5 log files; Ctrl-C ends"
    assert {p: f.offset for p, f in w.tail.files.items()} == {str(d / n): len(x) for n, x in logs.items()}
    assert w.step(now=time.monotonic() + 5) == []  # nothing new: nothing said


def test_a_finished_log_cut_mid_record_is_read_whole_as_summary_reads_it(tmp_path: Path) -> None:
    """A log that stopped growing a while ago with a record cut (a writer killed mid-write):
    the backlog takes it whole, the cut record counted as damage, as `summary` counts it."""
    logs = _logs()
    name = next(n for n in logs if _rank(n) == 1)
    data = logs[name]
    at = _record_start_after(data, _line_start(data, 1000))
    cut = at + (data.index(b"\n", at) - at) // 2
    f = tmp_path / name
    f.write_bytes(data[:cut])
    os.utime(f, (time.time() - 60, time.time() - 60))
    out = io.StringIO()
    w = Watch([str(tmp_path)], out=out, json_lines=True)
    w.start()
    assert w.tail.files[str(f)].offset == cut
    from traceview.ingest.loading import LoadOptions, load_trace

    summary = load_trace(LoadOptions.of(str(tmp_path), use_cache=False))
    assert summary.stats["truncated_tail"].to_list() == [True]
    assert w.tables.trace().stats["truncated_tail"].to_list() == [True]



def test_a_backlog_the_loading_path_cannot_read_is_read_chunk_by_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log replaced while the loading path parsed it (its payloads no longer where the parse
    found them): the backlog is read again chunk by chunk; the digest comes first all the same,
    then one note, and the watch goes on."""
    logs = _logs()
    cuts = _cuts(logs)
    d = tmp_path / "job"
    d.mkdir()
    _write(d, logs, cuts)
    from parsers.torch_trace import InputChanged

    def changed(*a: object, **k: object) -> None:
        raise InputChanged(f"{d}/x.log: the file changed since it was parsed (now 0 bytes)")

    monkeypatch.setattr("traceview.output.findings_document.findings_document", changed)
    out = io.StringIO()
    w = Watch([str(d)], out=out, json_lines=True)
    w.start()
    ref_out = io.StringIO()
    Watch([str(d)], out=ref_out, json_lines=True)._start_by_chunks(digest=True)
    lines = _lines(out)
    assert [x["event"] for x in lines] == ["digest", "note"]
    assert lines[0] == _lines(ref_out)[0]
    assert lines[1]["text"].startswith("the logs changed while they were read (")
    for name, data in logs.items():
        with open(d / name, "ab") as fh:
            fh.write(data[cuts.get(name, 0) :])
    assert {("compile_end", 0, "1/0")} <= {(e.kind, e.rank, e.compile_id) for e in w.step(now=time.monotonic() + 5)}
