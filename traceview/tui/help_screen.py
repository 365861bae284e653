"""`?`: the help screen, Markdown from help.md with the key tables generated from the bindings."""

from __future__ import annotations

from importlib import resources
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Markdown


def binding_groups() -> list[tuple[str, list[BindingType]]]:
    """Every group of keys the UI has, in the order the help lists them."""
    from textual.containers import ScrollableContainer
    from textual.widgets import OptionList, Tree

    from traceview.tui.app import TraceviewApp
    from traceview.tui.code_browser import CodeBrowser
    from traceview.tui.code_view import CodeView
    from traceview.tui.findings_view import FindingsView
    from traceview.tui.frames_view import FramesView
    from traceview.tui.guards_view import GuardsView
    from traceview.tui.lazy_table import LazyTable
    from traceview.tui.loading_screen import LoadingScreen
    from traceview.tui.main_screen import MainScreen
    from traceview.tui.records_view import RecordsView

    return [
        ("Everywhere", [*TraceviewApp.BINDINGS, *App.BINDINGS, *MainScreen.BINDINGS, *Screen.BINDINGS]),
        ("Findings", [*FindingsView.BINDINGS, *OptionList.BINDINGS]),
        ("Frames and compiles", [*FramesView.BINDINGS, *Tree.BINDINGS]),
        ("Guards", GuardsView.BINDINGS),
        ("Graphs and kernels", CodeBrowser.BINDINGS),
        ("Raw records", RecordsView.BINDINGS),
        ("In a list or table", LazyTable.BINDINGS),
        ("In code and payloads", CodeView.BINDINGS),
        ("Scrolling (every list and pane)", ScrollableContainer.BINDINGS),
        ("While loading", LoadingScreen.BINDINGS),
    ]


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("`", "'")


def key_display(app: App | None, b: Binding) -> str:
    if app is not None:
        try:
            return app.get_key_display(b)
        except Exception:  # pragma: no cover - depends on the driver
            pass
    return b.key


def bindings_markdown(app: App | None = None) -> str:
    """The key tables: one per group, one row per action (its keys joined with ' / ')."""
    out = []
    for title, bindings in binding_groups():
        rows: dict[tuple[str, str], list[str]] = {}
        for b in Binding.make_bindings(bindings):
            keys = rows.setdefault((b.action, b.description), [])
            k = key_display(app, b)
            if k not in keys:
                keys.append(k)
        out.append(f"### {title}\n\n| key | what it does |\n|---|---|")
        for (_action, desc), keys in rows.items():
            what = _md(desc) or {"help_quit": "Quit (press twice)"}.get(_action, _action)
            out.append(f"| `{' / '.join(_md(k) for k in keys)}` | {what} |")
        out.append("")
    return "\n".join(out)


def help_markdown(app: App | None = None) -> str:
    text = resources.files("traceview.tui").joinpath("help.md").read_text(encoding="utf-8")
    palette = getattr(app, "COMMAND_PALETTE_BINDING", "ctrl+p") if app is not None else "ctrl+p"
    return text.replace("{{bindings}}", bindings_markdown(app)).replace("{{palette}}", palette)


class HelpScreen(ModalScreen[None]):
    """Every key, generated from the bindings, with a short guide."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close help", id="help.close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box", classes="dialog"):
            yield Markdown(help_markdown(self.app), id="help-text")

    def on_mount(self) -> None:
        self.query_one("#help-box").focus()

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
