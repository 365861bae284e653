"""`traceview open` of inputs whose findings document is cached: the findings are the first
screen, drawn before the Trace is read (and before polars is imported); the other views come
when the Trace is read, and what the user asked for meanwhile happens then. A document is never
shown for inputs that changed since it was written (issue 40).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("textual")

import traceview
from tests.conftest import FIXTURES, ROOT
from tests.tui.test_tui import SIZE, open_args, press, ready, screen_text, static_text, sync, until
from traceview.output.findings_document import findings_document
from traceview.output.report import build_report
from traceview.tui.app import TraceviewApp, build_app
from traceview.tui.finding_rows import findings_from_report
from traceview.tui.findings_view import FindingsView
from traceview.tui.guards_view import GuardsView
from traceview.tui.lazy_table import LazyTable
from traceview.tui.main_screen import MainScreen
from traceview.tui.report_model import ReportModel


@pytest.fixture(autouse=True)
def _tui_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRACEVIEW_THEME", "textual-dark")
    monkeypatch.delenv("NO_COLOR", raising=False)


def rows(findings) -> list[tuple]:
    return [(f.kind, f.title, f.summary, f.detail, f.rank, f.compile_id, f.view) for f in findings]


def hold(app: TraceviewApp) -> threading.Event:
    """Make the app's loader wait for the returned event (the Trace is read when it is set)."""
    release = threading.Event()
    load = app.source
    assert callable(load)

    def held():
        assert release.wait(60), "the test never released the loader"
        return load()

    app.source = held
    return release


@sync
async def test_cached_findings_are_the_first_screen_and_the_views_follow_the_trace() -> None:
    opts = open_args("fixtures/recompiles")
    findings_document(opts)  # what `traceview summary` leaves: the parse cache and the document
    judged = findings_from_report(build_report(traceview.load("fixtures/recompiles")))  # judged afresh
    app = build_app(opts)
    assert app.first is not None
    release = hold(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MainScreen), "the first screen")
        main = app.screen
        assert isinstance(main.model, ReportModel) and not main.views_ready and app.model is None
        # the summary's typed list, word for word (finding_rows adapts it; nothing judged again)
        assert rows(main.model.findings) == rows(judged)
        text = screen_text(app)
        assert "RECOMPILE STORM" in text and "shape_storm (recompiles.py:12): 9 compiles" in text
        assert "13 compiles" in text
        assert "reading the trace" in text
        # enter on the storm asks for its guards: they open once the Trace is read
        await press(pilot, "enter")
        assert main.view.view_id == "findings"
        assert not main.query("#guards")

        release.set()
        await until(pilot, lambda: main.views_ready, "the other views, once the Trace is read")
        assert app.screen is main  # the same screen: nothing was rebuilt under the user
        assert app.model is main.model and main.model.trace is not None
        assert rows(main.model.findings) == rows(judged)
        assert main.view.view_id == "guards"
        guards = main.query_one(GuardsView)
        assert guards.key == (None, "0/1")
        # compared with the compile whose guard failed once the guards are read
        await until(pilot, lambda: guards.compare_id == "0/0", "the guards compared with 0/0")
        await until(pilot, lambda: "0/0: tensor 'x' size mismatch at index 1" in screen_text(app), "the failing guard")
        assert "reading the trace" not in screen_text(app)
        # the views over the tables work: raw records, frames, back to the findings
        await press(pilot, "5")
        table = main.query_one("#records-table", LazyTable)
        assert main.view.view_id == "records" and table.row_count > 100
        await press(pilot, "2")
        assert main.view.view_id == "frames" and "shape_storm" in screen_text(app)
        await press(pilot, "1")
        assert main.view.view_id == "findings" and "RECOMPILE STORM" in screen_text(app)


@sync
async def test_a_graph_break_gets_its_user_stack_once_the_trace_is_read() -> None:
    opts = open_args("fixtures/graph_breaks")
    findings_document(opts)
    app = build_app(opts)
    release = hold(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MainScreen), "the first screen")
        main = app.screen
        await press(pilot, "slash", *"print_inside", "enter")
        view = main.query_one(FindingsView)
        assert view.finding.kind == "graph_break" and "print_inside" in view.finding.title
        detail = static_text(view.query_one("#finding-detail"))
        assert "where: " in detail and "user stack" not in detail  # the record is in the Trace
        release.set()
        await until(pilot, lambda: main.views_ready, "the Trace")
        detail = static_text(view.query_one("#finding-detail"))
        assert "user stack (last call last):\n" in detail
        assert 'print("planted print inside a compiled function")' in detail


@sync
async def test_help_open_while_the_trace_is_read() -> None:
    opts = open_args("fixtures/recompiles")
    findings_document(opts)
    app = build_app(opts)
    release = hold(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MainScreen), "the first screen")
        main = app.screen
        await press(pilot, "question_mark")
        assert app.screen is not main
        release.set()
        await until(pilot, lambda: main.views_ready, "the views, mounted under the help")
        await press(pilot, "escape")
        assert app.screen is main
        await press(pilot, "2")
        assert main.view.view_id == "frames" and "shape_storm" in screen_text(app)


@sync
async def test_a_trace_that_cannot_be_read_keeps_its_findings_on_screen() -> None:
    opts = open_args("fixtures/recompiles")
    findings_document(opts)
    app = build_app(opts)

    def broken():
        raise OSError("the parse cache vanished")

    app.source = broken
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MainScreen) and app.screen.unavailable, "the failure")
        main = app.screen
        assert "vanished" in main.unavailable
        text = screen_text(app)
        assert "RECOMPILE STORM" in text and "trace not readable" in text
        await press(pilot, "2")
        assert main.view.view_id == "findings"
        assert app.is_running


def _copy_fixture(tmp_path: Path, name: str) -> Path:
    d = tmp_path / "trace"
    d.mkdir(exist_ok=True)
    src = next((FIXTURES / name / "trace").glob("*.log"))
    shutil.copy(src, d / "dedicated_log_torch_trace_run.log")
    return d / "dedicated_log_torch_trace_run.log"


def _rewrite(log: Path, name: str) -> None:
    """The log replaced by another run's (a rerun into the same directory), a later mtime."""
    log.write_bytes(next((FIXTURES / name / "trace").glob("*.log")).read_bytes())
    st = log.stat()
    os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


@sync
async def test_a_changed_input_never_shows_the_document_of_before(tmp_path: Path) -> None:
    log = _copy_fixture(tmp_path, "recompiles")
    opts = open_args(log.parent)
    findings_document(opts)
    assert build_app(opts).first is not None  # unchanged: the document is shown first
    _rewrite(log, "simple")
    app = build_app(opts)
    assert app.first is None  # changed: parsed and judged again, behind the loading screen
    judged = findings_from_report(build_report(traceview.load(log.parent)))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        assert rows(main.model.findings) == rows(judged)
        assert "RECOMPILE STORM" not in screen_text(app)


@sync
async def test_an_input_changed_after_its_document_was_read_is_judged_again(tmp_path: Path) -> None:
    log = _copy_fixture(tmp_path, "recompiles")
    opts = open_args(log.parent)
    findings_document(opts)
    app = build_app(opts)
    assert app.first is not None
    release = hold(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MainScreen), "the first screen")
        assert "RECOMPILE STORM" in screen_text(app)  # the document of the inputs as they were
        _rewrite(log, "simple")  # before the Trace is read
        release.set()
        await until(pilot, lambda: app.screen.id == "main-judged" and app.screen.views_ready, "the screen judged again")
        main = app.screen
        judged = findings_from_report(build_report(traceview.load(log.parent)))
        assert rows(main.model.findings) == rows(judged)
        assert main.model.report is not app.first.report
        assert "RECOMPILE STORM" not in screen_text(app)
        assert app.reloads == 0  # not a reload of a growing log


def test_the_first_screen_imports_no_polars() -> None:
    # `traceview open` as the command line runs it, stopped where the loader would start (after
    # the first screen is up): neither polars nor numpy nor pyarrow was imported for it
    findings_document(open_args("fixtures/recompiles"))
    code = """
import json, sys
from textual.app import App
from traceview.tui.app import TraceviewApp
seen = {}
def start_loader(self, source):
    seen["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in ("polars", "numpy", "pyarrow"))
    seen["screen"] = [type(self.screen).__name__, type(self.screen.model).__name__]
    seen["text"] = "\\n".join(s.text for s in self.screen._compositor.render_strips())
    self.exit()
TraceviewApp._start_loader = start_loader
TraceviewApp.run = lambda self, **kw: App.run(self, headless=True, size=(120, 40))
from traceview.cli import main
code = main(["open", "fixtures/recompiles", "--no-follow"])
print(json.dumps(seen))
sys.exit(code)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["screen"] == ["MainScreen", "ReportModel"]
    assert "RECOMPILE STORM" in seen["text"]
    assert seen["modules"] == []
