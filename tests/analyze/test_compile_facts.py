"""Facts the logs carry (issue 13 class 6), on the diagnosis corpus from the trace alone and
from the text log alone: specializations, PGO code state, compiled-autograd graphs,
higher-order ops, cache bypass reasons, cache hits from text logs."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

import traceview
from traceview.analyze.compile_facts import compile_facts
from traceview.cli import main
from traceview.output.report import build_report
from traceview.output.summary import render_text

from ..conftest import FIXTURES, SHARED, needs_shared

CORPUS = FIXTURES / "corpus"
SOURCES = ("trace", "torch_logs.txt")


def facts(name: str, source: str) -> dict[str, list[dict[str, Any]]]:
    return compile_facts(traceview.load(CORPUS / name / source))


def summary(name: str, source: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["summary", str(CORPUS / name / source), "--no-cache", "--width", "200"]) == 0
    return capsys.readouterr().out


def evidence_line(f: dict[str, Any]) -> str:
    with open(f["file"], "rb") as fh:
        data = fh.read()
    if f["file"].endswith(".gz"):
        import gzip

        data = gzip.decompress(data)
    return data.decode("utf-8", "replace").splitlines()[f["lineno"] - 1]


@pytest.mark.parametrize("source", SOURCES)
def test_specializations(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    got = facts("symbolic_shape_specialization", source)
    rows = sorted((s["symbol"], s["source"], s["value"], s["reason"], s["user_line"], s["user_code"]) for s in got["specializations"])
    assert rows == [
        ("s27", "x.size()[1]", "3", "range_refined_to_singleton", 21, "return x + self.table"),
        ("s77", "x.size()[0]", "4", "range_refined_to_singleton", 21, "return x + self.table"),
    ]
    for s in got["specializations"]:
        assert s["symbol"] in evidence_line(s) and s["compile_id"] == "0/0"
    out = summary("symbolic_shape_specialization", source, capsys)
    assert "[0/0] x.size()[0] specialized to 4 at " in out and "symbolic_shape_specialization.py:21 (return x + self.table)" in out


@pytest.mark.parametrize("source", SOURCES)
def test_pgo_warm_start(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    got = facts("pgo_warm_start", source)["pgo"]
    assert got[0]["action"] == "get" and got[0]["where"] == "local" and got[0]["compile_id"] == "0/0"
    if source == "trace":
        assert got == [got[0]] and got[0]["detail"] == "L['x']: tensor size=[?, 8] stride=[S(1), 1]"
        assert "get_local_code_state" in evidence_line(got[0])
    else:
        assert [(p["action"], p["detail"]) for p in got[1:]] == [("put", "no change, skipping")]
        assert "hit local" in evidence_line(got[0])
    assert "PGO profile read (local code state)" in summary("pgo_warm_start", source, capsys)


@pytest.mark.parametrize("source", SOURCES)
def test_compiled_autograd_graphs_are_named(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    got = facts("compiled_autograd", source)["compiled_autograd_graphs"]
    assert [g["id"] for g in got] == ["!0", "!1"]
    if source == "trace":
        assert [g["compiles"] for g in got] == [["!0/1/0"], ["!1/3/0"]]
        by_fn = build_report(traceview.load(CORPUS / "compiled_autograd" / source))["compile_time"]["by_function"]
        assert all(b["function"] is not None for b in by_fn)
    out = summary("compiled_autograd", source, capsys)
    assert "2 compiled-autograd graphs (backward captured by compiled autograd): !0" in out
    assert "? (?)" not in out


@pytest.mark.parametrize(
    ("name", "op", "count"),
    [("hop_cond", "cond", 1), ("hop_checkpoint", "tag_activation_checkpoint", 1), ("hop_invoke_subgraph", "invoke_subgraph", 2)],
)
@pytest.mark.parametrize("source", SOURCES)
def test_higher_order_ops(name: str, op: str, count: int, source: str) -> None:
    got = facts(name, source)["higher_order_ops"]
    assert [(h["op"], h["count"], h["compile_id"]) for h in got] == [(op, count, "0/0")]


@pytest.mark.parametrize("source", [*SOURCES, ""])
def test_cache_bypass_reasons(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The user's own bypass (a plain function as post_grad_custom_post_pass) stays actionable:
    one fact for both caches, counted as torch counted it (oracle.json: inductor
    fxgraph_cache_bypass 1, aot_autograd autograd_cache_bypass 1), from the trace, the text log
    or both (each lookup once)."""
    f = facts("cache_bypass", source)
    if source:
        assert sorted((c["cache"], c["event"], c["reason"]) for c in f["cache_events"]) == [
            ("aot_autograd", "bypass", "Unsupported post grad custom pass"),
            ("fx_graph", "bypass", "Unsupported post grad custom pass"),
        ]
    counters = oracle_counters("cache_bypass")
    (b,) = f["cache_bypasses"]
    assert (b["owner"], b["cause"], b["reason"], b["compiles"]) == ("user", "custom_pass", "Unsupported post grad custom pass", ["0/0"])
    assert b["caches"] == {"fx_graph": counters["inductor"]["fxgraph_cache_bypass"],
                           "aot_autograd": counters["aot_autograd"]["autograd_cache_bypass"]} == {"fx_graph": 1, "aot_autograd": 1}
    out = summary("cache_bypass", source, capsys)
    (line,) = [x for x in unwrapped(out) if "bypassed" in x and "cache:" not in x]
    assert line.strip().startswith("FX graph and AOTAutograd caches bypassed 1 time each in [0/0]: Unsupported post grad custom pass: "
                                   "a custom Inductor pass that is not a CustomGraphPass with a uuid()")
    assert "give it one to make the graph cacheable" in line and "by torch itself" not in line


def unwrapped(out: str) -> list[str]:
    """The summary's lines with each wrapped one joined back (its continuation lines are
    indented deeper)."""
    lines: list[str] = []
    for x in out.splitlines():
        if lines and x.startswith("      ") and x.strip():
            lines[-1] += " " + x.strip()
        else:
            lines.append(x)
    return lines


def oracle_counters(name: str) -> dict[str, dict[str, int]]:
    """torch._dynamo.utils.counters of a corpus run (its oracle.json, one process)."""
    (proc,) = json.loads((CORPUS / name / "oracle.json").read_text())["processes"]
    return proc["counters"]


def raw_bypasses(run: Path, artifact: str) -> list[tuple[int | None, str, str]]:
    """(rank, compile id, reason) of every `artifact` record in a run's trace files, read
    straight from the files (the record's JSON line and its payload line), not by traceview."""
    out = []
    for path in sorted((run / "trace").iterdir()):
        lines = gzip.decompress(path.read_bytes()).decode().splitlines() if path.suffix == ".gz" else path.read_text().splitlines()
        for i, line in enumerate(lines):
            if f'"name": "{artifact}"' in line:
                meta = json.loads(line[line.index("{"):])
                cid = f"{meta['frame_id']}/{meta['frame_compile_id']}" if meta.get("frame_id") is not None else None
                out.append((meta.get("rank"), cid, json.loads(lines[i + 1].lstrip("\t"))["cache_bypass_reason"]))
    return out


@pytest.mark.parametrize(
    ("run", "cause", "what"),
    [
        # torch 2.11, DTensor.from_local in a compiled TP block: Dynamo's closure per compile
        ("dtensor_from_local", "dtensor_from_local", "Dynamo puts DTensor.from_local into the graph"),
        # torch 2.11, torch.compile(DDP(model)) split by DDPOptimizer into bucket pieces
        ("ddp2_user_module", "ddp_optimizer", "DDPOptimizer (torch.compile of a DDP model)"),
        ("ddp2_buckets", "ddp_optimizer", "DDPOptimizer (torch.compile of a DDP model)"),
    ],
)
def test_torch_made_bypasses_are_one_fact_said_as_torchs(run: str, cause: str, what: str, capsys: pytest.CaptureFixture[str]) -> None:
    """AOTAutograd cache bypasses that torch itself causes, logged once per compile (per bucket
    piece under DDPOptimizer), in texts that differ only in an address (a closure made per
    compile): one fact, torch's, with their count; never 'make it cacheable'."""
    path = FIXTURES / "gpu" / run
    raw = raw_bypasses(path, "aotautograd_cache_bypass")
    assert raw and not raw_bypasses(path, "fx_graph_cache_bypass")
    (b,) = compile_facts(traceview.load(path))["cache_bypasses"]
    assert (b["owner"], b["cause"]) == ("torch", cause)
    assert b["count"] == b["caches"]["aot_autograd"] == len(raw)
    assert b["texts"] == len({r for _, _, r in raw})
    assert b["compiles"] == sorted({c for _, c, _ in raw})
    assert b["ranks"] == [0, 1] == sorted({rk for rk, _, _ in raw})
    assert "0x" not in (b["reason"] or "").replace("0x…", "")
    assert main(["summary", str(path), "--no-cache", "--width", "400"]) == 0
    out = capsys.readouterr().out
    lines = [x for x in unwrapped(out) if "bypassed" in x and "cache:" not in x]
    assert len(lines) == 1, lines
    assert lines[0].strip().startswith(f"AOTAutograd cache bypassed {len(raw)} times in ")
    assert f"on ranks 0-1, by torch itself (nothing in your code causes it): {what}" in lines[0]
    assert "make it cacheable" not in lines[0]


def test_dtensor_bypass_texts_differ_only_in_an_address() -> None:
    """The planted situation itself: 6 bypass texts, 6 addresses, one reason without them."""
    raw = raw_bypasses(FIXTURES / "gpu" / "dtensor_from_local", "aotautograd_cache_bypass")
    texts = {r for _, _, r in raw}
    assert len(raw) == len(texts) == 6
    assert len({re.sub(r"0x[0-9a-f]+", "", t) for t in texts}) == 1
    assert all("Function name: prim from_local" in t for t in texts)


def test_run_time_compiles_without_a_shape_env(capsys: pytest.CaptureFixture[str]) -> None:
    """piecewise_backend: its torch._inductor.compile pieces bypass both caches ("No shape env"),
    its standalone_compile pieces look them up (miss): the caller's choice, said with the way
    out, counted as torch counted it (oracle.json)."""
    counters = oracle_counters("piecewise_backend")
    (b,) = facts("piecewise_backend", "trace")["cache_bypasses"]
    assert (b["owner"], b["cause"], b["reason"]) == ("user", "no_shape_env", "No shape env")
    assert b["caches"] == {"fx_graph": counters["inductor"]["fxgraph_cache_bypass"],
                           "aot_autograd": counters["aot_autograd"]["autograd_cache_bypass"]} == {"fx_graph": 4, "aot_autograd": 4}
    assert b["frameless"] == 8 and b["compiles"] == []
    out = summary("piecewise_backend", "trace", capsys)
    (fact,) = [x for x in unwrapped(out) if "bypassed" in x and "cache:" not in x]
    assert fact.strip().startswith("FX graph and AOTAutograd caches bypassed 4 times each in compiles without a Dynamo frame: No shape env: ")
    assert "torch._inductor.standalone_compile(gm, inputs" in fact and "by torch itself" not in fact
    # the cache line counts what torch counted: misses 3 and 3, bypasses 4 and 4
    (line,) = [x for x in unwrapped(out) if x.strip().startswith("cache:")]
    assert line.strip() == (
        f"cache: FX graph 0 hits / {counters['inductor']['fxgraph_cache_miss']} misses (0% hits) / 4 bypassed, "
        f"AOTAutograd 0 hits / {counters['aot_autograd']['autograd_cache_miss']} misses (0% hits) / 4 bypassed")


@needs_shared
def test_a_cache_turned_off_is_a_setting_and_nothing_is_served() -> None:
    """tlparse's provenance log: AOTAutograd bypassed because the FX graph cache is off; no FX
    graph lookup was logged: the cache line says "not logged", the fact says the cache is off
    and that every run compiles from scratch (never that the FX graph cache still serves)."""
    report = build_report(traceview.load(SHARED / "peer-tlparse" / "inductor_provenance_jit_debug_handle_log.txt"))
    (b,) = report["facts"]["cache_bypasses"]
    assert (b["owner"], b["cause"], b["caches"]) == ("setting", "fx_graph_cache_off", {"aot_autograd": 1})
    assert report["cache"]["not_logged"] == ["fx_graph"] and report["cache"]["fx_graph_misses"] == 0
    text = " ".join(render_text(report, width=1000).split())
    assert ("AOTAutograd cache bypassed 1 time in [0/0]: FX graph cache is not enabled: the FX graph cache is off "
            "(torch._inductor.config.fx_graph_cache, TORCHINDUCTOR_FX_GRAPH_CACHE=0), and AOTAutograd's cache needs it. "
            "Every run compiles these graphs from scratch") in text
    assert "cache: FX graph not logged (Inductor ran on 1 graph, no lookup recorded" in text


def test_a_bypass_reason_no_rule_knows_is_unknown() -> None:
    from traceview.analyze.compile_facts import bypass_owner

    assert bypass_owner("Failed to pickle cache key") == ("unknown", None)
    assert bypass_owner(None) == ("unknown", None)
    # a function outside torch in the graph is the user's; torch's own module is torch's
    assert bypass_owner("Unsupported call_function target <function f at 0x1>. \n Function module: __main__, \nFunction name: f")[0] == "user"
    assert bypass_owner("Unsupported call_function target flex_attention. \n Function module: torch.ops.higher_order, "
                        "\nFunction name: flex_attention") == ("torch", "torch_function")


def test_cache_line_only_for_caches_with_a_logged_lookup(capsys: pytest.CaptureFixture[str]) -> None:
    """No "0 hits / 0 misses": ddp_rank_recompile (aot_eager: torch counted no cache lookup) has
    no cache line; inductor_only_failure's Inductor compile failed after its FX graph lookup
    (torch counted fxgraph_cache_miss 1) and before the trace recorded it: "not logged", never
    "0 misses"; its AOTAutograd miss was logged (autograd_cache_miss 1)."""
    for proc in json.loads((CORPUS / "ddp_rank_recompile" / "oracle.json").read_text())["processes"]:  # 4 ranks
        assert not any("cache" in k for k in proc["counters"]["aot_autograd"]) and "inductor" not in proc["counters"]
    out = summary("ddp_rank_recompile", "trace", capsys)
    assert not [x for x in out.splitlines() if x.strip().startswith("cache:")]
    counters = oracle_counters("inductor_only_failure")
    assert counters["inductor"]["fxgraph_cache_miss"] == counters["aot_autograd"]["autograd_cache_miss"] == 1
    out = summary("inductor_only_failure", "trace", capsys)
    (line,) = [x for x in unwrapped(out) if x.strip().startswith("cache:")]
    assert line.strip().startswith("cache: FX graph not logged (Inductor ran on 1 graph, no lookup recorded: ")
    assert line.strip().endswith("the trace alone cannot tell), AOTAutograd 0 hits / 1 misses (0% hits)")


def test_cache_hits_from_the_text_log_alone(capsys: pytest.CaptureFixture[str]) -> None:
    got = facts("cache_warm_hits", "torch_logs.txt")["cache_events"]
    assert sorted((c["cache"], c["event"]) for c in got) == [("aot_autograd", "hit"), ("fx_graph", "hit")]
    assert "fx graph cache hit for key" in evidence_line(next(c for c in got if c["cache"] == "fx_graph"))
    out = summary("cache_warm_hits", "torch_logs.txt", capsys)
    assert "FX graph cache (text log): 1 hits / 0 misses (hit in 0/0)" in out
    assert "AOTAutograd cache (text log): 1 hits / 0 misses (hit in 0/0)" in out
    assert "text log only: no compile times or status" in out


def _oracle_counters(run: str) -> dict[str, Any]:
    import json

    [proc] = json.loads((CORPUS / "cache_warm_hits" / run / "oracle.json").read_text())["processes"]
    return proc["counters"]


@pytest.mark.parametrize("run", ["", "first_run"])
def test_text_log_cache_counts_match_the_trace_and_torch(run: str) -> None:
    """The text log alone (`[0/0] fx graph cache hit for key …`) counts the same lookups, on
    the same compile, as the trace's fx_graph_cache_*/aotautograd_cache_* artifacts and
    torch's own counters; given both, each lookup is counted once (the trace's)."""
    from traceview.analyze import compile_time as ct

    d = CORPUS / "cache_warm_hits" / run
    text = ct.cache_summary(traceview.load(str(d / "torch_logs.txt")))
    trace = ct.cache_summary(traceview.load(str(d / "trace")))
    both = ct.cache_summary(traceview.load(str(d / "trace"), logs=[str(d / "torch_logs.txt")]))
    keys = ("fx_graph_hits", "fx_graph_misses", "fx_graph_bypasses", "aot_autograd_hits", "aot_autograd_misses", "aot_autograd_bypasses")
    assert [text[k] for k in keys] == [trace[k] for k in keys] == [both[k] for k in keys]
    assert (text["from_text_log"], trace["from_text_log"], both["from_text_log"]) == (2, 0, 0)
    c = _oracle_counters(run)  # torch's own counters (torch._dynamo.utils.counters)
    assert (text["fx_graph_hits"], text["fx_graph_misses"]) == (
        c["inductor"].get("fxgraph_cache_hit", 0), c["inductor"].get("fxgraph_cache_miss", 0))
    assert (text["aot_autograd_hits"], text["aot_autograd_misses"]) == (
        c["aot_autograd"].get("autograd_cache_hit", 0), c["aot_autograd"].get("autograd_cache_miss", 0))
    assert (text["fx_graph_hits"], text["fx_graph_misses"]) == ((1, 0) if run == "" else (0, 1))
    event = "hit" if run == "" else "miss"
    assert sorted(text["text_log_by_compile"], key=str) == sorted([
        {"rank": None, "compile_id": "0/0", "cache": "fx_graph", "event": event, "count": 1},
        {"rank": None, "compile_id": "0/0", "cache": "aot_autograd", "event": event, "count": 1},
    ], key=str)


def test_text_log_cache_lookups_in_the_ui() -> None:
    from traceview.tui.model import TraceModel

    m = TraceModel.build(traceview.load(str(CORPUS / "cache_warm_hits" / "torch_logs.txt")))
    [row] = m.text_log_compiles()
    assert (row["compile_id"], row["fx_cache_hits"], row["aot_cache_hits"], row.get("fx_cache_misses")) == ("0/0", 1, 1, None)


def test_no_facts_where_there_are_none() -> None:
    assert facts("bool_flag", "trace") == {k: [] for k in facts("bool_flag", "trace")}


# --------------------------------------------------------------- data-dependent sizes
# moe_nonzero_unbacked: MoE routing with capture_dynamic_output_shape_ops=True. torch's own
# record of each symbol is its `create_unbacked_symbol` envelope (trace) / `create_unbacked_symint`
# line (TORCH_LOGS=dynamic): 3 in route's compile 0/0 (u0 from the user's nonzero, u1-u2 from
# the backend re-tracing), 12 in the resume function's 1/0 (u0-u3, one per expert, u4-u11 the
# backend's).
UNBACKED_FACTS = [
    "[0/0] u0: data-dependent size from torch.nonzero at moe_nonzero_unbacked.py:24 "
    "(active = torch.nonzero(scores.amax(-1) > 0).squeeze(-1)); runtime asserts: u0 in [0, 16]; "
    "graph break at moe_nonzero_unbacked.py:25: Data-dependent branching (gb0170)",
    "[0/0] u1-u2: data-dependent sizes from torch.nonzero, re-created by the backend re-tracing the graph "
    "(no user line of their own)",
    "[1/0] u0-u3: data-dependent sizes from torch.nonzero at moe_nonzero_unbacked.py:30 "
    "(idx = torch.nonzero(choice == e).squeeze(-1)); runtime asserts: each >= 0",
    "[1/0] u4-u11: data-dependent sizes from torch.nonzero, re-created by the backend re-tracing the graph "
    "(no user line of their own)",
]
UNBACKED_FACTS_TEXT = [
    # the text log has no graph code (no asserts) and does not say who made a symbol without a line
    "[0/0] u0: data-dependent size from torch.nonzero at moe_nonzero_unbacked.py:24 "
    "(active = torch.nonzero(scores.amax(-1) > 0).squeeze(-1)); "
    "graph break at moe_nonzero_unbacked.py:25: Data-dependent branching (gb0170)",
    "[0/0] u1-u2: data-dependent sizes from torch.nonzero (the log names no user line)",
    "[1/0] u0-u3: data-dependent sizes from torch.nonzero at moe_nonzero_unbacked.py:30 "
    "(idx = torch.nonzero(choice == e).squeeze(-1))",
    "[1/0] u4-u11: data-dependent sizes from torch.nonzero (the log names no user line)",
]


def _torch_symbol_records(source: str) -> list[tuple[str, str]]:
    """(compile id, symbol) of every symbol torch logged, read from the files directly."""
    import gzip
    import re

    d = CORPUS / "moe_nonzero_unbacked"
    if source == "trace":
        (path,) = sorted((d / "trace").glob("*.log.gz"))
        text = gzip.decompress(path.read_bytes()).decode()
        pat = r'"frame_id": (\d+), "frame_compile_id": (\d+).*?"create_unbacked_symbol": \{"symbol": "(u\d+)"'
        pat_rev = r'"create_unbacked_symbol": \{"symbol": "(u\d+)".*?"frame_id": (\d+), "frame_compile_id": (\d+)'
        out = [(f"{f}/{c}", s) for f, c, s in re.findall(pat, text)]
        return out or [(f"{f}/{c}", s) for s, f, c in re.findall(pat_rev, text)]
    text = (d / "torch_logs.txt").read_text()
    return re.findall(r"\] \[(\d+/\d+)\] create_unbacked_symint (u\d+) ", text)


@pytest.mark.parametrize("source", SOURCES)
def test_unbacked_symbols_grouped_by_user_line(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    got = facts("moe_nonzero_unbacked", source)["unbacked_symbols"]
    # every symbol torch logged, once, in its compile
    logged = _torch_symbol_records(source)
    assert len(logged) == 15
    assert sorted((g["compile_id"], s) for g in got for s in g["symbols"]) == sorted(logged)
    assert [(g["compile_id"], g["symbols_text"], g["user_line"], g["op"]) for g in got] == [
        ("0/0", "u0", 24, "torch.nonzero"),
        ("0/0", "u1-u2", None, "torch.nonzero"),
        ("1/0", "u0-u3", 30, "torch.nonzero"),
        ("1/0", "u4-u11", None, "torch.nonzero"),
    ]
    first = got[0]
    assert first["user_function"] == "route" and first["vr"] == "[-int_oo, int_oo]" and first["occurrence"] == 1
    assert first["graph_breaks"] == [
        {"filename": first["graph_breaks"][0]["filename"], "line": 25, "reason": "Data-dependent branching", "gb_id": "gb0170"}
    ]
    assert first["graph_breaks"][0]["filename"].endswith("programs/moe_nonzero_unbacked.py")
    if source == "trace":
        assert [g["created_by"] for g in got] == ["dynamo", "backend", "dynamo", "backend"]
        # the runtime asserts of the Dynamo graphs on these symbols
        assert first["asserts"] == ["u0 >= 0", "u0 <= 16"]
        assert got[2]["asserts"] == ["u0 >= 0", "u1 >= 0", "u2 >= 0", "u3 >= 0"]
        for g in got:
            assert f'"symbol": "{g["symbols"][0]}"' in evidence_line(g)
    else:
        assert [g["created_by"] for g in got] == ["dynamo", None, "dynamo", None]
        assert all(g["asserts"] == [] for g in got)
        for g in got:
            assert f"create_unbacked_symint {g['symbols'][0]} " in evidence_line(g)
    out = summary("moe_nonzero_unbacked", source, capsys)
    assert facts_lines(out) == (UNBACKED_FACTS if source == "trace" else UNBACKED_FACTS_TEXT)


def facts_lines(out: str) -> list[str]:
    """The summary's FACTS entries, each wrapped line joined back into one."""
    block = out.split("FACTS  how torch compiled (not problems by themselves)\n", 1)[1].split("\n\n", 1)[0]
    entries: list[str] = []
    for ln in block.splitlines():
        if ln.startswith("      ") and entries:
            entries[-1] += " " + ln.strip()
        else:
            entries.append(ln.strip())
    return entries


def test_unbacked_symbols_in_json_and_none_without_capture(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["summary", "--json", "--no-cache", str(CORPUS / "moe_nonzero_unbacked" / "trace")]) == 0
    report = json.loads(capsys.readouterr().out)
    groups = report["facts"]["unbacked_symbols"]
    assert set(groups[0]) == {
        "compile_id", "occurrence", "rank", "symbols", "symbols_text", "op", "created_by", "user_file", "user_line",
        "user_function", "user_code", "vr", "asserts", "graph_breaks", "source", "file", "lineno",
    }
    assert [g["symbols"] for g in groups][:3] == [["u0"], ["u1", "u2"], ["u0", "u1", "u2", "u3"]]
    # without capture_dynamic_output_shape_ops nonzero is a graph break: no symbol at all
    assert facts("moe_nonzero_break", "trace")["unbacked_symbols"] == []
    assert facts("moe_nonzero_break", "torch_logs.txt")["unbacked_symbols"] == []
