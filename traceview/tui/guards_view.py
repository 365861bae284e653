"""Guards of a compile; for a recompile, the guard that failed, and two compiles side by side."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Vertical
from textual.widgets import Static

from parsers.compile_ids import label as compile_label
from traceview.tui.code_view import CodeView
from traceview.tui.lazy_table import Column, LazyTable
from traceview.tui.model import (
    CompileKey,
    TraceModel,
    code_text,
    failed_guard_rows,
    failures_of,
    guards_of,
    occurrence_is,
)
from traceview.tui.navigation import Location
from traceview.tui.text import FAILED_MARK, plain, safe, short_path
from traceview.tui.view import CompileFocused, View

DIFFERS = "≠" if FAILED_MARK == "✗" else "!"


def guard_columns() -> list[Column]:
    return [
        Column("mark", "", 1),
        Column("kind", "kind", 14),
        Column("shown", "guard", min_width=24),  # the code, from where it differs when compared
        Column("where", "user source", 18, cut="left", optional=True),
    ]


def from_difference(a: str, b: str | None, before: int = 16) -> str:
    """`a` from a little before where it first differs from `b` ("…" marks the cut), so a
    long guard's difference (`size=[4, None, 256]` against `size=[None, None, 256]`) shows in
    a narrow column; `a` itself when they do not differ or differ early."""
    if b is None or a == b:
        return a
    d = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    if d <= before:
        return a
    # start at the argument that differs: its `name=` (size=[4, 3]), else after a comma
    names = [m.start() for m in re.finditer(r"[A-Za-z_]\w*=", a[:d])]
    comma = a.rfind(", ", 0, d)
    if names and d - names[-1] <= 48:
        start = names[-1]
    elif comma >= 0 and d - comma <= 48:
        start = comma + 2
    else:
        start = d - before
    return "…" + a[start:]


def with_marks(guards: pl.DataFrame, other: pl.DataFrame | None, failed: set[int]) -> pl.DataFrame:
    """Add `mark` (✗ failed, ≠ not in the other compile), `where` (user file:line) and
    `shown` (the guard's code; compared, from where it differs from its counterpart: the
    guard of the other compile of the same kind on the same source)."""
    if guards.height == 0:
        return guards.with_columns(pl.lit("").alias("mark"), pl.lit("").alias("where"), pl.lit("").alias("shown"))
    g = guards
    if other is not None and other.height:
        only = g.join(other.select("kind", "code").unique(), on=["kind", "code"], how="anti", nulls_equal=True)["i"]
        differs = pl.col("i").is_in(only.implode())
        # a guard not in the other compile, paired with the other's guard of the same kind on
        # the same source that is not in this one (the same guard, changed)
        theirs = other.join(g.select("kind", "code").unique(), on=["kind", "code"], how="anti", nulls_equal=True)
        pairs = theirs.filter(pl.col("guard_source").is_not_null()).unique(["kind", "guard_source"], keep="first", maintain_order=True)
        g = g.join(
            pairs.select("kind", "guard_source", pl.col("code").alias("_other")), on=["kind", "guard_source"], how="left",
            maintain_order="left",
        )
        g = g.with_columns(
            pl.when(differs)
            .then(pl.struct("code", "_other").map_elements(
                lambda r: from_difference(r["code"] or "", r["_other"]), return_dtype=pl.String
            ))
            .otherwise(pl.col("code"))
            .alias("shown")
        ).drop("_other")
    else:
        differs = pl.lit(False)
        g = g.with_columns(pl.col("code").alias("shown"))
    return g.with_columns(
        pl.when(pl.col("i").is_in(list(failed)))
        .then(pl.lit(FAILED_MARK))
        .when(differs)
        .then(pl.lit(DIFFERS))
        .otherwise(pl.lit(""))
        .alias("mark"),
        pl.when(pl.col("user_file").is_not_null())
        .then(
            pl.concat_str(
                pl.col("user_file").str.split("/").list.last(), pl.lit(":"), pl.col("user_line").cast(pl.String).fill_null("?")
            )
        )
        .otherwise(pl.lit(""))
        .alias("where"),
    )


def guard_count_text(logged: int, src: str | None, metrics: int | None) -> str:
    """How many guards the view lists, and what Dynamo's own count (compilation metrics'
    guard_count, shown in the compile's detail) says when it differs: the log lists the lines
    of the built guard tree, the metrics count `len(output.guards)`, the guards Dynamo
    recorded before building the tree (torch/_dynamo/convert_frame.py); neither is wrong."""
    text = f"{logged} guards logged" + (f" (from the {'trace' if src == 'trace' else 'text log'})" if src else "")
    if metrics is not None and metrics != logged:
        text += f"; Dynamo's metrics count {metrics} before building the guard tree"
    return text


def first_difference(a: str | None, b: str | None) -> int | None:
    """The first line where two texts differ (None when they are the same)."""
    if a is None or b is None or a == b:
        return None
    x, y = a.splitlines(), b.splitlines()
    for i, (p, q) in enumerate(zip(x, y)):
        if p != q:
            return i
    return min(len(x), len(y))


def _marked(row: dict[str, Any]) -> str | None:
    return "lazy-table--marked" if row.get("mark") == FAILED_MARK else None


def counterpart(row: dict[str, Any], other: pl.DataFrame) -> dict[str, Any] | None:
    """The guard of the other compile on the same source and of the same kind."""
    if other.height == 0 or not row.get("guard_source"):
        return None
    hit = other.filter((pl.col("kind") == row.get("kind")) & (pl.col("guard_source") == row["guard_source"])).head(1)
    return hit.to_dicts()[0] if hit.height else None


def guard_detail(row: dict[str, Any], name: str, other: dict[str, Any] | None = None, other_name: str = "") -> Text:
    """The whole guard (`name`: its compile, "[0/1]" or "[0/1] rank 2") and, when it differs,
    its counterpart in the other compile (`other_name`)."""
    t = Text(end="")
    head = f"{name} {row.get('kind') or '?'}"
    if row.get("mark") == FAILED_MARK:
        head += f"   {FAILED_MARK} this guard failed"
    elif row.get("mark") == DIFFERS:
        head += f"   {DIFFERS} not in the other compile"
    t.append_text(safe(head, "bold"))
    t.append("\n")
    t.append_text(safe(row.get("code") or ""))
    t.append("\n")
    if other is not None and row.get("mark") and other.get("code") != row.get("code"):
        t.append_text(safe(f"{other_name}: ", "bold"))
        t.append_text(safe(other.get("code") or ""))
        t.append("\n")
    if row.get("user_file"):
        t.append_text(
            safe(f"{row['user_file']}:{row.get('user_line')} in {row.get('user_function') or '?'}: {row.get('user_code') or ''}", "italic")
        )
        t.append("\n")
    t.append_text(safe(f"source {row.get('guard_source') or '-'}   record {short_path(row.get('file'), 60)}:{row.get('lineno')}", "italic"))
    return t


class GuardsView(View):
    """Guards of one compile, and optionally of the compile it is compared with."""

    view_id = "guards"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "toggle_compare", "Compare", id="guards.compare"),
        Binding("comma", "step(-1)", "Previous compile of frame", id="guards.previous_compile", show=False),
        Binding("full_stop", "step(1)", "Next compile of frame", id="guards.next_compile", show=False),
        Binding("m", "other_rank", "Other rank", id="guards.other_rank"),
        Binding("v", "toggle_graphs", "Guards/graphs", id="guards.graphs"),
    ]

    def __init__(self, model: TraceModel, **kwargs: object) -> None:
        super().__init__(model, **kwargs)
        self.key: CompileKey | None = None
        # which compile with the key's id, and with compare_id (after torch._dynamo.reset()
        # one id names several; None: the first)
        self.occurrence: int | None = None
        self.compare_occurrence: int | None = None
        self.compare_id: str | None = None
        self.compare_rank: int | None = None  # the compared compile's rank when another rank's
        self.comparing = False
        self.showing_graphs = False  # the panes show the two compiles' Dynamo graphs
        self._last_table = "guards-left"
        self._last_graph = "graph-left"
        self._pending: tuple | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="guards-title", classes="view-title")
        yield Static(id="guards-failed")
        with Container(classes="split", id="guards-split"):
            with Vertical(classes="pane-main"):
                yield Static(id="guards-left-label", classes="pane-label")
                yield LazyTable(guard_columns(), row_class=_marked, id="guards-left", empty="(no guards logged for this compile)")
                yield CodeView(id="graph-left")
            with Vertical(classes="pane-side", id="guards-right-pane"):
                yield Static(id="guards-right-label", classes="pane-label")
                yield LazyTable(guard_columns(), row_class=_marked, id="guards-right", empty="(no guards logged for this compile)")
                yield CodeView(id="graph-right")
        yield Static(id="guard-detail", classes="detail-strip")

    def on_mount(self) -> None:
        self.query_one("#graph-left").display = False
        self.query_one("#graph-right").display = False
        self._render_empty()

    def _render_empty(self) -> None:
        if self.key is None:
            self.query_one("#guards-title", Static).update(
                safe("Guards: pick a compile (frames view, or g to go to a compile id)", "bold")
            )
            self.query_one("#guards-right-pane").display = False

    # -- loading ----------------------------------------------------------------------
    def tables_ready(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.load(*pending[:3], compare=pending[3], compare_rank=pending[4], occurrence=pending[5])

    @property
    def other_rank(self) -> bool:
        """The comparison is with another rank's compile."""
        return self.key is not None and self.compare_rank is not None and self.compare_rank != self.key[0]

    def load(
        self,
        rank: int | None,
        compile_id: str,
        compare_id: str | None = None,
        *,
        compare: bool | None = None,
        compare_rank: int | None = None,
        occurrence: int | None = None,
    ) -> None:
        """Show the guards of `compile_id` on `rank` (its `occurrence`-th compile with that
        id, after torch._dynamo.reset(); None: the first), compared with `compare_id` (by
        default the compile whose guard failed, else the frame's previous compile; the one
        of that id in the same epoch) on the same rank, or on `compare_rank`."""
        self.occurrence = occurrence
        if not self.model.graph_tables_ready:
            self._pending = (rank, compile_id, compare_id, compare, compare_rank, occurrence)
            self.key = (rank, compile_id)
            self.query_one("#guards-title", Static).update(safe(f"Guards of [{compile_id}]: reading the guards…", "bold"))
            return
        if "guards" in self.model.missing:
            self.key = (rank, compile_id)
            self.query_one("#guards-title", Static).update(safe(f"guards not available: {self.model.missing['guards']}"))
            return
        self.key = (rank, compile_id)
        self.compare_rank = compare_rank if compare_rank != rank and compare_id is not None else None
        cross = self.compare_rank is not None
        fails = failures_of(self.model.trace, rank, compile_id, occurrence) if "recompiles" not in self.model.missing else pl.DataFrame()
        if compare_id is None and fails.height:
            compare_id = fails["failed_against"][0]
        if compare_id is None:
            ids = self.model.frames_of(compile_id)
            i = ids.index(compile_id) if compile_id in ids else -1
            compare_id = ids[i - 1] if i > 0 else None
        self.compare_id = compare_id
        self.comparing = bool(compare_id) if compare is None else (compare and bool(compare_id))
        row = (self.model.compile_row(rank, compile_id, occurrence) if occurrence else None) or self.model.compile_or_text_row(rank, compile_id) or {}
        # the compared compile is in this compile's epoch (frame ids restart at a reset)
        self.compare_occurrence = self.model.in_epoch(self.compare_rank if cross else rank, compare_id, row.get("epoch"))
        mine = guards_of(self.model.trace, rank, compile_id, occurrence)
        other = (
            guards_of(self.model.trace, self.compare_rank if cross else rank, compare_id, self.compare_occurrence)
            if compare_id else None
        )
        src = mine["source"][0] if mine.height and "source" in mine.columns else None
        title = Text(end="")
        title.append_text(safe(f"Guards of [{compile_label(compile_id, occurrence, row.get('attempts'))}] {row.get('function') or '?'}", "bold"))
        title.append_text(safe(f"  {guard_count_text(mine.height, src, row.get('guard_count'))}"))
        if rank is not None:
            title.append_text(safe(f"  rank {rank}"))
        if compare_id:
            title.append_text(safe(f"   d: {'hide' if self.comparing else 'compare with'} {self._compared_name()}", "italic"))
        self.query_one("#guards-title", Static).update(title)
        banner = Text(end="")
        if fails.height:
            banner.append_text(safe(f"{FAILED_MARK} recompiled: guards of earlier compiles failed", "bold"))
            for f in fails.iter_rows(named=True):
                banner.append("\n")
                banner.append_text(safe(f"  {f.get('failed_against') or '?'}: {f.get('guard') or ''}"))
        elif row.get("recompile_reason"):
            banner.append_text(safe(f"{FAILED_MARK} recompiled: {row['recompile_reason']}", "bold"))
        failed_banner = self.query_one("#guards-failed", Static)
        failed_banner.update(banner)
        failed_banner.display = bool(banner.plain)
        left_failed: set[int] = set()
        right_failed: set[int] = set()
        if fails.height and other is not None and not cross:  # the failed guards are this rank's
            right_failed = failed_guard_rows(other, fails, compare_id or "")
        left = with_marks(mine, other if self.comparing else None, left_failed)
        me = f"[{compile_label(compile_id, occurrence)}]" + (f" rank {rank}" if cross else "")
        self.query_one("#guards-left-label", Static).update(
            safe(f"{me} this compile" + (f"   {DIFFERS}: not in {self._compared_name()}" if self.comparing else ""))
        )
        self.query_one("#guards-left", LazyTable).set_frame(left)
        pane = self.query_one("#guards-right-pane")
        right_focused = self.screen.focused is self.query_one("#guards-right", LazyTable)
        pane.display = self.comparing
        if right_focused and not self.comparing:
            # the hidden pane held the focus (d, or , . to a compile with nothing to compare):
            # the table still shown takes it, else the view's keys stop working until Tab
            self.query_one("#guards-left", LazyTable).focus()
        if self.comparing and other is not None:
            right = with_marks(other, mine, right_failed)
            label = f"{self._compared_name()} compared" + (f"   {FAILED_MARK}: the guard that failed" if right_failed else "")
            if cross:
                label += f"   {DIFFERS}: not in {me}   m: next rank"
            self.query_one("#guards-right-label", Static).update(safe(label))
            table = self.query_one("#guards-right", LazyTable)
            first_failed = right.with_row_index("_n").filter(pl.col("mark") == FAILED_MARK)["_n"]
            table.set_frame(right, cursor=int(first_failed[0]) if first_failed.len() else 0)
        self._show_graphs()
        self.post_message(CompileFocused((rank, compile_id), occurrence))

    def _compared_name(self) -> str:
        return f"[{compile_label(self.compare_id, self.compare_occurrence)}]" + (f" rank {self.compare_rank}" if self.other_rank else "")

    # -- graphs side by side ----------------------------------------------------------
    def _graph_of(self, rank: int | None, compile_id: str | None, occurrence: int | None) -> str | None:
        """The Dynamo output graph of a compile (None when none was logged)."""
        if compile_id is None:
            return None
        code = self.model.code
        hit = code.filter(
            (pl.col("what") == "graph") & (pl.col("kind") == "dynamo") & (pl.col("compile_id") == compile_id)
            & (pl.col("rank").is_null() if rank is None else pl.col("rank") == rank) & occurrence_is(occurrence)
        )
        return code_text(self.model.trace, "graph", hit["key"][0]) if hit.height else None

    def _show_graphs(self) -> None:
        """In graph mode: the two compiles' Dynamo graphs in the panes, and where they differ."""
        shown = self.showing_graphs
        for side in ("left", "right"):
            self.query_one(f"#guards-{side}").display = not shown
            self.query_one(f"#graph-{side}").display = shown
        if not shown or self.key is None:
            return
        rank, cid = self.key
        mine = self._graph_of(rank, cid, self.occurrence)
        other = (
            self._graph_of(self.compare_rank if self.other_rank else rank, self.compare_id, self.compare_occurrence)
            if self.comparing else None
        )
        left = self.query_one("#graph-left", CodeView)
        left.set_text(mine if mine is not None else "(no Dynamo graph logged for this compile)", language="python")
        me = f"[{compile_label(cid, self.occurrence)}]" + (f" rank {rank}" if self.other_rank else "")
        self.query_one("#guards-left-label", Static).update(safe(f"{me} Dynamo graph   v: guards"))
        if not self.comparing:
            self.query_one("#guard-detail", Static).update(safe("the Dynamo graph of this compile (d compares it)", "italic"))
            return
        right = self.query_one("#graph-right", CodeView)
        right.set_text(other if other is not None else "(no Dynamo graph logged for this compile)", language="python")
        at = first_difference(mine, other)
        if mine is None or other is None:
            verdict = "no graph to compare"
        elif at is None:
            verdict = "the graphs are the same"
        else:
            verdict = f"the graphs differ from line {at + 1}"
            left.go_to_line(at, center=True)
            right.go_to_line(at, center=True)
        self.query_one("#guards-right-label", Static).update(safe(f"{self._compared_name()} Dynamo graph   {verdict}"))
        detail = Text(end="")
        detail.append_text(safe(verdict, "bold"))
        if at is not None and mine is not None and other is not None:
            a, b = mine.splitlines(), other.splitlines()
            detail.append("\n")
            detail.append_text(safe(f"{me}: {a[at].strip() if at < len(a) else '(ends)'}"))
            detail.append("\n")
            detail.append_text(safe(f"{self._compared_name()}: {b[at].strip() if at < len(b) else '(ends)'}"))
        self.query_one("#guard-detail", Static).update(detail)

    def action_toggle_graphs(self) -> None:
        if self.key is None:
            return
        self.showing_graphs = not self.showing_graphs
        self.load(*self.key, self.compare_id, compare=self.comparing, compare_rank=self.compare_rank, occurrence=self.occurrence)
        self.focus_main()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # m only where there are ranks to compare (not in the footer of a one-process trace)
        return len(self.model.ranks()) > 1 if action == "other_rank" else True

    def action_other_rank(self) -> None:
        """Compare with the same compile on the next rank (the same id, or the frame's last
        compile there)."""
        if self.key is None:
            return
        rank, cid = self.key
        if len(self.model.ranks()) < 2:
            self.app.notify("one rank only: nothing to compare across ranks", severity="warning")
            return
        target = self.model.on_other_rank(rank, cid, after=self.compare_rank if self.other_rank else None)
        if target is None:
            self.app.notify(plain(f"no other rank compiled the frame of [{cid}]"), severity="warning")
            return
        self.load(rank, cid, target[1], compare=True, compare_rank=target[0], occurrence=self.occurrence)
        self.focus_main()

    def on_lazy_table_highlighted(self, event: LazyTable.Highlighted) -> None:
        table = event.table
        if table.id not in ("guards-left", "guards-right"):
            return
        self._last_table = table.id or "guards-left"
        row = table.row(event.row)
        if row is None or self.key is None:
            return
        self._show_detail(table, row)

    def _show_detail(self, table: LazyTable, row: dict[str, Any]) -> None:
        assert self.key is not None
        if self.showing_graphs:  # the strip says where the graphs differ
            return
        left = table.id == "guards-left"
        me = f"[{self.key[1]}]" + (f" rank {self.key[0]}" if self.other_rank else "")
        name, other_name = (me, self._compared_name()) if left else (self._compared_name(), me)
        other = None
        if self.comparing:
            other = counterpart(row, self.query_one("#guards-right" if left else "#guards-left", LazyTable).frame)
        self.query_one("#guard-detail", Static).update(guard_detail(row, name, other, other_name))

    def on_descendant_focus(self, event: Any) -> None:
        w = event.widget
        if isinstance(w, CodeView) and w.id in ("graph-left", "graph-right"):
            self._last_graph = w.id
        if isinstance(w, LazyTable) and w.id in ("guards-left", "guards-right"):
            self._last_table = w.id
            row = w.current
            if row is not None and self.key is not None:
                self._show_detail(w, row)

    def action_toggle_compare(self) -> None:
        if self.key is None:
            return
        if not self.compare_id:
            self.app.notify("no earlier compile of this frame to compare with", severity="warning")
            return
        self.load(*self.key, self.compare_id, compare=not self.comparing, compare_rank=self.compare_rank, occurrence=self.occurrence)

    def action_step(self, delta: int) -> None:
        if self.key is None:
            return
        ids = self.model.frames_of(self.key[1])
        if self.key[1] not in ids:
            return
        i = ids.index(self.key[1]) + delta
        if 0 <= i < len(ids):
            # the frame's compiles in this compile's epoch (its ids restart at a reset)
            row = self.model.compile_row(self.key[0], self.key[1], self.occurrence) or {}
            self.load(self.key[0], ids[i], occurrence=self.model.in_epoch(self.key[0], ids[i], row.get("epoch")))
        else:
            which = "first" if delta < 0 else "last"
            self.app.notify(plain(f"[{self.key[1]}] is the {which} compile of this frame"))

    # -- hooks ------------------------------------------------------------------------
    def show(self, loc: Location) -> None:
        if loc.compile_id is not None:
            compare = True if loc.compare_id else None
            self.load(loc.rank, loc.compile_id, loc.compare_id, compare=compare, compare_rank=loc.compare_rank, occurrence=loc.occurrence)

    def location(self) -> Location:
        if self.key is None:
            return Location("guards")
        return Location(
            "guards", rank=self.key[0], compile_id=self.key[1], occurrence=self.occurrence,
            compare_id=self.compare_id if self.comparing else None,
            compare_rank=self.compare_rank if self.comparing else None,
        )

    def _table(self) -> LazyTable:
        return self.query_one(f"#{self._last_table}", LazyTable)

    def _graph_view(self) -> CodeView:
        """In graph mode, the graph pane that had the focus last."""
        return self.query_one(f"#{self._last_graph}", CodeView)

    def search(self, query: str, forward: bool = True) -> bool:
        if self.showing_graphs:
            view = self._graph_view()
            return view.find(query, forward=forward) is not None
        t = self._table()
        i = t.find(query, start=t.cursor + (1 if forward else -1), forward=forward, keys=["kind", "code", "guard_source", "user_code", "where"])
        if i is None:
            return False
        t.move_to(i)
        return True

    def copy_text(self) -> str | None:
        if self.showing_graphs:
            return self._graph_view().text or None
        row = self._table().current
        return row.get("code") if row else None

    def record_ref(self) -> tuple[str, int] | None:
        row = self._table().current
        return (row["file"], int(row["lineno"])) if row and row.get("file") and row.get("lineno") else None

    def compile_ref(self) -> CompileKey | None:
        return self.key

    def compile_occurrence(self) -> int | None:
        return self.occurrence

    def focus_main(self) -> None:
        kind = "graph" if self.showing_graphs else "guards"
        self.query_one(f"#{kind}-right" if self.comparing else f"#{kind}-left").focus()
