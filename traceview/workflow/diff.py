"""`traceview diff A B`: what changed between two runs (or two ranks), as text and as a CI gate.

The comparison is traceview.analyze.diff's (`compare_runs`); `build_diff(a, b)` runs it with
each side's typed findings (the summary's, from its report), `render_diff` lays it out, most
important first, and `parse_fail_on` / `gate` are the CI gate of `--fail-on`.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Any

from parsers.compile_ids import label as id_label
from traceview.analyze.compile_time import PHASE_WITHIN
from traceview.analyze.diff import Noise, code_object, compare_runs
from traceview.analyze.finding import Finding, findings_of, tag_of
from traceview.analyze.wording import CACHE_NAMES
from traceview.errors import UserError
from traceview.printable import one_line, printable
from traceview.trace import Trace


def _judged(trace: Trace) -> list[Finding]:
    from traceview.output.report import build_report

    return findings_of(build_report(trace))


def build_diff(
    a: Trace,
    b: Trace,
    *,
    rank: int | None = None,
    against_rank: int | None = None,
    noise: Noise | None = None,
    names: tuple[str, str] = ("A", "B"),
) -> dict[str, Any]:
    """What changed from `a` to `b` (analyze.diff.compare_runs, with each side's findings)."""
    return compare_runs(a, against=b, rank=rank, against_rank=against_rank, noise=noise, names=names, judged=_judged)


# ------------------------------------------------------------------------------ CI gate
@dataclass(frozen=True)
class Rule:
    """One `--fail-on` rule: `name` (new-graph-breaks, ...), `pct` for compile-time."""

    name: str
    pct: float | None = None

    def __str__(self) -> str:
        return f"{self.name}:+{self.pct:g}%" if self.pct is not None else self.name


RULES = ("new-graph-breaks", "new-recompiles", "new-failures", "new-eager-frames", "compile-time", "cache-key-changed")


def parse_fail_on(spec: str) -> list[Rule]:
    """`new-graph-breaks,new-recompiles,new-failures,compile-time:+20%` -> rules."""
    rules = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        name, _, arg = part.partition(":")
        if name not in RULES:
            raise UserError(f"--fail-on: unknown rule {name!r}; rules: {', '.join(RULES)}")
        if name == "compile-time":
            m = re.fullmatch(r"\+?(\d+(?:\.\d+)?)%", arg.strip())
            if not m:
                raise UserError(f"--fail-on: {part!r}: give the allowed growth as compile-time:+N%")
            rules.append(Rule(name, float(m.group(1))))
        elif arg:
            raise UserError(f"--fail-on: rule {name!r} takes no argument")
        else:
            rules.append(Rule(name))
    return rules


def gate(diff: dict[str, Any], rules: list[Rule]) -> list[str]:
    """One line per violated rule (empty: the gate passes)."""
    lines = []
    for rule in rules:
        if rule.name == "new-graph-breaks":
            new = [g for g in diff["graph_breaks"] if g["change"] == "new"]
            if new:
                lines.append(f"{rule}: {len(new)} new graph break site(s), first: {_where(new[0])} {new[0]['reason']}")
        elif rule.name == "new-recompiles":
            more = [f for f in diff["functions"] if f["compiles_b"] > max(f["compiles_a"], 1)]
            causes = [c for c in diff["recompile_causes"] if c["change"] == "new"]
            if more or causes:
                first = more[0] if more else causes[0]
                lines.append(f"{rule}: {len(more)} function(s) compile more often, {len(causes)} new recompile "
                             f"cause(s), first: {code_object(first['function'], first['file'], first.get('line_b', first.get('line')))}")
        elif rule.name == "new-failures":
            new = [f for f in diff["failures"] if f["change"] == "new"]
            if new:
                lines.append(f"{rule}: {len(new)} new failure(s), first: {new[0].get('label') or code_object(new[0]['function'], new[0]['file'], new[0]['line'])} {new[0]['reason']}")
        elif rule.name == "new-eager-frames":
            new = [f for f in diff["frames_eager"] if f["change"] == "new"]
            if new:
                lines.append(f"{rule}: {len(new)} frame(s) newly run eagerly, first: {code_object(new[0]['function'], new[0]['file'], new[0]['line'])}")
        elif rule.name == "cache-key-changed":
            changed = [r for r in diff.get("cache_keys") or [] if r["key_changed"]]
            if changed:
                lines.append(f"{rule}: {len(changed)} cache miss(es) with a changed key, first: "
                             f"{_rank(changed[0])}{changed[0]['label']}: {_caches(changed[0])} {changed[0]['words']}")
        elif rule.name == "compile-time":
            c = diff["compile_time"]
            grew = c["total_b_s"] - c["total_a_s"]
            pct = c["total_pct"]
            if c["total_significant"] and grew > 0 and (pct is None or pct > (rule.pct or 0.0)):
                shown = f"+{pct:g}%" if pct is not None else "from 0"
                lines.append(f"{rule}: compile time {c['total_a_s']:.2f}s -> {c['total_b_s']:.2f}s ({shown})")
    return [one_line(x, 400) for x in lines]


def _caches(r: dict[str, Any]) -> str:
    return " and ".join(CACHE_NAMES.get(c, c) for c in r["caches"]) + " cache" + ("s" if len(r["caches"]) > 1 else "")


def _where(r: dict[str, Any]) -> str:
    return f"{r['file']}:{r['line']}" if r.get("line") is not None else r.get("file") or "?"


# ------------------------------------------------------------------------------ text
def _rank(r: dict[str, Any]) -> str:
    return f"rank {r['rank']} " if r.get("rank") is not None else ""


def change_text(section: str, r: dict[str, Any]) -> str:
    """One change of `section` (functions, recompile_causes, graph_breaks, frames_eager,
    failures, autotuning) in words, without its `new:`/`gone:` prefix: the line `render_diff`
    prints and the UI's diff view shows."""
    if section == "unfinished":
        return f"{_rank(r)}{unfinished_text(r)}"
    if section == "functions":
        co = r.get("label") or code_object(r["function"], r["file"], r["line_b"] if r["line_b"] is not None else r["line_a"])
        if r["change"] == "moved":
            return f"{_rank(r)}{co} moved from line {r['line_a']} ({r['compiles_b']} compiles)"
        what = {"new": "now compiles", "gone": "no longer compiles", "more": "compiles more often",
                "fewer": "compiles less often"}[r["change"]]
        moved = r["line_a"] is not None and r["line_b"] is not None and r["line_a"] != r["line_b"]
        was = f" (was line {r['line_a']})" if moved else ""
        return f"{_rank(r)}{co} {what}: {r['compiles_a']} -> {r['compiles_b']} compiles{was}"
    if section == "recompile_causes":
        text = r["text_b"] if r["change"] != "gone" else r["text_a"]
        return f"{_rank(r)}{r.get('label') or r['function']}: {text} ({r['count_a']} -> {r['count_b']} recompiles)"
    if section == "graph_breaks":
        gb = f" [{r['gb_id']}]" if r.get("gb_id") else ""
        if r["change"] == "moved":
            return f"{_rank(r)}{r['reason']}{gb} {r['file']}:{r['line_a']} -> {r['line']}"
        if r["change"] == "count":
            return f"seen {r['count_a']} -> {r['count']} times: {_rank(r)}{_where(r)} {r['reason']}{gb}"
        return f"{_rank(r)}{_where(r)} {r['reason']}{gb}"
    if section == "frames_eager":
        what = "now runs eagerly (whole frame skipped)" if r["change"] == "new" else "compiles again (was run eagerly)"
        return f"{_rank(r)}{code_object(r['function'], r['file'], r['line'])} {what}"
    if section == "failures":
        return f"{_rank(r)}{r.get('label') or code_object(r['function'], r['file'], r['line'])} {r['category']}: {r['reason']}"
    if section == "collectives":
        co = r.get("label") or code_object(r["function"], r["file"], r["line"])
        graph = " (backward)" if r["graph_index"] else ""
        ids = f"[{r['compile_id_a']}] -> [{r['compile_id_b']}]"
        a = ", ".join(r["collectives_a"]) or "no collectives"
        b = ", ".join(r["collectives_b"]) or "no collectives"
        return f"{_rank(r)}{co} compile #{r['nth'] + 1} {ids}{graph}: {a} -> {b}"
    if section == "autotuning":
        if r["change"] == "changed":
            won = f"best {r['best_a']} -> {r['best_b']} of {r['choices_a']} -> {r['choices_b']} choices"
        else:
            side = "b" if r["change"] == "new" else "a"
            won = f"best {r['best_' + side]} of {r['choices_' + side]} choices"
        return f"{_rank(r)}{r['op']} {r['shape']} ({r['dtypes']}): {won}"
    raise ValueError(f"no words for section {section!r}")


def phase_depth(r: dict[str, Any]) -> int:
    """How deep a compile-time row's phase is nested (0: a part of the compiles' own time, or
    not a phase), following `within` as compile_time.PHASE_WITHIN nests them."""
    depth, within = 0, r.get("within") if r.get("phase") else None
    while within is not None and depth < len(PHASE_WITHIN):
        depth += 1
        within = PHASE_WITHIN.get(within)
    return depth


def time_row_text(r: dict[str, Any]) -> str:
    """A compile-time row (a phase or a function) in words: a nested phase says what it is part
    of, as the summary's `(of which ...)` does: `inductor: 12.63s -> 9.72s (part of
    aot+backend)`; a function is named as the summary names it."""
    if r.get("phase"):
        part = f" (part of {r['within']})" if r.get("within") else ""
        when = "" if r.get("compile_time", True) else " (at run time, not compile time)"
        return f"{r['phase']}: {r['seconds_a']:.2f}s -> {r['seconds_b']:.2f}s{part}{when}"
    return f"{r.get('label') or r['function']}: {r['seconds_a']:.2f}s -> {r['seconds_b']:.2f}s"


def _where_unfinished(u: dict[str, Any]) -> str:
    """Where an unfinished compile was, in the summary's words (output.report's UNFINISHED
    COMPILES): `in inductor code_gen for 9.65s`, and a rank behind the others."""
    parts = [f"in {u['phase']}"] if u.get("phase") else []
    if u.get("running_s") is not None:
        parts.append(f"for {u['running_s']:.2f}s")
    text = " ".join(parts) or "no open span"
    return text + ("; behind the other ranks: likely hang" if u.get("behind") else "")


def unfinished_text(r: dict[str, Any]) -> str:
    """An `unfinished` row in words: `[0/1] forward (model.py:12): finished in A (3.20s),
    unfinished in B (in inductor code_gen for 9.65s)`."""
    here, there = ("B", "A") if r["unfinished_in"] == "b" else ("A", "B")
    mine, theirs = ("b", "a") if r["unfinished_in"] == "b" else ("a", "b")
    cid = id_label(r[f"compile_id_{mine}"], r.get(f"occurrence_{mine}"))
    other_id = r[f"compile_id_{theirs}"]
    as_id = f" as [{id_label(other_id, r.get(f'occurrence_{theirs}'))}]" if other_id not in (None, r[f"compile_id_{mine}"]) else ""
    if r["other_status"] is None:
        other = f"not compiled in {there}"
    else:
        verb = "failed" if r["other_status"] == "failed" else "finished"
        secs = f" ({r['other_compile_time_s']:.2f}s)" if r.get("other_compile_time_s") is not None else ""
        other = f"{verb} in {there}{as_id}{secs}"
    return f"[{cid}] {r['label']}: {other}, unfinished in {here} ({_where_unfinished(r)})"


def render_diff(diff: dict[str, Any], *, width: int = 100) -> str:
    """The diff for a terminal, most important first (every line printable, cut to `width`)."""
    a, b = diff["a"], diff["b"]
    out: list[str] = []

    def add(text: str, indent: str = "") -> None:
        out.extend(textwrap.wrap(printable(text).replace("\n", " "), width=max(width, 40), initial_indent=indent,
                                 subsequent_indent=indent + "    ", break_long_words=True, break_on_hyphens=False))

    def side(s: dict[str, Any]) -> str:
        open_ = f", {len(s['unfinished'])} unfinished" if s["unfinished"] else ""
        rank = f" rank {s['rank']}" if s["rank"] is not None else ""
        return f"{s['root'] or s['name']}{rank} ({s['compiles']} compiles{open_})"

    add(f"traceview diff: A = {side(a)}")
    add(f"            -> B = {side(b)}")
    ctime = diff["compile_time"]
    if diff["no_changes"]:
        add("no changes" + (" (compile time within noise)" if ctime["within_noise"] else ""))
        return "\n".join(out) + "\n"
    if diff["changes"] == 0:
        add("no changes in what compiled; compile time changed beyond noise:")
    if diff["unfinished"]:
        add("unfinished compiles (begun, no compilation_metrics: killed, hung or still running when the log ends):")
    for r in diff["unfinished"]:
        add(change_text("unfinished", r), "  ")
    found = diff.get("findings") or {}
    for key, what in (("new", "findings new in B (as the summary of B says them):"), ("gone", "findings gone from A:")):
        if found.get(key):
            add(what)
        for f in found.get(key) or []:
            add(f"{tag_of(f['kind'], f['severity'])}: {f['claim']}", "  ")  # EXPECTED where it is
    if diff["functions"]:
        add("compiles per function:")
    for r in diff["functions"]:
        add(change_text("functions", r), "  ")
    if diff["recompile_causes"]:
        add("recompile causes:")
    for r in diff["recompile_causes"]:
        add(f"{r['change']}: {change_text('recompile_causes', r)}", "  ")
    if diff["graph_breaks"]:
        add("graph breaks:")
    for r in diff["graph_breaks"]:
        add(("" if r["change"] == "count" else f"{r['change']}: ") + change_text("graph_breaks", r), "  ")
    for r in diff["frames_eager"]:
        add(change_text("frames_eager", r), "  ")
    if diff["failures"]:
        add("failures:")
    for r in diff["failures"]:
        add(f"{r['change']}: {change_text('failures', r)}", "  ")
    for name, what in (("graphs", "ops"), ("guards", "guards"), ("kernels", "kernels")):
        rows = diff[name]
        if rows:
            add({"graphs": "Dynamo graphs:", "guards": "guards:", "kernels": "kernels:"}[name])
        for r in rows:
            co = r.get("label") or code_object(r["function"], r["file"], r["line"])
            ids = f"{id_label(r['compile_id_a'], r.get('occurrence_a'))} -> {id_label(r['compile_id_b'], r.get('occurrence_b'))}"
            add(f"{_rank(r)}{co} compile #{r['nth'] + 1} ({ids}):", "  ")
            for sign, items in (("+", r[f"{what}_added"]), ("-", r[f"{what}_removed"])):
                for item, n in items.items():
                    add(f"{sign} {item}" + (f" (x{n})" if n > 1 else ""), "    ")
    if diff["autotuning"]:
        add("autotuning:")
    for r in diff["autotuning"]:
        add(f"{r['change']}: {change_text('autotuning', r)}", "  ")
    if diff["pgo"]:
        add("PGO profile: " + ", ".join(f"{r['artifact']} {r['a']} -> {r['b']}" for r in diff["pgo"]))
    if diff["cache"]:
        add("cache: " + ", ".join(f"{r['counter']} {r['a']} -> {r['b']}" for r in diff["cache"]))
    for r in diff.get("cache_keys") or []:  # why B missed (judge.cache_pair_words)
        add(f"cache key: {_rank(r)}{r['label']}: {_caches(r)} {r['words']}")
    if diff.get("cache_load"):
        for line in cache_load_lines(diff["cache_load"]):
            add(line[1], line[0])
    if diff["rank_divergence"]:
        add("rank divergence (a rank that compiled differently from the majority):")
    for r in diff["rank_divergence"]:
        add(f"{r['change']}: rank {r['rank']}: {r['detail']}", "  ")
    if diff["collectives"]:
        add("collectives (what each compiled graph communicates):")
    for r in diff["collectives"]:
        add(f"{r['change']}: {change_text('collectives', r)}", "  ")
    # as the summary says it: an unfinished compile's time is in no total
    uncounted = [f"{len(s['unfinished'])} in {n}" for n, s in (("A", a), ("B", b)) if s["unfinished"]]
    add(f"compile time: {ctime['total_a_s']:.2f}s -> {ctime['total_b_s']:.2f}s"
        + (f" ({ctime['total_pct']:+g}%)" if ctime["total_pct"] is not None else "")
        + ("" if ctime["total_significant"] else " (within noise)")
        + (f" (unfinished compiles not counted: {', '.join(uncounted)})" if uncounted else ""))
    for r in ctime["phases"] + ctime["functions"]:
        add(time_row_text(r), "  " + "  " * phase_depth(r))
    if ctime["within_noise"]:
        n = ctime["noise"]
        add(f"({len(ctime['within_noise'])} time changes below the noise threshold of {n['pct']:g}% or {n['seconds']:g}s)", "  ")
    return "\n".join(out) + "\n"


def cache_load_lines(ld: dict[str, Any]) -> list[tuple[str, str]]:
    """The diff's account of a load of portable cache artifacts: (indent, line) — which side
    loaded them, the hits and misses of each side, and per matched compile the seconds per
    phase, A -> B."""
    side = {"b": "B", "a": "A", "both": "A and B"}[ld["loaded"]]
    sure = "" if ld["certainty"] == "certain" else f" ({ld['certainty']}: read from the trace's marks)"
    a, b = ld["a"], ld["b"]
    out = [("", f"loaded cache artifacts: {side} loaded torch.compiler.load_cache_artifacts before compiling{sure}; "
                f"FX graph hits {a['fx_hits']} -> {b['fx_hits']}, misses {a['fx_misses']} -> {b['fx_misses']}; "
                f"AOTAutograd hits {a['aot_hits']} -> {b['aot_hits']}, misses {a['aot_misses']} -> {b['aot_misses']}")]
    ph = ld["phases_s"]
    saved = ", ".join(f"{k.removesuffix('_s')} {v[0]:.2f}s -> {v[1]:.2f}s" for k, v in ph.items() if k != "total_s" and (v[0] or v[1]))
    out.append(("  ", f"the compiles both runs made: {ph['total_s'][0]:.2f}s -> {ph['total_s'][1]:.2f}s ({saved})"))
    for c in ld["compiles"]:
        parts = ", ".join(f"{k} {c[k + '_s'][0]:.2f}s -> {c[k + '_s'][1]:.2f}s" for k in ("dynamo", "aot", "inductor", "backward")
                          if c[k + "_s"][0] or c[k + "_s"][1])
        hits = f"FX graph hits {c['fx_hits'][0]} -> {c['fx_hits'][1]}, AOTAutograd hits {c['aot_hits'][0]} -> {c['aot_hits'][1]}"
        out.append(("  ", f"{_rank(c)}{c['label']}: {c['total_s'][0]:.2f}s -> {c['total_s'][1]:.2f}s ({parts}); {hits}"))
    for c in ld.get("only_b") or []:
        out.append(("  ", f"{_rank(c)}{id_label(c['compile_id'], c.get('occurrence'))} only in B: {c['total_s']:.2f}s; FX graph "
                          f"{c['fx_hits']} hits / {c['fx_misses']} misses, AOTAutograd {c['aot_hits']} hits / {c['aot_misses']} misses"))
    if ld.get("kernel_build_s"):
        out.append(("  ", f"B built the served compiles' C++ kernels again: {ld['kernel_build_s']:.2f}s of compile_file "
                          "(the artifacts hold the generated code, not the compiled kernels; on a hit AOTAutograd's seconds hold the load)"))
    return out


def report_diff(
    a: Trace,
    b: Trace,
    *,
    names: tuple[str, str] = ("A", "B"),
    rank: int | None = None,
    against_rank: int | None = None,
    noise: Noise | None = None,
    fail_on: str | None = None,
    as_json: bool = False,
    width: int = 100,
) -> int:
    """`traceview diff`: print the diff (text or JSON) and, with `fail_on`, one line per
    violated rule on stderr. Returns the exit code: 0, or EXIT_GATE when a rule is violated."""
    import sys

    from traceview.errors import EXIT_GATE, EXIT_OK

    rules = parse_fail_on(fail_on) if fail_on else []
    d = build_diff(a, b, rank=rank, against_rank=against_rank, noise=noise, names=names)
    if as_json:
        import orjson

        sys.stdout.buffer.write(orjson.dumps(d, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        sys.stdout.write(render_diff(d, width=width))
    sys.stdout.flush()
    violated = gate(d, rules)
    for line in violated:
        sys.stderr.write(f"traceview: fail-on {line}\n")
    return EXIT_GATE if violated else EXIT_OK
