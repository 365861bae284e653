"""Portable caches (issue 45, class 5) on real torch 2.13 runs (fixtures/corpus/megacache_*):
a first process compiles and writes torch.compiler.save_cache_artifacts(); a second, with a
fresh empty TORCHINDUCTOR_CACHE_DIR, loads them (load_cache_artifacts) before compiling. The
verdict comes first: a warm start from loaded artifacts, in part, or nothing served; the
hits and misses equal torch's counters (oracle.json); the ordinary local warm cache and the
PGO warm start keep their own verdicts."""

from __future__ import annotations

import ast
import json

import jsonschema
import pytest

import traceview
from tests.conftest import ROOT
from traceview.analyze.portable_caches import cache_loads
from traceview.output.report import build_report
from traceview.workflow.diff import build_diff

from ..conftest import FIXTURES

CORPUS = FIXTURES / "corpus"
SCHEMA = jsonschema.Draft202012Validator(json.loads((ROOT / "traceview" / "schemas" / "report.schema.json").read_text()))
SOURCES = {"trace": ("trace", None), "trace+text": ("trace", "torch_logs.txt"), "text": ("torch_logs.txt", None)}


def _load(name: str, source: str, run: str = "") -> traceview.Trace:
    d = CORPUS / name / run if run else CORPUS / name
    path, logs = SOURCES[source]
    return traceview.load(d / path, logs=[d / logs]) if logs else traceview.load(d / path)


def _counters(name: str, run: str = "") -> tuple[int, int, int, int]:
    d = CORPUS / name / run if run else CORPUS / name
    [proc] = json.loads((d / "oracle.json").read_text())["processes"]
    c = proc["counters"]
    ind, aot = c.get("inductor", {}), c.get("aot_autograd", {})
    return (ind.get("fxgraph_cache_hit", 0), ind.get("fxgraph_cache_miss", 0),
            aot.get("autograd_cache_hit", 0), aot.get("autograd_cache_miss", 0))


def _loaded_keys(name: str) -> dict[str, list[str]]:
    """What the program printed after load_cache_artifacts (torch's CacheInfo): type -> keys."""
    line = next(ln for ln in (CORPUS / name / "stdout.txt").read_text().splitlines() if ln.startswith("loaded "))
    return ast.literal_eval(line.removeprefix("loaded "))


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize(("name", "facet", "severity"), [
    ("megacache_load", "served", "fact"), ("megacache_partial", "partial", "act"), ("megacache_config_miss", "missed", "act"),
])
def test_load_found_and_counted_as_torch_counts(name: str, facet: str, severity: str, source: str) -> None:
    rep = build_report(_load(name, source))
    assert [e for e in SCHEMA.iter_errors(json.loads(json.dumps(rep, default=str)))] == []
    [ld] = rep["cache"]["loaded"]
    assert (ld["fx_hits"], ld["fx_misses"], ld["aot_hits"], ld["aot_misses"]) == _counters(name)
    keys = _loaded_keys(name)
    if source == "trace":  # the trace's mark: one bundle per Inductor artifact, outside every compile
        assert ld["certainty"] == "likely" and ld["artifacts"] == {"inductor": len(keys["inductor"])}
    else:  # the text log's AOTAutograd entry written outside any compile (and, with +torch.compiler._cache, every key)
        assert ld["certainty"] == "certain" and ld["artifacts"]["aot_autograd"] == len(keys["aot_autograd"])
    if source != "trace" and name == "megacache_partial":
        assert ld["keys"] == keys
    first = rep["findings"][0]
    assert (first["kind"], first["severity"], first["facet"]) == ("cache", severity, facet)
    assert first["certainty"] == ld["certainty"]


def test_warm_start_words() -> None:
    rep = build_report(_load("megacache_load", "trace+text"))
    first = rep["findings"][0]
    assert first["claim"] == (
        "warm start from loaded cache artifacts: torch.compiler.load_cache_artifacts wrote 2 Inductor (FX graph), "
        "1 AOTAutograd entries into the cache before compiling; every lookup after it hit (FX graph 2 hits / 0 misses, "
        "AOTAutograd 1 hit / 0 misses, in 1 compile)")
    lines = {a["label"]: a["text"] for a in first["lines"]}
    assert lines["kernels:"].startswith("the compiles the artifacts served built their C++ kernels again (")
    assert rep["head"][:2] == ["findings: none (no recompiles, graph breaks or failures)",
                               "warm start: every cache lookup hit the artifacts torch.compiler.load_cache_artifacts loaded"]
    # Dynamo still traced: the compile has its dynamo phase
    [c] = rep["cache"]["loaded"][0]["compiles"]
    assert c["compile_id"] == "0/0" and c["dynamo_s"] > 0 and c["function"] == "forward"


def test_partial_names_the_compile_that_missed() -> None:
    rep = build_report(_load("megacache_partial", "trace"))
    first = rep["findings"][0]
    assert first["claim"].startswith("warm start from loaded cache artifacts, in part: 1 compile of 2 missed them "
                                     "(FX graph 2 hits / 2 misses, AOTAutograd 1 hit / 1 miss)")
    assert next(a["text"] for a in first["lines"] if a["label"] == "").startswith("[0/1] ")
    assert rep["head"][0] == "findings: loaded cache artifacts missed 1 compile"


def test_config_miss_served_nothing() -> None:
    rep = build_report(_load("megacache_config_miss", "trace"))
    assert rep["head"][0] == "findings: loaded cache artifacts served nothing"
    assert rep["findings"][0]["claim"].startswith("loaded cache artifacts served nothing: every lookup after "
                                                  "torch.compiler.load_cache_artifacts missed (FX graph 0 hits / 2 misses")


@pytest.mark.parametrize("name", ["megacache_load", "megacache_partial", "megacache_config_miss"])
def test_the_saving_run_is_no_load(name: str) -> None:
    """The first run compiled cold and saved: no load, every lookup a miss (torch's counters)."""
    t = _load(name, "trace+text", "first_run")
    assert cache_loads(t) == []
    fx_hit, fx_miss, aot_hit, aot_miss = _counters(name, "first_run")
    assert (fx_hit, aot_hit) == (0, 0) and fx_miss == 2 and aot_miss == 1


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("name", ["cache_warm_hits", "pgo_warm_start"])
def test_local_warm_caches_keep_their_verdicts(name: str, source: str) -> None:
    """A warm TORCHINDUCTOR_CACHE_DIR (hits inside the compile) and a PGO profile are no load."""
    rep = build_report(_load(name, source))
    assert rep["cache"]["loaded"] == []
    assert all(f["kind"] != "cache" for f in rep["findings"])
    assert not any(h.startswith("warm start") for h in rep["head"])


def test_diff_says_what_the_load_saved() -> None:
    """`diff first_run this` on the load: the cache counts torch kept in each run, and the
    phases the load took away (Inductor's lowering) against the one it did not (Dynamo)."""
    a = _load("megacache_load", "trace", "first_run")
    b = _load("megacache_load", "trace")
    d = build_diff(a, b)
    load = d["cache_load"]
    assert load is not None
    assert (load["b"]["fx_hits"], load["b"]["aot_hits"]) == _counters("megacache_load")[::2]
    assert (load["a"]["fx_misses"], load["a"]["aot_misses"]) == (2, 1)
    [c] = load["compiles"]
    assert c["compile_id"] == "0/0" and c["inductor_s"][0] > 0 and c["inductor_s"][1] == 0


@pytest.mark.parametrize("source", ["trace", "trace+text"])
def test_load_on_every_rank(source: str) -> None:
    """2 gloo ranks (mp.spawn) each load the artifacts: one load per rank, each rank's hits
    equal to that rank's counters, one finding per rank (the warm start)."""
    name = "megacache_ranks"
    procs = {p["rank"]: p for p in json.loads((CORPUS / name / "oracle.json").read_text())["processes"]}
    rep = build_report(_load(name, source))
    loads = {ld["rank"]: ld for ld in rep["cache"]["loaded"]}
    assert sorted(loads) == [0, 1]
    for r, ld in loads.items():
        c = procs[r]["counters"]
        assert (ld["fx_hits"], ld["fx_misses"], ld["aot_hits"], ld["aot_misses"]) == (
            c["inductor"]["fxgraph_cache_hit"], c["inductor"].get("fxgraph_cache_miss", 0),
            c["aot_autograd"]["autograd_cache_hit"], c["aot_autograd"].get("autograd_cache_miss", 0))
        assert ld["certainty"] == ("likely" if source == "trace" else "certain")
    cache = [f for f in rep["findings"] if f["kind"] == "cache"]
    assert sorted(r for f in cache for r in f["ranks"]) == [0, 1] and {f["facet"] for f in cache} == {"served"}
    assert rep["findings"][0]["kind"] == "cache"


@pytest.mark.parametrize("name", ["megacache_load", "megacache_config_miss"])
def test_the_saving_run_beside_is_another_process(name: str) -> None:
    """The run's directory as a user opens it holds both runs (first_run/ beside): the cold run's
    misses are its own process's, never counted as the load's (each process by its pid)."""
    rep = build_report(traceview.load(CORPUS / name))
    [ld] = rep["cache"]["loaded"]
    assert (ld["fx_hits"], ld["fx_misses"], ld["aot_hits"], ld["aot_misses"]) == _counters(name)
    assert rep["findings"][0]["facet"] == ("served" if name == "megacache_load" else "missed")


def test_diff_names_the_compile_the_artifacts_lacked() -> None:
    d = build_diff(_load("megacache_partial", "trace", "first_run"), _load("megacache_partial", "trace"))
    load = d["cache_load"]
    assert [c["compile_id"] for c in load["compiles"]] == ["0/0"]
    [new] = load["only_b"]
    assert (new["compile_id"], new["fx_hits"], new["fx_misses"], new["aot_hits"], new["aot_misses"]) == ("0/1", 0, 2, 0, 1)
    assert (load["b"]["fx_hits"], load["b"]["fx_misses"], load["b"]["aot_hits"], load["b"]["aot_misses"]) == _counters("megacache_partial")
