"""traceview.live.tail: what is handed on of a log being written is whole records, on a real
log (fixtures/gpu/sequential_max_autotune, a torch 2.11 GPU run) cut where a writer can be
caught."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from traceview.live.tail import DEFER_MAX_S, Tail
from traceview.live.watch import makes_events

LOG = next((FIXTURES / "gpu" / "sequential_max_autotune" / "trace").glob("*.log.gz"))


def _log() -> bytes:
    return gzip.decompress(LOG.read_bytes())


def _line_start(data: bytes, needle: bytes) -> int:
    return data.rindex(b"\n", 0, data.index(needle)) + 1


def test_a_record_whose_payload_is_being_written_waits_for_it(tmp_path: Path) -> None:
    data = _log()
    start = _line_start(data, b'"dynamo_output_graph"')  # a record with a payload (the graph)
    payload_end = start
    while True:  # the record's end: the next line that is not a payload line
        payload_end = data.index(b"\n", payload_end) + 1
        if data[payload_end : payload_end + 1] != b"\t":
            break
    middle = data.index(b"\n", (start + payload_end) // 2) + 1  # whole lines, half the payload
    f = tmp_path / LOG.name.removesuffix(".gz")
    f.write_bytes(data[:middle])
    tail = Tail([str(tmp_path)])
    (chunk,) = tail.poll(now=0.0)
    assert chunk.data == data[:start]  # its md5 does not match yet: the record waits
    with open(f, "ab") as fh:
        fh.write(data[middle:payload_end])
    (chunk,) = tail.poll(now=0.1)
    assert chunk.data == data[start:payload_end] and chunk.byte_offset == start
    assert chunk.line_offset == data[:start].count(b"\n")


def test_runtime_records_wait_for_a_compile_s_and_go_with_it(tmp_path: Path) -> None:
    data = _log()
    # an interned-string record: no compile's, so no event of its own
    strs = [i for i in range(len(data)) if data.startswith(b'] {"str": ', i)][:3]
    assert strs
    first_str = data.rindex(b"\n", 0, strs[0]) + 1
    end_str = data.index(b"\n", strs[0]) + 1
    f = tmp_path / LOG.name.removesuffix(".gz")
    f.write_bytes(data[:first_str])
    tail = Tail([str(tmp_path)], wanted=makes_events)
    tail.poll(now=0.0)
    with open(f, "ab") as fh:
        fh.write(data[first_str:end_str])  # an interned string: no event in it
    assert not makes_events("trace", data[first_str:end_str])
    assert tail.poll(now=0.1) == []
    assert tail.poll(now=0.2 + DEFER_MAX_S)[0].data == data[first_str:end_str]  # not held forever


def test_a_text_log_s_held_record_is_taken_when_the_writer_is_gone(tmp_path: Path) -> None:
    text = (FIXTURES / "recompiles" / "torch_logs.txt").read_bytes()
    at = text.index(b"Recompiling function")
    cut = text.index(b"\n", at) + 1  # the first line of a multi-line record
    log = tmp_path / "torch_logs.txt"
    log.write_bytes(text[:cut])
    tail = Tail([str(log)])
    (chunk,) = tail.poll(now=0.0)
    assert chunk.data == text[: text.rindex(b"\n", 0, at) + 1]  # up to the record's first line
    assert tail.poll(now=0.1) == []
    (rest,) = tail.poll(now=0.2, everything=True)
    assert rest.data == text[len(chunk.data) : cut]


def test_a_backlog_is_read_in_pieces_of_whole_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from traceview.live import tail as tail_mod

    monkeypatch.setattr(tail_mod, "MAX_READ", 50_000)
    data = _log()
    f = tmp_path / LOG.name.removesuffix(".gz")
    f.write_bytes(data)
    tail = Tail([str(tmp_path)])
    pieces = [c for chunks in tail.drain(now=0.0) for c in chunks]
    assert len(pieces) > len(data) // 60_000  # in pieces, not one read
    assert b"".join(c.data for c in pieces) == data
    assert all(c.data[:1] not in (b"\t", b"") for c in pieces)  # each starts at a record
    assert [c.line_offset for c in pieces] == [data[: c.byte_offset].count(b"\n") for c in pieces]
    assert not pieces[-1].more


@pytest.mark.parametrize("back", [512, 64 * 1024])
@pytest.mark.parametrize("which", ["trace", "text"])
def test_the_backlog_read_back_from_the_end_ends_where_a_read_from_the_start_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, back: int, which: str
) -> None:
    """A log being written, cut at many points (mid-payload, mid-line, between records): what
    `backlog` finds complete, reading back from the end (`BACK_READ` bytes, more when the last
    record starts before them: the GPU log's output code is longer than both sizes), is what
    a poll reading the whole file hands on."""
    from traceview.live import tail as tail_mod

    monkeypatch.setattr(tail_mod, "BACK_READ", back)
    if which == "trace":
        data, name = _log(), LOG.name.removesuffix(".gz")
    else:  # torch 2.13's multi-line "Recompiling function" messages (fixtures/recompiles)
        data, name = (FIXTURES / "recompiles" / "torch_logs.txt").read_bytes(), "torch_logs.txt"
    f = tmp_path / name
    step = max(1, len(data) // 97)
    for cut in [*range(step // 3, len(data), step), len(data)]:
        f.write_bytes(data[:cut])
        tail = Tail([str(f)])
        tail.scan()
        (end,) = tail.backlog().values()  # written just now: being written
        chunks = Tail([str(f)]).poll(now=0.0)
        assert end == (len(chunks[0].data) if chunks else 0), cut
