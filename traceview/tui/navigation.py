"""Where the user is (`Location`) and where they have been (`History`, back/forward)."""

from __future__ import annotations

from dataclasses import dataclass, replace

VIEWS = ("findings", "frames", "guards", "code", "records", "timeline", "ranks")
VIEW_TITLES = {
    "findings": "Findings",
    "frames": "Frames",
    "guards": "Guards",
    "code": "Graphs & kernels",
    "records": "Raw records",
    "timeline": "Timeline",
    "ranks": "Ranks",
}


@dataclass(frozen=True)
class Location:
    """A place in the UI: a view and what it shows. Unset fields mean "as it is"."""

    view: str
    rank: int | None = None
    compile_id: str | None = None
    occurrence: int | None = None  # which compile with that id (after torch._dynamo.reset()); None: the first
    compare_id: str | None = None  # guards: the compile to compare with
    compare_rank: int | None = None  # guards: its rank, when another rank's (else the same rank)
    file: str | None = None  # records: the record holding file:lineno
    lineno: int | None = None
    key: str | None = None  # code: graph_id / kernel_id; findings: index
    line: int | None = None  # code: cursor line

    def but(self, **kw: object) -> Location:
        return replace(self, **kw)  # type: ignore[arg-type]


class History:
    """Back/forward stack of locations (like a browser)."""

    def __init__(self, limit: int = 200) -> None:
        self._items: list[Location] = []
        self._index = -1
        self.limit = limit

    @property
    def current(self) -> Location | None:
        return self._items[self._index] if 0 <= self._index < len(self._items) else None

    def push(self, loc: Location) -> None:
        if self.current == loc:
            return
        del self._items[self._index + 1 :]
        self._items.append(loc)
        if len(self._items) > self.limit:
            del self._items[0]
        self._index = len(self._items) - 1

    def replace(self, loc: Location) -> None:
        if self.current is None:
            self.push(loc)
        else:
            self._items[self._index] = loc

    def back(self) -> Location | None:
        if self._index > 0:
            self._index -= 1
            return self.current
        return None

    def forward(self) -> Location | None:
        if self._index + 1 < len(self._items):
            self._index += 1
            return self.current
        return None

    @property
    def can_back(self) -> bool:
        return self._index > 0

    @property
    def can_forward(self) -> bool:
        return self._index + 1 < len(self._items)
