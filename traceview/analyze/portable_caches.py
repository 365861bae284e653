"""Portable caches: a process that loaded `torch.compiler.load_cache_artifacts` (the "mega-cache")
before compiling, and what the load served.

torch 2.13 logs no event of its own for the load (torch/compiler/__init__.py,
`CacheArtifactManager.populate_caches` in torch/compiler/_cache.py). What it does leaves marks:

* each Inductor artifact's `populate_cache` writes the FX graph entry and re-emits its Triton
  bundle (`FxGraphCache._emit_triton_bundle`): a `TritonBundler.read_and_emit` chromium span in
  the trace with no compile id and inside no other span. Read inside a compile, that span is an
  ordinary cache hit's; outside every compile, nothing but a load makes it (certainty: likely,
  the trace does not name the call; none where the bundle is turned off);
* each AOTAutograd artifact's `populate_cache` logs `Writing AOTAutograd cache entry to PATH`
  (logger torch._functorch._aot_autograd.autograd_cache, INFO) outside any compile: in a text
  log, no compile id (certain);
* with TORCH_LOGS=+torch.compiler._cache, `writing: InductorCacheArtifact(key='…')` (and
  AOTAutograd, PGO, Autotune, Precompile artifacts) names every artifact loaded (certain).

Then every compile after the load looks its graphs up as any warm cache: the FX graph and
AOTAutograd hits and misses per compile (compile_time.cache_counts: the trace's artifacts, a
text log's lines where the trace has none) say what the load served; Dynamo traces each frame
still (the caches hold what comes after Dynamo). On CPU the C++ kernels are not in the
artifacts: a compile served by them builds its kernels again (its `compile_file` spans).
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from traceview.analyze.compile_time import CACHE_COLUMNS
from traceview.trace import Trace

_WRITING = re.compile(r"^writing: (?P<type>\w+?)CacheArtifact\(key='(?P<key>[^']*)'\)")
_AOT_WRITE = re.compile(r"^Writing AOTAutograd cache entry to ")
_TYPES = {"Inductor": "inductor", "AOTAutograd": "aot_autograd", "PGO": "pgo", "Autotune": "autotune",
          "Precompile": "precompile"}


def _top_level_bundles(trace: Trace) -> pl.DataFrame:
    """`TritonBundler.read_and_emit` spans outside every compile and every other span: rank,
    file, lineno, start_us (one per Inductor artifact a load wrote)."""
    sp = trace.spans
    if sp.height == 0:
        return pl.DataFrame(schema={"rank": pl.Int64, "file": pl.String, "lineno": pl.Int64, "start_us": pl.Float64})
    cand = sp.filter((pl.col("name") == "TritonBundler.read_and_emit") & pl.col("compile_id").is_null())
    if cand.height == 0:
        return cand.select("rank", "file", "lineno", "start_us")
    keep = []
    for r in cand.iter_rows(named=True):
        same = sp.filter((pl.col("file") == r["file"]) & (pl.col("lineno") != r["lineno"]))
        inside = same.filter(
            (pl.col("start_us") <= r["start_us"])
            & ((pl.col("start_us") + pl.col("duration_s").fill_null(float("inf")) * 1e6) >= r["start_us"])
        )
        if inside.height == 0:
            keep.append(r)
    return pl.DataFrame(keep, schema={k: sp.schema[k] for k in ("rank", "file", "lineno", "start_us")}) if keep else \
        cand.head(0).select("rank", "file", "lineno", "start_us")


def _text_marks(trace: Trace) -> dict[Any, dict[str, Any]]:
    """Per process (pid), the text log's marks of a load: artifacts named by
    torch.compiler._cache's `writing:` lines ({type: [keys]}), AOTAutograd entries written
    outside any compile, the rank, and the first such record (file, lineno)."""
    lr = trace.log_records
    out: dict[Any, dict[str, Any]] = {}
    if lr.height == 0:
        return out
    rows = lr.filter(
        pl.col("compile_id").is_null()
        & (pl.col("text").str.starts_with("writing: ") | pl.col("text").str.starts_with("Writing AOTAutograd cache entry to "))
    )
    for r in rows.sort("file", "lineno").iter_rows(named=True):
        text = r["text"] or ""
        m = _WRITING.match(text)
        named = bool(m) and (r["src_file"] or "").replace("\\", "/").endswith("compiler/_cache.py")
        if not named and not _AOT_WRITE.match(text):
            continue
        key = r["pid"] if r["pid"] is not None else ("file", r["file"], r["rank"])
        d = out.setdefault(key, {"named": {}, "aot_writes": 0, "rank": r["rank"], "pid": r["pid"],
                                 "file": r["file"], "lineno": r["lineno"]})
        if named and m:
            keys = d["named"].setdefault(_TYPES.get(m["type"], m["type"]), [])
            if m["key"] not in keys:
                keys.append(m["key"])
        else:
            d["aot_writes"] += 1
    return out


_TEXT_LOOKUPS = {  # a text log's lookup lines (compile_facts.cache_events): (cache, event) -> the count's name
    ("fx_graph", "hit"): "fx_hits", ("fx_graph", "miss"): "fx_misses",
    ("aot_autograd", "hit"): "aot_hits", ("aot_autograd", "miss"): "aot_misses",
}


def _lookups(trace: Trace, pid: Any, rank: Any, files: set[str]) -> list[dict[str, Any]]:
    """The FX graph and AOTAutograd lookups of one process, per compile: from the trace's
    compiles (its `*_cache_hit/miss` artifacts) where the trace has this process's compiles,
    else from a text log's lookup lines of this process (its pid)."""
    comp = trace.compiles
    cols = {v: k for k, v in CACHE_COLUMNS.items()}
    rows: list[dict[str, Any]] = []
    if comp.height:
        mine = comp.filter(pl.col("pid") == pid) if pid is not None else comp.filter(pl.col("file").is_in(list(files)))
        for r in mine.sort("lineno").iter_rows(named=True):
            n = {f"{'fx' if c[0] == 'fx_graph' else 'aot'}_{'hits' if c[1] == 'hit' else 'misses'}": int(r.get(col) or 0)
                 for col, c in cols.items() if c[1] != "bypass"}
            if not any(n.values()):
                continue
            rows.append({"rank": r["rank"], "compile_id": r["compile_id"], "function": r["function"], "filename": r["filename"],
                         "line": r["line"], "occurrence": r["occurrence"], "dynamo_s": r["dynamo_time_s"], **n,
                         "_file": r["file"]})
    if rows or pid is None:
        return rows
    from traceview.analyze.compile_facts import cache_events

    lr = trace.log_records.filter(pl.col("pid") == pid).select("file", "lineno")
    at = {(f, ln) for f, ln in lr.iter_rows()}
    per: dict[str, dict[str, Any]] = {}
    for e in cache_events(trace):
        name = _TEXT_LOOKUPS.get((e["cache"], e["event"]))
        if e["source"] != "text" or name is None or e["compile_id"] is None or (e["file"], e["lineno"]) not in at:
            continue
        p = per.setdefault(e["compile_id"], {"rank": rank, "compile_id": e["compile_id"], "function": None, "filename": None,
                                             "line": None, "occurrence": None, "dynamo_s": None, "fx_hits": 0,
                                             "fx_misses": 0, "aot_hits": 0, "aot_misses": 0, "_file": None})
        p[name] += 1
    return list(per.values())


def cache_loads(trace: Trace) -> list[dict[str, Any]]:
    """One row per process (its pid; rank where it has one) whose log shows a load of portable
    cache artifacts: rank; `artifacts` {type: count} as far as the log tells (inductor from
    the trace's top-level bundle spans or the text's `writing:` lines; aot_autograd from the
    text); `keys` {type: [key]} where the text names them; `certainty` (`certain` from the
    text log, `likely` from the trace alone) and `how` (the evidence, in words); file, lineno
    (the first record); that process's lookups (`compiles`: per compile with a lookup, rank,
    compile_id, function, filename, line, occurrence, fx_hits, fx_misses, aot_hits, aot_misses,
    dynamo_s, kernel_build_s: its `compile_file` spans' seconds where the artifacts served it,
    the kernels built again) and their totals (fx_hits, fx_misses, aot_hits, aot_misses,
    dynamo_s, kernel_build_s, served: compiles whose every lookup hit, missed: compiles with a
    miss). Another process in the same input (a first run kept beside, another rank) is
    another row, or none: its lookups are never counted as the loading process's."""
    marks = _text_marks(trace)
    bundles = _top_level_bundles(trace)
    comp = trace.compiles
    pid_of: dict[str, Any] = {}
    if comp.height and bundles.height:
        pid_of = {f: p for f, p in comp.select("file", "pid").unique().iter_rows() if p is not None}
    procs: dict[Any, dict[str, Any]] = {}
    for r in bundles.iter_rows(named=True):
        pid = pid_of.get(r["file"])
        key = pid if pid is not None else ("file", r["file"], r["rank"])
        d = procs.setdefault(key, {"pid": pid, "rank": r["rank"], "bundles": 0, "text": None, "files": set(),
                                   "first": (r["file"], r["lineno"])})
        d["bundles"] += 1
        d["files"].add(r["file"])
    for key, t in marks.items():
        d = procs.setdefault(key, {"pid": t["pid"], "rank": t["rank"], "bundles": 0, "text": None, "files": set(),
                                   "first": (t["file"], t["lineno"])})
        d["text"] = t
        d["first"] = (t["file"], t["lineno"])
    if not procs:
        return []
    spans = trace.spans
    out = []
    for d in sorted(procs.values(), key=lambda d: (d["rank"] is not None, d["rank"] or 0, str(d["pid"]))):
        t = d["text"]
        artifacts: dict[str, int] = {}
        keys: dict[str, list[str]] = {}
        how = []
        if t and t["named"]:
            keys = {k: list(v) for k, v in t["named"].items()}
            artifacts = {k: len(v) for k, v in keys.items()}
            how.append("torch.compiler._cache's `writing:` lines name each artifact loaded")
        if t and t["aot_writes"]:
            artifacts.setdefault("aot_autograd", t["aot_writes"])
            how.append(f"{t['aot_writes']} AOTAutograd cache entr{'y' if t['aot_writes'] == 1 else 'ies'} written outside any compile")
        if d["bundles"]:
            artifacts.setdefault("inductor", d["bundles"])
            how.append(f"{d['bundles']} Triton bundle{'s' if d['bundles'] != 1 else ''} of FX graph entries emitted outside any "
                       "compile (TritonBundler.read_and_emit)")
        rows = _lookups(trace, d["pid"], d["rank"], d["files"])
        for x in rows:
            build = None
            if x["fx_hits"] and spans.height and x["_file"] is not None:  # a miss builds its kernels anyway
                build = round(float(spans.filter((pl.col("file") == x["_file"]) & (pl.col("compile_id") == x["compile_id"])
                                                 & (pl.col("name") == "compile_file"))["duration_s"].fill_null(0).sum()), 3)
            x["kernel_build_s"] = build
            del x["_file"]
        tot = {k: sum(x[k] for x in rows) for k in ("fx_hits", "fx_misses", "aot_hits", "aot_misses")}
        out.append({
            "rank": d["rank"], "artifacts": artifacts, "keys": keys, "certainty": "certain" if t else "likely",
            "how": "; ".join(how), "file": d["first"][0], "lineno": d["first"][1], "compiles": rows, **tot,
            "dynamo_s": round(sum(x["dynamo_s"] or 0 for x in rows), 3),
            "kernel_build_s": round(sum(x["kernel_build_s"] or 0 for x in rows), 3),
            "served": sum(1 for x in rows if not x["fx_misses"] and not x["aot_misses"]),
            "missed": sum(1 for x in rows if x["fx_misses"] or x["aot_misses"]),
        })
    return out
