"""Why a compile missed the cache (issue 47): the key input that changed, by hash.

fixtures/cachekey/ is one real program run seven times against one Inductor cache
(fixtures/make_cachekey_fixtures.py): `warm` hits what `cold` wrote, every other run has exactly
one change against `warm`. Each test asserts the named cause against the change that was made,
and that nothing else is named.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import traceview
from tests.conftest import FIXTURES
from traceview.analyze import cache_keys as ck
from traceview.output.report import build_report
from traceview.workflow.diff import build_diff, gate, parse_fail_on, render_diff

CK = FIXTURES / "cachekey"


@pytest.fixture(scope="module")
def runs() -> dict[str, traceview.Trace]:
    return {name: traceview.load(str(CK / name))
            for name in ("warm", "flag", "const", "dtype", "torchrun", "rank_config", "rank_cache")}


def _changes(diff: dict) -> dict[tuple, list[tuple]]:
    """(rank, caches) -> the changed components (component, old, new) of each cache_keys row."""
    return {(r["rank"], tuple(r["caches"])): [(c["component"], c["old"], c["new"]) for c in r["changes"]]
            for r in diff["cache_keys"]}


def test_the_table_holds_every_component_with_its_hash(runs):
    t = ck.cache_keys(runs["warm"])
    fx = t.filter(t["cache"] == "fx_graph")
    assert set(fx["state"]) == {"hit"} and set(fx["status"]) == {"logged"}
    assert fx.height == 636  # torch 2.13's FX graph key: one component per input
    row = fx.filter(fx["component"] == "cpp_runtime_thread_count").row(0, named=True)
    assert (row["text"], row["compile_id"], row["lookup"]) == ("2", "0/0", 0)
    # the AOTAutograd key's components are logged with its logger at DEBUG (the fixtures set it)
    aot = t.filter(t["cache"] == "aot_autograd")
    assert set(aot["status"]) == {"logged"} and "aot_config" in set(aot["component"])


@pytest.mark.parametrize(("run", "expected"), [
    ("flag", [("inductor_config[fallback_random]", "False", "True")]),
    ("dtype", [("example_inputs[0]", None, None), ("example_inputs[1]", None, None)]),
])
def test_diff_names_the_one_changed_input(runs, run, expected):
    d = build_diff(runs["warm"], runs[run])
    (row,) = d["cache_keys"]  # both caches missed for the same reason: one row
    assert row["caches"] == ["fx_graph", "aot_autograd"] and row["state_a"] == "hit" and row["key_changed"]
    got = [(c["component"], c["old"] if expected[0][1] else None, c["new"] if expected[0][1] else None) for c in row["changes"]]
    assert got == expected
    if run == "dtype":
        assert [c["fields"] for c in row["changes"]] == [{"dtype": ["torch.float32", "torch.float64"]}] * 2
        assert "example input 0: dtype float32 -> float64; example input 1: dtype float32 -> float64" in row["words"]
    else:
        assert row["words"] == "missed (A hit): Inductor config fallback_random: False -> True"


def test_an_address_in_the_text_is_not_a_change(runs):
    # fx_kwargs[get_decomp_fn] prints a function's address: another text in every process, the same hash
    a, b = (ck.cache_keys(runs[n]) for n in ("warm", "flag"))
    pick = [t.filter((t["cache"] == "fx_graph") & (t["component"] == "fx_kwargs[get_decomp_fn]")).row(0, named=True) for t in (a, b)]
    assert pick[0]["text"] != pick[1]["text"] and pick[0]["hash"] == pick[1]["hash"]
    assert all(c["component"] != "fx_kwargs[get_decomp_fn]" for r in build_diff(runs["warm"], runs["flag"])["cache_keys"]
               for c in r["changes"])


def test_a_constant_in_the_code_is_the_graph(runs):
    d = build_diff(runs["warm"], runs["const"])
    by_cache = {tuple(r["caches"]): r for r in d["cache_keys"]}
    assert set(by_cache) == {("fx_graph",), ("aot_autograd",)}  # each cache has its own graph text
    for r in by_cache.values():
        (c,) = r["changes"]
        assert c["kind"] == "graph"
        assert any("0.5" in x for x in c["removed_lines"]) and any("0.25" in x for x in c["added_lines"])
        assert not any("0.5" in x for x in c["added_lines"])
    for r in by_cache.values():  # the graph's node metadata names the user's line of the changed node
        assert r["changes"][0]["sources"] == ["train.py:12 `return torch.tanh(h * 0.25) + h`"]
    assert by_cache[("aot_autograd",)]["changes"][0]["added_lines"] == ["mul = h * 0.25"]  # Dynamo's graph
    fx = by_cache[("fx_graph",)]["changes"][0]
    assert fx["removed_lines"] == ["mul = torch.ops.aten.mul.Tensor(mm, 0.5)"]
    assert fx["added_lines"] == ["mul = torch.ops.aten.mul.Tensor(mm, 0.25)"]


def test_torchrun_against_standalone_is_the_thread_count(runs):
    d = build_diff(runs["warm"], runs["torchrun"])  # a single process against each rank
    assert _changes(d) == {
        (r, ("fx_graph", "aot_autograd")): [("cpp_runtime_thread_count", "2", "1")] for r in (0, 1)
    }
    assert all("OMP_NUM_THREADS=1, which torchrun sets when it starts several processes" in r["words"] for r in d["cache_keys"])


def test_fail_on_cache_key_changed(runs):
    rules = parse_fail_on("cache-key-changed")
    (line,) = gate(build_diff(runs["warm"], runs["flag"]), rules)
    assert line.startswith("cache-key-changed: 1 cache miss(es) with a changed key") and "fallback_random" in line
    same = build_diff(runs["warm"], runs["warm"])
    assert same["cache_keys"] == [] and gate(same, rules) == []
    text = " ".join(render_diff(build_diff(runs["warm"], runs["flag"])).split())
    assert ("cache key: step (train.py:11): FX graph and AOTAutograd caches missed (A hit): "
            "Inductor config fallback_random: False -> True") in text


def test_summary_names_the_rank_with_its_own_config(runs):
    rep = build_report(runs["rank_config"])
    keys = rep["cache"]["keys"]
    assert {(e["cache"], e["kind"], tuple(e["odd_ranks"]), tuple(e["common_ranks"])) for e in keys["ranks"]} == {
        ("fx_graph", "key_differs", (1,), (0,)), ("aot_autograd", "key_differs", (1,), (0,))}
    for e in keys["ranks"]:
        assert [(c["component"], c["old"], c["new"]) for c in e["changes"]] == [("inductor_config[size_asserts]", "True", "False")]
    (v,) = rep["cache"]["verdicts"]
    assert v.startswith("rank 1: the FX graph and AOTAutograd keys of step (train.py:9) differ from rank 0's in "
                        "Inductor config size_asserts: True -> False")
    assert "same config on every rank" in v
    # torchrun alone: both ranks have one key, no verdict
    assert build_report(runs["torchrun"])["cache"]["verdicts"] == []


def test_summary_names_the_rank_that_missed_a_shared_key(runs):
    # rank 1 alone had its own, empty cache directory: the same key, a miss where rank 0 hit
    rep = build_report(runs["rank_cache"])
    assert [(e["cache"], e["kind"], e["hit"], e["missed"]) for e in rep["cache"]["keys"]["ranks"]] == [
        ("aot_autograd", "missed_same_key", [0], [1]), ("fx_graph", "missed_same_key", [0], [1])]
    assert rep["cache"]["verdicts"] == [
        "rank 1 missed the FX graph and AOTAutograd keys of step (train.py:9) that rank 0 hit: the same key, so the "
        "cache was not shared (another cache directory) or was written too late"]
    # against the torchrun run (both ranks missed then, filling the shared cache): rank 1 missed A's very key
    d = build_diff(runs["torchrun"], runs["rank_cache"])
    assert [(r["rank"], r["same_key"], r["key_changed"], r["state_a"]) for r in d["cache_keys"]] == []  # both cold: no change
    d = build_diff(runs["rank_config"], runs["rank_cache"])
    assert [(r["rank"], r["caches"], r["same_key"], r["changes"] != []) for r in d["cache_keys"]] == [
        (1, ["fx_graph", "aot_autograd"], False, True)]


def test_within_a_run_the_recompile_that_missed():
    # rank 1 of collective_size_mismatch is fed a batch of 6 where the others get 8
    t = traceview.load(str(FIXTURES / "corpus" / "collective_size_mismatch"))
    reps = [e for e in ck.repeat_misses(t) if e["cache"] == "fx_graph"]
    assert [(e["rank"], e["compile_id"], e["previous"]) for e in reps] == [(1, "0/1", "0/0")]
    assert [(c["component"], c["fields"]) for c in reps[0]["changes"]] == [
        ("example_inputs[0]", {"shape": ["torch.Size([8, 8])", "torch.Size([6, 8])"]})]
    # the AOTAutograd key's components were not logged there (no DEBUG): said once, never a cause
    v = build_report(t)["cache"]["verdicts"]
    assert v == ["rank 1 [0/1] step (collective_size_mismatch.py:29) missed the cache, as its recompile must (dimension 0 "
                 "of x varies (seen: 8, 6)): its FX graph key differs from [0/0]'s in example input 0: shape [8, 8] -> [6, 8]",
                 "AOTAutograd key components not logged: this torch logs no key components for it unless "
                 "TORCH_LOGS=+torch._functorch._aot_autograd.autograd_cache"]


def _damaged(tmp_path: Path, run: str, damage) -> Path:
    """A copy of a real run's trace with its FX graph lookup's payload changed by `damage`."""
    (src,) = (CK / run / "trace").glob("*.log.gz")
    lines = gzip.decompress(src.read_bytes()).decode().split("\n")
    i = next(i for i, ln in enumerate(lines) if '"name": "fx_graph_cache_' in ln and ln.startswith("V"))
    payload = json.loads(lines[i + 1][1:])
    lines[i + 1] = "\t" + damage(payload)
    out = tmp_path / run / "trace"
    out.mkdir(parents=True)
    (out / src.name.removesuffix(".gz")).write_text("\n".join(lines))
    return out.parent


@pytest.mark.parametrize(("damage", "why"), [
    (lambda p: json.dumps({**p, "components": "gm: …"}), "components is a str, not a list"),
    (lambda p: json.dumps(p)[:5000], "not JSON (cut short?)"),
    (lambda p: json.dumps({k: v for k, v in p.items() if k != "components"}), "no components"),
])
def test_bad_components_are_one_problem_and_not_logged(tmp_path, runs, damage, why):
    path = _damaged(tmp_path, "flag", damage)
    t = traceview.load(str(path))
    bad = t.problems.filter(t.problems["problem"] == "bad_cache_key")
    assert bad.height == 1 and bad["detail"][0].startswith(f"fx_graph_cache_miss: {why}")
    d = build_diff(runs["warm"], t)
    # the AOTAutograd key still names the flag; the unreadable FX graph key names no cause
    assert [(r["caches"], [c["component"] for c in r["changes"]]) for r in d["cache_keys"]] == [
        (["aot_autograd"], ["inductor_config[fallback_random]"])]
    # alone (the AOTAutograd key compared with itself: no miss there), the FX graph key is "not logged"
    fx = [r for r in ck.diff_lookups(runs["warm"], against=t) if r["cache"] == "fx_graph"]
    assert [(r["changes"], r["logged"], r["same_key"]) for r in fx] == [([], False, False)]
    from traceview.analyze.judge import cache_pair_words

    assert cache_pair_words(fx[0]) == "missed (A hit): not logged"


def test_summary_page_and_sql_show_the_verdict(runs):
    from html import unescape

    from traceview.output import page
    from traceview.output.sql import run_query
    from traceview.output.summary import render_text

    rep = build_report(runs["rank_config"])
    (v,) = rep["cache"]["verdicts"]
    text = " ".join(render_text(rep, width=200).split())
    assert "cache: FX graph 1 hits / 1 misses (50% hits)" in text and v in text  # under COMPILE TIME's cache line
    html = " ".join(unescape(page.render_page(runs["rank_config"], rep)).split())
    assert v in html
    q = run_query(runs["rank_config"], "SELECT a.component, a.text, b.text FROM cache_keys a JOIN cache_keys b "
                  "ON a.component = b.component AND a.cache = b.cache WHERE a.rank = 0 AND b.rank = 1 "
                  "AND a.cache = 'fx_graph' AND a.hash <> b.hash", engine="polars")
    assert q.rows == [("inductor_config[size_asserts]", "True", "False")]


def test_each_rank_on_its_own_gpu_is_no_rank_difference():
    # real 2-GPU runs (torch 2.11, H200): every rank's inputs are on its own cuda:N, in the key
    t = traceview.load(str(FIXTURES / "gpu" / "fsdp2"))
    groups = ck.rank_key_groups(t)
    assert groups and {e["kind"] for e in groups} == {"device_index"}
    assert not any(v.startswith("rank 1: ") for v in build_report(t)["cache"]["verdicts"])
    # a rank whose compiled code differs is named, device indices left out of what differs
    t = traceview.load(str(FIXTURES / "gpu" / "funcol_extra_allreduce"))
    (fx,) = [e for e in ck.rank_key_groups(t) if e["cache"] == "fx_graph"]
    assert (fx["kind"], fx["odd_ranks"], [c["kind"] for c in fx["changes"]]) == ("key_differs", [1], ["graph"])
    assert any("all_reduce" in x for x in fx["changes"][0]["added_lines"])


def test_one_rank_against_another_and_an_export(runs, tmp_path):
    from traceview.output.export import write_export

    d = build_diff(runs["rank_config"], runs["rank_config"], rank=0, against_rank=1)
    assert [(r["rank"], r["caches"], [(c["component"], c["old"], c["new"]) for c in r["changes"]]) for r in d["cache_keys"]] == [
        (1, ["fx_graph", "aot_autograd"], [("inductor_config[size_asserts]", "True", "False")])]
    # an export read back says the same (its events hold the payloads)
    write_export(runs["rank_config"], tmp_path / "export")
    back = traceview.load(str(tmp_path / "export"))
    assert build_report(back)["cache"]["verdicts"] == build_report(runs["rank_config"])["cache"]["verdicts"]


def test_report_and_diff_json_validate(runs):
    import jsonschema
    import orjson

    from tests.conftest import ROOT

    def errors(schema: str, doc: dict) -> list[str]:
        v = jsonschema.Draft202012Validator(json.loads((ROOT / "traceview" / "schemas" / schema).read_text()))
        return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(json.loads(orjson.dumps(doc)))]

    for t in (runs["rank_config"], runs["rank_cache"], traceview.load(str(FIXTURES / "corpus" / "collective_size_mismatch"))):
        assert errors("report.schema.json", build_report(t)) == []
    for b in ("const", "torchrun", "dtype"):
        assert errors("diff.schema.json", build_diff(runs["warm"], runs[b])) == []
