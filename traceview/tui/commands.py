"""Command palette provider of the main screen (MainScreen.COMMANDS): views, findings,
compile ids, graphs, kernels and Inductor files.

Ranking: an entry whose name is the query comes first, then entries that contain it, then
fuzzy matches; all of traceview's entries score above TIER, so Textual's own commands (Theme,
Maximize, Screenshot, scored by the fuzzy matcher alone, a few points per letter) come after
them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Protocol

from rich.text import Text
from textual.command import DiscoveryHit, Hit, Hits, Provider

from parsers.compile_ids import bracketed
from traceview.tui.navigation import VIEW_TITLES, Location
from traceview.tui.text import plain, safe

if TYPE_CHECKING:  # the first screen is up before polars is imported
    from traceview.tui.model import TraceModel
    from traceview.tui.report_model import ReportModel

MAX_COMPILES = 2000
TIER = 1_000_000.0  # above any fuzzy score (textual.fuzzy: a few points per query letter)
MAX_CODE = 5000  # graphs, kernels and Inductor files offered
CODE_WORDS = {"graph": "Graph", "kernel": "Kernel", "output": "Inductor file"}
PART_WORDS = {"forward": "fwd", "backward": "bwd", "inference": "inf"}


class PaletteTarget(Protocol):
    """What the palette drives: the main screen (traceview.tui.main_screen.MainScreen)."""

    model: TraceModel | ReportModel  # a ReportModel until the Trace is read

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

    def _candidates(self) -> Iterator[tuple[str, Callable[[], object], str, str]]:
        """(text, callback, help, name): `name` is what an exact query matches (a kernel's or
        graph's name, a compile id), empty for the rest."""
        main = self._main()
        if main is None:
            return
        for i, (view, title) in enumerate(VIEW_TITLES.items(), 1):
            yield f"View: {title}", partial(main.action_view, view), f"key {i}", ""
        for i, f in enumerate(main.model.findings):
            yield (
                plain(f"Finding {i + 1}: {f.tag.lower()}: {f.title}")[:160],
                partial(main.go_finding, i),
                "n / N walk the findings",
                "",
            )
        facts = main.model.report.get("facts") or {}
        for g in facts.get("unbacked_symbols") or []:  # "unbacked", "nonzero", "data-dependent" find them
            r = f"rank {g['rank']} " if g.get("rank") is not None else ""
            at = f" at {(g.get('user_file') or '?').rsplit('/', 1)[-1]}:{g.get('user_line')}" if g.get("user_line") else ""
            yield (
                plain(f"Fact: data-dependent sizes (unbacked symbols) {g.get('symbols_text') or ''} from "
                      f"{g.get('op') or '?'}{at} {r}{bracketed(g['compile_id'], g.get('occurrence'))}")[:160],
                partial(main.go, Location("frames", rank=g.get("rank"), compile_id=g["compile_id"], occurrence=g.get("occurrence"))),
                "frames view: the compile's detail lists them",
                "",
            )
        for sp in facts.get("specializations") or []:
            if not sp.get("compile_id"):
                continue
            yield (
                plain(f"Fact: specialized to a constant: {sp.get('source') or '?'} {bracketed(sp['compile_id'], sp.get('occurrence'))}")[:160],
                partial(main.go, Location("frames", rank=sp.get("rank"), compile_id=sp["compile_id"])),
                "frames view",
                "",
            )
        model = main.model
        if model.trace is None:  # the findings document alone: the rest once the Trace is read
            yield "Help: every key", main.action_help, "?", ""
            yield "Copy the current item", main.action_copy, "c", ""
            return
        rows = model.compiles.select("rank", "compile_id", "function", "status").head(MAX_COMPILES)
        for rank, cid, fn, status in rows.iter_rows():
            r = f"rank {rank} " if rank is not None else ""
            yield (
                plain(f"Compile {r}{cid} {fn or '?'} ({status})"),
                partial(main.go, Location("frames", rank=rank, compile_id=cid)),
                "frames view",
                cid,
            )
        if model.graph_tables_ready:
            code = model.code.select("what", "name", "rank", "compile_id", "part", "key").head(MAX_CODE)
            for what, name, rank, cid, part, key in code.iter_rows():
                r = f" rank {rank}" if rank is not None else ""
                p = f" {PART_WORDS[part]}" if part in PART_WORDS else ""
                yield (
                    plain(f"{CODE_WORDS.get(what, what)} {name or '?'} {bracketed(cid)}{r}{p}"),
                    partial(main.go, Location("code", key=key)),
                    "graphs & kernels view",
                    plain(name or ""),
                )
        yield "Help: every key", main.action_help, "?", ""
        yield "Copy the current item", main.action_copy, "c", ""
        yield "Write a repro of the current compile (traceview repro)", main.action_repro, "w", ""

    async def discover(self) -> Hits:
        for text, cb, help_text, _name in self._candidates():
            if text.startswith(("View:", "Finding", "Help")):
                yield DiscoveryHit(safe(text), cb, text=text, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        needle = query.strip().lower()
        for text, cb, help_text, name in self._candidates():
            score = palette_score(text, name, needle, matcher.match(text))
            if score > 0:
                yield Hit(score, _highlight(text, query), cb, text=text, help=help_text)


def palette_score(text: str, name: str, needle: str, fuzzy: float) -> float:
    """3 tiers for the entry named `needle`, 2 for one containing it, 1 for a fuzzy match (the
    fuzzy score breaks ties within a tier); 0: no match. Textual's own entries score below a
    tier."""
    if not needle:
        return 0.0
    if name and name.lower() == needle:
        return 3 * TIER + fuzzy
    if needle in text.lower():
        return 2 * TIER + fuzzy
    return TIER + fuzzy if fuzzy > 0 else 0.0


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
