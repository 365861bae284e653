"""Small modal prompts: go to a compile id."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from traceview.tui.text import safe


class GoToCompile(ModalScreen[str | None]):
    """Ask for a compile id (`0/1`, `[0/1_1]`, `rank 1 0/1`)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="goto.cancel")]

    def __init__(self, examples: list[str]) -> None:
        super().__init__()
        self.examples = examples

    def compose(self) -> ComposeResult:
        with Vertical(id="goto-box", classes="dialog"):
            yield Static(safe("Go to compile id", "bold"))
            ex = ", ".join(self.examples[:6])
            yield Static(safe(f"e.g. {ex}" if ex else "e.g. 0/1, [0/1_1], rank 1 0/1", "italic"))
            yield Input(placeholder="compile id", id="goto-input")

    def on_mount(self) -> None:
        field = self.query_one(Input)
        field.cursor_blink = getattr(self.app, "CURSOR_BLINK", True)
        field.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
