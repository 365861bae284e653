"""`traceview report PATH... -o report.html`: the summary as one self-contained HTML page.

Findings first, exactly as `traceview summary` says them (`render_text` of `build_report`,
section by section, each with links to the compiles it is about); then pictures drawn here as
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
from parsers.compile_ids import sort_key
from traceview.analyze import compile_time as ct
from traceview.analyze.findings import code_label
from traceview.output.report import build_report, render_text
from traceview.output.timeline import compile_rows, write_atomically
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
PHASES = ("dynamo", "aot", "inductor", "autotuning", "other", "backward")


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
    c = trace.compiles.filter(pl.col("compile_id").is_not_null())
    rows = c.to_dicts()
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


# ---------------------------------------------------------------------------- findings
_ID_IN_TEXT = re.compile(r"\[(!?\d+(?:/\d+)+)(?: #(\d+))?[^\]\s]*\]")
_RANK_BEFORE = re.compile(r"\brank (\d+)(?:'s)? ")


def _linked_line(line: str, comps: _Compiles) -> Markup:
    """One line of the summary's text, escaped, with each `[compile id]` a link to it."""
    out: list[Any] = []
    pos = 0
    for hit in _ID_IN_TEXT.finditer(line):
        before = _RANK_BEFORE.findall(line[: hit.start()])  # the rank the line names last
        rank = int(before[-1]) if before else None
        a = comps.anchor(rank, hit.group(1), int(hit.group(2)) if hit.group(2) else None)
        if a is None:
            continue
        out.append(escape(line[pos : hit.start()]))
        out.append(Markup('<a href="#{}">{}</a>').format(a, hit.group(0)))
        pos = hit.end()
    out.append(escape(line[pos:]))
    return Markup("").join(out)


def _finding_targets(heading: str, report: dict[str, Any]) -> list[tuple[Any, Any, Any]]:
    """(rank, compile id, occurrence) of what a section of the summary is about, from the
    report's own rows (no second analysis)."""
    storms = report["recompiles"]
    if heading.startswith("EXPECTED RECOMPILES"):
        return [(s["rank"], c, None) for s in storms if s.get("expected") for c in s["compile_ids"]]
    if heading.startswith("RECOMPILES"):
        return [(s["rank"], c, None) for s in storms if not s.get("expected") for c in s["compile_ids"]]
    if heading.startswith("GRAPH BREAKS"):
        return [(r, c, None) for g in report["graph_breaks"] for r in (g["ranks"] or [None]) for c in g["compile_ids"]]
    if heading.startswith("FAILED"):
        return [(f["rank"], f["compile_id"], f.get("occurrence")) for f in report["failures"]]
    if heading.startswith("CRASHED"):
        return [(c.get("rank"), c.get("compile_id"), None) for c in report.get("crashes") or []]
    if heading.startswith("UNFINISHED"):
        return [(u.get("rank"), u.get("compile_id"), u.get("occurrence")) for u in report.get("unfinished_compiles") or []]
    if heading.startswith("COLLECTIVES"):  # the mismatched ranks' compile, then the others' (the same id unless named)
        return [(r, m.get(cid) or m.get("compile_id"), None)
                for m in (report.get("collectives") or {}).get("mismatches") or []
                for rs, cid in ((m.get("ranks"), "compile_id"), (m.get("other_ranks"), "other_compile_id"))
                for r in rs or []]
    if heading.startswith("RANK DIVERGENCE"):
        return [(d["rank"], c, None) for d in report["rank_divergence"] for c in (d.get("extra_compile_ids") or [d.get("compile_id")])]
    if heading.startswith("CUDA GRAPHS"):
        return [(f.get("rank"), f.get("compile_id"), None) for f in report["cudagraphs"]["findings"]]
    if heading.startswith("COMPILE TIME"):
        return [(t["rank"], t["compile_id"], t.get("occurrence")) for t in report["compile_time"]["top"]]
    if heading.startswith("FACTS"):
        facts = report.get("facts") or {}
        return [(f.get("rank"), f.get("compile_id"), f.get("occurrence")) for rows in facts.values() if isinstance(rows, list)
                for f in rows if isinstance(f, dict)]
    return []


def _findings(report: dict[str, Any], comps: _Compiles) -> tuple[list[Markup], list[dict[str, Any]]]:
    """The summary's text as the head lines and its sections, each with its links."""
    lines = render_text(report, width=TEXT_WIDTH).splitlines()
    blocks: list[list[str]] = [[]]
    for line in lines:
        if not line.strip():
            if blocks[-1]:
                blocks.append([])
            continue
        blocks[-1].append(line)
    blocks = [b for b in blocks if b]
    head, sections = blocks[0], []
    for b in blocks[1:]:
        heading = b[0]
        links, seen = [], set()
        for rank, cid, occ in _finding_targets(heading, report):
            a = comps.anchor(rank, cid, occ)
            if a and a not in seen:
                seen.add(a)
                links.append({"anchor": a, "label": (f"rank {rank} " if rank is not None else "") + str(cid)})
        kind = "facts" if heading.startswith(("FACTS", "COMPILE TIME", "PER RANK", "INPUT", "EXPECTED")) else "problem"
        sections.append({
            "heading": _linked_line(heading, comps),
            "lines": [_linked_line(x, comps) for x in b[1:]],
            "links": links[:LINKS_PER_FINDING],
            "more_links": max(len(links) - LINKS_PER_FINDING, 0),
            "kind": kind,
        })
    return [_linked_line(x, comps) for x in head], sections


# ---------------------------------------------------------------------------- pictures
def _phases(r: dict[str, Any], autotune: float) -> list[tuple[str, float]]:
    """A forward compile's seconds split as the compiles table has them: dynamo, AOT (the
    backend's time outside Inductor), Inductor (less its autotuning), autotuning, other."""
    total = r.get("compile_time_s") or 0.0
    dyn = r.get("dynamo_time_s") or 0.0
    backend = r.get("backend_compile_time_s") or 0.0
    ind = min(r.get("inductor_compile_time_s") or 0.0, backend) if backend else (r.get("inductor_compile_time_s") or 0.0)
    at = min(autotune, ind)
    parts = [("dynamo", dyn), ("aot", max(backend - ind, 0.0)), ("inductor", ind - at), ("autotuning", at)]
    parts.append(("other", max(total - sum(p for _, p in parts), 0.0)))
    return [(k, v) for k, v in parts if v > 0]


def _timeline(trace: Trace, comps: _Compiles, width: int = 1000) -> dict[str, Any] | None:
    rows = compile_rows(trace)
    if not rows.height:
        return None
    at = {(f, c, o): s for f, c, o, s in ct.autotuning_by_compile(trace).select(
        "file", "compile_id", "occurrence", "autotuning_s").iter_rows()}
    by_key = {(r["file"], r["rank"], r["compile_id"], r["occurrence"] or 1): r for r in comps.rows}
    ends = (rows["offset_s"] + rows["dur_us"].fill_null(0) / 1e6).max() or 0.0
    span = max(float(ends), 1e-3)
    lanes: dict[int, dict[str, Any]] = {}
    lane_h, gap, label_w = 14, 6, 110
    for r in rows.iter_rows(named=True):
        pid = r["process"]
        lane = lanes.setdefault(pid, {"label": r["process_label"], "bars": []})
        key = (r["file"], r["rank"], r["compile_id"], r["occurrence"] or 1)
        c = by_key.get(key, {})
        x = label_w + r["offset_s"] / span * width
        dur = (r["dur_us"] or 0) / 1e6
        segs = []
        if r["part"] == "backward":
            segs = [("backward", dur)]
        elif c:
            segs = _phases(c, at.get((r["file"], r["compile_id"], r["occurrence"]), 0.0) or 0.0)
        w_total = max(dur / span * width, 1.0)
        pos, pieces = x, []
        tot = sum(s for _, s in segs) or 1.0
        for name, s in segs or [("other", dur)]:
            w = w_total * (s / tot)
            pieces.append({"phase": name, "x": round(pos, 1), "w": round(max(w, 0.3), 1)})
            pos += w
        status = r["status"] or ""
        recompile = bool(r["recompile_reason"])
        tip = f"rank {r['rank']} [{r['compile_id']}] {r['function'] or '?'}: {r['part']} {dur:.3f}s"
        tip += f" (total {r['total_time_s'] or 0:.3f}s)" if r["part"] == "forward" else ""
        if segs and r["part"] == "forward":
            tip += "; " + ", ".join(f"{n} {s:.3f}s" for n, s in segs)
        if status not in ("ok", ""):
            tip += f"; {status}"
        if recompile:
            tip += f"; recompile: {r['recompile_reason'][:200]}"
        lane["bars"].append({
            "part": r["part"], "pieces": pieces, "x": round(x, 1), "w": round(w_total, 1), "tip": tip,
            "failed": status == "failed", "recompile": recompile, "anchor": c.get("anchor"), "cid": r["compile_id"],
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
        ticks.append({"x": round(label_w + t / span * width, 1), "label": f"{t:g}s"})
        t += step
    return {
        "lanes": out_lanes, "width": label_w + width + 20, "height": 30 + len(out_lanes) * (lane_h + gap),
        "lane_h": lane_h, "ticks": ticks, "label_w": label_w, "span": span,
    }


def _tick_step(span: float) -> float:
    for s in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600):
        if span / s <= 10:
            return float(s)
    return span / 10


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
            "y": 10 + i * 22, "w": round(max(float(r["seconds"] or 0) / top * width, 1), 1), "label": label,
            "value": f"{float(r['seconds'] or 0):.2f}s in {r['compiles']} compile{'s' if r['compiles'] != 1 else ''}",
        })
    return {"bars": bars, "height": 20 + len(bars) * 22, "width": width, "label_w": 380}


def _grid(report: dict[str, Any], comps: _Compiles) -> dict[str, Any] | None:
    """Ranks x compile ids, each cell the compile's status; divergent ranks highlighted."""
    ranks = [r for r in report["ranks"] if r is not None]
    if len(ranks) < 2:
        return None
    status: dict[tuple[int, str], str] = {}
    anchors: dict[tuple[int, str], str] = {}
    for r in comps.rows:
        if r["rank"] is None:
            continue
        k = (r["rank"], r["compile_id"])
        s = r["status"] or "ok"
        status[k] = s if k not in status or status[k] == "ok" else status[k]
        anchors.setdefault(k, r["anchor"])
    ids = sorted({cid for _, cid in status}, key=sort_key)
    div = {d["rank"]: d for d in report["rank_divergence"]}
    cell, label_w, top = 12, 70, 60
    rows = []
    for i, rank in enumerate(ranks):
        d = div.get(rank)
        extra = set(d.get("extra_compile_ids") or []) if d else set()
        cells = []
        for j, cid in enumerate(ids):
            st = status.get((rank, cid))
            cells.append({
                "x": label_w + j * cell, "status": st or "missing", "odd": cid in extra,
                "anchor": anchors.get((rank, cid)), "tip": f"rank {rank} [{cid}]: {st or 'not compiled on this rank'}",
            })
        rows.append({"rank": rank, "y": top + i * cell, "cells": cells, "divergent": d is not None,
                     "detail": d["detail"] if d else ""})
    return {
        "rows": rows, "ids": [{"x": label_w + j * cell + cell / 2, "cid": c} for j, c in enumerate(ids)],
        "cell": cell, "width": label_w + len(ids) * cell + 20, "height": top + len(ranks) * cell + 10, "label_w": label_w,
        "top": top,
    }


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
        from parsers.torch_trace import hydrate

        events, _ = hydrate(events)
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
        parts = cid.split("/")
        if parts[-1].isdigit() and int(parts[-1]) > 0:
            prev = "/".join([*parts[:-1], str(int(parts[-1]) - 1)])
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
            f"[{cid}]", cid, f"rank {r['rank']}" if r["rank"] is not None else "", r.get("function"), where, r.get("status"),
            fail, r.get("recompile_reason"), call, *breaks,
        ) if x)
        blob_ids = [p["blob"] for p in payloads.get(r["anchor"], [])]
        stack_blob = blobs.add(stack, cut=False) if stack else None
        kern = kernels.get(r["anchor"])
        out.append({
            "anchor": r["anchor"], "cid": cid, "rank": r["rank"], "occurrence": r["occurrence"] or 1,
            "function": r.get("function") or "?", "where": where, "status": r.get("status") or "",
            "seconds": f"{r['total_time_s']:.3f}s" if r.get("total_time_s") is not None else "no time logged",
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
    head, sections = _findings(report, comps)
    blobs = _Blobs()
    details = _details(trace, comps, blobs)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    template = env.from_string(TEMPLATE.read_text(encoding="utf-8"))
    return template.render(
        title=f"traceview: {report['compiles']} compiles" + (f" on {len(report['ranks'])} ranks" if report["ranks"] else ""),
        head=head, sections=sections, timeline=_timeline(trace, comps), functions=_by_function(report),
        grid=_grid(report, comps), compiles=details, blobs=list(blobs.texts.values()), phases=PHASES,
        payload_chars=PAYLOAD_CHARS,
        kernels_note=(
            f"Kernels are listed for inputs of up to {KERNELS_MAX_PROCESSES} processes; this one has more: "
            "traceview open (Graphs & kernels) or traceview origin --kernel NAME gives them with their source lines."
            if trace.compiles.height and trace.compiles["file"].n_unique() > KERNELS_MAX_PROCESSES else None
        ),
    )


def write_page(trace: Trace, out: str | os.PathLike[str]) -> tuple[Path, int]:
    """Write the page to `out` atomically; returns the path and its size in bytes."""
    data = render_page(trace).encode("utf-8", "replace")
    return write_atomically(out, data), len(data)
