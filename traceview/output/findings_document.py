"""The findings document: the report of a run's inputs (`build_report`: the typed findings and the
figures every view shows) as the JSON `summary --json` prints, kept beside the parse cache.

`findings_document(opts)` answers from the cached document when the inputs, their parse and
traceview's code are unchanged (traceview.ingest.cache: no table is loaded, no analyzer runs),
and otherwise loads the trace, builds the report and keeps it. This module imports neither
polars nor the analyzers until a report must be built, so a cached answer costs discovering the
inputs, one file read and rendering.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from traceview import timing
from traceview.ingest import cache
from traceview.ingest.loading import LoadOptions, discover_inputs, exports_of, load_trace

if TYPE_CHECKING:
    from parsers.discover import Inputs
    from traceview.trace import Trace


def _has_files(inputs: Inputs | None) -> bool:
    """Inputs a document can be kept for: logs read from files (not an export's tables)."""
    return inputs is not None and bool(inputs.trace_paths or inputs.text_logs)


def cached_report(inputs: Inputs | None) -> dict[str, Any] | None:
    """The report kept for `inputs` (the Trace's `inputs`: `open`'s first screen), or None."""
    import orjson

    data = cache.read_findings_document(inputs) if _has_files(inputs) else None
    try:
        return orjson.loads(data) if data is not None else None
    except orjson.JSONDecodeError:  # a damaged document: judged again
        return None


@dataclass(frozen=True)
class CachedReport:
    """A findings document read before its Trace is loaded (`open`'s first screen), with the
    parse cache entry it was kept beside, so that the Trace loaded after it can be checked to
    be the one it judged."""

    report: dict[str, Any]
    key: str  # traceview.ingest.cache.cache_key of the inputs when it was read

    def holds_for(self, inputs: Inputs | None) -> bool:
        """Whether `inputs` are unchanged since the document was read (their cache key is the
        same: no file grew, shrank or was touched), so the document judges their Trace."""
        try:
            return inputs is not None and cache.cache_key(inputs) == self.key
        except OSError:  # an input gone since
            return False


def cached_report_before_load(inputs: Inputs | None) -> CachedReport | None:
    """The findings document of `inputs` when their parse is cached and unchanged, read before
    their Trace (no table, no polars), or None."""
    if not _has_files(inputs):
        return None
    try:
        key = cache.cache_key(inputs)  # first: inputs that change meanwhile fail `holds_for`
    except OSError:
        return None
    report = cached_report(inputs)
    return CachedReport(report, key) if isinstance(report, dict) else None


def keep_report(inputs: Inputs | None, report: dict[str, Any]) -> None:
    """Keep `report` as the findings document of `inputs` (where their parse is cached)."""
    import orjson

    if _has_files(inputs):
        cache.write_findings_document(inputs, orjson.dumps(report, option=orjson.OPT_INDENT_2))


def findings_document(opts: LoadOptions, inputs: Inputs | None = None) -> tuple[bytes, Trace | None]:
    """The report of `opts`'s inputs as JSON bytes, and the Trace when it had to be loaded
    (None when the document came from the cache). `inputs`: what `discover_inputs(opts)`
    found, when the caller looked already (`watch`: its backlog, traceview.live.watch)."""
    import orjson

    if inputs is None and opts.use_cache and not exports_of(opts):
        inputs = discover_inputs(opts)
    kept = opts.use_cache and inputs is not None
    if kept:
        data = cache.read_findings_document(inputs)
        if data is not None:
            return data, None
    trace = load_trace(opts, inputs)  # first: it may start worker processes before polars is imported
    from traceview.output.report import build_report

    t = timing.now()
    data = orjson.dumps(build_report(trace), option=orjson.OPT_INDENT_2)
    timing.mark("report", t)
    if kept:
        cache.write_findings_document(inputs, data)
    return data, trace
