"""Reading the input into a `Trace`: everything between paths on disk and the model.

`loading` is the one way in (`load_trace`, behind `traceview.load`): discovery of the inputs
(parsers.discover), the parse cache (`cache`), the parse itself (`pipeline` plans it,
`parse_jobs` is what a worker runs, `scheduler` runs the jobs here or in the worker processes
of `worker_pool`, `parts` is their on-disk result), a part's graph tables on demand
(`graph_tables`), and traceview's own exports read back as an input (`exports`, with the
export's mark and manifest in `manifest`: reading a manifest is part of reading an input, so
it lives here, and the writing side, traceview.output.export, imports it from here).

May import: parsers, the top-level utilities (errors, printable, timing, versions) and the
model (traceview.trace). Never traceview.analyze (loading needs no analysis), traceview.output,
traceview.workflow, or the entry points (cli, tui, worker).
"""
