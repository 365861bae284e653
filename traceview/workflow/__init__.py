"""The workflow commands: what traceview does for the user beyond reading a trace.

`capture` (`traceview run`: run a program with tracing on), `ablate` (`traceview ablate`: the
troubleshooting ladder; a package: `rung` runs one configuration, `verdict` reads the rungs,
`bootstrap` runs inside the user's program), `repro` (`traceview repro`: a script that
reproduces one compile) and `diff` (`traceview diff`: what changed between two runs).

May import: parsers, the top-level utilities, the model, traceview.analyze, traceview.ingest
(also through the front door, `traceview.load`) and traceview.output. Never the entry points
(cli, tui, worker). `ablate.bootstrap` imports nothing of traceview at all: it runs in the
user's interpreter, standard library only.
"""
