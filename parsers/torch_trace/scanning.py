"""The per-envelope pass over one trace file (or a piece of one): the glog prefix of every
header matched by polars' vectorized regex, the header JSON decoded once per envelope with
orjson, the fields checked (each oddity a problem), the chromium events decoded. Its result
(`Scan`) holds Series, not Python lists; parsers.torch_trace.tables builds the tables of a
batch of them. A gzip log is scanned a piece at a time (`scan_gzip`)."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import orjson
import polars as pl

from parsers.cache_keys import KEYED_ARTIFACTS, key_problem
from parsers.coerce import RECORD_FIELDS, field_problems
from parsers.discover import rank_number
from parsers.glog import PREFIX, renamed, year_and_month
from parsers.gzipped import GzipStream
from parsers.kinds import CONTEXT_KEYS, NAMED_KINDS, is_known_kind
from parsers.torch_trace.lines import NotUtf8, arrow_series, fix_utf8, pyarrow_module, split_lines
from parsers.torch_trace.payloads import check_md5, raw_payload, summary_payloads
from parsers.torch_trace.problems import Problems, problem_frame, with_problem
from parsers.torch_trace.schemas import CHROMIUM_FIELDS, CHROMIUM_SCHEMA, STRINGS_SCHEMA

PREFIX_PATTERN = "^(?P<prefix>" + renamed(PREFIX, rank="prefix_rank", src_file="src", src_line="srcline") + " )"
FILE_RANK_RE = re.compile(r"rank_(\d+)")
GZIP_PIECE = 32 << 20  # a gzip log is decompressed and parsed this much at a time
_HEADER_START = re.compile(rb"\n[^\t\n]")


@dataclass
class Scan:
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


def scan_bytes(
    data: bytes,
    file: str,
    *,
    mtime: float | None,
    size: int | None,
    line_offset: int = 0,
    lazy: bool,
    byte_offset: int = 0,
) -> Scan:
    """The per-envelope pass over one file (see parse_trace_bytes), or a piece of one
    (`byte_offset`: where it starts in the file, or in a gzip file's text)."""
    problems = Problems()
    invalid_utf8 = False
    asked_lazy = lazy
    if b"\r\n" in data[: 1 << 16] and data.count(b"\n") == data.count(b"\r\n"):
        # CRLF line ends on every line (a log that went through a Windows editor or git
        # autocrlf): torch wrote LF and hashed LF payloads, so undo it; line numbers stay the
        # same. (A `\r\n` in some lines only is payload text: md5 checks it as it is.)
        data = data.replace(b"\r\n", b"\n")
        lazy = False
    try:
        sp = split_lines(data, lazy=lazy)
    except NotUtf8:  # the rare invalid file takes the slow path
        invalid_utf8 = True
        lazy = False
        data = fix_utf8(bytes(data), problems)
        sp = split_lines(data)
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
        if kind in RECORD_FIELDS or (extra is not None and "stack" in extra):
            # a field the readers above need, of a type torch never writes there: they skip
            # the record (parsers.coerce); here it is counted
            for why in field_problems(kind, meta, extra.get("stack") if extra is not None else None):
                problems.add(int(cand[i]) + 1, "bad_field", why)
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
    kept_blocks = sp.payloads.take(pyarrow_module().array(keep_np)) if sp.payloads is not None else None
    if kept_blocks is not None:
        kept_payloads = arrow_series(kept_blocks)
    else:
        kept_payloads = summary_payloads(data, kinds, names, raw_start, raw_end, kept_payload_lines, kept_cand, problems)

    _check_cache_keys(data, kinds, names, raw_start, raw_end, kept_payload_lines, kept_cand, problems)

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
    payload_ok, md5_bad, missing = check_md5(kept_blocks, kept_payload_lines > 0, md5s, kept_cand + 1, problems)
    # A missing final newline alone is harmless (tlparse's own test logs end that way); the
    # tail counts as truncated when the last record is also incomplete.
    if lazy and truncated and keep and kept_payload_lines[-1] > 0 and md5s[-1] is not None:
        # the one payload a cut-off tail can break is the last one: check it now
        last = raw_payload(data, int(raw_start[-1]), int(raw_end[-1]))
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
    return Scan(
        file=file,
        file_rank=file_rank,
        year=year,
        month=month,
        prefix=m[keep_np].drop("prefix"),
        columns=columns,
        strings=pl.DataFrame({"file": [file] * len(str_vals), "id": str_ids, "string": str_vals}, schema=STRINGS_SCHEMA),
        problems=problem_frame(file, problems).sort("lineno", maintain_order=True),
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


def _check_cache_keys(
    data: bytes, kinds: list[str], names: list, raw_start: np.ndarray, raw_end: np.ndarray,
    n_lines: np.ndarray, cand: np.ndarray, problems: Problems,
) -> None:
    """A `bad_cache_key` problem for each FX graph / AOTAutograd cache hit or miss whose key
    components cannot be read (parsers.cache_keys.key_problem): its payload is read here once,
    the `cache_keys` table reads it again on demand."""
    for i, kind in enumerate(kinds):
        if kind == "artifact" and type(names[i]) is str and names[i] in KEYED_ARTIFACTS:
            payload = raw_payload(data, int(raw_start[i]), int(raw_end[i])) if n_lines[i] else None
            why = key_problem(payload)
            if why is not None:
                problems.add(int(cand[i]) + 1, "bad_cache_key", f"{names[i]}: {why}")


def scan_gzip(fh: BinaryIO, path: str, st: os.stat_result, *, lazy: bool) -> Scan:
    """A gzip log, decompressed and scanned a piece at a time (memory stays near what the
    same file uncompressed costs: no more than GZIP_PIECE of text at once, plus the tables);
    a lazy parse leaves the payloads in the compressed file, where `hydrate` reads them by
    decompressing again. Damage ends the text where it starts, and is a problem."""
    stream = GzipStream(fh)
    scans: list[Scan] = []
    parts: list[bytes] = []  # text read after the last piece (one record bigger than a piece)
    have = offset = lines = 0
    while True:
        more = stream.read(GZIP_PIECE)
        if more:
            probe = (parts[-1][-1:] if parts else b"") + more  # a record may start at the seam
            c = last_record_start(probe, 0)
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
        scan = scan_bytes(piece, path, mtime=st.st_mtime, size=len(piece), line_offset=lines, lazy=lazy, byte_offset=offset)
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


def last_record_start(data: bytes, lo: int) -> int:
    """The position of the last header line's start in data[lo:] after a newline (-1: none;
    a log followed while it is written, traceview.live.tail, finds its last record so)."""
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


def _merged(scans: list[Scan]) -> Scan:
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


def _add_problem(scan: Scan, lineno: int, kind: str, detail: str) -> None:
    scan.problems = with_problem(scan.problems, scan.file, lineno, kind, detail)


def _int_or_none(v: object) -> int | None:
    if v is None or type(v) is int:
        return v  # type: ignore[return-value]
    try:
        return int(v)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def _ints(values: list, field: str, cand: np.ndarray, problems: Problems) -> pl.Series:
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


def _num(v: object) -> float | None:
    return float(v) if type(v) is float or type(v) is int else None  # type: ignore[arg-type]


def _chromium(
    data: bytes, kinds: list[str], raw_start: np.ndarray, raw_end: np.ndarray, n_lines: np.ndarray
) -> tuple[list[int], dict[str, list]]:
    """The fields spans need of every chromium event (and its envelope's index), decoded from
    the payload lines as they are in the file: a TAB after a newline is whitespace between
    JSON tokens (a JSON string cannot hold a newline), so the block parses without the tabs
    being removed first."""
    rows: list[int] = []
    cols: dict[str, list] = {k: [] for k in CHROMIUM_FIELDS}
    rs = raw_start.tolist()
    re_ = raw_end.tolist()
    nl = n_lines.tolist()
    for i, kind in enumerate(kinds):
        if kind != "chromium_event" or not nl[i]:
            continue
        add_chromium_fields(i, data[rs[i] : re_[i]], rows, cols)
    return rows, cols


def add_chromium_fields(row: int, payload: bytes | str, rows: list[int], cols: dict[str, list]) -> None:
    """Decode one chromium event's payload and add its fields (CHROMIUM_FIELDS) to `cols`
    and `row` to `rows`; nothing when it is not a JSON object."""
    try:
        d = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return
    if type(d) is not dict:
        return
    name, ph, ts = d.get("name"), d.get("ph"), d.get("ts")
    args = d.get("args")
    cid = args.get("compile_id") if type(args) is dict else None
    rows.append(row)
    cols["name"].append(name if type(name) is str else None)
    cols["cat"].append(d.get("cat") if type(d.get("cat")) is str else None)
    cols["ph"].append(ph if type(ph) is str else None)
    cols["ts"].append(_num(ts))
    cols["dur"].append(_num(d.get("dur")))
    cols["args_compile_id"].append(cid if cid is None or type(cid) is str else str(cid))
