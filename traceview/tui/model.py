"""What the views show, computed once per trace off the UI thread.

`TraceModel` wraps a `Trace` and the findings of `build_report` and prepares the few small
frames the views slice from (the merged raw-record index, the graph/kernel list). Nothing
here imports Textual; every table stays a polars DataFrame and the views slice it lazily.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import polars as pl

from parsers.compile_ids import epoch_expr, frame_group, label_expr, occurrence_at, sort_exprs
from parsers.compile_ids import parse as parse_compile_id
from parsers.facts import user_name
from parsers.sources import prefer_trace
from traceview.analyze.compile_time import CACHE_COLUMNS, cache_counts
from traceview.printable import one_line
from traceview.trace import Trace
from traceview.tui.finding_rows import Finding, findings_from_report

OUTCOME_WORDS = {"eager": "fell back to eager"}

CompileKey = tuple[int | None, str]  # (rank, compile_id)


# ------------------------------------------------------------------------- raw records
def record_index(trace: Trace) -> pl.DataFrame:
    """Every trace envelope and text-log record, one row each, small columns only.

    `row` indexes `trace.events` (src "trace") or `trace.log_records` (src "text"); the
    payload is fetched from there only for the selected row.
    """
    ev = trace.index_events()  # the same rows as `events`, without reading the payloads
    recs = trace.log_records
    parts = []
    if ev.height:
        parts.append(
            ev.select(
                pl.lit("trace").alias("src"),
                pl.col("file").cast(pl.String),
                "lineno",
                "end_lineno",
                pl.col("rank").cast(pl.Int32),
                pl.col("compile_id").cast(pl.String),
                pl.col("trace_id").cast(pl.String),
                pl.when(pl.col("name").is_not_null())
                .then(pl.concat_str(pl.col("kind"), pl.lit(":"), pl.col("name")))
                .otherwise(pl.col("kind"))
                .cast(pl.String)
                .alias("kind"),
                pl.col("metadata").cast(pl.String).str.slice(0, 240).alias("summary"),
                pl.int_range(pl.len(), dtype=pl.Int64).alias("row"),
            )
        )
    if recs.height:
        parts.append(
            recs.select(
                pl.lit("text").alias("src"),
                pl.col("file").cast(pl.String),
                "lineno",
                "end_lineno",
                pl.col("rank").cast(pl.Int32),
                pl.col("compile_id").cast(pl.String),
                pl.col("trace_id").cast(pl.String),
                pl.concat_str(pl.lit("log:"), pl.col("artifact").fill_null("other")).cast(pl.String).alias("kind"),
                pl.col("text").cast(pl.String).str.slice(0, 240).str.split("\n").list.first().alias("summary"),
                pl.int_range(pl.len(), dtype=pl.Int64).alias("row"),
            )
        )
    if ev.height:
        parts[0] = _chromium_names(trace, parts[0])
    if not parts:
        return pl.DataFrame(
            schema={
                "src": pl.String, "file": pl.String, "lineno": pl.Int64, "end_lineno": pl.Int64,
                "rank": pl.Int32, "compile_id": pl.String, "trace_id": pl.String, "kind": pl.String,
                "summary": pl.String, "row": pl.Int64,
            }
        )
    df = pl.concat(parts, how="vertical_relaxed")
    return df.with_columns(pl.col("summary").str.replace_all(r"[\n\t]+", " ").fill_null(""))


def _chromium_names(trace: Trace, ev: pl.DataFrame) -> pl.DataFrame:
    """Chromium events show their event name and phase (their metadata is `{}`): from
    trace.spans, whose begin (B) and end (E) events are the envelopes at lineno/end_lineno."""
    try:
        sp = trace.spans
    except Exception:  # no spans table: the metadata stays
        return ev
    if sp.height == 0:
        return ev
    f = pl.col("file").cast(pl.String)
    names = pl.concat([
        sp.select(f, pl.col("lineno").cast(pl.Int64), pl.concat_str(pl.col("name"), pl.lit("  (begin, ph "), pl.col("ph"), pl.lit(")")).alias("_name")),
        sp.filter(pl.col("end_lineno").is_not_null()).select(
            f, pl.col("end_lineno").cast(pl.Int64).alias("lineno"), pl.concat_str(pl.col("name"), pl.lit("  (end, ph E)")).alias("_name")
        ),
    ]).unique(["file", "lineno"], keep="first")
    joined = ev.join(names, on=["file", "lineno"], how="left", maintain_order="left")
    chrome = pl.col("kind").str.starts_with("chromium_event") & pl.col("_name").is_not_null()
    return joined.with_columns(pl.when(chrome).then(pl.col("_name")).otherwise(pl.col("summary")).alias("summary")).drop("_name")


def _pretty_json(text: str) -> str:
    """A one-line JSON payload indented for reading (left as it is when it is already on
    several lines, not JSON, or huge)."""
    t = text.strip()
    if t[:1] not in ("{", "[") or "\n" in t or len(text) > 2_000_000:
        return text
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONDecodeError:
        return text


def event_row(key: str) -> int:
    """The row of `trace.index_events()` a code_index key `event#N` names."""
    return int(key.removeprefix("event#"))


def _event(trace: Trace, row: int) -> pl.DataFrame:
    """Row `row` of the trace's events with its payload: read from its log file when the
    index has the offsets, else from the events (a trace read from an export holds no offsets
    into a log)."""
    index = None if trace.is_loaded("events") else trace.index_events()
    if index is None or "payload_start" not in index.columns:
        return trace.events.slice(row, 1)
    from parsers.torch_trace import hydrate

    return hydrate(index.slice(row, 1))[0]


def _event_payload(trace: Trace, row: int) -> str:
    """The payload of row `row` of `trace.index_events()`."""
    one = _event(trace, row)
    return (one["payload"][0] or "") if one.height else ""


def record_payload(trace: Trace, src: str, row: int) -> str:
    """The full record behind a row of `record_index`: header, metadata and payload."""
    if src == "trace":
        r = _event(trace, row).to_dicts()[0]
        head = f"{r['file']}:{r['lineno']}-{r['end_lineno']}  {r['kind']}"
        if r.get("name"):
            head += f" {r['name']}"
        if r.get("trace_id"):
            head += f"  {r['trace_id']}"
        if r.get("rank") is not None:
            head += f"  rank {r['rank']}"
        lines = [head]
        meta = r.get("metadata")
        if meta:
            try:
                meta = orjson.dumps(orjson.loads(meta), option=orjson.OPT_INDENT_2).decode()
            except orjson.JSONDecodeError:
                pass
            lines += ["", "metadata:", meta]
        if r.get("extra"):
            lines += ["", "envelope:", r["extra"]]
        if r.get("payload") is not None:
            ok = {True: "md5 ok", False: "md5 MISMATCH", None: ""}[r.get("payload_ok")]
            lines += ["", f"payload ({ok}):" if ok else "payload:", _pretty_json(r["payload"])]
        return "\n".join(lines)
    r = trace.log_records.slice(row, 1).to_dicts()[0]
    head = f"{r['file']}:{r['lineno']}-{r['end_lineno']}  log {r.get('artifact') or ''}"
    if r.get("trace_id"):
        head += f"  {r['trace_id']}"
    if r.get("rank") is not None:
        head += f"  rank {r['rank']}"
    return head + "\n\n" + (r.get("text") or "")


def user_code_traceback(text: str) -> list[str]:
    """The "User code traceback:" block of a graph-break reason (Dynamo's own frames of the
    user's code, last call last), without the internal traceback that may follow."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "User code traceback:")
    except StopIteration:
        return []
    out: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("Traceback (most recent call last)") or (line.strip() and not line.startswith(" ")):
            break
        out.append(line.rstrip())
    while out and not out[-1].strip():
        out.pop()
    return out


# ------------------------------------------------------------------ graphs and kernels
_CODE_SCHEMA = {
    "what": pl.String, "kind": pl.String, "label": pl.String, "name": pl.String, "rank": pl.Int32,
    "compile_id": pl.String, "occurrence": pl.Int32, "trace_id": pl.String, "graph": pl.String, "src": pl.String,
    "lines": pl.Int64, "key": pl.String, "lineno": pl.Int64, "part": pl.String,
}
# Inductor's whole files, from the trace's envelopes (read when selected): its output code
# (kind inductor_output_code) and torch's own repro of its input graph (fx_graph_runnable)
_WHOLE_FILES = {"inductor_output_code": "output code", "fx_graph_runnable": "fx runnable"}


def _part(graph: pl.Expr) -> pl.Expr:
    """forward / backward / inference from an AOT graph id ("0_forward"), else null."""
    return graph.str.extract(r"_(forward|backward|inference)$", 1)


def _whole_files(trace: Trace, graphs: pl.DataFrame) -> pl.DataFrame | None:
    """Inductor's output code and fx_graph_runnable files of the trace, one row each (key: the
    row of `trace.index_events()` as `event#N`, whose payload is read when shown), each tagged with its AOT
    graph (forward/backward) by the post-grad graph beside it: Inductor logs a graph's
    fx_graph_runnable before its post-grad graph and its output code after
    (torch/_inductor/compile_fx.py, codecache.py on a cache hit)."""
    ev = trace.index_events()
    if ev.height == 0:
        return None
    idx = ev.select("file", "lineno", "end_lineno", "rank", "compile_id", "trace_id", "kind", "name").with_row_index("_row")
    hit = idx.filter(
        (pl.col("kind") == "inductor_output_code") | ((pl.col("kind") == "artifact") & (pl.col("name") == "fx_graph_runnable"))
    )
    if hit.height == 0:
        return None
    hit = hit.with_columns(occurrence_at(hit, ev).alias("occurrence"))
    which = pl.when(pl.col("kind") == "artifact").then(pl.col("name")).otherwise(pl.col("kind")).cast(pl.String)
    rows = hit.select(
        pl.lit("output").alias("what"),
        which.alias("kind"),
        which.replace_strict(_WHOLE_FILES, default="?").alias("label"),
        which.alias("name"),
        pl.col("rank").cast(pl.Int32),
        pl.col("compile_id").cast(pl.String),
        pl.col("occurrence").cast(pl.Int32),
        pl.col("trace_id").cast(pl.String),
        pl.lit("trace").alias("src"),
        (pl.col("end_lineno") - pl.col("lineno")).clip(lower_bound=1).cast(pl.Int64).alias("lines"),
        pl.concat_str(pl.lit("event#"), pl.col("_row").cast(pl.String)).alias("key"),
        pl.col("lineno").cast(pl.Int64),
        pl.col("file").cast(pl.String),
    )
    if graphs.height and "aot_id" in graphs.columns:
        aot = (
            graphs.filter(pl.col("aot_id").is_not_null() & (pl.col("source") == "trace")
                          & pl.col("kind").is_in(["post_grad_before", "post_grad"]))
            .select(pl.col("file").cast(pl.String), pl.col("compile_id").cast(pl.String),
                    pl.col("lineno").cast(pl.Int64).alias("_at"), pl.col("aot_id").cast(pl.String).alias("graph"))
            .sort("_at")
        )
        tagged = []
        for kind, strategy in (("fx_graph_runnable", "forward"), ("inductor_output_code", "backward")):
            part = rows.filter(pl.col("kind") == kind).sort("lineno")
            tagged.append(part.join_asof(
                aot, left_on="lineno", right_on="_at", by=["file", "compile_id"], strategy=strategy, check_sortedness=False,
            ).drop("_at"))
        rows = pl.concat(tagged, how="vertical_relaxed")
    else:
        rows = rows.with_columns(pl.lit(None, pl.String).alias("graph"))
    return rows.drop("file").with_columns(_part(pl.col("graph")).alias("part"))


# a TORCH_COMPILE_DEBUG graph folder's whole files (parsers.debugdir: log records)
_DEBUG_WHOLE_FILES = {"debug_output_code": ("inductor_output_code", "output code"),
                      "debug_fx_graph_runnable": ("fx_graph_runnable", "fx runnable")}


def _debug_whole_files(trace: Trace) -> pl.DataFrame | None:
    """The output_code.py and fx_graph_runnable.py of each TORCH_COMPILE_DEBUG graph folder
    read, one row each (key: `record#N`, the row of `trace.log_records`), tagged with the
    folder's AOT graph."""
    lr = trace.log_records
    if lr.height == 0:
        return None
    hit = lr.with_row_index("_row").filter(pl.col("artifact").is_in(list(_DEBUG_WHOLE_FILES)))
    if hit.height == 0:
        return None
    kind = pl.col("artifact").replace_strict({k: v[0] for k, v in _DEBUG_WHOLE_FILES.items()}, default=None)
    graph = pl.col("file").str.extract(r"[/\\]\w+?__(\d+_(?:forward|backward|inference))_\d+(?:\.\d+)?[/\\][^/\\]+$")
    return hit.select(
        pl.lit("output").alias("what"),
        kind.alias("kind"),
        pl.col("artifact").replace_strict({k: v[1] for k, v in _DEBUG_WHOLE_FILES.items()}, default="?").alias("label"),
        kind.alias("name"),
        pl.col("rank").cast(pl.Int32),
        pl.col("compile_id").cast(pl.String),
        pl.lit(None, dtype=pl.Int32).alias("occurrence"),
        pl.col("trace_id").cast(pl.String),
        pl.lit("text").alias("src"),
        pl.col("lines").cast(pl.Int64),
        pl.concat_str(pl.lit("record#"), pl.col("_row").cast(pl.String)).alias("key"),
        pl.col("lineno").cast(pl.Int64),
        graph.alias("graph"),
    ).with_columns(_part(pl.col("graph")).alias("part"))


def code_index(trace: Trace, skip: frozenset[str] | set[str] = frozenset()) -> pl.DataFrame:
    """Graphs (trace.graphs) and kernels (trace.kernels) in one list, text left behind.

    In log order per compile; a graph or kernel seen both in the trace and in the text log is
    listed once (from the trace). Tables named in `skip` (not available) are left out."""
    parts = []
    g = trace.graphs if "graphs" not in skip else pl.DataFrame()
    if g.height:
        parts.append(
            g.select(
                pl.lit("graph").alias("what"),
                pl.col("kind").cast(pl.String),
                pl.col("kind").cast(pl.String).alias("label"),
                pl.coalesce(pl.col("label"), pl.col("name")).cast(pl.String).alias("name"),
                pl.col("rank").cast(pl.Int32),
                pl.col("compile_id").cast(pl.String),
                pl.col("occurrence").cast(pl.Int32),
                pl.col("trace_id").cast(pl.String),
                pl.col("aot_id").cast(pl.String).alias("graph"),
                pl.col("source").cast(pl.String).alias("src"),
                (pl.col("text").str.count_matches("\n") + 1).fill_null(0).cast(pl.Int64).alias("lines"),
                pl.col("graph_id").cast(pl.String).alias("key"),
                pl.col("lineno").cast(pl.Int64),
                _part(pl.col("aot_id").cast(pl.String)).alias("part"),
                pl.concat_str(pl.col("kind"), pl.lit("|"), pl.col("aot_id").fill_null("")).alias("_dedupe"),
            )
        )
    k = trace.kernels if "kernels" not in skip else pl.DataFrame()
    if k.height:
        parts.append(
            k.select(
                pl.lit("kernel").alias("what"),
                pl.col("kind").cast(pl.String),
                pl.concat_str(pl.col("kind").fill_null("?"), pl.lit(" kernel")).alias("label"),
                pl.col("name").cast(pl.String),
                pl.col("rank").cast(pl.Int32),
                pl.col("compile_id").cast(pl.String),
                pl.col("occurrence").cast(pl.Int32),
                pl.col("trace_id").cast(pl.String),
                pl.col("graph").cast(pl.String),
                pl.col("source").cast(pl.String).alias("src"),
                (pl.col("code").str.count_matches("\n") + 1).fill_null(0).cast(pl.Int64).alias("lines"),
                pl.col("kernel_id").cast(pl.String).alias("key"),
                pl.col("lineno").cast(pl.Int64),
                _part(pl.col("graph").cast(pl.String)).alias("part"),
                pl.concat_str(
                    pl.col("kind").fill_null(""), pl.lit("|"), pl.col("name").fill_null(""), pl.lit("|"),
                    pl.col("graph").fill_null(""),
                ).alias("_dedupe"),
            )
        )
    whole = _whole_files(trace, g) if "events" not in skip else None
    for w in (whole, _debug_whole_files(trace)):
        if w is not None:
            parts.append(w.with_columns(
                pl.concat_str(pl.col("key"), pl.lit("|output")).alias("_dedupe")
            ).select(parts[0].columns if parts else [*_CODE_SCHEMA, "_dedupe"]))
    if not parts:
        return pl.DataFrame(schema={**_CODE_SCHEMA, "shown_id": pl.String})
    df = pl.concat(parts, how="vertical_relaxed")
    df = prefer_trace(pl.concat(parts, how="vertical_relaxed").rename({"src": "source"}), ["rank", "compile_id", "what", "_dedupe"])
    df = df.rename({"source": "src"}).drop("_dedupe")
    # per rank, in compile-id order; the trace's rows before the text log's, then log order
    order = df.with_columns((pl.col("src") != "trace").alias("_t"))
    keys = sort_exprs("compile_id")
    order = order.with_columns(label_expr().alias("shown_id"))  # "0/0 #2": the compile after a reset
    return order.sort(["rank", *keys, "_t", "lineno"], nulls_last=False, maintain_order=True).drop("_t")


def code_text(trace: Trace, what: str, key: str) -> str:
    """The text of a row of `code_index`: a graph, a kernel, or a whole Inductor file."""
    if what == "output" and key.startswith("record#"):  # a TORCH_COMPILE_DEBUG folder's file
        return trace.log_records["text"][int(key.removeprefix("record#"))] or ""
    if what == "output":
        return _event_payload(trace, event_row(key))
    if what == "graph":
        hit = trace.graphs.filter(pl.col("graph_id") == key).select("text")
    else:
        hit = trace.kernels.filter(pl.col("kernel_id") == key).select("code")
    return (hit.item(0, 0) or "") if hit.height else ""


# ------------------------------------------------------------------------------ guards
_TENSOR_KINDS = {"size", "stride", "dtype", "device", "requires_grad", "ndim"}


def _rank_is(rank: int | None) -> pl.Expr:
    return pl.col("rank").is_null() if rank is None else pl.col("rank") == rank


def occurrence_is(occurrence: int | None) -> pl.Expr:
    """Rows of one compile among those with its id (after a torch._dynamo.reset() an id names
    several): every row when `occurrence` is None."""
    return pl.lit(True) if occurrence is None else pl.col("occurrence").fill_null(1) == occurrence


def guards_of(trace: Trace, rank: int | None, compile_id: str, occurrence: int | None = None) -> pl.DataFrame:
    g = trace.guards.filter(_rank_is(rank) & (pl.col("compile_id") == compile_id) & occurrence_is(occurrence))
    return prefer_trace(g, ["rank", "compile_id"]).with_row_index("i")


def failures_of(trace: Trace, rank: int | None, compile_id: str, occurrence: int | None = None) -> pl.DataFrame:
    """Recompile reasons of `compile_id` (its `occurrence`-th compile; None: every one): the
    guards of earlier compiles that failed."""
    r = trace.recompiles.filter(_rank_is(rank) & (pl.col("compile_id") == compile_id))
    return prefer_trace(r, ["rank", "compile_id"]).filter(occurrence_is(occurrence)).sort("reason_index")


def failed_guard_rows(guards: pl.DataFrame, failures: pl.DataFrame, against: str) -> set[int]:
    """Rows (`i`) of `guards` (the guards of compile `against`) that the recompile reasons say failed."""
    out: set[int] = set()
    if guards.height == 0 or failures.height == 0:
        return out
    fails = failures.filter(pl.col("failed_against") == against) if "failed_against" in failures.columns else failures
    for f in fails.iter_rows(named=True):
        src = user_name(f.get("guard_source"))
        if not src:
            continue
        cand = guards.filter(
            pl.col("guard_source").map_elements(user_name, return_dtype=pl.String) == src
        )
        if cand.height == 0:
            continue
        kind = (f.get("kind") or "").split(":")[0]
        if kind in _TENSOR_KINDS:
            best = cand.filter(pl.col("kind") == "TENSOR_MATCH")
        else:
            best = cand.filter(~pl.col("kind").is_in(["TENSOR_MATCH", "DIMENSION_DYNAMIC_MARKING_GUARD"]))
            if kind.startswith("type"):
                best = best.filter(pl.col("kind").str.contains("TYPE")) if best.height else best
            elif kind.startswith("value"):
                nid = best.filter(~pl.col("kind").is_in(["ID_MATCH", "TYPE_MATCH"]))
                best = nid if nid.height else best
        out.update((best if best.height else cand)["i"].to_list())
    return out


# ---------------------------------------------------------------------------- the model
def _why(exc: Exception) -> str:
    return f"{type(exc).__name__}: {one_line(str(exc), 160)}"


# Tables built on demand after the first screen (the summary does not need them).
GRAPH_TABLES = (
    ("guards", "guards"),
    ("graphs", "graphs"),
    ("graph_nodes", "graph nodes"),
    ("kernels", "kernels"),
    ("seq_links", "seq_nr links"),
)


@dataclass
class TraceModel:
    """A trace with its report and the indexes the views slice from.

    `build` computes what the first screen needs (compiles, facts, report, the raw-record
    index); `build_graph_tables` then reads guards, graphs and kernels (in the loader thread,
    after the first screen is up). Views check `graph_tables_ready` before touching those."""

    trace: Trace
    report: dict[str, Any]
    findings: list[Finding]
    records: pl.DataFrame
    compiles: pl.DataFrame
    code: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema={**_CODE_SCHEMA, "shown_id": pl.String}))
    missing: dict[str, str] = field(default_factory=dict)  # table -> why it is not available
    graph_tables_ready: bool = False
    timeline: pl.DataFrame | None = None  # traceview.output.timeline.piece_rows, read with the graph tables
    timeline_end: dict[str, Any] | None = None  # traceview.output.timeline.timeline_end: the axis's end, each rank's state
    jobs: int | None = None  # parallel processes for building tables (None: all cores)
    _text_rows: list[dict[str, Any]] | None = field(default=None, repr=False)  # text_log_compiles, once
    _ranks: list[int] | None = field(default=None, repr=False)  # ranks(), once
    _accounts: dict[tuple, dict[str, Any]] | None = field(default=None, repr=False)  # account_of, once

    @classmethod
    def build(
        cls, trace: Trace, progress: Callable[[str], None] | None = None, *, report: dict[str, Any] | None = None
    ) -> TraceModel:
        """Compute what the first screen needs (call off the UI thread). `report`: the trace's
        report when the caller has it already (the findings document `open` showed first)."""
        say = progress or (lambda _s: None)
        missing: dict[str, str] = {}
        say("building the compiles table")
        compiles = trace.compiles
        for name, what in (("recompiles", "recompile reasons"), ("graph_breaks", "graph breaks")):
            say(f"reading {what}")
            try:
                getattr(trace, name)
            except Exception as exc:  # a table another part of traceview cannot build
                missing[name] = _why(exc)
        from traceview.output.findings_document import cached_report, keep_report

        inputs = getattr(trace, "inputs", None)
        if report is None:
            report = cached_report(inputs)  # the findings document summary kept, when unchanged
        if report is None:
            say("analysing: recompile storms, graph breaks, failures, rank divergence, compile time")
            try:
                from traceview.output.report import build_report

                report = build_report(trace)
                keep_report(inputs, report)
            except Exception as exc:
                missing["report"] = _why(exc)
                report = {}
        say("indexing raw records")
        records = record_index(trace)
        findings = findings_from_report(report)  # the Findings view's rows (tui.finding_rows)
        # frame ids restart at a torch._dynamo.reset(): each epoch's compiles together
        compiles = compiles.with_columns(epoch_expr().alias("epoch"))
        order = compiles.sort(["rank", "epoch", *sort_exprs("compile_id")], nulls_last=False, maintain_order=True)
        model = cls(trace, report, findings, records, order, missing=missing)
        say("accounting for each compile")
        model.account_of({})  # here, off the UI thread (a report from the cache did not build it)
        return model

    def build_graph_tables(self, progress: Callable[[str], None] | None = None) -> None:
        """Read guards, graphs, graph nodes, kernels and seq_nr links (off the UI thread)."""
        say = progress or (lambda _s: None)
        ensure = getattr(self.trace, "ensure_graph_tables", None)
        if ensure is not None:
            # in worker processes (the UI process keeps its GIL), kept in the parse cache
            try:
                ensure(jobs=self.jobs)
            except Exception as exc:
                self.missing["graph tables"] = _why(exc)
        for name, what in GRAPH_TABLES:
            say(f"reading {what}")
            try:
                getattr(self.trace, name)
            except Exception as exc:
                self.missing[name] = _why(exc)
        self.code = code_index(self.trace, set(self.missing))
        say("placing the compiles on the time axis")
        self.place_compiles()
        self.graph_tables_ready = True

    def place_compiles(self) -> None:
        """The Timeline's data: every piece of every compile (traceview.output.timeline.piece_rows,
        the compile account's) and where the axis ends, with each rank's state then (timeline_end)."""
        try:
            from traceview.output.timeline import piece_rows, timeline_end

            self.timeline = piece_rows(self.trace)
            self.timeline_end = timeline_end(self.trace)
        except Exception as exc:
            self.missing["timeline"] = _why(exc)

    # -- compiles ---------------------------------------------------------------------
    def compile_row(self, rank: int | None, compile_id: str, occurrence: int | None = None) -> dict[str, Any] | None:
        """The compile `compile_id` of `rank` (its `occurrence`-th, after torch._dynamo.reset():
        None for the first)."""
        hit = self.compiles.filter(_rank_is(rank) & (pl.col("compile_id") == compile_id) & occurrence_is(occurrence)).head(1)
        return hit.to_dicts()[0] if hit.height else None

    def account_of(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The compile account's row (traceview.analyze.accounts.compiles.compile_account) of a
        compiles-table row: its seconds, status (an open compile's up to the capture's end),
        phase and one cause, as every finding says them; None for a text log's compile or one
        the account cannot build."""
        if self._accounts is None:
            acc = self.trace_account() if self.compiles.height else pl.DataFrame()
            self._accounts = {(a["file"], a["compile_id"], a.get("occurrence") or 1): a for a in acc.iter_rows(named=True)}
        return self._accounts.get((row.get("file"), row.get("compile_id"), row.get("occurrence") or 1))

    def trace_account(self) -> pl.DataFrame:
        """The compile account of the whole trace (compile_account, kept with the Trace; empty
        when it cannot be built)."""
        try:
            from traceview.analyze.accounts.compiles import compile_account

            return compile_account(self.trace)
        except Exception as exc:
            self.missing["compile account"] = _why(exc)
            return pl.DataFrame()

    def in_epoch(self, rank: int | None, compile_id: str | None, epoch: int | None) -> int | None:
        """The occurrence of `compile_id` on `rank` in `epoch` (frame ids name one code object
        only within an epoch: the compile a recompile reason names is in its own); None
        when that id has no compile there."""
        if compile_id is None or epoch is None:
            return None
        hit = self.compiles.filter(_rank_is(rank) & (pl.col("compile_id") == compile_id) & (pl.col("epoch") == epoch))
        return int(hit["occurrence"][0]) if hit.height else None

    def find_compile(self, text: str, rank: int | None = None) -> CompileKey | None:
        """A compile id typed by the user (`0/1`, `[0/1]`, `[0/1_1]`, `rank 1 0/1`, `1:0/1`)."""
        s = text.strip()
        m = re.match(r"^(?:rank\s*(\d+)\s*[:/ ]\s*|(\d+):)?(\S+)$", s)
        parsed = parse_compile_id(m.group(3)) if m else None
        if m is None or parsed is None:
            return None
        want_rank = m.group(1) or m.group(2)
        cid = parsed.compile_id
        known = self.compiles
        if self.text_only:  # the compile ids the text log names
            rows = self.text_log_compiles()
            known = pl.DataFrame(
                {"rank": [r["rank"] for r in rows], "compile_id": [r["compile_id"] for r in rows]},
                schema={"rank": pl.Int32, "compile_id": pl.String},
            )
        hits = known.filter(pl.col("compile_id") == cid)
        if want_rank is not None:
            hits = hits.filter(pl.col("rank") == int(want_rank))
        if hits.height == 0:
            return None
        if rank is not None and want_rank is None:
            same = hits.filter(pl.col("rank") == rank)
            if same.height:
                hits = same
        r = hits.row(0, named=True)
        return (r["rank"], r["compile_id"])

    @property
    def compile_count(self) -> int:
        return self.compiles.height

    @property
    def text_only(self) -> bool:
        """No compiles table (no compile metrics: a TORCH_LOGS text log alone) but compile ids
        in the text log."""
        return self.compiles.height == 0 and (self.report.get("compile_ids_in_text_logs") or 0) > 0

    def text_log_compiles(self) -> list[dict[str, Any]]:
        """The compile ids a text log names, as rows shaped like the compiles table's (what
        the frames tree needs): function and source line from its recompile reasons or graph
        breaks, the recompile reason, its cache lookups (`fx_cache_hits`, … as in the compiles
        table: compile_time.cache_counts); no status or times (the text log has none)."""
        if self._text_rows is not None:
            return self._text_rows
        recs = self.trace.log_records.filter(pl.col("compile_id").is_not_null())
        ids = recs.select(pl.col("rank").cast(pl.Int32), pl.col("compile_id").cast(pl.String)).unique()
        ids = ids.sort(["rank", *sort_exprs("compile_id")], nulls_last=False)
        where: dict[CompileKey, dict[str, Any]] = {}
        for name in ("recompiles", "graph_breaks"):
            if name in self.missing:
                continue
            t = getattr(self.trace, name)
            for r in t.filter(pl.col("function").is_not_null()).iter_rows(named=True):
                where.setdefault((r["rank"], r["compile_id"]), r)
        reasons: dict[CompileKey, list[str]] = {}
        if "recompiles" not in self.missing:
            for r in self.trace.recompiles.sort("reason_index").iter_rows(named=True):
                reasons.setdefault((r["rank"], r["compile_id"]), []).append(f"{r['failed_against']}: {r['guard']}")
        cache: dict[CompileKey, dict[str, int]] = {}  # the text log's cache lookups (the summary's count)
        for r in cache_counts(self.trace).filter(pl.col("source") == "text").iter_rows(named=True):
            cache.setdefault((r["rank"], r["compile_id"]), {})[CACHE_COLUMNS[(r["cache"], r["event"])]] = r["count"]
        out = []
        by_frame: dict[tuple[int | None, str], dict[str, Any]] = {}  # a frame's function, from any of its compiles
        for (rank, cid), w in where.items():
            by_frame.setdefault((rank, frame_group(cid)), w)
        for rank, cid in ids.iter_rows():
            w = where.get((rank, cid)) or by_frame.get((rank, frame_group(cid))) or {}
            out.append({
                "rank": rank, "compile_id": cid, "frame_id": None, "status": None, "fail_type": None,
                "fail_reason": None, "function": w.get("function"), "filename": w.get("filename"),
                "line": w.get("line"), "total_time_s": None, "attempts": None,
                "recompile_reason": "\n".join(reasons.get((rank, cid), [])) or None,
                **cache.get((rank, cid), {}),
            })
        self._text_rows = out
        return out

    def compile_or_text_row(self, rank: int | None, compile_id: str) -> dict[str, Any] | None:
        """The compile's row; for a text log alone, what the text log says of it."""
        row = self.compile_row(rank, compile_id)
        if row is None and self.text_only:
            row = next((r for r in self.text_log_compiles() if r["rank"] == rank and r["compile_id"] == compile_id), None)
        return row

    def backward_inside(self, row: dict[str, Any]) -> float | None:
        """Seconds of the backward graph's Inductor compile logged inside this compile (before its
        compilation_metrics): AOTAutograd compiled the backward with the forward, so the compile
        has no bwd_compilation_metrics of its own; None when there is none."""
        sp = self.trace.spans
        if sp.is_empty() or row.get("metrics_lineno") is None:
            return None
        hit = sp.filter(
            (pl.col("file") == row.get("file")) & (pl.col("compile_id") == row["compile_id"])
            & occurrence_is(row.get("occurrence")) & (pl.col("name") == "compile_fx.<locals>.bw_compiler")
            & (pl.col("end_lineno") <= row["metrics_lineno"]) & pl.col("duration_s").is_not_null()
        )
        return float(hit["duration_s"].sum()) if hit.height else None

    def code_of(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The report's description of a compile's code object (analyze.code_objects: class,
        library, torch wrapper, call site), when the report described it (the code objects its
        findings and compile-time tables name)."""
        if not row.get("function"):  # a compile without a Dynamo frame has no code object
            return None
        k = (row.get("rank"), row.get("function"), row.get("filename"), row.get("line"))
        ct = self.report.get("compile_time") or {}
        for r in [*self.report.get("recompiles", []), *ct.get("top", []), *ct.get("by_function", [])]:
            if (r.get("rank"), r.get("function"), r.get("filename"), r.get("line")) == k and r.get("code"):
                return r["code"]
        return None

    def user_stack_at(self, file: str, lineno: int) -> list[str]:
        """The user code traceback in the record at file:lineno (a graph break's reason)."""
        hit = self.records.filter((pl.col("file") == file) & (pl.col("lineno") == lineno)).head(1)
        if hit.height == 0:
            return []
        return user_code_traceback(record_payload(self.trace, hit["src"][0], int(hit["row"][0])))

    def unbacked_of(self, rank: int | None, compile_id: str, occurrence: int | None = None) -> list[dict[str, Any]]:
        """The compile's data-dependent sizes (report facts `unbacked_symbols`: one entry per
        user line)."""
        return [
            u
            for u in (self.report.get("facts") or {}).get("unbacked_symbols", [])
            if u["rank"] == rank and u["compile_id"] == compile_id and (occurrence is None or (u.get("occurrence") or 1) == occurrence)
        ]

    def graph_breaks_of(self, rank: int | None, compile_id: str, occurrence: int | None = None) -> pl.DataFrame:
        if "graph_breaks" in self.missing:
            return pl.DataFrame()
        # the messages (restarts and failures are shown apart): the graph_break_records
        gb = self.trace.graph_break_records.filter(_rank_is(rank) & (pl.col("compile_id") == compile_id))
        return prefer_trace(gb, ["rank", "compile_id"]).filter(occurrence_is(occurrence))

    def ranks(self) -> list[int]:
        """The ranks of the trace, in order (empty without ranks; asked at every footer refresh)."""
        if self._ranks is None:
            self._ranks = sorted(self.compiles["rank"].drop_nulls().unique().to_list())
        return self._ranks

    def on_other_rank(self, rank: int | None, compile_id: str, after: int | None = None) -> CompileKey | None:
        """The same compile on the next rank after `after` (default: after `rank`, cycling,
        never `rank` itself): the same compile id when that rank has it, else the last
        compile of the same frame there (a rank that recompiled has ids the others lack).
        None when no other rank compiled the frame."""
        ranks = self.ranks()
        if rank is None or len(ranks) < 2:
            return None
        start = after if after is not None else rank
        order = [r for r in ranks if r > start] + [r for r in ranks if r <= start]
        group = frame_group(compile_id)
        for r in order:
            if r == rank:
                continue
            ids = [c for c in self.compiles.filter(pl.col("rank") == r)["compile_id"].to_list() if frame_group(c) == group]
            if compile_id in ids:
                return (r, compile_id)
            if ids:
                return (r, ids[-1])
        return None

    def frames_of(self, compile_id: str) -> list[str]:
        """Compile ids of the same frame (code object), in order."""
        group = frame_group(compile_id)
        ids = [c for c in self.compiles["compile_id"].to_list() if frame_group(c) == group]
        return list(dict.fromkeys(ids))


