"""The screen shown while the trace is parsed (in a worker thread); Escape cancels."""

from __future__ import annotations

import time
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Center, Middle, Vertical
from textual.screen import Screen
from textual.widgets import Footer, LoadingIndicator, Static

from traceview.tui.text import safe


class LoadingScreen(Screen[None]):
    """Progress of the load: the stage and the elapsed time, a few updates a second."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.cancel_loading", "Cancel", id="loading.cancel"),
    ]

    def __init__(self, what: str) -> None:
        super().__init__(id="loading")
        self.what = what
        self.stage = "starting"
        self._t0 = time.monotonic()

    def compose(self) -> ComposeResult:
        with Middle(), Center(), Vertical(id="loading-box"):
            yield Static(safe("traceview", "bold"), id="loading-title")
            yield Static(safe(f"loading {self.what}"), id="loading-what")
            yield LoadingIndicator()
            yield Static(id="loading-stage")
            yield Static(safe("Escape cancels", "italic"), id="loading-hint")
        yield Footer()

    def on_mount(self) -> None:
        self._tick()
        self.set_interval(0.25, self._tick)

    def set_stage(self, stage: str) -> None:
        self.stage = stage
        self._tick()

    def _tick(self) -> None:
        for w in self.query("#loading-stage").results(Static):
            w.update(safe(f"{self.stage}  ({time.monotonic() - self._t0:.1f}s)"))
