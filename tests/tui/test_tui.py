"""The terminal UI, driven with Textual's pilot on the real fixtures (torch 2.13 runs).

Every test opens a fixture through the same path as `traceview open` (`build_app`: discover,
parse cache, worker thread) and asserts what the screen shows and where keys lead.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import threading
import time
from pathlib import Path

import polars as pl
import pytest

pytest.importorskip("textual")

import traceview
from tests.conftest import FIXTURES, ROOT
from traceview.analyze.wording import seconds_text
from traceview.ingest.loading import LoadOptions
from traceview.output.report import build_report
from traceview.tui import code_view
from traceview.tui.app import TraceviewApp, build_app
from traceview.tui.code_browser import CodeBrowser
from traceview.tui.code_view import CodeView
from traceview.tui.findings_view import FindingsView
from traceview.tui.frames_view import FramesView
from traceview.tui.guards_view import GuardsView
from traceview.tui.help_screen import HelpScreen, help_markdown
from traceview.tui.lazy_table import Column, LazyTable
from traceview.tui.main_screen import MainScreen, binding_groups
from traceview.tui.records_view import RecordsView
from traceview.tui.run_picker import RunPicker
from traceview.tui.text import FAILED_MARK, mark
from traceview.tui.timeline_view import SELECTED, TimelineView
from traceview.workflow.repro import build_repro

SIZE = (120, 40)


def sync(fn):
    """Run an async test with asyncio.run (no asyncio plugin needed)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


def open_args(path: str | Path) -> LoadOptions:
    """What `traceview open PATH` loads (traceview.cli._options)."""
    return LoadOptions.of(path, prestart=True)


@pytest.fixture(autouse=True)
def _tui_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # relative fixture paths (what the user types), one theme whatever the terminal says
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRACEVIEW_THEME", "textual-dark")
    monkeypatch.delenv("NO_COLOR", raising=False)


async def ready(pilot, timeout: float = 60.0) -> MainScreen:
    """Wait for the main screen with the trace read (it is parsed in a worker thread; a cached
    findings document is shown before it: MainScreen.views_ready says when the rest is there)."""
    app = pilot.app
    t0 = time.monotonic()
    while not (isinstance(app.screen, MainScreen) and app.screen.views_ready):
        assert app.error is None, app.error
        assert time.monotonic() - t0 < timeout, "the trace did not load in time"
        await pilot.pause(0.02)
    await pilot.pause()
    return app.screen


async def tables(pilot, timeout: float = 60.0) -> None:
    """Wait for guards, graphs and kernels (read after the first screen is up)."""
    main = await ready(pilot, timeout)
    t0 = time.monotonic()
    while not main.model.graph_tables_ready:
        assert time.monotonic() - t0 < timeout, "guards/graphs/kernels were not read in time"
        await pilot.pause(0.02)
    await pilot.pause()


async def until(pilot, condition, what: str, timeout: float = 60.0) -> None:
    """Let the app run until `condition()` holds (no fixed sleep: a slow machine only waits
    longer; `timeout` is a hang guard, not a speed requirement)."""
    t0 = time.monotonic()
    while not condition():
        assert time.monotonic() - t0 < timeout, f"never happened: {what}"
        await pilot.pause(0.02)
    await pilot.pause()


def screen_text(app: TraceviewApp) -> str:
    """What the terminal shows, as plain text."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def static_text(widget) -> str:
    """The plain text of a Static (all of it, also the part scrolled out of view)."""
    content = widget.content
    return content.plain if hasattr(content, "plain") else str(content)


async def press(pilot, *keys: str) -> None:
    await pilot.press(*keys)
    await pilot.pause()


# ------------------------------------------------------------------------------ findings
@sync
async def test_findings_first_is_the_shape_storm_and_enter_shows_the_failing_guard() -> None:
    report = build_report(traceview.load("fixtures/recompiles"))
    storm = report["recompiles"][0]
    cause = storm["causes"][0]
    assert storm["function"] == "shape_storm"
    assert "dimension 1 of x varies" in cause["text"]

    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await tables(pilot)
        assert main.view.view_id == "findings"
        findings = main.query_one(FindingsView)
        first = findings.model.findings[0]
        assert first.kind == "storm" and "shape_storm" in first.title
        text = screen_text(app)
        assert "RECOMPILE STORM" in text
        assert "shape_storm (recompiles.py:12): 9 compiles" in text
        assert cause["text"] in " ".join(text.split())
        # the storm comes before every other finding on screen; its recompile-limit hit (0/8)
        # is one root cause with it, in its detail rather than a FAILED COMPILE of its own;
        # scaled's single float recompile is expected, not a storm: what the summary says
        assert text.index("shape_storm (recompiles.py:12)") < text.index("EXPECTED RECOMPILES")
        assert "FAILED COMPILE" not in text
        assert "[0/8] refused at the recompile limit" in first.as_text()
        assert [f.kind for f in findings.model.findings] == ["storm", "expected", "expected"]
        assert "scaled (recompiles.py:16): 2 compiles" in text
        assert ("why", "expected: automatic dynamic shapes recompile once") in findings.model.findings[1].detail

        await press(pilot, "enter")
        assert main.view.view_id == "guards"
        guards = main.query_one(GuardsView)
        assert guards.key == (None, "0/1") and guards.compare_id == "0/0"
        text = screen_text(app)
        assert "0/0: tensor 'x' size mismatch at index 1. expected 2, actual 3" in text
        # the guard of 0/0 that failed is marked, and is the tensor guard of x
        failed = guards.query_one("#guards-right", LazyTable).current
        assert failed is not None
        assert failed["mark"] == FAILED_MARK
        assert failed["kind"] == "TENSOR_MATCH" and failed["guard_source"] == "L['x']"
        assert "size=[4, 2]" in failed["code"]
        assert f"{FAILED_MARK} this guard failed" in text
        marked = guards.query_one("#guards-right", LazyTable).frame.filter(pl.col("mark") == FAILED_MARK)
        assert marked.height == 1

        # back returns to the findings, forward to the guards again
        await press(pilot, "left_square_bracket")
        assert main.view.view_id == "findings"
        await press(pilot, "right_square_bracket")
        assert main.view.view_id == "guards"


@sync
async def test_next_finding_walks_the_findings_from_any_view() -> None:
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await tables(pilot)
        await press(pilot, "2")
        assert main.view.view_id == "frames"
        await press(pilot, "n")  # finding 2: the `scaled` storm -> its recompile 1/1
        assert main.finding_index == 1
        assert main.view.view_id == "guards"
        assert main.query_one(GuardsView).key == (None, "1/1")
        assert "1/0: scale == 1.0" in screen_text(app)
        await press(pilot, "N")
        assert main.finding_index == 0
        assert main.query_one(GuardsView).key == (None, "0/1")


@sync
async def test_failed_compile_finding_opens_the_frames_view() -> None:
    app = build_app(open_args("fixtures/backend_error"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        fs = main.model.findings
        i = next(i for i, f in enumerate(fs) if f.kind == "failure" and f.compile_id == "0/0")
        main.query_one(FindingsView).select(i)
        await pilot.pause()
        assert "next: " in screen_text(app)
        await press(pilot, "enter")
        assert main.view.view_id == "frames"
        frames = main.query_one(FramesView)
        assert frames.compile_ref() == (None, "0/0")
        text = screen_text(app)
        assert "BackendCompilerFailed" in text
        assert "planted backend failure" in text
        # r: the raw record behind the compile
        await press(pilot, "r")
        assert main.view.view_id == "records"
        row = main.query_one("#records-table", LazyTable).current
        assert row is not None and row["kind"] == "compilation_metrics" and row["compile_id"] == "0/0"


# -------------------------------------------------------------------------------- frames
@sync
async def test_frames_tree_marks_and_goto_compile() -> None:
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "2")
        text = screen_text(app)
        # status marks carry a word, not only a colour
        assert "✓ ok" in text and "✗ failed" in text
        assert "shape_storm" in text and "9 compiles (8 recompiles)" in text
        await press(pilot, "g")
        await press(pilot, *"0/8", "enter")
        frames = main.query_one(FramesView)
        assert frames.compile_ref() == (None, "0/8")
        detail = static_text(frames.query_one("#compile-detail"))
        assert "Dynamo recompile limit exceeded" in detail
        assert "0/7: tensor 'x' size mismatch at index 1. expected 9, actual 10" in detail
        assert "Dynamo recompile limit exceeded" in screen_text(app)


@sync
async def test_search_in_frames_and_findings() -> None:
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        # findings: / finds the first finding mentioning "causal"
        await press(pilot, "slash", *"causal", "enter")
        f = main.query_one(FindingsView).finding
        assert f is not None and "flagged" in f.title
        # frames: / scaled, then F3 finds the next match
        await press(pilot, "2", "slash", *"scaled", "enter")
        tree = main.query_one("#frames-tree")
        first = tree.cursor_node
        assert "scaled" in first.label.plain
        await press(pilot, "f3")
        second = tree.cursor_node
        assert second is not first
        assert second.data[0] == "compile" and second.data[1][1].startswith("1/")
        # a query with no match leaves the cursor and says so
        await press(pilot, "slash", *"no-such-function", "enter")
        assert tree.cursor_node is second


# -------------------------------------------------------------------------- raw records
@sync
async def test_raw_records_filter_by_kind_and_clear() -> None:
    trace = traceview.load("fixtures/recompiles")
    total = trace.events.height + trace.log_records.height
    n_start = trace.events.filter(pl.col("kind") == "dynamo_start").height
    assert n_start > 1

    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "5")
        records = main.query_one(RecordsView)
        table = records.query_one("#records-table", LazyTable)
        assert table.row_count == total
        await press(pilot, "slash", *"dynamo_start", "enter")
        assert table.current["kind"] == "dynamo_start"
        await press(pilot, "t")  # filter: this kind
        assert records.kind == "dynamo_start"
        assert table.row_count == n_start
        assert set(table.frame["kind"].to_list()) == {"dynamo_start"}
        text = screen_text(app)
        assert f"Raw records: {n_start} of {total}" in text
        assert "filters: kind=dynamo_start" in text
        # the filter widget shows it too
        assert records.query_one("#filter-kind").value == "dynamo_start"
        await press(pilot, "x")
        assert records.kind is None
        assert table.row_count == total
        assert "filters:" not in screen_text(app)


@sync
async def test_raw_records_search_finds_text_inside_a_records_body() -> None:
    # issue 44.10: "def forward" is only in FX graph payloads (12 records of fixtures/recompiles),
    # never in the list's columns; / finds those records, as the "text (whole record)" filter does
    trace = traceview.load("fixtures/recompiles")
    holding = trace.events.with_row_index("i").filter(pl.col("payload").str.contains("def forward", literal=True).fill_null(False))
    assert holding.height == 12 and trace.log_records.filter(pl.col("text").str.contains("def forward", literal=True)).height == 0
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "5")
        table = main.query_one(RecordsView).query_one("#records-table", LazyTable)
        assert not any("def forward" in str(v) for v in table.frame.select("kind", "summary", "trace_id", "where").rows())
        seen = []
        await press(pilot, "slash", *"def forward", "enter")
        for _ in range(holding.height + 1):
            seen.append((table.current["src"], table.current["row"]))
            await press(pilot, "f3")
        assert {src for src, _ in seen} == {"trace"}
        assert sorted({row for _, row in seen}) == sorted(holding["i"].to_list())  # each record that holds it
        assert seen[0] == seen[-1]  # F3 went round all 12 and back to the first


@sync
async def test_raw_records_filter_by_compile_and_rank() -> None:
    # every filter field reached with Tab and edited by typing, as a user does (issue 16.1:
    # Tab used to jump to the payload, "1" switched to the findings view, "q" quit)
    app = build_app(open_args("fixtures/multirank"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "5")
        records = main.query_one(RecordsView)
        table = records.query_one("#records-table", LazyTable)
        await press(pilot, "f")
        assert app.focused is records.query_one("#filter-kind")
        await press(pilot, "tab")
        assert app.focused is records.query_one("#filter-compile")
        await press(pilot, *"0/1")
        assert main.view.view_id == "records"  # "1" typed into the field, not a view switch
        assert records.compile == "0/1"
        assert table.row_count > 0
        assert set(table.frame["compile_id"].to_list()) == {"0/1"}
        assert set(table.frame["rank"].to_list()) == {1}  # only rank 1 recompiled
        await press(pilot, "tab")
        assert app.focused is records.query_one("#filter-rank")
        await press(pilot, "enter", "down", "enter")  # open the rank list, pick the first rank
        assert records.rank == 0
        assert table.row_count == 0
        assert "no record matches the filters" in screen_text(app)
        await press(pilot, "shift+tab", "backspace", "backspace", "backspace")
        assert records.compile is None
        assert table.row_count > 0 and set(table.frame["rank"].to_list()) == {0}
        await press(pilot, "tab", "tab")
        assert app.focused is records.query_one("#filter-text")
        await press(pilot, *"quiet")  # q and x are letters here, not quit / clear
        assert app.is_running and records.contains == "quiet"
        await press(pilot, "tab")
        assert app.focused is table
        await press(pilot, "x")
        assert records.active_filters == []


@sync
async def test_payload_markup_and_escapes_show_literally(tmp_path: Path) -> None:
    # Hand-modified copy of a real fixture: one text-log line of fixtures/recompiles gets
    # Rich markup, a link tag and an ANSI escape appended. Everything else is the real log.
    shutil.copytree(FIXTURES / "recompiles" / "trace", tmp_path / "trace")
    lines = (FIXTURES / "recompiles" / "torch_logs.txt").read_text().splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if "[__guards]" in line and "TREE_GUARD_MANAGER" in line)
    planted = " [bold]PLANTED[/bold] [link=http://x]click[/link] \x1b[31mred"
    lines[i] = lines[i].rstrip("\n") + planted + "\n"
    (tmp_path / "torch_logs.txt").write_text("".join(lines))

    app = build_app(open_args(tmp_path))
    async with app.run_test(size=(160, 40)) as pilot:
        main = await ready(pilot)
        await press(pilot, "5")
        records = main.query_one(RecordsView)
        table = records.query_one("#records-table", LazyTable)
        await press(pilot, "f", "tab", "tab")  # kind, compile id, text (no ranks: no rank field)
        assert app.focused is records.query_one("#filter-text")
        await press(pilot, *"PLANTED", "enter")  # typed; enter goes back to the list
        assert records.contains == "PLANTED" and app.focused is table
        assert table.row_count == 1
        payload = records.query_one("#record-payload", CodeView)
        shown = "\n".join(payload.lines)
        assert "[bold]PLANTED[/bold] [link=http://x]click[/link] ^[[31mred" in shown
        assert "\x1b" not in shown
        # on screen: the list row and the payload, literally; no link, no bold from the data
        await press(pilot, "tab")
        line = payload.find("PLANTED")
        assert line is not None
        payload.scroll_to(x=payload.lines[line].index("[bold]") - 1, animate=False)
        await pilot.pause()
        text = screen_text(app)
        assert "[bold]PLANTED[/bold]" in text
        assert "[link=http://x]click[/link]" in text
        assert "^[[31mred" in text
        for strip in app.screen._compositor.render_strips():
            for seg in strip:
                assert seg.style is None or not seg.style.link
                assert "\x1b" not in seg.text


# ------------------------------------------------------------------- graphs and kernels
@sync
async def test_kernel_origin_leads_to_the_forward_source_line() -> None:
    app = build_app(open_args("fixtures/training"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await tables(pilot)
        await press(pilot, "4")
        browser = main.query_one(CodeBrowser)
        await press(pilot, "slash", *"cpp_fused_erf_mul", "enter")
        assert browser.item is not None and browser.item["name"] == "cpp_fused_erf_mul_1"
        code = browser.query_one("#code-text", CodeView)
        assert any("erf()" in line for line in code.lines)
        await press(pilot, "o")
        origin = static_text(browser.query_one("#origin"))
        assert "training.py:23" in origin
        assert "h = torch.erf(h) * 0.5" in origin
        assert "(via dataflow, exact)" in origin  # how it knows, and that it is not a guess
        # the code view followed the link to the forward graph, cursor on the erf node
        assert browser.item["kind"] == "aot_forward"
        assert "torch.ops.aten.erf.default" in code.current_line
        # issue 33.5: the list keeps the focus, so Down walks it on from the forward graph
        assert isinstance(app.focused, LazyTable)
        assert "training.py:23" in screen_text(app)
        # back: the kernel again
        await press(pilot, "left_square_bracket")
        assert browser.item["name"] == "cpp_fused_erf_mul_1"

        # the backward kernel of erf (its name does not say erf) leads to line 23 too;
        # / searches the pane with focus: tab goes back to the list
        if not isinstance(app.focused, LazyTable):
            await press(pilot, "tab")
        assert isinstance(app.focused, LazyTable)
        await press(pilot, "slash", *"cpp_fused_exp_mul_neg_pow_sum_0", "enter")
        assert browser.item["name"] == "cpp_fused_exp_mul_neg_pow_sum_0"
        await press(pilot, "o")
        chains = browser._chains
        assert any(ch.get("user_line") == 23 and (ch.get("user_file") or "").endswith("training.py") for ch in chains)
        assert "training.py:23" in static_text(browser.query_one("#origin"))


@sync
async def test_backward_node_origin_from_the_graph() -> None:
    app = build_app(open_args("fixtures/training"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await tables(pilot)
        await press(pilot, "4")
        browser = main.query_one(CodeBrowser)
        table = browser.query_one("#code-list", LazyTable)
        i = table.find("aot_backward", keys=["kind"])
        assert i is not None
        table.move_to(i)
        await pilot.pause()
        assert browser.item["kind"] == "aot_backward"
        await press(pilot, "tab")
        code = browser.query_one("#code-text", CodeView)
        # the first backward node computed for erf: the line defining `mul_1` or `pow_1` ...
        line = next(n for n, s in enumerate(code.lines) if "torch.ops.aten.pow.Tensor_Scalar" in s)
        code.go_to_line(line)
        await press(pilot, "o")
        origin = static_text(browser.query_one("#origin"))
        assert "training.py:23" in origin
        assert browser.item["kind"] == "aot_forward"


@sync
async def test_code_view_highlights_and_searches() -> None:
    app = build_app(open_args("fixtures/training"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await tables(pilot)
        await press(pilot, "4")
        browser = main.query_one(CodeBrowser)
        table = browser.query_one("#code-list", LazyTable)
        table.move_to(table.find("aot_forward", keys=["kind"]))
        await pilot.pause()
        code = browser.query_one("#code-text", CodeView)
        assert code.highlighted and code.language == "python"
        # the `def forward` line is drawn with the keyword style of the theme
        n = next(i for i, s in enumerate(code.lines) if s.lstrip().startswith("def forward"))
        code.go_to_line(n)
        await pilot.pause()
        keyword = code.get_component_rich_style("code-view--keyword", partial=True)
        strip = code.render_line(n - int(code.scroll_y))
        assert any(seg.text.startswith("def") and seg.style and seg.style.bold == keyword.bold and seg.style.color == keyword.color for seg in strip)
        await press(pilot, "tab", "slash", *"aten.erf", "enter")
        assert "aten.erf" in code.current_line


# ------------------------------------------------------------------ help, copy, palette
@sync
async def test_help_lists_every_binding() -> None:
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await tables(pilot)
        active = {}
        for view in "234561":  # every view, with its main widget focused
            await press(pilot, view)
            active.update(main.active_bindings)
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        groups = binding_groups(app)
        md = help_markdown(groups, app)
        from textual.binding import Binding

        for _title, bindings in groups:
            for b in Binding.make_bindings(bindings):
                assert f"`{app.get_key_display(b)}" in md or f" {app.get_key_display(b)}`" in md or (
                    f" / {app.get_key_display(b)}" in md
                ), b
                if b.description:
                    assert b.description in md, b
        # every key active on the main screen is in the help
        for key, active_binding in active.items():
            b = active_binding.binding
            assert app.get_key_display(b) in md, key
        assert "Next finding" in md and "Origin" in md and "Clear filters" in md
        await press(pilot, "escape")
        assert isinstance(app.screen, MainScreen)


@sync
async def test_copy_puts_the_current_item_on_the_clipboard() -> None:
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await press(pilot, "c")
        assert app.clipboard.startswith("RECOMPILE STORM: shape_storm")
        assert "fix: " in app.clipboard
        # a compile: its detail, not the UI's key hints (issue 16.13)
        await press(pilot, "2")
        await press(pilot, "c")
        assert app.clipboard.startswith("[0/0] shape_storm")
        assert "record fixtures/recompiles/trace/" in app.clipboard and "enter: guards" not in app.clipboard


@sync
async def test_command_palette_goes_to_a_compile() -> None:
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "ctrl+p")
        await press(pilot, *"Compile 2/1 flagged")
        await until(pilot, lambda: "Compile 2/1 flagged" in screen_text(app), "the palette lists the compile")
        await press(pilot, "enter")
        await until(pilot, lambda: main.view.view_id == "frames", "the frames view opens")
        assert main.query_one(FramesView).compile_ref() == (None, "2/1")


@sync
async def test_guards_keep_the_focus_after_d_hides_the_comparison() -> None:
    # issue 16.2: d hid the pane that had the focus; d , . did nothing until Tab
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await tables(pilot)
        await press(pilot, "enter")  # the storm: guards of 0/1 compared with 0/0
        guards = main.query_one(GuardsView)
        assert guards.comparing and app.focused is guards.query_one("#guards-right")
        # issue 16.4: the two guard counts say what each counts (12 logged, metrics 10)
        title = static_text(guards.query_one("#guards-title"))
        assert "12 guards logged (from the trace); Dynamo's metrics count 10 before building the guard tree" in title
        await press(pilot, "d")
        assert not guards.comparing
        assert app.focused is guards.query_one("#guards-left")
        assert "d Compare" in screen_text(app)  # the footer still offers it
        await press(pilot, "d")  # and it works again at once
        assert guards.comparing
        await press(pilot, "full_stop")
        assert guards.key == (None, "0/2")
        # , on the first compile of the frame says so (issue 16.13)
        await press(pilot, "comma", "comma")
        assert guards.key == (None, "0/0")
        await press(pilot, "comma")
        await until(pilot, lambda: any("is the first compile" in n.message for n in app._notifications), "a note")
        # g stays in the guards view when the id is a compile (issue 16.13)
        await press(pilot, "g", *"1/1", "enter")
        assert main.view.view_id == "guards" and guards.key == (None, "1/1")


@sync
async def test_ctrl_c_twice_quits() -> None:
    # help says "Quit (press twice)"; the first press only says how
    app = build_app(open_args("fixtures/simple"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await press(pilot, "ctrl+c")
        assert app.is_running
        await until(pilot, lambda: any("press ctrl+c again" in n.message for n in app._notifications), "a hint")
        await press(pilot, "ctrl+c")
    assert app.return_code == 0


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=lambda s: f"{s[0]}x{s[1]}")
@sync
async def test_multirank_first_screen_names_the_diverging_rank(size: tuple[int, int]) -> None:
    # 4 gloo ranks, rank 2 fed a batch of 6 once (issue 16.6, 16.5, 16.10): the first screen
    # names rank 2 as the summary does (issue 44.10: the stall, not "rank 2 diverges"); Frames
    # marks it and calls no healthy compile a failure (each rank's report() restarts after its
    # print() graph break, which is normal)
    app = build_app(open_args("fixtures/corpus/multirank4"))
    async with app.run_test(size=size) as pilot:
        main = await ready(pilot)
        text = screen_text(app)
        header = " ".join(" ".join(text.splitlines()[1:4]).split())
        assert header.startswith("13 compiles · 4 ranks · 16.25s compiling findings: ranks 0,1,3 stalled ~0.20s "
                                 "while rank 2 compiled alone, 1 graph break")
        assert "diverges" not in header
        # rank 2 compiled [0/1] alone while the others waited: the stall it cost, first
        assert "RANK STALL" in text and "ranks 0,1,3 waited ~0.20s at their next collective while rank 2" in " ".join(text.split())
        await press(pilot, "2")
        frames = main.query_one(FramesView)
        tree = frames.query_one("#frames-tree")
        labels = {n.data[1]: n.label.plain for n in tree.root.children}
        # rank 2 marked with its finding's own title, as the summary files it: a stall, not "DIVERGES"
        assert "RANK STALL: ranks 0,1,3 waited ~0.20s" in labels[2] and "DIVERGES" not in labels[2]
        assert not any("RANK STALL" in labels[r] for r in (0, 1, 3))
        everything = "\n".join(n.label.plain for n in _walk(tree.root))
        assert "failed" not in everything and "not ok" not in everything
        assert all(f"{mark('restarted')} 1 restarted" in labels[r] for r in range(4))
        assert "restarted after a graph break (normal)" in static_text(frames.query_one("#frames-title"))


def _walk(node):
    for c in node.children:
        yield c
        yield from _walk(c)


@sync
async def test_q_quit_is_in_every_views_footer_at_80x24() -> None:
    # issue 44.10: Textual lists the app's keys last, and at 80 columns the footer ended before
    # q Quit; it comes right after the view's own keys (f Filters, ...) now
    app = build_app(open_args("fixtures/corpus/multirank4"))
    async with app.run_test(size=(80, 24)) as pilot:
        await tables(pilot)
        for key in "1234567":
            await press(pilot, key)
            footer = screen_text(app).splitlines()[-1]
            assert "q Quit" in footer, (key, footer)
            assert footer.index("q Quit") < footer.index("? Help"), (key, footer)
        await press(pilot, "q")
    assert app.return_code == 0


@sync
async def test_q_quits_with_exit_code_0() -> None:
    app = build_app(open_args("fixtures/simple"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await press(pilot, "q")
    assert app.return_code == 0


# -------------------------------------------------------------------- loading and runs
@sync
async def test_escape_cancels_loading_with_a_nonzero_exit() -> None:
    release = threading.Event()

    def slow_loader():
        release.wait(30)
        return traceview.load("fixtures/simple")

    app = TraceviewApp(slow_loader, where="fixtures/simple")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.screen.id == "loading", "the loading screen")
        assert "fixtures/simple" in screen_text(app)
        await press(pilot, "escape")
    release.set()
    assert app.cancelled
    assert app.return_code == 1
    assert app.model is None


@sync
async def test_several_runs_offer_a_picker(tmp_path: Path) -> None:
    src = next((FIXTURES / "simple" / "trace").glob("*.log"))
    # two runs of the same process (no ranks) in one directory: a second rank-less file is a new run
    shutil.copy(src, tmp_path / "dedicated_log_torch_trace_aaaa.log")
    shutil.copy(next((FIXTURES / "recompiles" / "trace").glob("*.log")), tmp_path / "dedicated_log_torch_trace_bbbb.log")
    app = build_app(open_args(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunPicker), "the run picker")
        text = screen_text(app)
        assert "holds 2 runs" in text
        assert "run 1" in text and "run 2" in text
        assert "dedicated_log_torch_trace_aaaa.log" in text
        picker = app.screen
        recompiles_run = next(i for i, r in enumerate(picker.runs) if r.paths[0].endswith("bbbb.log"))
        picker.query_one("#run-list").highlighted = recompiles_run
        await press(pilot, "enter")
        main = await ready(pilot)
        assert main.model.compiles.height == 13  # the recompiles run, not both


@sync
async def test_second_open_reads_the_parse_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    import traceview.ingest.cache as cache
    import traceview.ingest.pipeline as pipeline

    app = build_app(open_args("fixtures/graph_breaks"))
    async with app.run_test(size=SIZE) as pilot:
        await tables(pilot)
    assert any((p / "done").exists() for p in cache.cache_dir().iterdir()), "the first open fills the parse cache"

    def parse_again(*args, **kwargs):
        raise AssertionError("parsed again although the inputs did not change")

    monkeypatch.setattr(pipeline, "parse_to_dir", parse_again)
    app2 = build_app(open_args("fixtures/graph_breaks"))
    async with app2.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        assert Path(main.model.trace.workdir).parent == cache.cache_dir()
        assert "GRAPH BREAK" in screen_text(app2)
        assert app2.timings["first_screen"] < 10


@sync
async def test_narrow_terminal_stacks_panes() -> None:
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=(80, 24)) as pilot:
        main = await ready(pilot)
        assert main.has_class("narrow")
        lst = main.query_one("#findings-list")
        detail = main.query_one("#finding-detail-pane")
        assert detail.region.y > lst.region.y and detail.region.x == lst.region.x
        await press(pilot, "2")
        tree = main.query_one("#frames-tree")
        assert tree.region.width == 80
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        assert not main.has_class("narrow")


@sync
async def test_no_color_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.no_color
        # what reaches the terminal goes through the app's filters: no hue is left
        strips = app.screen._compositor.render_strips()
        seen = 0
        for strip in strips:
            for f in app._filters:
                strip = strip.apply_filter(f, app.screen.styles.background)
            for seg in strip:
                for color in (seg.style.color, seg.style.bgcolor) if seg.style else ():
                    if color is None or color.is_default:
                        continue
                    r, g, b = color.get_truecolor()
                    assert r == g == b, (seg.text, color)
                    seen += 1
        assert seen > 0


@sync
async def test_ascii_marks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEVIEW_ASCII", "1")
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await press(pilot, "2")
        text = screen_text(app)
        assert "+ ok" in text and "x failed" in text
        assert "✓" not in text and "✗" not in text


def test_sixteen_colour_terminal_gets_the_ansi_theme(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACEVIEW_THEME")
    monkeypatch.delenv("COLORTERM", raising=False)
    monkeypatch.setenv("TERM", "screen")  # tmux/screen default: 8/16 colours
    assert TraceviewApp().theme == "ansi-dark"
    monkeypatch.setenv("TERM", "xterm-256color")
    assert TraceviewApp().theme != "ansi-dark"


# ------------------------------------------------------------------------- big tables
@sync
async def test_lazy_table_over_100k_rows_renders_only_visible_rows() -> None:
    from textual.app import App, ComposeResult

    n = 100_000
    df = pl.DataFrame({"i": range(n), "text": [f"row {i} [bold]x[/bold]" for i in range(n)]})

    class TableApp(App[None]):
        def compose(self) -> ComposeResult:
            yield LazyTable([Column("i", "i", 8), Column("text", "text")], id="t")

        def on_mount(self) -> None:
            self.query_one(LazyTable).set_frame(df)
            self.query_one(LazyTable).focus()

    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(LazyTable)
        sliced: list[int] = []
        real_slice = pl.DataFrame.slice

        def counting_slice(self: pl.DataFrame, offset: int, length: int | None = None) -> pl.DataFrame:
            if self is table.frame:
                sliced.append(length or 0)
            return real_slice(self, offset, length)

        pl.DataFrame.slice = counting_slice  # type: ignore[method-assign]
        try:
            await press(pilot, "end")
            for _ in range(20):
                await press(pilot, "pageup")
        finally:
            pl.DataFrame.slice = real_slice  # type: ignore[method-assign]
        assert table.cursor == n - 1 - 20 * table._page
        # only the rows near the screen were ever taken from the frame, never all 100k
        assert 0 < sum(sliced) < n // 10
        text = screen_text(app)
        assert f"row {table.cursor} [bold]x[/bold]" in text


@sync
async def test_code_view_over_50k_lines() -> None:
    from textual.app import App, ComposeResult

    code = "\n".join(f"def f{i}(x):  # line {i}\n    return x + {i}" for i in range(25_000))

    class CodeApp(App[None]):
        def compose(self) -> ComposeResult:
            yield CodeView(id="c")

        def on_mount(self) -> None:
            self.query_one(CodeView).set_text(code, language="python")
            self.query_one(CodeView).focus()

    app = CodeApp()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(CodeView)
        assert len(view.lines) == 50_000
        lexed: list[int] = []
        real = code_view.highlight_block

        def counting(lines: list[str], language: str, prefix: str = "") -> list:
            lexed.append(len(lines))
            return real(lines, language, prefix)

        code_view.highlight_block = counting
        try:
            await press(pilot, "end")
            for _ in range(30):
                await press(pilot, "pageup")
        finally:
            code_view.highlight_block = real
        # highlighted block by block as it scrolled into view, never the whole text
        assert 0 < sum(lexed) < 50_000 // 10
        assert view.find("def f12345(") is not None
        await pilot.pause()
        assert "def f12345(x):" in screen_text(app)


def test_a_finding_the_same_on_every_rank_is_listed_once(tmp_path: Path) -> None:
    # four ranks that ran the same recompiling program (copies of one real log, renamed per
    # rank): each storm is one entry naming ranks 0-3, not four; Enter opens rank 0
    from traceview.tui.finding_rows import findings_from_report

    src = next((FIXTURES / "recompiles" / "trace").glob("*.log"))
    one = findings_from_report(build_report(traceview.load(src)))
    for r in range(4):
        (tmp_path / f"dedicated_log_torch_trace_rank_{r}_copy.log").write_bytes(src.read_bytes())
    report = build_report(traceview.load(tmp_path))
    # shape_storm, then scaled's and flagged's single recompiles
    per_rank = [f for f in one if f.kind in ("storm", "recompile", "expected")]
    assert len(per_rank) == 3 and len(report["recompiles"]) == 4 * 3
    findings = findings_from_report(report)
    storms = [f for f in findings if f.kind in ("storm", "recompile", "expected")]
    assert [f.title for f in storms] == [f"ranks 0-3 {f.title}" for f in per_rank]
    assert all(f.rank == 0 for f in storms)
    assert ("ranks", "ranks 0-3, the same on each") in storms[0].detail
    # no compile of this run is slow relative to it (all under a second)
    assert [f for f in findings if f.kind == "compile_time"] == []
    # the report's slowest compiles keep every rank of each (the summary said "ranks 0-1"
    # for some when its top 10 rows ran out)
    from traceview.output.summary import render_text

    text = render_text(report, width=120)
    assert "ranks 0-3 [1/1] scaled" in text and "ranks 0-1" not in text


def test_raw_records_name_chromium_events_and_indent_json() -> None:
    # issue 16.9: a chromium event's metadata is {}; the list shows its name and phase
    from traceview.tui.model import _pretty_json, record_index

    trace = traceview.load("fixtures/recompiles")
    idx = record_index(trace)
    chrome = idx.filter(pl.col("kind") == "chromium_event")
    first = chrome.row(0, named=True)
    assert first["lineno"] == 1 and first["summary"] == "dynamo  (begin, ph B)"
    assert chrome.filter(pl.col("summary") == "{}").height <= 1  # one event has no span
    # a one-line JSON payload is indented; anything else is left as written
    assert _pretty_json('{"a":[1,2]}') == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert _pretty_json("not json {") == "not json {"


# ------------------------------------------------------------------------------ timeline
@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=lambda s: f"{s[0]}x{s[1]}")
@sync
async def test_timeline_shows_when_each_rank_compiled(size: tuple[int, int]) -> None:
    # issue 16.12: 4 gloo ranks; rank 2 alone recompiled forward (0/1) at step 1. The
    # timeline (key 6) has one bar line per rank, lists every compile by start with its offset
    # and length from the compile metrics, and leads from a compile to Frames.
    trace = traceview.load("fixtures/corpus/multirank4")
    c = trace.compiles
    first = c["start"].min()
    extra = c.filter(pl.col("compile_id") == "0/1").to_dicts()
    assert [r["rank"] for r in extra] == [2]
    extra_offset = (extra[0]["start"] - first).total_seconds()
    app = build_app(open_args("fixtures/corpus/multirank4"))
    async with app.run_test(size=size) as pilot:
        await tables(pilot)
        main = app.screen
        await press(pilot, "6")
        assert main.view.view_id == "timeline"
        view = main.query_one(TimelineView)
        text = screen_text(app)
        assert "Timeline: 13 compiles + 5 backward pieces on 4 ranks" in text
        bars = [line for line in text.splitlines() if line.lstrip().startswith("rank ") and "│" in line]
        assert [b.split("│")[0].strip() for b in bars] == ["rank 0", "rank 1", "rank 2", "rank 3"]
        # compiles, not bars: a lazily compiled backward is a part of its compile (issue 44.2)
        per_rank = c.group_by("rank").len()
        assert dict(per_rank.iter_rows()) == {0: 3, 1: 3, 2: 4, 3: 3}
        assert "4 compiles" in bars[2] and all("3 compiles" in bars[r] for r in (0, 1, 3))
        table = view.query_one("#timeline-list", LazyTable)
        starts = [table.row(i)["start_us"] for i in range(table.row_count)]
        assert starts == sorted(starts)
        # / finds rank 2's recompile; its offset and length are the compile metrics'
        await press(pilot, "slash", *"0/1", "enter")
        row = table.current
        assert (row["rank"], row["compile_id"], row["part"]) == (2, "0/1", "forward")
        assert row["offset_s"] == pytest.approx(extra_offset, abs=1e-6)
        assert row["dur_us"] == round(extra[0]["compile_time_s"] * 1e6)
        detail = static_text(view.query_one("#timeline-detail"))
        assert f"rank 2: compile started +{extra_offset:.2f}s after the first compile, took 201ms" in detail
        # the rank that compiled alone: 1 of 4 ranks (every other compile: 4 of 4)
        assert row["on_ranks"] == "1/4" and "only rank 2 compiled this: the other 3 ranks did not" in detail
        alone = [table.row(i) for i in range(table.row_count) if table.row(i)["on_ranks"] != "4/4"]
        assert {(r["rank"], r["compile_id"], r["part"]) for r in alone} == {(2, "0/1", "forward"), (2, "0/1", "backward")}
        # the compile account's one cause, as the findings say it (not torch's first-listed guard)
        assert "recompiled: dimension 0 of x varies (seen: 8, 6)" in detail
        # the selected compile is drawn in its own glyph on rank 2's line only
        text = screen_text(app)
        bars = [line for line in text.splitlines() if line.lstrip().startswith("rank ") and "│" in line]
        assert SELECTED in bars[2] and not any(SELECTED in bars[r] for r in (0, 1, 3))
        # s: longest first (rank 3's first compile); s again: back to start order, same row
        await press(pilot, "s")
        assert table.row(0)["dur_us"] == max(table.row(i)["dur_us"] or 0 for i in range(table.row_count))
        assert (table.current["rank"], table.current["compile_id"]) == (2, "0/1")
        await press(pilot, "s")
        assert [table.row(i)["start_us"] for i in range(table.row_count)] == starts
        # enter: the compile in Frames; 6 again comes back to it
        await press(pilot, "enter")
        assert main.view.view_id == "frames"
        assert main.query_one(FramesView).compile_ref() == (2, "0/1")
        await press(pilot, "6")
        assert (table.current["rank"], table.current["compile_id"]) == (2, "0/1")


@sync
async def test_timeline_totals_are_the_summarys_with_every_backward_piece() -> None:
    # issue 44.2: DDPOptimizer split [4/0] into 4 buckets, each with a backward compiled
    # lazily (4 bwd_compilation_metrics per rank under one id). The Timeline draws a bar per
    # piece; its totals (title and each rank's line) are the compiles' own figures, the same
    # the summary prints, not the bars added up.
    trace = traceview.load("fixtures/corpus/ddp_rank_recompile")
    report = build_report(trace)
    app = build_app(open_args("fixtures/corpus/ddp_rank_recompile"))
    async with app.run_test(size=(160, 45)) as pilot:
        await tables(pilot)
        await press(pilot, "6")
        view = app.screen.query_one(TimelineView)
        text = screen_text(app)
        total = report["compile_time"]["total_s"]
        assert f"Timeline: 22 compiles + 16 backward pieces on 4 ranks, {seconds_text(total)} compiling" in text
        bars = [line for line in text.splitlines() if line.lstrip().startswith("rank ") and "│" in line]
        per_rank = {r["rank"]: r["compile_time_s"] for r in report["per_rank"]}
        for rank, line in enumerate(bars):
            n = 7 if rank == 3 else 5
            # then the rank's state when the capture ends (the rank account's)
            assert f"│ {seconds_text(per_rank[rank])}, {n} compiles · idle " in line
        table = view.query_one("#timeline-list", LazyTable)
        rows = [table.row(i) for i in range(table.row_count)]
        pieces = [r for r in rows if r["rank"] == 0 and r["piece"] == "backward"]
        assert [(r["compile_id"], r["part"], r["pieces"]) for r in pieces] == [("4/0", f"backward {i} of 4", 4) for i in (1, 2, 3, 4)]


# ------------------------------------------------------------------- compare across ranks
@sync
async def test_m_compares_a_compile_with_the_same_frame_on_another_rank() -> None:
    # issue 16.10: 4 gloo ranks; rank 2 alone recompiled forward (0/1) for a batch of 6.
    # m (frames or guards) puts the guards of the same frame on the next rank beside it; v
    # shows the two Dynamo graphs and where they first differ.
    app = build_app(open_args("fixtures/corpus/multirank4"))
    async with app.run_test(size=SIZE) as pilot:
        await tables(pilot)
        main = app.screen
        await press(pilot, "2", "g", *"rank 2 0/1", "enter")
        assert main.query_one(FramesView).compile_ref() == (2, "0/1")
        await press(pilot, "m")
        guards = main.query_one(GuardsView)
        assert main.view.view_id == "guards"
        # rank 3 has no 0/1: the frame's last compile there, 0/0
        assert (guards.key, guards.compare_rank, guards.compare_id, guards.comparing) == ((2, "0/1"), 3, "0/0", True)
        text = screen_text(app)
        assert "[0/1] rank 2 this compile" in text and "[0/0] rank 3 compared" in text
        left = guards.query_one("#guards-left", LazyTable).frame
        right = guards.query_one("#guards-right", LazyTable).frame
        x_left = left.filter((pl.col("kind") == "TENSOR_MATCH") & (pl.col("guard_source") == "L['x']")).row(0, named=True)
        x_right = right.filter((pl.col("kind") == "TENSOR_MATCH") & (pl.col("guard_source") == "L['x']")).row(0, named=True)
        assert x_left["mark"] == "≠" and x_left["shown"].startswith("…size=[6, 8]")
        assert x_right["shown"].startswith("…size=[8, 8]")
        assert "…size=[6, 8], stride=[8, 1])" in text  # in the table, not only in the strip
        # m again: the next rank, skipping rank 2 itself, round and round
        seen = []
        for _ in range(3):
            await press(pilot, "m")
            seen.append(guards.compare_rank)
        assert seen == [0, 1, 3]
        assert app.focused is guards.query_one("#guards-right")
        # v: the Dynamo graphs side by side, where they first differ
        await press(pilot, "v")
        assert guards.showing_graphs
        label = static_text(guards.query_one("#guards-right-label"))
        assert label.startswith("[0/0] rank 3 Dynamo graph") and "the graphs differ from line 2" in label
        detail = static_text(guards.query_one("#guard-detail"))
        assert 'L_x_: "f32[6, 8][8, 1]cpu"' in detail.split("[0/0] rank 3:")[0]
        assert 'L_x_: "f32[8, 8][8, 1]cpu"' in detail.split("[0/0] rank 3:")[1]
        # c copies the graph with the focus (rank 3's), / searches it
        assert app.focused is guards.query_one("#graph-right")
        rank3 = main.model.trace.graphs.filter(
            (pl.col("kind") == "dynamo") & (pl.col("rank") == 3) & (pl.col("compile_id") == "0/0")
        )["text"][0]
        await press(pilot, "c")
        assert app.clipboard.rstrip("\n") == rank3.rstrip("\n")
        await press(pilot, "slash", *"linear_1", "enter")
        assert "linear_1" in guards.query_one("#graph-right", CodeView).current_line
        await press(pilot, "v")
        assert not guards.showing_graphs and guards.query_one("#guards-left").display
        # back: the frames view where m was pressed
        await press(pilot, "left_square_bracket")
        assert main.view.view_id == "frames"


@sync
async def test_m_is_offered_only_with_several_ranks() -> None:
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        await tables(pilot)
        main = app.screen
        await press(pilot, "2")
        assert "m Other rank" not in screen_text(app)
        await press(pilot, "m")
        assert main.view.view_id == "frames"
        await press(pilot, "enter")  # the guards of 0/0
        assert main.view.view_id == "guards" and "m Other rank" not in screen_text(app)
    app = build_app(open_args("fixtures/corpus/multirank4"))
    async with app.run_test(size=SIZE) as pilot:
        await tables(pilot)
        await press(pilot, "2")
        assert "m Other rank" in screen_text(app)


@sync
async def test_long_guards_and_reasons_show_where_they_differ() -> None:
    # issue 16.8: automatic dynamic shapes: 0/1 recompiled with dimension 0 of x dynamic.
    # The compare view's guard column starts at the difference (size=[None, 16] against
    # size=[4, 16]); a recompile reason cut in the tree ends with "…", whole in the detail.
    app = build_app(open_args("fixtures/corpus/automatic_dynamic_once"))
    async with app.run_test(size=SIZE) as pilot:
        await tables(pilot)
        main = app.screen
        await press(pilot, "g", *"0/1", "enter", "3")
        guards = main.query_one(GuardsView)
        assert (guards.key, guards.compare_id, guards.comparing) == ((None, "0/1"), "0/0", True)
        text = screen_text(app)
        row = next(line for line in text.splitlines() if "…size=[None, 16]" in line)
        assert "…size=[4, 16], stride=[16, 1])" in row  # the failed guard beside it
        assert f"{FAILED_MARK} TENSOR_MATCH" in row
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        main = app.screen
        await press(pilot, "2", "g", *"1/1", "enter")
        tree_line = next(line for line in screen_text(app).splitlines() if "1/1" in line and "recompile:" in line)
        assert tree_line.rstrip(" ▁▂▃▄▅▆▇█").endswith("…")
        detail = static_text(main.query_one("#compile-detail"))
        assert "1/0: scale == 1.0" in detail and "# return x * scale + 1.0" in detail


# ------------------------------------------------------------------------------- repro
@sync
async def test_w_writes_a_repro_of_the_selected_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 19: a key on a compile writes its repro (traceview.workflow.repro.save_repro, the library)
    # and says where. fixtures/inductor_error: 0/0 failed in Inductor (InductorError), its
    # fx_graph_runnable logged; the script is the library's, expected to raise the same class.
    out = tmp_path / "repros"
    monkeypatch.setenv("TRACEVIEW_REPRO_DIR", str(out))
    app = build_app(open_args("fixtures/inductor_error"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "2", "g", *"0/0", "enter")
        assert main.query_one(FramesView).compile_ref() == (None, "0/0")
        await press(pilot, "w")
        await until(pilot, lambda: main.last_repro is not None, "the repro is written")
        path = main.last_repro
        assert path == out / "repro_0_0.py"
        expected = build_repro(traceview.load("fixtures/inductor_error"), "0/0")
        assert path.read_text() == expected.text and expected.expected_exception == "InductorError"
        note = next(n.message for n in app._notifications if n.message.startswith("wrote "))
        assert note == f"wrote {path} ({expected.summary})"
        assert "expected to raise InductorError" in note


@sync
async def test_w_never_writes_into_the_input_and_says_why_a_compile_has_no_repro(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # run from inside a copy of fixtures/recompiles: the repro goes to a temporary
    # directory, the input is not written to
    copy = tmp_path / "recompiles"
    shutil.copytree(FIXTURES / "recompiles", copy)
    before = sorted(p.name for p in copy.rglob("*"))
    monkeypatch.chdir(copy)
    monkeypatch.delenv("TRACEVIEW_REPRO_DIR", raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    app = build_app(open_args(copy))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "2", "g", *"0/1", "enter", "w")
        await until(pilot, lambda: main.last_repro is not None, "the repro is written")
        assert main.last_repro == tmp_path / "tmp" / "traceview-repros" / "repro_0_1.py"
    assert sorted(p.name for p in copy.rglob("*")) == before
    # fixtures/backend_error: a custom backend, whose code is not in the log: said, not written
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRACEVIEW_REPRO_DIR", str(tmp_path / "out"))
    app = build_app(open_args("fixtures/backend_error"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "2", "g", *"0/0", "enter", "w")
        await until(
            pilot, lambda: any("no repro of [0/0]: " in n.message and "failing_backend" in n.message for n in app._notifications),
            "why 0/0 has no repro",
        )
        assert main.last_repro is None and not any((tmp_path / "out").glob("*.py"))


# ------------------------------------------------------------------ Inductor's whole files
@sync
async def test_code_view_has_the_output_code_and_fx_graph_runnable_tagged_forward_backward() -> None:
    # issue 16.11: fixtures/training compiles a forward and a backward graph with Inductor;
    # its whole output code and fx_graph_runnable of each are in the list, tagged fwd/bwd
    # like its kernels, and shown whole
    trace = traceview.load("fixtures/training")
    ev = trace.events
    codes = ev.filter(pl.col("kind") == "inductor_output_code").sort("lineno")["payload"].to_list()
    runnables = ev.filter(pl.col("name") == "fx_graph_runnable").sort("lineno")["payload"].to_list()
    assert len(codes) == 2 and len(runnables) == 2
    kernels = trace.kernels.filter(pl.col("kind") == "cpp")
    fwd = kernels.filter(pl.col("graph") == "0_forward")["name"].to_list()
    bwd = kernels.filter(pl.col("graph") == "0_backward")["name"].to_list()
    assert fwd and bwd
    app = build_app(open_args("fixtures/training"))
    async with app.run_test(size=(160, 45)) as pilot:
        await tables(pilot)
        main = app.screen
        await press(pilot, "4")
        browser = main.query_one(CodeBrowser)
        assert "4 Inductor files (output code, fx_graph_runnable)" in static_text(browser.query_one("#code-title"))
        listed = browser.query_one("#code-list", LazyTable).frame
        tags = dict(zip(listed.filter(pl.col("what") == "kernel")["name"], listed.filter(pl.col("what") == "kernel")["part"]))
        assert all(tags[k] == "forward" for k in fwd) and all(tags[k] == "backward" for k in bwd)
        code = browser.query_one("#code-text", CodeView)
        shown = []
        for name in ("inductor_output_code", "inductor_output_code", "fx_graph_runnable", "fx_graph_runnable"):
            await press(pilot, "slash", *name, "enter")
            item = browser.item
            assert item["name"] == name
            shown.append((item["part"], "\n".join(code.lines)))
        (p1, c1), (p2, c2), (p3, r1), (p4, r2) = shown
        assert (p1, p2) == ("forward", "backward") and (p3, p4) == ("forward", "backward")
        assert c1.rstrip("\n") == codes[0].rstrip("\n")
        assert c2.rstrip("\n") == codes[1].rstrip("\n")
        assert all(k in c1 for k in fwd) and all(k in c2 for k in bwd) and not any(k in c1 for k in bwd)
        assert r1.rstrip("\n") == runnables[0].rstrip("\n") and r2.rstrip("\n") == runnables[1].rstrip("\n")
        assert "class Repro(torch.nn.Module)" in r1
        text = screen_text(app)
        assert "output code   inductor_output_code" in text and "fx runnable   fx_graph_runnable" in text


# ------------------------------------------------------------------------ text log alone
@sync
async def test_a_text_log_alone_says_what_it_knows_and_reaches_the_guards() -> None:
    # issue 16.13: TORCH_LOGS text of fixtures/recompiles without its trace: no compile
    # metrics, so no "0 compiles" or "0.00s compiling"; the frames tree lists the compile ids
    # the log names, and Enter leads to their guards from the text log
    app = build_app(open_args("fixtures/recompiles/torch_logs.txt"))
    async with app.run_test(size=SIZE) as pilot:
        await tables(pilot)
        main = app.screen
        text = screen_text(app)
        assert "13 compile ids in the text log (no compile metrics)" in text
        header = text.splitlines()[1]
        assert "0 compiles" not in header and "compiling" not in header
        await press(pilot, "2")
        frames = main.query_one(FramesView)
        title = static_text(frames.query_one("#frames-title"))
        assert title.startswith("13 compile ids in the text log, 3 code objects (no compile metrics")
        leaves = [n for n in _walk(frames.query_one("#frames-tree").root) if n.data and n.data[0] == "compile"]
        assert len(leaves) == 13
        await press(pilot, "g", *"0/1", "enter")
        detail = static_text(frames.query_one("#compile-detail"))
        assert "[0/1]  from the text log: no compile metrics" in detail
        assert "function     shape_storm" in detail and "0/0: tensor 'x' size mismatch at index 1. expected 2, actual 3" in detail
        await press(pilot, "enter")
        guards = main.query_one(GuardsView)
        assert main.view.view_id == "guards" and guards.key == (None, "0/1") and guards.compare_id == "0/0"
        assert "Guards of [0/1] shape_storm  12 guards logged (from the text log)" in static_text(guards.query_one("#guards-title"))
        right = guards.query_one("#guards-right", LazyTable).frame
        assert right.filter(pl.col("mark") == FAILED_MARK)["guard_source"].to_list() == ["L['x']"]
        await press(pilot, "6")
        assert "Timeline: no compile has a start time: the text log has no compile metrics" in screen_text(app)


@sync
async def test_kind_selector_type_ahead_and_payload_paging_sideways() -> None:
    # issue 16.9: in the kind selector, typing jumps to the kind; in a payload, shift+→ and
    # shift+← move a page sideways (→ and ← a few columns)
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "5", "f")
        records = main.query_one(RecordsView)
        assert app.focused is records.query_one("#filter-kind")
        await press(pilot, "enter", *"dynamo_s", "enter")
        assert records.kind == "dynamo_start"
        # a guards record (long check_tensor lines), its payload
        await press(pilot, "escape", "x", "slash", *"check_tensor", "enter", "tab")
        payload = records.query_one("#record-payload", CodeView)
        assert app.focused is payload
        assert max(len(line) for line in payload.lines) > 2 * payload.page_width
        await press(pilot, "shift+right")
        assert payload.scroll_x == payload.page_width
        await press(pilot, "shift+left")
        assert payload.scroll_x == 0
        await press(pilot, "right")
        assert payload.scroll_x == 8


@sync
async def test_palette_finds_a_kernel_by_its_exact_name_first() -> None:
    # issue 16.11: kernels and graphs are in the palette; the one named as typed is first
    # (not a fuzzy match of another cpp_fused_* kernel), and Textual's own entries come after
    # traceview's
    from textual.command import CommandList, CommandPalette

    app = build_app(open_args("fixtures/training"))
    async with app.run_test(size=SIZE) as pilot:
        await tables(pilot)
        main = app.screen
        def prompts(commands: CommandList) -> list[str]:
            return [str(commands.get_option_at_index(i).prompt) for i in range(commands.option_count)]

        # extern_kernels.mm (5 calls in the backward) before extern_kernels.addmm, a fuzzy match
        await press(pilot, "ctrl+p", *"extern_kernels.mm")
        palette = app.screen
        assert isinstance(palette, CommandPalette)
        commands = palette.query_one(CommandList)
        await until(pilot, lambda: any("addmm" in p for p in prompts(commands)), "the fuzzy matches listed")
        shown = prompts(commands)
        assert all(p.startswith("Kernel extern_kernels.mm [0/0] bwd") for p in shown[:5])
        assert all("addmm" in p for p in shown[5:8])
        await press(pilot, "escape")
        await press(pilot, "ctrl+p", *"cpp_fused_sum_2")
        commands = app.screen.query_one(CommandList)
        await until(pilot, lambda: commands.option_count >= 1, "the kernel listed")
        assert prompts(commands)[0].startswith("Kernel cpp_fused_sum_2 [0/0] bwd")
        await press(pilot, "enter")
        await until(pilot, lambda: main.view.view_id == "code", "the graphs & kernels view")
        assert main.query_one(CodeBrowser).item["name"] == "cpp_fused_sum_2"
        # a query that matches Textual's "Theme" too: traceview's entries first
        await press(pilot, "ctrl+p", *"the")
        palette = app.screen
        commands = palette.query_one(CommandList)
        await until(pilot, lambda: any(str(commands.get_option_at_index(i).prompt).startswith("Theme")
                                       for i in range(commands.option_count)), "Textual's Theme listed")
        shown = prompts(commands)
        ours = [i for i, p in enumerate(shown) if p.startswith(("Kernel", "Graph", "Compile", "Finding", "View", "Inductor"))]
        assert ours and max(ours) < shown.index(next(p for p in shown if p.startswith("Theme")))


@sync
async def test_a_graph_break_finding_shows_its_user_stack() -> None:
    # issue 16.11: from a graph-break finding straight to its user stack: the "User code
    # traceback" of its reason record, right under where it happened (and in what c copies)
    trace = traceview.load("fixtures/graph_breaks")
    gb = trace.graph_breaks.filter((pl.col("function") == "print_inside") & (pl.col("source") == "trace")).row(0, named=True)
    payload = trace.events.filter((pl.col("file") == gb["file"]) & (pl.col("lineno") == gb["lineno"]))["payload"][0]
    block = payload.split("User code traceback:\n", 1)[1].split("\n\nTraceback (most recent call last)", 1)[0]
    expected = [line.rstrip() for line in block.rstrip().splitlines()]
    assert expected[-2:] == [
        '  File "/work/main/fixtures/programs/graph_breaks.py", line 16, in print_inside',
        '    print("planted print inside a compiled function")',
    ]
    app = build_app(open_args("fixtures/graph_breaks"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "slash", *"print_inside", "enter")
        view = main.query_one(FindingsView)
        assert view.finding.kind == "graph_break" and "print_inside" in view.finding.title
        detail = static_text(view.query_one("#finding-detail"))
        where = detail.index("where: ")
        stack = detail.index("user stack (last call last):\n")
        assert where < stack < detail.index("gb id: ")
        assert "\n".join(expected) in detail
        await press(pilot, "c")
        assert app.clipboard.endswith("user stack (last call last):\n" + "\n".join(expected))


@sync
async def test_ddp_split_graph_and_its_children_are_in_the_graphs_view() -> None:
    # issue 16.11: a real 2-rank DDP run (fixtures/gpu/ddp2_user_module, torch 2.11 + CUDA):
    # DDPOptimizer's split graph and its submodules are listed and shown (rank 1 recompiled
    # the split frame: 4/0 and 4/1)
    trace = traceview.load("fixtures/gpu/ddp2_user_module")
    child = trace.graphs.filter((pl.col("kind") == "ddp_child") & (pl.col("rank") == 1)).sort("lineno").row(3, named=True)
    assert (child["compile_id"], child["label"]) == ("4/0", "submod_3")
    app = build_app(open_args("fixtures/gpu/ddp2_user_module"))
    async with app.run_test(size=SIZE) as pilot:
        await tables(pilot)
        main = app.screen
        await press(pilot, "4")
        browser = main.query_one(CodeBrowser)
        listed = browser.query_one("#code-list", LazyTable).frame
        per_compile = listed.filter(pl.col("kind") == "ddp_child").group_by("rank", "compile_id").len().sort("rank", "compile_id").rows()
        assert per_compile == [(0, "4/0", 4), (1, "4/0", 4), (1, "4/1", 4)]
        assert listed.filter(pl.col("kind") == "ddp_split").height == 3
        await press(pilot, "ctrl+p", *child["label"])
        await until(pilot, lambda: "Graph submod_3 [4/0] rank 0" in screen_text(app), "the palette lists the child")
        await press(pilot, "down", "enter")  # rank 1's
        await until(pilot, lambda: main.view.view_id == "code" and browser.item is not None and browser.item.get("rank") == 1,
                    "the child of rank 1")
        assert browser.item["name"] == child["label"]
        assert "\n".join(browser.query_one("#code-text", CodeView).lines).rstrip() == child["text"].rstrip()


@sync
async def test_the_cursor_of_an_unfocused_table_stays_visible_in_16_colours(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 16.13: the ANSI theme (16 colours) gives a blurred cursor no colour; it is
    # underlined, and the focused table's cursor keeps its colours: which has the focus shows
    monkeypatch.setenv("TRACEVIEW_THEME", "ansi-dark")
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        await tables(pilot)
        main = app.screen
        await press(pilot, "enter")  # the storm: two guard tables side by side
        guards = main.query_one(GuardsView)

        def cursor_style(table: LazyTable):
            return table.render_line(table.cursor - int(table.scroll_y) + 1)._segments[0].style

        left, right = guards.query_one("#guards-left", LazyTable), guards.query_one("#guards-right", LazyTable)
        assert app.focused is right
        assert cursor_style(left).underline and not cursor_style(right).underline
        assert not cursor_style(right).bgcolor.is_default and cursor_style(left).bgcolor.is_default  # no colour: only the underline
        await press(pilot, "tab")
        assert app.focused is left
        assert cursor_style(right).underline and not cursor_style(left).underline


@sync
async def test_frames_after_a_reset_are_two_code_objects() -> None:
    # fixtures/corpus/reset_between_models: scale_a and, after torch._dynamo.reset(), scale_b
    # are both frame 0 (ids 0/0 and 0/1 each); the tree shows two code objects with one
    # recompile each, and the second 0/0 leaf shows scale_b's compile, not scale_a's
    app = build_app(open_args("fixtures/corpus/reset_between_models/trace"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "2")
        frames = main.query_one(FramesView)
        tree = frames.query_one("#frames-tree")
        labels = [n.label.plain for n in tree.root.children]
        assert len(labels) == 2
        assert labels[0].startswith("scale_a  2 compiles (1 recompile)")
        assert labels[1].startswith("scale_b  2 compiles (1 recompile)") and "after torch._dynamo.reset() #1" in labels[1]
        await press(pilot, "down", "down")  # scale_a's 0/0 -> 0/1 -> scale_b's frame
        await press(pilot, "down")  # scale_b's 0/0
        detail = static_text(frames.query_one("#compile-detail"))
        assert detail.startswith("[0/0 #2] scale_b")


@sync
async def test_frames_show_run_time_pieces_under_their_compile_never_as_recompiles() -> None:
    # issue 44.7, fixtures/corpus/piecewise_resume: forward [0/0], [0/1] and its resume function
    # [1/0], [1/1]; the backend compiled 4 graphs with Inductor at run time. Each is a piece of
    # the compile whose code made it (under its leaf), or, where two compiles of the code
    # object had run, under the code object with both named: never a code object of its own,
    # never counted as recompiles.
    app = build_app(open_args("fixtures/corpus/piecewise_resume/trace"))
    async with app.run_test(size=(160, 45)) as pilot:
        main = await ready(pilot)
        await press(pilot, "2")
        frames = main.query_one(FramesView)
        tree = frames.query_one("#frames-tree")
        nodes = {n.label.plain.split("  ")[0]: n for n in tree.root.children}
        assert set(nodes) == {"Net.forward", "Net.torch_dynamo_resume_in_forward_at_49"}
        fwd = nodes["Net.forward"]
        assert fwd.label.plain.startswith("Net.forward  2 compiles (1 recompile) + 2 run-time Inductor compiles (")
        leaves = [c.label.plain for c in fwd.children]
        assert len(leaves) == 3 and "0/0" in leaves[0] and "+ 1 run-time Inductor compile" in leaves[0]
        (under_0_0,) = [c.label.plain for c in fwd.children[0].children]
        assert "unknown_" in under_0_0 and "run-time Inductor compile" in under_0_0
        assert leaves[2].endswith("run-time Inductor compile of [0/0] or [0/1] (which one: not in the log)")
        assert "recompile" not in " ".join(c.label.plain for c in fwd.children[0].children)
        # the piece's detail names the compile that made it
        tree.move_cursor(fwd.children[0].children[0])
        await pilot.pause()
        detail = static_text(frames.query_one("#compile-detail"))
        assert "made by      [0/0]'s graph: a piece of that compile, run at run time (not a recompile)" in detail


@sync
async def test_frames_of_a_piecewise_backend_one_compile_and_its_pieces() -> None:
    # issue 44.7, fixtures/corpus/piecewise_backend: Block.forward [0/0] and 6 run-time Inductor
    # compiles its backend made, plus one torch._inductor.compile called directly. Before, every
    # compile without a Dynamo frame grouped as one code object: "7 compiles (6 recompiles)".
    app = build_app(open_args("fixtures/corpus/piecewise_backend/trace"))
    async with app.run_test(size=(160, 45)) as pilot:
        main = await ready(pilot)
        await press(pilot, "2")
        tree = main.query_one(FramesView).query_one("#frames-tree")
        labels = [n.label.plain for n in tree.root.children]
        assert len(labels) == 2 and not any("recompile" in lb for lb in labels)
        assert labels[0].startswith("Block.forward  1 compile + 6 run-time Inductor compiles (")
        assert labels[1].startswith("Inductor compile without a Dynamo frame  1 compile  ")
        (leaf,) = tree.root.children[0].children
        assert [c.label.plain.split("  run-time Inductor compile of ")[-1] for c in leaf.children] == ["submod_0", "submod_2"] * 3


@sync
async def test_guards_and_graph_of_the_second_compile_with_an_id() -> None:
    # fixtures/corpus/reset_between_models: selecting scale_b's 0/1 (after the reset, the second
    # compile with that id) shows scale_b's guards (`m`) compared with scale_b's own 0/0, and
    # scale_b's Dynamo graph (cos), never scale_a's (`n`, the first 0/0 and 0/1)
    app = build_app(open_args("fixtures/corpus/reset_between_models/trace"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await tables(pilot)
        await press(pilot, "2")
        frames = main.query_one(FramesView)
        await press(pilot, "down", "down", "down", "down")  # scale_a 0/0, 0/1, scale_b's frame, 0/0, 0/1
        assert static_text(frames.query_one("#compile-detail")).startswith("[0/1 #2] scale_b")
        await press(pilot, "enter")
        assert main.view.view_id == "guards"
        guards = main.query_one(GuardsView)
        assert (guards.key, guards.occurrence, guards.compare_id, guards.compare_occurrence) == ((None, "0/1"), 2, "0/0", 2)
        left = guards.query_one("#guards-left", LazyTable).frame
        right = guards.query_one("#guards-right", LazyTable).frame
        assert "L['m'] == 2" in left["code"].to_list() and "L['m'] == 1" in right["code"].to_list()
        assert not any("L['n']" in c for c in [*left["code"].to_list(), *right["code"].to_list()])
        text = screen_text(app)
        assert "Guards of [0/1 #2] scale_b" in text and "0/0: m == 1" in text and "n == 1" not in text
        await press(pilot, "v")  # the two compiles' Dynamo graphs
        graph = guards.query_one("#graph-left", CodeView).text
        assert "cos" in graph and "mul" in graph
        assert "add" not in graph  # scale_a's x * n + 1.0
        # the graphs view (4) keeps to the same compile: scale_b's 0/1, not scale_a's
        await press(pilot, "4")
        browser = main.query_one(CodeBrowser)
        listed = browser.query_one("#code-list", LazyTable).frame
        assert listed.height and set(listed["compile_id"].to_list()) == {"0/1"} and set(listed["occurrence"].to_list()) == {2}
        assert "filter: compile [0/1 #2]" in screen_text(app)


@sync
async def test_finding_after_a_reset_opens_its_own_compile() -> None:
    # fixtures/corpus/reset_between_models: Enter on scale_b's recompile finding opens the
    # guards of 0/1 #2 (scale_b's `m`), not those of scale_a's 0/1
    app = build_app(open_args("fixtures/corpus/reset_between_models/trace"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await tables(pilot)
        titles = [f.title for f in main.model.findings]
        [i] = [n for n, t in enumerate(titles) if t.startswith("scale_b")]
        await press(pilot, *["down"] * i)
        await press(pilot, "enter")
        assert main.view.view_id == "guards"
        guards = main.query_one(GuardsView)
        assert (guards.key, guards.occurrence) == ((None, "0/1"), 2)
        codes = guards.query_one("#guards-left", LazyTable).frame["code"].to_list()
        assert "L['m'] == 2" in codes and not any("L['n']" in c for c in codes)


# ------------------------------------------------------------------ data-dependent sizes
@sync
async def test_compile_detail_shows_its_data_dependent_sizes() -> None:
    """moe_nonzero_unbacked (capture_dynamic_output_shape_ops=True): each compile's detail
    lists its unbacked symbols by user line, with their asserts and the break they caused."""
    app = build_app(open_args("fixtures/corpus/moe_nonzero_unbacked/trace"))
    async with app.run_test(size=(200, 50)) as pilot:
        main = await ready(pilot)
        await press(pilot, "2", "g", *"0/0", "enter")
        frames = main.query_one(FramesView)
        assert frames.compile_ref() == (None, "0/0")
        detail = static_text(frames.query_one("#compile-detail"))
        assert "data-dependent sizes (3 unbacked symbols)\n" in detail
        assert (
            "  u0: data-dependent size from torch.nonzero at moe_nonzero_unbacked.py:24 "
            "(active = torch.nonzero(scores.amax(-1) > 0).squeeze(-1)); runtime asserts: u0 in [0, 16]; "
            "graph break at moe_nonzero_unbacked.py:25: Data-dependent branching (gb0170)\n"
        ) in detail
        assert "  u1-u2: data-dependent sizes from torch.nonzero, re-created by the backend re-tracing the graph" in detail
        await press(pilot, "g", *"1/0", "enter")
        assert frames.compile_ref() == (None, "1/0")
        detail = static_text(frames.query_one("#compile-detail"))
        assert "data-dependent sizes (12 unbacked symbols)\n" in detail
        assert (
            "  u0-u3: data-dependent sizes from torch.nonzero at moe_nonzero_unbacked.py:30 "
            "(idx = torch.nonzero(choice == e).squeeze(-1)); runtime asserts: each >= 0\n"
        ) in detail
        assert "data-dependent sizes (12 unbacked symbols)" in screen_text(app)


def test_graph_break_finding_says_fix_for_a_config_hint() -> None:
    from traceview.tui.finding_rows import findings_from_report

    report = build_report(traceview.load("fixtures/corpus/moe_nonzero_break/trace"))
    gb = [f for f in findings_from_report(report) if f.kind == "graph_break"]
    setting = "torch._dynamo.config.capture_dynamic_output_shape_ops = True"
    fixes = [text for f in gb for label, text in f.detail if label == "fix"]
    assert len(gb) == 2 and len(fixes) == 2
    assert fixes[1] == f"Enable tracing of dynamic shape operators with `{setting}`"
    assert fixes[0].startswith(f"{setting} (torch's hint)")


@sync
async def test_the_cursor_row_is_marked_by_a_character_and_kernel_names_keep_both_ends() -> None:
    """Issue 33.5: under NO_COLOR or in a plain capture the cursor row must still be seen (a
    marker, not colour alone); kernel names that differ only at the end stay apart when cut."""
    from traceview.tui.text import fit_middle

    assert fit_middle("triton_poi_fused_add_mul_native_layer_norm_0", 24) == "triton_poi_f…ayer_norm_0"
    assert fit_middle("triton_poi_fused_add_mul_native_layer_norm_1", 24).endswith("_norm_1")
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "5")
        table = main.query_one(RecordsView).query_one("#records-table", LazyTable)
        await press(pilot, "down", "down")
        lines = [x for x in screen_text(app).splitlines() if "▶" in x]
        assert len(lines) == 1  # the cursor's row alone
        assert table.cursor == 2


@sync
async def test_the_cursor_is_marked_by_a_character_in_findings_and_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33.5: the Findings list and the Frames tree mark the cursor as the tables do, with
    "▶" in a first column of its own, so it is seen under NO_COLOR and in a plain capture."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = build_app(open_args(FIXTURES / "corpus" / "multirank4" / "trace"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        marked = lambda: [x for x in screen_text(app).splitlines() if x.startswith("▶")]  # noqa: E731
        # findings: the first line of the cursor's finding alone (the others start blank)
        assert [x[:12] for x in marked()] == ["▶RANK STALL "]
        await press(pilot, "down")
        assert main.query_one(FindingsView).index == 1
        assert [x[:12] for x in marked()] == ["▶GRAPH BREAK"]
        # frames: the cursor's line, the tree one column to the right
        await press(pilot, "2")
        tree = main.query_one("#frames-tree")
        await press(pilot, "home")
        assert tree.cursor_line == 0
        assert [x[:10] for x in marked()] == ["▶▼ rank 0 "]
        await press(pilot, "down")
        assert [x[:20] for x in marked()] == ["▶├ ▼ TinyNet.forward"]  # named as the findings name it
        await press(pilot, "down")
        assert [x.split("  ")[0] for x in marked()] == ["▶│ └ ✓ ok"]


@sync
async def test_letters_typed_on_a_filter_list_never_reach_the_shortcuts() -> None:
    """Issue 33.5: after `f` the kind filter (a list) has the focus; "1" or "q" typed there used
    to switch view or quit. Now a letter or digit opens the list to search it."""
    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "5", "f")
        records = main.query_one(RecordsView)
        kind = records.query_one("#filter-kind")
        assert app.focused is kind
        await press(pilot, "1")
        assert main.view.view_id == "records" and app.is_running
        assert kind.expanded
        await press(pilot, "escape")
        assert not kind.expanded
        await press(pilot, "q")
        assert app.is_running and main.view.view_id == "records"


@sync
async def test_palette_finds_data_dependent_sizes_by_the_word_unbacked() -> None:
    """Issue 33.5: Ctrl+P "unbacked" found nothing; the FACTS of the MoE run (torch.nonzero with
    capture_dynamic_output_shape_ops) are in the palette and lead to their compile."""
    from textual.command import CommandList

    app = build_app(open_args("fixtures/corpus/moe_nonzero_unbacked/trace"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "ctrl+p", *"unbacked")
        commands = app.screen.query_one(CommandList)
        await until(pilot, lambda: commands.option_count >= 1, "the facts listed")
        first = str(commands.get_option_at_index(0).prompt)
        assert first.startswith("Fact: data-dependent sizes (unbacked symbols) u0 from torch.nonzero at moe_nonzero_unbacked.py:24 [0/0]")
        await press(pilot, "enter")
        await until(pilot, lambda: main.view.view_id == "frames", "the frames view")
        assert main.query_one(FramesView).compile_ref() == (None, "0/0")


@sync
async def test_the_help_says_that_it_scrolls() -> None:
    """Issue 33.5: the help is taller than 40 rows; its border says it scrolls and how much is
    left, and says "end" at the bottom."""
    from textual.containers import VerticalScroll

    app = build_app(open_args("fixtures/recompiles"))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help-box", VerticalScroll)
        await until(pilot, lambda: "more below" in str(box.border_subtitle), "the scroll hint")
        assert str(box.border_subtitle).startswith("↑↓ PgUp PgDn scroll · 0% · ↓ more below")
        await press(pilot, "end")
        await until(pilot, lambda: "· end ·" in str(box.border_subtitle), "the end said")
        assert "end" in screen_text(app)


@sync
async def test_collectives_that_differ_come_first_with_each_ranks_schedule() -> None:
    # 4 gloo ranks; rank 2's [0/0] issues a second all_reduce (issue 32): the first screen says
    # so, and the first finding shows each group of ranks' schedule side by side
    app = build_app(open_args("fixtures/corpus/collective_extra_rank/trace"))
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot)
        text = screen_text(app)
        assert text.splitlines()[2].strip() == "findings: collectives do not match across ranks (rank 2)"  # the summary's
        assert "COLLECTIVES  collectives do not match: rank 2's [0/0] step (collective_extra_rank.py:31) issues" in text
        assert "[0/0] ranks 0,1,3: all_reduce float32[8, 16]" in text
        assert "[0/0] rank 2: all_reduce float32[8, 16], all_reduce" in text


@sync
async def test_ranks_view_shows_each_ranks_collectives_and_the_unpartnered_all_reduce() -> None:
    # 4 gloo ranks; rank 2's [0/0] issues a second all_reduce (issue 32): 7 shows ranks x graphs,
    # rank 2's cell marked (a character, not colour alone), the schedules side by side below
    from traceview.tui.ranks_view import MISMATCH, RanksView

    app = build_app(open_args("fixtures/corpus/collective_extra_rank/trace"))
    async with app.run_test(size=(160, 45)) as pilot:
        main = await ready(pilot)
        await press(pilot, "7")
        view = main.query_one(RanksView)
        assert main.view is view
        text = screen_text(app)
        assert "[7 Ranks]" in text
        row = next(line for line in text.splitlines() if "[0/0]" in line and "all_reduce" in line and "step" in line)
        cells = row.split()
        assert f"{MISMATCH}2" in row and row.count(f"{MISMATCH}2 all_reduce") == 1
        assert row.count("1 all_reduce") == 3, row
        assert cells[0] == "▶[0/0]"  # the cursor is on it
        header = next(line for line in text.splitlines() if "rank 0" in line and "rank 3" in line)
        assert header.index("rank 2") < row.index(f"{MISMATCH}2 all_reduce") + 2 <= header.index("rank 3")
        detail = static_text(view.query_one("#ranks-detail"))
        assert "ranks 0,1,3" in detail and "rank 2" in detail
        assert f"{MISMATCH}  2 (none: no partner)" in detail  # the second position: no partner on ranks 0, 1, 3
        assert "the second (float32[8, 16]) has no partner" in detail
        await press(pilot, "enter")
        frames = main.query_one(FramesView)
        assert main.view is frames
        assert frames.compile_ref() == (2, "0/0")


@sync
async def test_ranks_view_on_a_single_rank_trace_says_so_in_one_line() -> None:
    from traceview.tui.ranks_view import RanksView

    app = build_app(open_args("fixtures/simple"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await press(pilot, "7")
        assert main.view is main.query_one(RanksView)
        title = static_text(main.query_one("#ranks-title"))
        assert title == "Ranks: a single process without ranks: no collective schedules to compare"
        assert "\n" not in title
        assert title in screen_text(app)


@sync
async def test_findings_first_is_the_collective_timeout_with_its_log_line_as_text() -> None:
    # issue 45, class 7: gloo timed out on ranks 0, 2, 3 while rank 1 recompiled; the timeout's line
    # ("[rank0]: RuntimeError: [/__w/pytorch/...]") is log text, shown as written, never as markup
    app = build_app(open_args(FIXTURES / "timeout_behind_compile_gloo_4ranks"))
    async with app.run_test(size=SIZE) as pilot:
        main = await ready(pilot)
        await tables(pilot)
        assert main.view.view_id == "findings"
        findings = main.query_one(FindingsView)
        first = findings.model.findings[0]
        assert first.kind == "timeout"
        text = screen_text(app)
        assert "COLLECTIVE TIMEOUT" in text and "[rank0]: RuntimeError:" in text
        assert "/transport/tcp/unbound_buffer.cc:78] Timed" in text  # its brackets are text, not markup
        assert ("[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
                "Timed out waiting 30000ms for recv operation to complete") in first.as_text()
