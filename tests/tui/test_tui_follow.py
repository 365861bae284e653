"""`traceview open DIR` follows a growing directory (issue 33): new compiles appear without a
restart, where the user is stays where it is, the tab bar says live (or frozen).

The trace is the real GPU max-autotune run with a recompile
(fixtures/gpu/sequential_max_autotune), cut by hand right after [0/0]'s compilation_metrics
record (at a record start) and then grown with the rest of the same file.
"""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import pytest

pytest.importorskip("textual")

from tests.conftest import FIXTURES
from tests.tui.test_tui import open_args, press, ready, screen_text, sync, until
from traceview.live.follow import Follow
from traceview.tui.app import build_app
from traceview.tui.finding_rows import Finding
from traceview.tui.frames_view import FramesView
from traceview.tui.keep import kept_scroll, refind

SOURCE = FIXTURES / "gpu" / "sequential_max_autotune" / "trace" / "dedicated_log_torch_trace_p_5fho94.log.gz"
NAME = "dedicated_log_torch_trace_p_5fho94.log"


def cut_after_first_compile() -> tuple[bytes, bytes]:
    """The log up to and with [0/0]'s compilation_metrics record, and the rest."""
    data = gzip.decompress(SOURCE.read_bytes())
    at = data.index(b'{"compilation_metrics": {"compile_id": "0/0"')
    end = data.index(b"\n", at) + 1  # the record has no payload: it ends with its line
    assert data[end : end + 1] not in (b"\t", b"")  # the next line starts a record
    return data[:end], data[end:]


def frames_text(app) -> str:
    """The frames tree's labels ("" while a reloaded screen is being put up)."""
    trees = list(app.screen.query("#frames-tree"))
    if not trees:
        return ""
    tree = trees[0]
    out = []

    def walk(n) -> None:
        for c in n.children:
            out.append(c.label.plain)
            walk(c)

    walk(tree.root)
    return "\n".join(out)


def tabs_text(app) -> str:
    return app.screen.query_one("#tabs").content.plain


@pytest.mark.e2e
@sync
async def test_open_follows_the_directory_as_the_log_grows(tmp_path: Path) -> None:
    head, rest = cut_after_first_compile()
    log = tmp_path / NAME
    log.write_bytes(head)
    app = build_app(open_args(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        main = await ready(pilot)
        await press(pilot, "2")
        await until(pilot, lambda: app.live_status is not None, "following starts", timeout=15)
        assert "live · updated " in tabs_text(app)
        text = frames_text(app)
        assert "0/0" in text and "0/1" not in text
        selected = main.query_one(FramesView).location()
        assert (selected.view, selected.compile_id) == ("frames", "0/0")
        # the rest lands in two writes, the first ending in the middle of a line
        half = rest.index(b"\n", len(rest) // 2) - 20
        with log.open("ab") as fh:
            fh.write(rest[:half])
        with log.open("ab") as fh:
            fh.write(rest[half:])
        await until(pilot, lambda: "0/1" in frames_text(app), "[0/1] appears in Frames", timeout=15)
        assert app.error is None
        # the same view, the same compile selected, the header says live
        assert app.screen is not main and app.screen.view.view_id == "frames"
        assert app.screen.query_one(FramesView).location() == selected
        assert "live · updated " in tabs_text(app)
        assert "recompile" in frames_text(app)
        assert "[0/1]" not in screen_text(app).split("\n")[0]  # the tab bar is not the frames tree


@pytest.mark.e2e
@sync
async def test_no_follow_does_not_reload(tmp_path: Path) -> None:
    head, rest = cut_after_first_compile()
    log = tmp_path / NAME
    log.write_bytes(head)
    app = build_app(open_args(tmp_path), follow=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await press(pilot, "2")
        assert "frozen" in tabs_text(app)
        with log.open("ab") as fh:
            fh.write(rest)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3.5:  # longer than a follow tick and the least gap
            await pilot.pause(0.1)
        assert app.reloads == 0 and "0/1" not in frames_text(app)
        assert "frozen" in tabs_text(app)


def test_follow_waits_between_reloads_and_retries_a_failed_one(tmp_path: Path) -> None:
    head, rest = cut_after_first_compile()
    log = tmp_path / NAME
    log.write_bytes(head)
    f = Follow([str(tmp_path)])
    f.seed()
    assert not f.poll()  # what was there is loaded
    f.finished(1.0, ok=True, now=100.0)  # the first load took 1 s: 3 s until the next
    first = rest[: rest.index(b"\n") + 1]
    while rest[len(first) : len(first) + 1] == b"\t":  # and its payload lines: one whole record
        first = rest[: rest.index(b"\n", len(first)) + 1]
    log.write_bytes(head + first)
    assert f.poll() and not f.due(now=102.9) and f.due(now=103.0)
    f.started()
    f.finished(0.5, ok=False, now=104.0)  # failed: retried after max(2 s, 1.5 s)
    assert f.failed == 1 and not f.due(now=105.9) and f.due(now=106.0)


def test_a_finding_is_found_again_by_key_not_by_index() -> None:
    def finding(kind: str, cid: str, title: str) -> Finding:
        return Finding(kind, title, [], [], rank=None, compile_id=cid)

    old = [finding("recompile", "0/1", "f recompiled once"), finding("compile_time", "0/0", "slow")]
    new = [finding("failure", "1/0", "g failed"), finding("recompile", "0/1", "f recompiled once (2)"),
           finding("compile_time", "0/0", "slower")]
    assert refind(old, 1, new) == 2 and refind(old, 0, new) == 1 and refind(old, None, new) is None
    assert refind(old, 0, [new[0]]) is None
    # rows added above the cursor: the cursor row stays at the same height on the screen
    assert kept_scroll(10, 15, 18) == 13 and kept_scroll(5, None, None) == 5
