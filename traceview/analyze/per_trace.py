"""Results kept with their Trace: an analyzer or account computed once, however many read it."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from traceview.trace import Trace

T = TypeVar("T")
_KEPT: weakref.WeakKeyDictionary[Trace, dict[str, Any]] = weakref.WeakKeyDictionary()


def once(trace: Trace, *, name: str, build: Callable[[], T]) -> T:
    """`build()`'s result for `trace`, computed the first time `name` is asked of this Trace.
    The caller must not change what it gets (copy it first)."""
    kept = _KEPT.setdefault(trace, {})
    if name not in kept:
        kept[name] = build()
    return kept[name]  # type: ignore[no-any-return]
