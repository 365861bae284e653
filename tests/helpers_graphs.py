"""Loaders shared by test_fxgraph.py, test_outputcode.py and test_origin.py.

Traces are read with parsers.torch_trace.read_trace and text logs with
parsers.textlog.read_text_log; `raw_envelopes` is an independent, minimal reader
(header = glog prefix + ``] `` + JSON, payload = following TAB lines with the TAB removed,
joined by ``\\n``) used to check that tables keep payload bytes exactly.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import polars as pl

from parsers.graphs import (
    build_graph_nodes,
    build_graphs,
    build_kernel_calls,
    build_kernels,
    build_provenance,
)
from parsers.seq_links import seq_links
from parsers.textlog import read_text_log
from parsers.torch_trace import read_trace
from tests.conftest import FIXTURES, GPU, PEER
from traceview.trace import TABLES, Trace

_PREFIX = re.compile(r"^[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^\]]+:\d+\] (.*)$")


def raw_envelopes(path: Path) -> list[dict[str, Any]]:
    """Every envelope of a trace file: lineno, kind, name, env (the JSON) and payload text."""
    out: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    text = path.read_bytes().decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for i, line in enumerate(lines, 1):
        if line.startswith("\t") and cur is not None:
            cur["lines"].append(line[1:])
            continue
        m = _PREFIX.match(line)
        if not m:
            cur = None
            continue
        env = json.loads(m.group(1))
        kind = next(iter(env))
        meta = env[kind]
        cur = {"lineno": i, "kind": kind, "env": env, "lines": [],
               "name": meta.get("name") if isinstance(meta, dict) else None}
        out.append(cur)
    for e in out:
        e["payload"] = "\n".join(e.pop("lines")) if "has_payload" in e["env"] else None
    return out


def trace_files(d: Path) -> list[Path]:
    return sorted(d.glob("*.log"))


@functools.cache
def events_of(d: str) -> pl.DataFrame:
    """The events table of every trace file in directory ``d`` (or of file ``d``)."""
    p = Path(d)
    return read_trace(trace_files(p) if p.is_dir() else [p]).events


@functools.cache
def log_records_of(path: str) -> pl.DataFrame:
    return read_text_log(Path(path)).records


@functools.cache
def tables(scenario_dir: str, *, text: bool = True, trace: bool = True) -> dict[str, pl.DataFrame]:
    """graphs / graph_nodes / kernels / kernel_calls / provenance of a scenario dir
    (trace/ + torch_logs.txt)."""
    d = Path(scenario_dir)
    ev = events_of(str(d / "trace")) if trace else events_of(str(d / "trace")).clear()
    lr = log_records_of(str(d / "torch_logs.txt")) if text and (d / "torch_logs.txt").exists() else None
    graphs = build_graphs(ev, lr)
    return {
        "events": ev,
        "log_records": lr if lr is not None else pl.DataFrame(),
        "graphs": graphs,
        "graph_nodes": build_graph_nodes(graphs),
        "kernels": build_kernels(ev, lr),
        "kernel_calls": build_kernel_calls(ev, lr),
        "provenance": build_provenance(ev),
    }


def as_trace(tables: dict[str, pl.DataFrame]) -> Trace:
    """A Trace over tables built here (for the origin analyzer, which reads graph_nodes,
    seq_links, kernels and kernel_calls): a table not given is empty, without columns (no
    kernel_calls: no dataflow), seq_links is built from the graph nodes (and the annotations
    when given) when not given."""
    t = {name: pl.DataFrame() for name in TABLES} | tables
    if "seq_links" not in tables:
        t["seq_links"] = seq_links(t["graph_nodes"], tables.get("annotations"))
    return Trace.from_tables(t)


__all__ = ["FIXTURES", "GPU", "PEER", "as_trace", "events_of", "log_records_of", "raw_envelopes",
           "tables", "trace_files"]
