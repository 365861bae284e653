"""`traceview sql`: DuckDB over the tables of a real trace."""

from __future__ import annotations

import json
import sys

import pytest

import traceview
from tests.conftest import FIXTURES, SHARED, needs_shared
from traceview.cli import main
from traceview.output.sql import SqlError, render, run_query, tables_named

MULTIRANK = FIXTURES / "multirank"


def test_query_over_the_compiles_of_both_ranks() -> None:
    t = traceview.load(MULTIRANK / "trace")
    res = run_query(t, "select rank, compile_id, function from compiles where compile_id = '0/1'")
    # rank 1 saw a batch of 6 once and recompiled forward; rank 0 did not
    assert res.columns == ["rank", "compile_id", "function"]
    assert res.rows == [(1, "0/1", "forward")]
    # only the tables the query names are built
    assert not t.is_loaded("graph_nodes")


def test_a_join_of_two_tables_matches_polars() -> None:
    t = traceview.load(MULTIRANK / "trace")
    res = run_query(
        t,
        "select c.rank, count(*) as n from compiles c join spans s on c.file = s.file and c.compile_id = s.compile_id "
        "group by c.rank order by c.rank",
    )
    want = (
        t.compiles.select("file", "rank", "compile_id")
        .join(t.spans.select("file", "compile_id"), on=["file", "compile_id"])
        .group_by("rank").len().sort("rank").rows()
    )
    assert res.rows == [tuple(r) for r in want]


def test_formats(capsys: pytest.CaptureFixture[str]) -> None:
    q = "select rank, count(*) as compiles from compiles group by rank order by rank"
    assert main(["sql", str(MULTIRANK), q, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"rank": 0, "compiles": 3}, {"rank": 1, "compiles": 4}]
    assert main(["sql", str(MULTIRANK), q, "--format", "csv"]) == 0
    assert capsys.readouterr().out == "rank,compiles\n0,3\n1,4\n"
    assert main(["sql", str(MULTIRANK), q]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["rank", "compiles"] and lines[2].split() == ["0", "3"] and lines[-1] == "(2 rows)"


def test_log_text_is_shown_escaped() -> None:
    from traceview.output.sql import QueryResult

    out = render(QueryResult(["x"], [("a\x1b[31mred\nb",)]), "table")
    assert "\x1b" not in out and "\\x1b[31mred\\nb" in out


def test_a_bad_query_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sql", str(MULTIRANK), "select no_such_column from compiles"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no_such_column" in err and "Traceback" not in err


def test_without_duckdb_polars_answers_and_duckdb_asked_for_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)  # import duckdb raises ImportError
    assert main(["sql", str(MULTIRANK), "select 1 as one"]) == 0
    assert capsys.readouterr().out.splitlines()[0].strip() == "one"
    assert main(["sql", str(MULTIRANK), "select 1", "--engine", "duckdb"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "traceview[sql]" in err
    with pytest.raises(SqlError):
        run_query(traceview.load(MULTIRANK / "trace"), "select 1", engine="duckdb")


def test_tables_named() -> None:
    assert tables_named("SELECT * FROM Compiles JOIN graph_breaks USING (compile_id)") == ["compiles", "graph_breaks"]


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_both_engines_answer_the_same(engine: str) -> None:
    """Issue 34.7: polars' own SQL engine is the embedded default; DuckDB when installed. The
    same tables, the same rows."""
    t = traceview.load(MULTIRANK / "trace")
    res = run_query(t, "select rank, compile_id, function from compiles where compile_id = '0/1'", engine=engine)
    assert (res.columns, res.rows) == (["rank", "compile_id", "function"], [(1, "0/1", "forward")])
    grouped = run_query(t, "select rank, count(*) as n from compiles group by rank order by rank", engine=engine)
    assert grouped.rows == [(0, 3), (1, 4)]


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_an_unknown_table_or_column_is_one_line_naming_what_exists(engine: str) -> None:
    t = traceview.load(MULTIRANK / "trace")
    with pytest.raises(SqlError) as e:
        run_query(t, "select * from nosuch", engine=engine)
    assert str(e.value).startswith("query failed: no table nosuch; the tables are: events, strings,")
    assert "\n" not in str(e.value)
    with pytest.raises(SqlError) as e:
        run_query(t, "select nope from compiles", engine=engine)
    assert str(e.value).startswith("query failed: no column nope; the columns of the tables named are compiles: file, rank,")


def test_sql_answers_on_an_install_without_duckdb() -> None:
    """The base install has no DuckDB: `traceview sql` runs on polars (DuckDB hidden from the
    child process as an install without it would be)."""
    import subprocess

    from tests.conftest import ROOT

    code = (
        "import sys; sys.modules['duckdb'] = None\n"
        "from traceview.cli import main\n"
        f"raise SystemExit(main(['sql', {str(MULTIRANK)!r}, 'SELECT rank, count(*) AS n FROM compiles GROUP BY rank ORDER BY rank', '--format', 'csv']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "rank,n\n0,3\n1,4\n"
    code_duck = code.replace("'--format', 'csv'", "'--engine', 'duckdb'")
    r = subprocess.run([sys.executable, "-c", code_duck], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "--engine duckdb needs DuckDB" in r.stderr and "Traceback" not in r.stderr


# ------------------------------------------------- the tables agree with the summary (issue 38.3)
def _summary_breaks(paths: list[str], capsys: pytest.CaptureFixture[str]) -> int:
    """The summary's `GRAPH BREAKS  N distinct, M in all`: M (0 when it has no such section)."""
    import re

    assert main(["summary", *paths, "--width", "120"]) == 0
    m = re.search(r"^GRAPH BREAKS  \d+ distinct, (\d+) in all", capsys.readouterr().out, re.M)
    return int(m.group(1)) if m else 0


def _sql_rows(paths: list[str], query: str, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    assert main(["sql", *paths, query, "--format", "json", "--engine", "polars"]) == 0
    return json.loads(capsys.readouterr().out)


BREAK_INPUTS = [
    # a trace directory beside its text log (each break logged twice): 4 breaks, not 8
    ["fixtures/graph_breaks"],
    # the same, named as two inputs, and the text log given a second time
    ["fixtures/graph_breaks/trace", "fixtures/graph_breaks/torch_logs.txt", "fixtures/graph_breaks/torch_logs.txt"],
    ["fixtures/multirank"],  # 2 ranks
    ["fixtures/training"],  # no breaks
    ["fixtures/recompiles"],
    ["fixtures/corpus/fullgraph_break"],  # a break known only from a failed compile
    ["fixtures/corpus/multirank4"],
]
SHARED_BREAK_INPUTS = [
    ["gpu/train_dynamic"],  # trace and text log on a GPU
    ["gpu/big"],
    ["peer-tlparse/comp_metrics.log"],  # breaks known only from restart reasons
]


@pytest.mark.parametrize("paths", BREAK_INPUTS + [pytest.param(p, marks=needs_shared) for p in SHARED_BREAK_INPUTS],
                         ids=lambda p: "+".join(x.rsplit("/", 1)[-1] for x in p))
def test_graph_breaks_rows_are_the_breaks_the_summary_counts(paths: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    paths = [p if p.startswith("fixtures") else str(SHARED / p) for p in paths]
    summary = _summary_breaks(paths, capsys)
    [row] = _sql_rows(paths, "SELECT count(*) AS n FROM graph_breaks", capsys)
    assert row["n"] == summary
    # the per-source records are a table of their own: both sources where both logged
    by_source = {r["source"]: r["n"] for r in _sql_rows(paths, "SELECT source, count(*) AS n FROM graph_break_records GROUP BY source", capsys)}
    if paths[0] == "fixtures/graph_breaks":
        assert (summary, by_source) == (4, {"trace": 4, "text": 4})


def test_a_break_both_sources_logged_is_the_traces_row(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _sql_rows(["fixtures/graph_breaks"], "SELECT source, origin, label, gb_id FROM graph_breaks ORDER BY label", capsys)
    assert [(r["source"], r["origin"], r["label"], r["gb_id"]) for r in rows] == [
        # print and item restarted the analysis: the summary calls those compiles 0/0_1, 4/0_1
        ("trace", "message", "0/0_1", "gb0059"),
        ("trace", "message", "2/0", "gb0170"),
        ("trace", "message", "4/0_1", "gb0124"),
        ("trace", "message", "6/0", "gb0025"),
    ]


@needs_shared
def test_breaks_from_restart_reasons_are_rows_too(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _sql_rows([str(SHARED / "peer-tlparse/comp_metrics.log")], "SELECT origin, source, compile_id FROM graph_breaks", capsys)
    assert {(r["origin"], r["source"]) for r in rows} == {("restart_reason", "trace")} and len(rows) == 2
    assert _sql_rows([str(SHARED / "peer-tlparse/comp_metrics.log")], "SELECT count(*) AS n FROM graph_break_records", capsys) == [{"n": 0}]


def test_labels_are_the_summarys_compile_ids(capsys: pytest.CaptureFixture[str]) -> None:
    """The summary's `[0/0_1]` (a compile Dynamo restarted) and `[0/0 #2]` (the second 0/0,
    after torch._dynamo.reset()) are the tables' label; compile_id stays the join key."""
    import re

    for name in ("graph_breaks", "corpus/reset_unequal_models"):
        assert main(["summary", f"fixtures/{name}", "--width", "200"]) == 0
        printed = set(re.findall(r"\[(\d+/\d+(?:_\d+)?(?: #\d+)?)\]", capsys.readouterr().out))
        labels = {r["label"] for r in _sql_rows([f"fixtures/{name}"], "SELECT label FROM compiles", capsys)}
        assert printed and printed <= labels
    rows = _sql_rows(["fixtures/corpus/reset_unequal_models"], "SELECT compile_id, occurrence, attempts, label FROM compiles", capsys)
    assert [(r["compile_id"], r["occurrence"], r["label"]) for r in rows if r["compile_id"] == "0/0"] == [
        ("0/0", 1, "0/0_1"), ("0/0", 2, "0/0 #2")
    ]
    # every table with a compile id says the same label for the same compile
    spans = _sql_rows(["fixtures/graph_breaks"], "SELECT DISTINCT compile_id, label FROM spans WHERE compile_id = '4/0'", capsys)
    assert spans == [{"compile_id": "4/0", "label": "4/0_1"}]
