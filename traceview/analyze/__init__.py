"""The analyzers: pure functions from a `Trace` to findings.

The rule, once:

- An **analyzer** is a function whose findings or rows the report, the diff, the UI or a
  command show. It takes a `Trace` first and nothing else positionally: its options are
  keyword-only (`failures(trace, caught=False)`, `by_function(trace, frames_only=True)`,
  `origin(trace, kernel=...)`). It reads the tables it needs from the Trace itself, so a
  caller cannot hand it a mismatched set. An option may hand over what the caller already
  computed from the same Trace, to save doing it twice: `compiled_optimizer_findings(trace,
  storms=...)`, `failures(trace, uncaught=...)` and `crash_findings(trace, uncaught=...)`
  (the crashed processes, which both read). A caller that wants the findings of a subset gives
  a Trace of that subset: `traceview diff --rank` runs the analyzers that sum over a run on a
  Trace of one rank's rows (diff.py's `_rank_view`); the UI shows the report of the whole
  trace and asks `origin` on the whole trace.
- The **table-level building blocks** an analyzer is made of (the same computation over
  tables already taken from the Trace: `_failure_rows`, `_divergence_rows`, `_crash_rows`,
  compile_time.s `_autotune_spans` / `_merged` / `_by_function`, storms'
  `_dynamic_config`, ...) are private to their module. One is public only when another
  analyzer module builds on it, and then it is named in `TABLE_HELPERS` below, with why; no
  module outside traceview.analyze calls one.
- **Functions of one value** (a failure reason, a guard, a finding dict, a list of ranks) are
  neither: `failures.categorize` / `headline` / `next_step`, `storms.refine_kind`, the
  registry look-ups, and findings.py (finding identity, rank grouping, cost order), which the
  report and the UI apply to findings they already have.

tests/test_boundaries.py checks the rule from the source: a public function here that takes
a table first must be in TABLE_HELPERS, one that takes a Trace takes nothing else
positionally, and no module outside this package calls one whose first parameter is a table.

May import: parsers, the top-level utilities and the model (traceview.trace); nothing of
traceview.ingest, output, workflow or the entry points, and never Textual or Rich
(docs/architecture.md).
"""

from __future__ import annotations

# Public table-level building blocks (module.function -> why it is public).
TABLE_HELPERS: dict[str, str] = {}
# (none today: kernel_dataflow, the one there was, builds a table from two tables and lives
# in parsers/dataflow.py beside seq_links.py, which builds one the same way)
