"""The findings document read before its Trace (`open`'s first screen): only for unchanged
inputs, and it says when the inputs changed after it was read."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson

from tests.conftest import FIXTURES
from traceview.ingest.loading import LoadOptions, discover_inputs
from traceview.output.findings_document import cached_report_before_load, findings_document


def _copy(tmp_path: Path) -> Path:
    d = tmp_path / "trace"
    d.mkdir()
    src = next((FIXTURES / "recompiles" / "trace").glob("*.log"))
    shutil.copy(src, d / src.name)
    return d / src.name


def test_the_document_is_read_before_the_trace_only_for_unchanged_inputs(tmp_path: Path) -> None:
    log = _copy(tmp_path)
    opts = LoadOptions.of(log.parent)
    assert cached_report_before_load(discover_inputs(opts)) is None  # nothing cached yet
    data, trace = findings_document(opts)  # `traceview summary`: parses, judges, keeps
    assert trace is not None
    first = cached_report_before_load(discover_inputs(opts))
    assert first is not None
    assert first.report == orjson.loads(data)  # what summary --json prints
    assert first.holds_for(discover_inputs(opts))

    inputs = discover_inputs(opts)
    st = log.stat()
    os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # touched: another key
    assert not first.holds_for(inputs)
    assert cached_report_before_load(inputs) is None
    log.unlink()
    assert not first.holds_for(inputs)  # gone since: not the inputs it judged, no crash
    assert cached_report_before_load(inputs) is None


def test_no_document_without_the_cache_or_for_no_inputs(tmp_path: Path) -> None:
    assert cached_report_before_load(None) is None
    log = _copy(tmp_path)
    findings_document(LoadOptions.of(log.parent, use_cache=False))  # nothing kept
    assert cached_report_before_load(discover_inputs(LoadOptions.of(log.parent))) is None
