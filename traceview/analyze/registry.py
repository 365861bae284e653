"""torch's graph-break registry (`torch/_dynamo/graph_break_registry.json`): per gb id the
type, the explanation and the hints, from the torch installed next to traceview.

torch is not a dependency of traceview: the file is found through the import system without
importing torch (`importlib.util.find_spec`), read once, and when there is no torch (or no
registry in it) every lookup returns None and callers keep the hints the log carries. Ids change
between torch versions, so the installed file is read, never a copy.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


@functools.cache
def registry_path() -> Path | None:
    """The installed torch's registry file, or None."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        p = Path(base) / "_dynamo" / "graph_break_registry.json"
        if p.is_file():
            return p
    return None


@functools.cache
def _registry() -> dict[str, list[dict[str, Any]]]:
    p = registry_path()
    if p is None:
        return {}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def registry_entry(gb_id: str | None, gb_type: str | None = None) -> dict[str, Any] | None:
    """{"gb_id", "gb_type", "explanation", "hints"} of `gb_id` (`gb0059` or `GB0059`) in the
    installed registry, the entry whose type is `gb_type` where the id has several; hints are
    torch's fragments joined into sentences. None when torch or the id is not there."""
    if not gb_id:
        return None
    entries = _registry().get(gb_id.upper())
    if not isinstance(entries, list) or not entries:
        return None
    entry = next((e for e in entries if isinstance(e, dict) and e.get("Gb_type") == gb_type), entries[0])
    if not isinstance(entry, dict):
        return None
    hints = [h for h in entry.get("Hints") or [] if isinstance(h, str)]
    return {
        "gb_id": gb_id.lower(),
        "gb_type": entry.get("Gb_type"),
        "explanation": entry.get("Explanation"),
        "hints": _sentences(hints),
    }


def _sentences(fragments: list[str]) -> list[str]:
    """torch writes some hints as fragments of one sentence ("If you are ... (e.g. `print`), ",
    "you can try adding it to ..."): join a fragment that ends mid-sentence to the next."""
    out: list[str] = []
    cur = ""
    for f in fragments:
        cur += f
        if not cur.rstrip().endswith(","):
            out.append(cur.strip())
            cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


def has_placeholders(text: str | None) -> bool:
    """A registry text with `{fn.__name__}`-style fields the log fills in."""
    return bool(text and _PLACEHOLDER.search(text))


_CONFIG_SETTING = re.compile(r"(torch\._dynamo\.config\.\w+ ?= ?[\w.'\"-]+)")


def config_fix(hint: str | None) -> str | None:
    """The config setting a graph-break hint names as the fix, `torch._dynamo.config.X = V`
    (gb0036: `capture_dynamic_output_shape_ops = True`, gb0124: `capture_scalar_outputs =
    True`), or None when no hint assigns one."""
    m = _CONFIG_SETTING.search(hint or "")
    return m.group(1) if m else None
