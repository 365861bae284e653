"""Guards of a compile; for a recompile, the guard that failed, and two compiles side by side."""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Vertical
from textual.widgets import Static

from traceview.tui.lazy_table import Column, LazyTable
from traceview.tui.model import CompileKey, TraceModel, failed_guard_rows, failures_of, guards_of
from traceview.tui.navigation import Location
from traceview.tui.text import FAILED_MARK, plain, safe, short_path
from traceview.tui.view import CompileFocused, View

DIFFERS = "≠" if FAILED_MARK == "✗" else "!"


def guard_columns() -> list[Column]:
    return [
        Column("mark", "", 1),
        Column("kind", "kind", 14),
        Column("code", "guard", min_width=24),
        Column("where", "user source", 18, cut="left", optional=True),
    ]


def with_marks(guards: pl.DataFrame, other: pl.DataFrame | None, failed: set[int]) -> pl.DataFrame:
    """Add `mark` (✗ failed, ≠ not in the other compile) and `where` (user file:line)."""
    if guards.height == 0:
        return guards.with_columns(pl.lit("").alias("mark"), pl.lit("").alias("where"))
    g = guards
    if other is not None and other.height:
        only = g.join(other.select("kind", "code").unique(), on=["kind", "code"], how="anti", nulls_equal=True)["i"]
        differs = pl.col("i").is_in(only.implode())
    else:
        differs = pl.lit(False)
    return g.with_columns(
        pl.when(pl.col("i").is_in(list(failed)))
        .then(pl.lit(FAILED_MARK))
        .when(differs)
        .then(pl.lit(DIFFERS))
        .otherwise(pl.lit(""))
        .alias("mark"),
        pl.when(pl.col("user_file").is_not_null())
        .then(
            pl.concat_str(
                pl.col("user_file").str.split("/").list.last(), pl.lit(":"), pl.col("user_line").cast(pl.String).fill_null("?")
            )
        )
        .otherwise(pl.lit(""))
        .alias("where"),
    )


def guard_count_text(logged: int, src: str | None, metrics: int | None) -> str:
    """How many guards the view lists, and what Dynamo's own count (compilation metrics'
    guard_count, shown in the compile's detail) says when it differs: the log lists the lines
    of the built guard tree, the metrics count `len(output.guards)`, the guards Dynamo
    recorded before building the tree (torch/_dynamo/convert_frame.py); neither is wrong."""
    text = f"{logged} guards logged" + (f" (from the {'trace' if src == 'trace' else 'text log'})" if src else "")
    if metrics is not None and metrics != logged:
        text += f"; Dynamo's metrics count {metrics} before building the guard tree"
    return text


def _marked(row: dict[str, Any]) -> str | None:
    return "lazy-table--marked" if row.get("mark") == FAILED_MARK else None


def counterpart(row: dict[str, Any], other: pl.DataFrame) -> dict[str, Any] | None:
    """The guard of the other compile on the same source and of the same kind."""
    if other.height == 0 or not row.get("guard_source"):
        return None
    hit = other.filter((pl.col("kind") == row.get("kind")) & (pl.col("guard_source") == row["guard_source"])).head(1)
    return hit.to_dicts()[0] if hit.height else None


def guard_detail(row: dict[str, Any], compile_id: str, other: dict[str, Any] | None = None, other_id: str = "") -> Text:
    t = Text(end="")
    head = f"[{compile_id}] {row.get('kind') or '?'}"
    if row.get("mark") == FAILED_MARK:
        head += f"   {FAILED_MARK} this guard failed"
    elif row.get("mark") == DIFFERS:
        head += f"   {DIFFERS} not in the other compile"
    t.append_text(safe(head, "bold"))
    t.append("\n")
    t.append_text(safe(row.get("code") or ""))
    t.append("\n")
    if other is not None and row.get("mark") and other.get("code") != row.get("code"):
        t.append_text(safe(f"[{other_id}]: ", "bold"))
        t.append_text(safe(other.get("code") or ""))
        t.append("\n")
    if row.get("user_file"):
        t.append_text(
            safe(f"{row['user_file']}:{row.get('user_line')} in {row.get('user_function') or '?'}: {row.get('user_code') or ''}", "italic")
        )
        t.append("\n")
    t.append_text(safe(f"source {row.get('guard_source') or '-'}   record {short_path(row.get('file'), 60)}:{row.get('lineno')}", "italic"))
    return t


class GuardsView(View):
    """Guards of one compile, and optionally of the compile it is compared with."""

    view_id = "guards"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "toggle_compare", "Compare", id="guards.compare"),
        Binding("comma", "step(-1)", "Previous compile of frame", id="guards.previous_compile", show=False),
        Binding("full_stop", "step(1)", "Next compile of frame", id="guards.next_compile", show=False),
    ]

    def __init__(self, model: TraceModel, **kwargs: object) -> None:
        super().__init__(model, **kwargs)
        self.key: CompileKey | None = None
        self.compare_id: str | None = None
        self.comparing = False
        self._last_table = "guards-left"
        self._pending: tuple | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="guards-title", classes="view-title")
        yield Static(id="guards-failed")
        with Container(classes="split", id="guards-split"):
            with Vertical(classes="pane-main"):
                yield Static(id="guards-left-label", classes="pane-label")
                yield LazyTable(guard_columns(), row_class=_marked, id="guards-left", empty="(no guards logged for this compile)")
            with Vertical(classes="pane-side", id="guards-right-pane"):
                yield Static(id="guards-right-label", classes="pane-label")
                yield LazyTable(guard_columns(), row_class=_marked, id="guards-right", empty="(no guards logged for this compile)")
        yield Static(id="guard-detail", classes="detail-strip")

    def on_mount(self) -> None:
        self._render_empty()

    def _render_empty(self) -> None:
        if self.key is None:
            self.query_one("#guards-title", Static).update(
                safe("Guards: pick a compile (frames view, or g to go to a compile id)", "bold")
            )
            self.query_one("#guards-right-pane").display = False

    # -- loading ----------------------------------------------------------------------
    def tables_ready(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.load(*pending[:3], compare=pending[3])

    def load(self, rank: int | None, compile_id: str, compare_id: str | None = None, *, compare: bool | None = None) -> None:
        if not self.model.graph_tables_ready:
            self._pending = (rank, compile_id, compare_id, compare)
            self.key = (rank, compile_id)
            self.query_one("#guards-title", Static).update(safe(f"Guards of [{compile_id}]: reading the guards…", "bold"))
            return
        if "guards" in self.model.missing:
            self.key = (rank, compile_id)
            self.query_one("#guards-title", Static).update(safe(f"guards not available: {self.model.missing['guards']}"))
            return
        self.key = (rank, compile_id)
        fails = failures_of(self.model.trace, rank, compile_id) if "recompiles" not in self.model.missing else pl.DataFrame()
        if compare_id is None and fails.height:
            compare_id = fails["failed_against"][0]
        if compare_id is None:
            ids = self.model.frames_of(compile_id)
            i = ids.index(compile_id) if compile_id in ids else -1
            compare_id = ids[i - 1] if i > 0 else None
        self.compare_id = compare_id
        self.comparing = bool(compare_id) if compare is None else (compare and bool(compare_id))
        mine = guards_of(self.model.trace, rank, compile_id)
        other = guards_of(self.model.trace, rank, compare_id) if compare_id else None
        row = self.model.compile_row(rank, compile_id) or {}
        src = mine["source"][0] if mine.height and "source" in mine.columns else None
        title = Text(end="")
        title.append_text(safe(f"Guards of [{compile_id}] {row.get('function') or '?'}", "bold"))
        title.append_text(safe(f"  {guard_count_text(mine.height, src, row.get('guard_count'))}"))
        if rank is not None:
            title.append_text(safe(f"  rank {rank}"))
        if compare_id:
            title.append_text(safe(f"   d: {'hide' if self.comparing else 'compare with'} [{compare_id}]", "italic"))
        self.query_one("#guards-title", Static).update(title)
        banner = Text(end="")
        if fails.height:
            banner.append_text(safe(f"{FAILED_MARK} recompiled: guards of earlier compiles failed", "bold"))
            for f in fails.iter_rows(named=True):
                banner.append("\n")
                banner.append_text(safe(f"  {f.get('failed_against') or '?'}: {f.get('guard') or ''}"))
        elif row.get("recompile_reason"):
            banner.append_text(safe(f"{FAILED_MARK} recompiled: {row['recompile_reason']}", "bold"))
        failed_banner = self.query_one("#guards-failed", Static)
        failed_banner.update(banner)
        failed_banner.display = bool(banner.plain)
        left_failed: set[int] = set()
        right_failed: set[int] = set()
        if fails.height and other is not None:
            right_failed = failed_guard_rows(other, fails, compare_id or "")
        left = with_marks(mine, other if self.comparing else None, left_failed)
        self.query_one("#guards-left-label", Static).update(
            safe(f"[{compile_id}] this compile" + (f"   {DIFFERS}: not in [{compare_id}]" if self.comparing else ""))
        )
        self.query_one("#guards-left", LazyTable).set_frame(left)
        pane = self.query_one("#guards-right-pane")
        right_focused = self.screen.focused is self.query_one("#guards-right", LazyTable)
        pane.display = self.comparing
        if right_focused and not self.comparing:
            # the hidden pane held the focus (d, or , . to a compile with nothing to compare):
            # the table still shown takes it, else the view's keys stop working until Tab
            self.query_one("#guards-left", LazyTable).focus()
        if self.comparing and other is not None:
            right = with_marks(other, mine, right_failed)
            label = f"[{compare_id}] compared" + (f"   {FAILED_MARK}: the guard that failed" if right_failed else "")
            self.query_one("#guards-right-label", Static).update(safe(label))
            table = self.query_one("#guards-right", LazyTable)
            first_failed = right.with_row_index("_n").filter(pl.col("mark") == FAILED_MARK)["_n"]
            table.set_frame(right, cursor=int(first_failed[0]) if first_failed.len() else 0)
        self.post_message(CompileFocused((rank, compile_id)))

    def on_lazy_table_highlighted(self, event: LazyTable.Highlighted) -> None:
        table = event.table
        if table.id not in ("guards-left", "guards-right"):
            return
        self._last_table = table.id or "guards-left"
        row = table.row(event.row)
        if row is None or self.key is None:
            return
        self._show_detail(table, row)

    def _show_detail(self, table: LazyTable, row: dict[str, Any]) -> None:
        assert self.key is not None
        left = table.id == "guards-left"
        cid = self.key[1] if left else (self.compare_id or "?")
        other_id = (self.compare_id or "?") if left else self.key[1]
        other = None
        if self.comparing:
            other = counterpart(row, self.query_one("#guards-right" if left else "#guards-left", LazyTable).frame)
        self.query_one("#guard-detail", Static).update(guard_detail(row, cid, other, other_id))

    def on_descendant_focus(self, event: Any) -> None:
        w = event.widget
        if isinstance(w, LazyTable) and w.id in ("guards-left", "guards-right"):
            self._last_table = w.id
            row = w.current
            if row is not None and self.key is not None:
                self._show_detail(w, row)

    def action_toggle_compare(self) -> None:
        if self.key is None:
            return
        if not self.compare_id:
            self.app.notify("no earlier compile of this frame to compare with", severity="warning")
            return
        self.load(*self.key, self.compare_id, compare=not self.comparing)

    def action_step(self, delta: int) -> None:
        if self.key is None:
            return
        ids = self.model.frames_of(self.key[1])
        if self.key[1] not in ids:
            return
        i = ids.index(self.key[1]) + delta
        if 0 <= i < len(ids):
            self.load(self.key[0], ids[i])
        else:
            which = "first" if delta < 0 else "last"
            self.app.notify(plain(f"[{self.key[1]}] is the {which} compile of this frame"))

    # -- hooks ------------------------------------------------------------------------
    def show(self, loc: Location) -> None:
        if loc.compile_id is not None:
            compare = True if loc.compare_id else None
            self.load(loc.rank, loc.compile_id, loc.compare_id, compare=compare)

    def location(self) -> Location:
        if self.key is None:
            return Location("guards")
        return Location("guards", rank=self.key[0], compile_id=self.key[1], compare_id=self.compare_id if self.comparing else None)

    def _table(self) -> LazyTable:
        return self.query_one(f"#{self._last_table}", LazyTable)

    def search(self, query: str, forward: bool = True) -> bool:
        t = self._table()
        i = t.find(query, start=t.cursor + (1 if forward else -1), forward=forward, keys=["kind", "code", "guard_source", "user_code", "where"])
        if i is None:
            return False
        t.move_to(i)
        return True

    def copy_text(self) -> str | None:
        row = self._table().current
        return row.get("code") if row else None

    def record_ref(self) -> tuple[str, int] | None:
        row = self._table().current
        return (row["file"], int(row["lineno"])) if row and row.get("file") and row.get("lineno") else None

    def compile_ref(self) -> CompileKey | None:
        return self.key

    def focus_main(self) -> None:
        self.query_one("#guards-right" if self.comparing else "#guards-left", LazyTable).focus()
