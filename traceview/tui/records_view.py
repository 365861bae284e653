"""Raw records: every trace envelope and text-log record, filterable, with its payload."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Horizontal
from textual.widgets import Input, Select, Static

from parsers.compile_ids import parse as parse_compile_id
from traceview.tui.code_view import CodeView
from traceview.tui.lazy_table import Column, LazyTable
from traceview.tui.model import CompileKey, TraceModel, record_payload
from traceview.tui.navigation import Location
from traceview.tui.text import safe
from traceview.tui.view import CompileFocused, View


def record_columns(ranked: bool) -> list[Column]:
    cols = [
        Column("src", "src", 5, optional=True),
        Column("where", "file:line", 18, cut="left"),
        Column("rank", "rank", 4),
        Column("trace_id", "id", 7),
        Column("kind", "kind", 20),
        Column("summary", "record", min_width=10),
    ]
    return cols if ranked else [c for c in cols if c.key != "rank"]


class FilterSelect(Select):
    """A filter's choice list: a letter or digit typed on it opens the list and searches it,
    never reaching the app's shortcuts ("1" switching view, "q" quitting) as it would on a
    closed Select."""

    async def _on_key(self, event: Any) -> None:
        if not self.expanded and event.character and event.character.isprintable() and event.key not in ("space",):
            event.stop()
            event.prevent_default()
            self.expanded = True
            return
        await super()._on_key(event)


class RecordsView(View):
    """Every envelope (trace.events) and text-log record (trace.log_records)."""

    view_id = "records"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "focus_filters", "Filters", id="records.filters"),
        Binding("x", "clear_filters", "Clear filters", id="records.clear_filters"),
        Binding("t", "filter_this('kind')", "Filter: this kind", id="records.filter_kind", show=False),
        Binding("i", "filter_this('compile')", "Filter: this compile", id="records.filter_compile", show=False),
        Binding("tab", "switch_pane", "List/payload; in the filters, the next field", id="records.switch_pane", show=False),
        Binding("shift+tab", "switch_pane(-1)", "Previous filter field", id="records.previous_field", show=False),
    ]

    def __init__(self, model: TraceModel, **kwargs: object) -> None:
        super().__init__(model, **kwargs)
        self.kind: str | None = None
        self.compile: str | None = None
        self.rank: int | None = None
        self.contains: str = ""
        self._shown: tuple[str, int] | None = None
        self._payload_focused = False
        self._quiet = 0
        self._contains_cache: tuple[str, tuple[pl.Series, pl.Series]] | None = None
        recs = model.records.with_columns(
            pl.concat_str(
                pl.col("file").str.split("/").list.last(), pl.lit(":"), pl.col("lineno").cast(pl.String)
            ).alias("where")
        )
        self.all = recs

    def compose(self) -> ComposeResult:
        yield Static(id="records-title", classes="view-title")
        kinds = self.all.group_by("kind").len().sort(["len", "kind"], descending=[True, False])
        options = [(safe(f"{k} ({n})"), k) for k, n in kinds.iter_rows()]
        ranks = sorted(r for r in self.all["rank"].unique().to_list() if r is not None)
        with Horizontal(id="records-filters"):
            yield FilterSelect(options, prompt="kind: all", id="filter-kind", compact=True)
            yield Input(placeholder="compile id", id="filter-compile", compact=True)
            yield FilterSelect([(safe(f"rank {r}"), r) for r in ranks], prompt="rank: all", id="filter-rank", compact=True, disabled=not ranks)
            yield Input(placeholder="text (whole record)", id="filter-text", compact=True)
        with Container(classes="split"):
            yield LazyTable(record_columns(bool(ranks)), id="records-table", classes="pane-main w3", empty="(no record matches the filters; x clears them)")
            yield CodeView(id="record-payload", classes="pane-side w2")

    def on_mount(self) -> None:
        self._apply()

    # -- filters ----------------------------------------------------------------------
    def filtered(self) -> pl.DataFrame:
        df = self.all
        if self.kind:
            df = df.filter(pl.col("kind") == self.kind)
        if self.compile:
            parsed = parse_compile_id(self.compile)
            if parsed is None:  # not a compile id: the records whose trace id is this text
                df = df.filter(pl.col("trace_id") == self.compile.strip())
            else:  # the compile's records, every attempt (parsers.compile_ids)
                df = df.filter(pl.col("compile_id") == parsed.compile_id)
        if self.rank is not None:
            df = df.filter(pl.col("rank") == self.rank)
        if self.contains:
            df = df.filter(self._holds(self.contains))
        return df

    def _holds(self, query: str) -> pl.Expr:
        """Over the records list: the rows whose whole record (metadata, payload, a text-log
        record's text) contains `query` (the text filter's, and `/`'s)."""
        ev_rows, log_rows = self._matching_rows(query)
        return ((pl.col("src") == "trace") & pl.col("row").is_in(ev_rows.implode())) | (
            (pl.col("src") == "text") & pl.col("row").is_in(log_rows.implode())
        )

    def _matching_rows(self, query: str) -> tuple[pl.Series, pl.Series]:
        """Rows of events / log_records whose whole text (metadata, payload) contains `query`
        (case-insensitive, literal), one vectorized scan of each table."""
        if self._contains_cache and self._contains_cache[0] == query:
            return self._contains_cache[1]
        pat = "(?i)" + re.escape(query)
        trace = self.model.trace
        ev = trace.events.select(
            (
                pl.col("metadata").str.contains(pat).fill_null(False)
                | pl.col("payload").str.contains(pat).fill_null(False)
                | pl.col("kind").str.contains(pat).fill_null(False)
            ).alias("m")
        ).with_row_index("row").filter(pl.col("m"))["row"].cast(pl.Int64)
        logs = trace.log_records.select(pl.col("text").str.contains(pat).fill_null(False).alias("m")).with_row_index(
            "row"
        ).filter(pl.col("m"))["row"].cast(pl.Int64)
        self._contains_cache = (query, (ev, logs))
        return ev, logs

    @property
    def active_filters(self) -> list[str]:
        out = []
        if self.kind:
            out.append(f"kind={self.kind}")
        if self.compile:
            out.append(f"compile={self.compile}")
        if self.rank is not None:
            out.append(f"rank={self.rank}")
        if self.contains:
            out.append(f"text={self.contains!r}")
        return out

    def _apply(self, target: tuple[str, int] | None = None) -> None:
        df = self.filtered()
        cursor = 0
        if target is not None:
            idx = _find(df, *target)
            cursor = idx if idx is not None else 0
        ntrace = self.all.filter(pl.col("src") == "trace").height
        title = Text(end="")
        title.append_text(safe(f"Raw records: {df.height} of {self.all.height}", "bold"))
        title.append_text(safe(f"  ({ntrace} trace envelopes, {self.all.height - ntrace} text-log records)"))
        if self.active_filters:
            title.append_text(safe("   filters: " + ", ".join(self.active_filters) + "  (x clears)", "italic"))
        self.query_one("#records-title", Static).update(title)
        self.query_one("#records-table", LazyTable).set_frame(df, cursor=cursor)
        if df.height == 0:
            self._shown = None
            self.query_one("#record-payload", CodeView).set_text("")

    def _sync_widgets(self) -> None:
        """Make the filter widgets show the filter state (without re-applying)."""
        self._quiet += 1
        try:
            kind = self.query_one("#filter-kind", Select)
            if self.kind is None:
                kind.clear()
            else:
                kind.value = self.kind
            rank = self.query_one("#filter-rank", Select)
            if self.rank is None:
                if not rank.disabled:
                    rank.clear()
            else:
                rank.value = self.rank
            self.query_one("#filter-compile", Input).value = self.compile or ""
            self.query_one("#filter-text", Input).value = self.contains
        finally:
            self.call_after_refresh(self._unquiet)

    def _unquiet(self) -> None:
        self._quiet = max(0, self._quiet - 1)

    def on_select_changed(self, event: Select.Changed) -> None:
        if self._quiet:
            return
        value = None if event.value is Select.NULL else event.value
        if event.select.id == "filter-kind":
            self.kind = value  # type: ignore[assignment]
        elif event.select.id == "filter-rank":
            self.rank = value  # type: ignore[assignment]
        else:
            return
        self._apply(self._shown)

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._quiet:
            return
        if event.input.id == "filter-compile":
            self.compile = event.value or None
        elif event.input.id == "filter-text":
            self.contains = event.value
        else:
            return
        self._apply(self._shown)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id in ("filter-compile", "filter-text"):
            event.stop()
            self.query_one("#records-table", LazyTable).focus()

    def action_focus_filters(self) -> None:
        self.query_one("#filter-kind", Select).focus()

    def action_clear_filters(self) -> None:
        if not self.clear_filters():
            self.app.notify("no filters to clear")

    def action_filter_this(self, what: str) -> None:
        row = self.query_one("#records-table", LazyTable).current
        if row is None:
            return
        if what == "kind":
            self.kind = row["kind"]
        elif row.get("compile_id"):
            self.compile = row["compile_id"]
        else:
            self.app.notify("this record has no compile id", severity="warning")
            return
        self._sync_widgets()
        self._apply((row["file"], int(row["lineno"])))

    def _in_filters(self) -> bool:
        focused = self.screen.focused
        bar = self.query_one("#records-filters")
        return focused is not None and (focused is bar or bar in focused.ancestors)

    def action_switch_pane(self, direction: int = 1) -> None:
        """Tab: in the filter fields, the next field (kind, compile id, rank, text, then the
        list); elsewhere, between the list and the payload."""
        if self._in_filters() or direction < 0:
            if direction > 0:
                self.screen.focus_next()
            else:
                self.screen.focus_previous()
            return
        if self._payload_focused:
            self.query_one("#records-table", LazyTable).focus()
        else:
            self.query_one("#record-payload", CodeView).focus()

    def on_descendant_focus(self, event: Any) -> None:
        self._payload_focused = isinstance(event.widget, CodeView)

    # -- selection --------------------------------------------------------------------
    def on_lazy_table_highlighted(self, event: LazyTable.Highlighted) -> None:
        if event.table.id != "records-table":
            return
        row = event.table.row(event.row)
        if row is None:
            return
        ref = (row["file"], int(row["lineno"]))
        if ref == self._shown:
            return
        self._shown = ref
        text = record_payload(self.model.trace, row["src"], int(row["row"]))
        lang = None
        self.query_one("#record-payload", CodeView).set_text(text, language=lang)
        if row.get("compile_id"):
            self.post_message(CompileFocused((row.get("rank"), row["compile_id"])))

    def on_lazy_table_selected(self, event: LazyTable.Selected) -> None:
        if event.table.id == "records-table":
            self.query_one("#record-payload", CodeView).focus()

    # -- hooks ------------------------------------------------------------------------
    def show(self, loc: Location) -> None:
        if loc.file is not None and loc.lineno is not None:
            if _find(self.filtered(), loc.file, loc.lineno) is None and self.active_filters:
                self._reset()
                self._sync_widgets()
            self._apply((loc.file, loc.lineno))
            if _find(self.filtered(), loc.file, loc.lineno) is None:
                self.app.notify(f"no record holds {loc.file}:{loc.lineno}", severity="warning")
        elif loc.compile_id is not None:
            self.compile = loc.compile_id
            self.rank = loc.rank
            self._sync_widgets()
            self._apply()

    def location(self) -> Location:
        row = self.query_one("#records-table", LazyTable).current
        if row is None:
            return Location("records")
        return Location("records", file=row["file"], lineno=int(row["lineno"]))

    def search(self, query: str, forward: bool = True) -> bool:
        if self._payload_focused:
            return self.query_one("#record-payload", CodeView).find(query, forward=forward) is not None
        t = self.query_one("#records-table", LazyTable)
        # the whole record, as the text filter searches it: a word in a payload finds its record
        i = t.find(query, start=t.cursor + (1 if forward else -1), forward=forward, keys=["kind", "summary", "trace_id", "where"],
                   also=self._holds(query))
        if i is None:
            return False
        t.move_to(i)
        return True

    def copy_text(self) -> str | None:
        return self.query_one("#record-payload", CodeView).text or None

    def record_ref(self) -> tuple[str, int] | None:
        return self._shown

    def compile_ref(self) -> CompileKey | None:
        row = self.query_one("#records-table", LazyTable).current
        if row and row.get("compile_id"):
            return (row.get("rank"), row["compile_id"])
        return None

    def _reset(self) -> None:
        self.kind = None
        self.compile = None
        self.rank = None
        self.contains = ""

    def filters(self) -> object:
        return (self.kind, self.compile, self.rank, self.contains) if self.active_filters else None

    def set_filters(self, filters: object) -> None:
        if not isinstance(filters, tuple):
            return
        self.kind, self.compile, self.rank, self.contains = filters
        self._sync_widgets()
        self._apply()

    def clear_filters(self) -> bool:
        if not self.active_filters:
            return False
        keep = self._shown
        self._reset()
        self._sync_widgets()
        self._apply(keep)
        return True

    def focus_main(self) -> None:
        self.query_one("#records-table", LazyTable).focus()


def _find(df: pl.DataFrame, file: str, lineno: int) -> int | None:
    hit = df.select(
        ((pl.col("file") == file) & (pl.col("lineno") <= lineno) & (pl.col("end_lineno") >= lineno)).alias("m")
    ).with_row_index("i").filter(pl.col("m"))["i"]
    return int(hit[0]) if hit.len() else None
