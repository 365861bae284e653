"""Pick one run when a directory holds several (never guess): ranks, start time, files."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from parsers.discover import Inputs
from traceview.analyze.findings import ranks_text
from traceview.tui.text import safe


@dataclass
class RunInfo:
    """One run found by `discover`: its trace files (all ranks) and when it started."""

    run: int
    paths: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    start: str = ""
    bytes: int = 0

    def label(self) -> Text:
        ranks = ranks_text(self.ranks).strip() or "one process (no rank)"
        start = self.start or "start unknown"
        if len(start) >= 4 and start[:4].isdigit():
            start = f"{start[:2]}-{start[2:4]}{start[4:]}"  # MMDD -> MM-DD
        n = len(self.paths)
        t = Text(end="")
        t.append_text(safe(f"run {self.run + 1}", "bold"))
        t.append_text(safe(f"  started {start[:14]}  {ranks}  {n} file{'s' if n != 1 else ''}  {self.bytes / 1e6:.1f} MB"))
        for p in self.paths[:4]:
            t.append("\n    ")
            t.append_text(safe(p.rsplit("/", 1)[-1], "italic"))
        if n > 4:
            t.append_text(safe(f"\n    … and {n - 4} more", "italic"))
        return t


def runs_of(inputs: Inputs) -> list[RunInfo]:
    """The runs of `inputs`, newest last."""
    runs: dict[int, RunInfo] = {}
    for t in inputs.traces:
        r = runs.setdefault(t.run, RunInfo(t.run))
        r.paths.append(t.path)
        if t.rank is not None and t.rank not in r.ranks:
            r.ranks.append(t.rank)
        if t.start and (not r.start or t.start < r.start):
            r.start = t.start
        r.bytes += t.size
    for r in runs.values():
        r.ranks.sort()
    return [runs[k] for k in sorted(runs)]


class RunPicker(Screen[RunInfo | None]):
    """A list of runs; Enter opens one, Escape quits."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Quit", id="runs.cancel"),
    ]

    def __init__(self, runs: list[RunInfo], where: str) -> None:
        super().__init__(id="run-picker")
        self.runs = runs
        self.where = where

    def compose(self) -> ComposeResult:
        yield Static(
            safe(f"{self.where} holds {len(self.runs)} runs. Pick one (--latest opens the newest without asking):", "bold"),
            classes="view-title",
        )
        yield OptionList(*[Option(r.label(), id=str(i)) for i, r in enumerate(self.runs)], id="run-list")
        yield Footer()

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
        ol.highlighted = len(self.runs) - 1
        ol.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.runs[int(event.option.id or 0)])

    def action_cancel(self) -> None:
        self.dismiss(None)
