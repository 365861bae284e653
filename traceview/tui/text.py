"""Display strings for log text: always `rich.text.Text`, never markup, after `printable`.

Log text is data: a payload may hold `[bold]`, `[link=...]`, ANSI escapes and control
characters, and each must show literally. Every string from a log that reaches a widget goes
through `safe` (or `cell`), which escapes control characters with
`traceview.printable.printable` and wraps the result in a `Text` (so Rich never parses markup).
"""

from __future__ import annotations

import locale
import os
import sys
from typing import Any

from rich.cells import cell_len
from rich.text import Text

from traceview.analyze.wording import STATUS_WORDS as ACCOUNT_WORDS
from traceview.printable import printable


def safe(value: Any, style: str = "") -> Text:
    """`value` as literal text: control characters made visible, markup never parsed."""
    s = "" if value is None else str(value)
    return Text(printable(s).expandtabs(4), style=style, end="")


def plain(value: Any) -> str:
    """`value` as a printable one-line-per-line string (for widths, search, clipboard)."""
    return printable("" if value is None else str(value)).expandtabs(4)


def fit(s: str, width: int) -> str:
    """`s` cut or padded to exactly `width` cells ("…" marks a cut)."""
    if width <= 0:
        return ""
    n = cell_len(s)
    if n <= width:
        return s + " " * (width - n)
    out = []
    used = 0
    for ch in s:
        w = cell_len(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…" + " " * (width - 1 - used)


def fit_left(s: str, width: int) -> str:
    """`s` cut from the left (keeping its end) or padded to exactly `width` cells."""
    if cell_len(s) <= width:
        return fit(s, width)
    out = []
    used = 0
    for ch in reversed(s):
        w = cell_len(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return fit("…" + "".join(reversed(out)), width)


def fit_middle(s: str, width: int) -> str:
    """`s` cut in the middle (keeping its start and its end, where names like
    `triton_poi_fused_add_mul_0` and `…_1` differ) or padded to exactly `width` cells."""
    if cell_len(s) <= width:
        return fit(s, width)
    if width < 8:
        return fit(s, width)
    tail = (width - 1) // 2
    # fit() ends the head with "…", fit_left() begins the tail with one: keep the first
    return fit(fit(s, width - tail) + fit_left(s, tail + 1)[1:], width)


def short_path(path: str | None, width: int = 40) -> str:
    """A file path cut from the left to at most `width` characters."""
    if not path:
        return "?"
    p = printable(path)
    return p if len(p) <= width else "…" + p[-(width - 1) :]


def seconds(v: Any) -> str:
    if v is None:
        return "-"
    v = float(v)
    if v >= 100:
        return f"{v:.0f}s"
    if v >= 1:
        return f"{v:.2f}s"
    return f"{v * 1000:.0f}ms"


def _unicode_ok() -> bool:
    if os.environ.get("TRACEVIEW_ASCII"):
        return False
    enc = (getattr(sys.stdout, "encoding", None) or locale.getpreferredencoding(False) or "").lower()
    return "utf" in enc



# What a compile's status means (traceview.analyze.findings.compile_outcome): a mark and a
# word, so neither colour nor the glyph carries it alone.
_MARKS = {
    "ok": ("✓", "+"),
    "restarted": ("↻", "r"),
    "eager": ("↓", "e"),
    "failed": ("✗", "x"),
    "empty": ("∅", "0"),
    "no_metrics": ("?", "?"),
    # the compile account's open compiles (traceview.analyze.accounts.compiles.OPEN): never "ok"
    "interrupted": ("!", "!"),
    "never_ended": ("…", "~"),
}
STATUS_WORDS = {
    "ok": "ok",
    "restarted": "restarted",
    "eager": "eager",
    "failed": "failed",
    "empty": "empty",
    "no_metrics": "no metrics",
    "interrupted": "interrupted",
    "never_ended": "never ended",
}
# the legend: what each word means
OUTCOME_MEANING = {
    "ok": "ok",
    "restarted": "restarted after a graph break (normal)",
    "eager": "fell back to eager",
    "failed": "failed",
    "empty": "no graph",
    "no_metrics": "no metrics",
    "interrupted": ACCOUNT_WORDS["interrupted"],
    "never_ended": ACCOUNT_WORDS["never_ended"],
}


def mark(outcome: str | None) -> str:
    """The mark of a compile's outcome (`✓`, `↻`, `↓`, `✗`, `∅`, `?`; ASCII when the terminal is not UTF-8)."""
    pair = _MARKS.get(outcome or "no_metrics", ("?", "?"))
    return pair[0] if _unicode_ok() else pair[1]


def account_outcome(outcome: str, status: str | None) -> str:
    """A compile's outcome (compile_outcome: ok, restarted, eager, ...) under the compile
    account's status (traceview.analyze.accounts.compiles): an interrupted or never-ended
    compile is said so, never "ok" (torch may have logged its metrics as if it had ended); a
    finished one keeps its kind of ok, a failed one whether it fell back to eager."""
    if status in ("interrupted", "never_ended"):
        return status
    if status == "unknown":
        return "no_metrics"
    if status == "finished" and outcome not in ("ok", "restarted", "empty"):
        return "ok"
    if status == "failed" and outcome not in ("failed", "eager"):
        return "failed"
    return outcome


def status_label(outcome: str | None) -> str:
    return f"{mark(outcome)} {STATUS_WORDS.get(outcome or 'no_metrics', outcome or '?')}"


FAILED_MARK = "✗" if _unicode_ok() else "x"
