"""The Textual app: built from a loader (a callable returning a `Trace`) or a `Trace`.

The loader (traceview.ingest.loading, the same path as every command's) runs in a worker thread
while the loading screen shows its progress; the main screen appears when the trace and its
findings are ready. Widgets never see a path, only the model.

When the inputs are unchanged since their findings document was kept beside the parse cache
(traceview.output.findings_document), the first screen is those findings, drawn before the
Trace is read or polars imported (a `ReportModel`); the Trace is loaded in the worker thread
after that first paint and the main screen then mounts the other views (MainScreen.
trace_loaded). A Trace whose inputs changed meanwhile is judged again and replaces the screen
as a reload does: a document is never shown for inputs it does not describe.

Following (`traceview open DIR`, unless --no-follow): a thread looks at the inputs about once a
second (traceview.live.follow); when complete records landed it loads the trace again through the
same path (without the parse cache), builds the model, and hands it to the UI thread, which
rebuilds the main screen on it where the user was (MainScreen.keep: the same view, selection by
key, filters, scroll). The tab bar says "live · updated HH:MM:SS" (or "frozen").
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import App
from textual.binding import Binding, BindingType
from textual.widgets import Input

from traceview.errors import EXIT_CANCELLED, EXIT_USAGE, debugging, error_line
from traceview.ingest.loading import LoadOptions, discover_inputs, exports_of, load_trace
from traceview.live.follow import Follow, follow_loop
from traceview.printable import one_line
from traceview.tui.loading_screen import LoadingScreen
from traceview.tui.main_screen import MainScreen
from traceview.tui.run_picker import RunInfo, RunPicker, runs_of
from traceview.tui.text import plain

if TYPE_CHECKING:  # polars: imported by the loader thread, after the first screen
    from traceview.output.findings_document import CachedReport
    from traceview.trace import Trace
    from traceview.tui.model import TraceModel

Loader = Callable[[], "Trace"]


def _few_colours() -> bool:
    """A terminal that says it has fewer than 256 colours (no COLORTERM, TERM without 256)."""
    if os.environ.get("COLORTERM"):
        return False
    term = os.environ.get("TERM", "")
    return bool(term) and "256" not in term and "truecolor" not in term and "direct" not in term



FIRST_PAINT_S = 0.4  # head start of the first screen over the background table build
QUIT_AGAIN_S = 3.0  # ctrl+c quits when pressed again within this many seconds

class TraceviewApp(App[int]):
    """Browse one trace: findings first, then frames, guards, graphs & kernels, raw records."""

    TITLE = "traceview"
    CSS_PATH = "app.tcss"
    CURSOR_BLINK: ClassVar[bool] = True  # False: text inputs show a steady cursor (snapshot tests)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("ctrl+c", "quit_twice", "Quit (press twice)", id="quit_twice", show=False, priority=True),
        Binding("ctrl+p", "command_palette", "Command palette", id="command_palette", show=False, priority=True),
    ]

    def __init__(
        self,
        source: Trace | Loader | None = None,
        *,
        runs: list[RunInfo] | None = None,
        load_run: Callable[[RunInfo], Trace] | None = None,
        where: str = "",
        follow: Follow | None = None,
        reload: Loader | None = None,
        frozen: bool = False,
        first: CachedReport | None = None,
    ) -> None:
        """`source`: a Trace, or a loader returning one. With `runs` (several runs found) the
        user picks one first and `load_run(run)` loads it. `follow` and `reload`: follow the
        inputs as they grow, loading them again with `reload` (for a picked run,
        `load_run(run, fresh=True)`); `frozen`: say that it does not (--no-follow). `first`:
        the findings document of `source`'s inputs, read before it: the first screen shows it
        while the loader runs."""
        super().__init__()
        self.first = first
        self.follow = follow
        self.reload = reload
        self.live_status: str | None = "frozen" if frozen else None
        self.reloads = 0  # new traces shown
        self._pending: TraceModel | None = None  # a reloaded model waiting for a modal to close
        self._pending_reload = True  # False: not a reload but the first Trace, judged again
        self._stop_follow = threading.Event()
        self.source = source
        self.runs = runs
        self.load_run = load_run
        self.where = where
        self.model: TraceModel | None = None
        self.cancelled = False
        self.error: str | None = None
        self.timings: dict[str, float] = {}
        self._t0 = time.monotonic()
        self._loader_thread: threading.Thread | None = None
        self._ctrl_c_at: float | None = None
        theme = os.environ.get("TRACEVIEW_THEME")
        if theme:
            self.theme = theme
        elif _few_colours():
            self.theme = "ansi-dark"

    # -- startup ----------------------------------------------------------------------
    def on_mount(self) -> None:
        if self.runs and len(self.runs) > 1 and self.load_run is not None:
            self.push_screen(RunPicker(self.runs, self.where), self._picked)
            return
        self._start(self.source)

    def _picked(self, run: RunInfo | None) -> None:
        if run is None:
            self.cancelled = True
            self.exit(return_code=EXIT_CANCELLED, message=Text("traceview: no run picked"))
            return
        assert self.load_run is not None
        load_run = self.load_run
        self.where = f"{self.where} (run {run.run + 1})"
        if self.follow is not None:
            self.reload = lambda: load_run(run, fresh=True)  # type: ignore[call-arg]
        self.first = None  # (build_app reads no document when there is a run to pick)
        self._start(lambda: load_run(run))

    def _start(self, source: Trace | Loader | None) -> None:
        if source is None:
            self.exit(return_code=EXIT_USAGE, message=Text("traceview: nothing to open"))
            return
        if self.first is not None:  # the findings first, from their document; the Trace after the paint
            self.call_later(self._first_screen, source, self.first)
            return
        self.push_screen(LoadingScreen(self.where or "trace"))
        self._start_loader(source)

    async def _first_screen(self, source: Trace | Loader, first: CachedReport) -> None:
        """The findings of the cached document, then the loader once they are painted (its
        imports and tables would hold the GIL while the first screen is laid out and drawn)."""
        from traceview.tui.report_model import ReportModel

        await self.push_screen(MainScreen(ReportModel.of(first.report), self.where))  # mounted
        self.timings["first_screen"] = time.monotonic() - self._t0
        self.call_after_refresh(self._start_loader, source)  # after the refresh that draws it

    def _start_loader(self, source: Trace | Loader) -> None:
        if self.cancelled:
            return
        self._loader_thread = threading.Thread(target=self._load, args=(source,), name="traceview-load", daemon=True)
        self._loader_thread.start()

    def _progress(self, stage: str) -> None:
        def show() -> None:
            if isinstance(self.screen, LoadingScreen):
                self.screen.set_stage(stage)

        self._from_thread(show)

    def _from_thread(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.cancelled or not self.is_running:
            return
        try:
            self.call_from_thread(fn, *args)
        except RuntimeError:  # the app has exited meanwhile
            pass

    def _load(self, source: Trace | Loader) -> None:
        """Worker thread: parse (or read the cache), build the model, then the graph tables.
        With `self.first` (its findings on screen already) its report is used when the Trace's
        inputs are still those it judged."""
        first = self.first
        try:
            from traceview.trace import Trace
            from traceview.tui.model import TraceModel

            if isinstance(source, Trace):
                trace = source
            else:
                if self.follow is not None:
                    self._progress("looking at the logs")
                    self.follow.seed()  # what lands from now on is reloaded
                self._progress("parsing the logs (or reading the parse cache)")
                trace = source()
            self.timings["trace"] = time.monotonic() - self._t0
            if self.cancelled:
                return
            report = first.report if first is not None and first.holds_for(getattr(trace, "inputs", None)) else None
            model = TraceModel.build(trace, progress=self._progress, report=report)
            self.timings["model"] = time.monotonic() - self._t0
            if self.cancelled:
                return
            self._from_thread(self._loaded, model, first is not None and report is None)
            # guards, graphs and kernels: built now, while the user reads the findings; the
            # worker processes start once the first screen has had time to paint
            time.sleep(FIRST_PAINT_S)
            model.build_graph_tables()
            self.timings["graph_tables"] = time.monotonic() - self._t0
            self._from_thread(self._graph_tables_ready)
        except Exception as exc:  # shown as one line; TRACEVIEW_DEBUG=1 for the traceback
            if debugging():
                import traceback

                traceback.print_exc()
            self._from_thread(self._failed, exc)

    async def _loaded(self, model: TraceModel, judged_again: bool = False) -> None:
        """The model is built: the main screen on it, or, over the findings shown first, the
        other views (`judged_again`: the inputs changed since that document was read; the
        screen is replaced, keeping the user's place, as on a reload)."""
        self.model = model
        first = next((s for s in self.screen_stack if isinstance(s, MainScreen) and not s.views_ready), None)
        if first is None:
            self.switch_screen(MainScreen(model, self.where))
            self.timings["first_screen"] = time.monotonic() - self._t0
        elif judged_again:
            self._pending, self._pending_reload = model, False
            self._apply_pending()
            self.set_interval(1.0, self._apply_pending)  # until no dialog or text field is in the way
        else:
            await first.trace_loaded(model)
        self.timings["trace_views"] = time.monotonic() - self._t0

    def _graph_tables_ready(self) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                screen.graph_tables_ready()
        self._start_following()

    # -- following the logs ---------------------------------------------------------------
    def _start_following(self) -> None:
        """After the first load: follow the inputs (reloads start once it is all there)."""
        if self.follow is None or self.reload is None or self.live_status is not None:
            return
        self.follow.finished(self.timings.get("graph_tables", 0.0), ok=True)  # the first load
        self._set_live(f"live · updated {time.strftime('%H:%M:%S')}")
        self.set_interval(1.0, self._apply_pending)
        threading.Thread(
            target=follow_loop, args=(self.follow, self._reload, self._reloaded, self._stop_follow),
            name="traceview-follow", daemon=True,
        ).start()

    def _reload(self) -> TraceModel:
        """Follow thread: the trace again, its model and graph tables (the UI keeps the old)."""
        from traceview.tui.model import TraceModel

        assert self.reload is not None
        model = TraceModel.build(self.reload())
        model.build_graph_tables()
        return model

    def _reloaded(self, result: TraceModel | Exception) -> None:
        """Follow thread: hand the new model (or why there is none) to the UI thread."""
        if isinstance(result, Exception):
            if debugging():
                import traceback

                traceback.print_exception(result)
            why = one_line(f"{type(result).__name__}: {result}", 60)
            self._from_thread(self._set_live, f"live · reload failed {time.strftime('%H:%M:%S')}, retrying ({why})")
            return
        self._from_thread(self._new_model, result)

    def _new_model(self, model: TraceModel) -> None:
        self._pending, self._pending_reload = model, True
        self._apply_pending()

    def _apply_pending(self) -> None:
        """Show the reloaded trace where the user is; not while a dialog, the help or the
        palette is open or a text field has the keys (tried again each second)."""
        model = self._pending
        main = self.screen
        if model is None or not isinstance(main, MainScreen) or isinstance(self.focused, Input):
            return
        self._pending = None
        kept = main.keep()
        self.model = model
        screen_id = "main-judged"  # the first screen's findings, judged again (once)
        if self._pending_reload:
            self.reloads += 1
            self.live_status = f"live · updated {time.strftime('%H:%M:%S')}"
            screen_id = f"main-{self.reloads}"
        # another id: the old screen is still registered until it is unmounted
        self.switch_screen(MainScreen(model, self.where, screen_id=screen_id, kept=kept))

    def _set_live(self, status: str) -> None:
        self.live_status = status
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                screen.update_tabs()

    def on_unmount(self) -> None:
        self._stop_follow.set()

    def _failed(self, exc: Exception) -> None:
        code, self.error = error_line(exc)
        first = next((s for s in self.screen_stack if isinstance(s, MainScreen) and not s.views_ready), None)
        if first is not None:  # the findings are up (from their document): they stay
            first.trace_failed(one_line(self.error, 160))
            self.notify(plain(self.error), severity="error", timeout=30)
            return
        self.exit(return_code=code, message=Text(self.error))

    def action_cancel_loading(self) -> None:
        if self.model is not None:
            return
        self.cancelled = True
        self.notify("loading cancelled", severity="warning")
        self.exit(return_code=EXIT_CANCELLED, message=Text("traceview: loading cancelled"))

    def action_quit(self) -> None:  # type: ignore[override]
        if self.model is None:
            self.cancelled = True  # the loader thread stops reporting
        self.exit(return_code=0)

    def action_quit_twice(self) -> None:
        """ctrl+c: the first press says how to quit, a second one within QUIT_AGAIN_S quits."""
        now = time.monotonic()
        if self._ctrl_c_at is not None and now - self._ctrl_c_at <= QUIT_AGAIN_S:
            self.action_quit()
            return
        self._ctrl_c_at = now
        self.notify("press ctrl+c again to quit (or q)", timeout=QUIT_AGAIN_S)

    @property
    def loader_running(self) -> bool:
        return self._loader_thread is not None and self._loader_thread.is_alive()


def build_app(options: LoadOptions, *, follow: bool = True) -> TraceviewApp:
    """The app for `traceview open`: what `options` point at, loaded the way every command
    loads (traceview.ingest.loading: parse cache, worker processes started early for a big input).

    Discovery runs here (a bad path is a one-line error before any screen); parsing runs in
    the app's worker thread. When the directory holds several runs and --latest was not
    given, the app asks which run to open.

    `follow`: follow the logs as they grow (an export does not grow: never followed); each
    reload discovers the inputs again (new rank files) and parses without the parse cache."""
    inputs = discover_inputs(options)
    fresh = dataclasses.replace(options, use_cache=False, prestart=False)

    def loader() -> Trace:
        return load_trace(options, inputs)

    def reload() -> Trace:
        return load_trace(fresh)

    def load_run(run: RunInfo, *, fresh: bool = False) -> Trace:
        text = [p for p in inputs.text_logs if p not in run.paths[1:]]
        opts = options.with_run(run.paths, text)
        return load_trace(dataclasses.replace(opts, use_cache=False, prestart=False) if fresh else opts)

    # an export holds the runs it was written with: there is no log of one run to pick
    exported = bool(exports_of(options))
    picking = inputs.runs > 1 and not options.latest and not exported
    runs = runs_of(inputs) if picking else None
    following = follow and not exported
    first = None
    if options.use_cache and not exported and not picking:  # unchanged inputs: their findings at once
        from traceview.output.findings_document import cached_report_before_load

        first = cached_report_before_load(inputs)
    return TraceviewApp(
        loader, runs=runs, load_run=load_run, where=" ".join(options.paths),
        follow=Follow([options.paths[0]], options.all_logs) if following else None,
        reload=reload if following else None, frozen=not follow and not exported, first=first,
    )


def run_app(options: LoadOptions, *, follow: bool = True) -> int:
    """`traceview open PATH`: run the UI (following the logs unless `follow` is False);
    returns the exit code."""
    return run_until_exit(build_app(options, follow=follow))


def run_until_exit(app: TraceviewApp) -> int:
    """Run `app`; returns its exit code (without waiting for a parse still running)."""
    app.run()
    code = app.return_code if app.return_code is not None else 0
    if app.loader_running:
        # quit or cancelled while parsing: the parse cannot be interrupted; don't wait for it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
