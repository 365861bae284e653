"""The glog prefix grammar (parsers/glog.py) and the variants its readers build from it: str and
bytes, named groups and plain, for Python's `re` and polars' (Rust) regex, agree on the lines
of real torch logs: every trace file and text log of the fixtures (torch 2.13 CPU and 2.11
GPU runs, `[rankN]:`-prefixed ones among them) and tlparse's test logs."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import polars as pl
import pytest

from parsers import discover, glog, textlog, torch_trace
from tests.conftest import PEER, skip_without_shared
from traceview.ingest import pipeline
from traceview.workflow.ablate import rung as ablate_rung

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
LINES_PER_FILE = 400  # the head of each file: every kind of record, and a test that stays fast


def _head_lines(path: Path) -> list[bytes]:
    opener = gzip.open if path.suffix == ".gz" else open
    lines = []
    with opener(path, "rb") as f:
        for i, line in enumerate(f):
            if i == LINES_PER_FILE:
                break
            lines.append(line.rstrip(b"\r\n"))
    return lines


def _lines(paths: list[Path]) -> list[bytes]:
    assert paths
    return [line for p in paths for line in _head_lines(p)]


def _trace_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name.startswith("dedicated_log_torch_trace"))


def _fixture_traces() -> list[bytes]:
    return _lines(_trace_files(FIXTURES))


def _fixture_text_logs() -> list[bytes]:
    return _lines(sorted(FIXTURES.rglob("torch_logs.txt")))


def _peer_logs() -> list[bytes]:
    skip_without_shared()
    return _lines(sorted(p for p in PEER.rglob("*") if p.is_file()))


SOURCES = {"fixture traces": _fixture_traces, "fixture text logs": _fixture_text_logs, "tlparse logs": _peer_logs}
GROUPS = ("rank", "level", "md", "time", "pid", "src_file", "src_line")


def _groups(m: re.Match | None) -> dict | None:
    if m is None:
        return None
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in m.groupdict().items()}


@pytest.mark.parametrize("source", SOURCES)
def test_str_bytes_named_and_plain_variants_agree(source: str) -> None:
    lines = SOURCES[source]()
    named = re.compile("^" + glog.PREFIX)
    named_b = re.compile(glog.as_bytes("^" + glog.PREFIX))
    plain = re.compile("^" + glog.plain(glog.PREFIX))
    plain_b = re.compile(glog.as_bytes("^" + glog.plain(glog.PREFIX)))
    head_b = re.compile(glog.as_bytes("^" + glog.HEAD))
    matched = ranked = 0
    for raw in lines:
        text = raw.decode("utf-8", "replace")
        m = named.match(text)
        ends = {
            "str named": m and m.end(),
            "bytes named": (mb := named_b.match(raw)) and len(raw[: mb.end()].decode("utf-8", "replace")),
            "str plain": (mp := plain.match(text)) and mp.end(),
            "bytes plain": (mpb := plain_b.match(raw)) and len(raw[: mpb.end()].decode("utf-8", "replace")),
        }
        assert len(set(ends.values())) == 1, (raw, ends)
        assert _groups(m) == _groups(mb), raw
        if m is None:
            continue
        matched += 1
        # the head is the prefix's beginning, with the same fields
        h = _groups(head_b.match(raw))
        assert h == {k: v for k, v in _groups(m).items() if k in h}, raw
        # the fields, read from the line without the grammar
        rest = text
        tags = []  # `[rank1]:`, torchrun --tee's `[default1]:`, or both: the last one is the rank
        while rest.startswith("[") and "]:" in rest[:40] and not rest[1:2].isdigit():
            tag, _, rest = rest[1:].partition("]:")
            tags.append(tag)
        if tags:
            ranked += 1
            assert m["rank"] == tags[-1].lstrip("abcdefghijklmnopqrstuvwxyz_")
        assert (m["level"], m["md"], m["time"]) == (rest[0], rest[1:5], rest[6:21])
        pid, _, source = rest[21:].lstrip(" ").partition(" ")
        assert m["pid"] == pid and source.startswith(f"{m['src_file']}:{m['src_line']}]")
    assert matched > 100
    if source == "fixture traces":  # real traces: every line that is not a payload line is a record
        assert matched == sum(1 for raw in lines if raw and not raw.startswith(b"\t"))
    if source == "fixture text logs":
        assert ranked > 0  # the multi-rank runs' logs carry `[rankN]:`


@pytest.mark.parametrize("source", SOURCES)
def test_readers_patterns_agree_with_the_grammar(source: str) -> None:
    """Each reader's own pattern (the trace-log scan's column names, textlog's tags, discovery's
    bytes, the pipeline's record start, ablate's log check) matches where the grammar does, with the
    same fields; polars' regex engine reads the same fields as Python's."""
    lines = SOURCES[source]()
    texts = [raw.decode("utf-8", "replace") for raw in lines]
    grammar = [_groups(re.match("^" + glog.PREFIX, t)) for t in texts]

    # trace logs: the named variant with its own column names, through polars as the scan runs it
    rename = {"prefix_rank": "rank", "src": "src_file", "srcline": "src_line"}
    got = pl.Series(texts).str.extract_groups(torch_trace.PREFIX_PATTERN).struct.unnest().to_dicts()
    for t, g, row in zip(texts, grammar, got, strict=True):
        prefix = row.pop("prefix")
        if g is None:
            assert prefix is None, t
            continue
        assert prefix == t[: len(prefix)] and prefix.endswith("] ") and {rename.get(k, k): v for k, v in row.items()} == g, t
        assert discover.TEXT_LINE_RE.match(t.encode()) is not None
        assert bool(discover.TRACE_LINE_RE.match(t.encode())) == t[len(prefix) :].startswith('{"')
        ts = _groups(discover.TS_RE.match(t.encode()))
        assert ts is not None and {k: ts[k] for k in ("rank", "level", "md", "time")} == {k: g[k] for k in ("rank", "level", "md", "time")}
        assert pipeline._RECORD_START.match(t.encode()) is not None
        assert ablate_rung._RECORD.search(b"output\n" + t.encode()) is not None

    # textlog: plain for the line, named for its distinct prefixes (polars, as textlog runs them)
    prefixes = pl.Series(texts).str.extract_all(textlog.PREFIX_RE).list.first().to_list()
    fields = pl.Series([p or "" for p in prefixes]).str.extract_groups(textlog.PREFIX_FIELDS_RE).struct.unnest().to_dicts()
    for t, g, p, f in zip(texts, grammar, prefixes, fields, strict=True):
        assert (p is None) == (g is None), t
        if p is not None:
            assert t.startswith(p) and {k: f[k] for k in GROUPS} == {k: g[k] for k in GROUPS}, t
            tags = re.fullmatch(glog.TEXT_TAGS, p[len(re.match(glog.PREFIX, p)[0]) :])
            assert tags is not None and (f["tid"], f["artifact"]) == (tags["tid"], tags["artifact"]), t


def test_renamed_knows_the_groups() -> None:
    assert "(?P<prefix_rank>" in glog.renamed(glog.PREFIX, rank="prefix_rank")
    with pytest.raises(ValueError, match="tid"):
        glog.renamed(glog.PREFIX, tid="trace_id")  # TEXT_TAGS' group, not PREFIX's
