"""Results kept with their Trace: an analyzer or account computed once, however many read it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

from traceview.trace import Trace

T = TypeVar("T")


def once(trace: Trace, *, name: str, build: Callable[[], T]) -> T:
    """`build()`'s result for `trace`, computed the first time `name` is asked of this Trace
    (Trace.keep: derived again once a table of it is replaced). The caller must not change what
    it gets (copy it first)."""
    return cast(T, trace.keep(name, build))
