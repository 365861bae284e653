"""traceview: answers from PyTorch torch.compile logs (TORCH_TRACE and TORCH_LOGS).

    import traceview
    t = traceview.load("/path/to/trace_dir")
    t.compiles            # polars DataFrame, one row per compile id per process
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traceview.versions import REPORT_SCHEMA_VERSION, SCHEMA_VERSION

if TYPE_CHECKING:
    from traceview.ingest.loading import load
    from traceview.output.export.hosts import export_hosts
    from traceview.trace import TABLES, Trace

__all__ = ["REPORT_SCHEMA_VERSION", "SCHEMA_VERSION", "TABLES", "Trace", "export_hosts", "load", "read_export"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # polars is imported on first use, so that `traceview` on the command line can start its
    # worker processes before it imports anything heavy (traceview.ingest.worker_pool)
    if name == "load":
        from traceview.ingest.loading import load

        return load
    if name == "export_hosts":
        from traceview.output.export.hosts import export_hosts

        return export_hosts
    if name in ("TABLES", "Trace"):
        from traceview import trace

        return getattr(trace, name)
    raise AttributeError(f"module 'traceview' has no attribute {name!r}")


def read_export(path: str) -> Trace:
    """Read a directory written by `traceview export` back into a Trace."""
    from traceview.output.export import read_export as _read

    return _read(path)
