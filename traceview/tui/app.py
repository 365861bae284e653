"""The Textual app: built from a loader (a callable returning a `Trace`) or a `Trace`.

The loader (traceview.ingest.loading, the same path as every command's) runs in a worker thread
while the loading screen shows its progress; the main screen appears when the trace and its
findings are ready. Widgets never see a path, only the model.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App
from textual.binding import Binding, BindingType

from traceview.errors import EXIT_CANCELLED, EXIT_USAGE, debugging, error_line
from traceview.ingest.loading import LoadOptions, discover_inputs, exports_of, load_trace
from traceview.trace import Trace
from traceview.tui.loading_screen import LoadingScreen
from traceview.tui.main_screen import MainScreen
from traceview.tui.model import TraceModel
from traceview.tui.run_picker import RunInfo, RunPicker, runs_of

Loader = Callable[[], Trace]


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
    ) -> None:
        """`source`: a Trace, or a loader returning one. With `runs` (several runs found) the
        user picks one first and `load_run(run)` loads it."""
        super().__init__()
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
        self._start(lambda: load_run(run))

    def _start(self, source: Trace | Loader | None) -> None:
        if source is None:
            self.exit(return_code=EXIT_USAGE, message=Text("traceview: nothing to open"))
            return
        self.push_screen(LoadingScreen(self.where or "trace"))
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
        """Worker thread: parse (or read the cache), build the model, then the graph tables."""
        try:
            if isinstance(source, Trace):
                trace = source
            else:
                self._progress("parsing the logs (or reading the parse cache)")
                trace = source()
            self.timings["trace"] = time.monotonic() - self._t0
            if self.cancelled:
                return
            model = TraceModel.build(trace, progress=self._progress)
            self.timings["model"] = time.monotonic() - self._t0
            if self.cancelled:
                return
            self._from_thread(self._loaded, model)
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

    def _loaded(self, model: TraceModel) -> None:
        self.model = model
        self.switch_screen(MainScreen(model, self.where))
        self.timings["first_screen"] = time.monotonic() - self._t0

    def _graph_tables_ready(self) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                screen.graph_tables_ready()

    def _failed(self, exc: Exception) -> None:
        code, self.error = error_line(exc)
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


def build_app(options: LoadOptions) -> TraceviewApp:
    """The app for `traceview open`: what `options` point at, loaded the way every command
    loads (traceview.ingest.loading: parse cache, worker processes started early for a big input).

    Discovery runs here (a bad path is a one-line error before any screen); parsing runs in
    the app's worker thread. When the directory holds several runs and --latest was not
    given, the app asks which run to open."""
    inputs = discover_inputs(options)

    def loader() -> Trace:
        return load_trace(options, inputs)

    def load_run(run: RunInfo) -> Trace:
        text = [p for p in inputs.text_logs if p not in run.paths[1:]]
        return load_trace(options.with_run(run.paths, text))

    # an export holds the runs it was written with: there is no log of one run to pick
    picking = inputs.runs > 1 and not options.latest and not exports_of(options)
    runs = runs_of(inputs) if picking else None
    return TraceviewApp(loader, runs=runs, load_run=load_run, where=" ".join(options.paths))


def run_app(options: LoadOptions) -> int:
    """`traceview open PATH`: run the UI; returns the exit code."""
    return run_until_exit(build_app(options))


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
