"""Benchmark traceview against tlparse and a bare-scan floor on real TORCH_TRACE logs.

Run from anywhere (the repository root is put on PYTHONPATH for the traceview commands)::

    /work/venv/bin/python bench/bench.py                       # default scenarios, all tools
    /work/venv/bin/python bench/bench.py --scenario all --json /tmp/bench.json
    /work/venv/bin/python bench/bench.py --scenario rank48_500mb single_1gb --tools floor tlparse
    /work/venv/bin/python bench/bench.py --build-only --scenario all
    /work/venv/bin/python bench/bench.py --issue40 --json /tmp/issue40.json   # issue 40's check
    nice -n 10 /work/venv/bin/python bench/bench.py --merge --json /tmp/merge.json   # issue 46's merge

Options: ``--tlparse PATH`` (default: .venv-tlparse/bin/tlparse in this checkout's root, made by
bench/setup_tlparse.sh, else tlparse on PATH; a git worktree without its own .venv-tlparse
passes the main checkout's, e.g. ``--tlparse /work/main/.venv-tlparse/bin/tlparse``), ``--work DIR`` (default
/tmp/traceview-bench; built inputs, tool outputs and logs go there, never under
/work/shared), ``--scenario NAME ...``, ``--tools TOOL ...``, ``--repeat N``, ``--timeout S``,
``--summary-cold-args=--no-cache`` (the ``=`` is needed for a value starting with ``-``;
``--summary-cold-args=`` for none), ``--keep-outputs``, ``--json FILE``.  With ``--repeat N``
each tool runs N times, in N rounds of every tool once (the machine's drift falls on all tools
alike), and the fastest run is shown (all attempts are kept in the JSON, each with the load
average after it).

``--issue40``: issue 40's check in one run: scenario ``rank48_500mb``, tools floor, tlparse,
export, summary-cold, summary-warm, report-warm, watch-digest and open-first, ``--repeat 3``
unless ``--repeat`` is given (``--scenario`` and ``--tools`` are refused with it).  That is 3
rounds of every tool once, in that order (the primes, summary-prime, report-prime and
open-prime, in the first round only); every figure of the check is the fastest of a tool's 3
runs, and a ratio is the quotient of two such fastest runs; the block's "each round" column
gives each round's value alone (round i's run over round i's run) as a measure of the noise.
After the table, an "issue 40" block (printed for every scenario where one of its checks could
be measured, and in the JSON under ``issue40``) lists: cached summary s (summary-warm, target
<= 0.3), summary-cold/floor (<= 1.3, goal 1.2), watch-digest/summary-cold (<= 1.2),
report-warm s (<= 1.0), open-first s (<= 1.0), tlparse/export (>= 12, goal 15), each with its
value, target and met/missed (or why it was not measured), and the load average at the start
and end of the run.  It takes 4-6 minutes on the 2-core machine (tlparse's 3 runs are most of
it).

Scenarios (inputs are built once into the work dir and reused while a manifest of file names
and sizes matches; the real traces are used in place):

* ``rank48_small`` (default): 48 rank files, copies of peer-tlparse/multi_rank_runtime rank
  0..6 taken in turn (rank R is a copy of rank R % 7), named
  ``dedicated_log_torch_trace_rank_<R>_<8 hex>.log``; in every envelope line (a line not
  starting with a TAB) the first ``"rank": N`` of the JSON after the glog prefix (the
  envelope's only ``rank`` key in these logs) is rewritten to ``"rank": R``.  Payload lines
  are copied byte for byte.  About 75 MB.
* ``rank48_500mb``: 48 byte-identical copies of gpu/train_dynamic/trace/*.log (9.78 MB each),
  named as above.  That log has no ``rank`` key and none is added: the rank is only in the
  file name (tlparse --all-ranks-html takes it from there too).  About 470 MB.
* ``single_1gb``: one file, the plain concatenation of ceil(1e9 / 9.78 MB) = 103 copies of
  the gpu/train_dynamic log (about 1007 MB).  Nothing is renumbered, so frame ids, compile
  ids and ``str`` interning records repeat and timestamps jump back at each copy boundary.
* ``train_dynamic`` (default): the real gpu/train_dynamic/trace log, as a file.
* ``multi_rank_runtime`` (default): the real peer-tlparse/multi_rank_runtime directory.
* ``hosts4_256``, ``hosts4_512``, ``hosts4_1024``: a directory of 4 traceview exports
  (``host-00`` .. ``host-03``), one per "host", of N rank files built as rank48_small's (rank
  R a copy of multi_rank_runtime rank R % 7, rank rewritten; about 1.5 MB each, 1,024 ranks
  about 1.6 GB of logs); host H holds ranks H*N/4 .. (H+1)*N/4-1 and is written by
  ``traceview export HOST -o DIR/host-0H --no-cache`` at build time (the per-node step of
  docs/pipeline.md), after which the logs are deleted.  Only ``summary-cold`` and
  ``summary-warm`` apply (the input is tables, not logs; the others are skipped); input MB
  is the exports' size on disk.  Building hosts4_1024 takes a few minutes; the exports are
  built again when traceview's SCHEMA_VERSION is not the one they were written with.

* ``cluster_stdout_1gb``: one text log, a 2048-rank job's stdout as Slurm's ``srun -l``
  writes it (about 1 GB), built from the real capture fixtures/cluster/srun_label_before_init:
  each of its 4 ranks' lines given to ranks R = r, r+4, ... behind srun's prefix for 2048 tasks,
  interleaved line by line, repeated with another pid each round.  Only ``summary-cold`` and
  ``summary-warm`` apply (a text log: tlparse and the floor read traces).

* ``merge_1024``, ``merge_2048``, ``merge_4096``, ``merge_16384`` (issue 46): a directory of
  N/256 traceview exports (``host-000`` ..), 256 ranks each, of one real 4-rank gloo job,
  fixtures/corpus/collective_size_mismatch (its PROVENANCE.md): rank R a copy of its rank 0, 2
  or 3 (R % 3: batch 8, one compile of ``step`` with one all_reduce of float32[8, 16]), the
  envelope rank rewritten to R as above.  Planted among the copies (each size holds those
  below N): at ranks 5, 300, 1500, 3000, 9000, 16000 a copy of its rank 1, which recompiles
  ``step`` alone ([0/1], dimension 0 of x 6, not 8) and there all-reduces float32[6, 16]
  (the lone-rank recompile the others wait for, and the mismatched collective); at ranks
  1000 and 12345 a copy of the base rank cut at the start of its only ``compilation_metrics``
  record (after its ``dynamo_start`` and Inductor's collective schedule: the rank stopped
  inside compile [0/0]).  Each host is written once, into ``WORK/inputs/merge_pool/host-NNN``,
  by ``traceview export HOSTDIR -o host-NNN --no-cache`` from its 256 logs (92 MB, 10-55 s
  on the shared 2-core machine), the logs then deleted; a scenario hard-links the pool's
  first N/256 hosts, so building merge_16384 after the others writes only the hosts they
  lack.  Hosts are written again when any ``*VERSION = ..`` of traceview/versions.py or
  traceview/ingest/digest.py changes, or the digest's code (DIGEST_CODE) does.  ``--merge`` measures them (below); as plain scenarios
  only ``summary-cold`` and ``summary-warm`` apply.

``--scenario all`` runs all thirteen.  Files are given as the file path, multi-rank inputs as the
directory path.

Tools (each run in its own child process; see the command constants below):

Before measuring, the repository's modules are byte-compiled (``compileall``), as an
installed package is.

* ``floor``: :func:`bare_scan` run in a fresh ``python bench.py --floor-worker INPUT`` child:
  read every file line by line, for each line not starting with a TAB split off the JSON
  after the first ``] `` and ``orjson.loads`` it.  Single process, one core.  Its wall time
  includes interpreter start and ``import orjson`` (about 50 ms), like traceview's does; the
  in-process scan time alone is ``extra.scan_s`` in the JSON.
* ``tlparse``: ``tlparse INPUT --no-browser --overwrite -o OUT``, plus ``--all-ranks-html``
  for a directory (tlparse 0.4.3 refuses a directory otherwise: plain gives "is not a file",
  and ``--latest`` picks the newest file and then fails with "is not a directory").
* ``tlhub``: ``.venv-tlhub/bin/python bench/tlhub_ingest.py INPUT OUT`` (bench/setup_tlhub.sh):
  tlhub 0.3.5's ingest of a finished run (parse the trace directory, write its artifacts,
  record them in its SQLite database), see that script.
* ``export``: ``traceview export INPUT -o OUT``.
* ``summary-cold``: ``traceview summary INPUT`` plus ``--summary-cold-args`` (default
  ``--no-cache``; pass an empty string if the flag does not exist).
* ``summary-warm``: ``traceview summary INPUT`` twice; the first run is reported as
  ``summary-prime`` (it builds a fresh cache: every traceview run gets its own
  ``TRACEVIEW_CACHE_DIR`` under the work dir, emptied before export, summary-cold and
  summary-prime), the
  second as ``summary-warm``.
* ``report-warm``: ``traceview report INPUT -o OUT/report.html`` twice, the same way: the first,
  ``report-prime``, into a fresh cache of its own, the second, ``report-warm``, from it (a
  report run again on unchanged logs).
* ``watch-digest``: ``traceview watch INPUT --json`` on the complete directory (a file input
  is skipped: watch follows a directory), with a fresh, empty cache each run.  Wall = from the
  spawn to its first ``{"event": "digest", ...}`` line on stdout; the wrapper (WATCH_WRAPPER)
  then sends it SIGINT and reads on to its ``stopped`` line and its exit.  CPU s and peak RSS
  are the whole run's, to that exit; the JSON's ``extra`` has ``cpu_at_digest_s`` (the
  process tree's CPU at the digest, from /proc), ``stop_s`` (SIGINT to the stopped line),
  ``exit_s``, ``sigints``, the digest's counts and the stopped line.  A watch still running
  20 s after the SIGINT gets a second one (``sigints`` 2, and a NOTE under the table); 20 s
  after that it is killed and the run FAILED, as is one without a digest or stopped line.
* ``open-first``: ``traceview open INPUT`` in a fresh tmux server (120x40), from the parse
  cache: ``open-prime`` (a ``traceview summary INPUT``) fills a fresh cache of its own first.
  Wall = seconds from starting tmux to the first screen showing the Findings tab with a
  finding title (bench/ui_first_screen.py's ``first_screen``, the same as that script's
  runs); CPU s (utime + stime, reaped children included), peak RSS (VmHWM) and tree RSS are
  read from /proc for the ``traceview open`` process at that moment.  At most 120 s.  Without
  tmux the row says ``skipped: no tmux``; an input holding several runs (open shows its run
  picker) FAILS.

Measurements: each command is started by a fresh minimal wrapper interpreter
(``python -I -S -c WRAPPER``) that ``posix_spawnp``s it and ``os.wait4``s for it, so rusage
belongs to that one command (the wrapper's own peak of ~9 MB, printed as the "peak RSS floor",
is the smallest value that can show up: the kernel folds the spawner's high-water mark into the
child's).  Wall time = perf_counter around spawn and wait4 inside the wrapper (interpreter
start of the wrapper excluded); CPU time = user+sys of the command and its waited-for
descendants; peak RSS = ``ru_maxrss`` (KiB on Linux; for a process tree this is the largest
single process, not the sum); "tree RSS" = the largest sum of VmRSS over the command's process
tree, sampled every 20 ms from /proc (shared pages counted once per process; short runs may be
under-sampled).  MB = 10**6 bytes everywhere; MB/s = input MB / wall s.  Before each
scenario every input file is read once so all tools see a warm page cache.  Outputs are
deleted after each run unless --keep-outputs.  A command that cannot start, exits non-zero or
times out is reported as FAILED with the tail of its stderr; the other measurements go on.

``--merge`` measures the merge of issue 46 instead: for each of ``--merge-sizes`` (default
1024 2048 4096 16384) the merge_<N> scenario is built (or reused) and ``traceview summary RUN
--no-cache`` and ``traceview summary RUN --no-cache --json`` are measured as above (``--repeat``
rounds, the fastest shown; a run whose tree RSS passes ``--merge-rss-limit-mb``, 6000, is
killed: the machine is shared).  The JSON's findings are checked against the plants: a
situation is found when one finding of its kind names exactly its planted ranks (the
lone-rank recompile: a ``collectives`` ``wait`` or a ``rank_stalls`` finding, by the ranks that
compiled alone; the mismatched collective: a ``collectives`` ``mismatch``; the stopped rank:
an ``unfinished`` or ``stops`` finding); the other findings of those kinds, and every finding
matched by no plant, are printed under it.  Then the growth per rank between consecutive
sizes (wall ms, CPU ms and peak RSS MB, (larger - smaller) / ranks between) and issue 46's
targets: 2,048 ranks <= 2 s and <= 300 MB, 16,384 ranks <= 10 s and <= 1000 MB, growth <=
0.5 ms and <= 0.05 MB a rank.  ``--json FILE`` writes all of it, each run's attempts with the
load average after them.  Figures: docs/performance.md, "Past one machine".

``--watch`` measures ``traceview watch DIR --json`` (issue 33) instead: the real command in a
child process (``nice`` the whole script on a shared machine: ``nice -n 10 python bench/bench.py
--watch``), this script writing the logs it follows; each watch is ended with SIGINT and must
exit 0 with its ``stopped`` line; the load average is printed with every figure.
``--watch-parts`` picks among:

* ``latency``: an empty directory; ``--watch-compiles`` (30) compiles written to one rank file,
  each the real records of one compile of gpu/train_dynamic (from its ``dynamo_start`` up to
  its ``compilation_metrics``: compiles 0/0, 2/0, 3/0 and 5/0, the ones under 100 kB, in
  turn, so ids repeat as occurrences ``#2``..), the metrics record written 0.05-0.3 s after the
  rest: seconds from that write to the matching ``compile_end`` line read from the watch's
  stdout (both clocks are this process's perf_counter).  With file-system events and with
  ``--poll``.
* ``idle``: 48 rank files, each holding train_dynamic's compile 0/0; the watch's CPU (utime +
  stime of /proc/<pid>/stat, all threads) over ``--watch-idle-s`` (25) s with nothing written,
  then over as long with each file receiving one real 152-byte ``str`` record a second (rank
  R's at R/48 s into each second), as % of one core.  Events and ``--poll``.
* ``append``: one log, followed from its start (the digest), grows by one write of 1.06 MB:
  train_dynamic's records after compile 0/0's metrics (the rest of frame 0's records, compile
  1/0, up to the record boundary at 1 MB).  CPU s = the watch's CPU from the write until it
  stops growing (by < 10 ms over 1.5 s), less its idle rate over that time; MB/s = bytes
  parsed after the start (``stopped``'s bytes_parsed less the base) / CPU s.  Bases:
  ``new-ids-small`` multi_rank_runtime rank 0 cut after its compilation_metrics nearest 1 MB;
  ``new-ids-big`` copies of that rank log concatenated to ``--watch-big-mb`` (1000) MB (frame
  0 only: compile 1/0 is new to it, frame 0's last records are not: 540 occurrences of each of
  its compiles); ``same-ids-small`` one rank48_500mb rank log (gpu/train_dynamic);
  ``same-ids-big`` rank48_500mb's rank logs concatenated to 1000 MB (103 copies: every compile
  id the append holds is there 103 times).  Concatenated copies of one job's rank logs are
  not one process's log: compile ids repeat, which the watch takes as occurrences of a frame.

Figures (2026-11-26, this 2-core machine shared with other agents, niceness 10; load average
in brackets):

* latency, events: median 0.09 s, max 0.18 s (1.6); ``--poll``: median 0.24 s, max 0.40 s
  (1.8); an earlier run: 0.14 / 0.22 s (3.2), 0.31 / 0.49 s (3.5).  Before ``--poll`` looked at the files itself (watchfiles 1.3.0's polling compares
  mtimes in whole seconds, so a second append within one second raised no change): median
  0.69 s, max 1.06 s.
* idle CPU, 48 files: nothing written 0.28% of a core (events, 2.9), 0.36% (``--poll``, 1.8);
  one record a second to each file: 30% (events, 2.5), 39% (``--poll``, 1.8): misses the 5%
  target.  Cause: a fixed cost per chunk, not per byte: ``LiveTables.add`` of one 152-byte
  record costs 4.6 ms CPU (``parse_trace_bytes`` 2.9 ms of it: ~24 polars frames built and
  collected in build_tables/scan_bytes/combine_piece_stats, then the group_by by compile id),
  48 chunks a second = 0.22 s/s; and every step derives a Trace over the touched files
  (``LiveTables.trace`` + ``Deriver.events``, ~50-60 ms for 48 files).
* append: 1.06 MB on new-ids-small (0.9 MB) 0.054 s CPU, 20 MB/s (1.6); on new-ids-big (1,001 MB)
  5.9 s (2.2); same-ids-small (9.8 MB) 0.047 s (2.0); same-ids-big (1,007 MB) 0.62 s (2.1).
  The parse of the 1 MB does not grow with the file; what grows is deriving the events: a
  chunk's Trace holds every compile of each frame it touched (traceview.live.tables.trace),
  and this 1 MB holds frame 0's last records: ~2,150 compiles of frame 0 in new-ids-big, 103
  in same-ids-big (storms, describe, derive_trace_tables over them).  In one process's log a
  frame has a handful of compiles; ids repeat as here only where a process restarts its
  numbering (``torch._dynamo.reset()`` between models).  Before ``Deriver._compiles`` skipped
  compiles said whole already: 8.4 s (new-ids-big), 0.54 s (same-ids-big).  Starting on the
  1 GB log (parse + digest): 23-26 s CPU, 3.3 GB peak RSS.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TRACES = Path("/work/shared/traces")
SHARED = Path("/work/shared")
DEFAULT_WORK = Path("/tmp/traceview-bench")
# bench/setup_tlparse.sh installs tlparse 0.4.3 into .venv-tlparse (a venv of its own)
DEFAULT_TLPARSE = next(
    (str(p) for p in (REPO / ".venv-tlparse" / "bin" / "tlparse", Path("/work/tlparse-venv/bin/tlparse")) if p.exists()),
    shutil.which("tlparse") or "tlparse",
)

# Command templates: "{python}", "{input}", "{out}" and "{tlparse}" are substituted.
TRACEVIEW = ["{python}", "-m", "traceview"]
EXPORT_CMD = [*TRACEVIEW, "export", "{input}", "-o", "{out}"]
SUMMARY_CMD = [*TRACEVIEW, "summary", "{input}"]
SUMMARY_COLD_ARGS = "--no-cache"
TLPARSE_CMD = ["{tlparse}", "{input}", "--no-browser", "--overwrite", "-o", "{out}"]
TLPARSE_DIR_EXTRA = ["--all-ranks-html"]
REPORT_CMD = [*TRACEVIEW, "report", "{input}", "-o", "{out}"]
WATCH_CMD = [*TRACEVIEW, "watch", "{input}", "--json"]
OPEN_CMD = [*TRACEVIEW, "open", "{input}"]  # run in tmux by bench/ui_first_screen.py

TLHUB_PYTHON = REPO / ".venv-tlhub" / "bin" / "python"  # made by bench/setup_tlhub.sh
TLHUB_CMD = ["{tlhub_python}", str(REPO / "bench" / "tlhub_ingest.py"), "{input}", "{out}"]

TOOLS = ("floor", "tlparse", "tlhub", "export", "summary-cold", "summary-warm", "report-warm", "watch-digest",
         "open-first")
# --issue40: the tools of issue 40's check, on its input, in rounds
ISSUE40_TOOLS = ("floor", "tlparse", "export", "summary-cold", "summary-warm", "report-warm", "watch-digest", "open-first")
ISSUE40_SCENARIO = "rank48_500mb"
ISSUE40_REPEAT = 3
BUILD_VERSION = 1
RSS_SAMPLE_S = 0.02
MB = 1e6


# --------------------------------------------------------------------------- the floor


def input_files(path: Path) -> list[Path]:
    """The files an input stands for: itself, or a directory's regular files, sorted."""
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    return [path]


def all_files(path: Path) -> list[Path]:
    """The regular files under a directory (sub-directories too, as in an export), sorted;
    names starting with a dot are left out."""
    if not path.is_dir():
        return [path]
    return sorted(
        p for p in path.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )


def bare_scan(path: Path) -> dict[str, float]:
    """The practical floor: orjson-parse every envelope line, skip payload lines."""
    import orjson

    loads = orjson.loads
    t0 = time.perf_counter()
    records = bad = nbytes = 0
    for f in input_files(path):
        nbytes += f.stat().st_size
        with open(f, "rb") as fh:
            for line in fh:
                if line[:1] == b"\t" or not line.strip():
                    continue
                cut = line.find(b"] ")
                try:
                    loads(line[cut + 2 :])
                    records += 1
                except orjson.JSONDecodeError:
                    bad += 1
    return {
        "records": records,
        "bad": bad,
        "bytes": nbytes,
        "scan_s": round(time.perf_counter() - t0, 4),
    }


# --------------------------------------------------------------------------- inputs


@dataclass
class Scenario:
    """One benchmark input."""

    name: str
    description: str
    default: bool
    multi_rank: bool
    build: Callable[[Path, Path], dict[str, int]] | None = None  # (traces, dst) -> sizes
    real_path: str | None = None  # relative to the traces dir, used in place
    tools: tuple[str, ...] = TOOLS  # the tools that apply to this input (others are skipped)
    exports: bool = False  # traceview exports: rebuilt when traceview's SCHEMA_VERSION changes
    all_versions: bool = False  # exports rebuilt when any of traceview/versions.py's versions changes


def rank_file_name(scenario: str, rank: int) -> str:
    """``dedicated_log_torch_trace_rank_<R>_<8 hex>.log``, deterministic."""
    tag = hashlib.sha1(f"{scenario}:{rank}".encode()).hexdigest()[:8]
    return f"dedicated_log_torch_trace_rank_{rank}_{tag}.log"


RANK_KEY = re.compile(rb'"rank": \d+')


def rewrite_rank(data: bytes, rank: int) -> tuple[bytes, int]:
    """Set the envelope ``"rank": N`` to ``rank`` on every non-payload line.

    Lines are split on ``\\n`` only and payload lines (leading TAB) are copied unchanged; each
    rewritten envelope is re-parsed to check that its top-level ``rank`` is now ``rank``.
    """
    import orjson

    new = b'"rank": %d' % rank
    lines = data.split(b"\n")
    changed = 0
    for i, line in enumerate(lines):
        if line[:1] == b"\t":
            continue
        cut = line.find(b"] ")
        if cut < 0:
            continue
        body, n = RANK_KEY.subn(new, line[cut + 2 :], count=1)
        if n:
            if orjson.loads(body).get("rank") != rank:
                raise RuntimeError(f"rank key is not the envelope's own: {line[:200]!r}")
            lines[i] = line[: cut + 2] + body
            changed += 1
    return b"\n".join(lines), changed


def write_rank_copies(traces: Path, dst: Path, scenario: str, ranks: range) -> dict[str, int]:
    """Rank files ``ranks`` in ``dst``: rank R a copy of multi_rank_runtime rank R % 7, its
    envelope rank rewritten to R."""
    srcs = sorted(
        (traces / "peer-tlparse/multi_rank_runtime").glob("dedicated_log_torch_trace_rank_*.log"),
        key=lambda p: int(re.search(r"rank_(\d+)", p.name).group(1)),  # type: ignore[union-attr]
    )
    originals = [src.read_bytes() for src in srcs]
    sizes: dict[str, int] = {}
    for rank in ranks:
        data, changed = rewrite_rank(originals[rank % len(srcs)], rank)
        if changed == 0:
            raise RuntimeError(f"no rank key rewritten in {srcs[rank % len(srcs)]}")
        name = rank_file_name(scenario, rank)
        (dst / name).write_bytes(data)
        sizes[name] = len(data)
    return sizes


def build_rank48_small(traces: Path, dst: Path) -> dict[str, int]:
    """48 rank files from the 7 multi_rank_runtime ranks, envelope rank rewritten."""
    return write_rank_copies(traces, dst, "rank48_small", range(48))


HOSTS = 4


def build_host_exports(ranks: int) -> Callable[[Path, Path], dict[str, int]]:
    """A builder of ``hosts4_<ranks>``: ``ranks`` rank files (as rank48_small's) split over
    4 host directories in rank order, each exported by ``traceview export HOST -o
    DST/host-0H --no-cache`` (what each node of a job runs); the logs are then deleted."""

    def build(traces: Path, dst: Path) -> dict[str, int]:
        scenario = f"hosts{HOSTS}_{ranks}"
        logs = dst.with_name(scenario + ".logs")
        shutil.rmtree(logs, ignore_errors=True)
        per = ranks // HOSTS
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
        log_bytes = 0
        for h in range(HOSTS):
            host = logs / f"host-{h:02d}"
            host.mkdir(parents=True)
            log_bytes += sum(write_rank_copies(traces, host, scenario, range(h * per, (h + 1) * per)).values())
            argv = fill(EXPORT_CMD, python=sys.executable, input=str(host), out=str(dst / host.name))
            subprocess.run([*argv, "--no-cache"], check=True, env=env, stdout=subprocess.DEVNULL)
        shutil.rmtree(logs)
        print(f"[{scenario}] exported {ranks} ranks, {log_bytes / MB:.0f} MB of logs", file=sys.stderr)
        return {str(f.relative_to(dst)): f.stat().st_size for f in all_files(dst)}

    return build


# --------------------------------------------------------------------------- the merge bench (issue 46)
#
# `--merge`: `traceview summary RUN/` over a directory of host exports of 1,024 .. 16,384 ranks
# of one real gloo job, with real situations planted among the copies (see the docstring).

CORPUS = REPO / "fixtures" / "corpus"
MERGE_RUN = "collective_size_mismatch"  # the real 4-rank job every rank is copied from
MERGE_BASE = (0, 2, 3)  # its ranks that compile `step` once, batch 8 (rank R: MERGE_BASE[R % 3])
MERGE_LONE_SRC = 1  # its rank that recompiles alone (batch 6): all_reduce float32[6, 16]
MERGE_HOST_RANKS = 256  # ranks per host export
MERGE_SIZES = (1024, 2048, 4096, 16384)
# planted ranks (global: a size N holds those below N; every size holds some of each)
MERGE_LONE = (5, 300, 1500, 3000, 9000, 16000)  # copies of MERGE_LONE_SRC
MERGE_STOPPED = (1000, 12345)  # copies of their base rank cut before [0/0]'s compilation_metrics
MERGE_TARGETS = {  # ranks: (wall s, peak RSS MB); growth per rank: (ms, MB)
    2048: (2.0, 300.0),
    16384: (10.0, 1000.0),
}
MERGE_GROWTH_TARGET = (0.5, 0.05)
MERGE_RSS_LIMIT_MB = 6000.0  # a summary above this is killed (the machine is shared)


def corpus_rank_log(run: str, rank: int) -> bytes:
    """Rank ``rank``'s TORCH_TRACE log of fixtures/corpus/``run`` (gunzipped)."""
    import gzip

    (path,) = (CORPUS / run / "trace").glob(f"dedicated_log_torch_trace_rank_{rank}_*.log*")
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def cut_before_metrics(data: bytes) -> bytes:
    """``data`` cut at the start of its first ``compilation_metrics`` record: the process
    stopped inside its first compile, after Inductor logged the graph's collective schedule."""
    for s, e in record_spans(data):
        if b'] {"compilation_metrics": ' in data[s : data.find(b"\n", s, e) if b"\n" in data[s:e] else e]:
            if b'"inductor_collective_schedule"' not in data[:s] or b'] {"dynamo_start": ' not in data[:s]:
                raise RuntimeError("no dynamo_start and collective schedule before the first compilation_metrics")
            return data[:s]
    raise RuntimeError("no compilation_metrics record")


def merge_plants(ranks: int) -> dict[str, list[int]]:
    """The planted ranks of a ``ranks``-rank merge scenario, by situation."""
    return {"lone_recompile": [r for r in MERGE_LONE if r < ranks],
            "collective_mismatch": [r for r in MERGE_LONE if r < ranks],
            "stopped": [r for r in MERGE_STOPPED if r < ranks]}


def merge_rank_log(rank: int, sources: dict[int, bytes]) -> bytes:
    """Rank ``rank``'s log: a copy of the real MERGE_RUN rank it stands for, rank rewritten."""
    if rank in MERGE_LONE:
        src = sources[MERGE_LONE_SRC]
    else:
        src = sources[MERGE_BASE[rank % len(MERGE_BASE)]]
        if rank in MERGE_STOPPED:
            src = cut_before_metrics(src)
    data, changed = rewrite_rank(src, rank)
    if changed == 0:
        raise RuntimeError(f"no rank key rewritten for rank {rank}")
    return data


VERSION_FILES = ("traceview/versions.py", "traceview/ingest/digest.py")  # the digest has its own DIGEST_VERSION


# the code that writes an export's digest: its content changes without a version bump too
DIGEST_CODE = ("traceview/ingest/digest.py", "traceview/output/export/digest.py")


def export_versions() -> dict[str, str]:
    """Every ``NAME_VERSION = ...`` of VERSION_FILES (those that exist) and a hash of
    DIGEST_CODE: an export written at other versions (tables, parser, digest) or by other
    digest code is built again."""
    out: dict[str, str] = {}
    for name in VERSION_FILES:
        if (REPO / name).is_file():
            out.update(re.findall(r"^([A-Z_]*VERSION) = (.+)$", (REPO / name).read_text(), re.M))
    h = hashlib.sha1()
    for name in DIGEST_CODE:
        if (REPO / name).is_file():
            h.update((REPO / name).read_bytes())
    out["digest_code"] = h.hexdigest()[:12]
    return out


def merge_host(pool: Path, host: int, env: dict[str, str]) -> Path:
    """Host ``host``'s export in the shared ``pool`` (ranks host*256 .. +255), built when missing
    or written at other traceview versions: its logs are written, exported by ``traceview
    export HOSTDIR -o POOL/host-NNN --no-cache`` (each node's step) and deleted."""
    out = pool / f"host-{host:03d}"
    mark = pool / f"host-{host:03d}.json"
    versions = export_versions()
    try:
        if json.loads(mark.read_text()) == versions and out.is_dir():
            return out
    except (OSError, ValueError):
        pass
    mark.unlink(missing_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    logs = pool / f"host-{host:03d}.logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    sources = {r: corpus_rank_log(MERGE_RUN, r) for r in (*MERGE_BASE, MERGE_LONE_SRC)}
    t0 = time.perf_counter()
    for rank in range(host * MERGE_HOST_RANKS, (host + 1) * MERGE_HOST_RANKS):
        (logs / rank_file_name("merge", rank)).write_bytes(merge_rank_log(rank, sources))
    mb = input_bytes(logs) / MB
    argv = fill(EXPORT_CMD, python=sys.executable, input=str(logs), out=str(out))
    subprocess.run([*argv, "--no-cache"], check=True, env=env, stdout=subprocess.DEVNULL)
    shutil.rmtree(logs)
    mark.write_text(json.dumps(versions))
    print(f"[merge] host-{host:03d}: {mb:.0f} MB of logs exported in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def build_merge_exports(ranks: int) -> Callable[[Path, Path], dict[str, int]]:
    """A builder of ``merge_<ranks>``: hosts 0 .. ranks/256-1 of the shared pool (built once,
    see :func:`merge_host`) hard-linked into ``dst/host-NNN``."""

    def build(traces: Path, dst: Path) -> dict[str, int]:
        pool = dst.parent / "merge_pool"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
        for host in range(ranks // MERGE_HOST_RANKS):
            src = merge_host(pool, host, env)
            for f in all_files(src):
                link = dst / src.name / f.relative_to(src)
                link.parent.mkdir(parents=True, exist_ok=True)
                os.link(f, link)
        return {str(f.relative_to(dst)): f.stat().st_size for f in all_files(dst)}

    return build


def train_dynamic_log(traces: Path) -> Path:
    """The one gpu/train_dynamic TORCH_TRACE log."""
    (log,) = sorted((traces / "gpu/train_dynamic/trace").glob("*.log"))
    return log


def build_rank48_500mb(traces: Path, dst: Path) -> dict[str, int]:
    """48 byte-identical copies of the train_dynamic log, rank only in the file name."""
    src = train_dynamic_log(traces)
    sizes: dict[str, int] = {}
    for rank in range(48):
        name = rank_file_name("rank48_500mb", rank)
        shutil.copyfile(src, dst / name)
        sizes[name] = src.stat().st_size
    return sizes


def build_single_1gb(traces: Path, dst: Path) -> dict[str, int]:
    """One file: ceil(1e9 / size) plain concatenated copies of the train_dynamic log."""
    data = train_dynamic_log(traces).read_bytes()
    if not data.endswith(b"\n"):
        data += b"\n"
    copies = math.ceil(1e9 / len(data))
    name = "dedicated_log_torch_trace_single_1gb.log"
    with open(dst / name, "wb") as fh:
        for _ in range(copies):
            fh.write(data)
    return {name: copies * len(data)}


CLUSTER_SOURCE = REPO / "fixtures" / "cluster" / "srun_label_before_init" / "combined.log"
CLUSTER_RANKS = 2048


def build_cluster_stdout(size: int) -> Callable[[Path, Path], dict[str, int]]:
    """A 2048-rank job's stdout as `srun -l` writes it, about `size` bytes: the real 4-rank
    capture fixtures/cluster/srun_label_before_init (srun's prefix only), its rank r's lines
    given to ranks R = r, r+4, ... behind srun's prefix for 2048 tasks (`   7: `, as wide as
    2047), interleaved line by line as parallel ranks arrive; repeated with another pid each
    round (new processes: new records) until `size`."""

    def build(traces: Path, dst: Path) -> dict[str, int]:
        by_rank: dict[int, list[bytes]] = {}
        for line in CLUSTER_SOURCE.read_bytes().splitlines(keepends=True):
            m = re.match(rb"(\d+): ", line)
            by_rank.setdefault(int(m[1]), []).append(line[m.end():])
        pid = re.compile(rb"^([VIWEC]\d{4} \S+ +)(\d+)")
        width = len(str(CLUSTER_RANKS - 1))
        name = "job_stdout.log"
        written = 0
        with open(dst / name, "wb") as fh:
            rep = 0
            while written < size:
                rep += 1
                streams = []
                for rank in range(CLUSTER_RANKS):
                    tag = f"{rank:>{width}}: ".encode()
                    streams.append([tag + pid.sub(lambda m, k=rep: m[1] + str(int(m[2]) + 100000 * k).encode(), x)
                                    for x in by_rank[rank % len(by_rank)]])
                block = b"".join(s[k] for k in range(max(map(len, streams))) for s in streams if k < len(s))
                fh.write(block)
                written += len(block)
        return {name: written}

    return build


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "rank48_small",
            "48 ranks from multi_rank_runtime, rank rewritten",
            True,
            True,
            build=build_rank48_small,
        ),
        Scenario(
            "rank48_500mb",
            "48 ranks, copies of gpu/train_dynamic",
            False,
            True,
            build=build_rank48_500mb,
        ),
        Scenario(
            "single_1gb",
            "gpu/train_dynamic concatenated to ~1 GB",
            False,
            False,
            build=build_single_1gb,
        ),
        Scenario(
            "train_dynamic",
            "real gpu/train_dynamic log",
            True,
            False,
            real_path="gpu/train_dynamic/trace",
        ),
        Scenario(
            "multi_rank_runtime",
            "real peer-tlparse/multi_rank_runtime",
            True,
            True,
            real_path="peer-tlparse/multi_rank_runtime",
        ),
        Scenario(
            "cluster_stdout_1gb",
            "a 2048-rank job's stdout behind srun -l's prefix, ~1 GB (text log)",
            False,
            False,
            build=build_cluster_stdout(1_000_000_000),
            tools=("summary-cold", "summary-warm"),
        ),
        *(
            Scenario(
                f"hosts{HOSTS}_{n}",
                f"{HOSTS} host exports, {n} ranks from multi_rank_runtime",
                False,
                True,
                build=build_host_exports(n),
                tools=("summary-cold", "summary-warm"),
                exports=True,
            )
            for n in (256, 512, 1024)
        ),
        *(
            Scenario(
                f"merge_{n}",
                f"{n // MERGE_HOST_RANKS} host exports, {n} ranks of {MERGE_RUN}, situations planted",
                False,
                True,
                build=build_merge_exports(n),
                tools=("summary-cold", "summary-warm"),
                exports=True,
                all_versions=True,
            )
            for n in MERGE_SIZES
        ),
    )
}


def schema_version() -> int:
    """traceview's table SCHEMA_VERSION, read from the checkout (an export written at another
    version is refused by traceview, so such an input is built again)."""
    text = (REPO / "traceview" / "versions.py").read_text()
    return int(re.search(r"^SCHEMA_VERSION = (\d+)", text, re.M).group(1))  # type: ignore[union-attr]


def manifest_ok(dst: Path, schema: Any = None) -> bool:
    """True if ``dst`` holds a complete build matching its manifest (and, for exports, written
    at table schema version ``schema``)."""
    mf = dst / ".bench-manifest.json"
    if not mf.is_file():
        return False
    try:
        manifest = json.loads(mf.read_text())
    except ValueError:
        return False
    if manifest.get("version") != BUILD_VERSION or manifest.get("schema") != schema:
        return False
    files: dict[str, int] = manifest.get("files", {})
    present = {str(p.relative_to(dst)) for p in all_files(dst)}
    if present != set(files):
        return False
    return all((dst / n).stat().st_size == size for n, size in files.items())


def prepare(s: Scenario, traces: Path, work: Path) -> Path:
    """Build (or reuse) a scenario's input and return the path to give the tools."""
    if s.real_path is not None:
        path = traces / s.real_path
        if not s.multi_rank:
            (path,) = sorted(path.glob("*.log"))
        return path
    assert s.build is not None
    dst = work / "inputs" / s.name
    schema: Any = (export_versions() if s.all_versions else schema_version()) if s.exports else None
    if manifest_ok(dst, schema):
        print(f"[{s.name}] cached input in {dst}", file=sys.stderr)
    else:
        tmp = dst.with_name(dst.name + ".building")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(dst, ignore_errors=True)
        tmp.mkdir(parents=True)
        t0 = time.perf_counter()
        sizes = s.build(traces, tmp)
        manifest = {"version": BUILD_VERSION, "scenario": s.name, "files": sizes, "schema": schema}
        (tmp / ".bench-manifest.json").write_text(json.dumps(manifest, indent=1))
        tmp.rename(dst)
        total = sum(sizes.values()) / MB
        print(
            f"[{s.name}] built {total:.0f} MB in {time.perf_counter() - t0:.1f} s", file=sys.stderr
        )
    if s.multi_rank:
        return dst
    (only,) = input_files(dst)
    return only


def input_bytes(path: Path) -> int:
    """Total size of an input's files (an export's files in its sub-directories too)."""
    return sum(f.stat().st_size for f in all_files(path))


def warm_page_cache(path: Path) -> None:
    """Read every input file once so no tool pays for the first disk read."""
    for f in all_files(path):
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass


# --------------------------------------------------------------------------- measuring


@dataclass
class Run:
    """One measured command."""

    scenario: str
    tool: str
    argv: list[str]
    input_mb: float
    input: str = ""
    ok: bool = False
    exit_code: int | None = None
    wall_s: float | None = None
    cpu_s: float | None = None
    maxrss_mb: float | None = None
    tree_rss_mb: float | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None  # why the tool was not run here (e.g. "no tmux")

    @property
    def status(self) -> str:
        """``ok``, ``FAILED`` or ``skipped: WHY``."""
        if self.skipped is not None:
            return f"skipped: {self.skipped}"
        return "ok" if self.ok else "FAILED"

    @property
    def mb_per_s(self) -> float | None:
        """Input MB per wall second."""
        return self.input_mb / self.wall_s if self.ok and self.wall_s else None


# A fresh, minimal interpreter per command spawns it and reports os.wait4's rusage for that
# one child.  ru_maxrss of a child also counts the RSS high-water mark of the process that
# spawned it (the kernel keeps the pre-exec mm's peak), so spawning from bench.py itself
# would leak bench.py's own peak into every number; this wrapper's peak (about 9 MB, measured
# as ``wrapper_floor_mb``) is the lowest peak RSS that can be reported.
WRAPPER = """
import os, sys, time
res, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
try:
    pid = os.posix_spawnp(argv[0], argv, os.environ)
except OSError as exc:
    sys.stderr.write("cannot start %s: %s\\n" % (argv[0], exc))
    sys.exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
with open(res, "w") as fh:
    fh.write("%r %d %d %r %r" % (wall, os.waitstatus_to_exitcode(status), ru.ru_maxrss,
                                 ru.ru_utime, ru.ru_stime))
"""


# The wrapper of `watch-digest`: as WRAPPER, but the command's stdout is a pipe it reads (and
# copies to its own stdout, the log): at the first `{"event": "digest", ...}` line it notes the
# time and the CPU so far of the command's process tree (/proc: utime + stime, reaped children
# included, of the command and of every live descendant), sends the command SIGINT (Ctrl-C),
# reads on to EOF (noting the `stopped` line and its time after the SIGINT) and os.wait4s.  A
# watch still running STOP_WAIT_S after the SIGINT gets a second one (counted in "sigints": a
# lost Ctrl-C is a defect to report, not to hide), and SIGKILL as long again after that.  json
# is imported after the spawn, so the child's peak RSS does not count it.
STOP_WAIT_S = 20
WATCH_WRAPPER = """
import os, signal, sys, time
res, wait_s, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
r, w = os.pipe()
t0 = time.perf_counter()
try:
    pid = os.posix_spawnp(argv[0], argv, os.environ,
                          file_actions=[(os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_CLOSE, r)])
except OSError as exc:
    sys.stderr.write("cannot start %s: %s\\n" % (argv[0], exc))
    sys.exit(127)
os.close(w)
import json
tick = os.sysconf("SC_CLK_TCK")

def tree_cpu(root):
    total, stack = 0.0, [root]
    while stack:
        p = stack.pop()
        try:
            with open("/proc/%d/stat" % p, "rb") as fh:
                f = fh.read().rsplit(b")", 1)[1].split()
            total += sum(int(x) for x in f[11:15]) / tick
            for task in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, task), "rb") as fh:
                    stack.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return total

out = {"digest_s": None, "cpu_at_digest_s": None, "digest": None, "stop_s": None, "stopped": None, "sigints": 0,
       "killed": False}
t_sig = None

def again(signum, frame):
    if out["sigints"] < 2:
        out["sigints"] += 1
        os.kill(pid, signal.SIGINT)
        signal.alarm(wait_s)
    else:
        out["killed"] = True
        os.kill(pid, signal.SIGKILL)

signal.signal(signal.SIGALRM, again)
with os.fdopen(r, "rb") as fh:
    for line in fh:
        now = time.perf_counter()
        sys.stdout.buffer.write(line)
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if obj.get("event") == "digest" and t_sig is None:
            out["digest_s"] = now - t0
            out["cpu_at_digest_s"] = tree_cpu(pid)
            out["digest"] = {k: obj.get(k) for k in ("files", "compiles", "ranks", "finding_counts")}
            t_sig = time.perf_counter()
            out["sigints"] = 1
            os.kill(pid, signal.SIGINT)
            signal.alarm(wait_s)
        elif obj.get("event") == "stopped":
            out["stop_s"] = now - t_sig if t_sig is not None else None
            out["stopped"] = obj
_, status, ru = os.wait4(pid, 0)
signal.alarm(0)
out.update(wall=time.perf_counter() - t0, code=os.waitstatus_to_exitcode(status), maxrss=ru.ru_maxrss,
           utime=ru.ru_utime, stime=ru.ru_stime)
with open(res, "w") as fh:
    json.dump(out, fh)
"""


def tree_rss_kib(root: int) -> int:
    """Sum of VmRSS (KiB) over the descendants of ``root`` (not ``root`` itself), from /proc."""
    total = 0
    stack = [(root, False)]
    while stack:
        p, count = stack.pop()
        try:
            if count:
                with open(f"/proc/{p}/status", "rb") as fh:
                    for line in fh:
                        if line.startswith(b"VmRSS:"):
                            total += int(line.split()[1])
                            break
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children", "rb") as fh:
                    stack.extend((int(c), True) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return total


def tail(path: Path, lines: int = 12) -> str:
    """Last lines of a log file."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def measure(run: Run, logdir: Path, timeout: float, env: dict[str, str], *, watch: bool = False,
            rss_limit_mb: float | None = None) -> Run:
    """Run ``run.argv`` under the wrapper; fill in wall, CPU, ru_maxrss and tree RSS.

    ``rss_limit_mb``: the command is killed (and fails) once its sampled tree RSS exceeds it.

    ``watch``: under WATCH_WRAPPER (a `traceview watch --json`): wall is the time to the first
    digest line, CPU and peak RSS those of the whole run (to its exit after the SIGINT), and
    ``extra`` holds the rest (exit_s, stop_s, cpu_at_digest_s, digest, stopped); a run without
    a digest line, or without a `stopped` line after the SIGINT, fails."""
    logdir.mkdir(parents=True, exist_ok=True)
    stem = f"{run.scenario}.{run.tool}"
    out_path, err_path = logdir / f"{stem}.stdout", logdir / f"{stem}.stderr"
    res_path = logdir / f"{stem}.rusage"
    res_path.unlink(missing_ok=True)
    wrapper = [sys.executable, "-I", "-S", "-c", WRAPPER, str(res_path)]
    if watch:
        wrapper = [sys.executable, "-I", "-S", "-c", WATCH_WRAPPER, str(res_path), str(STOP_WAIT_S)]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            wrapper + run.argv,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        peak = [0]
        done = threading.Event()
        timed_out = [False]
        over = [False]

        def sample() -> None:
            while not done.wait(RSS_SAMPLE_S):
                peak[0] = max(peak[0], tree_rss_kib(proc.pid))
                if rss_limit_mb and peak[0] * 1024 / MB > rss_limit_mb and not over[0]:
                    over[0] = True
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except OSError:
                        pass
                if timeout and time.perf_counter() - t0 > timeout:
                    timed_out[0] = True
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except OSError:
                        pass

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        proc.wait()
        done.set()
        sampler.join()
    watched: dict[str, Any] = {}
    try:
        if watch:
            watched = json.loads(res_path.read_text())
            wall, code, maxrss = watched["wall"], watched["code"], watched["maxrss"]
            utime, stime = watched["utime"], watched["stime"]
        else:
            wall, code, maxrss, utime, stime = res_path.read_text().split()
    except (OSError, ValueError, KeyError):
        run.exit_code = proc.returncode
        run.error = f"exit {proc.returncode}\n{tail(err_path) or tail(out_path)}"
        if timed_out[0]:
            run.error = f"timed out after {timeout:.0f} s\n{tail(err_path) or tail(out_path)}"
        if over[0]:
            run.error = f"killed above {rss_limit_mb:.0f} MB of tree RSS"
        return run
    run.wall_s, run.exit_code = float(wall), int(code)
    run.cpu_s = float(utime) + float(stime)
    run.maxrss_mb = int(maxrss) * 1024 / MB
    run.tree_rss_mb = peak[0] * 1024 / MB if peak[0] else None
    run.ok = run.exit_code == 0 and not timed_out[0] and not over[0]
    if watch:
        run.extra = {"exit_s": run.wall_s,
                     **{k: watched[k] for k in ("stop_s", "cpu_at_digest_s", "sigints", "digest", "stopped")}}
        run.wall_s = watched["digest_s"]
        if watched["killed"]:
            run.ok, run.error = False, f"still running {STOP_WAIT_S} s after a second SIGINT: killed\n{tail(err_path)}"
        elif run.ok and watched["digest_s"] is None:
            run.ok, run.error = False, f"no digest line on stdout (exit {run.exit_code})\n{tail(err_path)}"
        elif run.ok and watched["stopped"] is None:
            run.ok, run.error = False, f"no stopped line after SIGINT (exit {run.exit_code})\n{tail(err_path)}"
    if not run.ok:
        if run.error is None:
            run.error = f"exit {run.exit_code}\n{tail(err_path) or tail(out_path)}"
        if timed_out[0]:
            run.error = f"timed out after {timeout:.0f} s\n{tail(err_path) or tail(out_path)}"
        if over[0]:
            run.error = f"killed above {rss_limit_mb:.0f} MB of tree RSS"
    elif run.tool == "floor":
        try:
            run.extra = json.loads(out_path.read_text())
        except ValueError:
            pass
    return run


def wrapper_floor_mb(logdir: Path, env: dict[str, str]) -> float | None:
    """Peak RSS the wrapper reports for ``true``: the smallest reportable peak."""
    r = measure(Run("_", "wrapper-floor", ["true"], 0.0), logdir, 60.0, env)
    return r.maxrss_mb if r.ok else None


def fill(template: list[str], **values: str) -> list[str]:
    """Substitute ``{name}`` placeholders in a command template."""
    return [part.format(**values) for part in template]


def measure_open(run: Run, cache: Path, timeout: float) -> Run:
    """`traceview open` to its first screen with findings, in tmux (bench/ui_first_screen.py's
    first_screen): wall = seconds to that screen; CPU, peak RSS (VmHWM) and tree RSS those of
    the `traceview open` process read from /proc at that moment."""
    first_screen = ui_first_screen().first_screen
    try:
        got = first_screen(run.input, cache, python=sys.executable, timeout=min(timeout or 120.0, 120.0))
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        run.error = str(exc)
        return run
    run.ok, run.exit_code = True, 0
    run.wall_s, run.cpu_s = got["seconds"], got["cpu_s"]
    run.maxrss_mb, run.tree_rss_mb = got["maxrss_mb"], got["tree_rss_mb"]
    return run


def ui_first_screen() -> Any:
    """bench/ui_first_screen.py as a module (bench/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ui_first_screen", Path(__file__).resolve().with_name("ui_first_screen.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# the parse cache each run uses (TRACEVIEW_CACHE_DIR = WORK/cache/SCENARIO/NAME): a prime fills
# the cache its measured tool then reads; every other run starts from an empty one
CACHE_OF = {"summary-prime": "warm", "summary-warm": "warm", "report-prime": "report-warm",
            "report-warm": "report-warm", "open-prime": "open-first", "open-first": "open-first"}
READS_PRIMED = ("summary-warm", "report-warm", "open-first")


def bench_scenario(s: Scenario, args: argparse.Namespace, env: dict[str, str]) -> list[Run]:
    """Run every selected tool on one scenario."""
    path = prepare(s, args.traces, args.work)
    mb = input_bytes(path) / MB
    outroot = args.work / "out" / s.name
    logdir = args.work / "logs"
    warm_page_cache(path)
    py = sys.executable
    cold_args = shlex.split(args.summary_cold_args)
    # (tool, argv, output dir to empty before the run or None, how: spawn | watch | tmux | skip:WHY)
    plan: list[tuple[str, list[str], Path | None, str]] = []
    for tool in args.tools:
        if tool not in s.tools:
            print(f"[{s.name}] {tool}: does not apply to this input, skipped", file=sys.stderr)
            continue
        if tool == "floor":
            argv = [py, str(Path(__file__).resolve()), "--floor-worker", str(path)]
            plan.append(("floor", argv, None, "spawn"))
        elif tool == "tlparse":
            out = outroot / "tlparse"
            argv = fill(TLPARSE_CMD, tlparse=args.tlparse, input=str(path), out=str(out))
            plan.append(("tlparse", argv + (TLPARSE_DIR_EXTRA if path.is_dir() else []), out, "spawn"))
        elif tool == "tlhub":
            out = outroot / "tlhub"
            plan.append(("tlhub", fill(TLHUB_CMD, tlhub_python=str(args.tlhub_python), input=str(path), out=str(out)), out,
                         "spawn"))
        elif tool == "export":
            out = outroot / "export"
            plan.append(("export", fill(EXPORT_CMD, python=py, input=str(path), out=str(out)), out, "spawn"))
        elif tool == "summary-cold":
            plan.append(("summary-cold", fill(SUMMARY_CMD, python=py, input=str(path)) + cold_args, None, "spawn"))
        elif tool == "summary-warm":
            argv = fill(SUMMARY_CMD, python=py, input=str(path))
            plan += [("summary-prime", argv, None, "spawn"), ("summary-warm", argv, None, "spawn")]
        elif tool == "report-warm":
            for name in ("report-prime", "report-warm"):
                out = outroot / name
                plan.append((name, fill(REPORT_CMD, python=py, input=str(path), out=str(out / "report.html")), out, "spawn"))
        elif tool == "watch-digest":
            if not path.is_dir():
                print(f"[{s.name}] watch-digest: watch follows a directory, this input is a file; skipped", file=sys.stderr)
                continue
            plan.append(("watch-digest", fill(WATCH_CMD, python=py, input=str(path)), None, "watch"))
        elif tool == "open-first":
            if shutil.which("tmux") is None:
                plan.append(("open-first", fill(OPEN_CMD, python=py, input=str(path)), None, "skip:no tmux"))
                continue
            plan += [("open-prime", fill(SUMMARY_CMD, python=py, input=str(path)), None, "spawn"),
                     ("open-first", fill(OPEN_CMD, python=py, input=str(path)), None, "tmux")]
    # rounds: every tool once per round, so that the machine's drift (a shared VM's speed can
    # change 2x within minutes) falls on all tools alike; the fastest run of each is shown
    best: dict[str, Run] = {}
    attempts: dict[str, list[dict[str, Any]]] = {}
    failed: set[str] = set()
    for rnd in range(args.repeat):
        for tool, argv, out, how in plan:
            if tool in failed or (tool.endswith("-prime") and rnd > 0):
                continue
            if how.startswith("skip:"):
                best[tool] = Run(s.name, tool, argv, mb, str(path), skipped=how[len("skip:"):])
                attempts[tool] = []
                continue
            if out is not None:
                shutil.rmtree(out, ignore_errors=True)
                # report's -o is a file in its own output dir; the others write the dir itself
                (out if tool.startswith("report-") else out.parent).mkdir(parents=True, exist_ok=True)
            # traceview's parse cache: a prime fills a fresh cache that its tool then reads;
            # every other run (export, summary-cold, watch-digest, ...) starts from an empty one
            cache = args.work / "cache" / s.name / CACHE_OF.get(tool, tool)
            if tool not in READS_PRIMED:
                shutil.rmtree(cache, ignore_errors=True)
            run = Run(s.name, tool, argv, mb, str(path))
            if how == "tmux":
                r = measure_open(run, cache, args.timeout)
            else:
                r = measure(run, logdir, args.timeout, {**env, "TRACEVIEW_CACHE_DIR": str(cache)}, watch=how == "watch")
            load = os.getloadavg()
            attempts.setdefault(tool, []).append(
                {
                    "wall_s": r.wall_s,
                    "cpu_s": r.cpu_s,
                    "maxrss_mb": r.maxrss_mb,
                    "tree_rss_mb": r.tree_rss_mb,
                    "ok": r.ok,
                    "load": [round(x, 2) for x in load],
                    **({"sigints": r.extra.get("sigints")} if how == "watch" else {}),
                }
            )
            b = best.get(tool)
            if b is None or (r.ok and (not b.ok or (r.wall_s or 0) < (b.wall_s or 0))):
                best[tool] = r
            if not r.ok:
                failed.add(tool)
            if out is not None and not args.keep_outputs:
                shutil.rmtree(out, ignore_errors=True)
    runs: list[Run] = []
    for tool, _argv, _out, _how in plan:
        r = best[tool]
        if len(attempts[tool]) > 1:
            r.extra["attempts"] = attempts[tool]
        print(f"[{s.name}] {status_line(r)}", file=sys.stderr)
        runs.append(r)
    return runs


# --------------------------------------------------------------------------- reporting


def fmt(value: float | None, spec: str) -> str:
    """Format a number, or ``-`` for a missing one."""
    return "-" if value is None else format(value, spec)


def status_line(r: Run) -> str:
    """One-line progress message for a run."""
    if r.ok:
        return (
            f"{r.tool}: {r.wall_s:.2f} s, peak RSS {fmt(r.maxrss_mb, '.0f')} MB, "
            f"{fmt(r.mb_per_s, '.0f')} MB/s"
        )
    if r.skipped is not None:
        return f"{r.tool}: {r.status}"
    return f"{r.tool}: FAILED ({((r.error or '').splitlines() or [''])[0]})"


def ratio(runs: list[Run], num: str, den: str) -> float | None:
    """wall(num) / wall(den) within one scenario, if both succeeded."""
    by = {r.tool: r for r in runs if r.ok}
    if num in by and den in by and by[den].wall_s:
        return (by[num].wall_s or 0) / by[den].wall_s  # type: ignore[operator]
    return None


# issue 40's check: (name, tool, the tool it is divided by or None for seconds, op, target, goal)
ISSUE40_CHECKS: tuple[tuple[str, str, str | None, str, float, float | None], ...] = (
    ("cached summary s", "summary-warm", None, "<=", 0.3, None),
    ("summary-cold/floor", "summary-cold", "floor", "<=", 1.3, 1.2),
    ("watch-digest/summary-cold", "watch-digest", "summary-cold", "<=", 1.2, None),
    ("report-warm s", "report-warm", None, "<=", 1.0, None),
    ("open-first s", "open-first", None, "<=", 1.0, None),
    ("tlparse/export", "tlparse", "export", ">=", 12.0, 15.0),
)


def _walls(r: Run) -> list[float | None]:
    """Wall seconds of each round's run of a tool (None where it failed)."""
    tries = r.extra.get("attempts") or [{"wall_s": r.wall_s, "ok": r.ok}]
    return [a["wall_s"] if a.get("ok") else None for a in tries]


def _why_missing(by: dict[str, Run], tool: str) -> str:
    r = by.get(tool)
    if r is None:
        return f"{tool} not run"
    if r.skipped is not None:
        return f"{tool} skipped: {r.skipped}"
    return f"{tool} FAILED"


def issue40_checks(runs: list[Run]) -> list[dict[str, Any]]:
    """Issue 40's check over one scenario's runs (its fastest run of each tool): per check its
    ``value`` (wall s, or a ratio of the two tools' fastest walls), ``target``, ``goal``, ``met``
    (None where a tool is missing, with ``missing`` saying why) and ``rounds``: the value of
    each round alone (round i's run of one tool over round i's of the other)."""
    by = {r.tool: r for r in runs}
    out: list[dict[str, Any]] = []
    for name, num, den, op, target, goal in ISSUE40_CHECKS:
        value: float | None = None
        rounds: list[float | None] = []
        missing = None
        tools = (num,) if den is None else (num, den)
        gone = [t for t in tools if t not in by or not by[t].ok or by[t].wall_s is None]
        if gone:
            missing = "; ".join(_why_missing(by, t) for t in gone)
        elif den is None:
            value, rounds = by[num].wall_s, _walls(by[num])
        else:
            value = ratio(runs, num, den)
            rounds = [a / b if a is not None and b else None for a, b in zip(_walls(by[num]), _walls(by[den]))]
        met = None if value is None else (value <= target if op == "<=" else value >= target)
        out.append({"check": name, "value": value, "op": op, "target": target, "goal": goal, "met": met,
                    "unit": "s" if den is None else "x", "rounds": rounds, "missing": missing})
    return out


def print_issue40(results: dict[str, list[Run]], load: tuple[tuple[float, ...], tuple[float, ...]] | None = None) -> None:
    """The issue-40 block: every check of the issue with its value, target and met/missed, for each
    scenario where at least one could be measured."""
    for name, runs in results.items():
        checks = issue40_checks(runs)
        if all(c["value"] is None for c in checks):
            continue
        n = max((len(c["rounds"]) for c in checks), default=1)
        how = f"fastest of {n} rounds" if n > 1 else "one round"
        print(f"\nissue 40 ({name}; wall time, {how}; target for the 48-rank rank48_500mb)")
        if load is not None:
            (a, b, c), (d, e, f) = load
            print(f"  load average (1/5/15 min) at start {a:.2f} {b:.2f} {c:.2f}, at end {d:.2f} {e:.2f} {f:.2f}"
                  f" on {os.cpu_count()} cores")
        rows = [("check", "value", "target", "goal", "result", "each round")]
        for c in checks:
            spec = ".3f" if c["unit"] == "s" else ".2f"
            result = "met" if c["met"] else "missed" if c["met"] is not None else f"not measured ({c['missing']})"
            rows.append((c["check"], fmt(c["value"], spec), f"{c['op']} {c['target']:g}",
                         "" if c["goal"] is None else f"{c['op']} {c['goal']:g}", result,
                         " ".join(fmt(v, spec) for v in c["rounds"]) if len(c["rounds"]) > 1 else ""))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for i, row in enumerate(rows):
            cells = [cell.rjust(w) if j == 1 else cell.ljust(w) for j, (cell, w) in enumerate(zip(row, widths))]
            print("  " + "  ".join(cells).rstrip())
            if i == 0:
                print("  " + "  ".join("-" * w for w in widths))


def print_table(results: dict[str, list[Run]]) -> None:
    """The results table, the ratios, and the stderr tails of failed commands."""
    head = (
        "scenario",
        "input MB",
        "tool",
        "wall s",
        "cpu s",
        "peak RSS MB",
        "tree RSS MB",
        "MB/s",
        "status",
    )
    rows = [head]
    for runs in results.values():
        for r in runs:
            rows.append(
                (
                    r.scenario,
                    f"{r.input_mb:.1f}",
                    r.tool,
                    fmt(r.wall_s, ".3f"),
                    fmt(r.cpu_s, ".2f"),
                    fmt(r.maxrss_mb, ".1f"),
                    fmt(r.tree_rss_mb, ".1f"),
                    fmt(r.mb_per_s, ".1f"),
                    r.status,
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    right = {1, 3, 4, 5, 6, 7}
    for n, row in enumerate(rows):
        cells = [
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))
        ]
        print("  ".join(cells).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
    print()
    lines = []
    for name, runs in results.items():
        a, h, b = ratio(runs, "tlparse", "export"), ratio(runs, "tlhub", "export"), ratio(runs, "summary-cold", "floor")
        t, e = ratio(runs, "tlparse", "summary-cold"), ratio(runs, "export", "summary-cold")
        if any(x is not None for x in (a, h, b, t, e)):
            lines.append(
                f"  {name:<20} tlparse/export {fmt(a, '.2f'):>7}   tlhub/export {fmt(h, '.2f'):>7}   "
                f"summary-cold/floor {fmt(b, '.2f'):>7}   tlparse/summary-cold {fmt(t, '.2f'):>7}   "
                f"export/summary-cold {fmt(e, '.2f'):>7}"
            )
    if lines:
        print("ratios (wall time); issue 20's targets: summary-cold/floor <= 1.5, tlparse/summary-cold >= 20, "
              "export/summary-cold <= 2")
        print("\n".join(lines))
    hosts = {name: runs for name, runs in results.items() if name.startswith("hosts")}
    if hosts:
        print("\nsummary over host exports (target at 1,024 ranks: under 5 s and 1000 MB peak RSS)")
        for name, runs in hosts.items():
            for r in runs:
                if r.tool in ("summary-cold", "summary-warm") and r.ok:
                    print(f"  {name:<20} {r.tool:<13} {fmt(r.wall_s, '.2f'):>6} s  {fmt(r.maxrss_mb, '.0f'):>5} MB")
    failed = [r for runs in results.values() for r in runs if not r.ok and r.skipped is None]
    for r in failed:
        print(f"\nFAILED {r.scenario} {r.tool}: {shlex.join(r.argv)}\n{r.error}")
    for runs in results.values():
        for r in runs:
            lost = [n for n, a in enumerate(r.extra.get("attempts") or [r.extra], 1) if (a.get("sigints") or 0) > 1]
            if r.tool == "watch-digest" and lost:
                print(f"\nNOTE {r.scenario} watch-digest: the first SIGINT did not stop the watch within {STOP_WAIT_S} s "
                      f"(round {', '.join(map(str, lost))}); a second one was sent (see logs/*.watch-digest.stderr)")


def to_json(results: dict[str, list[Run]], args: argparse.Namespace) -> dict[str, Any]:
    """Results plus enough context to compare runs later."""
    runs = []
    for rs in results.values():
        for r in rs:
            d = asdict(r)
            d["mb_per_s"] = r.mb_per_s
            runs.append(d)
    return {
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
        },
        "tlparse": args.tlparse,
        "commands": {
            "export": EXPORT_CMD,
            "summary": SUMMARY_CMD,
            "summary_cold_args": args.summary_cold_args,
            "tlparse": TLPARSE_CMD,
            "tlhub": TLHUB_CMD,
            "tlparse_dir_extra": TLPARSE_DIR_EXTRA,
            "report": REPORT_CMD,
            "watch": WATCH_CMD,
            "open": OPEN_CMD,
        },
        "units": {
            "MB": "10**6 bytes",
            "maxrss": "ru_maxrss of the child via os.wait4",
            "tree_rss": "peak sampled sum of VmRSS over the process tree",
        },
        "ratios": {
            name: {
                "tlparse/export": ratio(rs, "tlparse", "export"),
                "tlhub/export": ratio(rs, "tlhub", "export"),
                "summary-cold/floor": ratio(rs, "summary-cold", "floor"),
                "tlparse/summary-cold": ratio(rs, "tlparse", "summary-cold"),
                "export/summary-cold": ratio(rs, "export", "summary-cold"),
            }
            for name, rs in results.items()
        },
        "issue40": {name: issue40_checks(rs) for name, rs in results.items()},
        "repeat": args.repeat,
        "runs": runs,
    }


# --------------------------------------------------------------------------- traceview watch
#
# `--watch`: the live path of issue 33 (traceview/live), measured on the real command
# (`python -m traceview watch DIR --json`, a child process) fed by this script acting as the
# job's writer.  See the module docstring ("--watch") for what is measured and how.

WATCH_RANKS = 48


def record_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every record of a trace log: an envelope line and its TAB payload lines."""
    starts = [0] if data and data[:1] != b"\t" else []
    starts += [m.start() + 1 for m in re.finditer(rb"\n(?=[^\t])", data) if m.start() + 1 < len(data)]
    return list(zip(starts, [*starts[1:], len(data)]))


def record_cut(data: bytes, at: int) -> int:
    """The start of the first record at or after byte ``at`` (len(data) if none)."""
    return next((s for s, _e in record_spans(data) if s >= at), len(data))


def compile_records(data: bytes, max_bytes: int = 100_000) -> list[tuple[str, bytes, bytes]]:
    """The compiles of a log as (compile id, records from its dynamo_start up to its
    compilation_metrics, the compilation_metrics record), those under ``max_bytes``."""
    out: list[tuple[str, bytes, bytes]] = []
    start: int | None = None
    for s, e in record_spans(data):
        head = data[s : data.find(b"\n", s, e) if b"\n" in data[s:e] else e]
        if b'] {"dynamo_start": ' in head:
            start = s
        elif b'] {"compilation_metrics": ' in head and start is not None:
            m = re.search(rb'"compile_id": "([^"]+)"', head)
            if m and e - start <= max_bytes:
                out.append((m.group(1).decode(), data[start:s], data[s:e]))
            start = None
    return out


def first_record(data: bytes, marker: bytes) -> bytes:
    """The first record whose envelope line holds ``marker``."""
    for s, e in record_spans(data):
        if marker in data[s : data.find(b"\n", s, e)]:
            return data[s:e]
    raise RuntimeError(f"no record with {marker!r}")


def append(path: Path, data: bytes) -> None:
    """One write at the end of ``path`` (torch writes a record with one write)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_text() -> str:
    """The 1/5/15-minute load averages and the core count."""
    a, b, c = os.getloadavg()
    return f"load {a:.2f} {b:.2f} {c:.2f} on {os.cpu_count()} cores"


class WatchProc:
    """A running `traceview watch --json`: its JSON lines, each stamped (perf_counter) as read."""

    def __init__(self, path: Path, env: dict[str, str], logdir: Path, *, poll: bool = False, name: str = "watch") -> None:
        argv = fill(WATCH_CMD, python=sys.executable, input=str(path)) + (["--poll"] if poll else [])
        logdir.mkdir(parents=True, exist_ok=True)
        self.err_path = logdir / f"{name}.stderr"
        self.argv = argv
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self.cond = threading.Condition()
        self.t0 = time.perf_counter()
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                         start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            t = time.perf_counter()
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = {"event": "?", "text": raw.decode(errors="replace")}
            with self.cond:
                self.lines.append((t, obj))
                self.cond.notify_all()

    def wait_for(self, pred: Callable[[dict[str, Any]], bool], timeout: float, after: int = 0) -> tuple[float, dict[str, Any]]:
        """The first line from index ``after`` on that satisfies ``pred``; RuntimeError on timeout."""
        deadline = time.perf_counter() + timeout
        with self.cond:
            i = after
            while True:
                while i < len(self.lines):
                    if pred(self.lines[i][1]):
                        return self.lines[i]
                    i += 1
                left = deadline - time.perf_counter()
                if left <= 0 or self.proc.poll() is not None:
                    raise RuntimeError(f"no such line from the watch within {timeout:.0f} s "
                                       f"(exit {self.proc.poll()}): {tail(self.err_path)}")
                self.cond.wait(min(left, 0.5))

    def cpu_s(self) -> float:
        return proc_cpu_s(self.proc.pid)

    def quiet_cpu(self, still_s: float = 1.5, timeout: float = 120.0) -> float:
        """The process's CPU seconds once they stop growing (by under 10 ms over ``still_s``)."""
        deadline = time.perf_counter() + timeout
        last = self.cpu_s()
        while time.perf_counter() < deadline:
            time.sleep(still_s)
            now = self.cpu_s()
            if now - last < 0.01:
                return now
            last = now
        raise RuntimeError(f"the watch did not go quiet within {timeout:.0f} s")

    def stop(self, timeout: float = 60.0) -> dict[str, Any]:
        """SIGINT (Ctrl-C); checks it exits 0 with its `stopped` line, which is returned."""
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise RuntimeError(f"the watch did not end within {timeout:.0f} s of SIGINT") from None
        self.reader.join(10)
        last = self.lines[-1][1] if self.lines else {}
        if code != 0 or last.get("event") != "stopped":
            raise RuntimeError(f"the watch ended with exit {code}, last line {last}: {tail(self.err_path)}")
        return last

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()

    def count(self, kind: str) -> int:
        with self.cond:
            return sum(1 for _t, o in self.lines if o.get("event") == kind)


def watch_latency(work: Path, env: dict[str, str], log: bytes, n: int, poll: bool) -> dict[str, Any]:
    """N compiles written to one rank file of an empty directory the watch follows: seconds
    from the write of each compilation_metrics record to its compile_end line."""
    import random

    rng = random.Random(33)
    compiles = compile_records(log)
    d = work / ("latency-poll" if poll else "latency-events")
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    f = d / rank_file_name("watch", 0)
    w = WatchProc(d, env, work / "logs", poll=poll, name=d.name)
    lat: list[float] = []
    try:
        w.wait_for(lambda o: o.get("event") == "digest", 120)
        for i in range(n):
            cid, pre, metrics = compiles[i % len(compiles)]
            append(f, pre)
            time.sleep(rng.uniform(0.05, 0.3))
            seen = len(w.lines)
            t_write = time.perf_counter()
            append(f, metrics)
            t_ev, ev = w.wait_for(lambda o: o.get("event") == "compile_end", 15, after=seen)
            if ev.get("compile_id") != cid:
                raise RuntimeError(f"compile_end for {ev.get('compile_id')}, expected {cid}")
            lat.append(t_ev - t_write)
            time.sleep(rng.uniform(0.1, 0.4))
        stopped = w.stop()
    finally:
        w.kill()
    lat.sort()
    return {"mode": "poll" if poll else "events", "compiles": n, "compile_ids": sorted({c for c, _p, _m in compiles}),
            "median_s": lat[len(lat) // 2] if n % 2 else (lat[n // 2 - 1] + lat[n // 2]) / 2, "max_s": lat[-1],
            "min_s": lat[0], "latencies_s": [round(x, 4) for x in lat], "stopped": stopped, "load": os.getloadavg()}


def watch_idle(work: Path, env: dict[str, str], log: bytes, seconds: float, poll: bool) -> dict[str, Any]:
    """CPU of the watch on 48 rank files, each holding a real compile: over ``seconds`` with
    nothing written, then over ``seconds`` with every file receiving one real `str` record a
    second (rank R's at R/48 s into each second)."""
    d = work / ("idle-poll" if poll else "idle-events")
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    _cid, pre, metrics = compile_records(log)[0]
    rec = first_record(log, b'] {"str": ')
    files = [d / rank_file_name("watch-idle", r) for r in range(WATCH_RANKS)]
    for f in files:
        f.write_bytes(pre + metrics)
    w = WatchProc(d, env, work / "logs", poll=poll, name=d.name)
    out: dict[str, Any] = {"mode": "poll" if poll else "events", "files": len(files), "record_bytes": len(rec),
                           "base_bytes_per_file": len(pre + metrics)}
    try:
        w.wait_for(lambda o: o.get("event") == "digest", 120)
        w.quiet_cpu()
        # nothing written
        c0, t0 = w.cpu_s(), time.perf_counter()
        time.sleep(seconds)
        c1, t1 = w.cpu_s(), time.perf_counter()
        out["static"] = {"cpu_s": c1 - c0, "wall_s": t1 - t0, "pct_core": 100 * (c1 - c0) / (t1 - t0), "load": os.getloadavg()}
        # 48 files growing
        seen = len(w.lines)
        c0, t0 = w.cpu_s(), time.perf_counter()
        writes = 0
        for sec in range(int(seconds)):
            for r, f in enumerate(files):
                due = t0 + sec + r / len(files)
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                append(f, rec)
                writes += 1
        time.sleep(max(0.0, t0 + int(seconds) - time.perf_counter()))
        c1, t1 = w.cpu_s(), time.perf_counter()
        out["growing"] = {"cpu_s": c1 - c0, "wall_s": t1 - t0, "pct_core": 100 * (c1 - c0) / (t1 - t0), "writes": writes,
                          "events": len(w.lines) - seen, "load": os.getloadavg()}
        out["stopped"] = w.stop()
    finally:
        w.kill()
    return out


def watch_append(work: Path, env: dict[str, str], name: str, base: Callable[[Path], int], add: bytes,
                 timeout: float) -> dict[str, Any]:
    """The watch follows one log (written by ``base``) that then grows by ``add`` in one write:
    the CPU the watch spends on it (its idle CPU rate over the same time taken off)."""
    d = work / f"append-{name}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    f = d / rank_file_name("watch-append", 0)
    t = time.perf_counter()
    base_bytes = base(f)
    print(f"[watch] {name}: wrote {base_bytes / MB:.0f} MB in {time.perf_counter() - t:.1f} s; starting the watch", file=sys.stderr)
    expect = add.count(b'] {"compilation_metrics": ')
    w = WatchProc(d, env, work / "logs", name=d.name)
    out: dict[str, Any] = {"base_bytes": base_bytes, "added_bytes": len(add), "compile_ends_expected": expect}
    try:
        t_ev, _ = w.wait_for(lambda o: o.get("event") == "digest", timeout)
        out["start_wall_s"] = t_ev - w.t0
        c_start = w.quiet_cpu(timeout=timeout)
        out["start_cpu_s"] = c_start
        out["start_maxrss_mb"] = vm_hwm_mb(w.proc.pid)
        # the idle rate of this watch (its 1 s checks)
        c0, t0 = w.cpu_s(), time.perf_counter()
        time.sleep(5)
        idle = (w.cpu_s() - c0) / (time.perf_counter() - t0)
        seen = len(w.lines)
        c0, t0 = w.cpu_s(), time.perf_counter()
        append(f, add)
        t_ev = t0
        for _ in range(expect):
            t_ev, _o = w.wait_for(lambda o: o.get("event") == "compile_end", timeout, after=seen)
            seen = next(i for i, (t, o) in enumerate(w.lines) if t == t_ev and o is _o) + 1
        c1 = w.quiet_cpu(timeout=timeout)
        t1 = time.perf_counter()
        out.update(idle_pct_core=100 * idle, raw_cpu_s=c1 - c0, cpu_s=max(0.0, c1 - c0 - idle * (t1 - t0)),
                   last_event_s=t_ev - t0, window_s=t1 - t0, maxrss_mb=vm_hwm_mb(w.proc.pid), load=os.getloadavg())
        out["stopped"] = w.stop()
        out["appended_parsed_bytes"] = out["stopped"]["bytes_parsed"] - base_bytes
    finally:
        w.kill()
        shutil.rmtree(d, ignore_errors=True)
    return out


def vm_hwm_mb(pid: int) -> float | None:
    """Peak RSS of a running process (VmHWM), MB."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024 / MB
    except OSError:
        pass
    return None


def metrics_end_near(data: bytes, at: int) -> int:
    """The end of the compilation_metrics record ending nearest byte ``at``."""
    ends = [e for s, e in record_spans(data) if b'] {"compilation_metrics": ' in data[s : data.find(b"\n", s, e)]]
    return min(ends, key=lambda e: abs(e - at))


def copies_writer(srcs: list[bytes], total: int) -> Callable[[Path], int]:
    """A base log: the sources concatenated in turn until ``total`` bytes are reached."""

    def write(path: Path) -> int:
        n = 0
        with open(path, "wb") as fh:
            i = 0
            while n < total:
                fh.write(srcs[i % len(srcs)])
                n += len(srcs[i % len(srcs)])
                i += 1
        return n

    return write


def bench_watch(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """`--watch`: latency, idle CPU and cost per MB appended of `traceview watch`."""
    work = args.work / "watch"
    work.mkdir(parents=True, exist_ok=True)
    log = train_dynamic_log(args.traces).read_bytes()
    parts = set(args.watch_parts)
    res: dict[str, Any] = {"load_start": os.getloadavg(), "cpus": os.cpu_count(), "niceness": os.nice(0)}
    print(f"[watch] {load_text()}, niceness {os.nice(0)}", file=sys.stderr)
    if "latency" in parts:
        res["latency"] = []
        for poll in (False, True):
            r = watch_latency(work, env, log, args.watch_compiles, poll)
            print(f"[watch] latency {r['mode']}: median {r['median_s']:.3f} s, max {r['max_s']:.3f} s; {load_text()}",
                  file=sys.stderr)
            res["latency"].append(r)
    if "idle" in parts:
        res["idle"] = []
        for poll in (False, True):
            r = watch_idle(work, env, log, args.watch_idle_s, poll)
            print(f"[watch] idle {r['mode']}: static {r['static']['pct_core']:.2f}% growing {r['growing']['pct_core']:.2f}% "
                  f"of a core; {load_text()}", file=sys.stderr)
            res["idle"].append(r)
    if "append" in parts:
        # the 1 MB: train_dynamic's records from the one after compile 0/0's metrics (compile
        # 1/0 and what follows it) to the record boundary at 1 MB on
        s0 = metrics_end_near(log, 0)
        add = log[s0 : record_cut(log, s0 + 1_000_000)]
        mrr = sorted((args.traces / "peer-tlparse/multi_rank_runtime").glob("*rank_0.log"))[0].read_bytes()
        big = int(args.watch_big_mb * MB)
        rank48 = prepare(SCENARIOS["rank48_500mb"], args.traces, args.work)
        rank_logs = [f.read_bytes() for f in input_files(rank48)[:2]]  # byte-identical copies: two suffice
        cases = [
            ("new-ids-small", "multi_rank_runtime rank 0 up to its compilation_metrics nearest 1 MB",
             copies_writer([mrr[: metrics_end_near(mrr, 1_000_000)]], 1)),
            ("new-ids-big", f"multi_rank_runtime rank 0 copies to {args.watch_big_mb:.0f} MB",
             copies_writer([mrr], big)),
            ("same-ids-small", "one rank48_500mb rank log (gpu/train_dynamic)", copies_writer(rank_logs[:1], 1)),
            ("same-ids-big", f"rank48_500mb rank logs concatenated to {args.watch_big_mb:.0f} MB",
             copies_writer(rank_logs, big)),
        ]
        res["append"] = []
        for name, what, base in cases:
            if not any(p in name for p in args.watch_append_cases):
                continue
            r = watch_append(work, env, name, base, add, args.timeout or 3600)
            r.update(case=name, base=what)
            print(f"[watch] append {name}: {r['cpu_s']:.2f} s CPU for {len(add) / MB:.2f} MB on {r['base_bytes'] / MB:.0f} MB; "
                  f"{load_text()}", file=sys.stderr)
            res["append"].append(r)
    res["load_end"] = os.getloadavg()
    return res


def print_watch(res: dict[str, Any]) -> None:
    """The --watch tables."""
    la, lb = res["load_start"], res["load_end"]
    print(f"traceview watch on {res['cpus']} cores; load average (1/5/15 min) at start {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}, "
          f"at end {lb[0]:.2f} {lb[1]:.2f} {lb[2]:.2f}; niceness {res['niceness']}")
    for r in res.get("latency", []):
        print(f"latency, write of compilation_metrics -> compile_end line ({r['mode']:<6}, {r['compiles']} compiles): "
              f"median {r['median_s']:.3f} s, max {r['max_s']:.3f} s, min {r['min_s']:.3f} s (target < 1 s); "
              f"load {r['load'][0]:.2f}")
    for r in res.get("idle", []):
        s, g = r["static"], r["growing"]
        print(f"idle CPU, {r['files']} rank files ({r['mode']:<6}): nothing written {s['pct_core']:.2f}% of a core "
              f"over {s['wall_s']:.0f} s (load {s['load'][0]:.2f}); one {r['record_bytes']} B record a second to each "
              f"{g['pct_core']:.2f}% over {g['wall_s']:.0f} s, {g['events']} events (load {g['load'][0]:.2f}) (target < 5%)")
    rows = [("case", "base MB", "added MB", "CPU s", "raw CPU s", "idle %", "MB/s", "last event s", "start s", "start CPU s",
             "peak RSS MB", "load")]
    for r in res.get("append", []):
        added = r["appended_parsed_bytes"] / MB
        rows.append((r["case"], f"{r['base_bytes'] / MB:.1f}", f"{added:.2f}", f"{r['cpu_s']:.3f}", f"{r['raw_cpu_s']:.3f}",
                     f"{r['idle_pct_core']:.2f}", fmt(added / r["cpu_s"] if r["cpu_s"] else None, ".1f"),
                     f"{r['last_event_s']:.2f}", f"{r['start_wall_s']:.1f}", f"{r['start_cpu_s']:.1f}",
                     fmt(r["maxrss_mb"], ".0f"), f"{r['load'][0]:.2f}"))
    if len(rows) > 1:
        print("\ncost of 1 MB appended (CPU s: the watch's CPU from the write until it went quiet, less its idle rate; "
              "MB/s: bytes parsed after the start / CPU s)")
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for n, row in enumerate(rows):
            print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
            if n == 0:
                print("  ".join("-" * w for w in widths))
        for r in res["append"]:
            print(f"  {r['case']}: {r['base']}")


# --------------------------------------------------------------------------- --merge (issue 46)

MERGE_TOOLS = {"summary": ["--no-cache"], "summary-json": ["--no-cache", "--json"]}
# the findings that name each planted situation's ranks (kind, facet or None for any facet)
MERGE_FINDS = {
    "lone_recompile": (("collectives", "wait"), ("rank_stalls", None)),
    "collective_mismatch": (("collectives", "mismatch"),),
    "stopped": (("unfinished", None), ("stops", None)),
}


def merge_check(doc: dict[str, Any], ranks: int) -> dict[str, Any]:
    """Whether ``summary --json``'s findings name each planted situation's ranks exactly.

    A situation is found when the findings of its kinds (MERGE_FINDS) that name planted ranks
    only (one finding for them all, or one each) together name every planted rank; the findings
    of those kinds naming other ranks are listed under ``other``, and every finding that found
    no situation under ``unmatched`` (kind, facet, ranks, claim)."""
    findings = doc.get("findings") or []
    out: dict[str, Any] = {}
    matched: set[int] = set()
    for name, planted in merge_plants(ranks).items():
        kinds = MERGE_FINDS[name]
        mine = [(i, f) for i, f in enumerate(findings)
                if any(f.get("kind") == k and (facet is None or f.get("facet") == facet) for k, facet in kinds)]
        hits = [(i, f) for i, f in mine if f.get("ranks") and set(f["ranks"]) <= set(planted)]
        found = bool(planted) and set().union(*(f["ranks"] for _, f in hits)) == set(planted)
        if found:
            matched.update(i for i, _ in hits)
        out[name] = {
            "planted": planted,
            "found": found,
            "claims": [f.get("claim") for _, f in hits] if found else [],
            "other": [{"ranks": _short_ranks(f.get("ranks")), "claim": f.get("claim")} for i, f in mine
                      if not found or (i, f) not in hits],
        }
    out["unmatched"] = [{"kind": f.get("kind"), "facet": f.get("facet"), "ranks": _short_ranks(f.get("ranks")),
                         "claim": f.get("claim")} for i, f in enumerate(findings) if i not in matched]
    return out


def _short_ranks(ranks: list[int] | None) -> str:
    """A rank list as ``a-b,c`` runs (a finding may name thousands)."""
    rs = sorted(set(ranks or []))
    runs: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        runs.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ",".join(runs) or "-"


def merge_growth(sizes: list[dict[str, Any]], tool: str) -> list[dict[str, Any]]:
    """Between each two consecutive measured sizes: the growth per rank of ``tool``'s wall
    time, CPU time (ms) and peak RSS (MB), each from the sizes' fastest runs."""
    ok = [s for s in sizes if s["runs"].get(tool, {}).get("ok")]
    out = []
    for a, b in itertools.pairwise(ok):
        ra, rb, dn = a["runs"][tool], b["runs"][tool], b["ranks"] - a["ranks"]
        out.append({"tool": tool, "from": a["ranks"], "to": b["ranks"],
                    "ms_per_rank": (rb["wall_s"] - ra["wall_s"]) * 1000 / dn,
                    "cpu_ms_per_rank": (rb["cpu_s"] - ra["cpu_s"]) * 1000 / dn,
                    "mb_per_rank": (rb["maxrss_mb"] - ra["maxrss_mb"]) / dn})
    return out


def merge_targets(sizes: list[dict[str, Any]], growth: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 46's targets, each with its value and met (None: not measured)."""
    out = []
    by = {s["ranks"]: s for s in sizes}
    for n, (wall, rss) in MERGE_TARGETS.items():
        for tool in MERGE_TOOLS:
            r = by.get(n, {}).get("runs", {}).get(tool, {})
            for what, value, limit in (("wall s", r.get("wall_s"), wall), ("peak RSS MB", r.get("maxrss_mb"), rss)):
                ok = r.get("ok")
                out.append({"what": f"{n} ranks {tool} {what}", "value": value if ok else None, "target": limit,
                            "met": (value <= limit) if ok else None})
    ms, mb = MERGE_GROWTH_TARGET
    for g in growth:
        for what, key, limit in (("ms/rank (wall)", "ms_per_rank", ms), ("MB/rank", "mb_per_rank", mb)):
            out.append({"what": f"{g['from']}->{g['to']} {g['tool']} {what}", "value": g[key], "target": limit,
                        "met": g[key] <= limit})
    return out


def git_head() -> str | None:
    """The checkout's commit (and ``+dirty`` when it has changes), for the JSON."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def bench_merge(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """``traceview summary RUN --no-cache`` (and with ``--json``) over each merge_<N> scenario:
    wall, CPU, peak RSS, the planted situations found (from the JSON), growth per rank."""
    sizes: list[dict[str, Any]] = []
    load_start = os.getloadavg()
    py = sys.executable
    for n in args.merge_sizes:
        s = SCENARIOS[f"merge_{n}"]
        t0 = time.perf_counter()
        path = prepare(s, args.traces, args.work)
        prepare_s = time.perf_counter() - t0
        mb = input_bytes(path) / MB
        warm_page_cache(path)
        runs: dict[str, dict[str, Any]] = {}
        best: dict[str, Run] = {}
        check: dict[str, Any] | None = None
        for _ in range(args.repeat):
            for tool, extra in MERGE_TOOLS.items():
                if tool in best and not best[tool].ok:
                    continue
                run = Run(s.name, tool, fill(SUMMARY_CMD, python=py, input=str(path)) + extra, mb, str(path))
                r = measure(run, args.work / "logs", args.timeout, {**env, "TRACEVIEW_CACHE_DIR": str(args.work / "cache" / s.name)},
                            rss_limit_mb=args.merge_rss_limit_mb)
                runs.setdefault(tool, {"attempts": []})["attempts"].append(
                    {"wall_s": r.wall_s, "cpu_s": r.cpu_s, "maxrss_mb": r.maxrss_mb, "tree_rss_mb": r.tree_rss_mb,
                     "ok": r.ok, "load": [round(x, 2) for x in os.getloadavg()]})
                print(f"[{s.name}] {status_line(r)}  ({load_text()})", file=sys.stderr)
                if tool == "summary-json" and r.ok and check is None:
                    doc = json.loads((args.work / "logs" / f"{s.name}.{tool}.stdout").read_bytes())
                    check = merge_check(doc, n)
                b = best.get(tool)
                if b is None or (r.ok and (not b.ok or (r.wall_s or 0) < (b.wall_s or 0))):
                    best[tool] = r
        for tool, r in best.items():
            runs[tool].update(ok=r.ok, wall_s=r.wall_s, cpu_s=r.cpu_s, maxrss_mb=r.maxrss_mb, tree_rss_mb=r.tree_rss_mb,
                              error=r.error, argv=r.argv)
        sizes.append({"ranks": n, "hosts": n // MERGE_HOST_RANKS, "exports_mb": mb, "prepare_s": prepare_s,
                      "runs": runs, "planted": check})
    growth = [g for tool in MERGE_TOOLS for g in merge_growth(sizes, tool)]
    return {
        "machine": {"platform": platform.platform(), "python": sys.version.split()[0], "cpus": os.cpu_count()},
        "commit": git_head(),
        "versions": export_versions(),
        "run": MERGE_RUN, "host_ranks": MERGE_HOST_RANKS,
        "commands": {tool: [*SUMMARY_CMD, *extra] for tool, extra in MERGE_TOOLS.items()},
        "units": {"MB": "10**6 bytes", "maxrss": "ru_maxrss of the child via os.wait4",
                  "growth": "(value at the larger size - value at the smaller) / ranks between, fastest runs"},
        "repeat": args.repeat,
        "load_start": load_start, "load_end": os.getloadavg(),
        "sizes": sizes, "growth": growth, "targets": merge_targets(sizes, growth),
    }


def print_merge(res: dict[str, Any]) -> None:
    """The merge bench's table, the planted situations, growth per rank and the targets."""
    print(f"summary over host exports of {res['run']} copies, {res['host_ranks']} ranks a host "
          f"(commit {res['commit']}; load {' '.join(f'{x:.2f}' for x in res['load_start'])} at the start, "
          f"{' '.join(f'{x:.2f}' for x in res['load_end'])} at the end)")
    rows = [("ranks", "hosts", "exports MB", "tool", "wall s", "cpu s", "peak RSS MB", "status")]
    for s in res["sizes"]:
        for tool, r in s["runs"].items():
            rows.append((f"{s['ranks']:,}", str(s["hosts"]), f"{s['exports_mb']:.0f}", tool, fmt(r.get("wall_s"), ".2f"),
                         fmt(r.get("cpu_s"), ".2f"), fmt(r.get("maxrss_mb"), ".0f"), "ok" if r.get("ok") else "FAILED"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        print("  ".join(c.ljust(w) if i in (3, 7) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))
    print("\nplanted situations (from summary --json's findings)")
    for s in res["sizes"]:
        check = s["planted"]
        if check is None:
            print(f"  {s['ranks']:>6,}: no JSON to check")
            continue
        for name in MERGE_FINDS:
            c = check[name]
            print(f"  {s['ranks']:>6,}  {name:<20} ranks {_short_ranks(c['planted']):<32} "
                  f"{'found' if c['found'] else 'NOT FOUND'}")
            for o in c["other"]:
                print(f"          also ({o['ranks']}): {o['claim'][:150]}")
        for u in check["unmatched"]:
            print(f"          other finding {u['kind']}/{u['facet']} ({u['ranks'][:40]}): {u['claim'][:110]}")
    if res["growth"]:
        print("\ngrowth per rank between sizes (target <= 0.5 ms and <= 0.05 MB a rank)")
        for g in res["growth"]:
            print(f"  {g['tool']:<13} {g['from']:>6,} -> {g['to']:>6,}: {g['ms_per_rank']:7.3f} ms/rank wall, "
                  f"{g['cpu_ms_per_rank']:7.3f} ms/rank CPU, {g['mb_per_rank']:7.4f} MB/rank")
    print("\ntargets")
    for t in res["targets"]:
        met = {True: "met", False: "MISSED", None: "not measured"}[t["met"]]
        print(f"  {t['what']:<42} {fmt(t['value'], '.3f'):>9}  <= {t['target']:g}  {met}")
    for s in res["sizes"]:
        for tool, r in s["runs"].items():
            if not r.get("ok"):
                print(f"\nFAILED {s['ranks']} {tool}: {r.get('error')}")


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--tlparse", default=DEFAULT_TLPARSE, help="tlparse binary")
    ap.add_argument("--tlhub-python", type=Path, default=TLHUB_PYTHON, help="python of a venv with tlhub 0.3.5")
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK, help="work dir for inputs/outputs")
    ap.add_argument("--traces", type=Path, default=TRACES, help="the shared traces dir (read only)")
    ap.add_argument(
        "--scenario",
        nargs="+",
        default=None,
        help=f"scenarios, or 'all' (default: {' '.join(n for n, s in SCENARIOS.items() if s.default)})",
    )
    ap.add_argument("--tools", nargs="+", default=None, choices=TOOLS, help="tools to run (default: all)")
    ap.add_argument("--repeat", type=int, default=None,
                    help=f"rounds of every tool once; the fastest of each is shown (default: 1, --issue40: {ISSUE40_REPEAT})")
    ap.add_argument("--issue40", action="store_true",
                    help=f"issue 40's check: scenario {ISSUE40_SCENARIO}, tools {' '.join(ISSUE40_TOOLS)}, "
                         f"--repeat {ISSUE40_REPEAT} unless given")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per command (0: none)")
    ap.add_argument(
        "--summary-cold-args",
        default=SUMMARY_COLD_ARGS,
        help="extra args for the cold summary run (default: %(default)s)",
    )
    ap.add_argument("--keep-outputs", action="store_true", help="keep tool output dirs")
    ap.add_argument("--build-only", action="store_true", help="only build the inputs")
    ap.add_argument("--json", type=Path, default=None, help="also write results as JSON here")
    ap.add_argument("--floor-worker", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--watch", action="store_true", help="measure `traceview watch` instead (see the docstring)")
    ap.add_argument("--merge", action="store_true",
                    help="measure `traceview summary RUN/` over the merge_<N> host exports instead (issue 46)")
    ap.add_argument("--merge-sizes", nargs="+", type=int, default=list(MERGE_SIZES), choices=MERGE_SIZES,
                    help="ranks of the merge scenarios to run (default: %(default)s)")
    ap.add_argument("--merge-rss-limit-mb", type=float, default=MERGE_RSS_LIMIT_MB,
                    help="kill a merge summary above this tree RSS (default: %(default)s)")
    ap.add_argument("--watch-parts", nargs="+", default=["latency", "idle", "append"], choices=("latency", "idle", "append"))
    ap.add_argument("--watch-compiles", type=int, default=30, help="compiles written per latency run (default: %(default)s)")
    ap.add_argument("--watch-idle-s", type=float, default=25.0, help="seconds of each idle window (default: %(default)s)")
    ap.add_argument("--watch-big-mb", type=float, default=1000.0, help="size of the big log grown by 1 MB (default: %(default)s)")
    ap.add_argument("--watch-append-cases", nargs="+", default=["new-ids", "same-ids"],
                    help="append cases to run (names or parts of them; default: %(default)s)")
    args = ap.parse_args(argv)
    if args.issue40:
        if args.scenario is not None or args.tools is not None:
            ap.error("--issue40 picks the scenario and the tools; leave out --scenario and --tools")
        args.scenario, args.tools = [ISSUE40_SCENARIO], list(ISSUE40_TOOLS)
    args.tools = args.tools or list(TOOLS)
    args.repeat = args.repeat if args.repeat is not None else ISSUE40_REPEAT if args.issue40 else 1
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    names = args.scenario or [n for n, s in SCENARIOS.items() if s.default]
    if "all" in names:
        names = list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s) {unknown}; choose from {list(SCENARIOS)} or 'all'")
    args.scenario = names
    args.work = args.work.resolve()
    if args.work == SHARED or SHARED in args.work.parents:
        ap.error("--work must not be under /work/shared")
    return args


def main(argv: list[str] | None = None) -> int:
    """Build the inputs, run the tools, print (and optionally save) the table."""
    args = parse_args(argv)
    if args.floor_worker is not None:
        print(json.dumps(bare_scan(args.floor_worker)))
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    # an installed package has its bytecode; a checkout run with PYTHONDONTWRITEBYTECODE=1
    # (set on some machines) would compile ~30 modules in every process (~80 ms each time)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "traceview"), str(REPO / "parsers")],
                   check=False, stdout=subprocess.DEVNULL)
    if args.merge:
        res = bench_merge(args, env)
        print_merge(res)
        if args.json is not None:
            args.json.write_text(json.dumps(res, indent=1) + "\n")
            print(f"\nwrote {args.json}")
        return 0
    if args.watch:
        res = bench_watch(args, env)
        print_watch(res)
        if args.json is not None:
            args.json.write_text(json.dumps(res, indent=1) + "\n")
            print(f"\nwrote {args.json}")
        return 0
    results: dict[str, list[Run]] = {}
    load_start = os.getloadavg()
    floor_mb = None if args.build_only else wrapper_floor_mb(args.work / "logs", env)
    for name in args.scenario:
        s = SCENARIOS[name]
        if args.build_only:
            path = prepare(s, args.traces, args.work)
            print(f"{name}: {path} ({input_bytes(path) / MB:.1f} MB)")
            continue
        results[name] = bench_scenario(s, args, env)
    if args.build_only:
        return 0
    load_end = os.getloadavg()
    print_table(results)
    print(f"\npeak RSS floor (wrapper running `true`): {fmt(floor_mb, '.1f')} MB")
    print_issue40(results, (load_start, load_end))
    if args.json is not None:
        doc = to_json(results, args)
        doc["wrapper_floor_mb"] = floor_mb
        doc["load_start"], doc["load_end"] = load_start, load_end
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
