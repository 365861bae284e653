"""Multi-rank export as a hive-partitioned parquet dataset, read lazily by DuckDB and polars."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest

import traceview
from tests.conftest import FIXTURES, PEER, needs_shared
from tests.helpers_graphs import raw_envelopes
from traceview.output.export import write_export


def test_duckdb_reads_the_rank_partitions(tmp_path: Path) -> None:
    t = traceview.load(FIXTURES / "multirank" / "trace")
    out = write_export(t, tmp_path / "out")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["partitioned_by_rank"] is True
    got = duckdb.sql(
        f"select rank, count(*) as n from read_parquet('{out}/events/*/*.parquet', hive_partitioning=true) "
        "group by rank order by rank"
    ).fetchall()
    want = t.events.group_by("rank").len().sort("rank").rows()
    assert [(int(r), n) for r, n in got] == [(r, n) for r, n in want]
    # the compile that only rank 1 has (rank 1 saw a batch of 6 once) is found by a query
    extra = duckdb.sql(
        f"select rank, compile_id from read_parquet('{out}/compiles/*/*.parquet', hive_partitioning=true) "
        "where compile_id = '0/1'"
    ).fetchall()
    assert [(int(r), c) for r, c in extra] == [(1, "0/1")]


def test_polars_scans_lazily(tmp_path: Path) -> None:
    t = traceview.load(FIXTURES / "multirank" / "trace")
    out = write_export(t, tmp_path / "out")
    lf = pl.scan_parquet(out / "recompiles", hive_partitioning=True)
    df = lf.filter(pl.col("rank") == 1).select("compile_id", "kind", "guard_source", "dim").collect()
    assert ("0/1", "size", "x", 0) in df.unique().rows()
    assert lf.filter(pl.col("rank") == 0).select(pl.len()).collect().item() == 0


@needs_shared
def test_partition_per_rank_of_a_48_way_copy(tmp_path: Path) -> None:
    # 48 rank files made from copies of tlparse's real multi-rank logs (each renamed rank_N:
    # the file name's rank wins over the envelopes')
    src = sorted((PEER / "multi_rank_runtime").glob("*.log"))
    d = tmp_path / "in"
    d.mkdir()
    for r in range(48):
        (d / f"dedicated_log_torch_trace_rank_{r}_copy.log").write_bytes(src[r % len(src)].read_bytes())
    t = traceview.load(d)
    out = write_export(t, tmp_path / "out")
    ranks = sorted(int(p.name.split("=")[1]) for p in (out / "events").iterdir())
    assert ranks == list(range(48))
    # envelopes per rank, counted in the source files by the tests' own reader
    per_file = [len(raw_envelopes(f)) for f in src]
    want = {r: per_file[r % len(src)] for r in range(48)}
    got = dict(duckdb.sql(
        f"select rank, count(*) from read_parquet('{out}/events/*/*.parquet', hive_partitioning=true) group by rank"
    ).fetchall())
    assert got == want


def test_export_writes_the_graph_tables_to_the_export_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A many-rank export builds the graph tables in its workers and writes them to the
    export, not also into the parse (a cache entry or a temporary one): the parse keeps only
    what the md5 checks found. An export from the cache and one from a temporary parse hold
    the same rows, and the cache entry builds its graph tables when asked, as before."""
    from traceview.ingest.parts import part_dirs

    monkeypatch.setenv("TRACEVIEW_CACHE_DIR", str(tmp_path / "cache"))
    cached = traceview.load(FIXTURES / "multirank" / "trace", cache=True)
    temporary = traceview.load(FIXTURES / "multirank" / "trace")
    a, b = write_export(cached, tmp_path / "a"), write_export(temporary, tmp_path / "b")
    for t in (cached, temporary):
        assert not any((p / "graphs.arrow").exists() for p in part_dirs(t.workdir))
        assert all((p / "checks.arrow").exists() for p in part_dirs(t.workdir))
    names = sorted(d.name for d in a.iterdir() if d.is_dir() and d.name != "digest")  # (its files: the digest's tests)
    assert {"events", "graphs", "graph_nodes", "guards", "compiles"} <= set(names)
    assert names == sorted(d.name for d in b.iterdir() if d.is_dir() and d.name != "digest")
    for name in names:
        got = [pl.read_parquet(d / name, hive_partitioning=True).sort(pl.all()) for d in (a, b)]
        assert got[0].height > 0 and got[0].equals(got[1]), name
    again = traceview.load(FIXTURES / "multirank" / "trace", cache=True)
    assert again.graphs.height == pl.read_parquet(a / "graphs", hive_partitioning=True).height
