"""The accounts: one story of each compile and of each rank's time, derived once per Trace.

Between the tables and the findings. Every analyzer, picture and live view that needs to know
whether a compile finished, how long it took, why it ran, or what a rank was doing when the
capture ends reads these; none decides it again.

- `compiles.compile_account(trace)`: one row per compile (per rank and occurrence): its pieces
  (the forward, every backward piece), start, end, seconds, status (finished, failed,
  interrupted by a stop, never ended: in which part and phase, up to the capture's last
  timestamp; unknown where the log cannot tell), its cause (what differs from the cache entry
  it otherwise matches: the recompile's primary failed guard, one cause for every finding and
  table) and the keys of its one name.
- `ranks.rank_account(trace)`: one entry per rank (per trace file): when its log ends, how
  much of it was compiling, and its state when the capture ends: compiling (which compile,
  which phase), waiting (behind which rank, for how long), idle, and how it ended.

Both are computed on first use and kept with the Trace (`traceview.analyze.per_trace.once`):
asking again costs nothing. May import: the analyzers they are made of (storms for the
cause, unfinished for the open parts) and below; no analyzer they read may import them.
"""
