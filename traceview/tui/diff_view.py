"""`traceview open B --against A`: the diff of two runs as a screen, and Enter into either run.

Design: one app holds both runs. Both are loaded through traceview.ingest.loading (the path every
command takes), their models built (guards, graphs and kernels included), and the diff computed
by `traceview.workflow.diff.build_diff(A, B)` (the library, as `traceview diff` does) before the first
screen. B's main screen lies at the bottom of the screen stack; the diff screen and A's main
screen are installed screens shown above it (kept, with their cursor and history, while
hidden). The diff screen opens first: one row per change, in build_diff's order (most important
first). Enter on a row opens the run it belongs to -- B for what is new or changed, A for what
is gone or fixed -- at the matched compile in its frames, guards or graphs & kernels view;
`D` brings the diff back from anywhere, `a`/`b` open run A/B where it was left.

Rows are plain data (`DiffRow`, built by `diff_rows` from the diff and the two models); every
string from a log reaches the screen through `traceview.tui.text.safe` (never as markup).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, VerticalScroll
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from parsers.compile_ids import bracketed, sort_key
from traceview.analyze.diff import code_object, file_tail
from traceview.errors import UserError, debugging
from traceview.ingest.loading import LoadOptions, discover_inputs, exports_of, load_trace
from traceview.trace import Trace
from traceview.tui.app import TraceviewApp, run_until_exit
from traceview.tui.footer import QuitFooter
from traceview.tui.help_screen import HelpScreen
from traceview.tui.lazy_table import LazyTable
from traceview.tui.main_screen import NARROW_BELOW, MainScreen, binding_groups
from traceview.tui.model import TraceModel
from traceview.tui.navigation import Location
from traceview.tui.text import plain, safe
from traceview.workflow.diff import build_diff, change_text, phase_depth, time_row_text

SECTION_TITLES = {
    "unfinished": "UNFINISHED COMPILE",
    "functions": "COMPILES",
    "recompile_causes": "RECOMPILE CAUSE",
    "graph_breaks": "GRAPH BREAK",
    "frames_eager": "EAGER FRAME",
    "failures": "FAILURE",
    "graphs": "GRAPH OPS",
    "guards": "GUARD",
    "kernels": "KERNEL",
    "autotuning": "AUTOTUNING",
    "pgo": "PGO",
    "cache": "CACHE",
    "rank_divergence": "RANK DIVERGENCE",
    "compile_time": "COMPILE TIME",
}
VIEW_NAMES = {"frames": "frames view", "guards": "guards view", "code": "graphs & kernels view"}


@dataclass(frozen=True)
class DiffRow:
    """One change: what it is (`section`, `change`, `text`), more about it (`detail`), and
    where Enter goes: `side` "a" or "b" (None: neither run has a place for it), `target` the
    location in that run's main screen (None: nothing to open), `find` the text then searched
    for there (the guard itself)."""

    section: str
    change: str
    text: str
    detail: tuple[tuple[str, str], ...] = ()
    side: str | None = None
    target: Location | None = None
    find: str | None = None  # then selected in the view, as `/` would (a guard's code)

    def as_text(self) -> str:
        head = f"{SECTION_TITLES[self.section]}: {self.change}: {self.text}"
        return "\n".join([head, *(f"{k}: {v}" if k else v for k, v in self.detail)])


# ------------------------------------------------------------------------ rows of a diff
class _Places:
    """Where a change is in one run: compiles, recompile causes, graph breaks, code items."""

    def __init__(self, model: TraceModel) -> None:
        self.model = model
        self._code: dict[tuple, list[dict[str, Any]]] | None = None

    def first_compile(self, rank: Any, function: Any, file: Any, line: Any = None) -> str | None:
        rows = [
            r for r in self.model.compiles.select("rank", "compile_id", "function", "filename", "line").iter_rows(named=True)
            if r["rank"] == rank and r["function"] == function and file_tail(r["filename"]) == file
            and (line is None or r["line"] == line)
        ]
        return min((r["compile_id"] for r in rows), key=sort_key) if rows else None

    def divergence(self, rank: Any) -> str | None:
        """The compile a diverging rank has and the others have not (else its first)."""
        for d in self.model.report.get("rank_divergence") or []:
            if d.get("rank") == rank and d.get("compile_id"):
                return d["compile_id"]
        return self.first_of_rank(rank)

    def autotuned(self, r: dict[str, Any], side: str) -> str | None:
        """The compile that autotuned this op (the first with its winner and choices)."""
        for x in (self.model.report.get("compile_time") or {}).get("autotuning") or []:
            if (x.get("rank"), x["op"], x["shape"], x["dtypes"]) == (r["rank"], r["op"], r["shape"], r["dtypes"]) and (
                x["best_kernel"], x["choices"]) == (r[f"best_{side}"], r[f"choices_{side}"]):
                return x.get("compile_id")
        return None

    def first_of_rank(self, rank: Any) -> str | None:
        ids = [r["compile_id"] for r in self.model.compiles.select("rank", "compile_id").iter_rows(named=True) if r["rank"] == rank]
        return min(ids, key=sort_key) if ids else None

    def cause(self, r: dict[str, Any]) -> tuple[str | None, str | None]:
        """(the first recompile with this cause, the compile whose guard it failed)."""
        for s in self.model.report.get("recompiles") or []:
            if (s["rank"], s["function"], file_tail(s["filename"])) != (r["rank"], r["function"], r["file"]):
                continue
            for c in s.get("causes") or []:
                if (c["kind"], c.get("source"), c.get("dim")) == (r["kind"], r["source"], r["dim"]):
                    cid = c.get("compile_id") or (c.get("compile_ids") or [None])[0]
                    return cid, self._failed_against(r["rank"], cid)
        return None, None

    def _failed_against(self, rank: Any, compile_id: str | None) -> str | None:
        if compile_id is None or "recompiles" in self.model.missing:
            return None
        rc = self.model.trace.recompiles
        for x in rc.select("rank", "compile_id", "failed_against").iter_rows(named=True):
            if x["rank"] == rank and x["compile_id"] == compile_id and x["failed_against"]:
                return x["failed_against"]
        return None

    def graph_break(self, r: dict[str, Any]) -> str | None:
        for g in self.model.report.get("graph_breaks") or []:
            ranks = g.get("ranks") or [g.get("rank")]
            if r["rank"] in ranks and (g["reason"], file_tail(g["filename"]), g["line"]) == (r["reason"], r["file"], r["line"]):
                ids = g.get("compile_ids") or [g.get("compile_id")]
                return ids[0]
        return None

    def op_node(self, rank: Any, compile_id: str, target: str) -> Location | None:
        """The first node calling `target` in that compile's Dynamo graph: the graph in the
        graphs & kernels view, the cursor on the node's line."""
        if "graph_nodes" in self.model.missing:
            return None
        gn = self.model.trace.graph_nodes
        hit = gn.filter(
            (pl.col("rank").is_null() if rank is None else pl.col("rank") == rank)
            & (pl.col("compile_id") == compile_id) & (pl.col("graph_kind") == "dynamo")
            & (pl.col("target") == target) & pl.col("op").is_in(["call_function", "call_method", "call_module"])
        ).sort("order").head(1)
        if hit.height == 0:
            return None
        line = hit["line"][0]
        return Location("code", key=hit["graph_id"][0], line=(line or 1) - 1)

    def code_key(self, rank: Any, compile_id: str, *, graph: bool = False, kernel: str | None = None) -> str | None:
        """The graphs & kernels view's key of the Dynamo graph (`graph`) or of the kernel
        whose name without its counter is `kernel`, in that compile."""
        if self._code is None:
            self._code = {}
            for c in self.model.code.select("what", "kind", "name", "rank", "compile_id", "key").iter_rows(named=True):
                self._code.setdefault((c["rank"], c["compile_id"]), []).append(c)
        for c in self._code.get((rank, compile_id), []):
            if graph and c["what"] == "graph" and c["kind"] == "dynamo":
                return c["key"]
            if kernel is not None and c["what"] == "kernel" and re.sub(r"_\d+$", "", c["name"] or "") in (kernel, c["name"]):
                return c["key"]
        return None


def _compiles_loc(rank: Any, compile_id: str | None, view: str = "frames", **kw: Any) -> Location | None:
    return Location(view, rank=rank, compile_id=compile_id, **kw) if compile_id else None


def _unfinished_rows(diff: dict[str, Any], pa: _Places, pb: _Places) -> Iterable[DiffRow]:
    """A compile one run left unfinished: Enter opens that run at it in its frames view."""
    for r in diff["unfinished"]:
        side = r["unfinished_in"]
        detail = [("compile", f"{bracketed(r['compile_id_a'] or '-')} in A, {bracketed(r['compile_id_b'] or '-')} in B")]
        if r.get("innermost_span"):
            detail.append(("innermost open span", r["innermost_span"]))
        yield DiffRow("unfinished", r["change"], change_text("unfinished", r), tuple(detail), side,
                      _compiles_loc(r["rank"], r[f"compile_id_{side}"]))


def _function_rows(diff: dict[str, Any], pa: _Places, pb: _Places) -> Iterable[DiffRow]:
    for r in diff["functions"]:
        text = change_text("functions", r)
        ids_a, ids_b = r["compile_ids_a"], r["compile_ids_b"]
        # the first compile one run has and the other has not (moved: B's first)
        if r["change"] in ("new", "more", "moved"):
            side, cid = "b", ids_b[min(r["compiles_a"], len(ids_b) - 1)] if r["change"] == "more" else ids_b[0]
        else:
            side, cid = "a", ids_a[min(r["compiles_b"], len(ids_a) - 1)] if r["change"] == "fewer" else ids_a[0]
        detail = (("compiles in A", ", ".join(ids_a) or "none"), ("compiles in B", ", ".join(ids_b) or "none"))
        yield DiffRow("functions", r["change"], text, detail, side, _compiles_loc(r["rank"], cid))


def _cause_rows(diff: dict[str, Any], pa: _Places, pb: _Places) -> Iterable[DiffRow]:
    for r in diff["recompile_causes"]:
        side = "a" if r["change"] == "gone" else "b"
        cid, against = (pa if side == "a" else pb).cause(r)
        detail = [("function", r.get("label") or code_object(r["function"], r["file"], r["line"])),
                  ("recompiles", f"{r['count_a']} in A -> {r['count_b']} in B")]
        if r["text_a"] and r["text_b"] and r["text_a"] != r["text_b"]:
            detail += [("in A", r["text_a"]), ("in B", r["text_b"])]
        if r.get("fix"):
            detail.append(("fix", r["fix"]))
        loc = _compiles_loc(r["rank"], cid, "guards", compare_id=against)
        yield DiffRow("recompile_causes", r["change"], change_text("recompile_causes", r), tuple(detail), side, loc)


def _break_rows(diff: dict[str, Any], pa: _Places, pb: _Places) -> Iterable[DiffRow]:
    for r in diff["graph_breaks"]:
        text = change_text("graph_breaks", r)
        side = "a" if r["change"] == "fixed" else "b"
        cid = (pa if side == "a" else pb).graph_break(r)
        detail = (("in", code_object(r["function"], r["file"], r["line"])),)
        yield DiffRow("graph_breaks", r["change"], text, detail, side, _compiles_loc(r["rank"], cid))
    for r in diff["frames_eager"]:
        side = "b" if r["change"] == "new" else "a"
        cid = (pa if side == "a" else pb).first_compile(r["rank"], r["function"], r["file"])
        detail = (("why", r["why"] or "?"),)
        yield DiffRow("frames_eager", r["change"], change_text("frames_eager", r), detail, side, _compiles_loc(r["rank"], cid))


def _failure_rows(diff: dict[str, Any], pa: _Places, pb: _Places) -> Iterable[DiffRow]:
    for r in diff["failures"]:
        side = "b" if r["change"] == "new" else "a"
        yield DiffRow("failures", r["change"], change_text("failures", r), (("compile", r["compile_id"]),), side,
                      _compiles_loc(r["rank"], r["compile_id"]))


def _per_compile_rows(diff: dict[str, Any], pa: _Places, pb: _Places) -> Iterable[DiffRow]:
    """One row per op, guard or kernel added (in B's compile) or removed (in A's)."""
    for section, what in (("graphs", "ops"), ("guards", "guards"), ("kernels", "kernels")):
        for r in diff[section]:
            co = f"{_rank(r)}{r.get('label') or code_object(r['function'], r['file'], r['line'])} compile #{r['nth'] + 1}"
            for sign, side, items in (("+", "b", r[f"{what}_added"]), ("-", "a", r[f"{what}_removed"])):
                cid = r["compile_id_b"] if side == "b" else r["compile_id_a"]
                places = pb if side == "b" else pa
                for item, n in items.items():
                    count = f" (x{n})" if n > 1 else ""
                    find = None
                    if section == "guards":
                        loc = _compiles_loc(r["rank"], cid, "guards")
                        find = guard_text(item)
                    elif section == "graphs" and (node := places.op_node(r["rank"], cid, item)) is not None:
                        loc = node
                    else:
                        key = places.code_key(r["rank"], cid, graph=section == "graphs",
                                              kernel=item if section == "kernels" else None)
                        loc = Location("code", key=key) if key else _compiles_loc(r["rank"], cid, "code")
                    change = "added" if sign == "+" else "removed"
                    detail = (("compile", f"{bracketed(r['compile_id_a'])} in A, {bracketed(r['compile_id_b'])} in B"),)
                    yield DiffRow(section, change, f"{sign} {item}{count}  {co}", detail, side, loc, find)


def guard_text(key: str) -> str:
    """What to look for in the guards view for a guard as the diff shows it (`KIND: code`, ids
    blanked to `#`): its code up to the first blanked part."""
    code = key.split(": ", 1)[1] if ": " in key else key
    return code.split("#", 1)[0]


def _other_rows(diff: dict[str, Any], pa: _Places, pb: _Places) -> Iterable[DiffRow]:
    for r in diff["autotuning"]:
        side = "a" if r["change"] == "gone" else "b"
        cid = (pa if side == "a" else pb).autotuned(r, side)
        yield DiffRow("autotuning", r["change"], change_text("autotuning", r), (), side,
                      _compiles_loc(r["rank"], cid, "code"))
    for r in diff["pgo"]:
        yield DiffRow("pgo", "count", f"{r['artifact']}: {r['a']} -> {r['b']}")
    for r in diff["cache"]:
        yield DiffRow("cache", "count", f"{r['counter']}: {r['a']} -> {r['b']}")
    for r in diff["rank_divergence"]:
        side = "a" if r["change"] == "gone" else "b"
        cid = (pa if side == "a" else pb).divergence(r["rank"])
        yield DiffRow("rank_divergence", r["change"], f"rank {r['rank']}: {r['detail']}", (), side,
                      _compiles_loc(r["rank"], cid))
    ct = diff["compile_time"]
    if ct["total_significant"]:
        pct = f" ({ct['total_pct']:+g}%)" if ct["total_pct"] is not None else ""
        yield DiffRow("compile_time", "total", f"{ct['total_a_s']:.2f}s -> {ct['total_b_s']:.2f}s{pct}")
    for r in ct["phases"] + ct["functions"]:
        yield DiffRow("compile_time", "phase" if r.get("phase") else "function", "  " * phase_depth(r) + time_row_text(r))


def diff_rows(diff: dict[str, Any], a: TraceModel, b: TraceModel) -> list[DiffRow]:
    """The rows of the diff screen, in build_diff's order (most important first): one per
    change, each with the run and place Enter opens."""
    pa, pb = _Places(a), _Places(b)
    rows: list[DiffRow] = []
    for make in (_unfinished_rows, _function_rows, _cause_rows, _break_rows, _failure_rows, _per_compile_rows, _other_rows):
        rows.extend(make(diff, pa, pb))
    return rows


def _rank(r: dict[str, Any]) -> str:
    return f"rank {r['rank']} " if r.get("rank") is not None else ""


# ------------------------------------------------------------------------------- screen
def row_prompt(row: DiffRow) -> Text:
    t = Text(end="")
    t.append_text(safe(f"{(row.side or '-').upper()} ", "bold"))
    t.append_text(safe(f" {SECTION_TITLES[row.section]} ", "bold reverse"))
    t.append(" ")
    t.append_text(safe(f"{row.change}: ", "italic"))
    t.append_text(safe(row.text))
    return t


def row_detail(row: DiffRow, names: tuple[str, str]) -> Text:
    t = Text(end="")
    t.append_text(safe(SECTION_TITLES[row.section], "bold reverse"))
    t.append_text(safe(f"  {row.change}", "italic"))
    t.append("\n")
    t.append_text(safe(row.text, "bold"))
    t.append("\n")
    for label, value in row.detail:
        t.append("\n")
        if label:
            t.append_text(safe(f"{label}: ", "bold"))
        t.append_text(safe(value))
    t.append("\n\n")
    if row.side and row.target:
        run = f"run {row.side.upper()} ({names[0] if row.side == 'a' else names[1]})"
        where = f"{bracketed(row.target.compile_id, row.target.occurrence)} " if row.target.compile_id else ""
        t.append_text(safe(f"enter: open {run}, {where}{VIEW_NAMES[row.target.view]}", "italic"))
    else:
        t.append_text(safe("nothing to open in either run for this change", "italic"))
    return t


class DiffScreen(Screen[None]):
    """What changed from run A to run B, one row per change, most important first."""

    DEFAULT_CSS = """
    #diff-list { height: 1fr; max-height: 100%; border: none; padding: 0; }
    #diff-list:focus { border: none; }
    #diff-detail { width: 100%; height: auto; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open in its run", id="diff.open", show=False),
        Binding("a", "run('a')", "Run A", id="diff.run_a"),
        Binding("b", "run('b')", "Run B", id="diff.run_b"),
        Binding("c", "copy", "Copy", id="diff.copy"),
        Binding("question_mark,f1", "help", "Help", id="diff.help"),
    ]

    def __init__(self, diff: dict[str, Any], rows: list[DiffRow], names: tuple[str, str]) -> None:
        super().__init__(id="diff-screen")
        self.diff = diff
        self.rows = rows
        self.names = names

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="diff-title", classes="view-title")
        with Container(classes="split"):
            yield OptionList(id="diff-list", classes="pane-main w3")
            with VerticalScroll(classes="pane-side detail w2"):
                yield Static(id="diff-detail")
        yield QuitFooter()

    def _title(self) -> Text:
        d = self.diff
        n = d["changes"]
        state = "no changes" if d["no_changes"] else f"{n} change{'s' if n != 1 else ''}" if n else "compile time only"
        t = safe(f"Diff · {state} · A {self.names[0]} ({d['a']['compiles']} compiles) -> "
                 f"B {self.names[1]} ({d['b']['compiles']} compiles)", "bold")
        t.append("\n")
        t.append_text(safe("A/B: the run Enter opens · D: back here from any view", "italic"))
        return t

    def on_mount(self) -> None:
        ol = self.query_one("#diff-list", OptionList)
        if self.rows:
            ol.add_options([Option(row_prompt(r), id=str(i)) for i, r in enumerate(self.rows)])
            ol.highlighted = 0
        else:
            within = len(self.diff["compile_time"]["within_noise"])
            ol.add_option(Option(safe(f"No changes between A and B ({within} compile-time changes within noise)."), disabled=True))
            self.query_one("#diff-detail", Static).update(safe("Nothing changed. a: run A, b: run B."))
        self.set_class(self.app.size.width < NARROW_BELOW, "narrow")
        ol.focus()

    def on_resize(self, event: object) -> None:
        self.set_class(self.size.width < NARROW_BELOW, "narrow")

    @property
    def row(self) -> DiffRow | None:
        i = self.query_one("#diff-list", OptionList).highlighted
        return self.rows[i] if i is not None and 0 <= i < len(self.rows) else None

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        row = self.row
        if row is not None:
            self.query_one("#diff-detail", Static).update(row_detail(row, self.names))

    async def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        await self.action_open()

    async def action_open(self) -> None:
        row = self.row
        if row is None:
            return
        if row.side is None or row.target is None:
            self.app.notify("nothing to open in either run for this change", severity="warning")
            return
        app = self.app
        assert isinstance(app, AgainstApp)
        await app.open_run(row.side, row.target, row.find)

    async def action_run(self, side: str) -> None:
        app = self.app
        assert isinstance(app, AgainstApp)
        await app.open_run(side)

    def action_copy(self) -> None:
        row = self.row
        if row is None:
            self.app.notify("nothing to copy here", severity="warning")
            return
        self.app.copy_to_clipboard(row.as_text())
        self.app.notify("copied the change to the clipboard")

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen([("Diff of two runs", DiffScreen.BINDINGS), *binding_groups(self.app)]))


# ---------------------------------------------------------------------------------- app
class AgainstApp(TraceviewApp):
    """`traceview open B --against A`: the diff screen first, both runs one key away."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *TraceviewApp.BINDINGS,
        Binding("D", "show_diff", "Diff of A and B", id="show_diff"),
    ]

    def __init__(self, load_b: Callable[[], Trace], load_a: Callable[[], Trace], names: tuple[str, str]) -> None:
        """`names`: (A, B) as the user gave them."""
        super().__init__(load_b, where=f"B {names[1]}")
        self.load_a = load_a
        self.names = names
        self.main_b: MainScreen | None = None

    def _load(self, source: Any) -> None:
        """Worker thread: both runs, their models with guards, graphs and kernels, the diff."""
        try:
            models = []
            for side, load in (("B", source), ("A", self.load_a)):
                self._progress(f"run {side}: parsing the logs (or reading the parse cache)")
                trace = load()
                if self.cancelled:
                    return
                model = TraceModel.build(trace, progress=lambda s, side=side: self._progress(f"run {side}: {s}"))
                model.build_graph_tables(progress=lambda s, side=side: self._progress(f"run {side}: {s}"))
                models.append(model)
            model_b, model_a = models
            self._progress("comparing the runs")
            diff = build_diff(model_a.trace, model_b.trace, names=self.names)
            rows = diff_rows(diff, model_a, model_b)
            self.timings["diff"] = time.monotonic() - self._t0
            if not self.cancelled:
                self._from_thread(self._diff_loaded, model_b, model_a, diff, rows)
        except Exception as exc:  # one line; TRACEVIEW_DEBUG=1 for the traceback
            if debugging():
                import traceback

                traceback.print_exc()
            self._from_thread(self._failed, exc)

    async def _diff_loaded(self, model_b: TraceModel, model_a: TraceModel, diff: dict[str, Any], rows: list[DiffRow]) -> None:
        self.model = model_b
        self.main_b = MainScreen(model_b, f"B {self.names[1]}")
        # B's screen mounted before the diff covers it (quitting at once then finds no half-built screen)
        await self.switch_screen(self.main_b)
        self.install_screen(MainScreen(model_a, f"A {self.names[0]}", screen_id="main-a"), "run-a")
        self.install_screen(DiffScreen(diff, rows, self.names), "diff")
        await self.push_screen("diff")
        self.timings["first_screen"] = time.monotonic() - self._t0

    async def _show(self, name: str) -> Screen | None:
        """Show "b" (B's main screen), "a" (A's) or "diff"; None when a dialog is up."""
        assert self.main_b is not None
        target = self.main_b if name == "b" else self.get_screen("run-a" if name == "a" else "diff")
        top = self.screen
        if top is target:
            return target
        if top not in (self.main_b, self.get_screen("run-a"), self.get_screen("diff")):
            return None  # help, a dialog: close it first
        if target is self.main_b:
            await self.pop_screen()
        elif top is self.main_b:
            await self.push_screen(target)
        else:
            await self.switch_screen(target)
        return target

    async def open_run(self, side: str, loc: Location | None = None, find: str | None = None) -> None:
        """Run `side` ("a" or "b"), at `loc` when given (and on the item matching `find`)."""
        screen = await self._show(side)
        if isinstance(screen, MainScreen):
            if loc is not None:
                screen.go(loc)
            if find:
                _select(screen, find)
            path = self.names[0] if side == "a" else self.names[1]
            self.notify(plain(f"run {side.upper()}: {path}  (D: the diff)"), timeout=3)

    async def action_show_diff(self) -> None:
        if self.main_b is not None:
            await self._show("diff")


def _select(screen: MainScreen, find: str) -> None:
    """Put the cursor on the first item of the view matching `find`: in the guards view, a
    guard of the compile shown (its left table), else as `/` would."""
    if screen.view.view_id == "guards":
        table = screen.view.query_one("#guards-left", LazyTable)
        i = table.find(find, keys=["code"])
        if i is not None:
            table.move_to(i)
            table.focus()
        return
    screen.view.search(find)


def build_against_app(options: LoadOptions, against: LoadOptions) -> AgainstApp:
    """The app of `traceview open B --against A` (`options`: B, `against`: A). Both inputs
    are looked for first (a bad path is one line before any screen); a directory with several
    runs needs --latest (the diff never guesses which run)."""
    found = []
    for opts in (options, against):
        inputs = discover_inputs(opts)
        if inputs.runs > 1 and not opts.latest and not exports_of(opts):
            raise UserError(f"{opts.paths[0]}: holds {inputs.runs} runs; with --against give --latest (or one run's files)")
        found.append(inputs)

    def load_b() -> Trace:
        return load_trace(options, found[0])

    def load_a() -> Trace:
        return load_trace(against, found[1])

    return AgainstApp(load_b, load_a, names=(against.paths[0], options.paths[0]))


def run_against(options: LoadOptions, against: LoadOptions) -> int:
    """`traceview open B --against A`: run the UI; returns the exit code."""
    return run_until_exit(build_against_app(options, against))
