"""Compile timeline: when each compile ran on each rank (traceview.output.timeline.compile_rows).

One bar line per rank (process) on the time axis from the run's first compile to its last
compile's end, and below it every compile (forward, and the lazily compiled backward) in
start order, or longest first: which ranks and steps were stalled by compiling. The
selected compile is drawn in another glyph on its rank's line.
"""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from traceview.analyze.findings import compile_outcome
from traceview.output.timeline import longest_phases
from traceview.printable import one_line
from traceview.tui.lazy_table import Column, LazyTable
from traceview.tui.model import CompileKey, TraceModel, occurrence_is
from traceview.tui.navigation import Location
from traceview.tui.text import FAILED_MARK, fit, plain, safe, seconds, status_label
from traceview.tui.view import CompileFocused, Navigate, View

UNICODE = FAILED_MARK == "✗"
BAR = "█" if UNICODE else "#"  # a cell in which the rank compiled
SELECTED = "▓" if UNICODE else "@"  # a cell of the selected compile (a glyph: not colour alone)
AXIS = "─" if UNICODE else "-"


def _offset(v: Any) -> str:
    return "" if v is None else f"+{float(v):.2f}s"


def _took(v: Any) -> str:
    return "?" if v is None else seconds(v / 1e6)


def timeline_columns() -> list[Column]:
    return [
        Column("process_label", "rank", 7, cut="left"),
        Column("offset_s", "start", 8, fmt=_offset),
        Column("dur_us", "took", 6, fmt=_took),
        Column("compile_id", "id", 6),
        Column("part", "part", 8),
        Column("on_ranks", "ranks", 5, optional=True),  # of the trace's ranks, how many compiled it
        Column("outcome", "outcome", 12, optional=True),
        Column("function", "function", min_width=10),
    ]


def compiling_s(rows: pl.DataFrame) -> float:
    """The seconds of the compiles drawn by `rows` (compile_rows): each compile's own figure,
    `total_time_s` of the compiles table (forward and every backward piece), once per compile
    however many bars it has, so that the Timeline's totals are the summary's."""
    if rows.height == 0:
        return 0.0
    once = rows.unique(["file", "compile_id", "occurrence"], keep="first")
    # to the ms, as the report keeps per_rank's and total_s (else 27.4447 says 27.44s here
    # where the summary's 27.445 says 27.45s)
    return round(float(once["total_time_s"].fill_null(0).sum() or 0.0), 3)


def bar_lines(rows: pl.DataFrame, width: int, selected: dict[str, Any] | None = None) -> Text:
    """One line per process: `label │cells│ seconds`, a cell filled where the process compiled
    (a compile shorter than a cell still fills one), then a time axis."""
    t = Text(end="")
    procs = rows.select("process", "process_label").unique("process").sort("process")
    if procs.height == 0:
        return t
    label_w = max(len(plain(lb)) for lb in procs["process_label"].to_list())
    label_w = min(label_w, 12)
    stats_w = 18
    cells = max(10, width - label_w - stats_w - 4)
    t0 = int(rows["start_us"].min())
    ends = rows.select((pl.col("start_us") + pl.col("dur_us").fill_null(0)).max()).item()
    span = max(int(ends) - t0, 1)
    per_cell = span / cells

    def cell_range(start: int, dur: int | None) -> range:
        a = int((start - t0) / per_cell)
        b = int((start + (dur or 0) - t0) / per_cell)
        a = min(a, cells - 1)
        return range(a, min(max(b, a) + 1, cells))

    for pid, label in procs.iter_rows():
        mine = rows.filter(pl.col("process") == pid)
        line = [" "] * cells
        for start, dur in mine.select("start_us", "dur_us").iter_rows():
            for i in cell_range(start, dur):
                line[i] = BAR
        sel: range | None = None
        if selected is not None and selected.get("process") == pid:
            sel = cell_range(selected["start_us"], selected.get("dur_us"))
            for i in sel:
                line[i] = SELECTED
        total = compiling_s(mine)
        t.append_text(safe(fit(plain(label), label_w), "bold"))
        t.append(" │" if UNICODE else " |")
        if sel is None:
            t.append("".join(line))
        else:
            t.append("".join(line[: sel.start]))
            t.append("".join(line[sel.start : sel.stop]), "bold reverse")
            t.append("".join(line[sel.stop :]))
        t.append("│ " if UNICODE else "| ")
        n = mine.unique(["file", "compile_id", "occurrence"]).height
        t.append_text(safe(fit(f"{seconds(total)}, {n} compile{'s' if n != 1 else ''}", stats_w)))
        t.append("\n")
    # the axis: 0, the middle and the end of the span
    axis = [AXIS] * cells
    marks = [(0, "0s"), (cells // 2, f"{span / 2e6:.2f}s"), (cells, f"{span / 1e6:.2f}s")]
    for pos, text in marks:
        at = max(0, min(pos - len(text) // 2, cells - len(text))) if pos else 0
        axis[at : at + len(text)] = list(text)
    t.append(" " * (label_w + 2) + "".join(axis), "dim")
    t.append_text(safe(f"  1 cell {seconds(per_cell / 1e6)}", "dim"))
    return t


class TimelineView(View):
    """Compiles on the time axis, one line per rank, and the list of them."""

    view_id = "timeline"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "sort", "Sort start/length", id="timeline.sort"),
    ]

    def __init__(self, model: TraceModel, **kwargs: object) -> None:
        super().__init__(model, **kwargs)
        self.rows: pl.DataFrame | None = None
        self.by_length = False
        self.current: dict[str, Any] | None = None
        self._pending: Location | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="timeline-title", classes="view-title")
        with VerticalScroll(id="timeline-bars-pane"):
            yield Static(id="timeline-bars")
        yield LazyTable(timeline_columns(), id="timeline-list", row_class=_failed, empty="(no compile has a start time)")
        yield Static(id="timeline-detail", classes="detail-strip")

    def on_mount(self) -> None:
        if self.model.graph_tables_ready:
            self._apply()
        else:
            self.query_one("#timeline-title", Static).update(safe("Compile timeline: reading the compile phases…", "bold"))

    def tables_ready(self) -> None:
        self._apply()
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.show(pending)

    def on_resize(self) -> None:
        self._draw_bars()

    # -- data -------------------------------------------------------------------------
    def _apply(self, keep: dict[str, Any] | None = None) -> None:
        rows = self.model.timeline
        title = Text(end="")
        if rows is None:
            why = self.model.missing.get("timeline", "not read yet")
            title.append_text(safe(f"Compile timeline not available: {why}", "bold"))
            self.query_one("#timeline-title", Static).update(title)
            return
        rows = rows.with_columns(
            pl.struct("status", "fail_type", "fail_reason").map_elements(
                lambda r: status_label(compile_outcome(r)),
                return_dtype=pl.String,
            ).alias("outcome")
        ) if rows.height else rows.with_columns(pl.lit("").alias("outcome"))
        # a process without a rank: "no rank" (the Chrome trace's longer name does not fit a column)
        rows = rows.with_columns(pl.col("process_label").str.replace("^process without a rank", "no rank"))
        # how many of the ranks compiled this (compile id, part): "1/4" is a rank compiling alone
        nranks = rows["rank"].drop_nulls().n_unique() if rows.height else 0
        if nranks > 1:
            rows = rows.with_columns(
                pl.col("rank").n_unique().over("compile_id", "part").alias("_n"),
            ).with_columns(
                pl.concat_str(pl.col("_n").cast(pl.String), pl.lit(f"/{nranks}")).alias("on_ranks")
            ).drop("_n")
        else:
            rows = rows.with_columns(pl.lit("").alias("on_ranks"))
        if self.by_length:
            rows = rows.sort("dur_us", descending=True, nulls_last=True, maintain_order=True)
        self.rows = rows
        if rows.height == 0:
            self.query_one("#timeline-title", Static).update(safe(
                "Timeline: no compile has a start time: "
                + ("the text log has no compile metrics (add the TORCH_TRACE directory)" if self.model.text_only
                   else "no compilation_metrics in this trace"), "bold"))
            self.rows = rows
            self.current = None
            self.query_one("#timeline-list", LazyTable).set_frame(rows)
            self._draw_bars()
            self.query_one("#timeline-detail", Static).update("")
            return
        nprocs = rows["process"].n_unique()
        fwd = rows.filter(pl.col("part") == "forward").height
        # every compile's own figure (the compiles table's total_time_s), as the summary adds
        # them up: not the bars' lengths, which show where the parts ran
        total = round(float(self.model.compiles["total_time_s"].fill_null(0).sum() or 0.0), 3)
        bwd = rows.height - fwd
        unit = "rank" if rows["rank"].drop_nulls().len() else "process"
        ranks = f"{nprocs} {unit}{'s' if nprocs != 1 and unit == 'rank' else 'es' if nprocs != 1 else ''}"
        title.append_text(safe(
            f"Timeline: {fwd} compiles" + (f" + {bwd} backward" if bwd else "") + f" on {ranks}, {seconds(total)} compiling",
            "bold"))
        unplaced = self.model.compiles.filter(pl.col("start").is_null()).height
        if unplaced:
            title.append_text(safe(f"   {unplaced} compiles without a start time are not shown", "bold"))
        order = "longest first" if self.by_length else "by start"
        title.append_text(safe(f"   {BAR} compiling {SELECTED} selected · list {order} (s sorts)", "italic"))
        self.query_one("#timeline-title", Static).update(title)
        cursor = 0
        if keep is not None and rows.height:
            hit = rows.with_row_index("_n").filter(
                (pl.col("process") == keep["process"]) & (pl.col("compile_id") == keep["compile_id"])
                & (pl.col("part") == keep["part"]) & (pl.col("start_us") == keep["start_us"])
            )["_n"]
            cursor = int(hit[0]) if hit.len() else 0
        self.current = None
        self.query_one("#timeline-list", LazyTable).set_frame(rows, cursor=cursor)

    def _draw_bars(self) -> None:
        if self.rows is None or self.rows.height == 0:
            self.query_one("#timeline-bars", Static).update("")
            return
        width = self.query_one("#timeline-bars-pane").scrollable_content_region.width or self.size.width or 80
        self.query_one("#timeline-bars", Static).update(bar_lines(self.rows, width - 1, self.current))

    # -- selection --------------------------------------------------------------------
    def on_lazy_table_highlighted(self, event: LazyTable.Highlighted) -> None:
        if event.table.id != "timeline-list":
            return
        row = event.table.row(event.row)
        if row is None:
            return
        self.current = row
        self._draw_bars()
        self.query_one("#timeline-detail", Static).update(self._detail(row))
        self.post_message(CompileFocused((row.get("rank"), row["compile_id"]), row.get("occurrence")))

    def on_lazy_table_selected(self, event: LazyTable.Selected) -> None:
        if event.table.id != "timeline-list":
            return
        row = event.table.row(event.row)
        if row is not None:
            self.post_message(Navigate(Location("frames", rank=row.get("rank"), compile_id=row["compile_id"])))

    def _detail(self, row: dict[str, Any]) -> Text:
        t = Text(end="")
        what = "backward compile" if row["part"] == "backward" else "compile"
        if row["part"] == "backward" and (row.get("bwd_pieces") or 0) > 1 and row.get("piece"):
            what = f"backward piece {row['piece']} of {row['bwd_pieces']}"
        t.append_text(safe(f"[{row['compile_id']}] {row.get('function') or '?'}", "bold"))
        who = f"{row['process_label']}: " if row.get("rank") is not None else ""
        t.append_text(safe(
            f"  {who}{what} started {_offset(row['offset_s'])} after the first compile,"
            f" took {_took(row.get('dur_us'))}  {row.get('outcome') or ''}"
        ))
        total = row.get("total_time_s")
        if total is not None and row.get("dur_us") is not None and abs(total - row["dur_us"] / 1e6) >= 0.005:
            # the bar is one part; the compile's own figure is the one Findings and Frames show
            part = "the backward part" if row["part"] == "backward" else "the forward part"
            if row["part"] == "backward" and (row.get("bwd_pieces") or 0) > 1:
                part = f"one of its {row['bwd_pieces']} backward pieces"
            t.append("\n")
            t.append_text(safe(f"this bar is {part}: the compile took {seconds(total)} in all (forward and backward)"))
        ranks = self.model.ranks()
        if row.get("on_ranks", "").startswith("1/") and len(ranks) > 1 and row.get("rank") is not None:
            others = len(ranks) - 1
            t.append("\n")
            t.append_text(safe(
                f"only rank {row['rank']} compiled this: the other {others} rank{'s' if others != 1 else ''} did not",
                "bold"))
        phases = longest_phases(self.model.trace, row)
        if phases:
            t.append("\n")
            t.append_text(safe("longest phases: " + ", ".join(f"{n} {seconds(d)}" for n, d in phases)))
        if row.get("recompile_reason") and row["part"] == "forward":
            t.append("\n")
            t.append_text(safe(f"recompiled: {one_line(row['recompile_reason'], 300)}", "italic"))
        t.append("\n")
        t.append_text(safe("enter: the compile in Frames · 3: its guards · r: raw record", "italic"))
        return t

    def action_sort(self) -> None:
        self.by_length = not self.by_length
        self._apply(keep=self.current)

    # -- hooks ------------------------------------------------------------------------
    def show(self, loc: Location) -> None:
        if self.rows is None:
            self._pending = loc
            return
        if loc.compile_id is None:
            return
        hit = self.rows.with_row_index("_n").filter(
            (pl.col("compile_id") == loc.compile_id)
            & (pl.col("rank").is_null() if loc.rank is None else pl.col("rank") == loc.rank)
            & occurrence_is(loc.occurrence)
        )["_n"]
        if hit.len():
            self.query_one("#timeline-list", LazyTable).move_to(int(hit[0]))

    def location(self) -> Location:
        if self.current is None:
            return Location("timeline")
        return Location("timeline", rank=self.current.get("rank"), compile_id=self.current["compile_id"],
                        occurrence=self.current.get("occurrence"))

    def compile_ref(self) -> CompileKey | None:
        return (self.current.get("rank"), self.current["compile_id"]) if self.current else None

    def compile_occurrence(self) -> int | None:
        return self.current.get("occurrence") if self.current else None

    def search(self, query: str, forward: bool = True) -> bool:
        t = self.query_one("#timeline-list", LazyTable)
        i = t.find(query, start=t.cursor + (1 if forward else -1), forward=forward,
                   keys=["process_label", "compile_id", "function", "part", "outcome"])
        if i is None:
            return False
        t.move_to(i)
        return True

    def copy_text(self) -> str | None:
        return self._detail(self.current).plain.rsplit("\n", 1)[0] if self.current else None

    def record_ref(self) -> tuple[str, int] | None:
        if self.current is None:
            return None
        row = self.model.compile_row(self.current.get("rank"), self.current["compile_id"]) or {}
        line = row.get("metrics_lineno") or row.get("lineno")
        return (row["file"], int(line)) if row.get("file") and line else None

    def focus_main(self) -> None:
        self.query_one("#timeline-list", LazyTable).focus()


def _failed(row: dict[str, Any]) -> str | None:
    return "lazy-table--marked" if row.get("status") == "failed" else None  # failed or fell back to eager
