"""The ``cudagraphs`` table: what CUDA graphs (``mode="reduce-overhead"``) did, per compile.

Almost all of it is only in the text log (``TORCH_LOGS=cudagraphs``): Inductor's graph
partitions (``torch/_inductor/scheduler.py``), the CUDA-graph tree's warm-ups, recordings and
re-recordings (``cudagraph_trees.py``) and the skips (``cudagraph_utils.py``). The trace adds
only the compile-time skip reason of ``compilation_metrics`` (``cudagraph_skip_reason``, set
when graph partition is off) and which compiles were cudagraphified (a chromium span). One row per event (column ``event``):

* ``partitions``: ``Created N graph partitions: C cudagraphable, K non-cudagraphable``
  (``count`` = N, ``nodes`` = K non-cudagraphable).
* ``partition``: ``Partition I: N nodes, [non-]cudagraphable, inputs=, outputs=`` (``partition``
  is the scheduler's index, which is *not* the N of ``function=partition_N``: only the
  cudagraphable partitions become functions).
* ``op``: a node of a non-cudagraphable partition (``op``, ``reason``, ``ir``, ``fx``; the
  user line when the node has a stack: ``user_file``/``user_line``/``user_function``/
  ``user_code``, the innermost frame).
* ``tree``: ``Recording cudagraph tree for graph without symints`` / ``for symint key K``.
* ``warmup`` / ``eager``: ``Running warmup function=F`` (first call of a shape: no graph yet).
* ``recording``: ``Recording function=F, cuda_graph_id=G, inputs: ...`` (``input_shapes``: the
  tensor sizes, ``[8, 64]; [64, 64]``; torch prints at most 10 inputs, ``count`` = inputs shown).
* ``rerecord``: ``Re-recording function=F, reason=R`` (torch writes one line per existing graph
  whose check failed, so these rows are not the number of new graphs: count ``recording``
  rows for that). ``detail``: the inputs named in the continuation lines.
* ``skip``: ``skipping cudagraphs due to R`` (``reason`` R without torch's repeated prefix and
  its ``Found from`` stack; the user line as for ``op``).
* ``dynamic_shapes_warning``: ``... We have observed N distinct sizes`` (``count`` = N).
* ``cudagraphify`` (trace): the compile's code went to CUDA-graph trees (a
  ``cudagraphify.get_container`` span; ``count`` spans).

Compile ids: the partition lines carry it in the log prefix; the tree lines inside the message
(``[__cudagraphs] [0/1] Recording ...``); the tree/skip/warning lines of torch 2.11 have none and
take the compile id of the next tree line when that comes before another compile's lines, else
the compile id last seen in the log (``skipping cudagraphs due to mutated inputs`` is written at
the first call, right after its compile).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import polars as pl

from parsers.coerce import typed_frame
from parsers.compile_ids import ID_PATTERN, parse

__all__ = ["CUDAGRAPHS_SCHEMA", "cudagraphs_from_text", "cudagraphs_from_trace", "skip_reason"]

_S, _I32, _I64, _B = pl.String, pl.Int32, pl.Int64, pl.Boolean

CUDAGRAPHS_SCHEMA = pl.Schema(
    {
        "rank": _I32, "compile_id": _S, "event": _S, "function": _S, "partition": _I32,
        "cudagraphable": _B, "nodes": _I32, "inputs": _I32, "outputs": _I32, "op": _S,
        "reason": _S, "ir": _S, "fx": _S, "graph_id": _I32, "mode": _S, "input_shapes": _S,
        "symint_key": _S, "count": _I32, "detail": _S, "user_file": _S, "user_line": _I32,
        "user_function": _S, "user_code": _S, "source": _S, "file": _S, "lineno": _I64,
    }
)

_CID = rf"\[(?P<cid>{ID_PATTERN}|None)\] "
_CREATED = re.compile(r"^Created (\d+) graph partitions: (\d+) cudagraphable, (\d+) non-cudagraphable")
_PARTITION = re.compile(
    r"^\s*Partition (\d+): (\d+) nodes, (non-cudagraphable|cudagraphable), inputs=(\d+), outputs=(\d+)"
)
_SMALL = re.compile(r"^\s*Partition (\d+) has (\d+) kernels, below minimum size (\d+), skipping cudagraph")
_OP = re.compile(r"^\s+(?P<op>\S+): reason=(?P<reason>.*?), ir=(?P<ir>\w+)(?:, fx=(?P<fx>.*))?$")
_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+), in (?P<fn>\S+)')
_TREE = re.compile(rf"^(?:{_CID})?Recording cudagraph tree for (?:graph without symints|symint key (?P<key>.*))$")
_RUN = re.compile(rf"^{_CID}Running (?P<what>warmup|eager) function=(?P<fn>[^,\s]+)(?:, mode=(?P<mode>\w+))?")
_RECORDING = re.compile(
    rf"^{_CID}Recording function=(?P<fn>[^,\s]+), (?:mode=(?P<mode>\w+), )?"
    r"cuda_graph_id=(?P<gid>\d+), inputs: (?P<inputs>.*)$"
)
_RERECORD = re.compile(rf"^{_CID}Re-recording function=(?P<fn>[^,\s]+), (?:mode=(?P<mode>\w+), )?reason=(?P<reason>.*)$")
_RERECORD_INPUT = re.compile(r"^input name: (\S+?)\.")
_SKIP = re.compile(r"^skipping cudagraphs? due to (?P<reason>.*)$")
_SKIP_PREFIX = re.compile(r"^(?:skipping cudagraphs? due to )+")
_FOUND_FROM = re.compile(r"\.?\s*Found from\s*:\s*$")
_DYN_WARN = re.compile(r"CUDAGraph supports dynamic shapes by recording a new graph for each distinct input size")
_DYN_SIZES = re.compile(r"We have observed (\d+) distinct sizes")
_TENSOR_SIZE = re.compile(r"Tensor\(size=(\[[^\]]*\])")
_INPUT_SLOT = re.compile(r"(?:^|, )\[\d+\]: ")
_CHECKPOINT = re.compile(r"^Checkpointing cuda caching allocator state")


def _cid(m: re.Match[str]) -> str | None:
    """The compile id of a `[0/0_1]` prefix, without its attempt (the key tables join on)."""
    c = parse(m.group("cid"))
    return None if c is None else c.compile_id


def skip_reason(text: str) -> tuple[str, list[tuple[str, int, str, str | None]]]:
    """A ``skipping cudagraphs due to ...`` message split into its reason (torch's repeated
    prefix dropped) and the frames of its ``Found from`` stack: (file, line, function, code)."""
    lines = text.split("\n")
    first = _FOUND_FROM.sub("", _SKIP_PREFIX.sub("", lines[0].strip()))
    return first.rstrip(". "), _frames(lines[1:])


def _frames(lines: list[str]) -> list[tuple[str, int, str, str | None]]:
    out: list[tuple[str, int, str, str | None]] = []
    for i, ln in enumerate(lines):
        m = _FRAME.match(ln)
        if m:
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            code = None if not nxt or _FRAME.match(lines[i + 1]) else nxt
            out.append((m["file"], int(m["line"]), m["fn"], code))
    return out


def _with_user(row: dict[str, Any], frames: list[tuple[str, int, str, str | None]]) -> dict[str, Any]:
    if frames:
        f, ln, fn, code = frames[-1]  # innermost
        row.update(user_file=f, user_line=ln, user_function=fn, user_code=code)
    return row


def _input_shapes(inputs: str) -> tuple[str, int]:
    """`[8, 64]; [64, 64]` (a non-tensor input as torch printed it) and how many inputs were shown."""
    shown = [s for s in _INPUT_SLOT.split(inputs) if s]
    shapes = []
    for s in shown:
        m = _TENSOR_SIZE.match(s)
        shapes.append(m.group(1) if m else s.split(", ")[0].strip())
    return "; ".join(shapes), len(shown)


class _Builder:
    """Rows of one process stream (a file's rank and pid), with the compile-id attribution."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []  # rows without a compile id yet
        self.last_cid: str | None = None
        self.last: dict[str, Any] | None = None  # the row continuation lines belong to

    def resolve(self, cid: str | None) -> None:
        for r in self.pending:
            r["compile_id"] = cid
        self.pending.clear()

    def seen(self, cid: str) -> None:
        """A compile id in a log prefix (any artifact): rows waiting for one belong to the
        compile before it."""
        if self.pending:
            self.resolve(self.last_cid)
        self.last_cid = cid

    def add(self, row: dict[str, Any], cid: str | None, *, wait: bool = False) -> dict[str, Any]:
        row["compile_id"] = cid
        if cid is None and wait:
            self.pending.append(row)
        elif cid is not None and self.pending:
            self.resolve(cid)
        if cid is not None:
            self.last_cid = cid
        self.rows.append(row)
        self.last = row
        return row

    def finish(self) -> list[dict[str, Any]]:
        self.resolve(self.last_cid)
        return self.rows


def _line_rows(b: _Builder, rec: Mapping[str, Any], text: str, base: dict[str, Any], lineno: int) -> None:
    """One logical line (and, for skips and re-records, the continuation lines after it)."""
    cid = rec["compile_id"]
    first, _, rest = text.partition("\n")
    row = {**base, "lineno": lineno}
    if m := _CREATED.match(first):
        b.add({**row, "event": "partitions", "count": int(m[1]), "nodes": int(m[3])}, cid)
    elif m := _PARTITION.match(first):
        b.add({**row, "event": "partition", "partition": int(m[1]), "nodes": int(m[2]),
               "cudagraphable": m[3] == "cudagraphable", "inputs": int(m[4]), "outputs": int(m[5])}, cid)
    elif m := _SMALL.match(first):
        b.add({**row, "event": "partition", "partition": int(m[1]), "nodes": int(m[2]), "cudagraphable": False,
               "reason": f"{m[2]} kernels, below the minimum size {m[3]}"}, cid)
    elif m := _OP.match(first):
        b.add({**row, "event": "op", "op": m["op"], "reason": m["reason"], "ir": m["ir"], "fx": m["fx"]}, cid)
    elif (m := _FRAME.match(first)) and b.last is not None and b.last["event"] == "op":
        # an op's user stack (a record of its own): the innermost frame wins
        code = (rest.split("\n")[0].strip() or None) if rest else None
        b.last.update(user_file=m["file"], user_line=int(m["line"]), user_function=m["fn"], user_code=code)
    elif m := _TREE.match(first):
        b.add({**row, "event": "tree", "symint_key": m["key"]}, _cid(m), wait=True)
    elif m := _RUN.match(first):
        b.add({**row, "event": m["what"], "function": m["fn"], "mode": m["mode"]}, _cid(m))
    elif m := _RECORDING.match(first):
        shapes, shown = _input_shapes(m["inputs"])
        b.add({**row, "event": "recording", "function": m["fn"], "mode": m["mode"], "graph_id": int(m["gid"]),
               "input_shapes": shapes, "count": shown}, _cid(m))
    elif m := _RERECORD.match(first):
        names = [m2.group(1) for ln in rest.split("\n") if (m2 := _RERECORD_INPUT.match(ln.strip()))]
        b.add({**row, "event": "rerecord", "function": m["fn"], "mode": m["mode"],
               "reason": m["reason"].strip().rstrip("."), "detail": ", ".join(names) or None,
               "count": len(names) or None}, _cid(m))
    elif _SKIP.match(first):
        reason, frames = skip_reason(text)
        b.add(_with_user({**row, "event": "skip", "reason": reason}, frames), cid, wait=True)
    elif _DYN_WARN.search(first):
        n = _DYN_SIZES.search(text)
        b.add({**row, "event": "dynamic_shapes_warning", "count": int(n[1]) if n else None,
               "detail": first.strip()}, cid, wait=True)
    elif b.last is not None and b.last["event"] == "op" and b.last.get("user_file") and not b.last.get("user_code"):
        b.last["user_code"] = first.strip() or None  # the source line, logged a moment later


_ANY_CID = r"\[[^\]\s]+\] "
_HEAD = re.compile(
    rf"^(?:Created \d+ graph partitions|\s*Partition \d+[: ]|\s+\S+: reason="
    rf"|(?:{_ANY_CID})?Recording cudagraph tree|{_ANY_CID}(?:Running|Recording|Re-recording) "
    r"|skipping cudagraphs? due to|CUDAGraph supports dynamic shapes|Checkpointing cuda caching)"
)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """A record's text cut where a new message starts (lines with the same log prefix are one
    record): (offset of the first line, the message with its continuation lines)."""
    out: list[tuple[int, list[str]]] = []
    for i, ln in enumerate(text.split("\n")):
        if not out or _HEAD.match(ln):
            out.append((i, [ln]))
        else:
            out[-1][1].append(ln)
    return [(i, "\n".join(lines)) for i, lines in out]


def cudagraphs_from_text(records: pl.DataFrame) -> pl.DataFrame:
    """The CUDA-graph events of a text log's ``log_records`` (see the module docstring)."""
    if records.height == 0:
        return pl.DataFrame(schema=CUDAGRAPHS_SCHEMA)
    has = records.filter(pl.col("artifact") == "cudagraphs")
    if has.height == 0:
        return pl.DataFrame(schema=CUDAGRAPHS_SCHEMA)
    builders: dict[tuple, _Builder] = {}
    is_cg = pl.col("artifact") == "cudagraphs"
    stream = ["file", "rank", "pid"]
    # the other records only matter where the compile id changes, or right after a cudagraphs
    # line (which may be waiting for one): a big log's other records are not walked in Python
    recs = (
        records.filter(pl.col("compile_id").is_not_null() | is_cg)
        .sort("file", "lineno")
        .filter(
            is_cg
            | is_cg.shift(1).over(stream).fill_null(False)
            | pl.col("compile_id").ne_missing(pl.col("compile_id").shift(1).over(stream))
        )
    )
    for rec in recs.iter_rows(named=True):
        b = builders.setdefault((rec["file"], rec["rank"], rec["pid"]), _Builder())
        if rec["artifact"] != "cudagraphs":
            b.seen(rec["compile_id"])
            continue
        if rec["compile_id"] is not None and not b.pending:
            b.last_cid = rec["compile_id"]
        elif rec["compile_id"] is not None:
            b.seen(rec["compile_id"])
        base = {"rank": rec["rank"], "source": "text", "file": rec["file"]}
        for off, text in _logical_lines(rec["text"] or ""):
            lineno = rec["lineno"] + off if rec.get("contiguous", True) else rec["lineno"]
            _line_rows(b, rec, text, base, lineno)
    rows = [r for b in builders.values() for r in b.finish()]
    return typed_frame(rows, CUDAGRAPHS_SCHEMA, strict=False)


def cudagraphs_from_trace(compiles: pl.DataFrame, spans: pl.DataFrame | None = None) -> pl.DataFrame:
    """``compilation_metrics.cudagraph_skip_reason`` (the `compiles` table's column) as ``skip``
    rows (set at compile time, when graph partition is off; a run-time skip is only in the text
    log), and one ``cudagraphify`` row per compile whose code went to CUDA-graph trees (its
    ``cudagraphify.get_container`` span: the only trace of ``mode="reduce-overhead"`` at run
    time)."""
    rows: list[dict[str, Any]] = []
    if spans is not None and spans.height:
        cg = (
            spans.filter(pl.col("name").str.starts_with("cudagraphify"))
            .group_by("file", "rank", "compile_id", maintain_order=True)
            .agg(pl.col("lineno").min(), pl.len().alias("count"))
        )
        rows += [{**r, "event": "cudagraphify", "source": "trace"} for r in cg.iter_rows(named=True)]
    skipped = compiles.filter(pl.col("cudagraph_skip_reason").str.len_chars() > 0)
    for c in skipped.select("rank", "compile_id", "file", "metrics_lineno", "cudagraph_skip_reason").iter_rows(named=True):
        text, frames = skip_reason(c["cudagraph_skip_reason"])
        rows.append(_with_user({"rank": c["rank"], "compile_id": c["compile_id"], "event": "skip", "reason": text,
                                "source": "trace", "file": c["file"], "lineno": c["metrics_lineno"]}, frames))
    return typed_frame(rows, CUDAGRAPHS_SCHEMA, strict=False)
