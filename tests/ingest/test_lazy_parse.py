"""The lazy parse the pipeline uses: payloads stay in the input file until asked for.

A lazy parse (`read_trace_file(..., lazy=True)`) reads headers, the payloads of recompile
reasons and graph breaks, and decodes chromium events in place; `hydrate` reads the rest
from the file. Every test compares against the full parse of the same real log.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

import traceview
from parsers.compiles import build_spans
from parsers.discover import discover
from parsers.torch_trace import InputChanged, hydrate, read_trace_file, read_trace_files
from tests.conftest import FIXTURES, PEER, needs_shared, skip_without_shared
from tests.parsers.test_torch_trace import all_trace_files
from traceview.ingest import pipeline


@pytest.mark.parametrize("path", all_trace_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_lazy_parse_then_hydrate_equals_full_parse(path: Path) -> None:
    full = read_trace_file(path)
    lazy = read_trace_file(path, lazy=True)
    events, found = hydrate(lazy.events, verify=True)
    assert events.equals(full.events, null_equal=True)
    # the md5 mismatches and bad bytes the full parse reports, the lazy one finds on hydrating
    checked = ("md5_mismatch", "invalid_utf8")
    want = full.problems.filter(pl.col("problem").is_in(checked)).select("lineno", "problem").unique()
    got = pl.concat([lazy.problems, found]).filter(pl.col("problem").is_in(checked)).select("lineno", "problem").unique()
    assert got.sort("lineno").equals(want.sort("lineno"))
    assert lazy.problems.filter(~pl.col("problem").is_in(checked)).equals(
        full.problems.filter(~pl.col("problem").is_in(checked))
    )
    # spans from the chromium events decoded in place equal those from the payload text
    assert build_spans(lazy.events, lazy.chromium).equals(build_spans(full.events))


def test_lazy_parse_reads_only_summary_payloads() -> None:
    f = next((FIXTURES / "recompiles" / "trace").glob("*.log"))
    lazy = read_trace_file(f, lazy=True).events
    with_payload = lazy.filter(pl.col("payload").is_not_null())
    assert set(with_payload["name"].to_list()) == {"recompile_reasons"}
    assert lazy.filter(pl.col("kind") == "dynamo_output_graph")["payload"].null_count() > 0
    assert lazy["payload_ok"].null_count() == lazy.height  # md5 not checked yet


@pytest.mark.parametrize(
    ("situation", "fact"),
    [
        ("hop_cond", lambda r: [h["op"] for h in r["facts"]["higher_order_ops"]] == ["cond"]),
        ("pgo_warm_start", lambda r: r["facts"]["pgo"][0]["detail"] == "L['x']: tensor size=[?, 8] stride=[S(1), 1]"),
        ("cache_bypass", lambda r: {c["reason"] for c in r["facts"]["cache_events"]} == {"Unsupported post grad custom pass"}),
        # the newest value (2.0) is only in the guards of the newest compile
        ("float_changes_dynamic_false", lambda r: r["recompiles"][0]["causes"][0]["values"] == ["1.0", "0.5", "0.25", "2.0"]),
    ],
)
def test_summary_facts_come_from_parse_time_payloads(tmp_path: Path, situation: str, fact: object) -> None:
    # the facts and the newest value of a value guard are read without building the events,
    # guards or graphs tables of the whole trace (each would read every payload of a big log)
    from traceview.output.report import build_report
    from traceview.trace import GRAPH_TABLES

    shutil.copytree(FIXTURES / "corpus" / situation / "trace", tmp_path / "trace")
    t = traceview.load(tmp_path / "trace")
    report = build_report(t)
    assert fact(report)  # type: ignore[operator]
    assert not t.is_loaded("events")
    assert not [n for n in GRAPH_TABLES if t.is_loaded(n)]


def test_summary_never_reads_graph_payloads(tmp_path: Path) -> None:
    src = FIXTURES / "graph_breaks" / "trace"
    shutil.copytree(src, tmp_path / "trace")
    from traceview.output.report import build_report

    t = traceview.load(tmp_path / "trace")
    report = build_report(t)
    assert report["graph_breaks"]
    assert not t.is_loaded("events")  # the summary worked from the parsed tables only


def test_md5_mismatch_found_when_payloads_are_checked() -> None:
    # tlparse's simple_corrupted_json.log lost a payload line at line 13 (see test_torch_trace)
    skip_without_shared()
    t = traceview.load(PEER / "simple_corrupted_json.log")
    assert t.problems.filter(pl.col("problem") == "md5_mismatch").height == 0  # not checked yet
    t.ensure_graph_tables()
    bad = t.problems.filter(pl.col("problem") == "md5_mismatch")
    assert bad["lineno"].to_list() == [13]
    assert t.events.filter(pl.col("lineno") == 13)["payload_ok"].to_list() == [False]


def test_changed_input_is_a_clear_error(tmp_path: Path) -> None:
    f = tmp_path / "t.log"
    shutil.copy(next((FIXTURES / "simple" / "trace").glob("*.log")), f)
    t = traceview.load(f)
    f.write_bytes(f.read_bytes()[:100])  # the file is rewritten after it was parsed
    with pytest.raises(InputChanged, match="changed since it was parsed"):
        _ = t.events


def test_pipeline_events_equal_full_parse() -> None:
    f = next((FIXTURES / "training" / "trace").glob("*.log"))
    t = pipeline.load_parsed(discover(f))
    full = read_trace_file(f).events
    assert t.events.drop("payload_ok").equals(full.drop("payload_ok"), null_equal=True)


def test_changed_input_is_parsed_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from traceview.cli import main

    f = tmp_path / "t.log"
    shutil.copy(next((FIXTURES / "simple" / "trace").glob("*.log")), f)
    assert main(["summary", str(f)]) == 0
    capsys.readouterr()
    before = f.stat()
    f.write_bytes(f.read_bytes()[:100])
    import os

    os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))  # same mtime, new size: a new cache key
    assert main(["export", str(f), "-o", str(tmp_path / "out")]) == 0  # parsed again, not an error


def test_ui_model_opens_without_reading_payloads() -> None:
    from traceview.tui.model import TraceModel, record_payload

    t = traceview.load(FIXTURES / "graph_breaks" / "trace")
    model = TraceModel.build(t)
    assert model.records.height == t.index_events().height
    assert not t.is_loaded("events")
    # one record's payload is read on its own, and is the one `events` holds at that row
    row = t.index_events().with_row_index("r").filter(pl.col("kind") == "dynamo_output_graph")["r"][0]
    text = record_payload(t, "trace", row)
    assert not t.is_loaded("events")
    assert t.events["payload"][row] in text


def test_gzip_and_plain_rank_files_in_one_batch(tmp_path: Path) -> None:
    # a gzip log cannot be read in place later, so it is parsed in full; batched with a
    # plain (lazy) log, both give the same tables as when both are plain
    import gzip

    plain, mixed = tmp_path / "plain", tmp_path / "mixed"
    plain.mkdir()
    mixed.mkdir()
    logs = sorted((FIXTURES / "multirank" / "trace").glob("*.log"))
    for f in logs:
        shutil.copy(f, plain / f.name)
    shutil.copy(logs[0], mixed / logs[0].name)
    (mixed / (logs[1].name + ".gz")).write_bytes(gzip.compress(logs[1].read_bytes()))
    a, b = traceview.load(plain), traceview.load(mixed)
    for name in ("compiles", "spans", "recompiles", "graph_breaks"):
        assert a.table(name).drop("file").equals(b.table(name).drop("file")), name
    assert a.events.drop("file", "payload_ok").equals(b.events.drop("file", "payload_ok"))


def _batch_files(tmp_path: Path) -> list[str]:
    """Real logs of several kinds in one batch: rank files, a corrupted log, CRLF line ends
    (read in full), a gzip copy (read in full) and an empty file."""
    import gzip

    files = [*sorted((PEER / "multi_rank_logs").glob("*.log"))[:3], PEER / "simple_corrupted_json.log"]
    out = [str(f) for f in files]
    crlf = tmp_path / "dedicated_log_torch_trace_rank_7_crlf.log"
    crlf.write_bytes((PEER / "simple.log").read_bytes().replace(b"\n", b"\r\n"))
    gz = tmp_path / "dedicated_log_torch_trace_rank_8_gz.log.gz"
    gz.write_bytes(gzip.compress((PEER / "comp_failure.log").read_bytes()))
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    return [*out, str(crlf), str(gz), str(empty)]


@needs_shared
@pytest.mark.parametrize("lazy", [False, True], ids=["full", "lazy"])
def test_batch_parse_equals_files_parsed_one_by_one(tmp_path: Path, lazy: bool) -> None:
    # read_trace_files builds each table once for the whole batch; it must give exactly the
    # rows that parsing each file on its own and concatenating gives
    files = _batch_files(tmp_path)
    batch = read_trace_files(files, lazy=lazy)
    one = [read_trace_file(f, lazy=lazy) for f in files]
    for name in ("events", "strings", "stats", "problems"):
        want = pl.concat([getattr(p, name) for p in one])
        assert getattr(batch, name).equals(want, null_equal=True), name
    assert batch.stats["file"].to_list() == files
    # the corrupted payload (line 13) is found by a full parse; a lazy one leaves it for hydrate
    md5 = batch.problems.filter(pl.col("problem") == "md5_mismatch").select("file", "lineno").rows()
    assert md5 == ([] if lazy else [(str(PEER / "simple_corrupted_json.log"), 13)])
    if lazy:
        assert batch.chromium is not None
        assert batch.chromium.equals(pl.concat([p.chromium for p in one if p.chromium is not None]))
        assert build_spans(batch.events, batch.chromium).equals(build_spans(hydrate(batch.events)[0]))


def test_batches_shrink_towards_the_end() -> None:
    # guided self-scheduling: big batches first, small ones last, every file once, in order
    sizes = {f"f{i}": 10 << 20 for i in range(48)}
    paths = list(sizes)
    batches = pipeline._batches(paths, sizes, 2)
    assert [p for b in batches for p in b] == paths
    lens = [len(b) for b in batches]
    assert lens[0] > lens[-2] >= lens[-1]
    assert max(lens) * (10 << 20) <= pipeline.BATCH_MAX_BYTES
    assert lens == sorted(lens, reverse=True)
    # one process: as few batches as BATCH_MAX_BYTES allows
    assert [len(b) for b in pipeline._batches(paths, sizes, 1)] == [9, 9, 9, 9, 9, 3]


@needs_shared
def test_md5_of_a_payload_equal_to_a_checked_one_is_not_recomputed(tmp_path: Path) -> None:
    # simple.log and its corrupted copy claim the same md5 for the payload at line 13; once
    # the good one is checked, an equal payload is good without hashing, and the corrupted
    # one (different bytes) is still hashed and reported
    from parsers.torch_trace import payloads

    good = tmp_path / "dedicated_log_torch_trace_rank_0_a.log"
    again = tmp_path / "dedicated_log_torch_trace_rank_1_b.log"
    bad = tmp_path / "dedicated_log_torch_trace_rank_2_c.log"
    shutil.copy(PEER / "simple.log", good)
    shutil.copy(PEER / "simple.log", again)
    shutil.copy(PEER / "simple_corrupted_json.log", bad)
    payloads._VERIFIED.clear()
    lazy = read_trace_files([str(good), str(again), str(bad)], lazy=True)
    hashed: list[int] = []
    real_md5 = payloads.hashlib.md5

    def counting_md5(data: object) -> object:
        hashed.append(1)
        return real_md5(data)

    payloads.hashlib.md5 = counting_md5  # type: ignore[assignment]
    try:
        events, problems = hydrate(lazy.events, verify=True)
    finally:
        payloads.hashlib.md5 = real_md5  # type: ignore[assignment]
    per_file = events.filter(pl.col("payload_ok").is_not_null()).group_by("file").len()
    n_good = per_file.filter(pl.col("file") == str(good))["len"].item()
    # every payload of the first copy hashed; of the second copy, none; of the corrupted
    # file, only the one that differs
    assert len(hashed) == n_good + 1
    assert problems.select("file", "lineno", "problem").rows() == [(str(bad), 13, "md5_mismatch")]
    assert events.filter(pl.col("payload_ok") == False)["lineno"].to_list() == [13]  # noqa: E712
