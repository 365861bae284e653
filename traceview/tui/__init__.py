"""traceview's terminal UI (Textual). Nothing outside this package imports Textual.

`run_app(options)` is what `traceview open` calls (options: traceview.ingest.loading.LoadOptions);
`TraceviewApp` can be built from a loader (a callable returning a `Trace`) or a `Trace`.

An entry point (docs/architecture.md): may import anything below it (traceview.workflow,
output, ingest, analyze, the model); only the command line imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from traceview.ingest.loading import LoadOptions


def run_app(options: LoadOptions, *, follow: bool = True) -> int:
    """Run the UI for `traceview open` on what `options` point at, following the logs as
    they grow unless `follow` is False; returns the exit code."""
    from traceview.tui.app import run_app as _run

    return _run(options, follow=follow)


__all__ = ["run_app"]
