"""The findings document: the report of a run's inputs (`build_report`: the typed findings and the
figures every view shows) as the JSON `summary --json` prints, kept beside the parse cache.

`findings_document(opts)` answers from the cached document when the inputs, their parse and
traceview's code are unchanged (traceview.ingest.cache: no table is loaded, no analyzer runs),
and otherwise loads the trace, builds the report and keeps it. This module imports neither
polars nor the analyzers until a report must be built, so a cached answer costs discovering the
inputs, one file read and rendering.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceview import timing
from traceview.ingest import cache
from traceview.ingest.loading import LoadOptions, discover_inputs, exports_of, load_trace

if TYPE_CHECKING:
    from traceview.trace import Trace


def findings_document(opts: LoadOptions) -> tuple[bytes, Trace | None]:
    """The report of `opts`'s inputs as JSON bytes, and the Trace when it had to be loaded
    (None when the document came from the cache)."""
    import orjson

    inputs = discover_inputs(opts) if opts.use_cache and not exports_of(opts) else None
    if inputs is not None:
        data = cache.read_findings_document(inputs)
        if data is not None:
            return data, None
    trace = load_trace(opts, inputs)  # first: it may start worker processes before polars is imported
    from traceview.output.report import build_report

    t = timing.now()
    data = orjson.dumps(build_report(trace), option=orjson.OPT_INDENT_2)
    timing.mark("report", t)
    if inputs is not None:
        cache.write_findings_document(inputs, data)
    return data, trace
