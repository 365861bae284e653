"""FX graph text -> graph_nodes, on real traces (GPU runs, tlparse's inputs, the CPU fixtures)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
import torch

from parsers.fxgraph import (
    cache,
    columns,
    graph_kind,
    is_graph_text,
    parse_fx_graph,
    parse_fx_graph_rows,
    parse_fx_graphs,
    reference,
    split_traced_graphs,
)
from parsers.graphs import build_graph_nodes, build_graphs
from tests.conftest import needs_shared
from tests.helpers_graphs import (
    FIXTURES,
    GPU,
    PEER,
    events_of,
    log_records_of,
    raw_envelopes,
    tables,
    trace_files,
)

TRAIN = GPU / "train_dynamic"
GPT = "/home/user/gptdemo/gpt.py"


def _payload(path: Path, kind: str, nth: int = 0) -> str:
    envs = [e for e in raw_envelopes(path) if kind in (e["kind"], e["name"])]
    return envs[nth]["payload"]


@needs_shared
def test_backward_graph_nodes_exact() -> None:
    text = _payload(trace_files(TRAIN / "trace")[0], "aot_backward_graph")
    df = parse_fx_graph(text)
    assert df.height == 123
    assert df["op"].value_counts().sort("op").rows() == [
        ("call_function", 98), ("output", 1), ("placeholder", 24)
    ]
    # expanded_def signature: one placeholder per line, AOT descriptors kept as args
    ph = df.filter(pl.col("op") == "placeholder")
    assert ph["node"].to_list()[:3] == ["primals_1", "primals_2", "primals_4"]
    assert ph.row(0, named=True)["annotation"] == "f32[8, 128, 256][32768, 256, 1]cuda:0"
    assert ph.row(0, named=True)["args"] == "PlainAOTInput(idx=0)"
    assert ph.filter(pl.col("node") == "tangents_1")["args"].item() == (
        "TangentAOTInput(output=PlainAOTOutput(idx=0))"
    )
    first = df.filter(pl.col("op") == "call_function").row(0, named=True)
    assert first == {
        "order": 24, "module": "GraphModule", "node": "view_12", "op": "call_function",
        "target": "aten.view.default", "annotation": "f32[1024, 256][256, 1]cuda:0",
        "args": "tangents_1, [1024, 256]", "user_file": GPT, "user_line": 28,
        "user_function": "forward",
        "user_code": "x = x + self.out(F.gelu(self.fc(self.ln2(x))))",
        "node_meta": None, "seq_nr": None, "line": 30,
    }
    # the `;  a = None` deletion trailer is not part of the args
    mm = df.filter(pl.col("node") == "mm").row(0, named=True)
    assert (mm["target"], mm["args"]) == ("aten.mm.default", "view_12, permute_8")
    # every compute node of the backward carries a forward source line of gpt.py
    comp = df.filter(pl.col("op") == "call_function")
    assert comp["user_file"].unique().to_list() == [GPT]
    assert sorted(comp["user_line"].unique().to_list()) == [21, 22, 23, 24, 25, 26, 27, 28]
    out = df.filter(pl.col("op") == "output").row(0, named=True)
    assert out["args"].startswith("(\nadd_10,  # GradAOTOutput(grad_of=PlainAOTInput(idx=0))")
    assert out["user_file"] is None


@needs_shared
def test_joint_graph_placeholders_from_pytree_flatten() -> None:
    df = parse_fx_graph(_payload(trace_files(TRAIN / "trace")[0], "aot_joint_graph"))
    ph = df.filter(pl.col("op") == "placeholder")
    # `def forward(self, primals, tangents)` are pytree args, not nodes: the nodes are the
    # names unpacked by tree_flatten_spec, with the body declarations' annotations
    assert ph["node"].to_list() == [f"primals_{i}" for i in range(1, 14)] + ["tangents_1"]
    assert ph["order"].to_list() == list(range(14))
    assert ph.row(0, named=True)["args"] == "PlainAOTInput(idx=0)"
    assert ph.row(13, named=True)["annotation"] == "f32[8, 128, 256][32768, 256, 1]cuda:0"
    getitem = df.filter(pl.col("node") == "getitem").row(0, named=True)
    assert (getitem["target"], getitem["args"]) == ("operator.getitem", "var_mean[0]")
    # multi-line `return pytree.tree_unflatten([...], self._out_spec)`
    assert df["op"].to_list()[-1] == "output"
    assert df.height == 171


@needs_shared
def test_dynamo_graph_ops() -> None:
    df = parse_fx_graph(_payload(trace_files(TRAIN / "trace")[0], "dynamo_output_graph"))
    assert df.height == 37
    x = df.row(0, named=True)
    # `l_x_ = L_x_`: placeholder node l_x_ whose target is the signature name
    assert (x["node"], x["op"], x["target"]) == ("l_x_", "placeholder", "L_x_")
    assert x["annotation"] == "f32[8, 128, 256][32768, 256, 1]cuda:0"
    by = {r["node"]: r for r in df.iter_rows(named=True)}
    assert (by["layer_norm"]["op"], by["layer_norm"]["target"]) == (
        "call_function", "torch.nn.functional.layer_norm")
    assert by["linear"]["target"] == "torch._C._nn.linear"
    assert (by["split"]["op"], by["split"]["target"], by["split"]["args"]) == (
        "call_method", "split", "256, dim = 2")
    assert (by["q"]["target"], by["q"]["user_line"]) == ("operator.getitem", 21)
    assert (by["q_1"]["op"], by["q_1"]["target"]) == ("call_method", "transpose")
    assert (by["x"]["target"], by["x"]["args"]) == ("operator.add", "l_x_ + linear_1")
    assert (by["output"]["args"], by["output"]["op"]) == ("(x_1,)", "output")
    assert df.filter(pl.col("op") == "placeholder").height == 13


@needs_shared
def test_text_log_graphs_parse_like_trace() -> None:
    """The aot_graphs blocks of TORCH_LOGS (one-line signature, path before `class`) give the
    same nodes as the trace payloads of the same run."""
    t = tables(str(TRAIN))
    n = t["graph_nodes"]
    cols = ["compile_id", "node", "op", "target", "annotation", "user_file", "user_line",
            "user_code"]
    for kind, count in (("aot_forward", 146), ("aot_backward", 248), ("aot_inference", 2410)):
        a = n.filter((pl.col("graph_kind") == kind) & (pl.col("source") == "trace"))
        b = n.filter((pl.col("graph_kind") == kind) & (pl.col("source") == "text"))
        assert a.height == b.height == count
        assert a.select(cols).sort("compile_id", "node").equals(b.select(cols).sort("compile_id", "node"))


@needs_shared
def test_split_traced_graphs_record() -> None:
    lr = log_records_of(str(TRAIN / "torch_logs.txt"))
    rec = lr.filter((pl.col("artifact") == "aot_graphs") & (pl.col("lineno") == 759)).row(0, named=True)
    (dump,) = split_traced_graphs(rec["text"])
    assert (dump.title, dump.kind, dump.aot_graph, dump.line_offset) == (
        "Backward graph 0", "aot_backward", 0, 2)
    assert dump.text.startswith(" <eval_with_key>.4 class GraphModule(torch.nn.Module):\n")
    assert dump.text in rec["text"]
    assert is_graph_text(dump.text)


@needs_shared
def test_graphs_table_kinds_ids_and_exact_text() -> None:
    t = tables(str(TRAIN))
    g = t["graphs"]
    tr = g.filter(pl.col("source") == "trace")
    assert tr.group_by("kind").len().sort("kind").rows() == [
        ("aot_backward", 2), ("aot_forward", 2), ("aot_inference", 1), ("aot_joint", 2),
        ("dynamo", 3), ("joint_after", 1), ("joint_before", 1), ("post_grad", 5),
        ("post_grad_before", 5), ("pre_grad_after", 3), ("pre_grad_before", 3),
    ]
    # post-grad and AOT graphs know the wrapper (AOT id) they were compiled into
    pg = tr.filter(pl.col("kind") == "post_grad").sort("lineno")
    assert pg.select("compile_id", "aot_id").rows() == [
        ("1/0", "0_forward"), ("1/0", "0_backward"), ("4/0", "1_inference"),
        ("1/1", "2_forward"), ("1/1", "2_backward"),
    ]
    aot = tr.filter(pl.col("kind").is_in(["aot_forward", "aot_backward", "aot_inference"]))
    assert sorted(aot["aot_id"].to_list()) == ["0_backward", "0_forward", "1_inference",
                                               "2_backward", "2_forward"]
    txt = g.filter(pl.col("source") == "text").sort("lineno")
    assert txt.select("compile_id", "kind", "aot_id", "label").rows() == [
        ("1/0", "aot_forward", "0_forward", "Forward graph 0"),
        ("1/0", "aot_backward", "0_backward", "Backward graph 0"),
        ("4/0", "aot_inference", "1_inference", "Forward graph 1"),
        ("1/1", "aot_forward", "2_forward", "Forward graph 2"),
        ("1/1", "aot_backward", "2_backward", "Backward graph 2"),
    ]
    assert g["graph_id"].n_unique() == g.height
    # trace graph text is the payload byte for byte
    raw = {e["lineno"]: e["payload"] for e in raw_envelopes(trace_files(TRAIN / "trace")[0])}
    for r in tr.iter_rows(named=True):
        assert r["text"] == raw[r["lineno"]]
        assert r["text_lineno"] == r["lineno"] + 1


_ASSIGNMENT = re.compile(r'^\s+(\w+)(?:: "[^"]*")? = ([^;\n]*)', re.M)
_NOT_A_CALL = re.compile(r"(?:self\.)?[\w.]+|None")
_RETURN = re.compile(r"^\s+return\b", re.M)


@needs_shared
def test_all_real_graphs_parse_without_unknown_lines() -> None:
    """Every graph payload of every shared trace: no statement left unparsed, node names
    unique per module, every `# File:` comment turned into user_file/user_line."""
    files = sorted(GPU.glob("*/trace/*.log")) + sorted(p for p in PEER.rglob("*") if p.is_file())
    n_graphs = n_nodes = 0
    for f in files:
        for e in raw_envelopes(f):
            if not is_graph_text(e["payload"]):
                continue
            rows = parse_fx_graph_rows(e["payload"])
            n_graphs += 1
            n_nodes += len(rows)
            assert all(r["op"] != "unknown" for r in rows), (f, e["lineno"])
            keys = [(r["module"], r["node"]) for r in rows]
            assert len(keys) == len(set(keys)), (f, e["lineno"])
            n_file = sum(1 for line in e["payload"].split("\n") if "# File: " in line)
            if n_file:
                assert any(r["user_line"] is not None for r in rows)
            # counted from the text without the parser: every `name = <expression>` statement
            # (a call, an operator, an index; not a bare name or `self.attr`) is one call node,
            # every `return` one output node
            calls = [n for n, rhs in _ASSIGNMENT.findall(e["payload"]) if not _NOT_A_CALL.fullmatch(rhs.strip())]
            assert sorted(r["node"] for r in rows if r["op"].startswith("call_")) == sorted(calls), (f, e["lineno"])
            assert sum(r["op"] == "output" for r in rows) == len(_RETURN.findall(e["payload"])), (f, e["lineno"])
    assert n_graphs > 0 and n_nodes > n_graphs


@needs_shared
def test_nested_hop_modules() -> None:
    """flex_attention's score_mod / mask_fn bodies are nested classes with their own nodes."""
    text = _payload(PEER / "cache_hit_miss.log", "dynamo_output_graph")
    df = parse_fx_graph(text)
    assert df["module"].unique(maintain_order=True).to_list() == [
        "GraphModule", "GraphModule.score_mod_0", "GraphModule.mask_fn_0"]
    top = {r["node"]: r for r in df.filter(pl.col("module") == "GraphModule").iter_rows(named=True)}
    assert (top["score_mod_0"]["op"], top["score_mod_0"]["target"]) == ("get_attr", "score_mod_0")
    assert top["flex_attention"]["target"] == "higher_order.flex_attention"
    sm = df.filter(pl.col("module") == "GraphModule.score_mod_0")
    assert sm.select("node", "op", "target").rows() == [
        ("child", "placeholder", "child"), ("child_1", "placeholder", "child_1"),
        ("child_2", "placeholder", "child_2"), ("child_3", "placeholder", "child_3"),
        ("child_4", "placeholder", "child_4"), ("sub", "call_function", "operator.sub"),
        ("add", "call_function", "operator.add"), ("output", "output", "output"),
    ]
    assert sm.filter(pl.col("node") == "add")["user_line"].item() == 457
    assert sm.filter(pl.col("node") == "add")["user_function"].item() == "score_mod"


@needs_shared
def test_old_torch_declarations_on_one_line() -> None:
    """Older torch declared body placeholders on one line joined by `; `."""
    text = _payload(PEER / "inductor_provenance_aot_log.txt", "before_post_grad_graph")
    df = parse_fx_graph(text)
    ph = df.filter(pl.col("op") == "placeholder")
    assert ph["node"].to_list() == ["arg2_1", "arg3_1", "arg4_1", "arg5_1"]
    assert ph["annotation"].to_list()[0] == "f32[8, 10][10, 1]cpu"


def _seq_graph() -> str:
    class M(torch.nn.Module):
        def forward(self, x):
            y = torch.erf(x) * 0.5
            return y.sum()

    gm = torch.fx.symbolic_trace(M())
    for i, n in enumerate(gm.graph.nodes):
        n.meta["seq_nr"] = 100 + i
        n.meta["stack_trace"] = f'  File "/src/m.py", line {30 + i}, in forward\n    y = f(x)\n'
    return gm.print_readable(print_output=False, additional_meta=["seq_nr"])


def test_seq_nr_from_additional_meta() -> None:
    """print_readable(additional_meta=["seq_nr"]) (torch's own printer) puts seq_nr in the
    stack comment: `# seq_nr: N # File: ...`."""
    text = _seq_graph()
    assert re.search(r"# seq_nr: \d+ # File: /src/m.py:\d+ in forward", text)
    df = parse_fx_graph(text).filter(pl.col("op") != "placeholder").filter(pl.col("op") != "output")
    assert df.select("node", "seq_nr", "user_line").rows() == [
        ("erf", 101, 31), ("mul", 102, 32), ("sum_1", 103, 33)]
    assert df["node_meta"].to_list() == ["seq_nr: 101", "seq_nr: 102", "seq_nr: 103"]


def test_graph_kind_names() -> None:
    assert graph_kind("inductor_post_grad_graph") == "post_grad"
    assert graph_kind("after_post_grad_graph") == "post_grad"
    assert graph_kind("optimize_ddp_split_child") == "ddp_child"
    assert graph_kind("compiled_autograd_graph") == "compiled_autograd"
    assert graph_kind("before_recompile_pre_grad") == "before_recompile_pre_grad"


def test_training_fixture_graphs() -> None:
    d = FIXTURES / "training"
    if not (d / "trace").is_dir():
        pytest.fail("the training fixture is missing: fixtures/make_fixtures.py makes it")
    ev = events_of(str(d / "trace"))
    g = build_graphs(ev, log_records_of(str(d / "torch_logs.txt")))
    n = build_graph_nodes(g)
    fw = n.filter((pl.col("graph_kind") == "aot_forward") & (pl.col("source") == "trace"))
    erf = fw.filter(pl.col("target") == "aten.erf.default").row(0, named=True)
    assert erf["node"] == "erf"
    assert erf["user_file"].endswith("fixtures/programs/training.py")
    assert (erf["user_line"], erf["user_code"]) == (23, "h = torch.erf(h) * 0.5")
    bw = n.filter((pl.col("graph_kind") == "aot_backward") & (pl.col("source") == "trace"))
    line23 = bw.filter(pl.col("user_line") == 23)["target"].to_list()
    assert "aten.exp.default" in line23 and "aten.pow.Tensor_Scalar" in line23


# --------------------------------------------------------------------------- vectorized parser
# parse_fx_graphs (all texts at once, polars string kernels) must give exactly the rows of the
# line-by-line parser; both are forced here whatever the amount of text.
def _both_parsers(texts: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[pl.DataFrame, pl.DataFrame]:
    monkeypatch.setattr(columns, "VECTOR_MIN_BYTES", 0)
    cache.clear()  # (rows cached by an earlier test may come from the reference parser)
    vec = parse_fx_graphs(texts)
    ref = pl.concat([
        pl.DataFrame(reference.parse_rows(t), schema=reference.NODE_SCHEMA)
        .with_columns(pl.lit(i, dtype=pl.UInt32).alias("graph")) for i, t in enumerate(texts)
    ]).select(vec.columns)
    return vec, ref


def _assert_same_rows(vec: pl.DataFrame, ref: pl.DataFrame, texts: list[str]) -> None:
    if vec.equals(ref):
        return
    for i, t in enumerate(texts):  # name the first graph that differs
        a, b = vec.filter(pl.col("graph") == i), ref.filter(pl.col("graph") == i)
        assert a.rows() == b.rows(), t[:2000]
    raise AssertionError("row order differs")


@needs_shared
def test_vectorized_parser_equals_line_parser_on_real_graphs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    texts: list[str] = []
    for d in sorted(GPU.iterdir()) + sorted(FIXTURES.iterdir()):
        if (d / "trace").is_dir():
            logs = d / "torch_logs.txt"
            lr = log_records_of(str(logs)) if logs.exists() else None
            texts += build_graphs(events_of(str(d / "trace")), lr)["text"].to_list()
    for p in sorted(PEER.rglob("*")):
        if p.is_file() and p.stat().st_size:
            texts += build_graphs(events_of(str(p)))["text"].to_list()
    texts = list(dict.fromkeys(t for t in texts if t))
    assert len(texts) > 200
    texts += texts[::7]  # repeated texts are parsed once
    vec, ref = _both_parsers(texts, monkeypatch)
    _assert_same_rows(vec, ref, texts)


_ODD_LINES = [
    "        x = L_x_", "        l_y_ = L_y_", "        a = l_x_", "        b = a",
    "        a += b;  iadd = a", '        c: "f32[3]" = a * 2', "        d = -a",
    "        e = a[0]", "        f = None[0]", "        g = if.x", "        h = x.if",
    "        i = x.shape", "        j = self.sub.w", "        k = self.sub(x)",
    "        m = x.view(3, 4)", "        n = torch.ops.aten.mm.default(a, b);  a = b = None",
    "        o = f(x)[0]", "        p = f(x) + g(y)", "        q = torch.cat([a, (b, c)], 0)",
    "        r = foo('a(b', \"c)d\")", "        s = foo(a))(", "        w = 08[1]",
    "        y = x[-1]", "        aa = 1.5 * x", "        bb = x < y", "        cc = x is None",
    "        ii =   spaced(x)  ", '        jj : "ann" = x', '        kk: " f32 " = x',
    '        ll: "a=b" = x', "        nn: int = 5", "        pp = fn(x);   x = None",
    "        # File: /a/b.py:12 in fn, code: x = y", "        # File: /a/b.py:13, code: z",
    "        # seq_nr: 7 # File: /a/b.py:14 in g, code: w",
    "        # No stacktrace found for following nodes", "        # other", "        pass", "",
    "        return (x,", "            y)", "        returnx = f(y)",
    "    class Sub(torch.nn.Module):", "        class Inner(torch.nn.Module):",
    " <eval> class GraphModule(torch.nn.Module):", "        x = 'class Foo(torch.nn.Module):'",
    "    def forward(self, a, b=1, *args, **kw):", '    def forward(self, L_x_: "f32[3]", L_y_):',
    "    def forward(", "        self,", '        a: "f32[3]",  # PlainAOTInput(idx=0)',
    "        c = 5,", "    ):", ")",
    '        primals_1: "f32[3]"  # PlainAOTInput(idx=0)',
    '        primals_2: "f32[4]"; primals_3: "f32[5]"',
    "        primals_1, primals_2, = fx_pytree.tree_flatten_spec([primals, tangents], self._in_spec)",
    "        x, y = foo(z)", "        é = tört(x)", "        x = f('ü')",
    "        # File: /a/é.py:1 in f, code: ü = 1", "\x1c       x = g(y)",
    "\x1b[31m        x = k(y)\x1b[0m", '        x = f("a\\"b")', "        x = f([[[[[1]]]]])",
    "        x = f(a)\r", "        z2 = output.x(a)", "        output = f(a)",
    "        w2 = L_x_.view(a)", "        w3 = l_x_.view(a)", "        w4 = primals_1.view(a)",
]


def test_vectorized_parser_on_odd_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines the fast patterns leave to Python (non-ASCII, \\x1c, ANSI colors, keywords,
    operators, odd spacing), renames, pytree unpacking, nested modules, multi-line
    signatures and returns, in many orders."""
    import random

    rng = random.Random(0)
    head = ["class GraphModule(torch.nn.Module):",
            "    def forward(self, L_x_, L_y_, primals, tangents):"]
    texts = ["\n".join(head + [rng.choice(_ODD_LINES) for _ in range(rng.randint(1, 40))])
             for _ in range(300)]
    vec, ref = _both_parsers(texts, monkeypatch)
    _assert_same_rows(vec, ref, texts)


def test_parsed_graph_cache_gives_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    # an export parses the graphs of many files, one group at a time: texts seen before come
    # from the process's cache, and must give exactly the rows of a fresh parse
    texts = build_graphs(events_of(str(FIXTURES / "training" / "trace")))["text"].to_list()
    texts = [t for t in texts if t]
    assert len(texts) >= 8
    cache.clear()
    fresh = cache.parse_uncached(pl.Series(texts))
    first = parse_fx_graphs(texts)  # fills the cache
    assert first.equals(fresh)
    assert cache.cached_texts() == len(set(texts))
    mixed = texts[::-1] + texts[:3]  # all from the cache, in another order, with repeats
    want = cache.parse_uncached(pl.Series(mixed))
    assert parse_fx_graphs(mixed).equals(want)
    assert cache.cached_texts() == len(set(texts))
    # a cache over its budget (it holds more than 10 rows now) is emptied, not grown
    monkeypatch.setattr(cache, "CACHE_MAX_ROWS", 10)
    assert parse_fx_graphs([*texts[1:], "def forward(self, x):\n    return (x,)"]).height > 0
    assert cache.cached_texts() == len(set(texts[1:])) + 1
