"""The cursor row marked by a character, not colour alone (issue 33.5).

Under NO_COLOR, on a 16-colour theme and in a plain capture of the screen (tmux capture-pane,
a screen exported as text) a cursor shown by its background alone cannot be seen. Every list
the user walks keeps its first column for `CURSOR_MARK`: on the cursor's row (the first line of
a multi-line option), a blank elsewhere. LazyTable draws it in its own rows; `MarkedOptionList`
and `marked_line` give an OptionList and a Tree the same column.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widgets import OptionList

CURSOR_MARK = "▶"


def marked_line(strip: Strip, cursor: bool, width: int) -> Strip:
    """`strip` behind the marker column (the mark where `cursor`, else a blank, in the style
    the line starts with), cut to `width`."""
    first = next(iter(strip), None)
    style = first.style if first is not None and first.style is not None else Style()
    mark = Segment(CURSOR_MARK if cursor else " ", style)
    return Strip([mark, *strip], strip.cell_length + 1).crop(0, width)


class MarkedOptionList(OptionList):
    """An OptionList whose highlighted option carries `CURSOR_MARK` in a one-column gutter
    (as textual's SelectionList draws its check boxes): the option's text is laid out one
    column narrower, so nothing is cut."""

    def _get_left_gutter_width(self) -> int:
        return 1

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        try:
            index, line_offset = self._lines[self.scroll_offset.y + y]
        except IndexError:
            index, line_offset = -1, -1
        cursor = index == self.highlighted and line_offset == 0
        return marked_line(strip, cursor, self.scrollable_content_region.width)
