"""Snapshot tests of the terminal UI (pytest-textual-snapshot) on a real fixture.

Deterministic: the fixture path is relative to the repo, the parse cache lives in a temporary
directory (tests/conftest.py) and is never shown, the theme is pinned, the UI has no clock
and no blinking cursor on these screens, and compile start times are shown without the year
(which the parser guesses from the file's mtime). Update with `--snapshot-update` after
checking the new SVGs by eye.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("textual")
pytest.importorskip("pytest_textual_snapshot")

from tests.conftest import ROOT
from traceview.ingest.loading import LoadOptions
from traceview.tui.app import build_app
from traceview.tui.main_screen import MainScreen

SIZES = [(80, 24), (160, 45)]


@pytest.fixture(autouse=True)
def _tui_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRACEVIEW_THEME", "textual-dark")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TRACEVIEW_ASCII", raising=False)


def _app(path: str = "fixtures/recompiles"):
    app = build_app(LoadOptions.of(path, prestart=True), follow=False)  # "frozen": no clock in the picture
    app.CURSOR_BLINK = False
    return app


async def _loaded(pilot) -> None:
    """The main screen up and the graph tables read (they arrive in the background: a picture
    taken before or after them would differ on a busy machine)."""
    t0 = time.monotonic()
    while not (isinstance(pilot.app.screen, MainScreen) and pilot.app.screen.model.graph_tables_ready):
        assert time.monotonic() - t0 < 60, "the trace did not load in time"
        await pilot.pause(0.02)
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_findings_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(_app(), terminal_size=size, run_before=_loaded)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_frames_screen(snap_compare, size: tuple[int, int]) -> None:
    # 2: the frames view; g 0/1: the first recompile of shape_storm, with its reason
    assert snap_compare(_app(), terminal_size=size, run_before=_loaded, press=["2", "g", "0", "slash", "1", "enter"])


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_multirank_findings_screen(snap_compare, size: tuple[int, int]) -> None:
    # 4 gloo ranks, rank 2 recompiled once: the diverging rank named first
    assert snap_compare(_app("fixtures/corpus/multirank4"), terminal_size=size, run_before=_loaded)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_timeline_screen(snap_compare, size: tuple[int, int]) -> None:
    # 6: the compile timeline of the 4 gloo ranks; / 0/1: rank 2's recompile, drawn apart
    assert snap_compare(
        _app("fixtures/corpus/multirank4"), terminal_size=size, run_before=_loaded, press=["6", "slash", "0", "/", "1", "enter"]
    )
