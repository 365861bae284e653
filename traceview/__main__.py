from traceview.cli import entry

entry()
