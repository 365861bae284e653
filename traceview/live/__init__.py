"""Following logs while a job writes them.

`tail`: what landed in the inputs since the last look, as complete records only (a half-written
last line or record waits for the rest; new rank files are picked up; a file cut or replaced
starts over). `tables`: the tables of everything read so far, kept up to date by parsing only
the bytes added (the loading path's own parsers), and a `Trace` over all of it or over the
compiles a chunk touched. `events`: what the new records mean, in the analyzers' words
(compile started / finished, recompile and its cause, graph break, failure, crash) and what each
busy rank is compiling now. `watch`: the `traceview watch` command (and `traceview run`'s live
view): a digest of what is there, then one line per event as it lands. `follow`: when the UI
(`traceview open`) loads a growing trace again: records landed, one reload at a time, throttled.
"""
