"""The worker processes' program: an entry point, like the command line.

`process` is what each worker runs (`python -m traceview.worker.process`, started by
traceview.ingest.worker_pool and fed jobs by traceview.ingest.scheduler); `jobs` is the table
of the functions a worker may run, by name (the parse jobs of traceview.ingest and the export
of parts of traceview.output.export.parts).

May import anything below the entry points (ingest, output and what they import); nothing
imports it: the parent only names it on a command line.
"""
