"""traceview's terminal UI (Textual). Nothing outside this package imports Textual.

`run_app(args)` is what `traceview open` calls; `TraceviewApp` can be built from a loader
(a callable returning a `Trace`) or a `Trace`.
"""

from __future__ import annotations

from typing import Any


def run_app(args: Any) -> int:
    """Run the UI for `traceview open` (argparse namespace: path, latest, logs, no_cache, jobs)."""
    from traceview.tui.app import run_app as _run

    return _run(args)


__all__ = ["run_app"]
