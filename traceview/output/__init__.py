"""What traceview writes out from a `Trace`: the summary report (`report`: JSON and text),
the summary as one self-contained HTML page (`page`, `traceview report`), the parquet export (`export`, with `export.parts`: parts written as parquet by worker
processes), DuckDB over the tables (`sql`) and the Chrome/Perfetto compile timeline
(`timeline`). The report's JSON Schemas are traceview/schemas/.

May import: parsers, the top-level utilities, the model (traceview.trace), traceview.analyze
and traceview.ingest (an export is written from the parse's parts, in its worker processes).
Never traceview.workflow or the entry points (cli, tui, worker).
"""
