"""traceview: answers from PyTorch torch.compile logs (TORCH_TRACE and TORCH_LOGS).

    import traceview
    t = traceview.load("/path/to/trace_dir")
    t.compiles            # polars DataFrame, one row per compile id per process
"""

from traceview.schema import REPORT_SCHEMA_VERSION, SCHEMA_VERSION
from traceview.trace import TABLES, Trace, load

__all__ = ["REPORT_SCHEMA_VERSION", "SCHEMA_VERSION", "TABLES", "Trace", "load", "read_export"]
__version__ = "0.1.0"


def read_export(path: str) -> Trace:
    """Read a directory written by `traceview export` back into a Trace."""
    from traceview.export import read_export as _read

    return _read(path)
