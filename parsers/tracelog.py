"""TORCH_TRACE log files -> the `events`, `strings`, `stats` and `problems` tables.

The file is split into lines with numpy, and lines are classified by their first byte:
a TAB starts a payload line, anything else is a record header (or a line that is not one).
The glog prefix of every header is matched by polars' vectorized regex; only the header
JSON is decoded per envelope, once, with orjson. Payload text stays in Arrow/polars buffers,
cut out of the file at computed offsets (the tab that starts each line removed by one
vectorized replace). A lazy parse (what traceview.pipeline uses) keeps most payloads as byte
ranges of the file, read later by `hydrate`. Several files are parsed as one batch by
`read_trace_files`: a per-file pass (`_scan`), then each table built once (`_build`).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
import orjson
import polars as pl

from parsers.compile_ids import compile_id_expr, trace_id_expr
from parsers.discover import InputError, rank_number
from parsers.glog import PREFIX, renamed, timestamp, year_and_month
from parsers.gzipped import GzipStream, is_gzip, read_all
from parsers.kinds import (
    CONTEXT_KEYS,
    NAMED_KINDS,
    SUMMARY_PAYLOAD_ARTIFACTS,
    SUMMARY_PAYLOAD_GRAPH_MARK,
    is_known_kind,
)

if TYPE_CHECKING:
    import pyarrow as pa
# pyarrow is imported where a full parse or a payload read needs it: a lazy parse (what
# the summary runs) does without, which saves ~0.1 s of start-up in every process.

PREFIX_PATTERN = "^(?P<prefix>" + renamed(PREFIX, rank="prefix_rank", src_file="src", src_line="srcline") + " )"
FILE_RANK_RE = re.compile(r"rank_(\d+)")
_CHUNK = 1 << 26  # newline search in 64 MiB pieces keeps the temporary mask small
_GRAPH_MARK = SUMMARY_PAYLOAD_GRAPH_MARK.encode()

EVENTS_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String,
    "lineno": pl.Int64,
    "end_lineno": pl.Int64,
    "rank": pl.Int32,
    "pid": pl.Int32,
    "level": pl.String,
    "ts": pl.Datetime("us"),
    "src_file": pl.String,
    "src_line": pl.Int32,
    "kind": pl.String,
    "name": pl.String,
    "known_kind": pl.Boolean,
    "compiled_autograd_id": pl.Int32,
    "frame_id": pl.Int32,
    "frame_compile_id": pl.Int32,
    "attempt": pl.Int32,
    "compile_id": pl.String,
    "trace_id": pl.String,
    "metadata": pl.String,
    "extra": pl.String,
    "payload": pl.String,
    "payload_md5": pl.String,
    "payload_ok": pl.Boolean,
}

STATS_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String,
    "bytes": pl.Int64,
    "lines": pl.Int64,
    "envelopes": pl.Int64,
    "payload_lines": pl.Int64,
    "non_envelope_lines": pl.Int64,
    "bad_json": pl.Int64,
    "md5_mismatch": pl.Int64,
    "unknown_kinds": pl.Int64,
    "missing_payload": pl.Int64,
    "truncated_tail": pl.Boolean,
    "invalid_utf8": pl.Boolean,
    "rank": pl.Int32,
    "pid": pl.Int32,
    "first_ts": pl.Datetime("us"),
    "last_ts": pl.Datetime("us"),
}

# What a lazy parse adds to the events (see parse_trace_bytes): where each payload is in the file.
INDEX_SCHEMA: dict[str, pl.DataType] = {"payload_start": pl.Int64, "payload_end": pl.Int64}

PROBLEMS_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String,
    "lineno": pl.Int64,
    "problem": pl.String,
    "detail": pl.String,
}

STRINGS_SCHEMA: dict[str, pl.DataType] = {"file": pl.String, "id": pl.Int64, "string": pl.String}


@dataclass
class ParsedFile:
    """The tables of one trace file."""

    events: pl.DataFrame
    strings: pl.DataFrame
    stats: pl.DataFrame
    problems: pl.DataFrame
    chromium: pl.DataFrame | None = None  # decoded chromium events (lazy parse only)


@dataclass
class _Problems:
    linenos: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    def add(self, lineno: int, kind: str, detail: str) -> None:
        self.linenos.append(lineno)
        self.kinds.append(kind)
        self.details.append(detail[:200])


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by magic number, not by name; what is
    readable before damage). Read, not memory-mapped: a log of a job that is still running
    may shrink while it is read, and reading a mapping past the new end kills the process
    (SIGBUS)."""
    with open(path, "rb") as fh:
        if is_gzip(fh):
            return read_all(fh)[0]
        return fh.read()


def _newlines(buf: np.ndarray) -> np.ndarray:
    parts = [
        np.flatnonzero(buf[i : i + _CHUNK] == 10) + i for i in range(0, len(buf), _CHUNK)
    ]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def _fix_utf8(data: bytes, problems: _Problems) -> bytes:
    """Replace invalid UTF-8 and record the lines that had it."""
    for i, line in enumerate(data.split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.add(i, "invalid_utf8", f"byte {exc.start}: {line[:80]!r}")
    return data.decode("utf-8", "replace").encode("utf-8")


@dataclass
class _Split:
    n: int
    nlines: int
    truncated: bool
    starts: np.ndarray  # line starts (bytes)
    ends: np.ndarray  # line ends, without the newline
    cand: np.ndarray  # line indices of record headers (every line that is not a payload line)
    n_payload_lines: np.ndarray  # payload lines after each header
    headers: pl.Series  # String, header line per candidate
    payloads: pa.Array | None  # large_string, payload text per candidate (tabs removed, "" when none)
    raw_start: np.ndarray  # byte range of each candidate's payload lines in the input, tabs
    raw_end: np.ndarray  # included (start == end when it has none)
    jsons: list[bytes]  # the header lines again, as bytes


def _split(data: bytes, *, lazy: bool = False) -> _Split:
    """Lines, headers and payloads of a trace log, without a Python object per line.

    The tab that starts each payload line is deleted from a copy of the buffer, after which
    every payload is one contiguous byte range; headers and payloads are then views into
    that buffer cut at computed offsets (raises ArrowInvalid when the bytes are not UTF-8).
    `lazy`: no payloads and no copy of the buffer, only the headers and the payloads' byte
    ranges in `data` (the payload bytes are not checked for UTF-8 then).
    """
    n = len(data)
    empty = np.empty(0, dtype=np.int64)
    if n == 0:
        none = None if lazy else _pa().array([], type=_pa().large_string())
        return _Split(0, 0, False, empty, empty, empty, empty, pl.Series([], dtype=pl.String), none, empty, empty, [])
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = _newlines(buf)
    truncated = n > 0 and data[-1] != 10
    nlines = len(nl) + (1 if truncated else 0)
    starts = np.empty(nlines, dtype=np.int64)
    if nlines:
        starts[0] = 0
        starts[1:] = nl[: nlines - 1] + 1
    ends = np.empty(nlines, dtype=np.int64)
    ends[: len(nl)] = nl
    if truncated:
        ends[-1] = n
    nonempty = starts < ends
    first = np.where(nonempty, buf[np.minimum(starts, max(n - 1, 0))], 10) if nlines else starts
    has_tab = first == 9
    is_payload = has_tab.copy()
    # An empty line between two payload lines is an empty payload line that lost its tab
    # (seen in real logs, e.g. tlparse's export.log); anywhere else it is not a record.
    if nlines > 2:
        is_payload[1:-1] |= ~nonempty[1:-1] & has_tab[:-2] & has_tab[2:]
    cand = np.flatnonzero(~is_payload)
    k = len(cand)
    next_cand = np.append(cand[1:], nlines).astype(np.int64)
    n_payload = next_cand - cand - 1
    has_p = n_payload > 0
    first_p = np.minimum(cand + 1, max(nlines - 1, 0))
    last_p = np.maximum(next_cand - 1, 0)
    raw_start = np.where(has_p, starts[first_p], ends[cand]) if k else empty
    raw_end = np.where(has_p, ends[last_p], ends[cand]) if k else empty
    if lazy:
        if not k:
            _check_utf8(data)
            return _Split(n, nlines, truncated, starts, ends, cand, n_payload, pl.Series([], dtype=pl.String), None, empty, empty, [])
        # header lines as bytes, then one UTF-8 validation over all of them (polars, not
        # pyarrow.compute: its import alone costs ~50 ms)
        jsons = [data[a:b] for a, b in zip(starts[cand].tolist(), ends[cand].tolist())]
        try:
            headers = pl.Series(jsons, dtype=pl.Binary).cast(pl.String)
        except pl.exceptions.ComputeError as exc:
            raise NotUtf8(str(exc)) from None
        return _Split(n, nlines, truncated, starts, ends, cand, n_payload, headers, None, raw_start, raw_end, jsons)
    pa = _pa()
    tabs = starts[has_tab]
    clean = np.delete(buf, tabs) if len(tabs) else buf.copy()  # never keep the input mapped

    def shift(pos: np.ndarray) -> np.ndarray:
        return pos - np.searchsorted(tabs, pos, side="left")

    hs = shift(starts[cand])
    he = shift(ends[cand])
    ps = np.where(has_p, shift(starts[first_p]), he)
    pe = np.where(has_p, shift(ends[last_p]), he)
    offs = np.empty(4 * k + 1, dtype=np.int64)
    offs[0:-1:4] = hs
    offs[1::4] = he
    offs[2::4] = ps
    offs[3::4] = pe
    offs[-1] = len(clean)
    if k:
        seg = pa.LargeStringArray.from_buffers(
            4 * k, pa.py_buffer(offs), pa.py_buffer(clean), None, 0
        )
        try:
            seg.validate(full=True)
        except pa.ArrowInvalid as exc:
            raise NotUtf8(str(exc)) from None
        headers = seg.take(pa.array(np.arange(0, 4 * k, 4)))
        payloads = seg.take(pa.array(np.arange(2, 4 * k, 4)))
    else:
        _check_utf8(data)
        headers = payloads = pa.array([], type=pa.large_string())
    return _Split(
        n, nlines, truncated, starts, ends, cand, n_payload, _series(headers), payloads, raw_start, raw_end,
        headers.cast(pa.large_binary()).to_pylist(),
    )


def _pa():  # -> the pyarrow module
    import pyarrow

    return pyarrow


class NotUtf8(ValueError):
    """The bytes are not valid UTF-8."""


def _series(arr: pa.Array) -> pl.Series:
    """A polars Series of an Arrow array (through a table: polars converts a bare array
    with pyarrow.compute, whose import costs ~50 ms)."""
    return pl.from_arrow(_pa().table({"x": arr}))["x"]  # type: ignore[index]


def _check_utf8(data: bytes) -> None:
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUtf8(str(exc)) from None


def _int_or_none(v: object) -> int | None:
    if v is None or type(v) is int:
        return v  # type: ignore[return-value]
    try:
        return int(v)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def parse_trace_bytes(
    data: bytes,
    file: str,
    *,
    mtime: float | None = None,
    size: int | None = None,
    line_offset: int = 0,
    lazy: bool = False,
    byte_offset: int = 0,
) -> ParsedFile:
    """Parse the bytes of one TORCH_TRACE log (already decompressed), or of a piece of one
    that starts at a record: `line_offset` is the number of lines before the piece.

    `lazy` (what traceview.pipeline uses): only the payloads in SUMMARY_PAYLOAD_ARTIFACTS
    are read, and chromium events are decoded into `ParsedFile.chromium` (CHROMIUM_SCHEMA)
    without being copied; every other payload is null, and the events carry
    the byte range of their payload lines in the file (`payload_start`, `payload_end`, plus
    `byte_offset` for a piece) for `hydrate` to read later. md5 is not checked then
    (`payload_ok` and `stats.md5_mismatch` are null until `hydrate(..., verify=True)`). A file
    whose bytes had to be changed (CRLF, invalid UTF-8) is parsed in full all the same."""
    scan = _scan(data, file, mtime=mtime, size=size, line_offset=line_offset, lazy=lazy, byte_offset=byte_offset)
    return _build([scan], lazy=lazy)


def read_trace_files(paths: list[str], *, lazy: bool = False) -> ParsedFile:
    """Parse several trace files into one set of tables (what reading them one by one and
    concatenating gives, with each table operation done once for all of them: for small
    files that fixed cost is most of a parse)."""
    scans = []
    for path in paths:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if is_gzip(fh):
                scans.append(_gzip_scan(fh, str(path), st, lazy=lazy))
                continue
            data = fh.read()
        scan = _scan(data, str(path), mtime=st.st_mtime, size=st.st_size, lazy=lazy)
        if len(data) != st.st_size:
            scan.problems = file_changed(scan.problems, str(path), int(scan.stats["lines"]), st.st_size, len(data))  # type: ignore[call-overload]
        scans.append(scan)
    return _build(scans, lazy=lazy)


GZIP_PIECE = 32 << 20  # a gzip log is decompressed and parsed this much at a time
_HEADER_START = re.compile(rb"\n[^\t\n]")


def _gzip_scan(fh: BinaryIO, path: str, st: os.stat_result, *, lazy: bool) -> _Scan:
    """A gzip log, decompressed and scanned a piece at a time (memory stays near what the
    same file uncompressed costs: no more than GZIP_PIECE of text at once, plus the tables);
    a lazy parse leaves the payloads in the compressed file, where `hydrate` reads them by
    decompressing again. Damage ends the text where it starts, and is a problem."""
    stream = GzipStream(fh)
    scans: list[_Scan] = []
    parts: list[bytes] = []  # text read after the last piece (one record bigger than a piece)
    have = offset = lines = 0
    while True:
        more = stream.read(GZIP_PIECE)
        if more:
            probe = (parts[-1][-1:] if parts else b"") + more  # a record may start at the seam
            c = _last_record_start(probe, 0)
            if c <= 0:
                parts.append(more)
                have += len(more)
                continue
            cut = have - (1 if parts else 0) + c
            data = b"".join([*parts, more]) if parts else more
            piece, rest = data[:cut], data[cut:]
            del data
            parts, have = ([rest], len(rest)) if rest else ([], 0)
        else:
            piece, parts = b"".join(parts), []
        if not piece and scans:
            break
        scan = _scan(piece, path, mtime=st.st_mtime, size=len(piece), line_offset=lines, lazy=lazy, byte_offset=offset)
        scans.append(scan)
        offset += len(piece)
        lines += int(scan.stats["lines"])  # type: ignore[call-overload]
        if not more:
            break
    if stream.damage is not None:
        _add_problem(scans[-1], lines + 1, "gzip_damaged", f"{stream.damage}; read up to byte {offset} of the text")
    scan = _merged(scans)
    scan.stats["bytes"] = st.st_size
    return scan


def _last_record_start(data: bytes, lo: int) -> int:
    """The position of the last header line's start in data[lo:] (-1: none)."""
    p = data.rfind(b"\n", lo, len(data) - 1)
    for _ in range(64):  # mostly the last few lines
        if p < 0:
            return -1
        if data[p + 1] not in (9, 10):
            return p + 1
        p = data.rfind(b"\n", lo, p)
    cut = -1
    for m in _HEADER_START.finditer(data, lo, p + 2):  # linear in the new bytes
        cut = m.start() + 1
    return cut


def _add_problem(scan: _Scan, lineno: int, kind: str, detail: str) -> None:
    scan.problems = _with_problem(scan.problems, scan.file, lineno, kind, detail)


def _with_problem(problems: pl.DataFrame, file: str, lineno: int, kind: str, detail: str) -> pl.DataFrame:
    row = pl.DataFrame({"file": [file], "lineno": [lineno], "problem": [kind], "detail": [detail]}, schema=PROBLEMS_SCHEMA)
    return pl.concat([problems, row])


def file_changed(problems: pl.DataFrame, file: str, lines: int, expected: int, got: int) -> pl.DataFrame:
    """`problems` and one more: the file was shorter when read than when its size was taken
    (a log still being written, or rotated): what was read is parsed, the rest is missing."""
    detail = f"the file changed while it was read: {expected} bytes expected, {got} read"
    return _with_problem(problems, file, lines, "file_changed", detail)


def _merged(scans: list[_Scan]) -> _Scan:
    """The scans of the pieces of one file (in order) as one scan."""
    a = scans[0]
    for s in scans[1:]:
        n = int(a.stats["envelopes"])  # type: ignore[call-overload]
        a.prefix = pl.concat([a.prefix, s.prefix])
        a.columns = {c: pl.concat([a.columns[c], s.columns[c]], rechunk=False) for c in a.columns}
        a.strings = pl.concat([a.strings, s.strings])
        a.problems = pl.concat([a.problems, s.problems])
        a.chromium_rows = np.concatenate([a.chromium_rows, s.chromium_rows + n])
        a.chromium = {c: pl.concat([a.chromium[c], s.chromium[c]]) for c in a.chromium}
        a.kinds |= s.kinds
        for k, v in s.stats.items():
            if k == "truncated_tail":
                a.stats[k] = v
            elif k == "invalid_utf8":
                a.stats[k] = bool(a.stats[k]) or bool(v)
            elif k != "bytes":
                a.stats[k] = None if a.stats[k] is None or v is None else a.stats[k] + v  # type: ignore[operator]
    return a


@dataclass
class _Scan:
    """One file (or piece) after the per-envelope pass, before the tables are built: its
    columns are already Series, so the pass's Python objects die with it (kept as lists
    across a batch, they hold on to memory the allocator cannot give back)."""

    file: str
    file_rank: int | None
    year: int
    month: int
    prefix: pl.DataFrame  # glog prefix fields of the kept envelopes
    columns: dict[str, pl.Series]  # lineno, n_payload, kind, ..., payload_start/end when lazy
    strings: pl.DataFrame
    problems: pl.DataFrame
    chromium_rows: np.ndarray  # kept-envelope index of each decoded chromium event
    chromium: dict[str, pl.Series]
    stats: dict[str, object]  # the counters of STATS_SCHEMA known before the tables exist
    kinds: set[str]


def _scan(
    data: bytes,
    file: str,
    *,
    mtime: float | None,
    size: int | None,
    line_offset: int = 0,
    lazy: bool,
    byte_offset: int = 0,
) -> _Scan:
    """The per-envelope pass over one file (see parse_trace_bytes), or a piece of one
    (`byte_offset`: where it starts in the file, or in a gzip file's text)."""
    problems = _Problems()
    invalid_utf8 = False
    asked_lazy = lazy
    if b"\r\n" in data[: 1 << 16] and data.count(b"\n") == data.count(b"\r\n"):
        # CRLF line ends on every line (a log that went through a Windows editor or git
        # autocrlf): torch wrote LF and hashed LF payloads, so undo it; line numbers stay the
        # same. (A `\r\n` in some lines only is payload text: md5 checks it as it is.)
        data = data.replace(b"\r\n", b"\n")
        lazy = False
    try:
        sp = _split(data, lazy=lazy)
    except NotUtf8:  # the rare invalid file takes the slow path
        invalid_utf8 = True
        lazy = False
        data = _fix_utf8(bytes(data), problems)
        sp = _split(data)
    n, nlines, truncated, cand, starts, ends = sp.n, sp.nlines, sp.truncated, sp.cand, sp.starts, sp.ends
    k = len(cand)
    n_payload_lines = sp.n_payload_lines
    orphan_payload = int(cand[0]) if k else nlines
    if orphan_payload:
        problems.add(1, "orphan_payload", f"{orphan_payload} payload lines before the first record")

    # unanchored at the end: stops at "] "
    m = sp.headers.str.extract_groups(PREFIX_PATTERN).struct.unnest()
    plens = m["prefix"].str.len_bytes().to_list()
    jsons = sp.jsons

    # per-envelope Python: one orjson.loads and a handful of dict lookups
    loads = orjson.loads
    keep: list[int] = []
    kinds: list[str] = []
    names: list[str | None] = []
    metas: list[bytes] = []
    extras: list[bytes | None] = []
    ranks: list[int | None] = []
    caids: list[int | None] = []
    fids: list[int | None] = []
    fcids: list[int | None] = []
    attempts: list[int | None] = []
    md5s: list[str | None] = []
    str_ids: list[int | None] = []
    str_vals: list[str] = []
    bad_json = 0
    bad_prefix = 0
    for i, j in enumerate(jsons):
        plen = plens[i]
        if plen is None:
            bad_prefix += 1
            lineno = int(cand[i]) + 1
            a = int(starts[cand[i]])
            text = data[a : min(int(ends[cand[i]]), a + 400)].decode("utf-8", "replace")
            problems.add(lineno, "bad_prefix", text)
            continue
        j = j[plen:]
        try:
            d = loads(j)
        except orjson.JSONDecodeError as exc:
            # NaN, Infinity, lone surrogates, 1e400: what json.dumps writes (only then: a
            # long line that is not JSON is not decoded twice)
            d = _loads_python(j) if _python_json(j, exc) else None
            if d is None:
                bad_json += 1
                problems.add(int(cand[i]) + 1, "bad_json", f"{exc}: {j[:120].decode('utf-8', 'replace')}")
                continue
        if type(d) is not dict or not d:
            bad_json += 1
            problems.add(int(cand[i]) + 1, "bad_json", f"not a JSON object: {j[:120].decode('utf-8', 'replace')}")
            continue
        it = iter(d)
        kind = next(it)
        meta = d[kind]
        keep.append(i)
        kinds.append(kind)
        name = meta.get("name") if kind in NAMED_KINDS and type(meta) is dict else None
        if name is not None and type(name) is not str:
            problems.add(int(cand[i]) + 1, "bad_field", f"{kind} name is not a string: {_short(name)}")
            name = _short(name)
        names.append(name)
        metas.append(_dumps(meta))
        extra = None
        for key in it:
            if key not in CONTEXT_KEYS:
                if extra is None:
                    extra = {}
                extra[key] = d[key]
        extras.append(_dumps(extra) if extra is not None else None)
        ranks.append(d.get("rank"))
        caids.append(d.get("compiled_autograd_id"))
        fids.append(d.get("frame_id"))
        fcids.append(d.get("frame_compile_id"))
        attempts.append(d.get("attempt"))
        h = d.get("has_payload")
        if h is not None and type(h) is not str:
            problems.add(int(cand[i]) + 1, "bad_field", f"has_payload is not a string: {_short(h)}")
            h = _short(h)
        md5s.append(h)
        if kind == "str" and type(meta) is list and len(meta) == 2:
            sid = _int_or_none(meta[1])
            if sid is None or not -(1 << 63) <= sid < 1 << 63:
                problems.add(int(cand[i]) + 1, "bad_field", f"str id is not an integer: {_short(meta[1])}")
            else:
                str_vals.append(meta[0] if type(meta[0]) is str else _short(meta[0]))
                str_ids.append(sid)

    keep_np = np.asarray(keep, dtype=np.int64)
    kept_cand = cand[keep_np]
    kept_payload_lines = n_payload_lines[keep_np]
    raw_start = sp.raw_start[keep_np]
    raw_end = sp.raw_end[keep_np]
    kept_blocks = sp.payloads.take(_pa().array(keep_np)) if sp.payloads is not None else None
    if kept_blocks is not None:
        kept_payloads = _series(kept_blocks)
    else:
        kept_payloads = _summary_payloads(data, kinds, names, raw_start, raw_end, kept_payload_lines, kept_cand, problems)

    file_rank_m = FILE_RANK_RE.search(os.path.basename(file))
    file_rank = rank_number(file_rank_m.group(1)) if file_rank_m else None
    if file_rank is not None:
        other = [(i, r) for i, r in enumerate(map(_int_or_none, ranks)) if r is not None and r != file_rank]
        if other:
            problems.add(
                int(kept_cand[other[0][0]]) + 1,
                "rank_mismatch",
                f"file name says rank {file_rank}, {len(other)} envelopes say rank {sorted({r for _, r in other})}",
            )
    payload_ok, md5_bad, missing = _check_md5(kept_blocks, kept_payload_lines > 0, md5s, kept_cand + 1, problems)
    # A missing final newline alone is harmless (tlparse's own test logs end that way); the
    # tail counts as truncated when the last record is also incomplete.
    if lazy and truncated and keep and kept_payload_lines[-1] > 0 and md5s[-1] is not None:
        # the one payload a cut-off tail can break is the last one: check it now
        last = _raw_payload(data, int(raw_start[-1]), int(raw_end[-1]))
        if hashlib.md5(last).hexdigest() != md5s[-1]:
            problems.add(int(kept_cand[-1]) + 1, "md5_mismatch", f"has_payload {md5s[-1]}, payload cut off")
    if truncated and problems.linenos and max(problems.linenos) >= (int(cand[-1]) + 1 if k else 1):
        problems.add(nlines, "truncated_tail", "the last record is cut off (no final newline)")
    else:
        truncated = False
    if line_offset:
        problems.linenos = [x + line_offset for x in problems.linenos]

    known = {kd: is_known_kind(kd) for kd in set(kinds)}
    # (also when the file had to be read in full: its rows share a lazy batch's table)
    chromium_rows, chromium = _chromium(data, kinds, raw_start, raw_end, kept_payload_lines) if asked_lazy else ([], {})
    has = kept_payload_lines > 0
    year, month = year_and_month(mtime)
    columns = {
        "lineno": pl.Series(kept_cand + 1 + line_offset, dtype=pl.Int64),
        "n_payload": pl.Series(kept_payload_lines, dtype=pl.Int64),
        "kind": pl.Series(kinds, dtype=pl.String),
        "name": pl.Series([x if x is None or type(x) is str else str(x) for x in names], dtype=pl.String),
        "metadata": pl.Series(metas, dtype=pl.Binary).cast(pl.String),  # orjson writes UTF-8
        "extra": pl.Series(extras, dtype=pl.Binary).cast(pl.String),
        "rank": _ints(ranks, "rank", kept_cand, problems),
        "compiled_autograd_id": _ints(caids, "compiled_autograd_id", kept_cand, problems),
        "frame_id": _ints(fids, "frame_id", kept_cand, problems),
        "frame_compile_id": _ints(fcids, "frame_compile_id", kept_cand, problems),
        "attempt": _ints(attempts, "attempt", kept_cand, problems),
        "payload_md5": pl.Series(md5s, dtype=pl.String),
        "block": kept_payloads,
        "payload_ok": pl.Series(payload_ok, dtype=pl.Boolean),
    }
    if asked_lazy:  # the same columns whether or not this file could be read lazily
        columns["payload_start"] = pl.Series(np.where(has, raw_start + byte_offset, -1) if lazy else np.full(len(keep), -1))
        columns["payload_end"] = pl.Series(np.where(has, raw_end + byte_offset, -1) if lazy else np.full(len(keep), -1))
    return _Scan(
        file=file,
        file_rank=file_rank,
        year=year,
        month=month,
        prefix=m[keep_np].drop("prefix"),
        columns=columns,
        strings=pl.DataFrame({"file": [file] * len(str_vals), "id": str_ids, "string": str_vals}, schema=STRINGS_SCHEMA),
        problems=_problem_frame(file, problems).sort("lineno", maintain_order=True),
        chromium_rows=np.asarray(chromium_rows, dtype=np.int64),
        chromium={c: pl.Series(c, v, dtype=CHROMIUM_SCHEMA[c]) for c, v in chromium.items()},
        kinds=set(known),
        stats={
            "bytes": size if size is not None else n,
            "lines": nlines,
            "envelopes": len(keep),
            "payload_lines": nlines - k,
            "non_envelope_lines": bad_prefix + orphan_payload,
            "bad_json": bad_json,
            "md5_mismatch": md5_bad,
            "unknown_kinds": sum(1 for kd in kinds if not known[kd]),
            "missing_payload": missing,
            "truncated_tail": truncated,
            "invalid_utf8": invalid_utf8,
        },
    )


def _ints(values: list, field: str, cand: np.ndarray, problems: _Problems) -> pl.Series:
    """Int32 Series of envelope fields ("3" and 3.0 become 3; a value that is not an
    integer, or does not fit, becomes null and is a `bad_field` problem)."""
    out = pl.Series(values, dtype=pl.Int32, strict=False)
    given = len(values) - values.count(None)
    if given != len(values) - out.null_count():  # rare: find the envelopes
        for i in np.flatnonzero(out.is_null().to_numpy()).tolist():
            if values[i] is not None:
                problems.add(int(cand[i]) + 1, "bad_field", f"{field} is not a 32-bit integer: {_short(values[i])}")
    return out


def _python_json(j: bytes, exc: orjson.JSONDecodeError) -> bool:
    """Whether a header that orjson refused may be JSON as Python's json reads it."""
    return b"NaN" in j or b"Infinity" in j or b"\\u" in j or "infinity" in str(exc)


def _loads_python(j: bytes) -> object:
    """A header's JSON as Python's json module reads it (None when it cannot): torch writes
    it with json.dumps, which writes NaN, Infinity and lone surrogates that strict JSON
    (orjson) refuses. Lone surrogates become U+FFFD (columns are UTF-8); NaN and Infinity
    stay floats (written as null in `metadata`, which is strict JSON)."""
    import json

    try:
        return _no_surrogates(json.loads(j))
    except (ValueError, RecursionError):
        return None


def _no_surrogates(v: object) -> object:
    if type(v) is str:
        return v.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if type(v) is list:
        return [_no_surrogates(x) for x in v]
    if type(v) is dict:
        return {_no_surrogates(k): _no_surrogates(x) for k, x in v.items()}
    return v


def _short(value: object) -> str:
    """A field's value as text, for a problem's detail or a column that wants a string."""
    return value if type(value) is str else _dumps(value).decode("utf-8", "replace")[:200]


def _dumps(value: object) -> bytes:
    """JSON of a decoded value; what orjson cannot write (an integer beyond 64 bits, NaN is
    fine) goes through the standard library, which writes anything json.loads read."""
    try:
        return orjson.dumps(value, default=repr)
    except TypeError:
        import json

        return json.dumps(value, default=repr).encode()  # ASCII: surrogates escaped


def _per_row(scans: list[_Scan], attr: str) -> list:
    """A per-file value repeated for each kept envelope of the file."""
    out: list = []
    for s in scans:
        out.extend([getattr(s, attr)] * s.stats["envelopes"])  # type: ignore[operator]
    return out


def _cat_series(parts: list[pl.Series]) -> pl.Series:
    return parts[0] if len(parts) == 1 else pl.concat(parts, rechunk=False)


def _build(scans: list[_Scan], *, lazy: bool) -> ParsedFile:
    """The tables of the scanned files, each table operation done once for all of them."""
    prefix = scans[0].prefix if len(scans) == 1 else pl.concat([s.prefix for s in scans])
    raw = pl.DataFrame(
        {
            "file": pl.Series(_per_row(scans, "file"), dtype=pl.String),
            "file_rank": pl.Series(_per_row(scans, "file_rank"), dtype=pl.Int32),
            "_year": pl.Series(_per_row(scans, "year"), dtype=pl.Int32),
            "_month": pl.Series(_per_row(scans, "month"), dtype=pl.Int32),
            "prefix_rank": prefix["prefix_rank"],
            "level": prefix["level"],
            "md": prefix["md"],
            "time": prefix["time"],
            "pid": prefix["pid"],
            "src_file": prefix["src"],
            "src_line": prefix["srcline"],
            **{c: _cat_series([s.columns[c] for s in scans]) for c in scans[0].columns},
        }
    )
    if lazy:
        raw = raw.with_columns(pl.col("payload_start", "payload_end").replace(-1, None))
    kinds_seen = {kd for s in scans for kd in s.kinds}
    events = (
        raw.with_columns(compile_id_expr().alias("compile_id"))
        .with_columns(
            (pl.col("lineno") + pl.col("n_payload")).alias("end_lineno"),
            # the file name's rank_N wins: it is what the user sees and what tlparse uses
            pl.coalesce(
                pl.col("file_rank"),
                pl.col("rank"),
                pl.col("prefix_rank").cast(pl.Int32, strict=False),
            ).alias("rank"),
            pl.col("pid").cast(pl.Int32, strict=False),
            pl.col("src_line").cast(pl.Int32, strict=False),
            timestamp(pl.col("md"), pl.col("time"), pl.col("_year"), pl.col("_month")).alias("ts"),
            pl.col("kind").is_in(sorted(k for k in kinds_seen if is_known_kind(k))).alias("known_kind"),
            trace_id_expr().alias("trace_id"),
            pl.when(pl.col("n_payload") > 0).then(pl.col("block")).otherwise(None).alias("payload"),
        )
    )
    # the same columns whether or not each file of a lazy parse could be read lazily
    schema = {**EVENTS_SCHEMA, **INDEX_SCHEMA} if lazy else EVENTS_SCHEMA
    events = events.select([pl.col(c).cast(t) for c, t in schema.items()])

    per_file = (
        events.group_by("file")
        .agg(
            pl.col("rank").drop_nulls().first().alias("rank"),
            pl.col("pid").drop_nulls().first().alias("pid"),
            pl.col("ts").min().alias("first_ts"),
            pl.col("ts").max().alias("last_ts"),
        )
        .rows_by_key("file", unique=True)
        if events.height
        else {}
    )
    stats = pl.DataFrame(
        [
            {
                "file": s.file,
                **s.stats,
                **dict(zip(("rank", "pid", "first_ts", "last_ts"), per_file.get(s.file) or (s.file_rank, None, None, None))),
            }
            for s in scans
        ],
        schema=STATS_SCHEMA,
    )
    problems = pl.concat([s.problems for s in scans])
    strings = pl.concat([s.strings for s in scans])
    chromium = None
    if lazy:
        base = np.cumsum([0] + [s.stats["envelopes"] for s in scans[:-1]])  # type: ignore[operator]
        rows = np.concatenate([s.chromium_rows + b for s, b in zip(scans, base)])
        keys = events.select("file", "rank", "lineno", "compile_id")
        chromium = (keys[rows] if len(rows) else keys.clear()).with_columns(
            _cat_series([s.chromium[c] for s in scans]) for c in _CHROMIUM_FIELDS
        ).select([pl.col(c).cast(t) for c, t in CHROMIUM_SCHEMA.items()])
    return ParsedFile(events=events, strings=strings, stats=stats, problems=problems, chromium=chromium)


CHROMIUM_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String,
    "rank": pl.Int32,
    "lineno": pl.Int64,
    "compile_id": pl.String,
    "name": pl.String,
    "cat": pl.String,
    "ph": pl.String,
    "ts": pl.Float64,
    "dur": pl.Float64,
    "args_compile_id": pl.String,
}
_CHROMIUM_FIELDS = ("name", "cat", "ph", "ts", "dur", "args_compile_id")


def _num(v: object) -> float | None:
    return float(v) if type(v) is float or type(v) is int else None  # type: ignore[arg-type]


def _chromium(
    data: bytes, kinds: list[str], raw_start: np.ndarray, raw_end: np.ndarray, n_lines: np.ndarray
) -> tuple[list[int], dict[str, list]]:
    """The fields spans need of every chromium event (and its envelope's index), decoded from
    the payload lines as they are in the file: a TAB after a newline is whitespace between
    JSON tokens (a JSON string cannot hold a newline), so the block parses without the tabs
    being removed first."""
    loads = orjson.loads
    rows: list[int] = []
    cols: dict[str, list] = {k: [] for k in _CHROMIUM_FIELDS}
    rs = raw_start.tolist()
    re_ = raw_end.tolist()
    nl = n_lines.tolist()
    for i, kind in enumerate(kinds):
        if kind != "chromium_event" or not nl[i]:
            continue
        try:
            d = loads(data[rs[i] : re_[i]])
        except orjson.JSONDecodeError:
            continue
        if type(d) is not dict:
            continue
        name, ph, ts = d.get("name"), d.get("ph"), d.get("ts")
        args = d.get("args")
        cid = args.get("compile_id") if type(args) is dict else None
        rows.append(i)
        cols["name"].append(name if type(name) is str else None)
        cols["cat"].append(d.get("cat") if type(d.get("cat")) is str else None)
        cols["ph"].append(ph if type(ph) is str else None)
        cols["ts"].append(_num(ts))
        cols["dur"].append(_num(d.get("dur")))
        cols["args_compile_id"].append(cid if cid is None or type(cid) is str else str(cid))
    return rows, cols


def _raw_payload(data: bytes, start: int, end: int) -> bytes:
    """The payload whose lines span data[start:end]: the tab that starts each line removed."""
    block = data[start:end]
    if block[:1] == b"\t":
        block = block[1:]
    return block.replace(b"\n\t", b"\n")


def _decode_each(blocks: list[bytes | None], linenos: np.ndarray, problems: _Problems) -> pl.Series:
    """String Series of payload bytes, one by one: invalid UTF-8 is replaced and recorded."""
    out: list[str | None] = []
    for b, ln in zip(blocks, linenos.tolist()):
        if b is None:
            out.append(None)
            continue
        try:
            out.append(b.decode("utf-8"))
        except UnicodeDecodeError as exc:
            problems.add(int(ln), "invalid_utf8", f"payload byte {exc.start}: {b[max(exc.start - 40, 0):exc.start + 40]!r}")
            out.append(b.decode("utf-8", "replace"))
    return pl.Series(out, dtype=pl.String)


def _summary_payloads(
    data: bytes,
    kinds: list[str],
    names: list[str | None],
    raw_start: np.ndarray,
    raw_end: np.ndarray,
    n_lines: np.ndarray,
    cand: np.ndarray,
    problems: _Problems,
) -> pl.Series:
    """The payloads a lazy parse reads (null for every other envelope)."""
    blocks: list[bytes | None] = [None] * len(kinds)
    rs = raw_start.tolist()
    re_ = raw_end.tolist()
    nl = n_lines.tolist()
    for i, kind in enumerate(kinds):
        if nl[i] and kind == "artifact" and names[i] in SUMMARY_PAYLOAD_ARTIFACTS:
            blocks[i] = _raw_payload(data, rs[i], re_[i])
        elif nl[i] and kind == "dynamo_output_graph" and data.find(_GRAPH_MARK, rs[i], re_[i]) >= 0:
            blocks[i] = _raw_payload(data, rs[i], re_[i])
    return _strings(blocks, cand + 1, problems)


def hydrate(events: pl.DataFrame, *, verify: bool = False) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Events of a lazy parse with every payload read from its file (`events` as
    parse_trace_bytes returns it by default); `verify`: also check each payload's md5
    (`payload_ok`). Returns the events (EVENTS_SCHEMA) and the problems found on the way
    (md5 mismatches, invalid UTF-8). Raises InputChanged when a file is no longer what was
    parsed (shorter than a payload's end)."""
    if "payload_start" not in events.columns:
        return events, pl.DataFrame(schema=PROBLEMS_SCHEMA)
    # the payloads read at parse time too when verifying (their md5 is checked here)
    need = pl.col("payload_start").is_not_null() & (pl.col("payload").is_null() | verify)
    todo = events.with_row_index("_row").filter(need)
    problems: list[pl.DataFrame] = []
    filled: list[pl.DataFrame] = []
    verified = _VERIFIED if verify else None
    if verified is not None and sum(map(len, verified.values())) > VERIFIED_MAX_BYTES:
        verified.clear()
    for (file,), rows in todo.group_by("file", maintain_order=True):
        probs = _Problems()
        payloads = _read_payloads(str(file), rows["payload_start"].to_numpy(), rows["payload_end"].to_numpy(), rows["lineno"].to_numpy(), probs)
        part = rows.select("_row", payloads.alias("_payload"))
        if verify:
            ok, _, _ = _check_md5(
                payloads.to_arrow(), np.ones(len(rows), dtype=bool), rows["payload_md5"].to_list(), rows["lineno"].to_numpy(), probs, verified
            )
            part = part.with_columns(pl.Series("_ok", ok, dtype=pl.Boolean))
        filled.append(part)
        problems.append(_problem_frame(str(file), probs))
    out = events
    if filled:
        add = pl.concat(filled)
        out = (
            events.with_row_index("_row")
            .join(add, on="_row", how="left", maintain_order="left")
            .with_columns(pl.coalesce("_payload", "payload").alias("payload"))
        )
        if verify:
            out = out.with_columns(pl.coalesce("_ok", "payload_ok").alias("payload_ok"))
    prob = pl.concat(problems) if problems else pl.DataFrame(schema=PROBLEMS_SCHEMA)
    return out.select(list(EVENTS_SCHEMA)), prob


# payloads whose md5 matched, by has_payload, kept across hydrate calls of this process (the
# ranks of one job log the same graphs): an equal payload is good without hashing it again
_VERIFIED: dict[str, bytes] = {}
VERIFIED_MAX_BYTES = 16 << 20


class InputChanged(InputError):
    """A parsed input file changed afterwards (its payloads can no longer be read)."""


def _read_payloads(path: str, start: np.ndarray, end: np.ndarray, linenos: np.ndarray, problems: _Problems) -> pl.Series:
    """Payload text (String Series) of the byte ranges [start, end) of `path`: each range's
    lines, the tab that starts each of them removed (invalid UTF-8 replaced and recorded)."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InputChanged(f"{path}: cannot read it any more ({exc.strerror})") from None
    with fh:
        k = len(start)
        if k == 0:
            return pl.Series([], dtype=pl.String)
        need = int(end.max())
        if is_gzip(fh):
            return _strings(_gzip_payloads(path, fh, start, end), linenos, problems)
        size = os.fstat(fh.fileno()).st_size
        if need > size:
            raise InputChanged(f"{path}: the file changed since it was parsed (now {size} bytes)")
        total = int((end - start).sum())
        # (read, never memory-mapped: a file that shrinks under a mapping kills the process)
        if total < size // 4:  # a few payloads: read them one by one
            blocks = []
            for a, b in zip(start.tolist(), end.tolist()):
                raw = os.pread(fh.fileno(), b - a, a)
                if len(raw) < b - a:
                    raise InputChanged(f"{path}: the file changed while it was read")
                blocks.append(_raw_payload(raw, 0, b - a))
            return _strings(blocks, linenos, problems)
        data = fh.read(need)
        if len(data) < need:
            raise InputChanged(f"{path}: the file changed while it was read")
    # most of the file: every payload's bytes after its first tab, as one Arrow array over the
    # file's buffer; then polars checks UTF-8 and deletes the other line-leading tabs
    pa = _pa()
    offs = np.empty(2 * k, dtype=np.int64)
    offs[0::2] = start + 1  # a payload's first byte is the tab of its first line
    offs[1::2] = end
    seg = pa.Array.from_buffers(pa.large_binary(), 2 * k - 1, [None, pa.py_buffer(offs), pa.py_buffer(data)])
    raw = _series(seg).gather_every(2)
    del seg
    try:
        text = raw.cast(pl.String)
    except pl.exceptions.ComputeError:
        return _decode_each([_raw_payload(data, a, b) for a, b in zip(start.tolist(), end.tolist())], linenos, problems)
    return text.str.replace_all("\n\t", "\n", literal=True)


class _GzipCursor:
    """A forward reader of a gzip file's text by position, kept between `hydrate` calls
    (an export reads a big file's payloads a chunk at a time, in order: one pass)."""

    def __init__(self, path: str, key: tuple) -> None:
        self.key = key
        self.fh = open(path, "rb")
        self.stream = GzipStream(self.fh)
        self.start = 0  # text position of buf[0]
        self.buf = b""

    def read(self, a: int, b: int) -> bytes | None:
        """Text bytes [a, b), a at or after the previous read's start (None: the text ends
        before b)."""
        drop = min(a - self.start, len(self.buf))
        self.buf = self.buf[drop:]
        self.start += drop
        while self.start < a:  # skip forward
            skipped = self.stream.read(min(a - self.start, 1 << 24))
            if not skipped:
                return None
            self.start += len(skipped)
        parts = [self.buf]
        have = len(self.buf)
        while have < b - a:
            more = self.stream.read(max(b - a - have, 1 << 20))
            if not more:
                return None
            parts.append(more)
            have += len(more)
        self.buf = b"".join(parts)
        return self.buf[: b - a]


_GZIP_CURSORS: dict[str, _GzipCursor] = {}


def _gzip_payloads(path: str, fh: BinaryIO, start: np.ndarray, end: np.ndarray) -> list[bytes | None]:
    """The payloads at text ranges [start, end) of a gzip log (in any order)."""
    st = os.fstat(fh.fileno())
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    order = np.argsort(start, kind="stable")
    first = int(start[order[0]])
    cur = _GZIP_CURSORS.get(path)
    if cur is None or cur.key != key or first < cur.start:
        if cur is not None:
            cur.fh.close()
        if len(_GZIP_CURSORS) >= 4:
            _GZIP_CURSORS.pop(next(iter(_GZIP_CURSORS))).fh.close()
        cur = _GZIP_CURSORS[path] = _GzipCursor(path, key)
    blocks: list[bytes | None] = [None] * len(start)
    for i in order.tolist():
        a, b = int(start[i]), int(end[i])
        raw = cur.read(a, b)
        if raw is None:
            raise InputChanged(f"{path}: the file changed since it was parsed (its text is shorter)")
        blocks[i] = _raw_payload(raw, 0, b - a)
    return blocks


def _strings(blocks: list[bytes | None], linenos: np.ndarray, problems: _Problems) -> pl.Series:
    """String Series of payload bytes; invalid UTF-8 is replaced and recorded."""
    try:
        return pl.Series(blocks, dtype=pl.Binary).cast(pl.String)
    except pl.exceptions.ComputeError:
        return _decode_each(blocks, linenos, problems)


def _problem_frame(file: str, problems: _Problems) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "file": [file] * len(problems.linenos),
            "lineno": problems.linenos,
            "problem": problems.kinds,
            "detail": problems.details,
        },
        schema=PROBLEMS_SCHEMA,
    )


def _check_md5(
    payloads: pa.Array | None,
    has: np.ndarray,
    expected: list[str | None],
    linenos: np.ndarray,
    problems: _Problems,
    verified: dict[str, bytes] | None = None,
) -> tuple[list[bool | None], int | None, int]:
    """payload_ok per envelope, hashing the payload bytes in the Arrow buffer (no Python
    strings); `has` marks the envelopes that have payload lines. Without `payloads`, only
    missing payloads are looked for (md5 mismatches: None). `verified` (has_payload ->
    payload bytes whose md5 matched, filled on the way): a payload equal to one of them is
    good without hashing it (ranks log the same graphs; comparing is ~3x cheaper than md5)."""
    n = len(expected)
    ok: list[bool | None] = [None] * n
    if n == 0:
        return ok, (0 if payloads is not None else None), 0
    missing = 0
    for i in np.flatnonzero(~has).tolist():
        if expected[i] is not None:
            missing += 1
            problems.add(int(linenos[i]), "missing_payload", f"has_payload {expected[i]} but no payload lines")
    if payloads is None:
        return ok, None, missing
    bufs = payloads.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[payloads.offset : payloads.offset + n + 1].tolist()
    data = memoryview(bufs[2]) if bufs[2] is not None else memoryview(b"")
    md5 = hashlib.md5
    bad = 0
    for i in np.flatnonzero(has).tolist():
        want = expected[i]
        blob = data[offsets[i] : offsets[i + 1]]
        if verified is not None and want is not None:
            seen = verified.get(want)
            if seen is not None and len(seen) == len(blob) and seen == blob.tobytes():
                ok[i] = True
                continue
        got = md5(blob).hexdigest()
        good = want is not None and got == want
        if good and verified is not None:
            verified[want] = blob.tobytes()  # type: ignore[index]
        ok[i] = good
        if not good:
            bad += 1
            problems.add(int(linenos[i]), "md5_mismatch", f"has_payload {want}, payload md5 {got}")
    return ok, bad, missing


def read_trace_file(path: str | os.PathLike[str], *, lazy: bool = False) -> ParsedFile:
    """Parse one trace file (plain or gzip; `lazy`: see parse_trace_bytes, ignored for gzip,
    whose payloads cannot be read in place later)."""
    return read_trace_files([str(path)], lazy=lazy)


def empty_tables() -> ParsedFile:
    """The four tables with their schemas and no rows."""
    return ParsedFile(
        events=pl.DataFrame(schema=EVENTS_SCHEMA),
        strings=pl.DataFrame(schema=STRINGS_SCHEMA),
        stats=pl.DataFrame(schema=STATS_SCHEMA),
        problems=pl.DataFrame(schema=PROBLEMS_SCHEMA),
    )


def read_trace(
    paths: list[str | os.PathLike[str]] | str | os.PathLike[str], *, jobs: int | None = None
) -> ParsedFile:
    """Parse trace files one after another and concatenate their tables (`jobs` is accepted
    for compatibility; parallel parsing lives in traceview.pipeline)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = [str(p) for p in paths]
    if not files:
        return empty_tables()
    parts = [read_trace_file(f) for f in files]
    return ParsedFile(
        events=pl.concat([p.events for p in parts], rechunk=False),
        strings=pl.concat([p.strings for p in parts]),
        stats=pl.concat([p.stats for p in parts]),
        problems=pl.concat([p.problems for p in parts]),
    )
