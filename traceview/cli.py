"""The `traceview` command line.

Every user error is one line on stderr and exit code 2; an unexpected internal error is one
line too (exit 3) unless TRACEVIEW_DEBUG=1 asks for the traceback. Heavy imports (Textual) happen
only inside the command that needs them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from traceview import timing
from traceview.errors import EXIT_INTERRUPTED, EXIT_USAGE, debugging, error_line, is_user_error


def _add_input_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        nargs="+",
        help="TORCH_TRACE directory or file, TORCH_LOGS text log, or a directory of both; "
        "more files (trace or text logs) may follow",
    )
    p.add_argument("--latest", action="store_true", help="keep only the newest run when a directory holds several")
    p.add_argument("--logs", nargs="+", metavar="FILE", default=[], help="TORCH_LOGS text logs to merge with the trace")
    p.add_argument("--no-cache", action="store_true", help="parse again; neither read nor write the parse cache")
    p.add_argument("-j", "--jobs", type=int, default=None, help="parallel parse processes (default: one per 128 MB of input, up to the cores; export: all cores)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="traceview",
        description="Answers from torch.compile logs: TORCH_TRACE structured traces and TORCH_LOGS text.",
    )
    ap.add_argument("--version", action="version", version="traceview 0.1.0")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("summary", help="findings and per-rank overview on one screen (or --json)")
    _add_input_args(p)
    p.add_argument("--json", action="store_true", help="print the versioned JSON report")
    p.add_argument("--width", type=int, default=None, help="text width (default: terminal width, max 120)")

    p = sub.add_parser("export", help="write every table as parquet plus manifest.json")
    _add_input_args(p)
    p.add_argument("-o", "--output", required=True, help="output directory (created or replaced atomically)")
    p.add_argument(
        "--partition-by-rank",
        choices=["auto", "yes", "no"],
        default="auto",
        help="hive-partition tables by rank (auto: when there are several ranks)",
    )
    p.add_argument(
        "--shard", metavar="K/N", default=None,
        help="export only the K-th of N shares of the trace files (rank mod N; K from 0, as "
        "$SLURM_ARRAY_TASK_ID and $JOB_COMPLETION_INDEX count)",
    )

    p = sub.add_parser("open", help="browse the trace in a terminal UI")
    _add_input_args(p)
    p.add_argument("--against", metavar="A", help="open on the diff against run A (docs/tui.md); Enter jumps into either run")
    p.add_argument("--no-follow", action="store_true",
                   help="show the logs as they are now (by default new compiles, findings and ranks appear as the logs grow)")

    p = sub.add_parser("origin", help="kernel / node / seq_nr -> forward op -> user source line")
    _add_input_args(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--kernel", help="kernel name (e.g. triton_poi_fused_gelu_0)")
    g.add_argument("--node", help="graph node name (e.g. mul_3)")
    g.add_argument("--seq-nr", type=int, help="autograd sequence number")
    p.add_argument("--compile-id", help="restrict to one compile id (e.g. 1/0)")
    p.add_argument("--rank", type=int, help="restrict to one rank")
    p.add_argument("--json", action="store_true", help="print the chains as JSON")
    p.add_argument("--name-match", action="store_true",
                   help="for kernels nothing recorded ties to nodes, guess from the op names in the kernel's name (marked NOT EXACT)")

    p = sub.add_parser(
        "sql", help="SQL over the tables (polars' SQL engine, or DuckDB when installed): traceview sql PATH [PATH ...] \"SELECT ...\""
    )
    # the inputs `summary` takes (read by the same loading path), then the query
    _add_input_args(p)
    p.add_argument("query", help="the SQL query; every table (compiles, events, spans, ...) is a view of its name")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output (json: a list of row objects)")
    p.add_argument("--engine", choices=["duckdb", "polars"], default=None,
                   help="the SQL engine (default: DuckDB when it is installed, else polars' own, always there)")

    p = sub.add_parser("report", help="the summary as one self-contained HTML page: findings, pictures, every compile")
    _add_input_args(p)
    p.add_argument("-o", "--output", required=True, help="HTML file to write (replaced atomically)")

    p = sub.add_parser("watch", help="follow a running job's logs: each compile, recompile, graph break and failure as it lands")
    p.add_argument("path", nargs="+", help="TORCH_TRACE directory (it may be empty or not exist yet) and/or TORCH_LOGS text logs")
    p.add_argument("--logs", nargs="+", metavar="FILE", default=[], help="TORCH_LOGS text logs to follow beside the trace")
    p.add_argument("--json", action="store_true", help="one JSON object per line (a digest first, then one per event)")
    p.add_argument("--poll", action="store_true", help="poll the files instead of file-system events (automatic on NFS, Lustre, GPFS, CIFS, sshfs)")

    p = sub.add_parser("timeline", help="compile phases of every rank as a Chrome Trace (Perfetto, chrome://tracing)")
    _add_input_args(p)
    p.add_argument("-o", "--output", required=True, help="JSON file to write (replaced atomically)")

    p = sub.add_parser("diff", help="what changed between two runs (or two ranks); --fail-on makes it a CI gate")
    p.add_argument("a", metavar="A", help="the baseline: trace directory or file, text log, or export")
    p.add_argument("b", metavar="B", help="the run compared with it")
    p.add_argument("--json", action="store_true", help="print the diff as JSON (docs/diff.md)")
    p.add_argument("--rank", type=int, help="compare this rank of A (with the same rank of B unless --against-rank)")
    p.add_argument("--against-rank", type=int, metavar="R2", help="the rank of B to compare with A's --rank")
    p.add_argument(
        "--fail-on",
        metavar="RULES",
        help="exit 1 when a rule is violated: new-graph-breaks,new-recompiles,new-failures,new-eager-frames,compile-time:+N%%",
    )
    p.add_argument("--noise-pct", type=float, default=10.0, help="compile-time changes below this percentage are noise (default 10)")
    p.add_argument("--noise-s", type=float, default=0.2, help="compile-time changes below these seconds are noise (default 0.2)")
    p.add_argument("--latest", action="store_true", help="keep only the newest run of a directory that holds several")
    p.add_argument("--no-cache", action="store_true", help="parse again; neither read nor write the parse cache")
    p.add_argument("-j", "--jobs", type=int, default=None, help="parallel parse processes (default: one per 128 MB of input, up to the cores; export: all cores)")
    p.add_argument("--width", type=int, default=None, help="text width (default: terminal width, max 120)")

    p = sub.add_parser("run", help="run a command with TORCH_TRACE and TORCH_LOGS set, then summarise")
    p.add_argument("-o", "--output", help="directory for the trace and logs (default: ./traceview-run-<time>)")
    p.add_argument("--open", action="store_true", help="open the UI afterwards instead of printing the summary")
    p.add_argument("--logs", dest="torch_logs", default=None, help="TORCH_LOGS value (default: a useful set)")
    p.add_argument("--html", metavar="FILE", help="also write the page of the captured trace (as `traceview report`) to FILE")
    p.add_argument("--no-watch", action="store_true", help="print nothing of ours while the command runs (by default each compile, recompile, graph break and failure, as `traceview watch`)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- command and its arguments")

    p = sub.add_parser("ablate", help="run a program once per backend/mode/dynamic rung; say which component fails")
    p.add_argument("-o", "--output", help="directory for the rungs' traces and logs (default: ./traceview-ablate-<time>)")
    p.add_argument("--rungs", help="exactly these rungs instead of the default ladder and its follow-ups (see docs/ablate-and-repro.md)")
    p.add_argument("--json", action="store_true", help="print the ablation report as JSON")
    p.add_argument("--minify", action="store_true", help="rerun the first failing rung with the minifier on")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="time limit per rung in seconds (default 1800; 0: none)")
    p.add_argument("--compare-output", action="store_true", help="compare each rung's stdout with eager's (numbers within --rtol)")
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance of --compare-output (default 1e-3)")
    p.add_argument("--warm-cache", action="store_true", help="use the environment's Inductor cache instead of a fresh one")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- python script.py ARGS (or -m module ARGS)")

    p = sub.add_parser("repro", help="write a self-contained script that reproduces one compile")
    _add_input_args(p)
    p.add_argument("--compile-id", required=True, help="compile id, e.g. 0/1")
    p.add_argument("--rank", type=int, help="rank, when several ranks have that compile id")
    p.add_argument("-o", "--output", help="script to write (default: print it)")
    p.add_argument("--backend", help="backend for a graph whose own backend is not in the log (e.g. eager)")
    p.add_argument("--graph", choices=["forward", "backward"], help="which Inductor graph of a training compile (default: the failing one, else forward)")

    p = sub.add_parser("cache", help="the parse cache")
    p.add_argument("action", choices=["clear", "info"])
    return ap


def _options(args: argparse.Namespace, *, heavy: bool = False, digests: bool = False):  # -> traceview.ingest.loading.LoadOptions
    from traceview.ingest.loading import LoadOptions

    return LoadOptions.of(
        args.path, logs=getattr(args, "logs", ()), latest=args.latest, jobs=args.jobs, use_cache=not args.no_cache,
        heavy=heavy, prestart=True, digests=digests,
    )


def _load(args: argparse.Namespace, *, heavy: bool = False):  # -> Trace
    from traceview.ingest.loading import load_trace

    return load_trace(_options(args, heavy=heavy))


def cmd_summary(args: argparse.Namespace) -> int:
    return summarise(_options(args, digests=True), as_json=args.json, width=args.width)


def summarise(opts, *, as_json: bool = False, width: int | None = None) -> int:  # opts: LoadOptions
    """Load and print the summary (text or JSON); `traceview summary` and `traceview run`.
    A second summary of unchanged inputs reads the cached findings document (traceview.ingest.
    cache) and renders it: no tables are loaded, no analyzer runs."""
    import orjson

    from traceview.output.findings_document import findings_document

    data, _ = findings_document(opts)
    if as_json:
        sys.stdout.buffer.write(data if data.endswith(b"\n") else data + b"\n")
        return 0
    from traceview.output.summary import render_text

    width = width or min(max(_term_width(), 60), 120)
    sys.stdout.write(render_text(orjson.loads(data), width=width))
    return 0


def _term_width() -> int:
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except OSError:
        return 80


def cmd_export(args: argparse.Namespace) -> int:
    import dataclasses

    from traceview.ingest.loading import load_trace
    from traceview.ingest.shard import parse_shard

    opts = _options(args, heavy=True)
    if args.shard is not None:
        opts = dataclasses.replace(opts, shard=parse_shard(args.shard))
    trace = load_trace(opts)
    from traceview.output.export import write_export
    from traceview.trace import TABLES

    part = {"auto": None, "yes": True, "no": False}[args.partition_by_rank]
    out = write_export(trace, args.output, partition_by_rank=part)
    n = int(trace.stats["envelopes"].fill_null(0).sum()) if "envelopes" in trace.stats.columns else 0
    sys.stderr.write(f"traceview: wrote {len(TABLES)} tables ({n} events) to {out}\n")
    return 0


def cmd_open(args: argparse.Namespace) -> int:
    if args.against:
        from traceview.ingest.loading import LoadOptions
        from traceview.tui.diff_view import run_against

        against = LoadOptions.of(args.against, latest=args.latest, jobs=args.jobs, use_cache=not args.no_cache, prestart=True)
        return run_against(_options(args), against)
    from traceview.tui import run_app

    return run_app(_options(args), follow=not args.no_follow)


def cmd_origin(args: argparse.Namespace) -> int:
    import dataclasses

    from traceview.analyze.origin import origin
    from traceview.output.summary import render_origin

    trace = _load(args)
    chains = origin(
        trace, kernel=args.kernel, node=args.node, seq_nr=args.seq_nr, compile_id=args.compile_id, rank=args.rank,
        name_match=args.name_match,
    )
    if args.json:
        import orjson

        rows = [{**dataclasses.asdict(c), "location": c.location} for c in chains]
        sys.stdout.buffer.write(orjson.dumps({"matches": len(rows), "chains": rows}, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        sys.stdout.write(render_origin(chains))
    return 0 if chains else 1


def cmd_sql(args: argparse.Namespace) -> int:
    from traceview.output.sql import check_available, render, run_query

    engine = check_available(args.engine)  # before the parse: a missing DuckDB is said at once
    result = run_query(_load(args), args.query, engine=engine)
    sys.stdout.write(render(result, args.format))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    import orjson

    from traceview.output.findings_document import findings_document

    opts = _options(args, digests=True)
    data, trace = findings_document(opts)  # the findings as summary judged them (cached when unchanged)
    if trace is None:  # the pictures and every compile's detail need the tables
        from traceview.ingest.loading import load_trace

        trace = load_trace(opts)
    from traceview.output.page import write_page

    path, size = write_page(trace, args.output, report=orjson.loads(data))
    sys.stderr.write(f"traceview: wrote {path} ({size / 1e6:.1f} MB; open it in a browser)\n")
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    trace = _load(args)
    from traceview.output.timeline import write_timeline

    path, n = write_timeline(trace, args.output)
    sys.stderr.write(f"traceview: wrote {n} events of {len(trace.ranks) or 1} processes to {path} (open it in ui.perfetto.dev)\n")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from traceview.ingest.loading import LoadOptions, load_trace

    def load(path: str):  # -> Trace
        return load_trace(
            LoadOptions.of(path, latest=args.latest, jobs=args.jobs, use_cache=not args.no_cache, prestart=True, digests=True)
        )

    a, b = load(args.a), load(args.b)
    from traceview.analyze.diff import Noise
    from traceview.workflow.diff import report_diff

    return report_diff(
        a, b, names=(args.a, args.b), rank=args.rank, against_rank=args.against_rank,
        noise=Noise(pct=args.noise_pct, seconds=args.noise_s), fail_on=args.fail_on, as_json=args.json,
        width=args.width or min(max(_term_width(), 60), 120),
    )


def cmd_watch(args: argparse.Namespace) -> int:
    from traceview.live.watch import watch

    return watch(list(args.path), extra_logs=list(args.logs), json_lines=args.json, poll=args.poll)


def cmd_run(args: argparse.Namespace) -> int:
    from traceview.ingest.loading import LoadOptions
    from traceview.workflow.capture import run_capture, write_capture_page

    captured = run_capture(args.cmd, output=args.output, torch_logs=args.torch_logs, live=not args.no_watch)
    if not captured.logged_anything:
        if args.html:
            sys.stderr.write(f"traceview: no page written to {args.html}: nothing was logged\n")
        return captured.returncode
    if args.html:  # first: the UI (--open) holds the terminal until it is closed
        try:
            path, size = write_capture_page(captured, args.html)
            sys.stderr.write(f"traceview: wrote {path} ({size / 1e6:.1f} MB; open it in a browser)\n")
        except Exception as exc:  # the command's exit code matters more than our page
            sys.stderr.write(f"traceview: could not write the page {args.html}: {exc}\n")
    opts = LoadOptions.of(captured.directory, prestart=True)
    try:
        if args.open:
            from traceview.tui import run_app

            run_app(opts)
        else:
            summarise(opts)
    except Exception as exc:  # the command's exit code matters more than our summary
        sys.stderr.write(f"traceview: could not summarise {captured.directory}: {exc}\n")
    return captured.returncode


def cmd_ablate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from traceview.workflow import ablate

    options = ablate.AblationOptions(
        out_dir=Path(args.output) if args.output else None,
        rungs=ablate.parse_rungs(args.rungs) if args.rungs else None,
        timeout_s=ablate.DEFAULT_TIMEOUT_S if args.timeout is None else (args.timeout or None),
        compare_output=args.compare_output,
        rtol=args.rtol,
        minify=args.minify,
        warm_cache=args.warm_cache,
    )
    report = ablate.run_ablation(args.cmd, options)
    if args.json:
        import orjson

        sys.stdout.buffer.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        sys.stdout.write(ablate.render_ablation(report, width=min(max(_term_width(), 60), 120)))
    return ablate.exit_code(report)


def cmd_repro(args: argparse.Namespace) -> int:
    trace = _load(args)
    from traceview.workflow.repro import build_repro, write_repro

    repro = build_repro(trace, args.compile_id, rank=args.rank, backend=args.backend, graph=args.graph)
    if not args.output:
        sys.stdout.write(repro.text)
        return 0
    sys.stderr.write(f"traceview: wrote {write_repro(repro, args.output)} ({repro.summary})\n")
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from traceview.ingest.cache import cache_dir, clear_cache

    if args.action == "clear":
        n = clear_cache()
        sys.stderr.write(f"traceview: removed {n} cached traces from {cache_dir()}\n")
    else:
        sys.stdout.write(f"{cache_dir()}\n")
    return 0


COMMANDS = {
    "summary": cmd_summary,
    "export": cmd_export,
    "open": cmd_open,
    "origin": cmd_origin,
    "sql": cmd_sql,
    "report": cmd_report,
    "watch": cmd_watch,
    "timeline": cmd_timeline,
    "diff": cmd_diff,
    "run": cmd_run,
    "ablate": cmd_ablate,
    "repro": cmd_repro,
    "cache": cmd_cache,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    ap = build_parser()
    args = ap.parse_args(argv)
    if not args.command:
        ap.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        sys.stderr.write("traceview: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except Exception as exc:
        if debugging() and not is_user_error(exc) and not isinstance(exc, MemoryError):
            raise
        code, line = error_line(exc)
        sys.stderr.write(line + "\n")
        return code
    except BaseException as exc:  # a Rust panic inside polars (pyo3's PanicException is no Exception)
        if type(exc).__name__ != "PanicException" or debugging():
            raise
        code, line = error_line(exc)
        sys.stderr.write(line + "\n")
        return code


def _exit_on_termination() -> None:
    """SIGTERM and SIGHUP (a job killed, a terminal closed) unwind like Ctrl-C: what is being
    written is removed (an export's temporary directory), not left behind."""
    import signal

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


def entry() -> None:
    """Console-script entry point."""
    timing.mark("start")
    _exit_on_termination()
    code = main()
    t = timing.now()
    # Leave without the interpreter's teardown, which takes ~0.15 s once polars and the
    # parse's memory maps are loaded: run the exit handlers (temporary parse directories,
    # idle workers), flush, exit.
    import atexit

    atexit._run_exitfuncs()
    timing.mark("exit handlers", t)
    timing.mark_peak_rss()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, OSError):
        pass
    os._exit(code)
