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

from traceview.analyze.compile_time import cache_counts
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
    """Per rank, the text log's marks of a load: artifacts named by torch.compiler._cache's
    `writing:` lines ({type: [keys]}), AOTAutograd entries written outside any compile, and
    the first such record (file, lineno)."""
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
        if m and (r["src_file"] or "").replace("\\", "/").endswith("compiler/_cache.py"):
            d = out.setdefault(r["rank"], {"named": {}, "aot_writes": 0, "file": r["file"], "lineno": r["lineno"]})
            keys = d["named"].setdefault(_TYPES.get(m["type"], m["type"]), [])
            if m["key"] not in keys:
                keys.append(m["key"])
        elif _AOT_WRITE.match(text):
            d = out.setdefault(r["rank"], {"named": {}, "aot_writes": 0, "file": r["file"], "lineno": r["lineno"]})
            d["aot_writes"] += 1
    return out


def cache_loads(trace: Trace) -> list[dict[str, Any]]:
    """One row per process (rank) whose log shows a load of portable cache artifacts:
    rank; `artifacts` {type: count} as far as the log tells (inductor from the trace's
    top-level bundle spans or the text's `writing:` lines; aot_autograd from the text);
    `keys` {type: [key]} where the text names them; `certainty` (`certain` from the text log,
    `likely` from the trace alone) and `how` (the evidence, in words); file, lineno (the first
    record); the lookups after it (`compiles`: per compile with a lookup, rank, compile_id,
    function, filename, line, fx_hits, fx_misses, aot_hits, aot_misses, dynamo_s, kernel_build_s:
    its `compile_file` spans' seconds, the kernels built again) and their totals (fx_hits,
    fx_misses, aot_hits, aot_misses, dynamo_s, kernel_build_s, served: compiles whose every
    lookup hit, missed: compiles with a miss)."""
    marks = _text_marks(trace)
    bundles = _top_level_bundles(trace)
    ranks = set(marks) | set(bundles["rank"].to_list() if bundles.height else [])
    if not ranks:
        return []
    counts = cache_counts(trace)
    comp = trace.compiles
    spans = trace.spans
    out = []
    for rank in sorted(ranks, key=lambda r: (r is not None, r or 0)):
        t = marks.get(rank)
        b = bundles.filter(pl.col("rank").is_null() if rank is None else pl.col("rank") == rank) if bundles.height else bundles
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
        if b.height:
            artifacts.setdefault("inductor", b.height)
            how.append(f"{b.height} Triton bundle{'s' if b.height != 1 else ''} of FX graph entries emitted outside any compile "
                       "(TritonBundler.read_and_emit)")
        certainty = "certain" if t else "likely"
        first = (t["file"], t["lineno"]) if t else (b.row(0, named=True)["file"], b.row(0, named=True)["lineno"])
        rc = counts.filter(pl.col("rank").is_null() if rank is None else pl.col("rank") == rank)
        per: dict[str, dict[str, Any]] = {}
        for cid, cache, event, n in rc.select("compile_id", "cache", "event", "count").iter_rows():
            if cid is None or event == "bypass":
                continue
            p = per.setdefault(cid, {"fx_hits": 0, "fx_misses": 0, "aot_hits": 0, "aot_misses": 0})
            p[f"{'fx' if cache == 'fx_graph' else 'aot'}_{'hits' if event == 'hit' else 'misses'}"] += int(n)
        rows = []
        for cid, p in per.items():
            info: dict[str, Any] = {"function": None, "filename": None, "line": None, "occurrence": None, "dynamo_s": None}
            if comp.height:
                m = comp.filter((pl.col("compile_id") == cid) & (pl.col("rank").is_null() if rank is None else pl.col("rank") == rank))
                if m.height:
                    r = m.sort("lineno").row(0, named=True)
                    info = {"function": r["function"], "filename": r["filename"], "line": r["line"],
                            "occurrence": r["occurrence"], "dynamo_s": r["dynamo_time_s"]}
            build = 0.0
            if spans.height:
                build = float(spans.filter((pl.col("compile_id") == cid) & (pl.col("name") == "compile_file")
                                           & (pl.col("rank").is_null() if rank is None else pl.col("rank") == rank))
                              ["duration_s"].fill_null(0).sum())
            # only a compile the artifacts served built its kernels again: a miss builds them anyway
            rows.append({"rank": rank, "compile_id": cid, **info, **p,
                         "kernel_build_s": round(build, 3) if p["fx_hits"] else None})
        rows.sort(key=lambda x: (x["occurrence"] or 0, [int(v) if v.isdigit() else 0 for v in re.split(r"[/_]", x["compile_id"])]))
        tot = {k: sum(x[k] for x in rows) for k in ("fx_hits", "fx_misses", "aot_hits", "aot_misses")}
        out.append({
            "rank": rank, "artifacts": artifacts, "keys": keys, "certainty": certainty, "how": "; ".join(how),
            "file": first[0], "lineno": first[1], "compiles": rows, **tot,
            "dynamo_s": round(sum(x["dynamo_s"] or 0 for x in rows), 3),
            "kernel_build_s": round(sum(x["kernel_build_s"] or 0 for x in rows), 3),
            "served": sum(1 for x in rows if not x["fx_misses"] and not x["aot_misses"]),
            "missed": sum(1 for x in rows if x["fx_misses"] or x["aot_misses"]),
        })
    return out
