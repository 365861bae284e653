"""Command palette provider of the main screen (MainScreen.COMMANDS): views, findings and
compile ids."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Protocol

from rich.text import Text
from textual.command import DiscoveryHit, Hit, Hits, Provider

from traceview.tui.model import KIND_TITLES, TraceModel
from traceview.tui.navigation import VIEW_TITLES, Location
from traceview.tui.text import plain, safe

MAX_COMPILES = 2000


class PaletteTarget(Protocol):
    """What the palette drives: the main screen (traceview.tui.main_screen.MainScreen)."""

    model: TraceModel

    def action_view(self, view: str) -> None: ...
    def go_finding(self, index: int) -> None: ...
    def go(self, location: Location) -> None: ...
    def action_help(self) -> None: ...
    def action_copy(self) -> None: ...
    def action_repro(self) -> None: ...


class TraceviewCommands(Provider):
    """Go to a view, a finding or a compile id from the palette."""

    def _main(self) -> PaletteTarget | None:
        """The screen the palette was opened over (a MainScreen: its COMMANDS name this)."""
        screen = self.screen
        return screen if hasattr(screen, "model") else None  # type: ignore[return-value]

    def _candidates(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        main = self._main()
        if main is None:
            return
        for i, (view, title) in enumerate(VIEW_TITLES.items(), 1):
            yield f"View: {title}", partial(main.action_view, view), f"key {i}"
        for i, f in enumerate(main.model.findings):
            yield (
                plain(f"Finding {i + 1}: {KIND_TITLES[f.kind].lower()}: {f.title}")[:160],
                partial(main.go_finding, i),
                "n / N walk the findings",
            )
        rows = main.model.compiles.select("rank", "compile_id", "function", "status").head(MAX_COMPILES)
        for rank, cid, fn, status in rows.iter_rows():
            r = f"rank {rank} " if rank is not None else ""
            yield (
                plain(f"Compile {r}{cid} {fn or '?'} ({status})"),
                partial(main.go, Location("frames", rank=rank, compile_id=cid)),
                "frames view",
            )
        yield "Help: every key", main.action_help, "?"
        yield "Copy the current item", main.action_copy, "c"
        yield "Write a repro of the current compile (traceview repro)", main.action_repro, "w"

    async def discover(self) -> Hits:
        for text, cb, help_text in self._candidates():
            if text.startswith(("View:", "Finding", "Help")):
                yield DiscoveryHit(safe(text), cb, text=text, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, cb, help_text in self._candidates():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, _highlight(text, query), cb, text=text, help=help_text)


def _highlight(text: str, query: str) -> Text:
    """`text` as literal Text with the query's characters in order made bold (no markup)."""
    t = safe(text)
    low = text.lower()
    pos = 0
    for ch in query.lower():
        if ch.isspace():
            continue
        i = low.find(ch, pos)
        if i < 0:
            break
        t.stylize("bold underline", i, i + 1)
        pos = i + 1
    return t
