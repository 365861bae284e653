"""Frames and compiles: rank -> code object -> compile ids, and the selected compile."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, VerticalScroll
from textual.strip import Strip
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from parsers.code_location import whose
from parsers.compile_ids import compile_name as frameless_compile_name
from parsers.compile_ids import frame_group
from parsers.compile_ids import label as compile_id_label
from traceview.analyze.accounts.compiles import OPEN
from traceview.analyze.compile_time import compile_phases
from traceview.analyze.finding import findings_of
from traceview.analyze.findings import after_resets, compile_outcome
from traceview.analyze.wording import unfinished_text
from traceview.printable import one_line
from traceview.tui.cursor import marked_line
from traceview.tui.model import CompileKey, TraceModel
from traceview.tui.navigation import Location
from traceview.tui.text import (
    OUTCOME_MEANING,
    STATUS_WORDS,
    account_outcome,
    mark,
    plain,
    safe,
    seconds,
    status_label,
)
from traceview.tui.view import CompileFocused, Navigate, View

NodeData = tuple[str, Any]


def _frame_key(row: dict[str, Any]) -> tuple:
    """The code object a compile belongs to: Dynamo's frame id (compiled-autograd ids apart),
    within its epoch (frame ids restart at a torch._dynamo.reset(): parsers.compile_ids.epoch_expr)."""
    group = frame_group(row["compile_id"] or "?")
    epoch = row.get("epoch") or 1
    if group.startswith("!"):
        return ("ca", epoch, group)
    return ("frame", epoch, row["frame_id"] if row["frame_id"] is not None else group)


# outcomes worth counting beside a code object or a rank, worst first
COUNTED = ("failed", "interrupted", "never_ended", "eager", "restarted")
ALARMING = ("failed", "eager", "interrupted", "never_ended")


def outcome(row: dict[str, Any]) -> str:
    """The compile's outcome as Frames says it: compile_outcome's kind under the compile
    account's status (`row["account"]`, TraceModel.account_of): an open compile is
    interrupted or never ended, never ok."""
    acc = row.get("account")
    return account_outcome(compile_outcome(row), acc.get("status") if acc else None)


def compile_seconds(row: dict[str, Any]) -> float | None:
    """The compile's seconds: the account's (every piece; an open compile's up to the
    capture's end), the compiles table's where there is no account (a text log)."""
    acc = row.get("account")
    return acc.get("seconds") if acc else row.get("total_time_s")


def outcome_counts(rows: list[dict[str, Any]]) -> str:
    """"✗ 1 failed  ↓ 1 eager  ↻ 2 restarted" (restarts are normal: said, not alarmed)."""
    outcomes = [outcome(r) for r in rows]
    return "  ".join(f"{mark(o)} {outcomes.count(o)} {STATUS_WORDS.get(o, o)}" for o in COUNTED if o in outcomes)


def open_text(acc: dict[str, Any]) -> str:
    """Where an open compile's seconds end: "to the capture's end (in inductor code_gen)"."""
    where = ", ".join(x for x in (acc.get("open_part") if acc.get("open_part") not in (None, "forward") else None,
                                  f"in {acc['phase']}" if acc.get("phase") else None) if x)
    return "to the capture's end" + (f" ({where})" if where else "")


def compile_label(row: dict[str, Any], first: bool) -> Text:
    t = Text(end="")
    out = outcome(row)
    acc = row.get("account") or {}
    t.append_text(safe(f"{status_label(out):<12}", "bold" if out in ALARMING else ""))
    t.append_text(safe(f" {compile_id_label(row['compile_id'], row.get('occurrence'), row.get('attempts')):<6}"))
    t.append_text(safe(f" {seconds(compile_seconds(row)):>6}"))
    if acc.get("status") in OPEN:
        t.append_text(safe(f" {open_text(acc)}", "italic"))
    if (row.get("attempts") or 1) > 1:
        t.append_text(safe(f"  {row['attempts']} attempts"))
    if not first and acc.get("cause"):
        # the account's one cause (what differs from the entry it otherwise matches), as
        # every finding says it; torch's own list is in the detail pane
        t.append_text(safe("  recompile: " + one_line(acc["cause"], 60), "italic"))
    elif not first and row.get("recompile_reason"):
        reason = row["recompile_reason"].split(": ", 1)[-1].strip()
        shown = one_line(re.sub(r"[ \t]{2,}", "  ", reason), 60)  # Dynamo pads a guard before its comment
        if "\n" in reason and not shown.endswith("…"):  # more failed guards: in the detail pane
            shown += " …"
        t.append_text(safe("  recompile: " + shown, "italic"))
    elif row["status"] == "failed" and row.get("fail_type"):
        t.append_text(safe(f"  {row['fail_type']}", "italic"))
    return t


def compile_name(row: dict[str, Any]) -> str:
    """The compiled function, or what a compile without a Dynamo frame was
    ("AOTInductor compile": parsers.compile_ids.compile_name)."""
    return frameless_compile_name(row)


def is_piece(row: dict[str, Any]) -> bool:
    """A compile without a Dynamo frame that the record stack shows Dynamo's compiled code
    made (parsers.frameless: `parent_candidates`): a piece of a Dynamo compile (a piecewise
    backend's run-time Inductor compile), shown under it, never as a compile of a code object."""
    return bool(row.get("parent_compile_id") or row.get("parent_candidates"))


def piece_label(row: dict[str, Any]) -> Text:
    """A run-time piece's leaf: its outcome, id and seconds, what it is, and whose it is when
    the log cannot say which of several compiles made it."""
    t = compile_label(row, True)
    what = f"  run-time Inductor compile of {row['graph_piece']}" if row.get("graph_piece") else "  run-time Inductor compile"
    t.append_text(safe(what, "italic"))
    cands = row.get("parent_candidates") or []
    if not row.get("parent_compile_id") and len(cands) > 1:
        t.append_text(safe(f" of {' or '.join(f'[{c}]' for c in cands)} (which one: not in the log)", "italic"))
    return t


def frame_label(rows: list[dict[str, Any]], code: dict[str, Any] | None = None, pieces: list[dict[str, Any]] | None = None) -> Text:
    """A code object's node: its name as the findings say it (`code`, the report's description
    from analyze.code_objects: `Sequential via torch.compile(model)` for torch.compile's wrapper
    `inner`, `Block.forward`), else the function's; where it is; its compiles. `pieces`: the
    run-time Inductor compiles its compiled code made (said apart: they are not recompiles).
    Compiles without a Dynamo frame have no code object: never said as recompiles."""
    named = next((r for r in rows if r.get("function")), rows[0])
    fn = (code or {}).get("label") or compile_name(named)
    filename = named.get("filename")
    where = f"{filename.rsplit('/', 1)[-1]}:{named.get('line')}" if filename else ""
    n = len(rows)
    counts = outcome_counts(rows)
    t = Text(end="")
    t.append_text(safe(fn, "bold"))
    t.append_text(safe(f"  {n} compile{'s' if n != 1 else ''}"))
    if n > 1 and all((r.get("compile_kind") or "dynamo") == "dynamo" for r in rows):
        t.append_text(safe(f" ({n - 1} recompile{'s' if n > 2 else ''})"))
    if pieces:
        secs = sum(compile_seconds(p) or 0.0 for p in pieces)
        t.append_text(safe(f" + {len(pieces)} run-time Inductor compile{'s' if len(pieces) != 1 else ''} ({seconds(secs)})"))
    if counts:
        t.append_text(safe(f"  {counts}", "bold" if "failed" in counts or "eager" in counts else ""))
    t.append_text(safe(f"  {where}", "italic"))
    after = after_resets(named.get("epoch"))
    if after:
        t.append_text(safe(" " + after, "italic"))
    return t


def _label(t: Text, label: str, value: Any, style: str = "") -> None:
    t.append_text(safe(f"{label:<13}", "bold"))
    t.append_text(safe(value, style))
    t.append("\n")


def _unbacked(t: Text, groups: list[dict[str, Any]]) -> None:
    """The compile's data-dependent sizes (unbacked symbols), one line per user line."""
    if not groups:
        return
    from traceview.output.summary import unbacked_line

    def at(filename: str | None, line: Any) -> str:
        return f"{(filename or '?').rsplit('/', 1)[-1]}:{line}"

    n = sum(len(u["symbols"]) for u in groups)
    t.append_text(safe(f"data-dependent sizes ({n} unbacked symbol{'s' if n != 1 else ''})", "bold"))
    t.append("\n")
    for u in groups:
        t.append_text(safe(f"  {unbacked_line(u, at, with_compile=False)}"))
        t.append("\n")


def compile_detail(model: TraceModel, row: dict[str, Any], *, hint: bool = True) -> Text:
    """The selected compile; `hint`: end with the keys that lead on (not when copied)."""
    t = Text(end="")
    if "account" not in row:
        row = {**row, "account": model.account_of(row)}
    acc = row.get("account") or {}
    t.append_text(safe(f"[{compile_id_label(row['compile_id'], row.get('occurrence'), row.get('attempts'))}] {compile_name(row)}", "bold"))
    t.append("  ")
    out = outcome(row)
    t.append_text(safe(OUTCOME_MEANING[out], "bold reverse" if out in ALARMING else "bold"))
    t.append("\n\n")
    if compile_name(row) != (row.get("function") or "?"):
        _label(t, "what", f"{compile_name(row)} (no Dynamo frame; tlparse: {row['compile_id']}/)")
        cands = row.get("parent_candidates") or []
        piece = f"{row['graph_piece']} of " if row.get("graph_piece") else ""
        if row.get("parent_compile_id"):
            _label(t, "made by", f"{piece}[{row['parent_compile_id']}]'s graph: a piece of that compile, run at run time (not a recompile)")
        elif len(cands) > 1:
            _label(t, "made by", f"{piece}the graph of {' or '.join(f'[{c}]' for c in cands)}: the compiled code of that function"
                   " ran, which of its compiles is not in the log")
        if row.get("call_filename"):
            src = f"  {one_line(row['call_code'], 200)}" if row.get("call_code") else ""
            _label(t, "called at", f"{row['call_filename']}:{row.get('call_line')} in {row.get('call_function') or '?'}{src}")
    else:
        _label(t, "function", f"{row.get('function') or '?'}  {row.get('filename') or '?'}:{row.get('line')}")
        code = model.code_of(row) or {}
        if code.get("label") and code["label"] != row.get("function"):
            _label(t, "what", code["label"] + (f"  ({code['module_class']})" if code.get("module_class") else ""))
        owner = whose(row.get("filename"))
        if owner.owner not in ("unknown", "user"):
            wrapper = f", torch's {code['wrapper']} wrapper" if code.get("wrapper") else ""
            _label(t, "whose code", f"{owner.describe()}{wrapper}  ({owner.shown})")
        if row.get("call_filename"):
            src = f"  {one_line(row['call_code'], 200)}" if row.get("call_code") else ""
            _label(t, "called at", f"{row['call_filename']}:{row.get('call_line')} in {row.get('call_function') or '?'}{src}")
    if row.get("rank") is not None:
        _label(t, "rank", row["rank"])
    start = row.get("start") if row.get("start") is not None else acc.get("start")  # an open compile: its account's
    if start is not None:
        # month-day and time only: the log has no year (the parser guesses it from the mtime)
        _label(t, "started", start.strftime("%m-%d %H:%M:%S.%f")[:-3])
    if acc.get("status") in OPEN:
        # the compile account's: it never ended, so its time runs to the capture's last timestamp
        _label(t, "time", f"{seconds(acc.get('seconds'))} up to the capture's end: "
               f"{unfinished_text(acc['status'], acc.get('phase'), acc.get('open_part'))} (not a compile time)")
    else:
        _label(t, "time", f"{seconds(compile_seconds(row))} in all")
    if row.get("total_time_s") and acc.get("status") not in OPEN:  # the summary's split and words (analyze.compile_time, output.report)
        from traceview.analyze.wording import phases_text

        _label(t, "phases", phases_text(compile_phases(row), backward_pieces=row.get("bwd_pieces")))
    inside = model.backward_inside(row) if row.get("bwd_compile_time_s") is None else None
    if inside:
        # AOTAutograd compiled the backward with the forward (not lazily at the first backward):
        # no bwd_compilation_metrics, its time is part of this compile's
        _label(t, "backward", f"{seconds(inside)} compiled inside this compile (part of its time, not lazily later)")
    counts = [
        ("guards (metrics)", row.get("guard_count")),  # len(output.guards); 3 lists the logged tree
        ("shape-env guards", row.get("shape_env_guard_count")),
        ("graph ops", row.get("graph_op_count")),
        ("nodes", row.get("graph_node_count")),
        ("inputs", row.get("graph_input_count")),
    ]
    _label(t, "counts", "  ".join(f"{k} {'-' if v is None else v}" for k, v in counts))
    _label(t, "attempts", f"{row.get('attempts') or 1}   graph breaks {row.get('graph_breaks') or 0}")
    cache = [
        ("FX graph", "fx_cache_hits", "fx_cache_misses", "fx_cache_bypasses"),
        ("AOTAutograd", "aot_cache_hits", "aot_cache_misses", "aot_cache_bypasses"),
    ]
    _label(
        t,
        "cache",
        "   ".join(f"{n} {row.get(h) or 0} hit/{row.get(m) or 0} miss/{row.get(b) or 0} bypass" for n, h, m, b in cache),
    )
    if acc.get("cause"):
        _label(t, "recompiled", acc["cause"], "bold")
        if row.get("recompile_reason"):
            # torch's own list: its first-listed failure need not be the cause (a tensor's
            # requires_grad listed before the size that differs from the entry it matches)
            _label(t, "torch listed", row["recompile_reason"])
    elif row.get("recompile_reason"):
        _label(t, "recompiled", row["recompile_reason"], "bold")
    if row["status"] == "failed" or row.get("fail_type"):
        _label(t, "failed", f"{row.get('fail_type') or '?'}", "bold")
        if row.get("fail_reason"):
            t.append_text(safe(row["fail_reason"].rstrip()))
            t.append("\n")
        if row.get("fail_user_filename"):
            _label(t, "failed at", f"{row['fail_user_filename']}:{row.get('fail_user_line')}")
    restarts = row.get("restart_reasons") or []
    if restarts:
        t.append_text(safe("restarts", "bold"))
        t.append("\n")
        for r in restarts:
            t.append_text(safe(f"  {mark('restarted')} {one_line(r, 300)}"))
            t.append("\n")
    gbs = model.graph_breaks_of(row.get("rank"), row["compile_id"], row.get("occurrence"))
    if gbs.height:
        t.append_text(safe(f"graph breaks ({gbs.height})", "bold"))
        t.append("\n")
        for g in gbs.iter_rows(named=True):
            skip = "  [frame skipped]" if g.get("frame_skipped") else ""
            gb = f" {g['gb_id']}" if g.get("gb_id") else ""
            t.append_text(safe(f"  {one_line(g.get('reason'), 200)}{gb}{skip}"))
            t.append("\n")
            t.append_text(safe(f"    at {g.get('filename') or '?'}:{g.get('line')} in {g.get('function') or '?'}", "italic"))
            t.append("\n")
    _unbacked(t, model.unbacked_of(row.get("rank"), row["compile_id"], row.get("occurrence")))
    stack = row.get("user_stack") or []
    if stack:
        t.append_text(safe("user stack", "bold"))
        t.append("\n")
        for fr in stack:
            t.append_text(safe(f"  {fr}"))
            t.append("\n")
    t.append("\n")
    keys = "   enter: guards · 4: graphs & kernels · r: raw record" if hint else ""
    t.append_text(safe(f"record {row.get('file') or '?'}:{row.get('metrics_lineno') or row.get('lineno')}{keys}", "italic"))
    return t


def text_log_detail(rank: int | None, compile_id: str, model: TraceModel) -> Text:
    """A compile known only from a text log: its id, recompile reasons and graph breaks."""
    t = Text(end="")
    t.append_text(safe(f"[{compile_id}]" + (f" rank {rank}" if rank is not None else ""), "bold"))
    t.append_text(safe("  from the text log: no compile metrics (status, times, counts)", "italic"))
    t.append("\n\n")
    row = model.compile_or_text_row(rank, compile_id) or {}
    if row.get("function"):
        _label(t, "function", f"{row['function']}  {row.get('filename') or '?'}:{row.get('line')}")
    if row.get("recompile_reason"):
        _label(t, "recompiled", row["recompile_reason"], "bold")
    gbs = model.graph_breaks_of(rank, compile_id)
    for g in gbs.iter_rows(named=True):
        _label(t, "graph break", f"{one_line(g.get('reason'), 200)} at {g.get('filename') or '?'}:{g.get('line')}")
    _unbacked(t, model.unbacked_of(rank, compile_id))
    t.append("\n")
    t.append_text(safe("enter: guards (from the text log) · 5: raw records", "italic"))
    return t


def frame_rows(model: TraceModel) -> list[dict[str, Any]]:
    """The compiles the tree lists: each row of the compiles table with its compile account
    (`account`: seconds, status, cause, as every finding has them); a text log's compile ids
    (no account: the text log has no times or status)."""
    if model.text_only:
        return model.text_log_compiles()
    return [{**r, "account": model.account_of(r)} for r in model.compiles.to_dicts()]


class CompilesTree(Tree[NodeData]):
    """The frames tree; a label wider than the pane ends with "…" (the whole text is in the
    detail pane) instead of being cut silently at the edge."""

    def render_label(self, node: TreeNode[NodeData], base_style: Style, style: Style) -> Text:
        label = super().render_label(node, base_style, style)
        depth = 0
        p = node.parent
        while p is not None:
            depth += 1
            p = p.parent
        indent = self.guide_depth * (depth - (0 if self.show_root else 1))
        room = self.scrollable_content_region.width - indent - 1  # (the cursor marker's column)
        if room > 1 and label.cell_len > room:
            label.truncate(room - 1)
            label.append("…", style)
        return label

    def render_line(self, y: int) -> Strip:
        # the cursor's line is marked by a character in a first column of its own (tui.cursor),
        # as the tables' rows are: colour alone is lost under NO_COLOR and in a plain capture
        strip = super().render_line(y)
        return marked_line(strip, self.scroll_offset.y + y == self.cursor_line, self.size.width)


class FramesView(View):
    """A tree of ranks, code objects and their compiles, with the selected compile beside it."""

    view_id = "frames"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("e", "expand_all", "Expand all", id="frames.expand_all", show=False),
        Binding("m", "other_rank", "Other rank", id="frames.other_rank"),
    ]

    def __init__(self, model: TraceModel, **kwargs: object) -> None:
        super().__init__(model, **kwargs)
        self._compile_nodes: dict[CompileKey, TreeNode[NodeData]] = {}
        self._leaf_rows: dict[Any, dict[str, Any]] = {}  # tree node id -> its compile's row
        self._occurrence_nodes: dict[tuple[Any, str, Any], TreeNode[NodeData]] = {}  # (rank, id, occurrence) -> leaf
        self._row: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="frames-title", classes="view-title")
        with Container(classes="split"):
            tree = CompilesTree(safe("compiles"), id="frames-tree", classes="pane-main w3")
            tree.show_root = False
            tree.guide_depth = 2
            yield tree
            with VerticalScroll(id="compile-detail-pane", classes="pane-side detail w2"):
                yield Static(id="compile-detail")

    def on_mount(self) -> None:
        self._build()

    def _build(self) -> None:
        tree = self.query_one("#frames-tree", Tree)
        rows = frame_rows(self.model)
        ranked = any(r["rank"] is not None for r in rows)
        # ranks that compiled differently (a divergence, or compiles made alone while others waited)
        # each marked as its finding is titled (RANK DIVERGENCE, RANK STALL): the findings' word
        diverging = {r: (f.tag, f.claim) for f in findings_of(self.model.report) if f.kind in ("divergence", "stall")
                     for r in f.ranks if r is not None}
        groups: dict[Any, dict[tuple, list[dict[str, Any]]]] = {}
        # (in log order: `unknown_<line>` ids do not sort as numbers)
        pieces = sorted((r for r in rows if is_piece(r)), key=lambda r: (r.get("file") or "", r.get("lineno") or 0)) if not self.model.text_only else []
        for r in rows:
            if not pieces or not is_piece(r):
                groups.setdefault(r["rank"], {}).setdefault(_frame_key(r), []).append(r)
        # each run-time piece under the compile that made it (a tie: parsers.frameless), or
        # under the code object when the log says only that one of its compiles did
        under_compile: dict[int, list[dict[str, Any]]] = {}
        under_frame: dict[tuple, list[dict[str, Any]]] = {}
        for p in pieces:
            mine = groups.get(p["rank"], {})
            cands = [p["parent_compile_id"]] if p.get("parent_compile_id") else list(p.get("parent_candidates") or [])
            hits = [(k, r) for k, frows in mine.items() for r in frows
                    if r["compile_id"] in cands and r.get("file") == p.get("file") and (r.get("lineno") or 0) < (p.get("lineno") or 0)]
            if p.get("parent_compile_id") and hits:
                under_compile.setdefault(id(hits[-1][1]), []).append(p)
            elif hits:
                under_frame.setdefault((p["rank"], hits[-1][0]), []).append(p)
            else:  # its compile is not in this trace: a compile of its own
                groups.setdefault(p["rank"], {}).setdefault(_frame_key(p), []).append(p)
        for rank, frames in groups.items():
            parent = tree.root
            if ranked:
                n = sum(len(v) for v in frames.values())
                counts = outcome_counts([r for v in frames.values() for r in v])
                label = safe(f"rank {rank if rank is not None else '?'}", "bold")
                label.append_text(safe(f"  {n} compiles" + (f"  {counts}" if counts else "")))
                if rank in diverging:
                    tag, claim = diverging[rank]
                    label.append_text(safe(f"  {mark('failed')} {tag}: {one_line(claim, 80)}", "bold reverse"))
                parent = tree.root.add(label, data=("rank", rank), expand=True)
            for fkey, frows in frames.items():
                named = next((r for r in frows if r.get("function")), frows[0])
                code = self.model.code_of(named) if not self.model.text_only else None
                made = [p for r in frows for p in under_compile.get(id(r), [])] + under_frame.get((rank, fkey), [])
                fnode = parent.add(frame_label(frows, code, made), data=("frame", (rank, fkey)), expand=True)
                for i, r in enumerate(frows):
                    own = under_compile.get(id(r), [])
                    label = compile_label(r, i == 0)
                    if own:
                        label.append_text(safe(f"  + {len(own)} run-time Inductor compile{'s' if len(own) != 1 else ''}", "italic"))
                        leaf = fnode.add(label, data=("compile", (rank, r["compile_id"])), expand=True)
                    else:
                        leaf = fnode.add_leaf(label, data=("compile", (rank, r["compile_id"])))
                    self._remember(leaf, rank, r)
                    for p in own:
                        self._remember(leaf.add_leaf(piece_label(p), data=("compile", (rank, p["compile_id"]))), rank, p)
                for p in under_frame.get((rank, fkey), []):
                    self._remember(fnode.add_leaf(piece_label(p), data=("compile", (rank, p["compile_id"]))), rank, p)
        n = len(rows)
        nf = sum(len(v) for v in groups.values())
        title = f"{n} compiles of {nf} code objects" + (f" on {len(groups)} ranks" if ranked else "")
        if self.model.text_only:  # no compiles table: say what the text log does and does not tell
            title = (f"{n} compile ids in the text log, {nf} code objects (no compile metrics: status and times"
                     " need the TORCH_TRACE directory)")
        shown = ("ok", "restarted", "eager", "failed", "empty")
        opened = [o for o in ("interrupted", "never_ended") if any(outcome(r) == o for r in rows)]
        legend = "  ".join(f"{mark(o)} {OUTCOME_MEANING[o]}" for o in (*shown, *opened))
        if self.model.text_only:
            legend = ""  # no status to explain
        self.query_one("#frames-title", Static).update(safe(f"{title}   {legend}".rstrip(), "bold"))
        if self._compile_nodes:
            first = next(iter(self._compile_nodes.values()))
            tree.move_cursor(first)

    def _remember(self, leaf: TreeNode[NodeData], rank: Any, r: dict[str, Any]) -> None:
        self._compile_nodes.setdefault((rank, r["compile_id"]), leaf)  # (the first, after a reset)
        self._occurrence_nodes[(rank, r["compile_id"], r.get("occurrence"))] = leaf
        self._leaf_rows[leaf.id] = r

    # -- selection --------------------------------------------------------------------
    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        data = event.node.data
        if not data:
            return
        kind, value = data
        detail = self.query_one("#compile-detail", Static)
        if kind == "compile":
            rank, cid = value
            # the leaf's own row: after a torch._dynamo.reset() one id names several compiles
            row = self._leaf_rows.get(event.node.id) if not self.model.text_only else None
            row = row or self.model.compile_row(rank, cid)
            self._row = row
            if row:
                detail.update(compile_detail(self.model, row))
                self.post_message(CompileFocused((rank, cid), row.get("occurrence")))
            elif self.model.text_only:
                detail.update(text_log_detail(rank, cid, self.model))
                self.post_message(CompileFocused((rank, cid)))
        elif kind == "frame":
            self._row = None
            leaves = [c for c in event.node.children if c.data]
            detail.update(safe(f"{len(leaves)} compiles of this code object: enter expands or collapses"))
        else:
            self._row = None
            detail.update(safe(f"rank {value}"))

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        data = event.node.data
        if data and data[0] == "compile":
            rank, cid = data[1]
            # the leaf's own compile: after a torch._dynamo.reset() one id names several
            row = (self._leaf_rows.get(event.node.id) if not self.model.text_only else None) or self.model.compile_row(rank, cid) or {}
            compare = None
            reason = row.get("recompile_reason") or ""
            if reason and ":" in reason:
                compare = reason.split(":", 1)[0].strip()
            self.post_message(
                Navigate(Location("guards", rank=rank, compile_id=cid, occurrence=row.get("occurrence"), compare_id=compare))
            )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # m only where there are ranks to compare (not in the footer of a one-process trace)
        return len(self.model.ranks()) > 1 if action == "other_rank" else True

    def action_other_rank(self) -> None:
        """The selected compile's guards beside the same compile on the next rank (the same
        id, or the frame's last compile there); m again in the guards view: the next rank."""
        key = self.compile_ref()
        if key is None:
            self.app.notify("select a compile first", severity="warning")
            return
        target = self.model.on_other_rank(*key)
        if target is None:
            why = "one rank only" if len(self.model.ranks()) < 2 else f"no other rank compiled the frame of [{key[1]}]"
            self.app.notify(plain(why), severity="warning")
            return
        loc = Location("guards", rank=key[0], compile_id=key[1], compare_id=target[1], compare_rank=target[0])
        self.post_message(Navigate(loc))

    def action_expand_all(self) -> None:
        self.query_one("#frames-tree", Tree).root.expand_all()

    # -- hooks ------------------------------------------------------------------------
    def show(self, loc: Location) -> None:
        if loc.compile_id is None:
            return
        node = self._occurrence_nodes.get((loc.rank, loc.compile_id, loc.occurrence)) if loc.occurrence else None
        node = node or self._compile_nodes.get((loc.rank, loc.compile_id))
        if node is None:
            hit = self.model.find_compile(loc.compile_id, loc.rank)
            node = self._compile_nodes.get(hit) if hit else None
        if node is None:
            return
        tree = self.query_one("#frames-tree", Tree)
        p = node.parent
        while p is not None:
            p.expand()
            p = p.parent
        tree.move_cursor(node)
        tree.scroll_to_node(node, animate=False)

    def location(self) -> Location:
        key = self.compile_ref()
        if not key:
            return Location("frames")
        return Location("frames", rank=key[0], compile_id=key[1], occurrence=(self._row or {}).get("occurrence"))

    def compile_ref(self) -> CompileKey | None:
        return (self._row.get("rank"), self._row["compile_id"]) if self._row else None

    def compile_occurrence(self) -> int | None:
        return self._row.get("occurrence") if self._row else None

    def search(self, query: str, forward: bool = True) -> bool:
        tree = self.query_one("#frames-tree", Tree)
        nodes: list[TreeNode[NodeData]] = []

        def walk(n: TreeNode[NodeData]) -> None:
            for c in n.children:
                nodes.append(c)
                walk(c)

        walk(tree.root)
        if not nodes:
            return False
        cur = tree.cursor_node
        start = nodes.index(cur) if cur in nodes else -1
        n = len(nodes)
        order = [(start + k) % n for k in (range(1, n + 1) if forward else range(-1, -n - 1, -1))]
        q = query.lower()
        for i in order:
            node = nodes[i]
            text = node.label.plain
            if node.data and node.data[0] == "compile":
                row = self._leaf_rows.get(node.id) or self.model.compile_row(*node.data[1]) or {}
                text += " " + " ".join(str(row.get(k) or "") for k in ("function", "filename", "recompile_reason", "fail_reason"))
                text += " " + str((row.get("account") or {}).get("cause") or "")  # the cause the label shows whole
            if q in text.lower():
                p = node.parent
                while p is not None:
                    p.expand()
                    p = p.parent
                tree.move_cursor(node)
                tree.scroll_to_node(node, animate=False)
                return True
        return False

    def copy_text(self) -> str | None:
        if self._row:
            return compile_detail(self.model, self._row, hint=False).plain
        return None

    def record_ref(self) -> tuple[str, int] | None:
        if self._row and self._row.get("file"):
            return (self._row["file"], int(self._row.get("metrics_lineno") or self._row.get("lineno") or 1))
        return None

    def focus_main(self) -> None:
        self.query_one("#frames-tree", Tree).focus()
