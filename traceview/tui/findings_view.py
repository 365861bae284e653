"""The opening view: findings of the report, most important first."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from traceview.analyze.findings import uncovered_debug_dirs
from traceview.output.summary import head_lines
from traceview.tui.cursor import MarkedOptionList
from traceview.tui.finding_rows import Finding
from traceview.tui.navigation import Location
from traceview.tui.text import safe
from traceview.tui.view import CompileFocused, Navigate, View

if TYPE_CHECKING:  # the first screen imports no polars (traceview.tui.report_model)
    from traceview.tui.model import CompileKey, TraceModel
    from traceview.tui.report_model import ReportModel


def finding_prompt(f: Finding) -> Text:
    t = Text(end="")
    t.append_text(safe(f"{f.tag} ", "bold reverse"))
    t.append(" ")
    t.append_text(safe(f.title, "bold"))
    for line in f.summary:
        t.append("\n  ")
        t.append_text(safe(line, "italic"))
    return t


def finding_detail(f: Finding, stack: list[str] | None = None) -> Text:
    """The whole finding; `stack`: a graph break's user code traceback, shown right after
    where it happened (before the long reason text)."""
    t = Text(end="")
    t.append_text(safe(f.tag, "bold reverse"))
    t.append("\n")
    t.append_text(safe(f.title, "bold"))
    t.append("\n")
    for label, value in f.detail:
        t.append("\n")
        if label:
            t.append_text(safe(f"{label}: ", "bold"))
        t.append_text(safe(value))
        if stack and label == "where":
            _stack(t, stack)
            stack = None
    if stack:
        _stack(t, stack)
    t.append("\n\n")
    target = "the failing guard (guards view)" if f.view == "guards" else "the compile (frames view)"
    hint = f"enter: open {target}" if f.compile_id else ""
    if f.file and f.lineno:
        hint += ("  ·  " if hint else "") + "r: the raw record"
    t.append_text(safe(hint, "italic"))
    return t


def _stack(t: Text, stack: list[str]) -> None:
    t.append("\n")
    t.append_text(safe("user stack (last call last):", "bold"))
    for line in stack:
        t.append("\n")
        t.append_text(safe(line))


def header_text(model: TraceModel | ReportModel) -> Text:
    """The line above the findings: what was read (compiles, ranks, seconds compiling), then the
    summary's head line as the report keeps it (traceview.analyze.judge.head_lines: computed
    once, never counted again here), then what could not be read."""
    r = model.report
    debug_only = not model.text_only and model.compile_count == 0 and bool(uncovered_debug_dirs(r))
    if model.text_only:
        parts = [f"{r['compile_ids_in_text_logs']} compile ids in the text log (no compile metrics)"]
    elif debug_only:  # a TORCH_COMPILE_DEBUG folder alone: its graphs, no compile ids
        graphs = sum(d["graphs"] for d in uncovered_debug_dirs(r))
        parts = [f"{graphs} Inductor graphs in TORCH_COMPILE_DEBUG folders (no compile metrics)"]
    else:
        parts = [f"{model.compile_count} compiles"]
    if r.get("ranks"):
        parts.append(f"{len(r['ranks'])} ranks")
    total = (r.get("compile_time") or {}).get("total_s")
    if total is not None and not model.text_only and not debug_only:
        parts.append(f"{total:.2f}s compiling")
    t = safe(" · ".join(parts))
    for line in head_lines(r):
        t.append("\n")
        t.append_text(safe(line, "bold"))
    for name, why in model.missing.items():
        t.append("\n")
        t.append_text(safe(f"not available: {name} ({why})", "italic"))
    return t


class FindingsView(View):
    """Recompile storms, graph-break hotspots, failed compiles, rank divergence, slow compiles.

    Shown first, from the cached findings document alone (a `ReportModel`) when there is one;
    `trace_loaded` gives it the whole model once the Trace is read."""

    view_id = "findings"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", id="findings.open", show=False),
    ]

    def __init__(self, model: TraceModel | ReportModel, **kwargs: object) -> None:
        super().__init__(model, **kwargs)  # type: ignore[arg-type]
        self._stacks: dict[tuple[str, int], list[str]] = {}

    def trace_loaded(self, model: TraceModel) -> None:
        """The Trace is read: the same findings, now with what needs the Trace (a graph break's
        user stack, the tables that could not be read)."""
        self.model = model
        self.query_one("#findings-summary", Static).update(self._summary())
        self._show_detail()

    def compose(self) -> ComposeResult:
        yield Static(self._summary(), id="findings-summary", classes="view-title")
        with Container(classes="split"):
            # the cursor's finding marked by a character too (tui.cursor), not colour alone
            yield MarkedOptionList(id="findings-list", classes="pane-main w3")
            with VerticalScroll(id="finding-detail-pane", classes="pane-side detail w2"):
                yield Static(id="finding-detail")

    def on_mount(self) -> None:
        ol = self.query_one("#findings-list", OptionList)
        if self.model.findings:
            ol.add_options([Option(finding_prompt(f), id=str(i)) for i, f in enumerate(self.model.findings)])
            ol.highlighted = 0
        else:
            n = self.model.compile_count
            what = (f"{self.model.report.get('compile_ids_in_text_logs')} compile ids in the text log" if self.model.text_only
                    else f"{n} compiles")
            line = f"No findings: {what}, no recompiles, graph breaks or failures."
            if n == 0 and not self.model.text_only and uncovered_debug_dirs(self.model.report):
                # a TORCH_COMPILE_DEBUG folder alone cannot show failures: the head line's words
                line = (head_lines(self.model.report) or [line])[0]
            ol.add_option(Option(safe(line), disabled=True))
            self.query_one("#finding-detail", Static).update(safe("Nothing to report. Press 2 for the frames view."))

    def _summary(self) -> Text:
        return header_text(self.model)

    # -- selection --------------------------------------------------------------------
    @property
    def index(self) -> int | None:
        ol = self.query_one("#findings-list", OptionList)
        return ol.highlighted if self.model.findings else None

    @property
    def finding(self) -> Finding | None:
        i = self.index
        return self.model.findings[i] if i is not None and 0 <= i < len(self.model.findings) else None

    def select(self, index: int) -> None:
        if self.model.findings:
            self.query_one("#findings-list", OptionList).highlighted = index % len(self.model.findings)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        f = self._show_detail()
        if f is not None and f.compile_id:
            self.post_message(CompileFocused((f.rank, f.compile_id), f.occurrence))

    def _show_detail(self) -> Finding | None:
        """The selected finding, whole, in the pane beside the list."""
        f = self.finding
        if f is not None:
            self.query_one("#finding-detail", Static).update(finding_detail(f, self._stack(f)))
        return f

    def _stack(self, f: Finding) -> list[str] | None:
        """A graph-break finding's user stack, from its reason record (read once)."""
        if f.kind != "graph_break" or not (f.file and f.lineno) or self.model.trace is None:
            return None  # (before the Trace is read: shown once it is)
        key = (f.file, f.lineno)
        if key not in self._stacks:
            try:
                self._stacks[key] = self.model.user_stack_at(f.file, f.lineno)
            except Exception:  # a record that cannot be read: the finding still shows
                self._stacks[key] = []
        return self._stacks[key]

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        f = self.finding
        if f is None:
            return
        if f.compile_id is None:
            if f.file and f.lineno:
                self.post_message(Navigate(Location("records", file=f.file, lineno=f.lineno)))
            return
        self.post_message(Navigate(target_of(f)))

    # -- hooks ------------------------------------------------------------------------
    def show(self, loc: Location) -> None:
        if loc.key is not None:
            self.select(int(loc.key))

    def location(self) -> Location:
        i = self.index
        return Location("findings", key=str(i) if i is not None else None)

    def search(self, query: str, forward: bool = True) -> bool:
        fs = self.model.findings
        if not fs:
            return False
        start = self.index or 0
        n = len(fs)
        order = [(start + k) % n for k in (range(1, n + 1) if forward else range(-1, -n - 1, -1))]
        q = query.lower()
        for i in order:
            if q in fs[i].as_text().lower():
                self.select(i)
                return True
        return False

    def copy_text(self) -> str | None:
        f = self.finding
        if f is None:
            return None
        stack = self._stack(f)
        return f.as_text() + ("\nuser stack (last call last):\n" + "\n".join(stack) if stack else "")

    def record_ref(self) -> tuple[str, int] | None:
        f = self.finding
        return (f.file, f.lineno) if f and f.file and f.lineno else None

    def compile_ref(self) -> CompileKey | None:
        f = self.finding
        return (f.rank, f.compile_id) if f and f.compile_id else None

    def compile_occurrence(self) -> int | None:
        f = self.finding
        return f.occurrence if f else None

    def focus_main(self) -> None:
        self.query_one("#findings-list", OptionList).focus()


def target_of(f: Finding) -> Location:
    """Where Enter on a finding goes."""
    if f.view == "guards":
        return Location("guards", rank=f.rank, compile_id=f.compile_id, occurrence=f.occurrence, compare_id=f.compare_id)
    return Location("frames", rank=f.rank, compile_id=f.compile_id, occurrence=f.occurrence)
