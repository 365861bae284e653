"""Errors shown to the user as one line (kept import-light: the CLI imports this first)."""


class UserError(Exception):
    """A problem with what the user asked for: one line, exit code 2."""


class ExportError(UserError):
    """The export could not be written."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message ("" when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
