"""Graphs and kernels: FX graphs (trace.graphs) and generated kernels (trace.kernels), with the
origin of a backward node or kernel (seq_nr link -> forward node -> user source line)."""

from __future__ import annotations

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
from traceview.tui.model import CompileKey, TraceModel, code_text, event_row, occurrence_is
from traceview.tui.navigation import Location
from traceview.tui.text import safe
from traceview.tui.view import CompileFocused, Navigate, View

ORIGIN_HINT = "o: where does this come from (kernel or backward node -> forward node -> your source line)"


def code_columns() -> list[Column]:
    return [
        Column("label", "kind", 13),
        Column("name", "name", min_width=15, cut="middle"),  # kernel names differ at both ends
        Column("part", "part", 4, fmt=_part_short, optional=True),
        Column("shown_id", "id", 5, optional=True),
        Column("lines", "lines", 5, optional=True),
    ]


def _part_short(part: Any) -> str:
    """forward/backward/inference as fwd/bwd/inf (the AOT graph a graph, kernel or file is of)."""
    return {"forward": "fwd", "backward": "bwd", "inference": "inf"}.get(part or "", "")


def chain_text(ch: dict[str, Any]) -> str:
    """One origin chain as a line: start -> nodes -> seq_nr -> forward nodes -> user line."""
    parts = []
    if ch.get("kernel"):
        parts.append(f"kernel {ch['kernel']}")
    nodes = ch.get("backward_nodes") or ch.get("nodes") or []
    if nodes:
        parts.append(f"{ch.get('node_graph') or 'graph'} nodes {', '.join(nodes[:6])}{' …' if len(nodes) > 6 else ''}")
    if ch.get("seq_nrs"):
        parts.append("seq_nr " + ", ".join(str(s) for s in ch["seq_nrs"][:6]))
    if ch.get("forward_nodes"):
        parts.append("forward " + ", ".join(ch["forward_nodes"][:6]))
    if ch.get("user_file"):
        base = ch["user_file"].rsplit("/", 1)[-1]
        where = f"{base}:{ch.get('user_line')} in {ch.get('user_function') or '?'}"
        if ch.get("user_code"):
            where += f": {ch['user_code']}"
        parts.append(where)
    else:
        parts.append("no user source line found")
    via = ch.get("via") or ch.get("link")
    if via is None and ch.get("kernel"):
        return " -> ".join(parts) + "   (no match: nothing recorded ties this kernel to graph nodes)"
    sure = {"exact": ", exact", "name_match": ", NOT EXACT: name match"}.get(ch.get("confidence") or "", "")
    return " -> ".join(parts) + (f"   (via {via}{sure})" if via else "")


class CodeBrowser(View):
    """A list of graphs and kernels and the selected one's code."""

    view_id = "code"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "origin", "Origin", id="code.origin"),
        Binding("x", "clear_filters", "Clear filter", id="code.clear_filters", show=False),
        Binding("tab", "switch_pane", "List/code", id="code.switch_pane", show=False),
    ]

    def __init__(self, model: TraceModel, **kwargs: object) -> None:
        super().__init__(model, **kwargs)
        self.compile_filter: CompileKey | None = None
        self.filter_occurrence: int | None = None  # which compile with the filter's id (None: every one)
        self.item: dict[str, Any] | None = None
        self._code_focused = False
        self._chains: list[dict[str, Any]] = []
        self._chain_i = 0
        self._origin_of: str | None = None
        self._pending: Location | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="code-title", classes="view-title")
        with Container(classes="split"):
            yield LazyTable(code_columns(), id="code-list", classes="pane-main w1", empty="(no graphs or kernels logged)")
            with Vertical(classes="pane-side w1", id="code-pane"):
                yield Static(id="code-label", classes="pane-label")
                yield CodeView(id="code-text")
        yield Static(safe(ORIGIN_HINT, "italic"), id="origin", classes="detail-strip")

    def on_mount(self) -> None:
        if self.model.graph_tables_ready:
            self._apply()
        else:
            self.query_one("#code-title", Static).update(safe("Graphs & kernels: reading them…", "bold"))

    def tables_ready(self) -> None:
        self._apply()
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.show(pending)

    # -- list -------------------------------------------------------------------------
    def _frame(self) -> pl.DataFrame:
        df = self.model.code
        if self.compile_filter is not None:
            rank, cid = self.compile_filter
            df = df.filter(
                (pl.col("rank").is_null() if rank is None else pl.col("rank") == rank) & (pl.col("compile_id") == cid)
                & occurrence_is(self.filter_occurrence)
            )
        return df

    def _apply(self, key: str | None = None) -> None:
        df = self._frame()
        cursor = 0
        if key is not None:
            hit = df.with_row_index("_n").filter(pl.col("key") == key)["_n"]
            cursor = int(hit[0]) if hit.len() else 0
        title = Text(end="")
        ng = df.filter(pl.col("what") == "graph").height
        nk = df.filter(pl.col("what") == "kernel").height
        nf = df.height - ng - nk
        files = f", {nf} Inductor files (output code, fx_graph_runnable)" if nf else ""
        title.append_text(safe(f"Graphs & kernels: {ng} graphs, {nk} kernels{files}", "bold"))
        if self.compile_filter is not None:
            title.append_text(safe(f"   filter: compile [{compile_label(self.compile_filter[1], self.filter_occurrence)}]" + (f" rank {self.compile_filter[0]}" if self.compile_filter[0] is not None else "")))
            title.append_text(safe("  (x clears)", "italic"))
        for name in ("graphs", "kernels"):
            if name in self.model.missing:
                title.append_text(safe(f"   {name} not available", "italic"))
        self.query_one("#code-title", Static).update(title)
        self.query_one("#code-list", LazyTable).set_frame(df, cursor=cursor)
        if df.height == 0:
            self.item = None
            self.query_one("#code-label", Static).update(safe("nothing selected"))
            self.query_one("#code-text", CodeView).set_text("")

    def on_lazy_table_highlighted(self, event: LazyTable.Highlighted) -> None:
        if event.table.id != "code-list":
            return
        row = event.table.row(event.row)
        if row is not None and (self.item is None or row["key"] != self.item.get("key")):
            self._open(row)

    def on_lazy_table_selected(self, event: LazyTable.Selected) -> None:
        if event.table.id == "code-list":
            self.query_one("#code-text", CodeView).focus()

    def _open(self, row: dict[str, Any], line: int = 0) -> None:
        self.item = row
        text = code_text(self.model.trace, row["what"], row["key"])
        label = Text(end="")
        label.append_text(safe(f"{row['what']} {row.get('name') or '?'}", "bold"))
        label.append_text(safe(f"  {row.get('kind') or ''}  [{compile_label(row.get('compile_id'), row.get('occurrence'))}] {row.get('graph') or ''}  from {row.get('src')}  {row.get('lines')} lines"))
        self.query_one("#code-label", Static).update(label)
        lang = "cpp" if row["what"] == "kernel" and (row.get("kind") or "").startswith("cpp") else "python"
        self.query_one("#code-text", CodeView).set_text(text, language=lang, line=line)
        if self._origin_of is not None and self._origin_of != row["key"] and not self._chains_lead_to(row["key"]):
            self._chains = []
            self._origin_of = None
            self.query_one("#origin", Static).update(safe(ORIGIN_HINT, "italic"))
        if row.get("compile_id"):
            self.post_message(CompileFocused((row.get("rank"), row["compile_id"]), row.get("occurrence")))

    def _chains_lead_to(self, key: str) -> bool:
        return any(ch.get("_forward_graph") == key for ch in self._chains)

    def on_descendant_focus(self, event: Any) -> None:
        self._code_focused = isinstance(event.widget, CodeView)

    def action_switch_pane(self) -> None:
        if self._code_focused:
            self.query_one("#code-list", LazyTable).focus()
        else:
            self.query_one("#code-text", CodeView).focus()

    def action_clear_filters(self) -> None:
        self.clear_filters()

    # -- origin -----------------------------------------------------------------------
    def action_origin(self) -> None:
        """Follow the current kernel (or the backward node on the cursor line) to its forward
        node and user source line; pressing o again follows the next chain."""
        if self.item is None:
            return
        if self._chains and (self._origin_of == self.item["key"] or self._chains_lead_to(self.item["key"])):
            self._chain_i = (self._chain_i + 1) % len(self._chains)
            self._follow()
            return
        try:
            chains = self._compute_chains()
        except Exception as exc:  # the origin analyzer is another module; report, don't crash
            self.query_one("#origin", Static).update(safe(f"origin not available: {type(exc).__name__}: {exc}"))
            return
        if chains is None:
            return
        if not chains:
            self.query_one("#origin", Static).update(safe("no origin found for this item"))
            return
        self._chains = chains
        self._chain_i = 0
        self._origin_of = self.item["key"]
        self._follow()

    def _compute_chains(self) -> list[dict[str, Any]] | None:
        from traceview.analyze.origin import origin_table

        item = self.item
        assert item is not None
        trace = self.model.trace
        if item["what"] == "output":
            self.query_one("#origin", Static).update(safe("o follows a kernel or a graph node; this is a whole Inductor file"))
            return None
        if item["what"] == "kernel":
            df = origin_table(trace, kernel=item["key"])
        else:
            view = self.query_one("#code-text", CodeView)
            nodes = trace.graph_nodes.filter((pl.col("graph_id") == item["key"]) & (pl.col("line") == view.cursor + 1))
            if nodes.height == 0:
                self.query_one("#origin", Static).update(safe("put the cursor on a node's line (a graph node definition) and press o"))
                return None
            node = nodes["node"][0]
            df = origin_table(trace, node=node, compile_id=item.get("compile_id"), rank=item.get("rank"))
            if "source" in df.columns and item.get("src"):
                same = df.filter(pl.col("source") == item["src"])
                df = same if same.height else df
        chains = df.to_dicts()
        for ch in chains:
            ch["_forward_graph"], ch["_forward_line"] = self._forward_target(ch)
        return chains

    def _forward_target(self, ch: dict[str, Any]) -> tuple[str | None, int | None]:
        fw = ch.get("forward_nodes") or []
        if not fw:
            return None, None
        gn = self.model.trace.graph_nodes
        rank = ch.get("rank")
        cond = (
            (pl.col("rank").is_null() if rank is None else pl.col("rank") == rank)
            & (pl.col("compile_id") == ch.get("compile_id"))
            & pl.col("node").is_in(fw)
        )
        if ch.get("source"):
            cond = cond & (pl.col("source") == ch["source"])
        hits = gn.filter(cond)
        for kind in ("aot_forward", "aot_inference", "aot_joint", "post_grad", "dynamo"):
            h = hits.filter(pl.col("graph_kind") == kind).sort("line")
            if h.height:
                return h["graph_id"][0], int(h["line"][0]) if h["line"][0] is not None else None
        return None, None

    def _follow(self) -> None:
        ch = self._chains[self._chain_i]
        t = Text(end="")
        n = len(self._chains)
        t.append_text(safe(f"origin {self._chain_i + 1}/{n}" + ("  (o: next)" if n > 1 else "") + ": ", "bold"))
        t.append_text(safe(chain_text(ch), "bold"))
        for i, c in enumerate(self._chains):
            if i == self._chain_i:
                continue
            t.append("\n")
            where = f"{(c.get('user_file') or '?').rsplit('/', 1)[-1]}:{c.get('user_line')}" if c.get("user_file") else "no source line"
            code = f": {c['user_code']}" if c.get("user_code") else ""
            t.append_text(safe(f"  {i + 1}/{n} {where} in {c.get('user_function') or '?'}{code}"))
        self.query_one("#origin", Static).update(t)
        graph, line = ch.get("_forward_graph"), ch.get("_forward_line")
        if graph is not None:
            # the list keeps the focus (Down walks it on from the forward graph); the code pane
            # shows the forward node's line
            self.post_message(Navigate(Location("code", key=graph, line=(line or 1) - 1)))

    # -- hooks ------------------------------------------------------------------------
    def show(self, loc: Location) -> None:
        if not self.model.graph_tables_ready:
            self._pending = loc
            if loc.compile_id is not None:
                self.compile_filter, self.filter_occurrence = (loc.rank, loc.compile_id), loc.occurrence
            return
        if loc.key is not None:
            if self.compile_filter is not None and self._frame().filter(pl.col("key") == loc.key).height == 0:
                self.compile_filter = None
            self._apply(key=loc.key)
            row = self.query_one("#code-list", LazyTable).current
            if row is not None and row["key"] == loc.key:
                if self.item is None or self.item["key"] != loc.key:
                    self._open(row, line=loc.line or 0)
                else:
                    self.query_one("#code-text", CodeView).go_to_line(loc.line or 0, center=True)
                if loc.line is not None:
                    self.query_one("#code-text", CodeView).go_to_line(loc.line, center=True)
        elif loc.compile_id is not None:
            self.compile_filter, self.filter_occurrence = (loc.rank, loc.compile_id), loc.occurrence
            self._apply()

    def location(self) -> Location:
        if self.item is None:
            return Location("code")
        return Location("code", key=self.item["key"], line=self.query_one("#code-text", CodeView).cursor)

    def search(self, query: str, forward: bool = True) -> bool:
        if self._code_focused:
            return self.query_one("#code-text", CodeView).find(query, forward=forward) is not None
        t = self.query_one("#code-list", LazyTable)
        i = t.find(query, start=t.cursor + (1 if forward else -1), forward=forward, keys=["what", "kind", "name", "graph", "compile_id"])
        if i is None:
            return False
        t.move_to(i)
        return True

    def copy_text(self) -> str | None:
        if self.item is None:
            return None
        view = self.query_one("#code-text", CodeView)
        return view.text

    def record_ref(self) -> tuple[str, int] | None:
        if self.item is None:
            return None
        if self.item["what"] == "output" and self.item["key"].startswith("record#"):  # a debug folder's file
            rec = self.model.trace.log_records.slice(int(self.item["key"].removeprefix("record#")), 1)
            return (rec["file"][0], int(rec["lineno"][0])) if rec.height else None
        if self.item["what"] == "output":  # key: the row of the trace's events
            ev = self.model.trace.index_events().slice(event_row(self.item["key"]), 1)
            return (ev["file"][0], int(ev["lineno"][0])) if ev.height else None
        if self.item["what"] == "graph":
            df = self.model.trace.graphs.filter(pl.col("graph_id") == self.item["key"])
        else:
            df = self.model.trace.kernels.filter(pl.col("kernel_id") == self.item["key"])
        if df.height == 0:
            return None
        return (df["file"][0], int(df["lineno"][0]))

    def compile_ref(self) -> CompileKey | None:
        if self.item is None or not self.item.get("compile_id"):
            return None
        return (self.item.get("rank"), self.item["compile_id"])

    def compile_occurrence(self) -> int | None:
        return self.item.get("occurrence") if self.item is not None else None

    def filters(self) -> object:
        return (self.compile_filter, self.filter_occurrence) if self.compile_filter is not None else None

    def set_filters(self, filters: object) -> None:
        if isinstance(filters, tuple):
            self.compile_filter, self.filter_occurrence = filters
            if self.model.graph_tables_ready:
                self._apply()

    def clear_filters(self) -> bool:
        if self.compile_filter is None:
            return False
        key = self.item["key"] if self.item else None
        self.compile_filter = None
        self._apply(key=key)
        return True

    def focus_main(self) -> None:
        """Focus the pane that had focus last (the list at first)."""
        if self._code_focused:
            self.query_one("#code-text", CodeView).focus()
        else:
            self.query_one("#code-list", LazyTable).focus()
