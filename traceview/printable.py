"""Make log text safe to print: control characters and escape sequences become visible."""

from __future__ import annotations

import re

# C0 controls except TAB and LF, DEL, and C1 controls (CSI, OSC, ... in 8-bit form).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return "^[" if c == 0x1B else f"\\x{c:02x}"


def printable(text: str | None) -> str:
    """`text` with ESC shown as `^[` and other control characters as `\\xNN`."""
    if not text:
        return ""
    return _CONTROL.sub(_visible, text)


def one_line(text: str | None, width: int = 200) -> str:
    """First line of `text`, made printable and cut to `width` characters."""
    s = printable((text or "").strip().split("\n", 1)[0])
    return s if len(s) <= width else s[: max(width - 1, 0)] + "…"
