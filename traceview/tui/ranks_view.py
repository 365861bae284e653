"""Ranks: ranks × compiled graphs, each rank's collectives side by side (issue 32).

One row per compiled graph with collectives on some rank (compile id and which Inductor graph
of it: the forward, the backward), one column per rank: how many collectives of which ops
that rank's graph issues ("2 all_reduce"; "-" none; "?" unknown: the graph came from the FX
graph cache, torch logs no schedule then). A rank whose schedule differs from the others'
(traceview.analyze.collectives: the report's `collectives`) is marked with a character as
well as colour. With many ranks, one row per group of ranks with an identical schedule. The
pane below shows the selected graph's schedules, one column per group of ranks, the first
position where they differ highlighted; Enter opens the rank to look at in Frames.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from parsers.compile_ids import label as compile_id_label
from traceview.analyze.findings import ranks_text
from traceview.tui.lazy_table import Column, LazyTable
from traceview.tui.model import CompileKey, TraceModel
from traceview.tui.navigation import Location
from traceview.tui.text import FAILED_MARK, fit, safe
from traceview.tui.view import CompileFocused, Navigate, View

UNICODE = FAILED_MARK == "✗"
MISMATCH = "≠" if UNICODE else "!"  # a cell whose rank's schedule differs (a glyph: not colour alone)
NOT_COMPILED = "not compiled"
MAX_RANK_COLUMNS = 8  # more ranks: one row per group of ranks with an identical schedule


def _tensor(c: dict[str, Any]) -> str:
    shape = c.get("shape")
    return f"{c.get('dtype') or '?'}{list(shape) if shape is not None else '[?]'}"


def ops_text(items: list[dict[str, Any]]) -> str:
    """"2 all_reduce", "1 all_reduce, 1 all_gather_into_tensor"; "-" for none."""
    if not items:
        return "-"
    counts = Counter(c["op"] for c in items)
    return ", ".join(f"{n} {op}" for op, n in counts.items())


def _graph_label(cid: str, gi: int, occurrence: int | None) -> str:
    return f"[{compile_id_label(cid, occurrence)}]" + (" bwd" if gi else "")


class RankGraph:
    """One compiled graph with collectives: each rank's schedule or why it is not known."""

    def __init__(self, g: dict[str, Any], ranks: list[int], coll: dict[str, Any], occurrence: int | None) -> None:
        self.compile_id: str = g["compile_id"]
        self.graph_index: int = g["graph_index"]
        self.function: str = g.get("function") or "?"
        self.occurrence = occurrence
        self.groups: list[tuple[list[int], list[dict[str, Any]]]] = [(s["ranks"], s["collectives"]) for s in g.get("schedules") or []]
        mine = [u for u in coll.get("unknown") or [] if u["compile_id"] == self.compile_id and u["graph_index"] == self.graph_index]
        self.unknown: dict[int, str] = {u["rank"]: u["why"] for u in mine}
        self.not_compiled: list[int] = list(g.get("not_compiled_on") or [])
        self.mismatches = [m for m in coll.get("mismatches") or []
                           if m["compile_id"] == self.compile_id and m["graph_index"] == self.graph_index]
        self.differ: set[int] = {r for m in self.mismatches for r in m["ranks"]}
        self.ranks = ranks

    @property
    def label(self) -> str:
        return _graph_label(self.compile_id, self.graph_index, self.occurrence)

    def schedule_of(self, rank: int) -> list[dict[str, Any]] | None:
        return next((s for rs, s in self.groups if rank in rs), None)

    def cell(self, rank: int) -> str:
        if rank in self.unknown:
            return " ?"
        if rank in self.not_compiled:
            return " " + NOT_COMPILED
        s = self.schedule_of(rank)
        if s is None:
            return " ?"
        return (MISMATCH if rank in self.differ else " ") + ops_text(s)

    def open_rank(self) -> int:
        """The rank to look at first: one whose schedule differs, else the lowest that compiled."""
        if self.differ:
            return min(self.differ)
        compiled = [r for r in self.ranks if r not in self.not_compiled]
        return min(compiled or self.ranks)

    def first_difference(self) -> int | None:
        """The first position (0-based) where the known schedules differ; None when they agree."""
        seqs = [s for _, s in self.groups]
        if len(seqs) < 2:
            return None
        longest = max(len(s) for s in seqs)
        for i in range(longest):
            column = [s[i] if i < len(s) else None for s in seqs]
            if any(c != column[0] for c in column):
                return i
        return None


def rank_graphs(model: TraceModel) -> list[RankGraph]:
    coll = model.report.get("collectives") or {}
    ranks = model.ranks()
    occ: dict[str, int] = {}
    try:
        c = model.trace.collectives
        if c.height and "occurrence" in c.columns:
            for cid, o in c.group_by("compile_id").agg(pl.col("occurrence").max()).iter_rows():
                if o is not None and o > 1:
                    occ[cid] = int(o)
    except Exception:  # the table is only for the occurrence label
        pass
    return [RankGraph(g, ranks, coll, occ.get(g["compile_id"])) for g in coll.get("graphs") or []]


class RanksView(View):
    """Ranks × compiled graphs with each rank's collectives; the schedules side by side below."""

    view_id = "ranks"
    BINDINGS: ClassVar[list[BindingType]] = []

    def __init__(self, model: TraceModel, **kwargs: object) -> None:
        super().__init__(model, **kwargs)
        self.graphs: list[RankGraph] = []
        self.current: RankGraph | None = None
        self.current_rank: int | None = None
        self.grouped = False

    def compose(self) -> ComposeResult:
        yield Static(id="ranks-title", classes="view-title")
        yield LazyTable([], id="ranks-list", row_class=_differs, empty="(no collectives to compare)")
        with VerticalScroll(id="ranks-detail-pane"):
            yield Static(id="ranks-detail")

    def on_mount(self) -> None:
        self._apply()

    def _apply(self) -> None:
        ranks = self.model.ranks()
        title = self.query_one("#ranks-title", Static)
        table = self.query_one("#ranks-list", LazyTable)
        self.graphs = rank_graphs(self.model) if len(ranks) > 1 else []
        if len(ranks) < 2:
            title.update(safe("Ranks: " + ("a single-rank trace" if ranks else "a single process without ranks")
                              + ": no collective schedules to compare", "bold"))
            table.display = False
            self.query_one("#ranks-detail-pane").display = False
            return
        if not self.graphs:
            title.update(safe(f"Ranks: {len(ranks)} ranks, and no compiled graph issues collectives: nothing to compare", "bold"))
            table.display = False
            self.query_one("#ranks-detail-pane").display = False
            return
        differ = sum(1 for g in self.graphs if g.differ)
        t = Text(end="")
        t.append_text(safe(f"Ranks: {len(ranks)} ranks, {len(self.graphs)} compiled graph{'s' if len(self.graphs) != 1 else ''} "
                           f"with collectives", "bold"))
        if differ:
            t.append_text(safe(f", {differ} with ranks out of step", "bold"))
        t.append_text(safe(f"   {MISMATCH} differs · - none · ? unknown (cache hit) · enter: the rank in Frames", "italic"))
        title.update(t)
        self.grouped = len(ranks) > MAX_RANK_COLUMNS
        rows: list[dict[str, Any]] = []
        for n, g in enumerate(self.graphs):
            base = {"_graph": n, "graph": g.label, "function": g.function, "_differs": bool(g.differ)}
            if self.grouped:
                sets: list[tuple[list[int], str]] = [(rs, (MISMATCH if set(rs) & g.differ else " ") + ops_text(s)) for rs, s in g.groups]
                unknown = sorted(g.unknown)
                if unknown:
                    sets.append((unknown, " ?"))
                if g.not_compiled:
                    sets.append((g.not_compiled, " " + NOT_COMPILED))
                for rs, cell in sets:
                    rows.append({**base, "ranks": ranks_text(rs).strip(), "collectives": cell, "_rank": min(rs)})
            else:
                rows.append({**base, **{f"r{r}": g.cell(r) for r in ranks}, "_rank": g.open_rank()})
        if self.grouped:
            columns = [Column("graph", "graph", 10), Column("ranks", "ranks", 16), Column("collectives", "collectives", min_width=12),
                       Column("function", "function", 14, optional=True)]
        else:
            columns = [Column("graph", "graph", 10)]
            for r in ranks:
                w = max([len(f"rank {r}")] + [len(row[f"r{r}"]) for row in rows])
                columns.append(Column(f"r{r}", f"rank {r}", min(w, 26)))
            columns.append(Column("function", "function", min_width=8, optional=True))
        table.columns = columns
        frame = pl.DataFrame(rows, infer_schema_length=None)
        first = next((i for i, row in enumerate(rows) if row["_differs"]), 0)
        table.set_frame(frame, cursor=first)

    # -- selection --------------------------------------------------------------------
    def on_lazy_table_highlighted(self, event: LazyTable.Highlighted) -> None:
        if event.table.id != "ranks-list":
            return
        row = event.table.row(event.row)
        if row is None:
            return
        self.current = self.graphs[row["_graph"]]
        self.current_rank = row["_rank"]
        self.query_one("#ranks-detail", Static).update(self._detail(self.current))
        self.post_message(CompileFocused((self.current_rank, self.current.compile_id), self.current.occurrence))

    def on_lazy_table_selected(self, event: LazyTable.Selected) -> None:
        if event.table.id != "ranks-list":
            return
        row = event.table.row(event.row)
        if row is None:
            return
        g = self.graphs[row["_graph"]]
        self.post_message(Navigate(Location("frames", rank=row["_rank"], compile_id=g.compile_id, occurrence=g.occurrence)))

    def _detail(self, g: RankGraph) -> Text:
        t = Text(end="")
        part = " (backward)" if g.graph_index else ""
        t.append_text(safe(f"{g.label} {g.function}{part}: each group of ranks' collectives, in order", "bold"))
        t.append("\n")
        cols = [(ranks_text(rs).strip(), s) for rs, s in g.groups]
        n = g.first_difference()
        longest = max((len(s) for _, s in cols), default=0)
        width = 30
        head = Text(end="")
        head.append_text(safe(" pos ", "bold"))
        for label, _ in cols:
            head.append_text(safe(fit(label, width) + " ", "bold"))
        t.append_text(head)
        for i in range(longest):
            cells = []
            for _, s in cols:
                if i < len(s):
                    cells.append(f"{s[i]['op']} {_tensor(s[i])}")
                else:
                    cells.append("(none: no partner)" if i == n else "(none)")
            mark = MISMATCH if i == n else " "
            t.append("\n")
            t.append_text(safe(f"{mark}{i + 1:>3} " + " ".join(fit(c, width) for c in cells), "bold reverse" if i == n else ""))
        if not longest:
            t.append("\n")
            t.append_text(safe("no collectives on the ranks that compiled it"))
        for r, why in sorted(g.unknown.items()):
            t.append("\n")
            t.append_text(safe(f"rank {r}: unknown ({why})", "italic"))
        if g.not_compiled:
            t.append("\n")
            t.append_text(safe(f"{ranks_text(g.not_compiled).strip()}: did not compile {g.label}", "italic"))
        for m in g.mismatches:
            t.append("\n")
            t.append_text(safe(m["message"], "bold"))
            t.append("\n")
            t.append_text(safe(f"next: {m['next_step']}"))
        t.append("\n")
        t.append_text(safe(f"enter: rank {self.current_rank}'s {g.label} in Frames", "italic"))
        return t

    # -- hooks ------------------------------------------------------------------------
    def show(self, loc: Location) -> None:
        if loc.compile_id is None or not self.graphs:
            return
        table = self.query_one("#ranks-list", LazyTable)
        for i in range(table.row_count):
            row = table.row(i) or {}
            g = self.graphs[row["_graph"]]
            if g.compile_id == loc.compile_id and (loc.rank is None or not self.grouped or loc.rank == row["_rank"]):
                table.move_to(i)
                return

    def location(self) -> Location:
        if self.current is None:
            return Location("ranks")
        return Location("ranks", rank=self.current_rank, compile_id=self.current.compile_id, occurrence=self.current.occurrence)

    def compile_ref(self) -> CompileKey | None:
        return (self.current_rank, self.current.compile_id) if self.current else None

    def compile_occurrence(self) -> int | None:
        return self.current.occurrence if self.current else None

    def search(self, query: str, forward: bool = True) -> bool:
        t = self.query_one("#ranks-list", LazyTable)
        i = t.find(query, start=t.cursor + (1 if forward else -1), forward=forward)
        if i is None:
            return False
        t.move_to(i)
        return True

    def copy_text(self) -> str | None:
        return self._detail(self.current).plain.rsplit("\n", 1)[0] if self.current else None

    def focus_main(self) -> None:
        self.query_one("#ranks-list", LazyTable).focus()


def _differs(row: dict[str, Any]) -> str | None:
    return "lazy-table--marked" if row.get("_differs") else None
