"""Shared lexing of the Python that torch prints: FX graphs, wrapper code, guards.

String literals, brackets and comments, read as Python reads them: :func:`split_top_level`
(the arguments of a call, the items of a tuple, the guards of a recompile reason: used by
:mod:`parsers.fxgraph`, :mod:`parsers.outputcode`, :mod:`parsers.messages` and
``parsers.dataflow``), bracket balance, the ``code  # comment`` split, and the
parameters of a ``def forward(...)`` signature. Both FX graph parsers
(:mod:`parsers.fxgraph.reference` and :mod:`parsers.fxgraph.columns`) use these, so they
read a line the same way. No knowledge of graphs here, and no polars.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = [
    "ANSI",
    "QUOTED",
    "balance",
    "closes_at_end",
    "paren_balance",
    "parse_param",
    "signature_params",
    "split_code_comment",
    "split_top_level",
    "unquote",
    "unquoted",
]

#: An ANSI color escape (TORCH_LOGS may color its lines).
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def unquoted(s: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """(index, character) of ``s`` from ``start``, skipping string literals (and their
    quotes and escapes)."""
    quote = ""
    i = start
    n = len(s)
    while i < n:
        c = s[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        else:
            yield i, c
        i += 1


def split_code_comment(s: str) -> tuple[str, str | None]:
    """Split ``code  # comment`` outside of string literals."""
    for i, c in unquoted(s):
        if c == "#":
            return s[:i].rstrip(), s[i + 1 :].strip()
    return s, None


def split_top_level(s: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` at bracket depth 0 outside of strings (pieces stripped, empty ones
    dropped): the arguments of a call, the items of a tuple, in graph and wrapper code alike,
    and the guards of a recompile reason (``sep="; "``). ``sep`` may be several characters,
    none of them a quote or a bracket. A closing bracket with no opener is passed over (the
    depth stays 0): printed code has none, but the user source quoted in a guard's comment
    may, and the guards after it are still split."""
    parts: list[str] = []
    depth = 0
    start = 0
    head, wide = sep[0], len(sep) > 1
    for i, c in unquoted(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth:
                depth -= 1
        elif c == head and depth == 0 and (not wide or (i >= start and s.startswith(sep, i))):
            parts.append(s[start:i])
            start = i + len(sep)
    parts.append(s[start:])
    return [p.strip() for p in parts if p.strip()]


def paren_balance(s: str) -> int:
    """Bracket depth at the end of ``s`` (string literals skipped, up to a ``#`` comment)."""
    depth = 0
    for _, c in unquoted(s):
        if c == "#":
            break
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
    return depth


def closes_at_end(s: str, open_idx: int) -> bool:
    """True when the bracket at ``open_idx`` is closed by the last character of ``s``."""
    depth = 0
    for i, c in unquoted(s, open_idx):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i == len(s) - 1
    return False


# (the unquoted annotation is words between runs of whitespace, so that no two quantifiers
# can take the same spaces: `[^=]+?` before `\s*=` was quadratic on a long run of them)
_PARAM = re.compile(
    r'^(?P<name>\*{0,2}[A-Za-z_]\w*)(?:\s*:\s*(?:"(?P<qann>(?:[^"\\]|\\.)*)"'
    r"|(?P<ann>(?=[^=])[^=\s]*(?:\s+[^=\s]+)*)))?"
    r"(?:\s*=\s*(?P<default>.+))?$"
)


def parse_param(p: str) -> tuple[str, str | None, str | None] | None:
    """(name, annotation, default) of one signature parameter; None if ``p`` is not one."""
    m = _PARAM.match(p.strip())
    if not m:
        return None
    name = m.group("name")
    ann = m.group("qann") if m.group("qann") is not None else m.group("ann")
    return name, (ann.strip() if ann is not None else None), m.group("default")


# a quoted string; one left open runs to the end (so the search for one never starts over
# at each quote after it: quadratic), and unquote keeps its opening quote
QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*(?:(?P<dq>\")|\\?\Z)|'(?:[^'\\]|\\.)*(?:(?P<sq>')|\\?\Z)", re.S)


def unquote(m: re.Match[str]) -> str:
    """``QUOTED.sub`` replacement: a closed string literal goes, an open one leaves its quote."""
    return "" if m["dq"] or m["sq"] else m[0][0]


# a one-line signature of plain parameters ``name`` / ``name: "ann"``
_SIG_PARAM = r'\*{0,2}[A-Za-z_]\w*(?:\s*:\s*"[^"\\]*")?'
_SIG_PLAIN = re.compile(rf"\s*(?:{_SIG_PARAM}\s*,\s*)*(?:{_SIG_PARAM}\s*)?")
_SIG_PARAMS = re.compile(r'(\*{0,2}[A-Za-z_]\w*)(?:\s*:\s*("[^"\\]*"))?')


def balance(s: str) -> int:
    """`paren_balance` with string methods."""
    if '"' not in s and "'" not in s:
        t = s
    elif "\\" not in s and "'" not in s:
        # double quotes only: every other piece between them is outside the strings
        t = "\0".join(s.split('"')[0::2])
    else:
        t = QUOTED.sub(unquote, s)
    k = t.find("#")
    if k >= 0:
        t = t[:k]
    if '"' in t or "'" in t:
        return paren_balance(s)
    return (t.count("(") + t.count("[") + t.count("{")) - (t.count(")") + t.count("]") + t.count("}"))


def signature_params(rest: str, plain: bool | None = None
                     ) -> list[tuple[str, str | None, str | None]]:
    """(name, annotation, default) of a one-line ``def forward(<rest>``; ``plain``: whether
    the parameters match _SIG_PLAIN, when known."""
    inner = rest[: rest.rfind(")")] if ")" in rest else rest
    if plain if plain is not None else _SIG_PLAIN.fullmatch(inner):
        return [(n, q[1:-1].strip() if q else None, None) for n, q in _SIG_PARAMS.findall(inner)]
    return [parsed for parsed in map(parse_param, split_top_level(inner)) if parsed]

