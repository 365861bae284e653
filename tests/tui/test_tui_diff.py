"""`traceview open B --against A`: the diff screen on the real pairs of fixtures/diff (torch
2.13 runs made by fixtures/make_diff_fixtures.py), driven with Textual's pilot: the rows in
build_diff's order, Enter into the run a change belongs to (B for new, A for gone)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

pytest.importorskip("textual")

import traceview
from tests.conftest import FIXTURES, GPU, needs_shared
from tests.tui.test_tui import _tui_env, screen_text, static_text, sync, until  # noqa: F401 (autouse fixture)
from traceview.cli import main
from traceview.ingest.loading import LoadOptions
from traceview.tui.code_browser import CodeBrowser
from traceview.tui.diff_view import DiffScreen, build_against_app, diff_rows, row_detail, row_prompt
from traceview.tui.frames_view import FramesView
from traceview.tui.guards_view import GuardsView
from traceview.tui.help_screen import HelpScreen
from traceview.tui.main_screen import MainScreen
from traceview.tui.model import TraceModel
from traceview.workflow.diff import build_diff

PAIRS = FIXTURES / "diff"
SIZES = [(80, 24), (160, 45)]


def against(pair: str, b: str = "b", a: str = "a"):
    """The app of `traceview open PAIR/b/trace --against PAIR/a/trace` (relative paths: what
    a user types; the tests run from the repository root)."""
    path = Path("fixtures/diff") / pair
    return build_against_app(
        LoadOptions.of(path / b / "trace", prestart=True), LoadOptions.of(path / a / "trace", prestart=True)
    )


async def diff_screen(pilot) -> DiffScreen:
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, DiffScreen) or app.error is not None, "the diff screen")
    assert app.error is None, app.error
    # and drawn to its last line (the footer: under load it came one frame later, CI saw it blank)
    await until(pilot, lambda: screen_text(app).splitlines()[-1].strip() != "", "the diff screen's footer")
    return app.screen


async def press(pilot, *keys: str) -> None:
    await pilot.press(*keys)
    await pilot.pause()


async def to_row(pilot, screen: DiffScreen, index: int) -> None:
    """Move the cursor to row `index` with the arrow keys."""
    ol = screen.query_one("#diff-list")
    while ol.highlighted != index:
        await press(pilot, "down" if ol.highlighted < index else "up")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@sync
async def test_graph_break_pair_rows_and_enter_into_each_run(size: tuple[int, int]) -> None:
    app = against("graph_break")
    async with app.run_test(size=size) as pilot:
        screen = await diff_screen(pilot)
        text = screen_text(app)
        lines = text.splitlines()
        # the title names both runs; the changes follow in build_diff's order, on screen at 80x24
        assert "Diff · 8 changes · A fixtures/diff/graph_break/a/trace (1 compiles)" in text
        assert [(r.section, r.change, r.side) for r in screen.rows[:7]] == [
            ("functions", "new", "b"),
            ("graph_breaks", "new", "b"),
            ("graphs", "removed", "a"),
            ("guards", "added", "b"),
            ("guards", "added", "b"),
            ("kernels", "added", "b"),
            ("kernels", "removed", "a"),
        ]
        assert "B  COMPILES  new: torch_dynamo_resume_in_step_at_7 (train.py:7) now compiles:" in text
        assert "B  GRAPH BREAK  new: train.py:7 Call to `torch._dynamo.graph_break()` [gb0025]" in text
        assert "A  GRAPH OPS  removed: - sum  step (train.py:4) compile #1" in text
        assert text.index("COMPILES  new") < text.index("GRAPH BREAK  new") < text.index("GRAPH OPS")
        detail = static_text(screen.query_one("#diff-detail"))
        assert "enter: open run B (fixtures/diff/graph_break/b/trace), [1/0] frames view" in detail
        assert "a Run A" in lines[-1] and "D Diff" in lines[-1]
        assert all(len(x) <= size[0] for x in lines)

        # the new graph break: B's compile in which the break happened, in the frames view
        await press(pilot, "down", "enter")
        main = app.screen
        assert isinstance(main, MainScreen) and main is app.main_b and main.model.trace.inputs.root.endswith("b/trace")
        assert main.view.view_id == "frames"
        assert main.query_one(FramesView).compile_ref() == (None, "0/0")
        # 0/0 restarted after the break: its graph and metrics are attempt 1's, shown 0/0_1 as tlparse names it
        assert "[0/0_1] step  restarted after a graph break (normal)" in screen_text(app)

        # D: the diff again, where it was; the new function: B's resume compile
        await press(pilot, "D")
        assert app.screen is screen and screen.query_one("#diff-list").highlighted == 1
        await press(pilot, "up", "enter")
        assert app.screen is main and main.query_one(FramesView).compile_ref() == (None, "1/0")
        assert "torch_dynamo_resume_in_step_at_7" in static_text(main.query_one("#compile-detail"))

        # a guard B added (on torch._dynamo, for the graph_break() call): on it, in B's 0/0
        await press(pilot, "D")
        await to_row(pilot, screen, 3)
        await press(pilot, "enter")
        guards = main.query_one(GuardsView)
        assert app.screen is main and main.view.view_id == "guards" and guards.key == (None, "0/0")
        row = guards.query_one("#guards-left").current
        assert row["kind"] == "ID_MATCH" and row["code"].startswith("___check_obj_id(G['torch']._dynamo, ")

        # a kernel B no longer has: A's graphs & kernels view, on that kernel
        await press(pilot, "D")
        await to_row(pilot, screen, 6)
        assert "- cpp_fused_mul_relu_sin_sum" in screen.rows[6].text
        await press(pilot, "enter")
        run_a = app.screen
        assert isinstance(run_a, MainScreen) and run_a is not main
        assert run_a.model.trace.inputs.root.endswith("a/trace")
        assert run_a.view.view_id == "code"
        assert run_a.query_one(CodeBrowser).item["name"] == "cpp_fused_mul_relu_sin_sum_0"
        assert "traceview A fixtures/diff" in screen_text(app).splitlines()[0] or size[0] < 100

        # an op B's graph no longer calls: A's Dynamo graph, the cursor on the node that calls it
        await press(pilot, "D")
        await to_row(pilot, screen, 2)
        await press(pilot, "enter")
        assert app.screen is run_a and run_a.view.view_id == "code"
        browser = run_a.query_one(CodeBrowser)
        assert browser.item["kind"] == "dynamo" and browser.item["compile_id"] == "0/0"
        code = browser.query_one("#code-text")
        assert code.lines[code.cursor].strip().startswith('sum_1: "f32[][]cpu" = z.sum()')

        # b from the diff: run B as it was left
        await press(pilot, "D", "b")
        assert app.screen is main and main.query_one(FramesView).compile_ref() == (None, "1/0")
        await press(pilot, "D", "a")
        assert app.screen is run_a and run_a.view.view_id == "code"


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@sync
async def test_a_gone_recompile_cause_opens_run_a_at_the_failing_guard(size: tuple[int, int]) -> None:
    # recompile_fix: b compiles with dynamic=True; a recompiled scale() 4 times on x's size
    app = against("recompile_fix")
    async with app.run_test(size=size) as pilot:
        screen = await diff_screen(pilot)
        assert [(r.section, r.change, r.side) for r in screen.rows] == [
            ("functions", "fewer", "a"),
            ("recompile_causes", "gone", "a"),
            ("guards", "added", "b"),
            ("guards", "added", "b"),
            ("guards", "removed", "a"),
        ]
        text = screen_text(app)
        assert "A  RECOMPILE CAUSE  gone: scale: dimension 0 of x" in text
        assert screen.rows[1].text == "scale: dimension 0 of x varies (seen: 2, 3, 4, 5, 6) (4 -> 0 recompiles)"
        await press(pilot, "down")
        detail = static_text(screen.query_one("#diff-detail"))
        assert "enter: open run A (fixtures/diff/recompile_fix/a/trace), [0/1] guards view" in detail
        await press(pilot, "enter")
        run_a = app.screen
        assert isinstance(run_a, MainScreen) and run_a is not app.main_b
        assert run_a.view.view_id == "guards"
        guards = run_a.query_one(GuardsView)
        assert guards.key == (None, "0/1") and guards.compare_id == "0/0"
        assert "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3" in screen_text(app)
        # the storm B no longer has: A's first compile B does not have (0/1 of 0/0..0/4)
        await press(pilot, "D", "up", "enter")
        assert app.screen is run_a and run_a.view.view_id == "frames"
        assert run_a.query_one(FramesView).compile_ref() == (None, "0/1")
        # a guard B's first compile no longer has (x's static size 2): on that guard in A's 0/0;
        # one B added (x's size now symbolic): on it in B's 0/0
        await press(pilot, "D")
        await to_row(pilot, screen, 4)
        await press(pilot, "enter")
        assert app.screen is run_a and guards.key == (None, "0/0")
        row = guards.query_one("#guards-left").current
        assert row["kind"] == "TENSOR_MATCH" and "size=[2], stride=[1]" in row["code"]
        await press(pilot, "D", "up", "enter")
        b_guards = app.main_b.query_one(GuardsView)
        assert app.screen is app.main_b and b_guards.key == (None, "0/0")
        row = b_guards.query_one("#guards-left").current
        assert row["kind"] == "TENSOR_MATCH" and "size=[None], stride=[1]" in row["code"]


@sync
async def test_the_mirror_a_new_recompile_cause_opens_run_b() -> None:
    # open a --against b: the storm is new, in the run opened (B = a/trace)
    app = against("recompile_fix", b="a", a="b")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await diff_screen(pilot)
        assert [(r.section, r.change, r.side) for r in screen.rows[:2]] == [
            ("functions", "more", "b"), ("recompile_causes", "new", "b")
        ]
        await press(pilot, "down", "enter")
        assert app.screen is app.main_b and app.main_b.view.view_id == "guards"
        assert app.main_b.query_one(GuardsView).key == (None, "0/1")
        # back (in B's own history) goes to B's findings, not to the diff: D does that
        await press(pilot, "left_square_bracket")
        assert app.main_b.view.view_id == "findings"


@sync
async def test_ranks_the_divergence_b_fixed_opens_rank_1_of_a() -> None:
    # two gloo ranks; in a, rank 1 got a smaller batch once and recompiled alone
    app = against("rank_divergence")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await diff_screen(pilot)
        assert [(r.section, r.change, r.side) for r in screen.rows] == [
            ("functions", "fewer", "a"), ("recompile_causes", "gone", "a"), ("rank_divergence", "gone", "a"),
        ]
        assert "A  RANK DIVERGENCE  gone: rank 1: compiles 0/1 (step_fn, recompiled" in screen_text(app)
        await to_row(pilot, screen, 2)
        await press(pilot, "enter")
        run_a = app.screen
        assert run_a is not app.main_b and run_a.view.view_id == "frames"
        assert run_a.query_one(FramesView).compile_ref() == (1, "0/1")


@sync
async def test_a_run_against_itself_says_no_changes_and_enter_opens_nothing() -> None:
    app = against("graph_break", b="b", a="b")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await diff_screen(pilot)
        assert screen.rows == []
        text = screen_text(app)
        assert "Diff · no changes" in text and "No changes between A and B" in text
        await press(pilot, "enter")
        assert app.screen is screen
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        md = static_text_md(app.screen)
        for what in ("Open in its run", "Run A", "Run B", "Diff of A and B"):
            assert what in md
        await press(pilot, "D")  # over the help: nothing moves
        assert isinstance(app.screen, HelpScreen)
        await press(pilot, "escape", "b")
        assert app.screen is app.main_b
        # a run's own help lists D too (the app's keys are in "Everywhere")
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen) and "Diff of A and B" in static_text_md(app.screen)


def static_text_md(help_screen: HelpScreen) -> str:
    from traceview.tui.help_screen import help_markdown

    return help_markdown(help_screen.groups, help_screen.app)


def test_log_text_in_a_row_is_never_markup() -> None:
    # a hand-made change of a real diff: a graph-break reason holding Rich markup and an ANSI
    # escape (log text is data) must show literally, in the list and in the detail
    a = traceview.load(PAIRS / "graph_break" / "a" / "trace")
    b = traceview.load(PAIRS / "graph_break" / "b" / "trace")
    d = build_diff(a, b)
    evil = "[bold red]boom[/] \x1b[31mred[link=http://x]"
    d["graph_breaks"] = [{**d["graph_breaks"][0], "reason": evil}]
    rows = diff_rows(d, TraceModel.build(a), TraceModel.build(b))
    row = next(r for r in rows if r.section == "graph_breaks")
    for t in (row_prompt(row), row_detail(row, ("A", "B"))):
        assert "[bold red]boom[/] ^[[31mred[link=http://x]" in t.plain
        assert "\x1b" not in t.plain and not any(s.style and "link" in str(s.style) for s in t.spans)


def test_open_against_a_bad_path_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    b = str(PAIRS / "graph_break" / "b" / "trace")
    assert main(["open", b, "--against", str(PAIRS / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nowhere" in err[0]


def test_open_against_a_directory_of_several_runs_asks_for_latest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # two rank-less traces in one directory are two runs: the diff does not guess which one
    for name, pair in (("aaaa", "graph_break"), ("bbbb", "recompile_fix")):
        src = next((PAIRS / pair / "a" / "trace").glob("*.log*"))
        shutil.copy(src, tmp_path / f"dedicated_log_torch_trace_{name}{''.join(src.suffixes)}")
    b = str(PAIRS / "graph_break" / "b" / "trace")
    assert main(["open", b, "--against", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds 2 runs" in err[0] and "--latest" in err[0]


@sync
async def test_exports_open_against_each_other_like_their_logs(tmp_path: Path) -> None:
    # traceview export of each side of recompile_fix: the same rows, Enter into the export of A
    for side in "ab":
        assert main(["export", str(PAIRS / "recompile_fix" / side / "trace"), "-o", str(tmp_path / side), "--no-cache"]) == 0
    logs = against("recompile_fix")
    exports = build_against_app(LoadOptions.of(tmp_path / "b"), LoadOptions.of(tmp_path / "a"))
    async with logs.run_test(size=(120, 40)) as pilot:
        want = [(r.section, r.change, r.text, r.side, r.target, r.find) for r in (await diff_screen(pilot)).rows]
    async with exports.run_test(size=(120, 40)) as pilot:
        screen = await diff_screen(pilot)
        assert [(r.section, r.change, r.text, r.side, r.target, r.find) for r in screen.rows] == want
        await press(pilot, "down", "enter")
        assert exports.screen is not exports.main_b
        assert exports.screen.query_one(GuardsView).key == (None, "0/1")


@needs_shared
@sync
async def test_autotuning_b_no_longer_does_opens_the_compile_in_a() -> None:
    # real GPU runs (torch 2.11): max-autotune (A) tuned two addmm templates in 0/0; reduce-overhead (B) none
    app = build_against_app(LoadOptions.of(GPU / "reduce_overhead"), LoadOptions.of(GPU / "max_autotune"))
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await diff_screen(pilot)
        i = next(i for i, r in enumerate(screen.rows) if r.section == "autotuning")
        row = screen.rows[i]
        assert (row.change, row.side) == ("gone", "a")
        assert row.text.startswith("addmm 512x4096, 512x1024, 1024x4096 (torch.float16, torch.float16, torch.float16): best bias_addmm of 21")
        await to_row(pilot, screen, i)
        await press(pilot, "enter")
        run_a = app.screen
        assert run_a is not app.main_b and run_a.view.view_id == "code"
        assert run_a.query_one(CodeBrowser).compile_filter == (None, "0/0")


def test_an_unfinished_compile_is_the_first_row(tmp_path: Path) -> None:
    # fixtures/corpus/multirank4 against a copy whose rank 1 log is cut by hand after 500
    # lines, inside its first compile: the first row says so and Enter opens B at that compile
    src = FIXTURES / "corpus" / "multirank4" / "trace"
    for f in src.glob("*.gz"):
        if "_rank_1_" in f.name:
            with gzip.open(f, "rt", encoding="utf-8") as i:
                (tmp_path / f.name.removesuffix(".gz")).write_text("".join(i.readlines()[:500]), encoding="utf-8")
        else:
            shutil.copy(f, tmp_path / f.name)
    a, b = traceview.load(src), traceview.load(tmp_path)
    rows = diff_rows(build_diff(a, b), TraceModel.build(a), TraceModel.build(b))
    first = rows[0]
    assert (first.section, first.change, first.side) == ("unfinished", "new", "b")
    assert first.text == ("rank 1 [0/0] TinyNet.forward (multirank4.py:30): finished in A (3.56s), unfinished in B "
                          "(in AOTAutograd for 4.74s; behind the other ranks: likely hang)")
    assert first.target is not None and (first.target.view, first.target.rank, first.target.compile_id) == ("frames", 1, "0/0")


def test_the_diff_screen_names_torchs_wrapper_as_the_summary_does() -> None:
    # issue 44.10: an nn.Sequential under torch.compile(model) in two real runs (the corpus'
    # sequential_model, then sequential_failed_compile): no row names torch's wrapper `inner`,
    # and nested phases are marked as the summary marks them
    a = traceview.load(FIXTURES / "corpus" / "sequential_model" / "trace")
    b = traceview.load(FIXTURES / "corpus" / "sequential_failed_compile" / "trace")
    rows = diff_rows(build_diff(a, b), TraceModel.build(a), TraceModel.build(b))
    shown = [row_prompt(r).plain + "\n" + row_detail(r, ("A", "B")).plain for r in rows]
    assert shown and not any("inner (" in s for s in shown)  # (the fix still explains the wrapper, as the summary does)
    name = "Sequential via torch.compile(model), called at sequential_failed_compile.py:25 `y = compiled(torch.randn(8, 32))`"
    assert any(r.section == "functions" and r.text == f"{name} compiles more often: 2 -> 3 compiles" for r in rows)
    phases = [r.text for r in rows if r.section == "compile_time" and r.change == "phase"]
    assert phases[:5] == ["dynamo: 0.30s -> 7.22s", "aot+backend: 13.55s -> 202.90s", "  aot: 0.91s -> 24.56s (part of aot+backend)",
                          "  inductor: 12.63s -> 178.34s (part of aot+backend)", "    codegen: 12.29s -> 175.95s (part of inductor)"]
