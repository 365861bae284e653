"""The footer of every screen: Textual's, with the way out always in sight.

Textual lists the keys from the focused widget outward (the view's own keys, then the screen's,
then the app's), so the app's `q Quit` comes last and falls off the end of an 80-column footer.
This footer shows the same keys with `q Quit` moved right after the focused view's own keys,
before the screen's (Help, Search, ...): at 80x24 it shows in every view.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

QUIT_ACTION = "quit"  # the app's binding (traceview.tui.app.TraceviewApp.BINDINGS)
SCREEN_FIRST_ACTION = "help"  # the screen's first shown key: the view's own keys come before it


class QuitFooter(Footer):
    """Textual's footer with the quit key placed before the screen's keys."""

    def compose(self) -> ComposeResult:
        widgets = list(super().compose())
        quit_keys = [w for w in widgets if isinstance(w, FooterKey) and w.action == QUIT_ACTION]
        rest = [w for w in widgets if not any(w is q for q in quit_keys)]
        at = next((i for i, w in enumerate(rest) if isinstance(w, FooterKey) and w.action == SCREEN_FIRST_ACTION), 0)
        yield from rest[:at] + quit_keys + rest[at:]
