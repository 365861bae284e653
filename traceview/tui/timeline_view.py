"""Compile timeline: when each compile ran on each rank (traceview.output.timeline.piece_rows).

One bar line per rank (process) on the time axis from the run's first compile to the
capture's end (timeline_end), each ending with the rank's state then (the rank account's:
"waiting for rank 1 (likely)", "compiling [4/1] (in inductor code_gen)"), and below it every
piece of every compile (the forward, every backward piece, the part left open) in start
order, or longest first: which ranks and steps were stalled by compiling. A piece left open
(the job ended, or the capture does, while it compiled) runs to the capture's end in a glyph
of its own. Seconds and status are the compile account's; the selected piece is drawn in
another glyph on its rank's line.
"""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from traceview.analyze.accounts.compiles import OPEN
from traceview.analyze.wording import STATUS_WORDS, unfinished_text
from traceview.output.timeline import longest_phases, piece_name
from traceview.printable import one_line
from traceview.tui.lazy_table import Column, LazyTable
from traceview.tui.model import CompileKey, TraceModel, occurrence_is
from traceview.tui.navigation import Location
from traceview.tui.text import FAILED_MARK, fit, fit_left, mark, plain, safe, seconds
from traceview.tui.text import STATUS_WORDS as SHORT_WORDS
from traceview.tui.view import CompileFocused, Navigate, View

UNICODE = FAILED_MARK == "✗"
BAR = "█" if UNICODE else "#"  # a cell in which the rank compiled
SELECTED = "▓" if UNICODE else "@"  # a cell of the selected compile (a glyph: not colour alone)
AXIS = "─" if UNICODE else "-"
OPEN_BAR = "▒" if UNICODE else "~"  # a cell of a piece left open: compiling when the capture ends

# a piece's status (the compile account's) as the list's outcome column marks it
_STATUS_MARKS = {"finished": "ok", "failed": "failed", "unknown": "no_metrics",
                 "interrupted": "interrupted", "never_ended": "never_ended"}


def _offset(v: Any) -> str:
    return "" if v is None else f"+{float(v):.2f}s"


def _took(v: Any) -> str:
    return "?" if v is None else seconds(v / 1e6)


def outcome_text(status: str | None) -> str:
    """A piece's status (the compile account's) with its mark, as the list's column says it:
    "✓ finished", "✗ failed", "? no time logged" (traceview.analyze.wording.STATUS_WORDS); an
    open piece short, "! interrupted", "… never ended" (the strip below says it whole:
    unfinished_text)."""
    key = _STATUS_MARKS.get(status or "", "no_metrics")
    words = SHORT_WORDS[key] if status in OPEN else STATUS_WORDS.get(status or "", status or "?")
    return f"{mark(key)} {words}"


def took_text(row: dict[str, Any]) -> str:
    """A piece's length as the list says it: "1.18s"; "58.39s+" for a piece left open (its
    time up to the capture's end, not a length); "?" where no time is logged."""
    return _took(row.get("dur_us")) + ("+" if row.get("open") and row.get("dur_us") is not None else "")


def timeline_columns() -> list[Column]:
    return [
        Column("process_label", "rank", 7, cut="left"),
        Column("offset_s", "start", 8, fmt=_offset),
        Column("took", "took", 7),
        Column("label", "id", 6),
        Column("part", "part", 9),
        Column("on_ranks", "ranks", 5, optional=True),  # of the trace's ranks, how many compiled it
        Column("outcome", "outcome", 16, optional=True),
        Column("function", "function", min_width=10),
    ]


def compiling_s(rows: pl.DataFrame) -> float:
    """The seconds of the compiles drawn by `rows` (piece_rows): each compile's own figure,
    the compile account's `seconds` (every piece; an open compile's up to the capture's end),
    once per compile however many bars it has, so that the Timeline's totals are the summary's."""
    if rows.height == 0:
        return 0.0
    once = rows.unique(["file", "compile_id", "occurrence"], keep="first")
    # to the ms, as the report keeps per_rank's and total_s (else 27.4447 says 27.44s here
    # where the summary's 27.445 says 27.45s)
    return round(float(once["compile_seconds"].fill_null(0).sum() or 0.0), 3)


def timeline_table(rows: pl.DataFrame) -> pl.DataFrame:
    """piece_rows as the list shows them: `part` (piece_name: "backward 2 of 4"), `took`
    (took_text), `outcome` (the piece's status, outcome_text), `on_ranks` ("1/4": of the
    trace's ranks, how many compiled this compile id's piece), `process_label` shortened."""
    if rows.height == 0:
        return rows.with_columns(*(pl.lit("").alias(c) for c in ("part", "took", "outcome", "on_ranks")))
    dicts = rows.to_dicts()
    rows = rows.with_columns(
        pl.Series("part", [piece_name(r) for r in dicts], dtype=pl.String),
        pl.Series("took", [took_text(r) for r in dicts], dtype=pl.String),
        pl.Series("outcome", [outcome_text(r["status"]) for r in dicts], dtype=pl.String),
        # a process without a rank: "no rank" (the Chrome trace's longer name does not fit a column)
        pl.col("process_label").str.replace("^process without a rank", "no rank"),
    )
    nranks = rows["rank"].drop_nulls().n_unique()
    if nranks > 1:
        return rows.with_columns(
            pl.col("rank").n_unique().over("compile_id", "piece").alias("_n"),
        ).with_columns(
            pl.concat_str(pl.col("_n").cast(pl.String), pl.lit(f"/{nranks}")).alias("on_ranks")
        ).drop("_n")
    return rows.with_columns(pl.lit("").alias("on_ranks"))


def rank_end_texts(rows: pl.DataFrame, end: dict[str, Any] | None) -> dict[int, str]:
    """process -> its rank's state when the capture ends (timeline_end's, the rank account's:
    "waiting for rank 1 (likely)"); none where the account says nothing."""
    if end is None or rows.height == 0:
        return {}
    ranks = end.get("ranks") or {}
    out: dict[int, str] = {}
    for pid, file in rows.select("process", "file").unique("process").iter_rows():
        text = (ranks.get(file) or {}).get("text")
        if text:
            out[pid] = text
    return out


def bar_lines(rows: pl.DataFrame, width: int, selected: dict[str, Any] | None = None,
              end: dict[str, Any] | None = None) -> Text:
    """One line per process: `label │cells│ seconds, compiles · state at the end`, a cell
    filled where the process compiled (a piece shorter than a cell still fills one; a piece
    left open, OPEN_BAR, up to the capture's end), then a time axis from the first piece's
    start to the capture's end (`end`: timeline_end)."""
    t = Text(end="")
    procs = rows.select("process", "process_label").unique("process").sort("process")
    if procs.height == 0:
        return t
    label_w = max(len(plain(lb)) for lb in procs["process_label"].to_list())
    label_w = min(label_w, 12)
    states = rank_end_texts(rows, end)
    figures = {}
    for pid in procs["process"].to_list():
        mine = rows.filter(pl.col("process") == pid)
        n = mine.unique(["file", "compile_id", "occurrence"]).height
        figures[pid] = f"{seconds(compiling_s(mine))}, {n} compile{'s' if n != 1 else ''}"
    # each rank's state at the end of its line where there is room (the bars keep at least half
    # the line), else on a line of its own under the bar: said whole, never cut
    stats = {pid: f + (f" · {states[pid]}" if pid in states else "") for pid, f in figures.items()}
    room = max(18, (width - label_w - 4) // 2)
    below = max(len(plain(v)) for v in stats.values()) > room
    if below:
        stats = figures
    stats_w = min(max(len(plain(v)) for v in stats.values()), room)
    cells = max(10, width - label_w - stats_w - 4)
    t0 = int(rows["start_us"].min())
    ends = rows.select((pl.col("start_us") + pl.col("dur_us").fill_null(0)).max()).item()
    if end is not None and end.get("at_us") is not None:
        ends = max(int(ends), int(end["at_us"]))
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
        for start, dur, is_open in mine.select("start_us", "dur_us", "open").iter_rows():
            for i in cell_range(start, dur):
                line[i] = OPEN_BAR if is_open else BAR
        sel: range | None = None
        if selected is not None and selected.get("process") == pid:
            sel = cell_range(selected["start_us"], selected.get("dur_us"))
            for i in sel:
                line[i] = SELECTED
        # cut from the left: two files of one rank, or processes without a rank, differ in their ends
        t.append_text(safe(fit_left(plain(label), label_w), "bold"))
        t.append(" │" if UNICODE else " |")
        if sel is None:
            t.append("".join(line))
        else:
            t.append("".join(line[: sel.start]))
            t.append("".join(line[sel.start : sel.stop]), "bold reverse")
            t.append("".join(line[sel.stop :]))
        t.append("│ " if UNICODE else "| ")
        t.append_text(safe(fit(stats[pid], stats_w).rstrip()))
        t.append("\n")
        if below and pid in states:
            t.append(" " * (label_w + 2))
            t.append_text(safe(f"{'└' if UNICODE else '`'} at the capture's end: {states[pid]}", "italic"))
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
        rows = timeline_table(rows)
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
        title.append_text(timeline_title(rows, self.model))
        order = "longest first" if self.by_length else "by start"
        legend = f"   {BAR} compiling" + (f" {OPEN_BAR} open to the capture's end" if rows["open"].any() else "")
        title.append_text(safe(f"{legend} {SELECTED} selected · list {order} (s sorts)", "italic"))
        self.query_one("#timeline-title", Static).update(title)
        cursor = 0
        if keep is not None and rows.height:
            hit = rows.with_row_index("_n").filter(
                (pl.col("process") == keep["process"]) & (pl.col("compile_id") == keep["compile_id"])
                & (pl.col("piece") == keep["piece"]) & (pl.col("start_us") == keep["start_us"])
            )["_n"]
            cursor = int(hit[0]) if hit.len() else 0
        self.current = None
        self.query_one("#timeline-list", LazyTable).set_frame(rows, cursor=cursor)

    def _draw_bars(self) -> None:
        if self.rows is None or self.rows.height == 0:
            self.query_one("#timeline-bars", Static).update("")
            return
        width = self.query_one("#timeline-bars-pane").scrollable_content_region.width or self.size.width or 80
        self.query_one("#timeline-bars", Static).update(bar_lines(self.rows, width - 1, self.current, self.model.timeline_end))

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
        return piece_detail(self.model, row)

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
    # failed (or fell back to eager), or left open when the capture ends
    return "lazy-table--marked" if row.get("status") in ("failed", "interrupted", "never_ended") else None


def timeline_title(rows: pl.DataFrame, model: TraceModel) -> Text:
    """"Timeline: 9 compiles + 4 backward pieces on 2 ranks, 81.21s compiling (1 interrupted
    when the job ended: its time up to the capture's end)": the compile account's seconds of
    every compile, as the summary adds them up, not the bars' lengths."""
    nprocs = rows["process"].n_unique()
    fwd = rows.filter(pl.col("piece") == "forward").height
    others = rows.filter(pl.col("piece") != "forward")["piece"].value_counts(sort=True).iter_rows()
    more = "".join(f" + {n} {p}" + (" pieces" if p == "backward" and n != 1 else " piece" if p == "backward" else "")
                   for p, n in others)
    acc = model.trace_account()
    total = round(float(acc["seconds"].fill_null(0).sum() or 0.0), 3) if acc.height else compiling_s(rows)
    unit = "rank" if rows["rank"].drop_nulls().len() else "process"
    ranks = f"{nprocs} {unit}{'s' if nprocs != 1 and unit == 'rank' else 'es' if nprocs != 1 else ''}"
    t = safe(
        f"Timeline: {fwd} compiles{more} on {ranks}, {seconds(total)} compiling", "bold")
    opened = [(st, n) for st in ("interrupted", "never_ended")
              if (n := acc.filter(pl.col("status") == st).height if acc.height else 0)]
    if opened:
        words = ", ".join(f"{n} {st.replace('_', ' ')}" for st, n in opened)
        t.append_text(safe(f" ({words}, timed to the capture's end)", "bold"))
    unplaced = acc.filter(pl.col("start").is_null()).height if acc.height else 0
    if unplaced:
        t.append_text(safe(f"   {unplaced} compiles without a start time are not shown", "bold"))
    return t


def piece_detail(model: TraceModel, row: dict[str, Any]) -> Text:
    """The strip under the list: the selected piece (a row of piece_rows), its compile's
    seconds and status as the compile account has them, where it recompiled and why (the
    account's one cause), its longest phases."""
    t = Text(end="")
    what = "compile" if row["piece"] == "forward" else piece_name(row)
    t.append_text(safe(f"[{row.get('label') or row['compile_id']}] {row.get('function') or '?'}", "bold"))
    who = f"{row['process_label']}: " if row.get("rank") is not None else ""
    if row.get("open"):
        took = f"{took_text(row)[:-1]} up to the capture's end, {unfinished_text(row['status'], row.get('phase'), row['piece'])}"
    else:
        took = f"took {took_text(row)}  {row.get('outcome') or ''}"
    t.append_text(safe(f"  {who}{what} started {_offset(row['offset_s'])} after the first compile, {took}"))
    total = row.get("compile_seconds")
    if total is not None and (row["piece"] != "forward" or row.get("dur_us") is None
                              or abs(total - row["dur_us"] / 1e6) >= 0.0005):
        # the bar is one piece; the compile's own figure (the account's) is the one Findings and Frames show
        t.append("\n")
        status = row.get("compile_status")
        said = STATUS_WORDS.get(status or "", status or "?")
        t.append_text(safe(f"the compile: {seconds(total)} in all (every piece{', up to the capture' + chr(39) + 's end' if status in ('interrupted', 'never_ended') else ''}), {said}"))
    ranks = model.ranks()
    if (row.get("on_ranks") or "").startswith("1/") and len(ranks) > 1 and row.get("rank") is not None:
        others = len(ranks) - 1
        t.append("\n")
        t.append_text(safe(
            f"only rank {row['rank']} compiled this: the other {others} rank{'s' if others != 1 else ''} did not",
            "bold"))
    phases = longest_phases(model.trace, row)
    if phases:
        t.append("\n")
        t.append_text(safe("longest phases: " + ", ".join(f"{n} {seconds(d)}" for n, d in phases)))
    if row["piece"] == "forward":
        acc = model.account_of(row) or {}
        if acc.get("cause"):
            t.append("\n")
            t.append_text(safe(f"recompiled: {one_line(acc['cause'], 300)}", "italic"))
        elif row.get("recompile_reason"):
            t.append("\n")
            t.append_text(safe(f"recompiled (torch listed): {one_line(row['recompile_reason'], 300)}", "italic"))
    t.append("\n")
    t.append_text(safe("enter: the compile in Frames · 3: its guards · r: raw record", "italic"))
    return t
