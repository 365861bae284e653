"""Robustness: mutated real traces never crash traceview, and no intact envelope is lost.

Inputs are windows of REAL trace records (fixtures/*/trace, made by torch 2.13, and tlparse's
test logs in ../shared/traces/peer-tlparse) with damage done to them by hand: truncation at a
record boundary or at any byte, byte flips, inserted NULs and invalid UTF-8, deleted and
swapped lines, odd JSON types in known fields, NaN/Infinity/lone surrogates (what Python's
json.dumps writes), CRLF line ends, gzip (cut, damaged, concatenated), a second file beside it.

For each input:
- no exception escapes `traceview.load`, the table builders (compiles, spans, facts, guards,
  graph tables, seq_links) or the report (`build_report`, `render_text`);
- every intact envelope, as counted by `count_envelopes` below (a reader written here with the
  standard library only, from the format in shared/FORMAT.md, not from traceview's code), is a
  row of `events`, and `events` holds nothing else;
- every other record line is in `problems` (damaged compression too);
- a deadline per input (hypothesis' `deadline`; generous: it catches hangs, not slowness).

Profiles: the default one keeps this file at about a minute and a half on 2 cores (CI);
`TRACEVIEW_FUZZ=long` runs many more inputs (a nightly or local run; see docs/robustness.md).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import zlib
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import orjson
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import traceview
from parsers.torch_trace import read_trace_files
from traceview.output.report import build_report
from traceview.output.summary import render_text

ROOT = Path(__file__).resolve().parents[1]
PEER = Path(os.environ.get("TRACEVIEW_SHARED_TRACES", ROOT.parent / "shared" / "traces")) / "peer-tlparse"

LONG = os.environ.get("TRACEVIEW_FUZZ") == "long"
settings.register_profile(
    "fuzz-default",
    max_examples=100,
    deadline=timedelta(seconds=20),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=False,
)
settings.register_profile(
    "fuzz-long",
    max_examples=int(os.environ.get("TRACEVIEW_FUZZ_EXAMPLES", "4000")),
    deadline=timedelta(seconds=60),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = settings.get_profile("fuzz-long" if LONG else "fuzz-default")


# ------------------------------------------------------------ the independent reader

# FORMAT.md section 2: `<L><MMDD> <HH:MM:SS>.<usec6> <pid> <path>:<line>] <json>`, optionally
# after a torchrun `[rankN]:`; payload lines start with a TAB.
GLOG = re.compile(rb"(?:\[rank\d+\]:)?[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^\]\n]+:\d+\] ")


def gunzip_readable(raw: bytes) -> tuple[bytes, bool]:
    """What a gzip file decodes to before any damage (members one after another), and
    whether it was damaged or cut off: zlib fed one compressed byte at a time."""
    out = []
    z = zlib.decompressobj(31)
    data = raw
    damaged = False
    i = 0
    while i < len(data):
        try:
            out.append(z.decompress(data[i : i + 1]))
        except zlib.error:
            damaged = True
            break
        i += 1
        if z.eof:
            rest = z.unused_data + data[i:]
            rest = rest.lstrip(b"\x00")
            if not rest:
                return b"".join(out), False
            if rest[:2] != b"\x1f\x8b":
                return b"".join(out), True
            z, data, i = zlib.decompressobj(31), rest, 0
    else:
        damaged = True  # no end-of-stream marker
    return b"".join(out), damaged


@dataclass
class Expected:
    intact: list[int]  # line numbers of intact envelopes' headers
    broken: list[int]  # line numbers of record lines that are not intact envelopes
    last_line: int


def count_envelopes(text: bytes) -> Expected:
    """Intact envelopes of a TORCH_TRACE log's text: a line that is not a payload line (TAB
    first; an empty line between two payload lines is one too) with a glog prefix followed
    by a JSON object with at least one key (as Python's json reads it: NaN and lone
    surrogates are JSON to it; invalid UTF-8 read as U+FFFD). A file whose every line ends
    in CRLF is read with LF ends (it went through an editor)."""
    if b"\r\n" in text[: 1 << 16] and text.count(b"\n") == text.count(b"\r\n"):
        text = text.replace(b"\r\n", b"\n")
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    tab = [ln[:1] == b"\t" for ln in lines]
    intact, broken = [], []
    for i, ln in enumerate(lines):
        if tab[i] or (not ln and 0 < i < len(lines) - 1 and tab[i - 1] and tab[i + 1]):
            continue
        m = GLOG.match(ln)
        ok = False
        if m:
            try:
                obj = json.loads(ln[m.end() :].decode("utf-8", "replace"))
                ok = isinstance(obj, dict) and len(obj) > 0
            except (ValueError, RecursionError):
                ok = False
        (intact if ok else broken).append(i + 1)
    return Expected(intact, broken, len(lines))


# ------------------------------------------------------------------ the real records


def _records(path: Path) -> list[bytes]:
    """A real log cut into its records (header line and payload lines, newline-ended)."""
    out: list[bytes] = []
    for ln in path.read_bytes().split(b"\n"):
        if not ln:
            if out:
                out[-1] += b"\n"
            continue
        if ln[:1] == b"\t" and out:
            out[-1] += ln + b"\n"
        else:
            out.append(ln + b"\n")
    return out


def _sources() -> list[Path]:
    files = sorted(ROOT.glob("fixtures/*/trace/*.log"))
    if PEER.is_dir():
        files += sorted(p for p in PEER.rglob("*.log") if p.stat().st_size < 4 << 20)
    return files


SOURCES = _sources()
_RECORDS: dict[Path, list[bytes]] = {}


def records_of(path: Path) -> list[bytes]:
    if path not in _RECORDS:
        _RECORDS[path] = _records(path)
    return _RECORDS[path]


# ------------------------------------------------------------------------- mutations

ODD_VALUES = [
    True, False, None, 1.5, -1, 2**70, -(2**70), "3", "x", [], [1, "a"], {}, {"": None},
    float("nan"), float("inf"), float("-inf"), "\ud800", 1e30,
]
FIELDS = ["rank", "frame_id", "frame_compile_id", "attempt", "compiled_autograd_id", "has_payload"]
# the metadata fields the table builders read (parsers/compiles.py, facts.py, graphs.py)
META_FIELDS = [
    "name", "stack", "encoding", "filename", "line", "user_stack", "sizes", "co_name",
    "co_filename", "co_firstlineno", "compile_id", "fail_reason", "fail_type",
    "fail_user_frame_filename", "fail_user_frame_lineno", "recompile_reason", "restart_reasons",
    "dynamo_config", "start_time", "start_time_us", "duration_us", "entire_frame_compile_time_s",
    "backend_compile_time_s", "inductor_compile_time_s", "code_gen_time_s", "guard_count",
    "shape_env_guard_count", "graph_op_count", "graph_node_count", "graph_input_count",
    "cache_size", "accumulated_cache_size", "has_guarded_code", "automatic_dynamic_shapes", "config_suppress_errors",
    "assume_static_by_default",
]


def _stacks(obj: dict, kind: str) -> list[list[dict]]:
    """The stacks of a decoded header whose frames are objects."""
    where = [obj[kind].get(k) for k in ("stack", "user_stack")] if isinstance(obj[kind], dict) else []
    where.append(obj.get("stack"))
    return [s for s in where if isinstance(s, list) and s and all(isinstance(f, dict) for f in s)]


def _odd_json(header: bytes, rnd: random.Random) -> bytes:
    """The header with a known field given a value of an odd type (json.dumps writes it)."""
    m = GLOG.match(header)
    if not m:
        return header
    try:
        obj = json.loads(header[m.end() :])
    except ValueError:
        return header
    if not isinstance(obj, dict) or not obj:
        return header
    value = rnd.choice(ODD_VALUES)
    kind = next(iter(obj))
    where = rnd.randrange(4)
    if where == 0:
        obj[rnd.choice(FIELDS)] = value
    elif where == 1 and isinstance(obj[kind], dict):
        obj[kind][rnd.choice(META_FIELDS)] = value
    elif where == 2 and _stacks(obj, kind):
        # a stack frame (dynamo_start, create_*symbol, specializations, an envelope's own
        # stack): a field of an odd type, or none (issue 39: a float filename ended the run)
        stack = rnd.choice(_stacks(obj, kind))
        frame = stack[rnd.randrange(len(stack))]
        field = rnd.choice(["line", "name", "filename", "loc"])
        if rnd.random() < 0.2:
            frame.pop(field, None)
        else:
            frame[field] = value
    else:
        obj[kind] = value  # the event's metadata itself
    return header[: m.end()] + json.dumps(obj).encode("utf-8", "surrogatepass")


def _mutate_lines(text: bytes, op: str, rnd: random.Random) -> bytes:
    lines = text.split(b"\n")
    if len(lines) < 2:
        return text
    i = rnd.randrange(len(lines))
    if op == "delete_line":
        del lines[i]
    elif op == "swap_lines":
        j = rnd.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "odd_json":
        heads = [k for k, ln in enumerate(lines) if ln[:1] not in (b"\t", b"")]
        if heads:
            k = rnd.choice(heads)
            lines[k] = _odd_json(lines[k], rnd)
    elif op == "nan_json":
        heads = [k for k, ln in enumerate(lines) if ln.endswith(b"}") and ln[:1] != b"\t"]
        if heads:
            k = rnd.choice(heads)
            extra = rnd.choice([b', "x": NaN}', b', "x": Infinity}', b', "x": -Infinity}', b', "x": "\\ud800"}'])
            lines[k] = lines[k][:-1] + extra
    elif op == "partial_crlf":
        lines[i] += b"\r"
    return b"\n".join(lines)


def _mutate_bytes(text: bytes, op: str, rnd: random.Random) -> bytes:
    if not text:
        return text
    i = rnd.randrange(len(text) + 1)
    if op == "flip":
        j = min(i, len(text) - 1)
        return text[:j] + bytes([text[j] ^ (1 << rnd.randrange(8))]) + text[j + 1 :]
    if op == "nul":
        return text[:i] + b"\x00" * rnd.randint(1, 3) + text[i:]
    if op == "bad_utf8":
        return text[:i] + rnd.choice([b"\xff", b"\xc3\x28", b"\x80", b"\xed\xa0\x80", b"\xe2\x82"]) + text[i:]
    if op == "cut_anywhere":
        return text[:i]
    return text


BYTE_OPS = ["flip", "nul", "bad_utf8", "cut_anywhere"]
LINE_OPS = ["delete_line", "swap_lines", "odd_json", "nan_json", "partial_crlf"]


@dataclass
class Case:
    text: bytes  # the trace's text after damage (before compression)
    file_bytes: bytes  # what is written to disk
    gz: bool
    gz_damaged: bool
    what: list[str]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    src = draw(st.sampled_from(SOURCES))
    recs = records_of(src)
    start = draw(st.integers(0, max(len(recs) - 1, 0)))
    count = draw(st.integers(1, 40))
    window = recs[start : start + count]
    # truncation at a record boundary (any of them)
    keep = draw(st.integers(0, len(window)))
    what = [f"{src.name}[{start}:{start + count}]", f"records {keep}"]
    text = b"".join(window[:keep])
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    for op in draw(st.lists(st.sampled_from(BYTE_OPS + LINE_OPS + ["crlf", "none"]), max_size=3)):
        what.append(op)
        if op in BYTE_OPS:
            text = _mutate_bytes(text, op, rnd)
        elif op in LINE_OPS:
            text = _mutate_lines(text, op, rnd)
        elif op == "crlf":
            text = text.replace(b"\n", b"\r\n")
    gz = draw(st.booleans()) and draw(st.booleans())  # a quarter of the cases
    data = text
    gz_damaged = False
    if gz:
        data = gzip.compress(text, compresslevel=rnd.choice([1, 6, 9]))
        how = draw(st.sampled_from(["whole", "cut", "flip", "concat", "trailing_zeros", "garbage"]))
        what.append(f"gzip {how}")
        if how == "cut":
            data = data[: rnd.randrange(len(data))]
        elif how == "flip":
            i = rnd.randrange(10, len(data)) if len(data) > 10 else 0
            data = data[:i] + bytes([data[i] ^ 0x55]) + data[i + 1 :]
        elif how == "concat":
            data += gzip.compress(b"".join(window[keep:]))
        elif how == "trailing_zeros":
            data += b"\x00" * 8
        elif how == "garbage":
            data += b"not gzip"
        if how == "concat":
            text += b"".join(window[keep:])
        decoded, gz_damaged = gunzip_readable(data)
        text = decoded
    return Case(text=text, file_bytes=data, gz=gz, gz_damaged=gz_damaged, what=what)


# ------------------------------------------------------------------------- the checks

BUILDERS = (
    "compiles", "spans", "recompiles", "graph_breaks", "guards", "limit_hits", "annotations",
    "graphs", "graph_nodes", "kernels", "kernel_calls", "provenance", "seq_links",
)


def check_trace(t: traceview.Trace, files: dict[str, Expected], gz_damaged: dict[str, bool]) -> None:
    """Every intact envelope is in events (and nothing else is), every broken record line
    is in problems, the derived tables and the report are built."""
    ev = t.events
    probs = t.problems
    for name, exp in files.items():
        got = sorted(ev.filter(pl.col("file") == name)["lineno"].to_list())
        if gz_damaged.get(name):
            # the record at the damage may be decoded a few bytes longer or shorter: all
            # others must be there
            assert set(exp.intact[:-1]) <= set(got), (name, exp.intact, got)
            assert "gzip_damaged" in probs.filter(pl.col("file") == name)["problem"].to_list()
        else:
            assert got == exp.intact, (name, exp.intact, got)
            problem_lines = set(probs.filter(pl.col("file") == name)["lineno"].to_list())
            missing = [x for x in exp.broken if x not in problem_lines]
            assert not missing, (name, missing)
    for table in BUILDERS:
        t.table(table)
    report = build_report(t)
    render_text(report, width=100)
    orjson.dumps(report)  # what `summary --json` writes (a rank beyond 64 bits failed here)


def load_and_check(tmp: Path, case: Case, *, second: bool) -> None:
    name = "dedicated_log_torch_trace_fuzz.log" + (".gz" if case.gz else "")
    path = tmp / name
    path.write_bytes(case.file_bytes)
    files = {}
    damaged = {}
    if case.text.strip() or case.gz:
        files[str(path)] = count_envelopes(case.text)
        damaged[str(path)] = case.gz_damaged
    if second:  # an intact real file beside it: damage in one file never costs the other
        other = tmp / "dedicated_log_torch_trace_rank_1_other.log"
        other.write_bytes(b"".join(records_of(SOURCES[0])[:30]))
        files[str(other)] = count_envelopes(other.read_bytes())
    target = tmp if second else path
    try:
        t = traceview.load(target, jobs=1)
    except traceview_input_error() as exc:
        # a single file with nothing readable may be refused, with one line naming it
        assert not second, exc
        assert str(path) in str(exc)
        assert not any(e.intact for e in files.values()), (str(exc), case.what)
        return
    check_trace(t, {k: v for k, v in files.items() if k in set(t.stats["file"].to_list()) or v.intact}, damaged)


def traceview_input_error() -> type[Exception]:
    from parsers.discover import InputError

    return InputError


@pytest.mark.e2e
@PROFILE
@given(case=cases(), second=st.booleans())
def test_mutated_real_traces(tmp_path_factory: pytest.TempPathFactory, case: Case, second: bool) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    load_and_check(tmp, case, second=second)


@pytest.mark.e2e
def test_truncation_at_every_record_boundary() -> None:
    """One real file cut after each of its records (and one byte into the next): the parse
    keeps exactly the records before the cut (the table builders run on every cut)."""
    from parsers import facts
    from parsers.compiles import build_compiles, build_spans

    src = ROOT / "fixtures" / "recompiles" / "trace"
    path = next(src.glob("*.log"))
    recs = records_of(path)
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"traceview-cut-{os.getpid()}.log"
    try:
        for k in range(len(recs) + 1):
            for extra in (b"", recs[k][:1] if k < len(recs) else b""):
                text = b"".join(recs[:k]) + extra
                tmp.write_bytes(text)
                parsed = read_trace_files([str(tmp)], lazy=True)
                exp = count_envelopes(text)
                assert parsed.events["lineno"].to_list() == exp.intact, k
                compiles = build_compiles(parsed.events, parsed.strings)
                build_spans(parsed.events, parsed.chromium)
                facts.recompiles_from_trace(parsed.events, compiles)
                facts.graph_breaks_from_trace(parsed.events)
    finally:
        tmp.unlink(missing_ok=True)


@pytest.mark.e2e
def test_odd_value_in_every_field_the_builders_read(tmp_path: Path) -> None:
    """Each metadata field the table builders read, and each context field, on a real record
    that has it, given values of odd types: the envelope is kept and every table and the
    report are built. (A sweep of every value on every record kind found the crashes this
    guards against; this is its fast part.)"""
    from parsers.textlog import LOG_RECORDS_SCHEMA, OTHER_LINES_SCHEMA
    from parsers.torch_trace import read_trace_file

    values = [True, [1, "a"], {"": None}]  # not iterable, not hashable, not a list (2**70: test_bad_input)
    checked = 0
    seen: set[tuple[str, str]] = set()
    for src in ("recompiles", "backend_error", "training"):
        path = next((ROOT / "fixtures" / src / "trace").glob("*.log"))
        recs = records_of(path)
        for i, rec in enumerate(recs):
            head, _, rest = rec.partition(b"\n")
            m = GLOG.match(head)
            obj = json.loads(head[m.end() :]) if m else None
            if not isinstance(obj, dict) or not obj:
                continue
            kind = next(iter(obj))
            meta = obj[kind] if isinstance(obj[kind], dict) else {}
            fields = [f for f in META_FIELDS if f in meta] + [f for f in FIELDS if f in obj]
            for field in fields:
                if (kind, field) in seen:
                    continue
                seen.add((kind, field))
                for value in values:
                    changed = json.loads(head[m.end() :])
                    (changed[kind] if field in meta else changed)[field] = value
                    new = head[: m.end()] + json.dumps(changed).encode() + b"\n" + rest
                    f = tmp_path / "dedicated_log_torch_trace_x.log"
                    # the record among its neighbours (a compile's other records)
                    f.write_bytes(b"".join(recs[max(i - 40, 0) : i]) + new + b"".join(recs[i + 1 : i + 40]))
                    p = read_trace_file(f)
                    assert p.events.height == len(count_envelopes(f.read_bytes()).intact), (kind, field, value)
                    t = traceview.Trace(
                        {
                            "events": p.events, "strings": p.strings, "stats": p.stats, "problems": p.problems,
                            "log_records": pl.DataFrame(schema=LOG_RECORDS_SCHEMA),
                            "other_lines": pl.DataFrame(schema=OTHER_LINES_SCHEMA),
                        }
                    )
                    for table in BUILDERS:
                        t.table(table)
                    orjson.dumps(build_report(t))
                    checked += 1
    assert checked > 150


def test_damaged_stack_frame_in_every_record_kind_that_has_one(tmp_path: Path) -> None:
    """Issue 39: a stack frame whose `filename` a damaged record holds as a float or a list
    ended `summary` with "internal error". Every record kind of the corpus fixtures that
    carries a stack (once per kind and stack), each frame field given a float, a list, or
    removed: the envelope is kept, every table and the report are built, and a damaged
    filename or line is a `bad_field` problem at the record's line."""
    from parsers.textlog import LOG_RECORDS_SCHEMA, OTHER_LINES_SCHEMA
    from parsers.torch_trace import read_trace_file

    seen: set[tuple[str, str]] = set()
    checked = 0
    for path in sorted(ROOT.glob("fixtures/corpus/*/trace/*.log")):
        recs = records_of(path)
        for i, rec in enumerate(recs):
            head, _, rest = rec.partition(b"\n")
            m = GLOG.match(head)
            obj = json.loads(head[m.end() :]) if m else None
            if not isinstance(obj, dict) or not obj:
                continue
            kind = next(iter(obj))
            for key in ("stack", "user_stack", "envelope"):
                if (kind, key) in seen:
                    continue
                holder = obj if key == "envelope" else obj[kind] if isinstance(obj[kind], dict) else {}
                stack = holder.get("stack" if key == "envelope" else key)
                if not (isinstance(stack, list) and stack and all(isinstance(f, dict) for f in stack)):
                    continue
                seen.add((kind, key))
                for field in ("filename", "line", "name", "loc"):
                    for value in (1.5, [1, "a"], "drop"):
                        changed = json.loads(head[m.end() :])
                        h = changed if key == "envelope" else changed[kind]
                        for fr in h["stack" if key == "envelope" else key]:
                            if value == "drop":
                                fr.pop(field, None)
                            else:
                                fr[field] = value
                        new = head[: m.end()] + json.dumps(changed).encode() + b"\n" + rest
                        f = tmp_path / "dedicated_log_torch_trace_x.log"
                        f.write_bytes(b"".join(recs[max(i - 60, 0) : i]) + new + b"".join(recs[i + 1 : i + 60]))
                        p = read_trace_file(f)
                        assert p.events.height == len(count_envelopes(f.read_bytes()).intact), (kind, key, field, value)
                        lineno = 1 + sum(r.count(b"\n") for r in recs[max(i - 60, 0) : i])
                        bad = p.problems.filter((pl.col("problem") == "bad_field") & (pl.col("lineno") == lineno))
                        assert bad.height == (0 if value == "drop" and field in ("name", "loc") else 1), (kind, key, field, value)
                        t = traceview.Trace(
                            {
                                "events": p.events, "strings": p.strings, "stats": p.stats, "problems": p.problems,
                                "log_records": pl.DataFrame(schema=LOG_RECORDS_SCHEMA),
                                "other_lines": pl.DataFrame(schema=OTHER_LINES_SCHEMA),
                            }
                        )
                        for table in BUILDERS:
                            t.table(table)
                        render_text(build_report(t), width=100)
                        checked += 1
    # dynamo_start, create_symbol, create_unbacked_symbol, symbolic_shape_specialization,
    # guard_added_fast (stack and user_stack), a strict export's envelope stacks
    assert {k for k, _ in seen} >= {"dynamo_start", "create_symbol", "create_unbacked_symbol",
                                   "symbolic_shape_specialization", "guard_added_fast"}, seen
    assert checked >= 12 * len(seen)
