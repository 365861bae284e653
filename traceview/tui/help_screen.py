"""`?`: the help screen, Markdown from help.md with the key tables generated from the bindings
(the groups of keys come from the main screen: this module imports no other screen)."""

from __future__ import annotations

from importlib import resources
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

BindingGroups = list[tuple[str, list[BindingType]]]


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("`", "'")


def key_display(app: App | None, b: Binding) -> str:
    if app is not None:
        try:
            return app.get_key_display(b)
        except Exception:  # pragma: no cover - depends on the driver
            pass
    return b.key


def bindings_markdown(groups: BindingGroups, app: App | None = None) -> str:
    """The key tables: one per group, one row per action (its keys joined with ' / ')."""
    out = []
    for title, bindings in groups:
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


def help_markdown(groups: BindingGroups, app: App | None = None) -> str:
    """help.md with the key tables of `groups` (see traceview.tui.main_screen.binding_groups)."""
    text = resources.files("traceview.tui").joinpath("help.md").read_text(encoding="utf-8")
    palette = getattr(app, "COMMAND_PALETTE_BINDING", "ctrl+p") if app is not None else "ctrl+p"
    return text.replace("{{bindings}}", bindings_markdown(groups, app)).replace("{{palette}}", palette)


class HelpScreen(ModalScreen[None]):
    """Every key, generated from the bindings, with a short guide (`groups`: the UI's keys,
    given by the screen that opens the help, which knows the views)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close help", id="help.close"),
    ]

    def __init__(self, groups: BindingGroups) -> None:
        super().__init__()
        self.groups = groups

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box", classes="dialog"):
            yield Markdown(help_markdown(self.groups, self.app), id="help-text")

    def on_mount(self) -> None:
        box = self.query_one("#help-box", VerticalScroll)
        box.border_title = "help"
        box.focus()
        self.watch(box, "scroll_y", self._where, init=False)
        self.call_after_refresh(self._where)

    def _where(self, _value: float | None = None) -> None:
        """The box's subtitle says that it scrolls and how much is left (the help is taller
        than most terminals)."""
        box = self.query_one("#help-box", VerticalScroll)
        if box.max_scroll_y <= 0:
            box.border_subtitle = "Esc closes"
            return
        more = "end" if box.scroll_y >= box.max_scroll_y else f"{int(100 * box.scroll_y / box.max_scroll_y)}% · ↓ more below"
        box.border_subtitle = f"↑↓ PgUp PgDn scroll · {more} · Esc closes"

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
