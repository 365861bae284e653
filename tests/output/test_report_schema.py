"""`summary --json` against its checked-in JSON Schema (traceview/schemas/report.schema.json),
validated with `jsonschema` on the report of every fixture and of every shared trace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import orjson
import pytest

import traceview
from tests.conftest import FIXTURES, ROOT, SHARED, needs_shared, shared_inputs
from traceview.output.report import build_report

SCHEMA = json.loads((ROOT / "traceview" / "schemas" / "report.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
FIXTURE_DIRS = sorted(p for p in FIXTURES.iterdir() if (p / "trace").is_dir())


def _errors(report: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(report)]


def _as_printed(trace: traceview.Trace) -> dict:
    """The report as `summary --json` prints it (orjson, then parsed back)."""
    return json.loads(orjson.dumps(build_report(trace)))


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["schema_version"]["const"] == traceview.REPORT_SCHEMA_VERSION


def test_summary_json_from_the_command_line_validates() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "traceview", "summary", "--json", str(FIXTURES / "recompiles")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert _errors(report) == []
    assert report["recompiles"]  # the fixture plants a storm: the nested objects are checked


@pytest.mark.parametrize("path", FIXTURE_DIRS, ids=lambda p: p.name)
def test_every_fixture_report_validates(path: Path) -> None:
    assert _errors(_as_printed(traceview.load(path))) == []


@needs_shared
@pytest.mark.parametrize(
    "path",
    shared_inputs(non_empty=True),
    ids=lambda p: str(p.relative_to(SHARED)),
)
def test_every_shared_trace_report_validates(path: Path) -> None:
    assert _errors(_as_printed(traceview.load(path))) == []


def test_the_schema_rejects_what_the_docs_do_not_promise() -> None:
    # a key the schema does not name, a wrong type and a category outside the documented
    # ones are each caught (the schema is not a rubber stamp)
    good = _as_printed(traceview.load(FIXTURES / "backend_error"))
    assert good["failures"] and _errors(good) == []
    extra = {**good, "surprise": 1}
    assert _errors(extra) == [": Additional properties are not allowed ('surprise' was unexpected)"]
    bad_type = {**good, "compiles": "7"}
    assert _errors(bad_type) == ["compiles: '7' is not of type 'integer'"]
    bad_cat = json.loads(json.dumps(good))
    bad_cat["failures"][0]["category"] = "mystery"
    assert len(_errors(bad_cat)) == 1 and _errors(bad_cat)[0].startswith("failures/0/category: 'mystery' is not one of")
