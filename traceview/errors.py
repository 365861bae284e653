"""Errors shown to the user as one line, and the exit codes (kept import-light: the CLI
imports this first). The CLI and the UI both say what went wrong through `error_line`."""

from __future__ import annotations

import os

EXIT_OK = 0
EXIT_CANCELLED = 1  # the UI: loading cancelled, no run picked
EXIT_GATE = 1  # traceview diff --fail-on: a rule was violated (one line per rule on stderr)
EXIT_USAGE = 2  # a problem with the input or the arguments
EXIT_INTERNAL = 3  # a bug in traceview (or out of memory)
EXIT_INTERRUPTED = 130  # Ctrl-C


class UserError(Exception):
    """A problem with what the user asked for: one line, exit code 2."""


class ExportError(UserError):
    """The export could not be written."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message ("" when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def is_user_error(exc: BaseException) -> bool:
    """Whether `exc` is about the input or the arguments (exit 2), not a bug (exit 3)."""
    from parsers.discover import InputError

    return isinstance(exc, (UserError, InputError, OSError))


def error_line(exc: BaseException) -> tuple[int, str]:
    """The exit code and the one line (`traceview: error: ...`) that report `exc`."""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return EXIT_USAGE, f"traceview: error: {where}{exc.strerror or exc}"
    if is_user_error(exc):
        return EXIT_USAGE, f"traceview: error: {exc}"
    if isinstance(exc, MemoryError):
        return EXIT_INTERNAL, "traceview: error: out of memory"
    return EXIT_INTERNAL, (
        f"traceview: internal error: {type(exc).__name__}: {first_line(exc)[:200]} (set TRACEVIEW_DEBUG=1 for details)"
    )


def debugging() -> bool:
    """TRACEVIEW_DEBUG=1: show the traceback of an internal error instead of one line."""
    return bool(os.environ.get("TRACEVIEW_DEBUG"))
