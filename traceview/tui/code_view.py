"""A read-only, searchable code/text view that renders only the lines on screen.

`CodeView` is a Line-API widget: the text is split into lines once (made printable) and
highlighted with Pygments one block of lines at a time as blocks scroll into view (a few
milliseconds each; lexing a whole 50,000-line output code would take seconds). Tokens map to
component classes styled with theme variables, so colours follow the theme (and NO_COLOR).
"""

from __future__ import annotations

import bisect
import re
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from traceview.tui.text import plain

_TOKEN_CLASSES = (
    ("Comment", "code-view--comment"),
    ("Literal.String", "code-view--string"),
    ("Literal.Number", "code-view--number"),
    ("Keyword", "code-view--keyword"),
    ("Name.Function", "code-view--function"),
    ("Name.Class", "code-view--function"),
    ("Name.Decorator", "code-view--function"),
    ("Name.Builtin", "code-view--builtin"),
)


def _token_class(ttype: Any) -> str | None:
    name = str(ttype)[len("Token.") :] if str(ttype).startswith("Token.") else str(ttype)
    for prefix, klass in _TOKEN_CLASSES:
        if name == prefix or name.startswith(prefix + "."):
            return klass
    return None


# strings and comments, to find where Python triple-quoted strings open and close
_PY_SCAN = re.compile(r"#[^\n]*|\"\"\"|\'\'\'|\"(?:\\.|[^\"\\\n])*\"|\'(?:\\.|[^\'\\\n])*\'")
BLOCK = 128  # lines highlighted together


def triple_string_state(text: str, line_starts: list[int]) -> list[str | None]:
    """Per line: the triple quote (\"\"\" or \'\'\') of a string that is still open at the start of the
    line, else None. One regex pass (C speed), so highlighting can start at any block."""
    spans: list[tuple[int, int, str]] = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _PY_SCAN.search(text, pos)
        if m is None:
            break
        tok = m.group()
        if tok in ('"""', "'''"):
            close = text.find(tok, m.end())
            end = n if close < 0 else close + 3
            spans.append((m.start(), end, tok))
            pos = end
        else:
            pos = m.end()
    out: list[str | None] = [None] * len(line_starts)
    for open_at, close_at, delim in spans:
        first = bisect.bisect_right(line_starts, open_at)
        last = bisect.bisect_left(line_starts, close_at)
        for i in range(first, min(last, len(out))):
            out[i] = delim
    return out


def highlight_block(lines: list[str], language: str, prefix: str = "") -> list[list[tuple[int, int, str]]]:
    """(start, end, component class) spans per line of `lines`, lexed as one piece of text.

    `prefix` (an opening triple quote) puts the lexer in the state the block starts in."""
    from pygments.lexers import get_lexer_by_name

    lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False)
    text = prefix + "\n".join(lines)
    starts = [len(prefix)]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    out: list[list[tuple[int, int, str]]] = [[] for _ in lines]
    for index, ttype, value in lexer.get_tokens_unprocessed(text):
        klass = _token_class(ttype)
        if klass is None or not value:
            continue
        pos, end = max(index, len(prefix)), index + len(value)
        line = max(0, bisect.bisect_right(starts, pos) - 1)
        while pos < end and line < len(starts):
            line_end = starts[line] + len(lines[line])
            seg_end = min(end, line_end)
            if seg_end > pos:
                out[line].append((pos - starts[line], seg_end - starts[line], klass))
            pos = line_end + 1
            line += 1
    return out


class CodeView(ScrollView, can_focus=True):
    """Lines of code or log text with a cursor line, search and lazy highlighting."""

    ALLOW_MAXIMIZE = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False, id="code.up"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="code.down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="code.page_up"),
        Binding("pagedown,space", "page(1)", "Page down", show=False, id="code.page_down"),
        Binding("home", "edge(0)", "Top", show=False, id="code.home"),
        Binding("end", "edge(1)", "Bottom", show=False, id="code.end"),
        Binding("left,h", "hscroll(-8)", "Scroll left", show=False, id="code.left"),
        Binding("right,l", "hscroll(8)", "Scroll right", show=False, id="code.right"),
        Binding("shift+left,H", "hscroll_page(-1)", "Page left", show=False, id="code.page_left"),
        Binding("shift+right,L", "hscroll_page(1)", "Page right", show=False, id="code.page_right"),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "code-view--gutter",
        "code-view--cursor",
        "code-view--match",
        "code-view--keyword",
        "code-view--string",
        "code-view--comment",
        "code-view--number",
        "code-view--function",
        "code-view--builtin",
    }
    DEFAULT_CSS = """
    CodeView {
        height: 1fr;
        background: $surface;
        color: $foreground;
        & > .code-view--gutter { color: $text-muted; }
        & > .code-view--cursor { background: $block-cursor-blurred-background; }
        &:focus > .code-view--cursor { background: $block-hover-background; text-style: bold; }
        & > .code-view--match { color: $block-cursor-foreground; background: $block-cursor-background; text-style: bold; }
        & > .code-view--keyword { color: $text-accent; text-style: bold; }
        & > .code-view--string { color: $text-success; }
        & > .code-view--comment { color: $text-muted; text-style: italic; }
        & > .code-view--number { color: $text-warning; }
        & > .code-view--function { color: $text-primary; text-style: bold; }
        & > .code-view--builtin { color: $text-secondary; }
    }
    """

    class CursorMoved(Message):
        def __init__(self, view: CodeView, line: int) -> None:
            super().__init__()
            self.view = view
            self.line = line

        @property
        def control(self) -> CodeView:
            return self.view

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.lines: list[str] = [""]
        self.language: str | None = None
        self.cursor = 0
        self.query = ""
        self._blocks: LRUCache[int, list[list[tuple[int, int, str]]]] = LRUCache(64)
        self._string_state: list[str | None] | None = None
        self._gutter = 2
        self._strips: LRUCache[tuple, Strip] = LRUCache(512)
        self._lower: list[str] | None = None

    # -- content ----------------------------------------------------------------------
    def set_text(self, text: str | None, *, language: str | None = None, line: int = 0) -> None:
        """Show `text` (made printable), highlighted as `language` block by block as it scrolls
        into view (Pygments; a Python block that starts inside a triple-quoted string is lexed
        as such)."""
        self.lines = plain(text or "").split("\n")
        self.language = language
        self._blocks.clear()
        self._string_state = None
        self._lower = None
        self._strips.clear()
        self._gutter = len(str(len(self.lines))) + 1
        longest = max((len(s) for s in self.lines), default=0)
        self.virtual_size = Size(longest + self._gutter + 1, len(self.lines))
        self.cursor = 0
        self.scroll_to(0, 0, animate=False)
        self.go_to_line(line)
        self.refresh()

    def _spans_of(self, index: int) -> list[tuple[int, int, str]]:
        """Highlight spans of line `index` (its block is lexed on first use)."""
        if not self.language:
            return []
        block_no = index // BLOCK
        block = self._blocks.get(block_no)
        if block is None:
            first = block_no * BLOCK
            lines = self.lines[first : first + BLOCK]
            prefix = ""
            if self.language == "python":
                if self._string_state is None:
                    starts = [0]
                    for line in self.lines[:-1]:
                        starts.append(starts[-1] + len(line) + 1)
                    self._string_state = triple_string_state("\n".join(self.lines), starts)
                prefix = self._string_state[first] or ""
            try:
                block = highlight_block(lines, self.language, prefix)
            except Exception:  # an unknown language or a lexer error: plain text
                block = [[] for _ in lines]
            self._blocks[block_no] = block
        return block[index - block_no * BLOCK]
    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def highlighted(self) -> bool:
        """Whether the text is shown with syntax highlighting."""
        return bool(self.language)

    @property
    def current_line(self) -> str:
        return self.lines[self.cursor] if 0 <= self.cursor < len(self.lines) else ""

    # -- cursor and search ------------------------------------------------------------
    def go_to_line(self, line: int, *, center: bool = False) -> None:
        self.cursor = max(0, min(line, len(self.lines) - 1))
        height = max(1, self.scrollable_content_region.height)
        top = int(self.scroll_y)
        if center:
            self.scroll_to(y=max(0, self.cursor - height // 3), animate=False)
        elif self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False)
        self.refresh()
        self.post_message(self.CursorMoved(self, self.cursor))

    def find(self, query: str, *, forward: bool = True, from_line: int | None = None) -> int | None:
        """Move the cursor to the next (previous) line containing `query` (case-insensitive)."""
        self.query = query
        self._strips.clear()
        self.refresh()
        if not query:
            return None
        if self._lower is None:
            self._lower = [s.lower() for s in self.lines]
        needle = query.lower()
        n = len(self.lines)
        start = self.cursor if from_line is None else from_line
        order = (
            [*range(start + 1, n), *range(0, start + 1)] if forward else [*range(start - 1, -1, -1), *range(n - 1, start - 1, -1)]
        )
        for i in order:
            if needle in self._lower[i]:
                self.go_to_line(i, center=True)
                col = self._lower[i].index(needle)
                width = max(1, self.scrollable_content_region.width - self._gutter)
                if col < self.scroll_x or col > self.scroll_x + width - len(needle):
                    self.scroll_to(x=max(0, col - width // 3), animate=False)
                return i
        return None

    def action_cursor(self, delta: int) -> None:
        self.go_to_line(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self.go_to_line(self.cursor + direction * max(1, self.scrollable_content_region.height - 1))

    def action_edge(self, end: int) -> None:
        self.go_to_line(len(self.lines) - 1 if end else 0)

    def action_hscroll(self, delta: int) -> None:
        self.scroll_to(x=max(0, self.scroll_x + delta), animate=False)

    @property
    def page_width(self) -> int:
        """Columns one page left or right moves: the text's width less a few for context."""
        return max(8, self.scrollable_content_region.width - self._gutter - 4)

    def action_hscroll_page(self, direction: int) -> None:
        self.action_hscroll(direction * self.page_width)

    def on_click(self, event: Any) -> None:
        self.go_to_line(int(self.scroll_y) + event.y)

    def on_resize(self) -> None:
        self._strips.clear()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    # -- rendering --------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        index = int(self.scroll_y) + y
        if index >= len(self.lines):
            return Strip.blank(width, base)
        sx = int(self.scroll_x)
        key = (index, sx, width, index == self.cursor, self.has_focus, self.query)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        line_style: Style = base
        if index == self.cursor:
            line_style = base + self.get_component_rich_style("code-view--cursor")
        gutter = Text(f"{index + 1:>{self._gutter - 1}} ", style=base + self.get_component_rich_style("code-view--gutter"), end="")
        line = self.lines[index]
        text = Text(line, style=line_style, end="")
        for start, end, klass in self._spans_of(index):
            text.stylize(self.get_component_rich_style(klass, partial=True), start, end)
        if self.query:
            low, needle = line.lower(), self.query.lower()
            pos = low.find(needle)
            match_style = self.get_component_rich_style("code-view--match", partial=True)
            while pos >= 0:
                text.stylize(match_style, pos, pos + len(needle))
                pos = low.find(needle, pos + len(needle))
        body_width = max(0, width - self._gutter)
        body = Strip(text.render(self.app.console)).crop_extend(sx, sx + body_width, line_style)
        strip = Strip.join([Strip(gutter.render(self.app.console)), body]).simplify()
        self._strips[key] = strip
        return strip
