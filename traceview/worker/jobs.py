"""The functions a worker process runs (`python -m traceview.worker.process`), by name: the
parent sends a job's function name, the worker looks it up here and nowhere else."""

from __future__ import annotations

from collections.abc import Callable

from traceview.ingest.graph_tables import process_graph_tables
from traceview.ingest.parse_jobs import (
    finish_trace_file,
    process_debug_run,
    process_text_log,
    process_trace_chunk,
    process_trace_files,
)
from traceview.output.export.parts import export_part

WORKER_FUNCTIONS: dict[str, Callable] = {
    fn.__name__: fn
    for fn in (
        process_trace_files,
        process_trace_chunk,
        finish_trace_file,
        process_text_log,
        process_debug_run,
        process_graph_tables,
        export_part,
    )
}
