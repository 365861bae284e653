"""parsers.compile_ids: one CompileId type, parsed and written in one place (issue 38.1)."""

from __future__ import annotations

import polars as pl
import pytest

import traceview
from parsers.compile_ids import CompileId, parse, typed, with_labels
from tests.conftest import FIXTURES


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("1/0", CompileId(1, 0)),
        ("[1/0]", CompileId(1, 0)),
        (" [1/0] ", CompileId(1, 0)),
        ("0/0_1", CompileId(0, 0, attempt=1)),
        ("[0/0_1]", CompileId(0, 0, attempt=1)),
        ("!0/1/0", CompileId(1, 0, compiled_autograd=0)),
        ("[!0]", CompileId(None, None, compiled_autograd=0)),
        ("0/0 #2", CompileId(0, 0, occurrence=2)),
        ("[0/0_1 #2]", CompileId(0, 0, attempt=1, occurrence=2)),
    ],
)
def test_every_form_a_user_copies_from_a_view(text: str, want: CompileId) -> None:
    assert parse(text) == want
    assert parse(want.label) == want  # written and read back by the same type


def test_label_is_what_the_summary_prints() -> None:
    assert [parse(t).label for t in ("[0/0]", "0/0_1", "0/0 #1", "[0/0_1 #2]", "!0/1/0")] == [
        "0/0", "0/0_1", "0/0", "0/0_1 #2", "!0/1/0"
    ]
    assert parse("3/2").previous() == CompileId(3, 1) and parse("3/0").previous() is None


@pytest.mark.parametrize("text", ["zero", "1/", "0/0 #", "1/0/2/3", "0/0_", ""])
def test_what_is_not_a_compile_id_says_what_is(text: str) -> None:
    assert parse(text) is None
    with pytest.raises(ValueError, match=r"is not a compile id \(expected e\.g\. 1/0, \[1/0\], 0/0_1"):
        typed(text)


def test_selects_one_compile_of_a_table_by_id_and_occurrence() -> None:
    c = traceview.load(FIXTURES / "corpus" / "reset_unequal_models").compiles
    assert c.filter(typed("[0/0]").selects()).height == 2  # both compiles named 0/0
    [row] = c.filter(typed("0/0 #2").selects()).rows(named=True)
    assert row["occurrence"] == 2
    assert c.filter(typed("0/0_1").selects())["occurrence"].to_list() == [1, 2]  # an attempt names the same id


def test_with_labels_takes_the_attempts_of_the_rows_compile() -> None:
    t = traceview.load(FIXTURES / "graph_breaks")
    rec = t.graph_break_records.select(pl.exclude("label"))
    labelled = with_labels(rec, t.compiles)
    # a trace row gets its compile's last attempt; the text log's row (no compiles row) its id
    got = sorted(set(labelled.select("source", "compile_id", "label").iter_rows()))
    assert ("trace", "0/0", "0/0_1") in got and ("text", "0/0", "0/0") in got
    assert with_labels(labelled, t.compiles) is labelled  # a label already there is kept


def test_a_compile_without_a_dynamo_frame_is_typed_as_its_name() -> None:
    # torch.export + AOTInductor, a piecewise backend's pieces: `unknown_<line>` (parsers.frameless)
    c = parse("[unknown_3013]")
    assert c is not None and c.compile_id == "unknown_3013" and c.label == "unknown_3013"
    assert parse("unknown_") is None and parse("unknown_x") is None


def test_a_compile_without_a_dynamo_frame_shares_its_group_with_no_other() -> None:
    # issue 44.7: every unknown_<line> used to group as frame "None", so the UI's Frames counted
    # a piecewise backend's run-time compiles as one code object's compiles and recompiles
    from parsers.compile_ids import frame_group

    assert frame_group("unknown_2515") == "unknown_2515" != frame_group("unknown_5489")
    assert (frame_group("3/1"), frame_group("!0/3/1")) == ("3", "!0")
