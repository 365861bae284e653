"""What stays where it was when a followed trace is reloaded (no Textual here).

The views are rebuilt on the new trace; the selection is found again by key, never by index
(a new compile or finding can land before the selected one): a compile by (rank, id,
occurrence), a raw record by (file, line), a graph or kernel by its id; a finding by what it is
about (`finding_key`). A scrolled list keeps its cursor row at the same height on the screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from traceview.tui.finding_rows import Finding
from traceview.tui.navigation import History, Location


def finding_key(f: Finding) -> tuple[Any, ...]:
    """What a finding is about: stays the same while its counts and wording grow."""
    return (f.kind, f.rank, f.compile_id, f.occurrence, f.compare_id, f.file, f.lineno)


def refind(old: Sequence[Finding], index: int | None, new: Sequence[Finding]) -> int | None:
    """The index in `new` of the finding `old[index]`: the same key, else the same title, else
    the first of its kind on its rank; None when it is gone (or nothing was selected)."""
    if index is None or not 0 <= index < len(old):
        return None
    f = old[index]
    key = finding_key(f)
    for test in (
        lambda g: finding_key(g) == key,
        lambda g: (g.kind, g.title) == (f.kind, f.title),
        lambda g: (g.kind, g.rank) == (f.kind, f.rank),
    ):
        hit = next((i for i, g in enumerate(new) if test(g)), None)
        if hit is not None:
            return hit
    return None


def refind_location(loc: Location, old: Sequence[Finding], new: Sequence[Finding]) -> Location:
    """`loc` in the new trace: a findings location names its finding by index, found again
    by key (the first finding when it is gone); every other location is already by key."""
    if loc.view != "findings" or loc.key is None:
        return loc
    i = refind(old, int(loc.key), new)
    return loc.but(key=str(i if i is not None else 0))


def remap_history(history: History, old: Sequence[Finding], new: Sequence[Finding]) -> History:
    """A copy of `history` whose places are found again in the new trace."""
    out = History(history.limit)
    out._items = [refind_location(loc, old, new) for loc in history._items]
    out._index = history._index
    return out


def kept_scroll(scroll: float, cursor: int | None, new_cursor: int | None) -> float:
    """Where to scroll a list so its cursor row stays at the same height on the screen (rows
    added above it push it down); without cursors, the same offset."""
    if cursor is None or new_cursor is None:
        return max(0.0, scroll)
    return max(0.0, new_cursor - (cursor - scroll))
