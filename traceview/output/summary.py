"""The summary as text: the report's typed findings (traceview.analyze.finding) and the figures
after them, laid out for a terminal, most important first.

`render_text(report)` renders what `build_report` made (traceview.output.report) or what the
cached findings document holds (traceview.output.findings_document): it never judges, and it
imports neither polars nor the analyzers, so a cached summary costs reading one file. Every
line passes through `printable`: log text is data (an ANSI escape shows as `^[`, a `[bold]`
stays literal).
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from parsers.compile_ids import bracketed, is_frameless, sort_key
from traceview.analyze.finding import KIND_WORDS, SECTION_OF, Finding, findings_of
from traceview.analyze.findings import (
    group_ranks,
    per_rank_key,
    ranks_text,
    slow_compile_key,
    text_log_only,
)
from traceview.analyze.wording import (
    BYPASS_CAUSES,
    CACHE_NAMES,
    Paths,
    asserts_text,
    bypass_consequence,
    phases_text,
    plural,
    rank_prefix,
    seconds_text,
)
from traceview.printable import one_line, printable


def clean_line(text: Any) -> str:
    """One line of log text made safe to print: control characters visible, no tabs/newlines."""
    return printable(str(text if text is not None else "")).replace("\t", " ").replace("\n", " ")



class _Text:
    def __init__(self, width: int) -> None:
        self.width = width
        self.lines: list[str] = []

    def add(self, text: str = "", indent: str = "", rest: str | None = None) -> None:
        """Add `text` wrapped to the width: first line after `indent`, the others after `rest`."""
        text = clean_line(text)
        if not text:
            self.lines.append(indent.rstrip())
            return
        self.lines.extend(
            textwrap.wrap(
                text,
                width=self.width,
                initial_indent=indent,
                subsequent_indent=rest if rest is not None else indent + "    ",
                break_long_words=True,
                break_on_hyphens=False,
            )
        )

    def label(self, label: str, text: str, indent: str = "    ") -> None:
        """`label: text` with continuation lines aligned under the text."""
        self.add(f"{label} {clean_line(text)}", indent, indent + " " * (len(label) + 1))

    def heading(self, text: str) -> None:
        self.lines.append("")
        self.add(text, "", "  ")


def title_line(report: dict[str, Any]) -> str:
    """`traceview: 13 compiles on 2 ranks from 2 log files`: what was read."""
    ranks = report["ranks"]
    inp = report["inputs"]
    nfiles = len(inp["trace_files"]) + len(inp["text_logs"])
    debug = inp.get("debug_dirs") or []
    if text_log_only(report) and debug and not report["compile_ids_in_text_logs"]:
        head = f"traceview: {plural(sum(d['graphs'] for d in debug), 'Inductor graph')}"
    elif text_log_only(report):
        head = f"traceview: {plural(report['compile_ids_in_text_logs'], 'compile id')} in the text log"
    else:
        head = f"traceview: {report['compiles']} compiles"  # tests of other commands read this form
    head += f" on {plural(len(ranks), 'rank')}" if ranks else ""
    head += f" from {plural(nfiles, 'log file')}" if nfiles or not debug else " from"
    if debug:
        head += f"{' and' if nfiles else ''} {plural(len(debug), 'TORCH_COMPILE_DEBUG folder')}"
    if inp.get("runs") and inp["runs"] > 1:
        head += f" ({inp['runs']} runs; --latest keeps the newest)"
    return head


def head_lines(report: dict[str, Any]) -> list[str]:
    """The summary's head under its title: the head line the report keeps (`head`, computed once
    from the typed findings by traceview.analyze.judge.head_lines), printed as it is."""
    return [str(x) for x in report.get("head") or []]


def _render_head(t: _Text, report: dict[str, Any]) -> None:
    t.add(title_line(report), "", "    ")
    t.lines.append("=" * min(max(len(x) for x in t.lines), t.width))
    for line in head_lines(report):
        t.add(line, "", "    ")


def render_head(report: dict[str, Any], *, width: int = 80) -> str:
    """The summary's head (its title, rule and `findings:` lines) as the summary prints it:
    `watch`'s digest."""
    t = _Text(max(width, 60))
    _render_head(t, report)
    return "\n".join(t.lines)


def render_text(report: dict[str, Any], *, width: int = 80) -> str:
    """The summary for a terminal, most important first; no line longer than `width`."""
    t = _Text(max(width, 60))
    findings = findings_of(report)
    _render_head(t, report)
    _render_findings(t, report, findings)
    _render_figures(t, report)
    return "\n".join(t.lines) + "\n"


def render_figures(report: dict[str, Any], *, width: int = 80) -> str:
    """What the summary shows after the findings: FACTS, COMPILE TIME, PER RANK, INPUT."""
    t = _Text(max(width, 60))
    _render_figures(t, report)
    return "\n".join(t.lines).strip("\n") + "\n"


def _render_figures(t: _Text, report: dict[str, Any]) -> None:
    paths = Paths(report)
    _render_facts(t, report, paths)
    _render_time(t, report, paths, text_log_only(report))
    _render_ranks_and_inputs(t, report)


# where an abridged finding's details are (the summary prints none of them)
DETAILS_ELSEWHERE = " (details: --json, traceview open)"

# Sections of the summary: (kind, severity) -> how many findings it shows before "… N more".
_SHOWN = {"unfinished": 8, "storm": 8, "recompile": 8, "expected": 8, "fixed": 8, "graph_break": 10, "failure": 10,
          "cudagraphs": 10, "divergence": 16, "compile_time": 5}


def _section_heading(kind: str, severity: str, fs: list[Finding], report: dict[str, Any]) -> str:
    """A section's heading: its words from the one table beside the kinds (KIND_WORDS), with
    what its findings are, counted."""
    words = KIND_WORDS.get(kind)
    if words is None:
        return kind.upper()
    about = words.about
    if isinstance(about, dict):
        if kind == "collectives":
            facets = {f.facet for f in fs}
            about = about["mismatch" if "mismatch" in facets else "wait" if "wait" in facets else "execution"]
        elif kind == "divergence":
            ranks = report.get("ranks") or []
            pair = len(ranks) == 2 and None not in ranks  # no majority of two: said so
            about = about["pair" if pair else "majority"]
        else:
            about = about.get(severity, about["act"])
    n = sum(len(f.ranks) for f in fs)
    ranks = report.get("ranks") or [None, None]
    about = about.format(
        functions=plural(len({f.code for f in fs}), "function"), distinct=len(fs), total=sum(f.count for f in fs),
        failed=sum(f.count for f in fs), ranks=f"{plural(n, 'rank')} {'differs' if n == 1 else 'differ'}",
        first=ranks[0], second=ranks[-1],
    )
    section = words.section
    if kind == "graph_break" and severity in ("expected", "fact"):
        section = "EXPECTED GRAPH BREAKS" if severity == "expected" else "GRAPH BREAKS FIXED LATER"
    return f"{section}  {about}" if about else section


def render_sections(report: dict[str, Any], findings: list[Finding], *, width: int = 80) -> str:
    """The summary's sections of `findings` (some of the report's list, in its order) as the
    summary prints them: `watch` says with them how a job ended."""
    t = _Text(max(width, 60))
    _render_findings(t, report, findings, cudagraphs=False)
    return "\n".join(t.lines)


def _render_findings(t: _Text, report: dict[str, Any], findings: list[Finding], *, cudagraphs: bool = True) -> None:
    """The findings, in their one order: a section per kind (where its most costly finding
    ranks), each finding its claim then its lines (`cudagraphs`: and the CUDA-graph counts
    where no finding of theirs shows them)."""
    sections: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        sections.setdefault((SECTION_OF.get(f.kind, f.kind), f.severity), []).append(f)
    cg_shown = False
    for (kind, severity), fs in sections.items():
        if kind == "cudagraphs":
            _render_cudagraphs(t, report["cudagraphs"], fs)
            cg_shown = True
            continue
        t.heading(_section_heading(kind, severity, fs, report))
        shown = _SHOWN.get(kind, len(fs))
        for f in fs[:shown]:
            lines = f.lines
            if f.abridged:  # the whole is in the details, which only --json and the UI show
                lines = [*lines[:-1], (lines[-1][0], lines[-1][1] + DETAILS_ELSEWHERE)] if lines else [("", DETAILS_ELSEWHERE.strip())]
            t.add(f.claim, "  ", "      ")
            for label, text in lines:
                if label:
                    t.label(label, text)
                else:
                    t.add(text, "    ", "      ")
        if len(fs) > shown:
            t.add(f"… {len(fs) - shown} more (--json lists all)", "  ")
    if cudagraphs and not cg_shown and report.get("cudagraphs", {}).get("cudagraphified_compiles"):
        _render_cudagraphs(t, report["cudagraphs"], [])


def _render_cudagraphs(t: _Text, cg: dict[str, Any], found: list[Finding]) -> None:
    if not cg["text_log_rows"]:
        t.heading(f"CUDA GRAPHS  {plural(cg['cudagraphified_compiles'], 'compile')} handed to CUDA graphs (reduce-overhead)")
        t.add("whether they were graphed is not in the trace: add TORCH_LOGS=cudagraphs to see the code left out "
              "of CUDA graphs and why, the graphs recorded per shape, and the re-records", "  ", "  ")
        if not found:
            return
    else:
        t.heading(
            f"CUDA GRAPHS  {plural(len(found), 'finding') if found else 'nothing to fix'}; "
            f"{plural(cg['recorded_graphs'], 'graph')} recorded, "
            f"{cg['non_cudagraphable_partitions']} of {plural(cg['partitions'], 'partition')} not cudagraphable"
        )
    for f in found[:10]:
        t.add(f.claim, "  ", "      ")
        for label, text in f.lines:
            t.label(label, text)
    if len(found) > 10:
        t.add(f"… {len(found) - 10} more (--json lists all)", "  ")
    funcs = cg.get("functions") or []
    if funcs:
        per = ", ".join(f"{ranks_text([r['rank']])}{r['function'] or '?'} {r['graphs']}" for r in funcs[:6])
        more = f", … {len(funcs) - 6} more" if len(funcs) > 6 else ""
        t.label("graphs per function:", per + more, "  ")


def unbacked_line(u: dict[str, Any], show: Any, *, with_compile: bool = True) -> str:
    """One FACTS line for a group of unbacked symbols (compile_facts.unbacked_symbols):
    `[1/0] u0-u3: data-dependent sizes from torch.nonzero at moe.py:30 (code); runtime asserts:
    each >= 0; graph break at moe.py:31: Data-dependent branching (gb0170)`. `show`: the
    report's short path of (filename, line); `with_compile`: lead with the rank and compile id
    (not where the compile is shown already: the TUI's compile detail)."""
    head = f"{rank_prefix(u.get('rank'))}{bracketed(u['compile_id'], u.get('occurrence'))} " if with_compile else ""
    head += u["symbols_text"]
    op = u.get("op") or "a data-dependent op"
    what = "sizes" if len(u["symbols"]) > 1 else "size"
    if u.get("user_line") is None:
        if u.get("created_by") == "backend":
            return f"{head}: data-dependent {what} from {op}, re-created by the backend re-tracing the graph (no user line of their own)"
        return f"{head}: data-dependent {what} from {op} (the log names no user line)"
    code = f" ({u['user_code']})" if u.get("user_code") else ""
    line = f"{head}: data-dependent {what} from {op} at {show(u['user_file'], u['user_line'])}{code}"
    if a := asserts_text(u["symbols"], u.get("asserts") or []):
        line += f"; runtime asserts: {a}"
    for b in u.get("graph_breaks") or []:
        gb = f" ({b['gb_id']})" if b.get("gb_id") else ""
        line += f"; graph break at {show(b['filename'], b['line'])}: {one_line(b.get('reason') or '?', 120)}{gb}"
    return line


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _layers_text(layers: list[str]) -> str:
    if not layers:
        return "no parameters"
    if len(layers) <= 3:
        return ", ".join(layers)
    return f"{layers[0]} … {layers[-1]} ({len(layers)} modules)"


def ddp_split_line(d: dict[str, Any], show: Any) -> str:
    """One FACTS line for a DDPOptimizer split (compile_facts.ddp_splits): the pieces with
    their layers and parameter bytes, that it is not a graph break, the FX cache over the
    pieces' compiles per rank."""
    sizes = d["param_bytes"]
    layers = d.get("layers") or [[] for _ in sizes]
    who = f" on {ranks_text(d['ranks']).strip()}" if ranks_text(d["ranks"]) else ""
    fn = f" {d['function']} ({show(d.get('filename'), d.get('line'))})" if d.get("function") else ""
    pieces = "; ".join(
        f"{name}: {_layers_text(lay)} ({'?' if b is None else _mib(b)})"
        for name, lay, b in zip(d.get("names") or [], layers, sizes, strict=False)
    )
    nobreak = " (the compile logged none)" if d.get("graph_breaks") == 0 else ""
    line = (
        f"DDPOptimizer split {bracketed(d['compile_id'], d.get('occurrence'), d.get('attempts'))}{fn}{who} into "
        f"{plural(d['submodules'], 'submodule')} at the gradient-bucket boundaries, by design "
        f"(torch._dynamo.config.optimize_ddp, on by default: each bucket's all-reduce overlaps the backward of the "
        f"pieces before it); not graph breaks{nobreak}. Parameters per submodule, in graph order: {pieces}; "
        "each submodule is compiled on its own"
    )
    cache = d.get("fx_cache") or []
    if cache:
        by: dict[tuple[int, int], list[Any]] = {}
        for c in cache:
            by.setdefault((c["hits"], c["misses"]), []).append(c["rank"])
        per = ", ".join(
            f"{ranks_text(rs).strip() or 'the process'}{' each' if len(rs) > 1 else ''} {h} hits / {m} misses"
            for (h, m), rs in by.items()
        )
        hit = any(c["hits"] for c in cache)
        line += (
            f"; FX graph cache over the submodules' compiles (forward and backward): {per}"
            + (" (identical submodules compiled once and served from the cache)" if hit else "")
        )
    return line


def ddp_unsplit_line(d: dict[str, Any], show: Any) -> str:
    """One FACTS line for a DDP module's forward compiled with optimize_ddp=False
    (compile_facts.ddp_unsplit)."""
    who = f" on {ranks_text(d['ranks']).strip()}" if ranks_text(d["ranks"]) else ""
    return (
        f"optimize_ddp=False: {bracketed(d['compile_id'], d.get('occurrence'))} {d.get('function') or '?'} "
        f"({show(d.get('filename'), d.get('line'))}){who}, the module under DistributedDataParallel, compiled as one graph, "
        "not split at DDP's gradient buckets: DDP's all-reduce (a hook in the backward) can start only after the whole "
        "compiled backward ran, so communication no longer overlaps the backward's compute. torch._dynamo.config."
        "optimize_ddp = True (the default) splits it; keep it off only if the split itself is the problem"
    )


def _render_facts(t: _Text, report: dict[str, Any], paths: Paths) -> None:
    """How torch compiled: not problems by themselves, but they explain the rest."""
    f = report.get("facts") or {}
    lines: list[str] = []
    for sp in f.get("specializations", []):
        at = f" at {paths.show(sp['user_file'], sp['user_line'])}" if sp.get("user_file") else ""
        code = f" ({sp['user_code']})" if sp.get("user_code") else ""
        lines.append(
            f"{bracketed(sp['compile_id'], sp.get('occurrence'), sp.get('attempts'))} {sp.get('source') or sp['symbol']} specialized to {sp['value']}{at}{code}: "
            f"a dynamic dimension forced to a constant ({sp['reason']}); "
            + ("the exported program accepts only this size" if is_frameless(sp["compile_id"])
               else "torch.export (no compile): the exported program assumes this value" if sp["compile_id"] is None
               else "another size will recompile")
        )
    for d in f.get("export_dims", []):
        if d.get("specialized_to") is not None:
            continue  # said above
        at = f", exported at {paths.show(d['user_file'], d['user_line'])}" if d.get("user_file") else ""
        lines.append(
            f"{bracketed(d['compile_id'], d.get('occurrence'), d.get('attempts'))} export: {d.get('source') or d['symbol']} is dynamic ({d['symbol']}, range {d.get('range') or '?'}, "
            f"traced with {d.get('example')}){at}: the compiled program accepts any size in that range"
        )
    for u in f.get("unbacked_symbols", []):
        lines.append(unbacked_line(u, paths.show))
    for p in f.get("pgo", []):
        if p["action"] == "get":
            dyn = f": starts with {p['detail']}" if p.get("detail") and "?" in p["detail"] else ""
            lines.append(
                f"{bracketed(p['compile_id'], p.get('occurrence'), p.get('attempts'))} PGO profile read ({p.get('where') or 'local'} code state){dyn}: this run "
                "starts with the dimensions an earlier run found dynamic, so it recompiles less"
            )
        else:
            lines.append(f"{bracketed(p['compile_id'], p.get('occurrence'), p.get('attempts'))} PGO profile written" + (f" ({p['detail']})" if p.get("detail") else ""))
    cag = f.get("compiled_autograd_graphs", [])
    if cag:
        ids = ", ".join(g["id"] + (f" (compiled as {', '.join(g['compiles'])})" if g["compiles"] else "") for g in cag)
        lines.append(f"{plural(len(cag), 'compiled-autograd graph')} (backward captured by compiled autograd): {ids}")
    for h in f.get("higher_order_ops", []):
        n = f" x{h['count']}" if h["count"] > 1 else ""
        lines.append(f"{bracketed(h['compile_id'], h.get('occurrence'), h.get('attempts'))} higher-order op {h['op']}{n} in the captured graph")
    for d in f.get("ddp_splits", []):
        lines.append(ddp_split_line(d, paths.show))
    for d in f.get("draft_export_issues", []):
        at = f" at {paths.show(d['user_file'], d['user_line'])}" if d.get("user_file") else ""
        code = f" ({d['user_code'].strip()})" if d.get("user_code") else ""
        lines.append(
            f"draft_export: {d.get('expr') or '?'}{at}{code} could not be decided from shapes; decided from the example "
            f"input ({d.get('result') or '?'}) with a runtime assert: the exported program assumes it for every input "
            "(if other inputs can differ: torch._check states it, torch.cond / torch.where keep both cases)"
        )
    for d in f.get("ddp_unsplit", []):
        lines.append(ddp_unsplit_line(d, paths.show))
    for b in f.get("cache_bypasses", []):
        lines.append(_bypass_line(b))
    # lookups a text log gave (the trace has none of them): what COMPILE TIME cannot show
    # for a text log alone; counted once with the trace's (compile_time.cache_counts)
    by_compile = (report.get("cache") or {}).get("text_log_by_compile") or []
    for cache in ("fx_graph", "aot_autograd"):
        mine = [c for c in by_compile if c["cache"] == cache]
        if not mine:
            continue
        n = {e: sum(c["count"] for c in mine if c["event"] == e) for e in ("hit", "miss", "bypass")}
        if not n["hit"] and not n["miss"]:
            continue  # bypasses only: the bypass facts above say them
        ids = []
        for e, word in (("hit", "hit"), ("miss", "missed"), ("bypass", "bypassed")):
            cids = sorted({c["compile_id"] or "?" for c in mine if c["event"] == e}, key=sort_key)
            if cids:
                ids.append(f"{word} in {', '.join(cids[:6])}" + (f" … {len(cids) - 6} more" if len(cids) > 6 else ""))
        name = {"fx_graph": "FX graph", "aot_autograd": "AOTAutograd"}[cache]
        by = f" / {n['bypass']} bypasses" if n["bypass"] else ""
        lines.append(f"{name} cache (text log): {n['hit']} hits / {n['miss']} misses{by} ({'; '.join(ids)})")
    if not lines:
        return
    t.heading("FACTS  how torch compiled (not problems by themselves)")
    for line in lines[:16]:
        t.add(line, "  ", "      ")
    if len(lines) > 16:
        t.add(f"… {len(lines) - 16} more (--json lists all)", "  ")


def _bypass_line(b: dict[str, Any]) -> str:
    """One fact of cache bypasses (compile_facts.cache_bypasses): the caches and how often, where,
    torch's reason, whose it is and what it costs; torch's own said as torch's, once."""
    caches = [c for c in CACHE_NAMES if c in b["caches"]] + sorted(c for c in b["caches"] if c not in CACHE_NAMES)
    names = " and ".join(CACHE_NAMES.get(c, c) for c in caches) + (" caches" if len(caches) > 1 else " cache")
    counts = [b["caches"][c] for c in caches]
    if len(set(counts)) == 1:
        times = plural(counts[0], "time") + (" each" if len(caches) > 1 else "")
    else:
        times = ", ".join(f"{CACHE_NAMES.get(c, c)} {b['caches'][c]}" for c in caches) + " times"
    where = []
    ids = b.get("compiles") or []
    if ids:
        where.append(", ".join(bracketed(i) for i in ids[:6]) + (f" … {len(ids) - 6} more" if len(ids) > 6 else ""))
    if b.get("frameless"):
        where.append("compiles without a Dynamo frame")
    ranks = ranks_text(b.get("ranks") or []).strip()
    at = (f" in {' and '.join(where)}" if where else "") + (f" on {ranks}" if ranks else "")
    reason = one_line(b.get("reason") or "no reason logged", 160)
    if b.get("texts", 1) > 1:
        reason += f" ({b['texts']} texts that differ only in an object's address)"
    words = BYPASS_CAUSES.get(b.get("cause") or "")
    cost = bypass_consequence(caches, b.get("cause"))
    cost = cost[:1].upper() + cost[1:]
    if b["owner"] == "torch":
        return (f"{names} bypassed {times}{at}, by torch itself (nothing in your code causes it): {words}. {cost}. "
                f"torch's reason: {reason}")
    if b["owner"] == "unknown" or not words:
        return f"{names} bypassed {times}{at}: {reason}. {cost}; whether torch or your code causes it is not known"
    return f"{names} bypassed {times}{at}: {reason}: {words}. {cost}"


def _render_frameless(t: _Text, groups: list[dict[str, Any]], paths: Paths) -> None:
    """COMPILE TIME's compiles without a Dynamo frame, one line per origin."""
    for g in groups[:4]:
        what = f"{plural(g['count'], 'compile')} at run time" if g["at_run_time"] else plural(g["count"], "compile")
        text = f"{seconds_text(g['seconds'])} in {what}"
        if g.get("parent_compile_id"):
            fn = paths.code({"function": g["parent_function"], "filename": g["parent_filename"], "line": g["parent_line"], "rank": g["rank"]}) if g.get("parent_function") else ""
            text += f" made by the backend of {rank_prefix(g['rank'])}{bracketed(g['parent_compile_id'])} {fn}".rstrip()
            if g["pieces"]:
                text += " (" + ", ".join(f"{p} x{n}" for p, n in g["pieces"].items()) + ")"
        elif len(g.get("parent_candidates") or []) > 1:
            fn = paths.code({"function": g["parent_function"], "filename": g["parent_filename"], "line": g["parent_line"], "rank": g["rank"]}) if g.get("parent_function") else ""
            ids = " or ".join(bracketed(c) for c in g["parent_candidates"])
            text += f" made by the backend of {rank_prefix(g['rank'])}{ids} {fn} (which of them: not in the log)".replace("  ", " ")
        elif g.get("call_filename"):
            text += f" called at {rank_prefix(g['rank'])}{paths.show(g['call_filename'], g.get('call_line'))}"
        t.label("no Dynamo frame:", text, "  ")
    if len(groups) > 4:
        t.add(f"… {len(groups) - 4} more origins of compiles without a Dynamo frame (--json lists all)", "    ")


def _render_time(t: _Text, report: dict[str, Any], paths: Paths, text_only: bool) -> None:
    ctime = report["compile_time"]
    if report["compiles"] == 0 and not ctime["autotuning"]:
        return
    unfinished = report.get("unfinished_compiles") or []
    head = f"COMPILE TIME  {seconds_text(ctime['total_s'])} in all" if not text_only else "COMPILE TIME  (not in a text log)"
    frameless = ctime.get("frameless") or []
    if frameless and not text_only:
        n = sum(g["count"] for g in frameless)
        head += f", {seconds_text(sum(g['seconds'] for g in frameless))} of it in {plural(n, 'compile')} without a Dynamo frame"
    if unfinished:
        head += f" ({plural(len(unfinished), 'unfinished compile')} counted up to the capture's end)"
    t.heading(head)
    _render_frameless(t, frameless, paths)
    ph = ctime["phases_s"]
    if ctime["total_s"]:
        t.label("phases:", phases_text(ph), "  ")
    if ph.get("runtime_autotuning"):
        t.label("autotune:", f"{seconds_text(ph['runtime_autotuning'])} at run time (first calls of compiled kernels; not compile time)", "  ")
    if ctime["top"]:
        t.add("slowest compiles:", "  ")
        top = group_ranks(ctime["top"], slow_compile_key)
        for r, rks in top[:5]:
            left = ""
            if r.get("status") in ("interrupted", "never_ended"):  # the compile account's: still open at the end
                where = " ".join(x for x in (r.get("open_part") if r.get("open_part") != "forward" else None, r.get("phase")) if x)
                left = f" ({r['status'].replace('_', ' ')}{', in ' + where if where else ''})"
            t.add(
                f"{seconds_text(r['seconds']):>7}  {ranks_text(rks)}{bracketed(r['compile_id'], r.get('occurrence'), r.get('attempts'))} {paths.compile_name(r)}{left}",
                "    ",
                "              ",
            )
    multi = [b for b in ctime["by_function"] if b["compiles"] > 1][:3]
    if multi:
        t.add("functions compiled more than once:", "  ")
        for b in multi:
            t.add(
                f"{seconds_text(b['seconds']):>7}  {rank_prefix(b['rank'])}{paths.code(b)} in {b['compiles']} compiles"
                + (f" and {plural(b['pieces'], 'run-time Inductor compile')} its code made" if b.get("pieces") else ""),
                "    ",
                "              ",
            )
    for a in ctime["autotuning"][:4]:
        dt = re.sub(r"torch\.", "", a.get("dtypes") or "")
        dt = ", ".join(sorted(set(x.strip() for x in dt.split(",") if x.strip())))
        text = f"{a['op']}({a.get('shape') or '?'})" + (f" {dt}" if dt else "")
        if a.get("choices"):
            text += f": {a['choices']} choices"
        if a.get("best_kernel"):
            text += f", best {a['best_kernel']} {a['best_ms']:.4f} ms"
            if a.get("best_triton_kernel") and a["best_triton_kernel"] != a["best_kernel"]:
                text += f" (best Triton {a['best_triton_kernel']} {a['best_triton_ms']:.4f} ms)"
        secs = [f"{k} {seconds_text(a[c])}" for k, c in (("precompile", "precompile_s"), ("benchmark", "benchmark_s")) if a.get(c) is not None]
        if secs:
            text += "; " + ", ".join(secs)
        if a.get("failed_choices"):
            text += f", {plural(a['failed_choices'], 'choice')} failed"
        t.label("autotune:", text, "  ")
    if len(ctime["autotuning"]) > 4:
        t.add(f"… {len(ctime['autotuning']) - 4} more autotuned ops (--json lists all)", "    ")
    cache_line = _cache_line(report["cache"])
    if cache_line:
        t.label("cache:", cache_line, "  ")
    for v in (report["cache"].get("verdicts") or [])[:8]:  # why a key differs (judge.cache_key_lines)
        t.add(v, "    ", "      ")
    if len(report["cache"].get("verdicts") or []) > 8:
        t.add(f"… {len(report['cache']['verdicts']) - 8} more cache-key verdicts (--json lists all)", "    ")


def _cache_line(cache: dict[str, Any]) -> str:
    """COMPILE TIME's cache line: each cache with a logged lookup (hits, misses, bypasses), "not
    logged" for one that Inductor compiled graphs without a lookup recorded (compile_time.
    cache_summary `not_logged`); nothing for a cache neither applies to (no lookup, no Inductor
    compile: a backend other than Inductor, AOTInductor)."""
    parts = []
    unlogged = [c for c in CACHE_NAMES if c in (cache.get("not_logged") or [])]
    for c in CACHE_NAMES:
        hits, misses, bypasses = cache[f"{c}_hits"], cache[f"{c}_misses"], cache[f"{c}_bypasses"]
        if hits or misses:
            r = cache[f"{c}_hit_ratio"]
            parts.append(f"{CACHE_NAMES[c]} {hits} hits / {misses} misses" + (f" ({r * 100:.0f}% hits)" if r is not None else "")
                         + (f" / {bypasses} bypassed" if bypasses else ""))
        elif bypasses:
            parts.append(f"{CACHE_NAMES[c]} {bypasses} bypassed")
        elif c in unlogged:
            why = (f" (Inductor ran on {plural(cache.get('inductor_graphs') or 0, 'graph')}, no lookup recorded: a cache "
                   "turned off, a torch that does not log it, or compiles that ended first; the trace alone cannot tell)")
            parts.append(f"{CACHE_NAMES[c]} not logged" + (why if c == unlogged[-1] else ""))
    return ", ".join(parts)


def _render_ranks_and_inputs(t: _Text, report: dict[str, Any]) -> None:
    inp = report["inputs"]
    if report["per_rank"]:
        t.heading("PER RANK")
        # ranks that compiled the same way share a line
        groups = group_ranks(report["per_rank"], per_rank_key)
        for r, rks in groups[:12]:
            label = "process" if r["rank"] is None else ranks_text(rks).strip()
            each = " each" if len(rks) > 1 else ""
            # each status's count, in the report's order (parsers.compiles.STATUSES)
            status = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in r.items() if k not in ("rank", "compiles", "compile_time_s") and v)
            t.add(f"{label}: {r['compiles']} compiles ({status}), {seconds_text(r['compile_time_s'])}{each}", "  ", "    ")
        if len(groups) > 12:
            t.add(f"… {len(groups) - 12} more groups of ranks (--json lists every rank)", "  ")
    parse = report["parse"]
    files = parse["files"]
    t.heading("INPUT")
    env = sum(f.get("envelopes") or 0 for f in files)
    recs = sum(f.get("records") or 0 for f in files)
    mb = sum(f.get("bytes") or 0 for f in files) / 1e6
    line = f"{plural(len(files), 'file')}, {mb:.1f} MB, {env} envelopes"
    if recs:
        line += f", {recs} text-log records"
    t.add(line, "  ")
    if parse["problems"]:
        by_kind = parse.get("problem_counts") or {}
        damaged = sorted(
            {f["file"] for f in files if f.get("truncated_tail")}
            | {p["file"] for p in parse["problem_examples"] if p["problem"] in ("gzip_damaged", "file_changed")}
        )
        t.add(
            "problems: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in by_kind.items())
            + f" ({parse['problems']} rows in the problems table)"
            + (f"; damaged or cut: {', '.join(clean_line(d) for d in damaged[:3])}" if damaged else ""),
            "  ",
        )
    for d in inp.get("debug_dirs") or []:
        name = clean_line(d["path"].rstrip("/").rsplit("/", 1)[-1])
        if d.get("covered_by"):
            lacks = d.get("from_folder") or 0
            t.add(f"TORCH_COMPILE_DEBUG {name}: read from the same process's TORCH_TRACE log instead "
                  f"({clean_line(d['covered_by'].rsplit('/', 1)[-1])})"
                  + (f"; {plural(lacks, 'graph folder')} it lacks read from the folder" if lacks else ""), "  ", "    ")
            continue
        tied = f", {d['tied']} tied to a compile id" if d["tied"] else ", compile ids unknown" if d["graphs"] else ""
        t.add(f"TORCH_COMPILE_DEBUG {name}: {plural(d['graphs'], 'Inductor graph folder')}{tied}, "
              f"{plural(d['messages'], 'message')} in torchdynamo/debug.log", "  ", "    ")
    for s in inp["stray_files"][:10]:
        why = clean_line(s["why"])
        room = max(t.width - len(why) - len("  skipped : "), 20)
        path = clean_line(s["path"])
        path = path if len(path) <= room else "…" + path[-(room - 1) :]
        t.add(f"skipped {path}: {why}", "  ")
    if inp["left_out_by_latest"]:
        t.add(f"--latest left out {plural(len(inp['left_out_by_latest']), 'file')} of older runs", "  ")


def render_origin(chains: list[Any]) -> str:
    """`traceview origin` output: one block per chain (several when the name is ambiguous)."""
    if not chains:
        return "no match: no kernel, node or seq_nr of that name in this trace\n"
    out = []
    if len(chains) > 1:
        out.append(f"{len(chains)} chains, best first (the name is ambiguous or maps to several lines: narrow with --compile-id/--rank)")
    guesses = sum(1 for ch in chains if ch.confidence == "name_match")
    if guesses:
        out.append(f"{guesses} of them NOT EXACT (op names in the kernel's name only): check them against the kernel's code")
    for ch in chains:
        out.append("")
        where = f"rank {ch.rank} " if ch.rank is not None else ""
        out.append(printable(f"{where}[{ch.compile_id}] ({ch.source})"))
        for label, value in ch.steps():
            out.append(printable(f"  {label:>16}: {value}"))
    return "\n".join(out) + "\n"
