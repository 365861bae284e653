"""`traceview open` on a TORCH_COMPILE_DEBUG=1 folder (fixtures/debugdir, a real torch 2.13 run):
its graph folders' graphs and kernels are browsed like a trace's, with the compile ids the run's
stderr ties them to."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

pytest.importorskip("textual")

import traceview
from tests.tui.test_tui import SIZE, open_args, press, screen_text, static_text, sync, tables, until
from traceview.tui.app import build_app
from traceview.tui.code_browser import CodeBrowser
from traceview.tui.code_view import CodeView
from traceview.tui.lazy_table import LazyTable

FOLDER = "fixtures/debugdir/debugdir_train_plain"


@sync
async def test_graphs_and_kernels_of_a_debug_folder_are_browsed() -> None:
    trace = traceview.load(FOLDER)
    kernel = trace.kernels.filter(pl.col("name") == "cpp_fused_add_sin_0").row(0, named=True)
    assert (kernel["compile_id"], kernel["graph"]) == ("0/0", "0_inference")
    backward = trace.graphs.filter(pl.col("kind") == "aot_backward").row(0, named=True)
    app = build_app(open_args(FOLDER))
    async with app.run_test(size=SIZE) as pilot:
        await tables(pilot)
        main = app.screen
        assert "TORCH_COMPILE_DEBUG folder without TORCH_TRACE" in screen_text(app)
        await press(pilot, "4")
        browser = main.query_one(CodeBrowser)
        assert ("Graphs & kernels: 10 graphs, 8 kernels, 10 Inductor files (output code, fx_graph_runnable)"
                in static_text(browser.query_one("#code-title")))
        listed = browser.query_one("#code-list", LazyTable).frame
        assert listed.filter(pl.col("what") == "graph").group_by("kind").len().sort("kind").rows() == [
            ("aot_backward", 1), ("aot_forward", 1), ("aot_inference", 3), ("post_grad", 5)]
        await press(pilot, "slash", *kernel["name"], "enter")
        await until(pilot, lambda: browser.item is not None and browser.item.get("name") == kernel["name"], "the kernel")
        code = "\n".join(browser.query_one("#code-text", CodeView).lines)
        assert kernel["code"].strip().splitlines()[0] in code
        assert "[0/0]" in str(browser.query_one("#code-label").content)
        await press(pilot, "slash", *"aot_backward", "enter")
        await until(pilot, lambda: browser.item is not None and browser.item.get("kind") == "aot_backward", "the backward graph")
        shown = "\n".join(browser.query_one("#code-text", CodeView).lines).rstrip()
        assert shown == backward["text"].rstrip()
        # the folder's whole wrapper and repro script, tagged with their AOT graph
        folder = Path(backward["file"]).parent
        for name, file in (("inductor_output_code", "output_code.py"), ("fx_graph_runnable", "fx_graph_runnable.py")):
            listed = browser.query_one("#code-list", LazyTable).frame
            row = listed.filter((pl.col("name") == name) & (pl.col("graph") == "3_backward")).row(0, named=True)
            assert (row["compile_id"], row["part"]) == ("2/0", "backward")
            await press(pilot, "slash", *name, "enter")
            for _ in range(listed.height):  # F3: the next match, until it is this folder's
                if browser.item is not None and browser.item["key"] == row["key"]:
                    break
                await press(pilot, "f3")
            assert browser.item["key"] == row["key"]
            shown = "\n".join(browser.query_one("#code-text", CodeView).lines).rstrip()
            assert shown == (folder / file).read_text().rstrip()


@sync
async def test_a_debug_folder_alone_is_not_said_as_zero_compiles() -> None:
    app = build_app(open_args(FOLDER + "/torch_compile_debug"))
    async with app.run_test(size=SIZE) as pilot:
        await tables(pilot)
        text = screen_text(app)
        assert "5 Inductor graphs in TORCH_COMPILE_DEBUG folders (no compile metrics)" in text
        assert "0 compiles" not in text and "compiling" not in text.split("\n")[1]
        assert "findings: none found (a TORCH_COMPILE_DEBUG folder alone shows neither failures" in text
