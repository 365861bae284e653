"""A table over a polars DataFrame that renders only the rows on screen.

`LazyTable` is a Line-API widget (`ScrollView` + `render_line`): it slices the frame in
chunks for the visible rows (kept in a small LRU cache), so a 100,000-row table scrolls as
fast as a 10-row one. Cell text is made printable and wrapped in `rich.text.Text`, never
parsed as markup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from traceview.tui.cursor import CURSOR_MARK
from traceview.tui.text import fit, fit_left, fit_middle, plain

CHUNK = 256



@dataclass
class Column:
    """A column of a LazyTable: `key` in the frame, its header, and a width (None: the rest)."""

    key: str
    header: str
    width: int | None = None
    fmt: Callable[[Any], str] | None = None
    min_width: int = 6
    cut: str = "right"  # where a long value is cut: "right", "left" (keeps the end) or "middle" (both ends)
    optional: bool = False  # dropped (last first) when the table is too narrow for the flex column


def _default_fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    return str(v)


class LazyTable(ScrollView, can_focus=True):
    """A scrollable, cursor-driven table over a DataFrame; only visible rows are materialised."""

    ALLOW_MAXIMIZE = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False, id="table.up"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="table.down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="table.page_up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="table.page_down"),
        Binding("home", "edge(0)", "First row", show=False, id="table.home"),
        Binding("end", "edge(1)", "Last row", show=False, id="table.end"),
        Binding("enter", "select", "Open", show=False, id="table.select"),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "lazy-table--header",
        "lazy-table--cursor",
        "lazy-table--marked",
        "lazy-table--dim",
    }
    DEFAULT_CSS = """
    LazyTable {
        height: 1fr;
        overflow-x: hidden;
        background: $surface;
        color: $foreground;
        & > .lazy-table--header { text-style: bold; color: $text-primary; background: $panel; }
        & > .lazy-table--cursor {
            color: $block-cursor-blurred-foreground;
            background: $block-cursor-blurred-background;
            /* underlined: the ANSI themes (16 colours) give the blurred cursor no colour */
            text-style: underline;
        }
        &:focus > .lazy-table--cursor {
            color: $block-cursor-foreground;
            background: $block-cursor-background;
            text-style: $block-cursor-text-style;
        }
        & > .lazy-table--marked { color: $text-error; text-style: bold; }
        & > .lazy-table--dim { color: $text-muted; }
    }
    """

    class Highlighted(Message):
        """The cursor moved to `row` (an index into the current frame)."""

        def __init__(self, table: LazyTable, row: int) -> None:
            super().__init__()
            self.table = table
            self.row = row

        @property
        def control(self) -> LazyTable:
            return self.table

    class Selected(Highlighted):
        """Enter was pressed on `row`."""

    def __init__(
        self,
        columns: list[Column],
        *,
        row_class: Callable[[dict[str, Any]], str | None] | None = None,
        empty: str = "(nothing to show)",
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.columns = columns
        self.row_class = row_class
        self.empty = empty
        self.frame: pl.DataFrame = pl.DataFrame()
        self.cursor = 0
        self._chunks: LRUCache[int, list[dict[str, Any]]] = LRUCache(16)
        self._strips: LRUCache[tuple, Strip] = LRUCache(512)

    # -- data -------------------------------------------------------------------------
    def set_frame(self, frame: pl.DataFrame, cursor: int = 0) -> None:
        """Show `frame` (nothing is copied; rows are sliced when they scroll into view)."""
        self.frame = frame
        self._chunks.clear()
        self._strips.clear()
        self.virtual_size = Size(0, frame.height + 1)
        self.cursor = max(0, min(cursor, frame.height - 1)) if frame.height else 0
        self.scroll_to(y=0, animate=False)
        self._scroll_cursor_visible()
        self.refresh()
        if frame.height:
            self.post_message(self.Highlighted(self, self.cursor))

    @property
    def row_count(self) -> int:
        return self.frame.height

    def row(self, index: int) -> dict[str, Any] | None:
        """Row `index` as a dict (from the chunk cache)."""
        if not 0 <= index < self.frame.height:
            return None
        chunk_no, offset = divmod(index, CHUNK)
        rows = self._chunks.get(chunk_no)
        if rows is None:
            rows = self.frame.slice(chunk_no * CHUNK, CHUNK).to_dicts()
            self._chunks[chunk_no] = rows
        return rows[offset]

    @property
    def current(self) -> dict[str, Any] | None:
        return self.row(self.cursor)

    def find(
        self, query: str, *, start: int = 0, forward: bool = True, keys: list[str] | None = None, also: pl.Expr | None = None
    ) -> int | None:
        """First row at or after `start` (before it, going backward) whose text contains `query`
        (case-insensitive, literal), or for which `also` (over the frame's columns) holds; wraps
        around."""
        if not query or self.frame.height == 0:
            return None
        keys = keys or [c.key for c in self.columns if c.key in self.frame.columns]
        needle = query.lower()
        cond = pl.any_horizontal(
            [pl.col(k).cast(pl.String).str.to_lowercase().str.contains(needle, literal=True).fill_null(False) for k in keys]
            + ([also] if also is not None else [])
        )
        hits = self.frame.select(cond.alias("m")).with_row_index("i").filter(pl.col("m"))["i"]
        if hits.len() == 0:
            return None
        if forward:
            after = hits.filter(hits >= start)
            return int(after[0]) if after.len() else int(hits[0])
        before = hits.filter(hits <= start)
        return int(before[-1]) if before.len() else int(hits[-1])

    # -- cursor -----------------------------------------------------------------------
    def move_to(self, index: int, *, select: bool = False) -> None:
        if self.frame.height == 0:
            return
        index = max(0, min(index, self.frame.height - 1))
        old = self.cursor
        self.cursor = index
        self._scroll_cursor_visible()
        if old != index:
            self._strips.clear()
            self.refresh()
        self.post_message(self.Highlighted(self, index))
        if select:
            self.post_message(self.Selected(self, index))

    @property
    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 2)

    def _scroll_cursor_visible(self) -> None:
        visible = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False)

    def action_cursor(self, delta: int) -> None:
        self.move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor + direction * self._page)

    def action_edge(self, end: int) -> None:
        self.move_to(self.frame.height - 1 if end else 0)

    def action_select(self) -> None:
        if self.frame.height:
            self.post_message(self.Selected(self, self.cursor))

    def on_click(self, event: Any) -> None:
        y = event.y
        if y >= 1:
            self.move_to(int(self.scroll_y) + y - 1, select=getattr(event, "chain", 1) > 1)

    def on_resize(self) -> None:
        self._strips.clear()
        self.virtual_size = Size(0, self.frame.height + 1)
        self._scroll_cursor_visible()

    # -- rendering --------------------------------------------------------------------
    def _layout(self, width: int) -> list[tuple[Column, int]]:
        """The columns shown at `width` and their widths (optional columns go first when the
        flexible columns would get less than their minimum)."""
        cols = list(self.columns)
        while True:
            fixed = sum((c.width or 0) + 1 for c in cols)
            flex = [c for c in cols if c.width is None]
            rest = max(0, width - fixed)
            share = rest // max(1, len(flex)) - 1
            optional = [c for c in cols if c.optional]
            if not flex or share >= min(c.min_width for c in flex) or not optional:
                break
            cols.remove(optional[-1])
        return [(c, c.width if c.width is not None else max(c.min_width, share)) for c in cols]

    def _line_text(self, cells: list[str], layout: list[tuple[Column, int]]) -> str:
        cutters = {"left": fit_left, "middle": fit_middle}
        return " ".join(cutters.get(col.cut, fit)(c, w) for c, (col, w) in zip(cells, layout))

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        if y == 0:
            style = self.get_component_rich_style("lazy-table--header")
            layout = self._layout(width - 1)
            line = " " + self._line_text([c.header for c, _ in layout], layout)
            return Strip([Segment(fit(line, width), base + style)], width)
        index = int(self.scroll_y) + y - 1
        if index >= self.frame.height:
            if self.frame.height == 0 and y == 1:
                dim = self.get_component_rich_style("lazy-table--dim")
                return Strip([Segment(fit(self.empty, width), base + dim)], width)
            return Strip.blank(width, base)
        key = (index, width, index == self.cursor, self.has_focus)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        row = self.row(index) or {}
        layout = self._layout(width - 1)
        cells = []
        for c, _w in layout:
            v = row.get(c.key)
            cells.append(plain((c.fmt or _default_fmt)(v)).replace("\n", " "))
        # the cursor row is marked by a character too: colour alone is lost under NO_COLOR
        # and in a plain capture of the screen
        mark = CURSOR_MARK if index == self.cursor else " "
        line = fit(mark + self._line_text(cells, layout), width)
        style: Style = base
        klass = self.row_class(row) if self.row_class else None
        if klass:
            style = style + self.get_component_rich_style(klass)
        if index == self.cursor:
            style = style + self.get_component_rich_style("lazy-table--cursor")
        strip = Strip([Segment(line, style)], width)
        self._strips[key] = strip
        return strip

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
