"""Issue 32 on real 2-GPU NCCL runs (torch 2.11, 2x H100, fixtures/make_gpu_fixtures.py group
"multi"): fixtures/gpu/funcol_extra_allreduce (rank 1's compiled [0/0] issues a second funcol
all_reduce; rank 1's NCCL watchdog times it out and aborts the process, torchrun reports the
SIGABRT) and fixtures/gpu/ddp2_buckets (DDPOptimizer splits the compiled DDP graph into 4
bucket submodules)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from ..conftest import FIXTURES

EXTRA = FIXTURES / "gpu" / "funcol_extra_allreduce"
DDP = FIXTURES / "gpu" / "ddp2_buckets"


def _report(d: Path) -> dict:
    import traceview
    from traceview.output.report import build_report

    return build_report(traceview.load(str(d)))


def test_the_extra_all_reduce_on_nccl_is_named_with_its_rank() -> None:
    import traceview

    t = traceview.load(str(EXTRA / "trace"))
    rows = t.collectives.sort("rank", "position").select("rank", "compile_id", "op", "shape", "dtype").rows()
    one = [("all_reduce", [32, 128], "float32"), ("wait_tensor", [32, 128], "float32")]
    assert rows == [(0, "0/0", *x) for x in one] + [(1, "0/0", *x) for x in one + one]
    # LOG_TLPARSE=1 on the GPU: Inductor's estimate for each all_reduce (0 for the waits)
    assert t.collectives.filter(pl.col("op") == "all_reduce")["estimated_runtime_ns"].min() > 0
    rep = _report(EXTRA)
    (m,) = rep["collectives"]["mismatches"]
    assert m["ranks"] == [1] and m["compile_id"] == "0/0"
    assert m["message"] == (
        "collectives do not match: rank 1's [0/0] step (funcol_extra_allreduce.py:30) issues 2 all_reduce, "
        "rank 0 issues 1; the second (float32[32, 128]) has no partner: expect a hang, an NCCL timeout or "
        "'Connection closed by peer'"
    )


def test_the_nccl_watchdog_timeout_is_a_desync_tied_to_the_extra_all_reduce() -> None:
    rep = _report(EXTRA)
    (c,) = rep["crashes"]
    # rank 1 died of SIGABRT from the watchdog (no Python traceback): torchrun's report, read
    # with rank 1's own lines
    assert c["kind"] == "launcher" and c["rank"] == 1
    assert c["category"] == "distributed_desync"
    assert c["message"] == "torchrun: rank 1 failed first (exit code -6): NCCL watchdog timeout"
    assert c["distributed_error"]["kind"] == "NCCL watchdog timeout"
    line = c["distributed_error"]["line"]
    assert line.startswith("[rank1]:[E1126 16:09:55.133430917 ProcessGroupNCCL.cpp:689] [Rank 1] Watchdog caught")
    # torch's own accounting: the op that timed out is an ALLREDUCE of 32 x 128 elements, the
    # size of rank 1's unmatched second all_reduce
    numel = re.search(r"WorkNCCL\(SeqNum=2, OpType=ALLREDUCE, NumelIn=(\d+),", line)
    assert numel is not None and int(numel.group(1)) == 32 * 128
    assert c["look_first"] == [1] and c["diverged_in"] == "0/0"
    assert c["next_step"].startswith(
        "A distributed desync (NCCL watchdog timeout), explained by the compiled graphs (COLLECTIVES): rank 1's "
        "[0/0] step (funcol_extra_allreduce.py:30) issues 2 all_reduce, rank 0 issues 1; the second "
        "(float32[32, 128]) has no partner. Look at rank 1 first:"
    )
    assert "the ranks' collective schedules differ" in c["evidence"]


def _torch_buckets(text: str, rank: int) -> list[int]:
    """DDPOptimizer's own bucket table (torch._dynamo.backends.distributed at debug level):
    the Size (b) of each bucket, by index."""
    sizes = []
    for line in text.splitlines():
        if line.startswith(f"[rank{rank}]:") and "distributed.py:122]" in line:
            m = re.search(r"│\s+(\d+) │\s+(\d+) │", line)
            if m:
                sizes.append(int(m.group(2)))
    return sizes


def test_ddp_splits_table_matches_torchs_bucket_assignments() -> None:
    import traceview

    t = traceview.load(str(DDP))
    d = t.ddp_splits.sort("rank", "position")
    assert d.select("rank", "compile_id", "occurrence", "split", "submodule", "submodules", "param_count").rows() == [
        (r, "4/0", 1, 0, f"submod_{i}", 4, n) for r in (0, 1) for i, n in enumerate((2, 4, 4, 4))
    ]
    assert d.filter(pl.col("rank") == 0)["params"][0].to_list() == [
        "l_self_modules_layers_modules_0_parameters_weight_", "l_self_modules_layers_modules_0_parameters_bias_"]
    text = (DDP / "torch_logs.txt").read_text()
    for rank in (0, 1):
        mine = d.filter(pl.col("rank") == rank)["param_bytes"].to_list()
        assert mine == [1024 * 1024 * 4 + 1024 * 4, 2 * (1024 * 1024 * 4 + 1024 * 4), 2 * (1024 * 1024 * 4 + 1024 * 4),
                        1024 * 1024 * 4 + 1024 * 4 + 8 * 1024 * 4 + 8 * 4]
        # buckets fill from the last layer back: submodule i holds bucket n-1-i
        assert mine == _torch_buckets(text, rank)[::-1]
    # "DDPOptimizer used bucket cap 8388608 and created 4 buckets"
    assert text.count("DDPOptimizer used bucket cap 8388608 and created 4 buckets.") == 2


def test_ddp_splits_in_facts_and_json() -> None:
    from traceview.output.summary import render_text

    rep = _report(DDP)
    (f,) = rep["facts"]["ddp_splits"]
    assert {k: f[k] for k in ("compile_id", "occurrence", "split", "ranks", "submodules", "names", "param_counts", "param_bytes")} == {
        "compile_id": "4/0", "occurrence": 1, "split": 0, "ranks": [0, 1], "submodules": 4,
        "names": ["submod_0", "submod_1", "submod_2", "submod_3"], "param_counts": [2, 4, 4, 4],
        "param_bytes": [4198400, 8396800, 8396800, 4231200],
    }
    text = render_text(rep)
    assert (
        "DDPOptimizer split [4/0] forward (ddp2_buckets.py:31) on ranks 0-1 into 4 submodules at the gradient-bucket "
        "boundaries, by design (torch._dynamo.config.optimize_ddp, on by default: each bucket's all-reduce overlaps the "
        "backward of the pieces before it); not graph breaks (the compile logged none). Parameters per submodule, in "
        "graph order: submod_0: layers.0 (4.0 MiB); submod_1: layers.1, layers.2 (8.0 MiB); submod_2: layers.3, "
        "layers.4 (8.0 MiB); submod_3: layers.5, head (4.0 MiB); each submodule is compiled on its own"
    ) in " ".join(text.split())


def test_ddp_splits_survive_an_export(tmp_path: Path) -> None:
    import traceview
    from traceview.output.report import build_report

    from ..analyze.test_ranks import tv

    out = tmp_path / "export"
    r = tv("export", "--no-cache", str(DDP / "trace"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    back = traceview.load(str(out))
    assert back.ddp_splits.sort("rank", "position")["param_bytes"].to_list() == [4198400, 8396800, 8396800, 4231200] * 2
    assert build_report(back)["facts"]["ddp_splits"][0]["param_bytes"] == [4198400, 8396800, 8396800, 4231200]
