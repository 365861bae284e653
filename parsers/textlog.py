"""Read a TORCH_LOGS text capture (stderr) into log records.

A torch log line is ``[rankN]:`` (optional) + the glog prefix
``L MMDD HH:MM:SS.ffffff PID path:line]`` + `` [compile id]`` (optional) +
`` [__artifact]`` (optional) + `` message``. The file is cut into lines with numpy and
Arrow (no Python object per line), one vectorized regex pass finds each line's prefix, the
prefix fields are parsed once per distinct prefix, and lines are grouped into records with
window expressions:

* Prefixed lines with the same prefix identity (rank, level, timestamp, pid, source
  file:line, compile id, artifact) that follow each other *within one process stream*
  (rank, pid) form one record: torch >= 2.2 prefixes every line of a multi-line message,
  and lines of other processes (ranks) or program output printed in between do not split it.
* Legacy captures (older torch: only the first line of a message is prefixed) are detected
  when no multi-line message in the file has its continuation lines prefixed (see
  ``_has_prefixed_continuations``) and at least one unprefixed line follows a record. Then an
  unprefixed line that directly follows a record (or its continuation) continues that record
  unless it looks like program output (``_OUTPUT_LIKE``: a Python warning header, a torchrun
  ``[rankN]:``/``[defaultN]:`` line without a glog prefix, a ``logging`` basic-format line); once
  such a line is met, the following unprefixed lines are program output until the next prefixed
  line. ``continuation=`` forces either behaviour.

Every other line (program prints, tracebacks, warnings, progress bars) goes to
``other_lines``; nothing is an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import polars as pl

from parsers.compile_ids import TRACE_ID_RE, without_attempt_expr
from parsers.glog import (
    LAUNCHER_MARKS,
    LAUNCHER_RANKS,
    RANK,
    TEXT_PREFIX,
    TEXT_TAGS,
    line_ranks,
    plain,
    timestamp,
    year_and_month,
)
from parsers.gzipped import is_gzip, read_all

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "LOG_RECORDS_SCHEMA",
    "OTHER_LINES_SCHEMA",
    "STATS_SCHEMA",
    "TextLog",
    "read_text_log",
]

# The prefix of a torch log line (matched on every line; no capture groups, for speed)...
PREFIX_RE = "^" + plain(TEXT_PREFIX + TEXT_TAGS)
# ... and its fields (parsed once per distinct prefix).
PREFIX_FIELDS_RE = "^" + TEXT_PREFIX + TEXT_TAGS + "$"
# Unprefixed lines that are program output even in a legacy capture.
_OUTPUT_LIKE = (
    r"^(?:\S.*:\d+: \w*Warning: "
    r"|Traceback \(most recent call last\):$|Fatal Python error: "
    r"|" + plain(RANK) +
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\S+:)"
)
# A continuation line that only a multi-line message produces: empty, indented, or guard tree.
_CONT_SHAPE = r"^(?:$|\s|\+- |\| )"

LOG_RECORDS_SCHEMA = pl.Schema(
    {
        "file": pl.String,
        "lineno": pl.Int64,
        "end_lineno": pl.Int64,
        "lines": pl.Int32,
        "contiguous": pl.Boolean,
        "rank": pl.Int32,
        "pid": pl.Int32,
        "level": pl.String,
        "ts": pl.Datetime("us"),
        "src_file": pl.String,
        "src_line": pl.Int32,
        "compile_id": pl.String,
        "trace_id": pl.String,
        "frame_id": pl.Int32,
        "frame_compile_id": pl.Int32,
        "attempt": pl.Int32,
        "compiled_autograd_id": pl.Int32,
        "artifact": pl.String,
        "text": pl.String,
    }
)
OTHER_LINES_SCHEMA = pl.Schema(
    {"file": pl.String, "lineno": pl.Int64, "rank": pl.Int32, "text": pl.String}
)
STATS_SCHEMA = pl.Schema(
    {
        "file": pl.String,
        "bytes": pl.Int64,
        "lines": pl.Int64,
        "records": pl.Int64,
        "record_lines": pl.Int64,
        "continuation_lines": pl.Int64,
        "other_lines": pl.Int64,
        "legacy_continuation": pl.Boolean,
        "invalid_utf8": pl.Boolean,
        "truncated_tail": pl.Boolean,
        "first_ts": pl.Datetime("us"),
        "last_ts": pl.Datetime("us"),
    }
)


@dataclass(frozen=True)
class TextLog:
    """A parsed TORCH_LOGS capture: records, the lines that are not records, and counts."""

    records: pl.DataFrame
    other_lines: pl.DataFrame
    stats: pl.DataFrame
    damage: str | None = None  # why a .gz capture's text ended early (what came before is read)

    @property
    def log_records(self) -> pl.DataFrame:
        """Alias of ``records`` (the table is called ``log_records`` in the docs)."""
        return self.records


def _read_bytes(path: Path, end: int | None = None) -> tuple[bytes, int, str | None]:
    """The text (gunzipped: what is readable before damage), the file's size (or `end`: the
    bytes of a plain file to read), and why the compressed stream ended early (damaged or cut
    off; None when it did not)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if is_gzip(fh):
            raw, damage = read_all(fh)
            return raw, size, damage
        if end is not None:
            return fh.read(end), end, None
        return fh.read(), size, None


def _lines_array(data: bytes) -> pa.LargeStringArray:
    """One Arrow string per line (newline included), cut from the buffer without copies."""
    import pyarrow as pa

    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10) + 1
    if data and not data.endswith(b"\n"):
        ends = np.append(ends, len(data))
    offsets = np.concatenate([np.zeros(1, np.int64), ends.astype(np.int64)])
    return pa.LargeStringArray.from_buffers(
        len(ends), pa.py_buffer(offsets), pa.py_buffer(data)
    )


def _split_lines(data: bytes) -> tuple[pl.Series, bool]:
    """Lines as a polars Series (newline and CR removed) and whether UTF-8 was invalid."""
    import pyarrow as pa

    arr = _lines_array(data)
    invalid = False
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        invalid = True
        data = data.decode("utf-8", errors="replace").encode("utf-8")
        arr = _lines_array(data)
    lines = pl.Series("text", arr, dtype=pl.String)
    return lines.str.strip_suffix("\n").str.strip_suffix("\r"), invalid


def _has_prefixed_continuations(df: pl.DataFrame, fields: pl.DataFrame) -> bool:
    """True when some multi-line message has prefixed continuation lines (torch >= 2.2): a
    prefixed line of that shape after a line of the same prefix in its process stream (the
    ranks of a job's stdout interleave line by line: the line before is another rank's)."""
    prefixed = df.filter(pl.col("prefixed")).select("prefix", "msg")
    if fields["stream"].n_unique() > 1:
        prefixed = prefixed.join(fields.select("prefix", "stream"), on="prefix", how="left", maintain_order="left")
        before = pl.col("prefix").shift(1).over("stream")
    else:
        before = pl.col("prefix").shift(1)
    same = (pl.col("prefix") == before).fill_null(False) & pl.col("msg").str.contains(_CONT_SHAPE)
    return bool(prefixed.select(same.any()).item())


def read_text_log(
    path: str | Path,
    *,
    continuation: Literal["auto", "prefixed", "unprefixed"] = "auto",
    end: int | None = None,
) -> TextLog:
    """Parse a TORCH_LOGS capture (plain or ``.gz``) into a :class:`TextLog`.

    ``continuation``: ``"prefixed"`` = every line of a message is prefixed (torch >= 2.2,
    unprefixed lines are program output); ``"unprefixed"`` = legacy capture where only the
    first line is prefixed; ``"auto"`` decides per file (see the module docstring).
    ``end``: how many bytes to read (a log being written: up to its last complete record;
    a ``.gz`` capture is read whole).
    """
    path = Path(path)
    with open(path, "rb") as fh:
        plain_size = None if is_gzip(fh) else os.fstat(fh.fileno()).st_size
    if plain_size is not None and min(plain_size, end if end is not None else plain_size) > CHUNK_BYTES:
        return _read_in_chunks(path, plain_size if end is None else min(end, plain_size), continuation)
    data, size, damage = _read_bytes(path, end)
    log = parse_text_bytes(data, str(path), mtime=path.stat().st_mtime, size=size, continuation=continuation,
                           truncated=damage is not None)
    return TextLog(records=log.records, other_lines=log.other_lines, stats=log.stats, damage=damage)


# A plain capture larger than this is read and parsed a piece at a time (a job's whole stdout:
# gigabytes of mixed lines): the memory is the tables' and one piece's, not the file's many
# times over.
CHUNK_BYTES = 64 << 20
# What makes two records one: the prefix's fields (a record whose lines a piece's end cut in two
# is joined again).
_SAME_RECORD = ("rank", "pid", "level", "ts", "src_file", "src_line", "trace_id", "artifact")


def _read_in_chunks(
    path: Path, size: int, continuation: Literal["auto", "prefixed", "unprefixed"]
) -> TextLog:
    """`read_text_log` of a large plain file: pieces of CHUNK_BYTES cut after a newline, each
    parsed with the line numbers of the file; a record cut by a piece's end (its stream's last
    record in one piece, the first in the next, with the same prefix) is joined; the first piece
    decides whether the capture is a legacy one (see the module doc) for all."""
    name, mtime = str(path), path.stat().st_mtime
    records, others, stats = [], [], []
    launchers: tuple[set[str], set[str]] = (set(), set())
    lines = 0
    tail: pl.DataFrame | None = None
    origins: list[pl.DataFrame] = []
    with open(path, "rb") as fh:
        pos, carry = 0, b""
        while pos < size or carry:
            block = fh.read(min(CHUNK_BYTES, size - pos)) if pos < size else b""
            pos += len(block)
            data = carry + block
            cut = data.rfind(b"\n") + 1 if pos < size and len(block) else len(data)
            if cut == 0:  # no newline in a whole piece: read on
                carry = data
                continue
            data, carry = data[:cut], data[cut:]
            log = parse_text_bytes(data, name, mtime=mtime, size=len(data), line_offset=lines,
                                   continuation=continuation, known_launchers=launchers, origins_out=origins)
            del data
            if continuation == "auto":
                continuation = "unprefixed" if log.stats["legacy_continuation"][0] else "prefixed"
            lines += int(log.stats["lines"][0])
            recs, tail = _join_cut(records, tail, log.records)
            records.append(recs)
            others.append(log.other_lines)
            stats.append(log.stats)
    st = pl.concat(stats)
    joined = sum(r.height for r in records)
    return TextLog(
        records=pl.concat(records),
        other_lines=_other_line_ranks(pl.concat(others), origins),
        stats=st.select(
            pl.lit(name).alias("file"),
            pl.lit(size, pl.Int64).alias("bytes"),
            pl.col("lines").sum(),
            pl.lit(joined, pl.Int64).alias("records"),
            pl.col("record_lines", "continuation_lines", "other_lines").sum(),
            pl.col("legacy_continuation").first(),
            pl.col("invalid_utf8").any(),
            pl.col("truncated_tail").last(),
            pl.col("first_ts").min(),
            pl.col("last_ts").max(),
        ).cast(dict(STATS_SCHEMA)),
    )


def _other_line_ranks(other: pl.DataFrame, origins: list[pl.DataFrame]) -> pl.DataFrame:
    """The other lines of a file read in pieces with the rank their origin's records carry in
    the whole file (a print of a host before that host's first record in a later piece)."""
    ranks = _origin_ranks(pl.DataFrame(), pl.concat(origins))
    return (
        other.join(ranks, on="_origin", how="left", maintain_order="left")
        .with_columns(pl.coalesce("_own", "_origin_rank", "_fallback").alias("rank"))
        .select(OTHER_LINES_SCHEMA.names())
    )


def _join_cut(before: list[pl.DataFrame], tail: pl.DataFrame | None, recs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Join a piece's records to the pieces before: the first record of a stream whose last
    record before (`tail`: per stream, its piece and row in `before`) has the same prefix is
    that record's continuation (joined in `before`, in place). Returns the piece's records left
    and the new tail."""
    key = list(_SAME_RECORD)
    recs = recs.with_row_index("_i")
    if tail is not None and recs.height:
        firsts = recs.group_by("rank", "pid", maintain_order=True).first()
        m = tail.join(firsts, on=key, how="inner", nulls_equal=True)
        for (c,), part in m.group_by("_c"):
            prev = before[c]
            upd = part.select(
                "_j", "end_lineno", pl.col("lines").alias("_add"), pl.col("text").alias("_more")
            )
            prev = (
                prev.with_row_index("_j")
                .join(upd, on="_j", how="left", suffix="_n", maintain_order="left")
                .with_columns(
                    pl.col("end_lineno_n").fill_null(pl.col("end_lineno")).alias("end_lineno"),
                    (pl.col("lines") + pl.col("_add").fill_null(0)).alias("lines"),
                    pl.when(pl.col("_more").is_not_null())
                    .then(pl.concat_str([pl.col("text"), pl.col("_more")], separator="\n"))
                    .otherwise(pl.col("text"))
                    .alias("text"),
                )
                .with_columns((pl.col("end_lineno") - pl.col("lineno") + 1 == pl.col("lines")).alias("contiguous"))
            )
            before[c] = prev.select(LOG_RECORDS_SCHEMA.names()).cast(dict(LOG_RECORDS_SCHEMA))
        recs = recs.filter(~pl.col("_i").is_in(m["_i"].implode()))
    recs = recs.drop("_i")
    lasts = recs.with_row_index("_j").group_by("rank", "pid", maintain_order=True).last()
    new_tail = lasts.select(*key, "_j").with_columns(pl.lit(len(before), pl.Int64).alias("_c"))
    if tail is not None:
        kept = tail.join(new_tail.select("rank", "pid"), on=["rank", "pid"], how="anti", nulls_equal=True)
        new_tail = pl.concat([kept, new_tail.select(kept.columns)])
    return recs, new_tail


def parse_text_bytes(
    data: bytes,
    name: str,
    *,
    mtime: float | None,
    size: int | None = None,
    line_offset: int = 0,
    continuation: Literal["auto", "prefixed", "unprefixed"] = "auto",
    truncated: bool = False,
    known_launchers: tuple[set[str], set[str]] | None = None,
    origins_out: list[pl.DataFrame] | None = None,
) -> TextLog:
    """Parse the text of a TORCH_LOGS capture, or of the lines added to one after
    `line_offset` lines (a log followed while it is written, traceview.live): line numbers
    count from there. `truncated`: the text is known to end early (a damaged .gz).
    `known_launchers`: the launcher forms and hosts (parsers.glog.LAUNCHER_FORMS) the records
    before this text showed (a piece of a file read in pieces), updated with this text's: the
    prefixes taken off its other lines. `origins_out`: (a file read in pieces) this text's
    origins are appended to it, and its other lines keep the columns that give their rank
    once all pieces' are known (`_other_line_ranks`)."""
    size = len(data) if size is None else size
    lines, invalid = _split_lines(data)
    truncated = truncated or (bool(data) and not data.endswith(b"\n"))
    del data
    df = (
        pl.DataFrame({"text": lines})
        .with_row_index("lineno", offset=1 + line_offset)
        .with_columns(pl.col("lineno").cast(pl.Int64))
    )
    # extract_all without capture groups is several times faster than extract_groups.
    prefix = pl.col("text").str.extract_all(PREFIX_RE).list.first()
    df = df.with_columns(prefix.alias("prefix")).with_columns(
        pl.col("prefix").is_not_null().alias("prefixed"),
        pl.col("text").str.slice(pl.col("prefix").str.len_chars() + 1).fill_null("").alias("msg"),
    )
    fields = (
        df.select(pl.col("prefix").drop_nulls().unique())
        .with_columns(pl.col("prefix").str.extract_groups(PREFIX_FIELDS_RE).alias("f"))
        .unnest("f")
    )
    # the launchers (and hosts) that prefixed this file's records: the only prefixes taken off
    # its other lines
    forms = {k for k, g in LAUNCHER_MARKS.items() if fields[g].is_not_null().any()}
    hosts = set(fields["host"].drop_nulls().unique().to_list())
    if known_launchers is not None:
        known_launchers[0].update(forms)
        known_launchers[1].update(hosts)
        forms, hosts = known_launchers
    origins = _origin_ranks(fields)
    if origins_out is not None:
        origins_out.append(_origins(fields))
    fields = (
        fields.with_columns(_origin().alias("_origin"))
        .join(origins, on="_origin", how="left")
        .with_columns(_line_rank().alias("rank"))
        .drop(*LAUNCHER_RANKS, "host", "tag", "local", "_origin", "_origin_rank")
        .with_columns(
            pl.concat_str([pl.col("rank").cast(pl.String).fill_null(""), pl.col("pid")], separator=":")
            .alias("stream")
        )
    )

    legacy = False
    if continuation == "unprefixed":
        legacy = True
    elif continuation == "auto" and df.height:
        after_record = df.select(
            (~pl.col("prefixed") & pl.col("prefixed").shift(1).fill_null(False)).any()
        ).item()
        legacy = bool(after_record) and not _has_prefixed_continuations(df, fields)

    if legacy:
        df = _group_legacy(df)
    else:
        df = _group_streams(df, fields)

    part = df.filter(pl.col("rec").is_not_null())
    records = _records(part, fields, name, mtime)
    other = _other_lines(df.filter(pl.col("rec").is_null()), name, sorted(forms), sorted(hosts), origins,
                         keep_parts=origins_out is not None)
    cont_lines = int(part.select((~pl.col("prefixed")).sum()).item() or 0)
    stats = pl.DataFrame(
        [
            {
                "file": name,
                "bytes": size,
                "lines": df.height,
                "records": records.height,
                "record_lines": part.height,
                "continuation_lines": cont_lines,
                "other_lines": other.height,
                "legacy_continuation": legacy,
                "invalid_utf8": invalid,
                "truncated_tail": truncated,
                "first_ts": records["ts"].min() if records.height else None,
                "last_ts": records["ts"].max() if records.height else None,
            }
        ],
        schema=STATS_SCHEMA,
    )
    return TextLog(records=records, other_lines=other, stats=stats)


def _rank_parts() -> tuple[pl.Expr, pl.Expr]:
    """A line's rank from its own prefixes, and its fallback: torch's `[rankN]:` (the global
    rank), else the launcher's process index (srun's task id, the MPI rank); the fallback, a
    torchrun role's number (`[default3]:`, the local rank), only where no launcher prefixed
    the line (a launcher that starts torchrun numbers nodes: the rank is unknown)."""
    launcher_rank = pl.coalesce(*(pl.col(c) for c in LAUNCHER_RANKS))
    launched = pl.any_horizontal(*(pl.col(c).is_not_null() for c in (*LAUNCHER_RANKS, "host")))
    torch_rank = pl.when(pl.col("tag") == "rank").then(pl.col("rank"))
    local = pl.when(pl.col("tag") != "rank").then(pl.col("rank"))
    own = pl.coalesce(torch_rank, pl.when(local.is_null()).then(launcher_rank)).cast(pl.Int32, strict=False)
    return own, pl.when(~launched).then(local).cast(pl.Int32, strict=False)


def _line_rank() -> pl.Expr:
    """The rank of a line (parsers.glog's groups, and `_origin_rank`, the one rank the records
    of the line's origin carry: a host's, a torchrun console's local rank's): its own prefixes'
    (`_rank_parts`), else its origin's, else the fallback; else null."""
    own, fallback = _rank_parts()
    return pl.coalesce(own, pl.col("_origin_rank"), fallback)


def _origin() -> pl.Expr:
    """Who wrote a line as far as its prefixes tell without torch's rank: the launcher's groups
    and torchrun's local rank (null when none of them is there: a line without a prefix is
    nobody's in particular)."""
    local = pl.when(pl.col("tag") != "rank").then(pl.col("rank")).otherwise(pl.col("local"))
    parts = [pl.col(c) for c in (*LAUNCHER_RANKS, "host")] + [local]
    return pl.when(pl.any_horizontal(*(x.is_not_null() for x in parts))).then(
        pl.concat_str([x.fill_null("") for x in parts], separator="|")
    )


def _origins(fields: pl.DataFrame) -> pl.DataFrame:
    """(origin, torch's rank) of each distinct record prefix that carries `[rankN]:` and an
    origin (`_origin`: a launcher's prefix or torchrun's local rank)."""
    return (
        fields.filter(pl.col("tag") == "rank")
        .select(_origin().alias("_origin"), pl.col("rank").cast(pl.Int32, strict=False))
        .filter(pl.col("_origin").is_not_null())
    )


def _origin_ranks(fields: pl.DataFrame, origins: pl.DataFrame | None = None) -> pl.DataFrame:
    """The rank of each origin (`_origin`) whose records carry torch's `[rankN]:`, where they
    all say one rank: a host's, or a torchrun console's local rank's (`[default0]:[rank2]:` on
    the second node). A line of that origin without torch's prefix (a print, a record before
    init_process_group) is that rank's. `origins`: `_origins` already taken (of every piece)."""
    return (
        (_origins(fields) if origins is None else origins)
        .group_by("_origin")
        .agg(pl.col("rank").first().alias("_origin_rank"), pl.col("rank").n_unique().alias("_n"))
        .filter(pl.col("_n") == 1)
        .drop("_n")
    )


def _other_lines(
    df: pl.DataFrame, name: str, forms: list[str], hosts: list[str], origins: pl.DataFrame, keep_parts: bool = False
) -> pl.DataFrame:
    """The lines that are no record: each with its rank (as a record's, `_line_rank`) and its
    text without the launcher's prefix (torch's `[rankN]:` kept: the traceback reader splits
    the ranks' streams by it). Only the launcher forms (and hosts) that prefix the file's
    records are taken off: `RuntimeError: ...` is a message, `3: ...` a print, elsewhere."""
    groups = pl.col("text").str.extract_groups("^" + line_ranks(forms, hosts))
    out = df.select("lineno", "text").with_columns(groups.alias("g")).unnest("g")
    missing = [c for c in ("launcher", *LAUNCHER_RANKS, "host") if c not in out.columns]
    return (
        out.with_columns(*(pl.lit(None, pl.String).alias(c) for c in missing))
        .with_columns(_origin().alias("_origin"))
        .join(origins, on="_origin", how="left", maintain_order="left")
        .select(
            pl.lit(name).alias("file"),
            "lineno",
            _line_rank().alias("rank"),
            pl.col("text").str.slice(pl.col("launcher").str.len_chars().fill_null(0)).alias("text"),
            # (a file read in pieces: the rank again once every piece's origins are known)
            *((_rank_parts()[0].alias("_own"), "_origin", _rank_parts()[1].alias("_fallback")) if keep_parts else ()),
        )
        .cast(dict(OTHER_LINES_SCHEMA))
    )


def _group_streams(df: pl.DataFrame, fields: pl.DataFrame) -> pl.DataFrame:
    """Modern captures: same-prefix lines per (rank, pid) stream form a record.

    Lines of other streams and unprefixed lines (program output) in between do not split a
    record; unprefixed lines belong to no record.
    """
    first = pl.col("prefix") != pl.col("prefix").shift(1)
    if fields["stream"].n_unique() > 1:
        df = df.join(fields.select("prefix", "stream"), on="prefix", how="left", maintain_order="left")
        new = first.over("stream").fill_null(True) & pl.col("prefixed")
        start = pl.when(new).then(new.cast(pl.Int64).cum_sum())
        return df.with_columns(start.alias("rec")).with_columns(
            pl.when(pl.col("prefixed")).then(pl.col("rec").forward_fill().over("stream"))
        )
    # One process: compare with the previous prefixed line (unprefixed lines are skipped).
    prev = pl.col("prefix").forward_fill().shift(1)
    new = pl.col("prefixed") & (pl.col("prefix") != prev).fill_null(True)
    rec = new.cast(pl.Int64).cum_sum()
    return df.with_columns(pl.when(pl.col("prefixed")).then(rec).alias("rec"))


def _group_legacy(df: pl.DataFrame) -> pl.DataFrame:
    """Legacy captures: unprefixed lines continue the record right before them."""
    prefixed = pl.col("prefixed")
    breaker = prefixed | pl.col("text").str.contains(_OUTPUT_LIKE)
    df = df.with_columns(breaker.cast(pl.Int64).cum_sum().alias("seg"))
    df = df.with_columns(
        (prefixed | pl.col("prefixed").first().over("seg")).alias("part"),
        pl.col("prefix").forward_fill().alias("ffprefix"),
    )
    prev_part = pl.col("part").shift(1).fill_null(False)
    same = (pl.col("ffprefix").shift(1) == pl.col("prefix")).fill_null(False)
    df = df.with_columns((prefixed & ~(prev_part & same)).cast(pl.Int64).cum_sum().alias("rec"))
    return df.with_columns(
        pl.when(pl.col("part") & (pl.col("rec") > 0)).then(pl.col("rec")).alias("rec")
    )


def _records(
    part: pl.DataFrame, fields: pl.DataFrame, name: str, mtime: float | None
) -> pl.DataFrame:
    if part.height == 0:
        return pl.DataFrame(schema=LOG_RECORDS_SCHEMA)
    line_text = pl.when(pl.col("prefixed")).then(pl.col("msg")).otherwise(pl.col("text"))
    rec = (
        part.with_columns(line_text.alias("line_text"))
        .group_by("rec", maintain_order=True)
        .agg(
            pl.col("lineno").first().alias("lineno"),
            pl.col("lineno").last().alias("end_lineno"),
            pl.len().cast(pl.Int32).alias("lines"),
            pl.col("prefix").first(),
            pl.col("line_text").str.join("\n").alias("text"),
        )
        .sort("lineno")
        .join(fields.drop("stream"), on="prefix", how="left", maintain_order="left")
    )
    tid = pl.col("tid").str.extract_groups(TRACE_ID_RE)
    rec = rec.with_columns(tid.alias("t")).unnest("t")
    return rec.select(
        pl.lit(name).alias("file"),
        "lineno",
        "end_lineno",
        "lines",
        (pl.col("end_lineno") - pl.col("lineno") + 1 == pl.col("lines")).alias("contiguous"),
        pl.col("rank").cast(pl.Int32, strict=False),
        pl.col("pid").cast(pl.Int32, strict=False),
        "level",
        timestamp(pl.col("md"), pl.col("time"), *year_and_month(mtime)).alias("ts"),
        "src_file",
        pl.col("src_line").cast(pl.Int32, strict=False),
        without_attempt_expr("tid").alias("compile_id"),
        pl.when(pl.col("tid").is_not_null())
        .then(pl.concat_str([pl.lit("["), pl.col("tid"), pl.lit("]")]))
        .alias("trace_id"),
        pl.col("fid").cast(pl.Int32, strict=False).alias("frame_id"),
        pl.col("fcid").cast(pl.Int32, strict=False).alias("frame_compile_id"),
        pl.when(pl.col("tid").is_not_null())
        .then(pl.col("att").cast(pl.Int32, strict=False).fill_null(0))
        .alias("attempt"),
        pl.col("ca").cast(pl.Int32, strict=False).alias("compiled_autograd_id"),
        "artifact",
        "text",
    ).cast(dict(LOG_RECORDS_SCHEMA))
