"""The base of every view (findings, frames, guards, graphs & kernels, raw records)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.containers import Vertical
from textual.message import Message

from traceview.tui.navigation import Location

if TYPE_CHECKING:  # the Findings view is shown before polars is imported
    from traceview.tui.model import CompileKey, TraceModel


class Navigate(Message):
    """Ask the main screen to go to `location` (remembered in the history)."""

    def __init__(self, location: Location) -> None:
        super().__init__()
        self.location = location


class CompileFocused(Message):
    """A view's selection is now this compile (what the number keys open elsewhere)."""

    def __init__(self, key: CompileKey, occurrence: int | None = None) -> None:
        super().__init__()
        self.key = key
        self.occurrence = occurrence  # which compile with that id (after torch._dynamo.reset())


class View(Vertical):
    """A full-screen view over the model. Subclasses set `view_id` and implement the hooks."""

    view_id: ClassVar[str] = ""
    can_focus = False

    def __init__(self, model: TraceModel, **kwargs: object) -> None:
        super().__init__(id=self.view_id, **kwargs)  # type: ignore[arg-type]
        self.model = model

    # hooks ---------------------------------------------------------------------------
    def show(self, loc: Location) -> None:
        """Show what `loc` points at."""

    def location(self) -> Location:
        """Where this view is now (for the history)."""
        return Location(self.view_id)

    def search(self, query: str, forward: bool = True) -> bool:
        """Move to the next match of `query`; False when there is none."""
        return False

    def copy_text(self) -> str | None:
        """The current item as text (for the clipboard)."""
        return None

    def record_ref(self) -> tuple[str, int] | None:
        """The raw record (file, lineno) behind the current item."""
        return None

    def compile_ref(self) -> CompileKey | None:
        """The compile of the current item."""
        return None

    def compile_occurrence(self) -> int | None:
        """Which compile with `compile_ref`'s id (after torch._dynamo.reset() one id names
        several); None where the view does not tell them apart."""
        return None

    def clear_filters(self) -> bool:
        """Clear this view's filters; False when there were none."""
        return False

    def filters(self) -> object:
        """This view's filters, to be set again on the view rebuilt over a reloaded trace."""
        return None

    def set_filters(self, filters: object) -> None:
        """Set filters `filters()` returned (before `show`)."""

    def focus_main(self) -> None:
        """Focus the main widget of the view."""
