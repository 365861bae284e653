"""When to reload a trace that grows (`traceview open` following its directory).

`Follow` looks at the inputs (a `Tail`) only to learn *that* complete records landed; what they
mean is found by loading the whole trace again through the one loading path, off the UI thread.
Reloads are throttled: one at a time, the next no sooner than `max(min_gap_s, factor x the last
one's duration)` after it ended, so a big trace that takes 5 s to load is reloaded at most every
15 s however fast its logs grow. A reload that fails (a file mid-rewrite) is retried after the
same gap; the caller keeps what it had.

`follow_loop` is the thread's body: poll about once a second, reload when due, hand the result
(or the exception) on. Nothing here knows about the UI.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from traceview.live.tail import Tail

T = TypeVar("T")

TICK_S = 1.0  # how often the inputs are looked at
MIN_GAP_S = 2.0  # the least time between two reloads
GAP_FACTOR = 3.0  # ... or this many times the last reload's duration, when longer


@dataclass
class Follow:
    """Whether a reload is due: records landed since the last one began, and the gap after
    the last one has passed."""

    roots: list[str]
    extra_logs: list[str] = field(default_factory=list)
    min_gap_s: float = MIN_GAP_S
    factor: float = GAP_FACTOR
    tail: Tail = field(init=False)
    dirty: bool = False  # records landed that the current trace does not hold
    next_at: float = 0.0  # monotonic time before which no reload starts
    last_s: float | None = None  # the last load's duration
    failed: int = 0  # reloads failed in a row

    def __post_init__(self) -> None:
        self.tail = Tail(roots=list(self.roots), extra_logs=list(self.extra_logs))

    def seed(self) -> None:
        """Take what is there now as loaded (call just before the first load): only records
        landing after this make a reload due."""
        self.tail.seek_end()  # a record being written too: the load reads it
        self.dirty = False

    def poll(self) -> bool:
        """Look at the inputs; True when records landed that are not loaded yet."""
        if self.tail.poll():
            self.dirty = True
        return self.dirty

    def gap(self) -> float:
        return max(self.min_gap_s, self.factor * (self.last_s or 0.0))

    def due(self, now: float | None = None) -> bool:
        return self.dirty and (time.monotonic() if now is None else now) >= self.next_at

    def started(self) -> None:
        """A reload begins: it reads everything landed so far (what lands meanwhile makes
        the next one due)."""
        self.dirty = False

    def finished(self, duration_s: float, *, ok: bool, now: float | None = None) -> None:
        """A load ended (the first one too): the next waits for the gap; a failed one is retried."""
        self.last_s = duration_s
        self.next_at = (time.monotonic() if now is None else now) + self.gap()
        if ok:
            self.failed = 0
        else:
            self.failed += 1
            self.dirty = True


def follow_loop(
    follow: Follow,
    reload: Callable[[], T],
    done: Callable[[T | Exception], None],
    stop: threading.Event,
    tick_s: float = TICK_S,
) -> None:
    """Until `stop` is set: every `tick_s`, poll; when a reload is due, run `reload()` and hand
    its result, or the exception it raised, to `done` (both in the calling thread)."""
    while not stop.wait(tick_s):
        try:
            follow.poll()
        except OSError:
            continue  # a file vanished between listing and reading: the next tick sees
        if not follow.due():
            continue
        follow.started()
        t0 = time.monotonic()
        result: T | Exception
        try:
            result = reload()
            ok = True
        except Exception as exc:  # a file mid-rewrite: said by the caller, retried here
            result, ok = exc, False
        follow.finished(time.monotonic() - t0, ok=ok)
        if stop.is_set():
            return
        done(result)
