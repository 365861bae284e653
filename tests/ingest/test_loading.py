"""traceview.ingest.loading: a file given twice is read once (issue 38.3)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from traceview.cli import main
from traceview.ingest.loading import LoadOptions, discover_inputs, load_trace

GB = FIXTURES / "graph_breaks"
LOG = GB / "torch_logs.txt"


def _spellings(tmp_path: Path) -> list[list[str]]:
    link = tmp_path / "link.txt"
    link.symlink_to(LOG.resolve())
    return [
        [str(GB), str(LOG)],  # its directory, then the file
        [str(LOG), str(LOG)],  # the same path twice
        [str(GB / "trace"), str(LOG), f"{GB}/../graph_breaks/torch_logs.txt"],  # another spelling
        [str(GB / "trace"), str(LOG), str(link)],  # a symbolic link
        [str(LOG.resolve()), os.path.relpath(LOG)],  # absolute and relative
    ]


def test_a_file_given_twice_is_read_once(tmp_path: Path) -> None:
    for paths in _spellings(tmp_path):
        inputs = discover_inputs(LoadOptions.of(paths))
        assert len(inputs.text_logs) == 1, paths
        assert inputs.runs <= 1  # a trace counted twice would look like a second run
        # each list names the text log twice: once read, once noted
        assert [why for _, why in inputs.stray if "read once" in why] == [f"the same file as {inputs.text_logs[0]}, read once"]
        t = load_trace(LoadOptions.of(paths))
        assert t.log_records.height == 30  # torch_logs.txt's records, once
        assert t.stats.height == len(inputs.traces) + 1


def test_a_trace_file_given_twice_is_one_run() -> None:
    [trace] = sorted((GB / "trace").glob("*.log"))
    inputs = discover_inputs(LoadOptions.of([str(GB / "trace"), str(trace)]))
    assert (len(inputs.traces), inputs.runs) == (1, 1)


@pytest.mark.parametrize("command", ["summary", "sql"])
def test_every_command_reads_it_once(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    tail = ["SELECT count(*) AS n FROM log_records", "--format", "csv", "--engine", "polars"] if command == "sql" else []
    assert main([command, str(GB), str(LOG), str(LOG), *tail]) == 0
    out = capsys.readouterr().out
    if command == "sql":
        assert out.split() == ["n", "30"]
    else:
        assert "30 text-log records" in out and "the same file as" in out
