"""A damaged record costs only itself: the typed field accessors (parsers.coerce), the parse's
`bad_field` problems for the fields they read, and the readers that skip such a record.

Each case takes a REAL record (fixtures/corpus, torch 2.13) and damages a copy of its log in
the test's tmp dir: a field of the wrong type, missing, or null.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import orjson
import polars as pl
import pytest

import traceview
from parsers.coerce import (
    DamagedField,
    bool_of,
    float_of,
    int_of,
    json_object,
    list_of,
    stack_of,
    text_of,
    texts_of,
)
from traceview.analyze.compile_facts import specializations, unbacked_symbols
from traceview.output.report import build_report
from traceview.output.summary import render_text

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "fixtures" / "corpus"
MISSING = object()
_HEAD = re.compile(r"^(\S+ \S+ +\d+ \S+\] )(\{.*\})$")


def _log(name: str) -> Path:
    return next((CORPUS / name / "trace").glob("*.log"))


def _damage(tmp: Path, name: str, kind: str, change) -> tuple[Path, int]:
    """A copy of the fixture `name`'s log in `tmp` whose first `kind` record's metadata went
    through `change` (a function of the decoded metadata); the path and that record's line."""
    lines = _log(name).read_text().split("\n")
    for i, ln in enumerate(lines):
        m = _HEAD.match(ln)
        if m and f'{{"{kind}": ' in ln[: len(m[1]) + len(kind) + 6]:
            obj = json.loads(m[2])
            change(obj[kind])
            lines[i] = m[1] + json.dumps(obj)
            out = tmp / "dedicated_log_torch_trace_damaged.log"
            out.write_text("\n".join(lines))
            return out, i + 1
    raise AssertionError(f"no {kind} record in {name}")


def _set(where: list, key: str, value) -> None:
    for d in where:
        if value is MISSING:
            d.pop(key, None)
        else:
            d[key] = value


def _bad_fields(t: traceview.Trace, lineno: int) -> list[str]:
    p = t.problems.filter((pl.col("problem") == "bad_field") & (pl.col("lineno") == lineno))
    return p["detail"].to_list()


def _whole_report(t: traceview.Trace) -> dict:
    report = build_report(t)
    render_text(report, width=100)
    orjson.dumps(report)
    return report


# ------------------------------------------------------------------------ the accessors


@pytest.mark.parametrize(
    ("accessor", "good", "wrong"),
    [
        (text_of, "u0", [1.5, ["u0"], {"a": 1}, 3, True]),
        (int_of, 17, [1.5, "17", True, [17], 2**70]),
        (float_of, 1.5, ["1.5", True, [1.5], {"s": 1}]),
        (bool_of, True, [1, "true", None, [True]]),
    ],
)
def test_scalar_accessors(accessor, good, wrong) -> None:
    """The type torch writes comes back; missing (None), null and any other type are None."""
    assert accessor(good) == good
    assert accessor(None) is None
    for w in wrong:
        assert accessor(w) is None, w


def test_container_accessors() -> None:
    assert list_of([1, "a"]) == [1, "a"]
    assert list_of(None) == [] and list_of("ab") == [] and list_of({"a": 1}) == []
    assert texts_of(["a", 1, None, "b"]) == ["a", "b"]
    assert json_object('{"a": 1}') == {"a": 1}
    assert json_object("[1]") == {} and json_object("not json") == {} and json_object(None) == {}


def test_stack_of_reads_interned_names_and_refuses_damaged_frames() -> None:
    strings = {1: "/home/u/model.py"}
    frames = stack_of([{"line": 17, "name": "f", "filename": 1, "loc": "x.item()"}, {"line": 3, "name": "g", "filename": 9}], strings)
    assert [(f.filename, f.line, f.name, f.loc) for f in frames] == [("/home/u/model.py", 17, "f", "x.item()"), (None, 3, "g", None)]
    assert stack_of(None, strings) == []
    for bad in (1.5, [1.5], [{"line": 1, "filename": 1.5}], [{"line": [1], "filename": 1}], [{"line": 1}],
                [{"line": 1, "filename": 1, "name": [1, 2]}], [{"line": 1, "filename": 1, "loc": 7}]):
        with pytest.raises(DamagedField):
            stack_of(bad, strings)


# ------------------------------------------- a damaged stack frame in a real record


# (field, value, counted as a problem?, record still read?)
FRAME_CASES = [
    ("filename", 1.5, "a stack frame's filename is not a string or an interned id: 1.5", False),
    ("filename", [1, 2], "a stack frame's filename is not a string or an interned id: [1,2]", False),
    ("filename", MISSING, "a stack frame has no filename", False),
    ("filename", None, "a stack frame has no filename", False),
    ("line", "17", 'a stack frame\'s line is not an integer: "17"', False),
    ("line", MISSING, "a stack frame has no line", False),
    ("line", None, "a stack frame has no line", False),
    ("name", [1, 2], "a stack frame's name is not a string: [1,2]", False),
    ("name", MISSING, None, True),
    ("name", None, None, True),
    ("loc", 7, "a stack frame's loc is not a string: 7", False),
    ("loc", MISSING, None, True),
    ("loc", None, None, True),
]


@pytest.mark.parametrize(("field", "value", "problem", "kept"), FRAME_CASES)
@pytest.mark.parametrize("stack", ["user_stack", "stack"])
def test_damaged_frame_of_an_unbacked_symbol(tmp_path: Path, stack: str, field: str, value, problem, kept) -> None:
    """data_dependent's `create_unbacked_symbol` (u0 from `.item()` at the user's line 17):
    a frame of its stacks damaged. A wrong type (or no filename/line) is a `bad_field`
    problem at the record's line and the record is left out of the data-dependent facts; a
    missing name or loc is no problem and the record is read. The summary is whole."""
    path, lineno = _damage(tmp_path, "data_dependent", "create_unbacked_symbol", lambda m: _set(m[stack], field, value))
    t = traceview.load(path, jobs=1)
    assert _bad_fields(t, lineno) == ([f"create_unbacked_symbol {stack}: {problem}"] if problem else [])
    groups = unbacked_symbols(t)
    if kept:
        # the op is the innermost frame's name: without it, the op is not known
        op = None if (stack, field) == ("stack", "name") else "Tensor.item()"
        assert [(g["symbols"], g["user_line"], g["op"]) for g in groups] == [(["u0"], 17, op)]
    else:
        assert groups == []
    report = _whole_report(t)
    assert report["compiles"] == 1 and report["parse"]["problems"] == (1 if problem else 0)


def test_damaged_symbol_field(tmp_path: Path) -> None:
    """The symbol itself: of the wrong type a problem and no fact; missing or null no problem
    (torch always writes it: without it there is nothing to say) and no fact either."""
    for value, problem in ((1.5, ["create_unbacked_symbol symbol is not str: 1.5"]), (MISSING, []), (None, [])):
        path, lineno = _damage(tmp_path, "data_dependent", "create_unbacked_symbol", lambda m, v=value: _set([m], "symbol", v))
        t = traceview.load(path, jobs=1)
        assert _bad_fields(t, lineno) == problem
        assert unbacked_symbols(t) == []
        _whole_report(t)


def test_damaged_value_range_loses_only_the_field(tmp_path: Path) -> None:
    path, lineno = _damage(tmp_path, "data_dependent", "create_unbacked_symbol", lambda m: _set([m], "vr", ["-oo", "oo"]))
    t = traceview.load(path, jobs=1)
    assert _bad_fields(t, lineno) == ['create_unbacked_symbol vr is not str: ["-oo","oo"]']
    assert [(g["symbols"], g["user_line"], g["vr"]) for g in unbacked_symbols(t)] == [(["u0"], 17, None)]


@pytest.mark.parametrize(("value", "problem"), [(1.5, True), ([1, 2], True), (MISSING, True), (None, True)])
def test_damaged_frame_of_a_specialization(tmp_path: Path, value, problem: bool) -> None:
    """constraint_violation's `symbolic_shape_specialization` (s77 fixed at the user's line
    14; the crash the fuzzer found: `re.search` on a float filename): its user frame's
    filename damaged; the record is skipped and counted, the rest of the report is whole."""
    path, lineno = _damage(
        tmp_path, "constraint_violation", "symbolic_shape_specialization", lambda m: _set(m["user_stack"], "filename", value)
    )
    t = traceview.load(path, jobs=1)
    assert len(_bad_fields(t, lineno)) == 1
    assert specializations(t) == []
    _whole_report(t)


def test_damaged_dynamo_start_stack_keeps_the_compile(tmp_path: Path) -> None:
    """A compile's `dynamo_start` with a damaged frame: the compile is still counted, with its
    code object from compilation_metrics; only the stack (where it was called from) is lost."""
    path, lineno = _damage(tmp_path, "data_dependent", "dynamo_start", lambda m: _set(m["stack"], "filename", 2.5))
    t = traceview.load(path, jobs=1)
    assert _bad_fields(t, lineno) == ["dynamo_start stack: a stack frame's filename is not a string or an interned id: 2.5"]
    c = t.compiles
    assert c.height == 1 and c["function"].to_list() == ["count_positive"]
    assert c["user_stack"].to_list() == [[]]


def test_summary_of_a_damaged_record_is_not_an_internal_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What fuzzing found (issue 39): `traceview summary` on a log whose one record has a
    float filename printed only "internal error". Now the summary is printed, and the INPUT
    part counts the damaged field."""
    from traceview.cli import main

    path, _ = _damage(
        tmp_path, "constraint_violation", "symbolic_shape_specialization", lambda m: _set(m["user_stack"], "filename", 1.5)
    )
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr()
    assert "internal error" not in out.out + out.err
    assert "problems: 1 bad field" in out.out
