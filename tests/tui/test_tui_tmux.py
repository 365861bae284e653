"""End to end in a real terminal: tmux runs `python -m traceview open fixtures/recompiles`,
keys go in with send-keys, `capture-pane -p` shows what a user sees, and `q` exits 0."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

WIDTH, HEIGHT = 100, 30


class Tmux:
    """One tmux server (its own socket) running one command in a 100x30 window."""

    def __init__(self, tmp: Path) -> None:
        self.socket = str(tmp / "tmux.sock")
        self.session = f"tv-{uuid.uuid4().hex[:8]}"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True, timeout=20)

    def start(self, command: str, env: dict[str, str], size: tuple[int, int] = (WIDTH, HEIGHT)) -> None:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # COLUMNS/LINES from the test's environment would override the pane's real size
        r = self.run("new-session", "-d", "-s", self.session, "-x", str(size[0]), "-y", str(size[1]),
                     f"cd {shlex.quote(str(ROOT))} && unset COLUMNS LINES && export {exports} && {command}")
        assert r.returncode == 0, r.stderr

    def capture(self) -> str:
        r = self.run("capture-pane", "-p", "-t", self.session)
        return r.stdout if r.returncode == 0 else ""

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.run("send-keys", "-t", self.session, *(["-l"] if literal else []), *keys)

    def wait_for(self, what: Callable[[str], bool] | str, timeout: float = 60.0) -> str:
        pred = (lambda s: what in s) if isinstance(what, str) else what
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.capture()
            if pred(screen):
                return screen
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what!r}; the screen shows:\n{screen}")

    def kill(self) -> None:
        self.run("kill-server")


@pytest.fixture
def tmux(tmp_path: Path):
    t = Tmux(tmp_path)
    yield t
    t.kill()


def test_open_recompiles_in_tmux(tmux: Tmux, tmp_path: Path) -> None:
    exit_file = tmp_path / "exit"
    env = {
        "TRACEVIEW_CACHE_DIR": os.environ.get("TRACEVIEW_CACHE_DIR", str(tmp_path / "cache")),
        "TERM": "screen-256color",
        "PYTHONPATH": str(ROOT),
    }
    cmd = f"{shlex.quote(sys.executable)} -m traceview open fixtures/recompiles; echo EXIT=$? > {shlex.quote(str(exit_file))}"
    t0 = time.monotonic()
    tmux.start(cmd, env)

    screen = tmux.wait_for(lambda s: "RECOMPILE STORM" in s and "shape_storm" in s)
    first_screen_s = time.monotonic() - t0
    assert "[1 Findings]" in screen
    assert "shape_storm (recompiles.py:12): 9" in screen
    assert "dimension 1 of x varies" in screen
    # scaled's single recompile comes after it, expected (as the summary says); the recompile-limit hit
    # (0/8) is in the storm's detail, not a failed compile of its own
    assert "EXPECTED RECOMPILES" in screen and "FAILED COMPILE" not in screen
    assert first_screen_s < 30

    tmux.keys("Enter")  # the storm -> the guard that failed
    screen = tmux.wait_for("[3 Guards]")
    assert "0/0: tensor 'x' size mismatch at index 1. expected 2, actual 3" in tmux.wait_for("size mismatch at index 1")

    tmux.keys("2")  # frames
    screen = tmux.wait_for("[2 Frames]")
    # 0/8, refused at the recompile limit, ran eagerly: said so, not called a failure
    assert "shape_storm" in screen and "↓ 1 eager" in screen and "↓ eager      0/8" in screen

    tmux.keys("[", literal=True)  # back to the guards
    tmux.wait_for("[3 Guards]")

    # the raw records' filters, typed into as a user does: f, Tab to the compile id, 0/1
    tmux.keys("5")
    tmux.wait_for("[5 Raw")  # the short titles at 100 columns while following (the tab bar says live)
    for keys, literal in ((("f",), False), (("Tab",), False), (("0/1",), True)):
        time.sleep(1.0)  # a user types one key after the other: each lands where the last put the focus
        tmux.keys(*keys, literal=literal)
    screen = tmux.wait_for("filters: compile=0/1")
    assert "[5 Raw" in screen  # the 1 went into the field, not to the findings view
    tmux.keys("Escape")  # leave the field; q quits again
    time.sleep(1.0)  # an Escape followed at once by q reads as alt+q

    # the compile timeline: one line for the process, the compiles by start
    tmux.keys("6")
    screen = tmux.wait_for("Timeline: 13 compiles on 1 process")
    assert "no rank │" in screen and "13 compiles" in screen and "+0.00s" in screen

    tmux.keys("q")
    deadline = time.monotonic() + 20
    while not exit_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert exit_file.read_text().strip() == "EXIT=0"


def test_q_quit_shows_in_every_view_at_80x24(tmux: Tmux, tmp_path: Path) -> None:
    # issue 44.10: at 80x24 the footer ended before the app's q Quit; as a person sees it, the
    # last line of each view names it (after the view's own keys, before Help and Search)
    env = {
        "TRACEVIEW_CACHE_DIR": os.environ.get("TRACEVIEW_CACHE_DIR", str(tmp_path / "cache")),
        "TERM": "screen-256color",
        "PYTHONPATH": str(ROOT),
    }
    tmux.start(f"{shlex.quote(sys.executable)} -m traceview open --no-follow fixtures/corpus/multirank4", env, size=(80, 24))
    tmux.wait_for("RANK STALL")
    for key, tab in (("1", "[1 Findings]"), ("2", "[2 Frames]"), ("3", "[3 Guards]"), ("4", "[4 Code]"),
                     ("5", "[5 Raw]"), ("6", "[6 Time]"), ("7", "[7 Ranks]")):
        tmux.keys(key)
        screen = tmux.wait_for(lambda s, tab=tab: tab in s and "q Quit" in s.rstrip("\n").splitlines()[-1])
        assert len(screen.splitlines()[0]) <= 80


def test_bad_path_is_one_line_and_exit_2(tmux: Tmux, tmp_path: Path) -> None:
    exit_file = tmp_path / "exit"
    out = tmp_path / "stderr"
    cmd = (
        f"{shlex.quote(sys.executable)} -m traceview open no/such/dir 2> {shlex.quote(str(out))}; "
        f"echo EXIT=$? > {shlex.quote(str(exit_file))}"
    )
    tmux.start(cmd, {"PYTHONPATH": str(ROOT), "TRACEVIEW_CACHE_DIR": str(tmp_path / "cache")})
    deadline = time.monotonic() + 30
    while not exit_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert exit_file.read_text().strip() == "EXIT=2"
    assert out.read_text().strip() == "traceview: error: no/such/dir: no such file or directory"
