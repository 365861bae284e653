"""Text logs as clusters collect them (issue 45, class 10): parsers.textlog on the real runs of
fixtures/cluster/ (fixtures/cluster/make_cluster.py: 4 gloo ranks under Slurm `srun -l`, Open MPI
`mpirun --tag-output`, MPICH `mpiexec -l`, pdsh, torchrun on two "nodes", torch.multiprocessing;
rank 2 alone recompiles `forward`, every rank graph-breaks at `report`'s print, which prints
`rank N: reporting the mean loss`).

Each launcher's combined capture must read as the ranks' own unprefixed files (torchrun's
per-rank `--log-dir` files of the same program): the same records, each with its rank."""

from __future__ import annotations

import collections
import re
import time
from pathlib import Path

import polars as pl
import pytest

import parsers.textlog as textlog
from parsers.textlog import read_text_log
from tests.conftest import FIXTURES

CLUSTER = FIXTURES / "cluster"
# the 4-rank captures of a launcher that prefixes every line
LAUNCHED = [
    "srun_label",  # `3: ` then torch's `[rank3]:`
    "srun_label_before_init",  # `3: ` only: compiled before init_process_group
    "ompi_tag_output",  # `[1,3]<stderr>:` then `[rank3]:`
    "ompi_tag_output_before_init",  # `[1,3]<stderr>:` only
    "mpich_label_before_init",  # `[3] ` only
    "pdsh_hosts",  # `node-003: ` then `[rank3]:`
]
PRINT = re.compile(r"rank (\d+): reporting the mean loss")


def _key(r: dict) -> tuple:
    return (r["rank"], r["compile_id"], r["artifact"], r["level"], r["src_file"], r["src_line"], r["text"])


def _records(paths: list[Path]) -> collections.Counter:
    return collections.Counter(_key(r) for p in paths for r in read_text_log(p).records.iter_rows(named=True))


def _per_rank_files() -> list[Path]:
    files = sorted((CLUSTER / "torchrun_nodes" / "logs").glob("node-*/rank-*.log"))
    assert len(files) == 4
    return files


def test_the_per_rank_files_are_the_reference() -> None:
    """torchrun's per-rank files: no prefix at all, the rank from torch's `[rankN]:` only."""
    ref = _records(_per_rank_files())
    assert sorted({k[0] for k in ref}) == [0, 1, 2, 3]
    # every rank logs the print's graph break once; rank 2 also the recompile of forward
    per_rank = collections.Counter(k[0] for k in ref.elements())
    assert per_rank == {0: 1, 1: 1, 2: 2, 3: 1}
    recompile = [k for k in ref if k[2] == "recompiles"]
    assert len(recompile) == 1 and recompile[0][0] == 2 and recompile[0][1] == "0/1"
    assert "tensor 'x' size mismatch at index 0. expected 8, actual 6" in recompile[0][6]


@pytest.mark.parametrize("name", LAUNCHED)
def test_launcher_capture_reads_as_the_ranks_own_files(name: str) -> None:
    path = CLUSTER / name / "combined.log"
    log = read_text_log(path)
    assert _records([path]) == _records(_per_rank_files())
    st = log.stats.row(0, named=True)
    # every line is a record's or another line, none lost, none damaged
    assert st["record_lines"] + st["other_lines"] == st["lines"] == len(path.read_bytes().splitlines())
    assert not st["invalid_utf8"] and not st["truncated_tail"]
    # the launcher's lines around the records: each program print is read with its rank, its
    # text without the launcher's prefix
    prints = log.other_lines.filter(pl.col("text").str.contains(PRINT.pattern))
    assert prints.height == 12  # 4 ranks x 3 steps
    for text, rank in prints.select("text", "rank").iter_rows():
        assert text.startswith("rank ") and int(PRINT.match(text)[1]) == rank


def test_many_tasks_srun_pads_the_task_id() -> None:
    """srun -l with 11 tasks writes ` 3: ` (as wide as the largest id, 10): ranks 0..10."""
    path = CLUSTER / "srun_label_11" / "combined.log"
    assert re.search(rb"^ \d: ", path.read_bytes(), re.M) and re.search(rb"^10: ", path.read_bytes(), re.M)
    log = read_text_log(path)
    per_rank = collections.Counter(log.records["rank"].to_list())
    assert per_rank == {r: 2 if r == 2 else 1 for r in range(11)}
    assert log.records.filter(pl.col("artifact") == "recompiles")["rank"].to_list() == [2]
    prints = log.other_lines.filter(pl.col("text").str.contains(PRINT.pattern))
    assert prints.height == 33
    assert all(int(PRINT.match(t)[1]) == r for t, r in prints.select("text", "rank").iter_rows())


def test_torchrun_console_of_the_second_node_reads_global_ranks() -> None:
    """Node 1's console: `[default0]:[rank2]:` — the global rank wins over torchrun's local one,
    and the prints (`[default0]:rank 2: ...`, no torch prefix) take the rank that local rank's
    records carry, not the local rank."""
    log = read_text_log(CLUSTER / "torchrun_nodes" / "console" / "node-001.log")
    assert sorted(set(log.records["rank"].to_list())) == [2, 3]
    prints = log.other_lines.filter(pl.col("text").str.contains(PRINT.pattern))
    assert prints.height == 6
    assert all(int(PRINT.search(t)[1]) == r for t, r in prints.select("text", "rank").iter_rows())


def test_no_prefix_and_no_process_group_leaves_the_rank_unknown() -> None:
    """torch.multiprocessing.spawn, every compile before init_process_group: nothing says the
    rank. The records are read (4 processes, told apart by their pids), the rank is null."""
    log = read_text_log(CLUSTER / "spawn_before_init" / "combined.log")
    assert log.records["rank"].null_count() == log.records.height == 5
    assert log.records["pid"].n_unique() == 4
    assert log.records.filter(pl.col("artifact") == "recompiles").height == 1
    assert log.other_lines["rank"].null_count() == log.other_lines.height


def test_a_launcher_form_is_taken_off_other_lines_only_where_the_records_show_it(tmp_path: Path) -> None:
    """`RuntimeError: ...` is a message and `3: ...` a print unless the file's records carry
    that launcher's prefix (and, for pdsh, that host)."""
    log = read_text_log(FIXTURES / "backend_error" / "torch_logs.txt")
    assert "RuntimeError: planted backend failure" in log.other_lines["text"].to_list()
    pdsh = read_text_log(CLUSTER / "pdsh_hosts" / "combined.log")
    assert not pdsh.other_lines["text"].str.starts_with("node-").any()


def _prefixed(src: Path, prefix: str, tmp: Path) -> Path:
    """A real per-rank file with a launcher's documented prefix before every line (the one
    transformation the fixtures allow, for forms no launcher here writes)."""
    out = tmp / f"{src.stem}.log"
    out.write_bytes(b"".join(prefix.encode() + line for line in src.read_bytes().splitlines(keepends=True)))
    return out


@pytest.mark.parametrize(
    ("prefix", "rank"),
    [
        ("[1,5]<stdout>: ", 5),  # a space after the colon (some Open MPI versions)
        ("[7,5]<stddiag>:", 5),
        ("node-017:5: ", 5),  # host and rank
        ("   5: ", 5),  # srun -l among 1001 or more tasks
    ],
)
def test_other_documented_forms(tmp_path: Path, prefix: str, rank: int) -> None:
    src = _per_rank_files()[2]  # rank 2's own file: `[rank2]:` on each record, the recompile
    log = read_text_log(_prefixed(src, prefix, tmp_path))
    assert log.records.height == 2 and log.records["rank"].to_list() == [2, 2]  # torch's rank wins
    stripped = tmp_path / "stripped"
    stripped.mkdir()
    # without torch's prefix (a process before init_process_group): the launcher's number
    body = re.sub(rb"(?m)^\[rank2\]:", b"", src.read_bytes())
    (stripped / "r.log").write_bytes(body)
    log = read_text_log(_prefixed(stripped / "r.log", prefix, stripped))
    assert log.records["rank"].to_list() == [rank, rank]


def test_damaged_and_foreign_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    """Another program's output, binary junk and a cut last line in an srun capture: each
    counted in `stats`, none costs a record, the ranks stay right."""
    src = CLUSTER / "srun_label" / "combined.log"
    lines = src.read_bytes().splitlines(keepends=True)
    foreign = (FIXTURES / "corpus" / "multirank4" / "stdout.txt").read_bytes().splitlines(keepends=True)
    junk = [bytes([0, 0xFF, 0xFE, 0x80, 0x1B]) + b"[31m\x00binary\n"]
    mixed = lines[:20] + foreign + lines[20:50] + junk + lines[50:]
    mixed[-1] = mixed[-1][: len(mixed[-1]) // 2]  # a cut last line (a print's)
    path = tmp_path / "job.out"
    path.write_bytes(b"".join(mixed))
    log = read_text_log(path)
    ref = read_text_log(src)
    assert _records([path]) == _records([src])
    st = log.stats.row(0, named=True)
    assert st["other_lines"] == ref.stats["other_lines"][0] + len(foreign) + len(junk)
    assert st["invalid_utf8"] and st["truncated_tail"]
    assert st["record_lines"] + st["other_lines"] == st["lines"] == len(mixed)


def test_a_large_capture_read_in_pieces_is_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture read in pieces (CHUNK_BYTES) gives the tables of one read: a record whose lines
    a piece's end cuts is joined again, the line numbers are the file's."""
    paths = [*sorted(CLUSTER.glob("*/combined.log")), *sorted((CLUSTER / "torchrun_nodes").rglob("*.log")),
             FIXTURES / "torchrun_tee" / "torch_logs.txt", FIXTURES / "corpus" / "multirank4" / "torch_logs.txt"]
    whole = {p: read_text_log(p) for p in paths}
    for size in (997, 4096, 30000):
        monkeypatch.setattr(textlog, "CHUNK_BYTES", size)
        for p in paths:
            got = read_text_log(p)
            assert got.records.equals(whole[p].records), (p, size)
            assert got.other_lines.equals(whole[p].other_lines), (p, size)
            assert got.stats.equals(whole[p].stats), (p, size)


def _job_stdout(tmp: Path, ranks: int, reps: int) -> tuple[Path, int]:
    """A 2048-rank job's stdout made of real lines: srun_label_before_init's (4 ranks, srun's
    prefix only), each of its ranks' lines given to ranks R = r, r+4, ... with srun's padded
    prefix for `ranks` tasks, interleaved line by line as parallel ranks arrive; repeated `reps`
    times with another pid each time (a new process: new records). Returns the path and the
    number of records it holds."""
    src = (CLUSTER / "srun_label_before_init" / "combined.log").read_bytes().splitlines(keepends=True)
    by_rank: dict[int, list[bytes]] = collections.defaultdict(list)
    for line in src:
        m = re.match(rb"(\d+): ", line)
        by_rank[int(m[1])].append(line[m.end():])
    per_src = {r: read_text_log(CLUSTER / "srun_label_before_init" / "combined.log").records.filter(pl.col("rank") == r).height for r in by_rank}
    width = len(str(ranks - 1))
    path = tmp / "job.out"
    n = 0
    with open(path, "wb") as out:
        for rep in range(reps):
            streams = []
            for rank in range(ranks):
                lines = by_rank[rank % 4]
                lines = [re.sub(rb"^([VIWEC]\d{4} \S+ +)(\d+)", lambda m, k=rep: m[1] + str(int(m[2]) + 100000 * (k + 1)).encode(), x)
                         for x in lines]
                streams.append([f"{rank:>{width}}: ".encode() + x for x in lines])
                n += per_src[rank % 4]
            for k in range(max(map(len, streams))):
                out.write(b"".join(s[k] for s in streams if k < len(s)))
    return path, n


@pytest.mark.e2e
def test_a_2048_rank_job_stdout_streams(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """~56 MB of a 2048-rank job's mixed stdout, read in 16 MiB pieces: every record with its
    rank, every print with its rank, nothing lost."""
    path, expected = _job_stdout(tmp_path, 2048, 7)
    assert path.stat().st_size > 50_000_000
    monkeypatch.setattr(textlog, "CHUNK_BYTES", 16 << 20)
    t0 = time.monotonic()
    log = read_text_log(path)
    took = time.monotonic() - t0
    assert log.records.height == expected
    assert log.records["rank"].n_unique() == 2048 and log.records["rank"].null_count() == 0
    assert log.records.filter(pl.col("artifact") == "recompiles").height == 7 * 512  # ranks 2, 6, ...: rank % 4 == 2
    prints = log.other_lines.filter(pl.col("text").str.contains(PRINT.pattern))
    assert prints.height == 7 * 2048 * 3
    # a print says its source rank (rank % 4): the launcher's rank R is read, R % 4 matches it
    assert prints.select((pl.col("rank") % 4 == pl.col("text").str.extract(PRINT.pattern).cast(pl.Int32)).all()).item()
    st = log.stats.row(0, named=True)
    assert st["record_lines"] + st["other_lines"] == st["lines"]
    assert took < 300, took



def test_a_line_without_any_prefix_is_no_rank_s() -> None:
    """The mp.spawn parent's traceback in a capture whose records are one rank's (`[rank1]:`):
    a line without a prefix is nobody's in particular, not that rank's."""
    log = read_text_log(FIXTURES / "corpus" / "collective_size_mismatch" / "torch_logs.txt")
    assert set(log.records["rank"].drop_nulls().to_list()) == {1}
    tb = log.other_lines.filter(pl.col("text").str.contains("ProcessExitedException"))
    assert tb.height >= 1 and tb["rank"].null_count() == tb.height


def test_srun_starting_torchrun_on_each_node(tmp_path: Path) -> None:
    """`srun -l -N 2 torchrun --tee 3 ...`: srun's task id is the node's, torchrun's
    `[defaultN]:` the local rank. The two real node consoles of torchrun_nodes, each line behind
    srun's prefix for its node (`0: `, `1: `: the documented transformation), interleaved: the
    records take torch's global rank; the prints (no torch prefix) the rank their node's local
    rank's records carry — never the node's index nor the bare local rank."""
    consoles = [CLUSTER / "torchrun_nodes" / "console" / f"node-00{n}.log" for n in (0, 1)]
    lines = [[f"{n}: ".encode() + x for x in c.read_bytes().splitlines(keepends=True)] for n, c in enumerate(consoles)]
    job = tmp_path / "slurm-1234.out"
    job.write_bytes(b"".join(x for pair in zip(*lines) for x in pair) + b"".join(lines[1][len(lines[0]):]))
    log = read_text_log(job)
    assert collections.Counter(log.records["rank"].to_list()) == {0: 1, 1: 1, 2: 2, 3: 1}
    prints = log.other_lines.filter(pl.col("text").str.contains(PRINT.pattern))
    assert prints.height == 12
    assert all(int(PRINT.search(t)[1]) == r for t, r in prints.select("text", "rank").iter_rows())
