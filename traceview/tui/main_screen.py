"""The main screen: the seven views, the view bar, search, history and the keys that work
everywhere.

Built either on a whole `TraceModel` or, for the first screen of a trace whose findings
document is cached, on a `ReportModel` (the findings alone): then only the Findings view is
there until `trace_loaded` mounts the other six beside it. This module and the Findings view
import no polars, so that first screen is drawn before polars is imported; the other views are
imported when they are mounted.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import ContentSwitcher, Input, OptionList, Select, Static, Tree

from traceview.errors import UserError
from traceview.tui.commands import TraceviewCommands
from traceview.tui.dialogs import GoToCompile
from traceview.tui.finding_rows import Finding
from traceview.tui.findings_view import FindingsView, target_of
from traceview.tui.footer import QuitFooter
from traceview.tui.keep import kept_scroll, refind_location, remap_history
from traceview.tui.navigation import VIEW_TITLES, VIEWS, History, Location
from traceview.tui.text import plain, safe
from traceview.tui.view import CompileFocused, Navigate, View

if TYPE_CHECKING:  # imported with the views that need the Trace (polars), not before the first screen
    from collections.abc import Callable, Iterator

    from traceview.tui.help_screen import BindingGroups
    from traceview.tui.model import CompileKey, TraceModel
    from traceview.tui.report_model import ReportModel

NARROW_BELOW = 100  # columns: below this, panes stack vertically


@dataclass
class Kept:
    """Where the user was on a main screen, to be found again on the screen rebuilt over a
    reloaded trace (traceview.tui.keep: by key, never by index)."""

    view: str
    locations: dict[str, Location]  # each view's place
    filters: dict[str, object]  # each view's filters (View.filters)
    history: History
    findings: list[Finding]  # the old trace's (findings locations are indexes into them)
    current_compile: CompileKey | None
    current_occurrence: int | None
    finding_index: int
    last_query: str
    last_repro: Path | None
    focused: str | None  # the focused widget's id
    collapsed: dict[str, list[object]] = dataclasses.field(default_factory=dict)  # tree id -> data of its collapsed nodes
    scrolls: dict[str, tuple[float, int | None]] = dataclasses.field(default_factory=dict)  # id -> (scroll_y, cursor row)


def _cursor_row(w: Widget) -> int | None:
    """The row of a list's cursor (a tree's line, a table's row), or None."""
    if isinstance(w, Tree):
        return w.cursor_line if w.cursor_line >= 0 else None
    from traceview.tui.lazy_table import LazyTable

    if isinstance(w, LazyTable):
        return w.cursor if w.row_count else None
    return None


def trace_views(model: TraceModel) -> Iterator[View]:
    """The views beside the findings: they show the Trace's tables."""
    from traceview.tui.code_browser import CodeBrowser
    from traceview.tui.frames_view import FramesView
    from traceview.tui.guards_view import GuardsView
    from traceview.tui.ranks_view import RanksView
    from traceview.tui.records_view import RecordsView
    from traceview.tui.timeline_view import TimelineView

    yield FramesView(model)
    yield GuardsView(model)
    yield CodeBrowser(model)
    yield RecordsView(model)
    yield TimelineView(model)
    yield RanksView(model)


SHORT_TITLES = {"findings": "Findings", "frames": "Frames", "guards": "Guards", "code": "Code", "records": "Raw", "timeline": "Time", "ranks": "Ranks"}


class MainScreen(Screen[None]):
    """Findings, frames, guards, graphs & kernels, raw records, the timeline and the ranks, one at a time."""

    COMMANDS: ClassVar = {TraceviewCommands}  # the palette's views, findings and compile ids
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark,f1", "help", "Help", id="help"),
        Binding("slash", "search", "Search", id="search"),
        Binding("f3", "search_again(1)", "Next match", id="search_next", show=False),
        Binding("shift+f3", "search_again(-1)", "Previous match", id="search_previous", show=False),
        Binding("g", "goto", "Go to id", id="goto"),
        Binding("n", "finding(1)", "Next finding", id="next_finding"),
        Binding("N", "finding(-1)", "Previous finding", id="previous_finding", show=False),
        Binding("left_square_bracket,alt+left", "back", "Back", id="back"),
        Binding("right_square_bracket,alt+right", "forward", "Forward", id="forward", show=False),
        Binding("c", "copy", "Copy", id="copy"),
        Binding("r", "raw", "Raw record", id="raw_record"),
        Binding("w", "repro", "Write a repro of the compile", id="write_repro", show=False),
        Binding("x", "clear_filters", "Clear filters", id="clear_filters", show=False),
        Binding("1", "view('findings')", "Findings view", id="view_findings", show=False),
        Binding("2", "view('frames')", "Frames view", id="view_frames", show=False),
        Binding("3", "view('guards')", "Guards view", id="view_guards", show=False),
        Binding("4", "view('code')", "Graphs & kernels view", id="view_code", show=False),
        Binding("5", "view('records')", "Raw records view", id="view_records", show=False),
        Binding("6", "view('timeline')", "Compile timeline view", id="view_timeline", show=False),
        Binding("7", "view('ranks')", "Ranks view (each rank's collectives)", id="view_ranks", show=False),
        Binding("escape", "close_search", "Close search / leave a filter field", id="close_search", show=False),
    ]

    def __init__(
        self, model: TraceModel | ReportModel, where: str = "", *, screen_id: str = "main", kept: Kept | None = None
    ) -> None:
        """`model`: a TraceModel, or a ReportModel (the findings alone) until `trace_loaded`.
        `kept`: where the user was on the screen this one replaces (a reload)."""
        super().__init__(id=screen_id)  # screen_id: another for a second run's screen (diff_view)
        self.kept = kept
        self.model: TraceModel | ReportModel = model
        self.views_ready = model.trace is not None  # all seven views are there
        self.unavailable: str | None = None  # why the Trace could not be read (after the findings)
        self._after_load: Callable[[], object] | None = None  # asked for before the Trace was read
        self._tables_waiting = False  # the graph tables came before the views were mounted
        self.where = where
        self.history = History()
        self.current_compile: CompileKey | None = None
        self.current_occurrence: int | None = None  # which compile with that id (after a reset)
        self.finding_index = 0
        self.last_query = ""
        self._search_return = None
        self.last_repro: Path | None = None  # the last repro written by w

    # -- layout -----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="tabs")
        with ContentSwitcher(initial="findings", id="views"):
            yield FindingsView(self.model)
            if self.views_ready:
                yield from trace_views(self.model)  # type: ignore[arg-type]
        yield Input(placeholder="search (enter: find, escape: close)", id="search-bar", compact=True)
        yield QuitFooter()

    def on_mount(self) -> None:
        blink = getattr(self.app, "CURSOR_BLINK", True)
        for field in self.query(Input):
            field.cursor_blink = blink
        self.history.push(Location("findings", key="0"))
        self._narrow(self.app.size.width)
        if self.kept is not None:
            self._restore(self.kept)
        self.update_tabs()
        if self.kept is None:
            self.view.focus_main()

    # -- a reload: the same place on the new trace ----------------------------------------
    def keep(self) -> Kept:
        """Where the user is now (for the screen that replaces this one on a reload)."""
        views = list(self.query(View).results(View))
        current = self.view
        history = self.history
        history.replace(current.location())
        k = Kept(
            view=current.view_id,
            locations={v.view_id: v.location() for v in views},
            filters={v.view_id: f for v in views if (f := v.filters()) is not None},
            history=history,
            findings=list(self.model.findings),
            current_compile=self.current_compile,
            current_occurrence=self.current_occurrence,
            finding_index=self.finding_index,
            last_query=self.last_query,
            last_repro=self.last_repro,
            focused=self.focused.id if self.focused is not None else None,
        )
        for tree in self.query(Tree).results(Tree):
            if tree.id:
                k.collapsed[tree.id] = [n.data for n in _nodes(tree) if n.children and not n.is_expanded]
        for w in current.query("*").results(Widget):
            if w.id and w.is_scrollable and w.max_scroll_y > 0:
                k.scrolls[w.id] = (w.scroll_y, _cursor_row(w))
        return k

    def _restore(self, k: Kept) -> None:
        """Show what `k` kept, on this screen's (new) trace."""
        old, new = k.findings, self.model.findings
        self.history = remap_history(k.history, old, new)
        self.last_query, self.last_repro = k.last_query, k.last_repro
        loc = refind_location(Location("findings", key=str(k.finding_index)), old, new)
        self.finding_index = int(loc.key or 0)
        for view in self.query(View).results(View):
            if view.view_id in k.filters:
                view.set_filters(k.filters[view.view_id])
        for tree in self.query(Tree).results(Tree):
            closed = k.collapsed.get(tree.id or "")
            if closed:
                for n in _nodes(tree):
                    if n.data in closed:
                        n.collapse()
        # the other views' places first, the current one's last (each may say its compile)
        for view_id, here in k.locations.items():
            if view_id != k.view and here != Location(view_id):
                self.query_one(f"#{view_id}", View).show(refind_location(here, old, new))
        self.query_one("#views", ContentSwitcher).current = k.view
        self.view.show(refind_location(k.locations[k.view], old, new))
        focused = next((w for w in self.query(f"#{k.focused}") if w.focusable), None) if k.focused else None
        (focused.focus() if focused is not None else self.view.focus_main())
        self.call_after_refresh(self._restore_after, k)

    def _restore_after(self, k: Kept) -> None:
        """Once the views' messages are handled and their sizes known: the compile the number
        keys open, and the scroll of each list."""
        self.current_compile, self.current_occurrence = k.current_compile, k.current_occurrence
        ref = self.view.compile_ref()
        if ref is not None:
            self.current_compile, self.current_occurrence = ref, self.view.compile_occurrence()
        for wid, (scroll, cursor) in k.scrolls.items():
            w = next(iter(self.view.query(f"#{wid}")), None)
            if w is not None:
                w.scroll_to(y=kept_scroll(scroll, cursor, _cursor_row(w)), animate=False)
        self.kept = None

    def on_resize(self, event: object) -> None:
        self._narrow(self.size.width)
        self.update_tabs()

    def _narrow(self, width: int) -> None:
        self.set_class(width < NARROW_BELOW, "narrow")

    @property
    def view(self) -> View:
        current = self.query_one("#views", ContentSwitcher).current or "findings"
        return self.query_one(f"#{current}", View)

    def update_tabs(self) -> None:
        width = self.size.width or self.app.size.width
        live = getattr(self.app, "live_status", None)  # following the logs: "live · updated …"
        if not self.views_ready:  # the first screen, from the findings document
            live = "trace not readable" if self.unavailable is not None else "reading the trace…"
        # the full titles where they fit (with the live status, when following)
        full = sum(len(f" {i} {VIEW_TITLES[v]}  ") for i, v in enumerate(VIEWS, 1)) + (len(live) + 6 if live else 0)
        titles = VIEW_TITLES if width >= NARROW_BELOW and full < width else SHORT_TITLES
        current = self.query_one("#views", ContentSwitcher).current
        t = Text(end="")
        for i, v in enumerate(VIEWS, 1):
            label = f" {i} {titles[v]} "
            if v == current:
                t.append_text(safe(f"[{label.strip()}]", "bold reverse"))
            else:
                t.append_text(safe(f" {label.strip()} "))
            t.append(" ")
        back = ("[" if self.history.can_back else " ") + ("]" if self.history.can_forward else " ")
        tail = f" {back} " + (f"{live} · " if live else "") + f"traceview {plain(self.where)}"
        room = width - t.cell_len - 1
        if room > 12:
            t.append_text(safe(tail[:room] if len(tail) <= room else tail[: room - 1] + "…", "italic"))
        self.query_one("#tabs", Static).update(t)

    # -- navigation -------------------------------------------------------------------
    def go(self, loc: Location, *, remember: bool = True) -> None:
        """Show `loc` (and remember where we were, for back)."""
        if loc.view != "findings" and not self._when_loaded(partial(self.go, loc, remember=remember)):
            return
        if remember:
            self.history.replace(self.view.location())
        switcher = self.query_one("#views", ContentSwitcher)
        switcher.current = loc.view
        view = self.query_one(f"#{loc.view}", View)
        view.show(loc)
        view.focus_main()
        if remember:
            self.history.push(loc)
        self.update_tabs()

    def graph_tables_ready(self) -> None:
        """Guards, graphs and kernels are there: views that wait for them can show them."""
        if not self.views_ready:  # the views are being mounted: they show them then
            self._tables_waiting = True
            return
        from traceview.tui.code_browser import CodeBrowser
        from traceview.tui.guards_view import GuardsView
        from traceview.tui.timeline_view import TimelineView

        self.query_one(GuardsView).tables_ready()
        self.query_one(CodeBrowser).tables_ready()
        self.query_one(TimelineView).tables_ready()

    # -- the Trace, read after the first screen (from the cached findings document) ------
    async def trace_loaded(self, model: TraceModel) -> None:
        """The Trace is read (this screen was built on its findings document alone): the
        other views beside the findings, on this screen, where the user is; then what they
        asked for meanwhile."""
        if self.views_ready:
            return
        self.query_one(FindingsView).trace_loaded(model)
        views = list(trace_views(model))
        for v in views:
            v.display = False  # the ContentSwitcher shows only the current one
        await self.query_one("#views", ContentSwitcher).mount_all(views)
        self.model = model
        self.views_ready = True
        self.update_tabs()
        if self._tables_waiting:
            self._tables_waiting = False
            self.graph_tables_ready()
        action, self._after_load = self._after_load, None
        if action is not None:
            action()

    def trace_failed(self, why: str) -> None:
        """The Trace could not be read after its findings were shown: they stay; the other
        views say why."""
        self.unavailable = why
        self._after_load = None
        self.update_tabs()

    def _when_loaded(self, action: Callable[[], object]) -> bool:
        """True when the Trace is read; else `action` runs once it is (the user asked for a
        view of its tables while only the findings are there) and the user is told."""
        if self.views_ready:
            return True
        if self.unavailable is not None:
            self.app.notify(plain(f"the trace could not be read: {self.unavailable}"), severity="error")
            return False
        self._after_load = action
        self.app.notify("reading the trace (the findings are from the cache): this opens when it is read", timeout=4)
        return False

    @on(Navigate)
    def _on_navigate(self, event: Navigate) -> None:
        event.stop()
        self.go(event.location)

    @on(CompileFocused)
    def _on_compile_focused(self, event: CompileFocused) -> None:
        event.stop()
        self.current_compile = event.key
        self.current_occurrence = event.occurrence

    def action_view(self, view: str) -> None:
        if view == self.view.view_id or not self._when_loaded(partial(self.action_view, view)):
            return
        target = self.query_one(f"#{view}", View)
        cur, occ = self.current_compile, self.current_occurrence
        other = target.compile_ref() != cur or target.compile_occurrence() != occ
        if view in ("guards", "frames", "code", "timeline", "ranks") and cur is not None and other:
            self.go(Location(view, rank=cur[0], compile_id=cur[1], occurrence=occ))
            return
        self.go(target.location())

    def action_back(self) -> None:
        self.history.replace(self.view.location())
        loc = self.history.back()
        if loc is None:
            self.app.notify("nothing to go back to")
            return
        self.go(loc, remember=False)

    def action_forward(self) -> None:
        self.history.replace(self.view.location())
        loc = self.history.forward()
        if loc is None:
            self.app.notify("nothing to go forward to")
            return
        self.go(loc, remember=False)

    # -- findings ---------------------------------------------------------------------
    def go_finding(self, index: int) -> None:
        fs = self.model.findings
        if not fs:
            self.app.notify("no findings")
            return
        self.finding_index = index % len(fs)
        f = fs[self.finding_index]
        findings = self.query_one(FindingsView)
        findings.select(self.finding_index)
        if self.view.view_id == "findings":
            return
        if f.compile_id:
            self.go(target_of(f))
        elif f.file and f.lineno:
            self.go(Location("records", file=f.file, lineno=f.lineno))
        self.app.notify(plain(f"finding {self.finding_index + 1}/{len(fs)}: {f.title}"), timeout=4)

    def action_finding(self, delta: int) -> None:
        if self.view.view_id == "findings":
            idx = self.query_one(FindingsView).index
            if idx is not None:
                self.finding_index = idx
        self.go_finding(self.finding_index + delta)

    # -- search -----------------------------------------------------------------------
    def action_search(self) -> None:
        bar = self.query_one("#search-bar", Input)
        self._search_return = self.focused
        bar.add_class("visible")
        bar.value = self.last_query
        bar.focus()

    def action_close_search(self) -> None:
        bar = self.query_one("#search-bar", Input)
        if bar.has_class("visible"):
            bar.remove_class("visible")
            self._restore_focus()
        elif isinstance(self.focused, (Input, Select)):
            self.view.focus_main()  # leave a filter field

    def _restore_focus(self) -> None:
        target = self._search_return
        self._search_return = None
        if target is not None and target.is_attached:
            target.focus()
        else:
            self.view.focus_main()

    @on(Input.Submitted, "#search-bar")
    def _on_search(self, event: Input.Submitted) -> None:
        event.stop()
        bar = self.query_one("#search-bar", Input)
        bar.remove_class("visible")
        self._restore_focus()
        self.last_query = event.value
        if event.value:
            self._search(1)

    def action_search_again(self, direction: int) -> None:
        if not self.last_query:
            self.action_search()
            return
        self._search(direction)

    def _search(self, direction: int) -> None:
        q = self.last_query
        if not self.view.search(q, forward=direction > 0):
            self.app.notify(plain(f"no match for {q!r} in {VIEW_TITLES[self.view.view_id].lower()}"), severity="warning")

    # -- items ------------------------------------------------------------------------
    def action_copy(self) -> None:
        text = self.view.copy_text()
        if not text:
            self.app.notify("nothing to copy here", severity="warning")
            return
        self.app.copy_to_clipboard(text)
        lines = text.count("\n") + 1
        self.app.notify(f"copied {len(text)} characters ({lines} line{'s' if lines != 1 else ''}) to the clipboard")

    def action_raw(self) -> None:
        ref = self.view.record_ref()
        if ref is None:
            self.app.notify("no raw record for this item", severity="warning")
            return
        if self.view.view_id == "records":
            self.query_one("#records", View).query_one("#record-payload").focus()
            return
        self.go(Location("records", file=ref[0], lineno=ref[1]))

    def action_repro(self) -> None:
        """Write a script reproducing the current compile (traceview.workflow.repro.save_repro) in a
        worker thread; the path (or why it cannot be reproduced) comes back as a message."""
        key = self.view.compile_ref() or self.current_compile
        if key is None:
            self.app.notify("no compile selected: pick one in frames (2) or go to one (g)", severity="warning")
            return
        if not self._when_loaded(self.action_repro):
            return
        directory = repro_directory(self.model.trace.inputs)  # type: ignore[union-attr]
        self.app.notify(plain(f"writing a repro of [{key[1]}]" + (f" rank {key[0]}" if key[0] is not None else "") + "…"))
        self.run_worker(partial(self._write_repro, key, directory), thread=True, group="repro")

    def _write_repro(self, key: CompileKey, directory: Path) -> None:
        """Worker thread: build and write the repro, then report on the UI thread."""
        from traceview.workflow.repro import save_repro

        path: Path | None = None
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path, repro = save_repro(self.model.trace, key[1], rank=key[0], directory=directory)
            message, severity = f"wrote {path} ({repro.summary})", "information"
        except UserError as exc:  # ReproUnavailable among them: the log cannot reproduce it
            message, severity = f"no repro of [{key[1]}]: {exc}", "warning"
        except Exception as exc:  # another module's failure: reported, never a crash
            message, severity = f"the repro of [{key[1]}] failed: {type(exc).__name__}: {exc}", "error"
        self.app.call_from_thread(self._repro_written, path, message, severity)

    def _repro_written(self, path: Path | None, message: str, severity: str) -> None:
        self.last_repro = path
        self.app.notify(plain(message), severity=severity, timeout=12)  # type: ignore[arg-type]

    def action_clear_filters(self) -> None:
        if not self.view.clear_filters():
            self.app.notify("no filters to clear")

    def action_goto(self) -> None:
        if not self._when_loaded(self.action_goto):
            return
        examples = self.model.compiles["compile_id"].unique(maintain_order=True).head(4).to_list()

        def done(value: str | None) -> None:
            if not value:
                return
            rank = self.current_compile[0] if self.current_compile else None
            hit = self.model.find_compile(value, rank)  # type: ignore[union-attr]
            if hit is None:
                self.app.notify(plain(f"no compile {value!r}"), severity="warning")
                return
            # stay in the guards or graphs view when it can show the compile; else the frames
            here = self.view.view_id
            self.go(Location(here if here in ("guards", "code") else "frames", rank=hit[0], compile_id=hit[1]))

        self.app.push_screen(GoToCompile(examples), done)

    def action_help(self) -> None:
        from traceview.tui.help_screen import HelpScreen

        self.app.push_screen(HelpScreen(binding_groups(self.app)))


def _nodes(tree: Tree) -> list[Any]:
    """Every node of `tree` below its root, depth first."""
    out: list[Any] = []
    stack = list(reversed(tree.root.children))
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.children))
    return out


def repro_directory(inputs: Any) -> Path:
    """Where w writes repros: $TRACEVIEW_REPRO_DIR, else the current directory; a temporary
    directory instead when that is inside the input (the input is never modified)."""
    chosen = Path(os.environ.get("TRACEVIEW_REPRO_DIR") or os.getcwd()).resolve()
    root = getattr(inputs, "root", None)
    if root:
        r = Path(root).resolve()
        r = r if r.is_dir() else r.parent
        if chosen == r or r in chosen.parents:
            return Path(tempfile.gettempdir()) / "traceview-repros"
    return chosen


def _not_help_quit(bindings: list[BindingType]) -> list[BindingType]:
    return [b for b in bindings if not (isinstance(b, Binding) and b.action == "help_quit")]


def binding_groups(app: App) -> BindingGroups:
    """Every group of keys the UI has, in the order the help lists them."""
    from traceview.tui.code_browser import CodeBrowser
    from traceview.tui.code_view import CodeView
    from traceview.tui.frames_view import FramesView
    from traceview.tui.guards_view import GuardsView
    from traceview.tui.lazy_table import LazyTable
    from traceview.tui.loading_screen import LoadingScreen
    from traceview.tui.records_view import RecordsView
    from traceview.tui.timeline_view import TimelineView

    return [
        # traceview's own keys before Textual's generic ones
        # (Textual's own ctrl+c, help_quit, is replaced by the app's quit_twice)
        ("Everywhere", [*MainScreen.BINDINGS, *type(app).BINDINGS, *_not_help_quit(App.BINDINGS), *Screen.BINDINGS]),
        ("Findings", [*FindingsView.BINDINGS, *OptionList.BINDINGS]),
        ("Frames and compiles", [*FramesView.BINDINGS, *Tree.BINDINGS]),
        ("Guards", GuardsView.BINDINGS),
        ("Graphs and kernels", CodeBrowser.BINDINGS),
        ("Raw records", RecordsView.BINDINGS),
        ("Compile timeline", TimelineView.BINDINGS),
        ("In a list or table", LazyTable.BINDINGS),
        ("In code and payloads", CodeView.BINDINGS),
        ("Scrolling (every list and pane)", ScrollableContainer.BINDINGS),
        ("While loading", LoadingScreen.BINDINGS),
    ]
