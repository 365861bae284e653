"""`traceview report PATH... -o report.html`: the summary as one self-contained HTML page.

Findings first, the report's typed list in its order (traceview.analyze.finding: each its kind,
claim, lines, next step and links to the compiles it is about, the same words as `summary`),
then the figures the summary ends with (FACTS, COMPILE TIME, PER RANK, INPUT); then pictures drawn here as
inline SVG (a compile timeline per rank, compile time by function, a rank x compile grid for
several ranks); then every compile's detail, collapsible and searchable. CSS and the small
script are inline; nothing is loaded from the network. The template is `page.html.j2` beside
this module, rendered by Jinja2 with autoescape on: log text is data, escaped, never markup.

Size: a payload (graph, guards, output code) and a user stack are stored once per distinct
text (48 ranks that compiled alike share them) in `<template>` elements that the script copies
into a compile's detail when it is opened; a payload is cut at `PAYLOAD_CHARS` characters
with a note naming `traceview open` / `traceview export` for all of it.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from markupsafe import Markup, escape

from parsers.code_location import brief
from parsers.compile_ids import ID_PATTERN, compile_name, sort_key
from parsers.compile_ids import label as id_label
from parsers.compile_ids import parse as parse_compile_id
from traceview.analyze import compile_time as ct
from traceview.analyze.accounts.compiles import compile_account
from traceview.analyze.finding import findings_of
from traceview.analyze.findings import code_label, ranks_text
from traceview.analyze.wording import STATUS_WORDS, unfinished_text
from traceview.output.report import build_report
from traceview.output.summary import clean_line, head_lines, render_figures, title_line
from traceview.output.timeline import (
    piece_rows,
    piece_text,
    processes_of,
    timeline_end,
    write_atomically,
)
from traceview.trace import Trace

TEMPLATE = Path(__file__).with_name("page.html.j2")
PAYLOAD_CHARS = 20_000  # one payload's text at most; the rest: traceview open / export
PAYLOAD_BUDGET = 6_000_000  # all payloads' text; past it each is cut to PAYLOAD_CHARS_LATE
PAYLOAD_CHARS_LATE = 2_000
LINKS_PER_FINDING = 48
KERNELS_PER_COMPILE = 50  # a compile's kernels listed at most; the rest: traceview open / origin
# the kernels (and their source lines) need the graph tables of every log: within 2x of the
# summary's time for a few processes, not for many (48 ranks: 2.1x and 1.35 GB measured); past
# this many processes the page leaves them to `traceview open` / `traceview origin`
KERNELS_MAX_PROCESSES = 8
TEXT_WIDTH = 110
# the payloads a compile's detail shows, by event kind or artifact name, in this order
PAYLOAD_KINDS = {
    "dynamo_output_graph": "Dynamo graph",
    "dynamo_cpp_guards_str": "guards",
    "aot_joint_graph": "AOT joint graph",
    "aot_forward_graph": "AOT forward graph",
    "aot_backward_graph": "AOT backward graph",
    "aot_inference_graph": "AOT inference graph",
    "inductor_post_grad_graph": "post-grad graph",
    "inductor_output_code": "output code",
}
PHASES = ("dynamo", "aot", "backend", "inductor", "autotuning", "other", "backward")  # ct.disjoint_phases' parts
TIMELINE_PX = 1240  # the timeline's labels, bars and rank states together, at most (the page is 1280 px wide)
STATE_MAX_PX = 320  # a rank's state after its row, at most (all of it in the tooltip)
LABEL_MAX_PX = 560  # a picture's label column at most; a longer label is cut in its middle (all of it in the tooltip)
SCHEDULES_DRAWN = 12  # collective mismatches drawn at most; the rest: traceview summary / open (Ranks)
SCHEDULE_CONTEXT = 3  # collectives drawn before and after the first one that differs


# ---------------------------------------------------------------------------- compiles
@dataclass
class _Compiles:
    """Every compile with its anchor, and lookups from the report's (rank, compile id)."""

    rows: list[dict[str, Any]]
    anchors: dict[tuple[Any, str, str, int], str] = field(default_factory=dict)  # file, rank, cid, occ
    by_rank_id: dict[tuple[Any, str], list[str]] = field(default_factory=dict)
    by_id: dict[str, list[str]] = field(default_factory=dict)

    def anchor(self, rank: Any, cid: Any, occurrence: Any = None) -> str | None:
        if not cid:
            return None
        found = self.by_rank_id.get((rank, cid)) if rank is not None else None
        if found is None:
            found = self.by_id.get(cid)
        if not found:
            return None
        if occurrence and occurrence > 1 and len(found) >= occurrence:
            return found[occurrence - 1]
        return found[0]


def _anchor_name(rank: Any, cid: str, occ: int, n: int) -> str:
    base = f"c{'x' if rank is None else rank}-{re.sub(r'[^0-9A-Za-z]+', '-', cid.replace('!', 'ca'))}-{occ}"
    return base if n == 0 else f"{base}-f{n}"


def _compiles(trace: Trace) -> _Compiles:
    """Every compile of the compile account (traceview.analyze.accounts.compiles): the compiles
    table's rows with the account's `account_status`, `account_seconds`, `open_part` and
    `phase`, and the compiles seen only by their open spans (a compiled-autograd graph) as
    rows of their own."""
    c = trace.compiles.filter(pl.col("compile_id").is_not_null())
    keys = ["file", "compile_id", "occurrence"]
    acc = compile_account(trace).filter(pl.col("compile_id").is_not_null()).select(
        *keys, "rank", "label", "function", "filename", "line", "start", "lineno", pl.col("status").alias("account_status"),
        pl.col("seconds").alias("account_seconds"), "open_part", "phase")
    rows = c.join(acc.drop("rank", "label", "function", "filename", "line", "start", "lineno"), on=keys, how="left",
                  nulls_equal=True, maintain_order="left").to_dicts()
    rows += [{**dict.fromkeys(c.columns), **r} for r in acc.join(c.select(keys), on=keys, how="anti", nulls_equal=True).to_dicts()]
    rows.sort(key=lambda r: (r["rank"] is not None, r["rank"] or 0, r["file"], sort_key(r["compile_id"]), r["occurrence"] or 1))
    out = _Compiles(rows)
    used: set[str] = set()
    for r in rows:
        n = 0
        while (a := _anchor_name(r["rank"], r["compile_id"], r["occurrence"] or 1, n)) in used:
            n += 1
        used.add(a)
        r["anchor"] = a
        out.anchors[(r["file"], r["rank"], r["compile_id"], r["occurrence"] or 1)] = a
        out.by_rank_id.setdefault((r["rank"], r["compile_id"]), []).append(a)
        out.by_id.setdefault(r["compile_id"], []).append(a)
    return out


def _status(r: dict[str, Any]) -> str:
    """A compile's status as the grid colours it: the account's (finished, failed,
    interrupted, never_ended, unknown), a finished compile's kind kept where the compiles
    table says more (graph_break_restarts, empty_graph)."""
    st = r.get("account_status") or "unknown"
    return r["status"] if st == "finished" and r.get("status") in ("graph_break_restarts", "empty_graph") else st


def _status_text(r: dict[str, Any]) -> str:
    """A compile's status and seconds as its line in the compile list says them (the account's)."""
    st = r.get("account_status") or "unknown"
    if st in ("interrupted", "never_ended"):
        words = unfinished_text(st, r.get("phase"), r.get("open_part"))
        secs = r.get("account_seconds")
        return words + (f", {secs:.3f}s up to the capture's end" if secs is not None else "")
    words = STATUS_WORDS.get(st, st) + (f" ({r['status'].replace('_', ' ')})" if _status(r) != st else "")
    if st == "unknown":
        return words
    return words + (f", {r['account_seconds']:.3f}s" if r.get("account_seconds") is not None else ", no time logged")


# ---------------------------------------------------------------------------- findings
_ID_IN_TEXT = re.compile(rf"\[({ID_PATTERN}(?: #\d+)?)\]")  # a label as the summary prints it
_RANK_BEFORE = re.compile(r"\brank (\d+)(?:'s)? ")


def _linked_line(line: str, comps: _Compiles) -> Markup:
    """One line of the summary's text, escaped, with each `[compile id]` a link to it."""
    out: list[Any] = []
    pos = 0
    for hit in _ID_IN_TEXT.finditer(line):
        before = _RANK_BEFORE.findall(line[: hit.start()])  # the rank the line names last
        rank = int(before[-1]) if before else None
        c = parse_compile_id(hit.group(1))
        a = None if c is None else comps.anchor(rank, c.compile_id, c.occurrence)
        if a is None:
            continue
        out.append(escape(line[pos : hit.start()]))
        out.append(Markup('<a href="#{}">{}</a>').format(a, hit.group(0)))
        pos = hit.end()
    out.append(escape(line[pos:]))
    return Markup("").join(out)


def _findings(report: dict[str, Any], comps: _Compiles) -> tuple[list[Markup], list[dict[str, Any]], list[Markup]]:
    """The head lines, the findings (the report's typed list, in its order: each its kind, claim,
    lines, next step and linked compiles) and the figures after them (FACTS, COMPILE TIME, PER
    RANK, INPUT, as the summary writes them)."""
    findings = findings_of(report)
    head = [title_line(report), *head_lines(report)]
    out = []
    for f in findings:
        links, seen = [], set()
        for c in ([f.target] if f.target else []) + f.compiles:
            a = comps.anchor(c.rank, c.compile_id, c.occurrence)
            if a and a not in seen:
                seen.add(a)
                links.append({"anchor": a, "label": (f"rank {c.rank} " if c.rank is not None else "") + c.label()})
        out.append({
            "title": f.title, "severity": f.severity, "claim": _linked_line(clean_line(f.claim), comps),
            "lines": [(label.strip(), _linked_line(clean_line(text), comps)) for label, text in f.lines],
            "more": [(label.strip(), _linked_line(clean_line(text), comps)) for label, text in f.more],
            "certainty": f.certainty, "key": f.key,
            "links": links[:LINKS_PER_FINDING], "more_links": max(len(links) - LINKS_PER_FINDING, 0),
        })
    figures = render_figures(report, width=TEXT_WIDTH).splitlines()
    return [_linked_line(x, comps) for x in head], out, [_linked_line(x, comps) for x in figures]


# ---------------------------------------------------------------------------- pictures
# advance widths (em) of DejaVu Sans, the widest of the usual sans-serif fonts (Chromium's
# system-ui on Linux): a label column sized by them holds its labels in any of them
_EM = dict(zip(
    " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~",
    (.318, .401, .460, .838, .636, .950, .780, .275, .390, .390, .500, .838, .318, .361, .318, .337, *(.636,) * 10,
     .337, .337, .838, .838, .838, .531, 1.0, .684, .686, .698, .770, .632, .575, .775, .752, .295, .295, .656, .557,
     .863, .748, .787, .603, .787, .695, .635, .611, .732, .684, .989, .685, .611, .685, .390, .337, .390, .838, .500,
     .500, .613, .635, .550, .635, .615, .352, .635, .634, .278, .278, .579, .278, .974, .634, .612, .635, .635, .411,
     .521, .392, .634, .592, .818, .592, .592, .525, .636, .337, .636, .838),
    strict=True,
))


def text_px(text: str, size: float = 11.0) -> float:
    """The width of `text` in the pictures' sans-serif font at `size` px, a little generous
    (DejaVu Sans' widths and 4% more; a character outside ASCII counts a full em): what a
    label column needs so that no label is cut. tests/output/test_page.py checks it in Chromium."""
    return sum(_EM.get(ch, 1.0) for ch in text) * size * 1.04


def fit_label(text: str, px: float = LABEL_MAX_PX, size: float = 11.0) -> str:
    """`text`, or, when wider than `px`, its start and end around "…" (the tooltip has all)."""
    if text_px(text, size) <= px:
        return text
    keep = len(text)
    while keep > 8 and text_px(text[: keep // 2] + "…" + text[len(text) - (keep - keep // 2) :], size) > px:
        keep -= 1
    return text[: keep // 2] + "…" + text[len(text) - (keep - keep // 2) :]


def _label_width(labels: list[str], least: float, size: float = 11.0) -> float:
    return round(max([least, *(text_px(x, size) + 12 for x in labels)]), 1)


def _where(r: dict[str, Any]) -> str:
    """`name (file:line)` of a compiles row: parsers.frameless names a compile without a frame."""
    place = f" ({brief(r['filename'])}:{r['line']})" if r.get("filename") else ""
    return compile_name(r) + place


def _phases(r: dict[str, Any], autotuning: dict[str, float] | None) -> list[tuple[str, float]]:
    """A forward compile's seconds split as every view splits them (analyze.compile_time:
    compile_phases, disjoint_phases), and `other`: what of its time no phase logged."""
    parts = ct.disjoint_phases(ct.compile_phases(r, autotuning), backward=False)
    rest = (r.get("compile_time_s") or 0.0) - sum(v for _, v in parts)
    return [*parts, ("other", rest)] if rest > 1e-9 else parts


def _timeline(trace: Trace, comps: _Compiles, code_name: Any, width: int = 1000) -> dict[str, Any] | None:
    """Every piece of every compile (timeline.piece_rows: the compile account's pieces) as
    bars, one row per rank (per file): a finished forward split into its phases, each
    backward piece its own bar, a piece left open drawn to the capture's last timestamp and
    marked (hatched, its status and phase on it as far as the bar holds them, all of it in its
    tooltip). The time axis runs to the capture's end (timeline.timeline_end; a stop's line),
    a dashed line marks it, and each rank's state then (the rank account: compiling, waiting
    for rank N, running, idle) is written after it."""
    rows = piece_rows(trace)
    if not rows.height:
        return None
    at = ct.autotuning_by_phase(trace)
    by_key = {(r["file"], r["rank"], r["compile_id"], r["occurrence"] or 1): r for r in comps.rows}
    first = int(rows["start_us"].min())
    ends = (rows["offset_s"] + rows["dur_us"].fill_null(0) / 1e6).max() or 0.0
    end = timeline_end(trace)
    end_s = (end["at_us"] - first) / 1e6 if end is not None else None
    span = max(float(ends), end_s or 0.0, 1e-3)
    lanes: dict[int, dict[str, Any]] = {}
    lane_h, gap = 14, 6
    processes = processes_of(trace)
    label_w = _label_width([label for _, label in processes.values()], 60)
    # each rank's state at the capture's end, after its row; the bars give way to it
    states = {pid: fit_label(_state(end, file), STATE_MAX_PX) for (_, file), (pid, _) in processes.items()} if end else {}
    state_w = max([text_px(x) + 12 for x in states.values() if x] or [0.0])
    width = max(min(width, TIMELINE_PX - round(label_w) - round(state_w)), 400)
    for (_, file), (pid, label) in processes.items():
        lanes.setdefault(pid, {"label": label, "bars": [], "state": states.get(pid) or "",
                               "state_tip": _state_tip(end, file) if states.get(pid) else ""})
    for r in rows.iter_rows(named=True):
        lane = lanes[r["process"]]
        key = (r["file"], r["rank"], r["compile_id"], r["occurrence"] or 1)
        c = by_key.get(key, {})
        x = label_w + r["offset_s"] / span * width
        dur = (r["dur_us"] or 0) / 1e6
        segs: list[tuple[str, float]] = []
        if r["open"]:
            segs = [("open", dur)]
        elif r["piece"] == "backward":
            segs = [("backward", dur)]
        elif c and r["dur_us"] is not None:
            segs = _phases(c, at.get((r["file"], r["compile_id"], r["occurrence"])))
        w_total = max(dur / span * width, 1.0)
        pos, pieces = x, []
        tot = sum(s for _, s in segs) or 1.0
        for name, s in segs or [("other", dur)]:
            w = w_total * (s / tot)
            pieces.append({"phase": name, "x": round(pos, 1), "w": round(max(w, 0.3), 1)})
            pos += w
        recompile = bool(r["recompile_reason"]) and r["piece"] == "forward"
        who = f"rank {r['rank']} " if r["rank"] is not None else ""
        tip = f"{who}[{r['label']}] {code_name(c or r)}: {piece_text(r)}"
        if r["compile_seconds"] is not None and (r["piece"] != "forward" or (r["pieces"] or 0) > 0) and not r["open"]:
            tip += f" (the compile: {r['compile_seconds']:.3f}s, {STATUS_WORDS.get(r['compile_status'], r['compile_status'])})"
        elif r["open"] and r["piece"] != "forward" and r["compile_seconds"] is not None:
            tip += f" (the compile: {r['compile_seconds']:.3f}s up to the capture's end)"
        if segs and r["piece"] == "forward" and not r["open"]:
            tip += "; " + ", ".join(f"{n} {s:.3f}s" for n, s in segs)
        if r["open"] and end is not None:
            tip += f"; the capture's last timestamp: {end['what']}"
        if recompile:
            tip += f"; recompile: {r['recompile_reason'][:200]}"
        mark = _open_mark(r, w_total - 6) if r["open"] else ""
        lane["bars"].append({
            "part": r["piece"], "index": r["index"], "rank": "" if r["rank"] is None else r["rank"],
            "seconds": "" if r["seconds"] is None else repr(round(r["seconds"], 6)), "pieces": pieces, "x": round(x, 1), "w": round(w_total, 1), "tip": tip, "status": r["status"],
            "failed": r["status"] == "failed", "open": bool(r["open"]), "recompile": recompile, "anchor": c.get("anchor"),
            "cid": r["compile_id"], "mark": mark,
        })
    out_lanes = []
    for i, pid in enumerate(sorted(lanes)):
        lane = lanes[pid]
        lane["y"] = 20 + i * (lane_h + gap)
        out_lanes.append(lane)
    ticks = []
    step = _tick_step(span)
    t = 0.0
    while t <= span + 1e-9:
        ticks.append({"x": round(label_w + t / span * width, 1), "label": _tick_label(t, step)})
        t += step
    widest = max((b["w"] for lane in out_lanes for b in lane["bars"]), default=0.0)
    # compiles days apart (ranks of other runs, clocks that differ) leave bars thinner than a pixel
    note = (f"The compiles are too short to see at this scale: {_tick_label(span, _tick_step(span))} from the first compile's "
            "start to the last one's end. traceview timeline PATH -o trace.json writes them for Perfetto, which zooms."
            if widest < 2 else None)
    height = 30 + len(out_lanes) * (lane_h + gap)
    stop = None
    if end_s is not None and end is not None and end_s >= 0:
        stop = {"x": round(label_w + end_s / span * width, 1), "ended": end["ended"],
                "tip": ("the job ended" if end["ended"] else "the capture ends") + f" here: {end['what']}"}
    return {
        "note": note, "lanes": out_lanes, "width": round(label_w + width + max(state_w, 40.0)), "height": height,
        "lane_h": lane_h, "ticks": ticks, "label_w": label_w, "span": span, "end": stop,
        "state_x": round(label_w + width + 6, 1), "opened": any(b["open"] for lane in out_lanes for b in lane["bars"]),
    }


def _open_mark(r: dict[str, Any], px: float) -> str:
    """The words on an unfinished piece's bar: the longest of its status with the part and
    phase, its status and phase, its status alone, that fits in `px`; "" when none does."""
    short = {"interrupted": "interrupted", "never_ended": "never ended"}.get(r["status"], r["status"] or "")
    for text in (unfinished_text(r["status"], r["phase"], r["piece"]), unfinished_text(r["status"], r["phase"]),
                 f"{short}: {r['phase']}" if r["phase"] else short, short):
        if text_px(text, 10.0) <= px:
            return text
    return ""


def _state(end: dict[str, Any], file: str) -> str:
    """A rank's state at the capture's end as its row ends (the rank account's, `rank_end_text`):
    nothing for a rank idle for less than 0.01 s then (its log ends with the capture)."""
    e = end["ranks"].get(file) or {}
    if e.get("state") == "idle" and (e.get("idle_s") or 0.0) < 0.01:
        return ""
    return e.get("text") or ""


def _state_tip(end: dict[str, Any] | None, file: str) -> str:
    """A rank's state at the capture's end, as its tooltip says it (the rank account's)."""
    e = (end or {}).get("ranks", {}).get(file) or {}
    if not e.get("text"):
        return ""
    who = f"rank {e['rank']}" if e.get("rank") is not None else "the process"
    tip = f"{who} at the capture's end: {e['text']}"
    if e.get("state") == "waiting":
        tip += (f": its compiles had ended and it wrote nothing for {e['idle_s']:.2f}s while "
                f"{', '.join(f'rank {b}' for b in e.get('behind') or [])} compiled (no record shows the wait itself)")
    elif e.get("state") in ("idle", "running") and e.get("idle_s") is not None:
        tip += f": no record for {e['idle_s']:.2f}s before the capture's end"
    return tip


def _tick_step(span: float) -> float:
    hour, day = 3600, 86400
    for s in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, hour, 2 * hour, 6 * hour, 12 * hour,
              day, 2 * day, 5 * day, 10 * day, 30 * day):
        if span / s <= 10:
            return float(s)
    return span / 10


def _tick_label(t: float, step: float) -> str:
    """A tick's time in the unit of its step: 0.5s, 20s, 5min, 6h, 2d."""
    for unit, name in ((86400, "d"), (3600, "h"), (60, "min")):
        if step >= unit:
            return f"{round(t / unit, 2):g}{name}"
    return f"{round(t, 3):g}s"


def _by_function(report: dict[str, Any], width: int = 520) -> dict[str, Any] | None:
    """The report's compile time by function (its figures), as bars."""
    rows = report["compile_time"]["by_function"]
    if not rows:
        return None
    top = max(float(r["seconds"] or 0) for r in rows) or 1.0
    bars = []
    for i, r in enumerate(rows):
        # the code object as every view names it (findings.code_label: class, library, wrapper)
        show = lambda f, ln: f"{brief(f)}:{ln}" if f else "?"  # noqa: E731
        label = (f"rank {r['rank']} " if r.get("rank") is not None else "") + code_label({**r, "code": {
            k: v for k, v in (r.get("code") or {}).items() if k != "call_site"}}, show)
        bars.append({
            "y": 10 + i * 22, "w": round(max(float(r["seconds"] or 0) / top * width, 1), 1), "label": fit_label(label),
            "full": label, "value": f"{float(r['seconds'] or 0):.2f}s in {r['compiles']} compile{'s' if r['compiles'] != 1 else ''}"
            + (f" and {r['pieces']} run-time Inductor compile{'s' if r['pieces'] != 1 else ''} its code made" if r.get("pieces") else ""),
        })
    return {"bars": bars, "height": 20 + len(bars) * 22, "width": width, "label_w": _label_width([b["label"] for b in bars], 120)}


def _code_names(trace: Trace) -> Any:
    """A compiles row's name as the findings say it (analyze.code_objects: `TinyNet.forward`,
    `Sequential via torch.compile(model)`; parsers.frameless for a compile without a frame),
    with its place; described once per code object."""
    from traceview.analyze.code_objects import describe

    seen: dict[tuple[Any, Any, Any], str] = {}

    def name(r: dict[str, Any]) -> str:
        key = (r.get("function"), r.get("filename"), r.get("line"))
        if key not in seen:
            if not r.get("function"):
                seen[key] = _where(r)
            else:
                code = describe(trace, rank=r.get("rank"), function=key[0], filename=key[1], line=key[2])
                seen[key] = code_label({**r, "code": {k: v for k, v in code.items() if k != "call_site"}},
                                       lambda f, ln: f"{brief(f)}:{ln}" if f else "?")
        return seen[key]

    return name


def _grid(report: dict[str, Any], comps: _Compiles, name: Any) -> dict[str, Any] | None:
    """Compile ids x ranks: one row per compile id, named (`[0/1] TinyNet.forward
    (multirank.py:31)`, the name most ranks compiled under that id), one column per rank, each
    cell the compile's status (white: not compiled on that rank). The ranks of
    `rank_divergence` are red columns, their extra compiles outlined. Rows, not columns, hold
    the names: they are read across, and 48 ranks make 48 narrow columns."""
    ranks = [r for r in report["ranks"] if r is not None]
    if len(ranks) < 2:
        return None
    status: dict[tuple[int, str], str] = {}
    anchors: dict[tuple[int, str], str] = {}
    names: dict[str, dict[str, list[int]]] = {}
    for r in comps.rows:
        if r["rank"] is None:
            continue
        k = (r["rank"], r["compile_id"])
        s = _status(r)
        status[k] = s if k not in status or status[k] == "finished" else status[k]
        anchors.setdefault(k, r["anchor"])
        ranks_of = names.setdefault(r["compile_id"], {}).setdefault(name(r), [])
        if r["rank"] not in ranks_of:
            ranks_of.append(r["rank"])
    ids = sorted({cid for _, cid in status}, key=sort_key)
    div = {d["rank"]: d for d in report["rank_divergence"]}
    cell, pitch = 15, 17
    size = 11.0
    rows, labels = [], []
    for cid in ids:
        by_name = sorted(names[cid].items(), key=lambda kv: (-len(kv[1]), kv[0]))
        label = f"[{cid}] {by_name[0][0]}" + (f" (+{len(by_name) - 1} other)" if len(by_name) > 1 else "")
        tip = f"[{cid}] " + "; ".join(f"{n} on {ranks_text(rs).strip()}" for n, rs in by_name)
        labels.append(fit_label(label))
        rows.append({"cid": cid, "label": labels[-1], "tip": tip})
    label_w = _label_width(labels, 80)
    rotate = max(len(str(r)) for r in ranks) > 2  # "47" fits a column; "1023" is turned upright
    top = round(text_px(str(max(ranks)), size) + 12) if rotate else 18
    for i, row in enumerate(rows):
        row["y"] = top + i * pitch
        row["cells"] = []
        for j, rank in enumerate(ranks):
            st = status.get((rank, row["cid"]))
            extra = row["cid"] in set((div.get(rank) or {}).get("extra_compile_ids") or [])
            row["cells"].append({
                "x": label_w + j * pitch, "status": st or "missing", "odd": extra, "anchor": anchors.get((rank, row["cid"])),
                "tip": f"rank {rank} [{row['cid']}]: {STATUS_WORDS.get(st, st.replace('_', ' ')) if st else 'not compiled on this rank'}",
            })
    cols = [{"rank": rank, "x": label_w + j * pitch, "mid": label_w + j * pitch + cell / 2,
             "divergent": rank in div, "detail": div[rank]["detail"] if rank in div else ""} for j, rank in enumerate(ranks)]
    return {
        "rows": rows, "cols": cols, "cell": cell, "pitch": pitch, "label_w": label_w, "top": top, "rotate": rotate,
        "width": round(label_w + len(ranks) * pitch + 10), "height": top + len(ids) * pitch + 6,
    }


def _schedules(report: dict[str, Any], comps: _Compiles) -> dict[str, Any] | None:
    """Each collectives mismatch drawn: the two groups of ranks' schedules side by side, one
    row per collective in order, the first that differs marked (the report's `position`), a
    few collectives around it (the rest counted). The words are the analyzer's (`kind`, the
    ops and tensors); nothing is compared here."""
    mismatches = (report.get("collectives") or {}).get("mismatches") or []
    if not mismatches:
        return None
    out = []
    for m in mismatches[:SCHEDULES_DRAWN]:
        mine, ref = m.get("schedule") or [], m.get("other_schedule") or []
        cid, other_cid = m.get("compile_id"), m.get("other_compile_id") or m.get("compile_id")
        p = int(m.get("position") or 0)
        rows = range(max(p - SCHEDULE_CONTEXT, 0), min(max(len(mine), len(ref)), p + SCHEDULE_CONTEXT + 1))
        note = _SCHEDULE_MARK.get(m.get("kind") or "", "differs")
        where = _where({"function": m.get("function"), "filename": m.get("filename"), "line": m.get("line")})
        out.append({
            "title": f"[{cid}] {where}" + (" backward" if m.get("graph_index") else ""),
            "sides": [_schedule_side(comps, m.get("ranks") or [], cid, mine, rows, p, note),
                      _schedule_side(comps, m.get("other_ranks") or [], other_cid, ref, rows, p, note)],
            "before": rows.start, "after": max(len(mine), len(ref)) - rows.stop, "position": p + 1,
            "recompile": m.get("recompile_reason"),
        })
    return {"drawn": out, "more": max(len(mismatches) - SCHEDULES_DRAWN, 0)}


# how the first collective that differs is marked, by the mismatch's `kind`
_SCHEDULE_MARK = {"extra": "no partner", "missing": "no partner", "size": "size differs", "dtype": "dtype differs",
                  "op": "op differs"}


def _schedule_side(comps: _Compiles, ranks: list[int], compile_id: Any, items: list[dict[str, Any]], rows: range,
                   p: int, note: str) -> dict[str, Any]:
    """One group of ranks' column of a drawn schedule: its collectives `rows`, the one at `p`
    (the first that differs) marked with `note`, or "absent" where the group issues none there."""
    cells = []
    for i in rows:
        c = items[i] if i < len(items) else None
        state = "same" if i < p else "differs" if i == p else "after"
        cells.append({
            "n": i + 1, "state": state if c else ("absent" if i == p else "blank"),
            "op": c["op"] if c else "", "tensor": _tensor_text(c) if c else "", "note": note if i == p and c else "",
        })
    first = sorted(ranks)[0] if ranks else None
    return {"ranks": ranks_text(ranks).strip(), "cid": compile_id, "anchor": comps.anchor(first, compile_id),
            "cells": cells, "count": len(items)}


def _tensor_text(c: dict[str, Any]) -> str:
    shape = c.get("shape")
    if shape is None and c.get("dtype") is None:
        return "tensor of unknown size"
    return f"{c.get('dtype') or '?'}{list(shape) if shape is not None else '[?]'}"


# ---------------------------------------------------------------------------- details
class _Blobs:
    """Texts stored once in the page (by content), cut to a bounded size."""

    def __init__(self) -> None:
        self.texts: dict[str, dict[str, Any]] = {}
        self.chars = 0

    def add(self, text: str, *, cut: bool = True) -> str:
        key = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        if key not in self.texts:
            limit = PAYLOAD_CHARS if self.chars < PAYLOAD_BUDGET else PAYLOAD_CHARS_LATE
            shown, left = (text[:limit], len(text) - limit) if cut and len(text) > limit else (text, 0)
            self.chars += len(shown)
            self.texts[key] = {"id": key, "text": shown, "left": left}
        return key


def _payloads(trace: Trace, comps: _Compiles, blobs: _Blobs) -> dict[str, list[dict[str, str]]]:
    """Each compile's graph and code payloads (anchor -> [{label, blob}]), read from the
    inputs for these events only."""
    index = trace.index_events()
    if "payload_start" not in index.columns:  # read from tables (an export): payloads are in events
        index = trace.events
    if not index.height:
        return {}
    label = pl.when(pl.col("kind") == "artifact").then(pl.col("name")).otherwise(pl.col("kind"))
    events = index.filter(label.is_in(list(PAYLOAD_KINDS)) & pl.col("compile_id").is_not_null())
    if not events.height:
        return {}
    if "payload_start" in events.columns:
        events = _hydrate_distinct(events)
    starts: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for r in comps.rows:
        starts.setdefault((r["file"], r["compile_id"]), []).append((r["lineno"] or 0, r["anchor"]))
    for v in starts.values():
        v.sort()
    out: dict[str, list[dict[str, str]]] = {}
    order = list(PAYLOAD_KINDS)
    ev = events.select("file", "lineno", "kind", "name", "compile_id", "payload").to_dicts()
    for e in ev:
        cands = starts.get((e["file"], e["compile_id"]))
        if not cands or not e["payload"]:
            continue
        anchor = cands[0][1]
        for ln, a in cands:
            if ln <= e["lineno"]:
                anchor = a
        name = e["name"] if e["kind"] == "artifact" else e["kind"]
        out.setdefault(anchor, []).append({"label": PAYLOAD_KINDS[name], "blob": blobs.add(e["payload"]), "order": order.index(name)})
    for v in out.values():
        v.sort(key=lambda p: p["order"])
    return out


def _hydrate_distinct(events: pl.DataFrame) -> pl.DataFrame:
    """`events` with their payloads read from the inputs, each distinct payload once: the ranks
    of one job log the same graphs, and torch's md5 of each payload (`has_payload`) with its
    length names its text (48 ranks: one read instead of 48). A payload without an md5 is
    read on its own."""
    from parsers.torch_trace import hydrate

    key = pl.when(pl.col("payload_md5").is_not_null()).then(
        pl.concat_str(pl.col("payload_md5"), (pl.col("payload_end") - pl.col("payload_start")).cast(pl.String), separator=":")
    )
    ev = events.with_row_index("_row").with_columns(key.alias("_key"))
    first = ev.filter(pl.col("_key").is_null() | pl.col("_key").is_first_distinct())
    read, _ = hydrate(first.drop("_row", "_key"))
    read = read.with_columns(first["_row"], first["_key"])
    by_key = read.filter(pl.col("_key").is_not_null()).select("_key", pl.col("payload").alias("_payload"))
    out = ev.join(by_key, on="_key", how="left", maintain_order="left").join(
        read.filter(pl.col("_key").is_null()).select("_row", pl.col("payload").alias("_own")), on="_row", how="left", maintain_order="left"
    )
    return out.with_columns(pl.coalesce("_own", "_payload", "payload").alias("payload")).drop("_row", "_key", "_payload", "_own")


def _signatures(trace: Trace, keys: list[str]) -> pl.DataFrame:
    """Per compile (`keys`), a hash of what its kernels' origin is read from: its graphs' text
    (the nodes' `# File:` lines), its kernels and its wrapper's calls. Compiles with equal
    signatures (ranks that compiled alike) have equal kernel lists and origins."""
    parts = []
    for table, cols in ((trace.graphs, ["kind", "aot_id", "text"]),
                        (trace.kernels, ["graph", "name", "kind", "code"]),
                        (trace.kernel_calls, ["graph", "call_index", "name", "text", "reads", "writes"])):
        if table.height:
            parts.append(table.select(*keys, pl.struct(cols).hash(7).alias("h"), pl.lit(len(parts)).alias("t"),
                                      pl.col("lineno").rank("ordinal").over(keys).alias("i")))
    h = pl.concat(parts).with_columns(pl.col("occurrence").fill_null(1))
    return h.sort([*keys, "t", "i"], nulls_last=True).group_by(keys).agg(
        pl.col("h").hash(11).sum().alias("s1"), pl.len().alias("n"),
        (pl.col("h") * (pl.int_range(pl.len()) + 1)).sum().alias("s2"))


def _kernels(trace: Trace, comps: _Compiles, blobs: _Blobs) -> dict[str, dict[str, Any]]:
    """Each compile's kernels (anchor -> {blob, count}): the first KERNELS_PER_COMPILE in the
    wrapper's order, each with the user lines it computes where traceview knows them (origin's
    exact chains, as `traceview origin --kernel` gives them; no name-match guesses). Origins
    are read once per distinct compile (`_signatures`: 48 ranks that compiled alike cost one)
    and the list is text stored once per distinct list."""
    from traceview.analyze.origin import origin_table

    k = trace.kernels
    if not k.height:
        return {}
    keys = ["file", "rank", "compile_id", "occurrence"]
    k = k.with_columns(pl.col("occurrence").fill_null(1)).sort([*keys, "lineno", "order"], nulls_last=True)
    counts = {(f, r, c, o): n for f, r, c, o, n in k.group_by(keys).len().iter_rows()}
    k = k.filter(pl.int_range(pl.len()).over(keys) < KERNELS_PER_COMPILE)
    sig = _signatures(trace, keys).with_columns(pl.struct("s1", "s2", "n").hash().alias("sig"))
    sig = sig.join(k.select(keys).unique(), on=keys, nulls_equal=True)
    first = sig.sort(keys, nulls_last=True).unique("sig", keep="first", maintain_order=True).drop("sig", "s1", "s2", "n")
    rep = {tuple(r[:4]): r[4] for r in sig.select(*keys, "sig").iter_rows()}
    k_rep = k.join(first, on=keys, nulls_equal=True)
    o = origin_table(trace, kernel_rows=k_rep)
    lines: dict[str, list[str]] = {}
    for r in o.filter(pl.col("user_file").is_not_null()).iter_rows(named=True):
        where = f"{Path(r['user_file']).name}:{r['user_line']}"
        lines.setdefault(r["kernel_id"], []).append(f"{where}  {r['user_code'] or ''}".rstrip())
    texts: dict[Any, list[str]] = {}
    for r in k_rep.select(*keys, "kernel_id", "name", "kind", "graph").iter_rows(named=True):
        text = texts.setdefault(rep[(r["file"], r["rank"], r["compile_id"], r["occurrence"])], [])
        text.append(f"{r['name']}  ({r['kind']}, {r['graph'] or '?'})")
        got = lines.get(r["kernel_id"])
        if got:
            text.extend(f"    <- {x}" for x in got)
        else:
            text.append("    <- no source line recorded")
    out: dict[str, dict[str, Any]] = {}
    for key, s in rep.items():
        a = comps.anchors.get(key) or comps.anchor(key[1], key[2], key[3])
        if a is None or s not in texts:
            continue
        n = counts.get(key, 0)
        more = [f"... {n - KERNELS_PER_COMPILE} more kernels (traceview open / traceview origin --kernel NAME)"] if n > KERNELS_PER_COMPILE else []
        out[a] = {"count": n, "blob": blobs.add("\n".join([*texts[s], *more]), cut=False)}
    return out


def _details(trace: Trace, comps: _Compiles, blobs: _Blobs) -> list[dict[str, Any]]:
    gbs: dict[tuple[Any, Any, Any], list[str]] = {}
    g = trace.graph_breaks
    if g.height:
        for r in g.select("file", "compile_id", "occurrence", "filename", "line", "function", "reason").iter_rows(named=True):
            where = f"{r['filename'] or '?'}:{r['line']} in {r['function'] or '?'}"
            gbs.setdefault((r["file"], r["compile_id"], r["occurrence"]), []).append(f"{where}: {r['reason'] or '?'}")
    payloads = _payloads(trace, comps, blobs)
    processes = trace.compiles["file"].n_unique() if trace.compiles.height else 0
    kernels = _kernels(trace, comps, blobs) if processes <= KERNELS_MAX_PROCESSES else {}
    by_key = {(r["file"], r["compile_id"], r["occurrence"] or 1): r for r in comps.rows}
    out = []
    for r in comps.rows:
        cid = r["compile_id"]
        pred = None
        before = parse_compile_id(cid)
        before = before.previous() if before is not None else None
        if before is not None:
            prev = before.compile_id
            p = by_key.get((r["file"], prev, 1)) or next(
                (x for x in comps.rows if x["file"] == r["file"] and x["compile_id"] == prev), None
            )
            pred = {"anchor": p["anchor"], "cid": prev} if p else None
        cache = []
        for name, pre in (("FX graph", "fx_cache"), ("AOTAutograd", "aot_cache")):
            counts = [f"{r.get(f'{pre}_{k}') or 0} {k}" for k in ("hits", "misses", "bypasses") if r.get(f"{pre}_{k}")]
            if counts:
                cache.append(f"{name}: {', '.join(counts)}")
        stack = "\n".join(r["user_stack"] or [])
        call = f"{r['call_filename']}:{r['call_line']} in {r['call_function'] or '?'}: {r['call_code'] or ''}" if r.get("call_filename") else None
        where = f"{r['filename']}:{r['line']}" if r.get("filename") else ""
        fail = ": ".join(x for x in (r.get("fail_type"), r.get("fail_reason")) if x) or None
        breaks = gbs.get((r["file"], cid, r["occurrence"]), [])
        search = " ".join(str(x) for x in (
            f"[{cid}]", cid, f"[{r['label']}]" if r.get("label") else None, f"rank {r['rank']}" if r["rank"] is not None else "", compile_name(r), where, _status_text(r),
            fail, r.get("recompile_reason"), call, *breaks,
        ) if x)
        blob_ids = [p["blob"] for p in payloads.get(r["anchor"], [])]
        stack_blob = blobs.add(stack, cut=False) if stack else None
        kern = kernels.get(r["anchor"])
        out.append({
            "anchor": r["anchor"], "cid": cid, "rank": r["rank"], "occurrence": r["occurrence"] or 1,
            "label": r.get("label") or id_label(cid, r["occurrence"]),
            "function": compile_name(r), "where": where, "status": r.get("account_status") or "unknown", "status_text": _status_text(r),
            "fail": fail, "recompile": r.get("recompile_reason"), "call": call, "stack_blob": stack_blob,
            "breaks": breaks, "cache": cache, "pred": pred, "payloads": payloads.get(r["anchor"], []),
            "kernels": kern, "search": search.lower(),
            "blobs": " ".join([*([stack_blob] if stack_blob else []), *([kern["blob"]] if kern else []), *blob_ids]),
            "file": r["file"],
        })
    return out


# ---------------------------------------------------------------------------- page
def render_page(trace: Trace, report: dict[str, Any] | None = None) -> str:
    """The whole page as text."""
    import jinja2

    report = report if report is not None else build_report(trace)
    comps = _compiles(trace)
    head, findings, figures = _findings(report, comps)
    blobs = _Blobs()
    details = _details(trace, comps, blobs)
    names = _code_names(trace)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    template = env.from_string(TEMPLATE.read_text(encoding="utf-8"))
    return template.render(
        title=f"traceview: {report['compiles']} compiles" + (f" on {len(report['ranks'])} ranks" if report["ranks"] else ""),
        head=head, findings=findings, figures=figures, timeline=_timeline(trace, comps, names), functions=_by_function(report),
        grid=_grid(report, comps, names), schedules=_schedules(report, comps), compiles=details,
        blobs=list(blobs.texts.values()), phases=PHASES,
        payload_chars=PAYLOAD_CHARS,
        kernels_note=(
            f"Kernels are listed for inputs of up to {KERNELS_MAX_PROCESSES} processes; this one has more: "
            "traceview open (Graphs & kernels) or traceview origin --kernel NAME gives them with their source lines."
            if trace.compiles.height and trace.compiles["file"].n_unique() > KERNELS_MAX_PROCESSES else None
        ),
    )


def write_page(trace: Trace, out: str | os.PathLike[str], *, report: dict[str, Any] | None = None) -> tuple[Path, int]:
    """Write the page to `out` atomically; returns the path and its size in bytes. `report`:
    the trace's report when the caller has it (the cached findings document), else built."""
    data = render_page(trace, report).encode("utf-8", "replace")
    return write_atomically(out, data), len(data)
