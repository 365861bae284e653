"""Compile ids: Dynamo's names for one compile, parsed and ordered here and nowhere else.

The forms (torch/_guards.py `CompileId.__str__` and `TraceId.__str__`):

    "3/1"       frame 3 (the 4th code object Dynamo compiled in the process), its compile 1
                (the frame's second compile: one recompile)
    "3/1_2"     the same compile, analysis attempt 2 (a trace id; the `compile_id` columns
                carry no attempt, the `trace_id` columns do, in brackets)
    "!0"        compiled-autograd graph 0
    "!0/3/1"    frame 3, compile 1, compiled while compiled-autograd graph 0 ran
    "3/-"       frame 3 with no compile number in its envelope (the events table writes it)

One id is not one compile: `torch._dynamo.reset()` clears the frame counters, so the next
compile of any function is `0/0` again. A compile is one `dynamo_start … compilation_metrics`
span; its *occurrence* (1, 2, …) counts the spans of the same id in one process (file), and
`label` shows it (`0/0`, then `0/0 #2`). `occurrence_expr` is that rule for the events table;
`epoch_expr` numbers the stretches between resets (a frame id names one code object only
within one).

`label` is how every view shows a compile: its id, its last attempt when there were several
(`0/0_1`, as torch and tlparse name it), its occurrence (`0/0 #2`); the `compile_id` columns
stay without the attempt (the key every table joins on).

`CompileId.compile_id` and `with_attempt` write an id from its parts in Python;
`compile_id_expr` and `trace_id_expr` write the same strings from an events table's integer
columns (what parsers.torch_trace builds the `compile_id` and `trace_id` columns with).

`sort_key` is the one order of compile ids every table, finding and view uses: plain ids
before compiled-autograd ones, then by frame, compile number and attempt, as numbers
("10/0" after "2/0"); anything unparsable last, by its text.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

# A trace id as TORCH_LOGS prints it between brackets (parsers.textlog reads it with this).
TRACE_ID_RE = r"^(?:!(?P<ca>\d+))?/?(?:(?P<fid>\d+)/(?P<fcid>\d+))?(?:_(?P<att>\d+))?$"

_ID = re.compile(
    r"^(?:!(?P<ca>\d+))?(?:(?(ca)/)(?P<fid>\d+)/(?P<fcid>\d+|-))?(?:_(?P<att>\d+))?(?:\s*#(?P<occ>\d+))?$"
)
# a compile id inside a larger pattern of a log line (with its attempt; `parse` reads it)
ID_PATTERN = r"!?\d+(?:/\d+){0,2}(?:_\d+)?"
EXAMPLES = "1/0, [1/0], 0/0_1, [0/0_1], !0/1/0 or 0/0 #2"  # what a user may type (`typed`)


@dataclass(frozen=True)
class CompileId:
    """One parsed compile id (None where the id has no such part); `occurrence`: which compile
    of that id in its process, when the text said (`0/0 #2`, as `label` writes it)."""

    frame: int | None
    compile: int | None
    compiled_autograd: int | None = None
    attempt: int = 0
    occurrence: int | None = None
    frameless: str | None = None  # a compile without a Dynamo frame: `unknown_<line>` (parsers.frameless)

    @property
    def compile_id(self) -> str:
        """The id as the `compile_id` columns write it (no attempt)."""
        if self.frameless is not None:
            return self.frameless
        frame = "" if self.frame is None else f"{self.frame}/{'-' if self.compile is None else self.compile}"
        if self.compiled_autograd is None:
            return frame
        return f"!{self.compiled_autograd}" + (f"/{frame}" if frame else "")

    @property
    def label(self) -> str:
        """The id as every view shows it (module `label`): `0/0_1`, `0/0 #2`."""
        text = with_attempt(self.compile_id, self.attempt) or self.compile_id
        return f"{text} #{self.occurrence}" if self.occurrence is not None and self.occurrence > 1 else text

    def previous(self) -> CompileId | None:
        """The compile of the same frame before this one (`3/1` -> `3/0`); None for a first."""
        if self.compile is None or self.compile == 0:
            return None
        return CompileId(self.frame, self.compile - 1, self.compiled_autograd)

    def selects(self, compile_id: str = "compile_id", occurrence: str | None = "occurrence") -> pl.Expr:
        """A polars filter for a table's rows of this compile: its id (the attempt names the
        same compile), and its occurrence when one was given and the table has the column
        (`occurrence` None: it has not; a null occurrence counts as 1)."""
        import polars as pl

        expr = pl.col(compile_id) == self.compile_id
        if self.occurrence is not None and occurrence is not None:
            expr = expr & (pl.col(occurrence).fill_null(1) == self.occurrence)
        return expr


def with_attempt(compile_id: str | None, attempt: int | None) -> str | None:
    """The id as torch and tlparse write a trace id: the attempt after `_` when not 0
    ("0/0", 1 -> "0/0_1")."""
    if compile_id is None:
        return None
    return f"{compile_id}_{attempt}" if attempt else compile_id


def compile_id_expr(
    compiled_autograd: str = "compiled_autograd_id", frame: str = "frame_id", frame_compile: str = "frame_compile_id"
) -> pl.Expr:
    """`CompileId.compile_id` of three integer columns, as a polars expression: "3/1",
    "3/-" (a frame without a compile number), "!0", "!0/3/1"; null when there is neither a
    frame nor a compiled-autograd id. (A compiled-autograd id with a frame but no compile
    number, which torch never writes, is null here where `CompileId.compile_id` writes
    "!0/3/-": parsed tables are kept under their PARSER_VERSION, so it stays.)"""
    import polars as pl

    ca, fid, fcid = (pl.col(c).cast(pl.String) for c in (compiled_autograd, frame, frame_compile))
    return (
        pl.when(pl.col(compiled_autograd).is_not_null())
        .then(
            pl.concat_str(
                pl.lit("!"),
                ca,
                pl.when(pl.col(frame).is_not_null())
                .then(pl.concat_str(pl.lit("/"), fid, pl.lit("/"), fcid))
                .otherwise(pl.lit("")),
            )
        )
        .when(pl.col(frame).is_not_null())
        .then(pl.concat_str(fid, pl.lit("/"), fcid.fill_null("-")))
        .otherwise(None)
    )


def trace_id_expr(compile_id: str = "compile_id", attempt: str = "attempt") -> pl.Expr:
    """`with_attempt` as a polars expression, in brackets as the `trace_id` columns hold it:
    "[3/1]", "[3/1_2]" (attempt 2), "[!0/3/1]"; null without a compile id."""
    import polars as pl

    return (
        pl.when(pl.col(compile_id).is_not_null())
        .then(
            pl.concat_str(
                pl.lit("["),
                pl.col(compile_id),
                pl.when(pl.col(attempt).fill_null(0) != 0)
                .then(pl.concat_str(pl.lit("_"), pl.col(attempt).cast(pl.String)))
                .otherwise(pl.lit("")),
                pl.lit("]"),
            )
        )
    )


def label(compile_id: str | None, occurrence: int | None = None, attempts: int | None = None) -> str:
    """The id as every view shows a compile: with its last attempt after `_` when Dynamo
    restarted the analysis (`attempts`, the compiles table's count: 2 -> "0/0_1", the name
    torch's logs and tlparse give the attempt that produced the graph and the metrics;
    tlparse's folder `0_0_1`), and the occurrence after `#` when the same id names a second
    compile in one process ("0/0", 2 -> "0/0 #2": the second `0/0`, after a
    torch._dynamo.reset()). A compile of one attempt shows its id alone ("0/0")."""
    text = compile_id if compile_id is not None else "?"
    if compile_id is not None and attempts is not None and attempts > 1:
        text = with_attempt(compile_id, attempts - 1) or text
    return f"{text} #{occurrence}" if occurrence is not None and occurrence > 1 else text


def bracketed(compile_id: str | None, occurrence: int | None = None, attempts: int | None = None) -> str:
    """A compile as every sentence names it: its `label` in brackets ("[0/1]", "[0/0_1]",
    "[0/0 #2]"); the one way a finding, a view or a live line writes a compile reference."""
    return f"[{label(compile_id, occurrence, attempts)}]"


def label_expr(compile_id: str = "compile_id", occurrence: str | None = "occurrence", attempts: str | None = None) -> pl.Expr:
    """`label` as a polars expression over a table's compile id, occurrence and (the compiles
    table's) attempts columns: "0/0", "0/0_1", "0/0 #2" (`occurrence`/`attempts` None: the
    table has no such column)."""
    import polars as pl

    text = pl.col(compile_id)
    if attempts is not None:
        text = (
            pl.when(pl.col(attempts).fill_null(1) > 1)
            .then(pl.concat_str(text, pl.lit("_"), (pl.col(attempts) - 1).cast(pl.String)))
            .otherwise(text)
        )
    if occurrence is None:
        return text
    return (
        pl.when(pl.col(occurrence).fill_null(1) > 1)
        .then(pl.concat_str(text, pl.lit(" #"), pl.col(occurrence).cast(pl.String)))
        .otherwise(text)
    )


def with_labels(df: pl.DataFrame, compiles: pl.DataFrame) -> pl.DataFrame:
    """`df` with a `label` column: each row's compile as every view prints it (`label`: the
    id, its compile's last attempt when Dynamo restarted it, its occurrence), next to its
    `compile_id` (the key tables join on, never with the attempt). The attempts are the
    `compiles` row's of the same file, id and occurrence (a table without occurrence: of the
    id's first compile in that file); a row of a text log, which has no compiles row, shows
    its id and occurrence. Unchanged: a table without compile_id, or with a label already."""
    import polars as pl

    if "compile_id" not in df.columns or "label" in df.columns:
        return df
    occ = "occurrence" if "occurrence" in df.columns else None
    if "attempts" in df.columns:  # the compiles table itself
        return df.with_columns(label_expr(occurrence=occ, attempts="attempts").alias("label"))
    if "file" not in df.columns or compiles.height == 0:
        return df.with_columns(label_expr(occurrence=occ).alias("label"))
    att = compiles.select(
        pl.col("file").cast(pl.String).alias("_f"),
        pl.col("compile_id").cast(pl.String).alias("_c"),
        pl.col("occurrence").fill_null(1).cast(pl.Int32).alias("_o"),
        pl.col("attempts").alias("_attempts"),
    )
    keys = ["_f", "_c", "_o"]
    if occ is None:
        att = att.filter(pl.col("_o") == 1).drop("_o")
        keys = ["_f", "_c"]
    mine = df.select(
        pl.col("file").cast(pl.String).alias("_f"),
        pl.col("compile_id").cast(pl.String).alias("_c"),
        *([pl.col(occ).fill_null(1).cast(pl.Int32).alias("_o")] if occ else []),
        pl.col("compile_id"),
        *([pl.col(occ)] if occ else []),
    )
    got = mine.join(att.unique(keys, keep="first"), on=keys, how="left", maintain_order="left")
    return df.with_columns(got.select(label_expr(occurrence=occ, attempts="_attempts").alias("label")).to_series())


def occurrence_expr(
    kind: str = "kind", group: tuple[str, ...] = ("file", "compile_id"), order: str = "lineno"
) -> object:
    """Which occurrence of its compile id an event belongs to (a polars expression over the
    events table, 1 for the first): a `dynamo_start` that comes after a `compilation_metrics`
    of the same id in the same file opens the next one (an attempt's restart has no metrics
    before it, so it stays in its compile). Events before the first `dynamo_start` belong to
    occurrence 1; the ones after a `compilation_metrics` (backward, runtime) to the compile
    it closed."""
    import polars as pl

    closed = (pl.col(kind) == "compilation_metrics").cast(pl.Int32)
    closed_before = closed.cum_sum().over(list(group), order_by=order) - closed
    opened = pl.when(pl.col(kind) == "dynamo_start").then(closed_before).otherwise(None)
    return (opened.forward_fill().over(list(group), order_by=order).fill_null(0) + 1).cast(pl.Int32)


OPENS_AND_CLOSES = ("dynamo_start", "compilation_metrics")  # the records occurrence_expr reads


def occurrence_at(rows: pl.DataFrame, events: pl.DataFrame, *, at: str = "lineno", prelude: bool = False) -> pl.Series:
    """`occurrence_expr` for rows derived from a trace (a span, a graph-break artifact, a
    graph dump): the occurrence of the row's compile id at its place in its file, line `at`
    (for a span the line of its end: a compile's first phases begin just before its
    `dynamo_start`). Reads the `dynamo_start` and `compilation_metrics` records of `events`
    (file, compile_id, lineno, kind). One Int32 per row of `rows`, in their order; null
    where a row has no compile id. The evidence is the log order only: a row logged after
    a compile's metrics (a backward, a runtime record) goes to the compile it closed, also
    when it really belongs to an earlier compile of the same id. `prelude`: the rows are
    logged before their compile's `dynamo_start` (the `recompile_reasons` artifact): each
    belongs to the compile after the ones of its id closed before it."""
    import polars as pl

    markers = events.filter(pl.col("kind").is_in(OPENS_AND_CLOSES) & pl.col("compile_id").is_not_null()).select(
        pl.col("file").cast(pl.String),
        pl.col("compile_id").cast(pl.String),
        pl.col("lineno").cast(pl.Int64),
        pl.col("kind").cast(pl.String),
        pl.lit(None, dtype=pl.Int64).alias("_row"),
    )
    mine = rows.select(
        pl.col("file").cast(pl.String),
        pl.col("compile_id").cast(pl.String),
        pl.col(at).cast(pl.Int64).alias("lineno"),
        pl.lit("", dtype=pl.String).alias("kind"),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
    )
    both = pl.concat([markers, mine]).with_columns(
        # a row on a marker's line (none in torch's logs) comes after it
        (pl.col("lineno").fill_null(0) * 2 + pl.col("_row").is_not_null().cast(pl.Int64)).alias("_order")
    )
    if prelude:
        closed = (pl.col("kind") == "compilation_metrics").cast(pl.Int32)
        occurrence = (closed.cum_sum().over(["file", "compile_id"], order_by="_order") + 1).cast(pl.Int32)
    else:
        occurrence = occurrence_expr(order="_order")
    out = (
        both.with_columns(occurrence.alias("occurrence"))
        .filter(pl.col("_row").is_not_null())
        .sort("_row")
        .select(pl.when(pl.col("compile_id").is_not_null()).then(pl.col("occurrence")).alias("occurrence"))
    )
    return out.to_series().cast(pl.Int32)


def epoch_expr(occurrence: str = "occurrence", group: tuple[str, ...] = ("file", "rank"), order: str = "lineno") -> object:
    """Which stretch between two `torch._dynamo.reset()` calls a compile (or a text log record)
    belongs to, 1 before the first reset (a polars expression over rows that carry their
    `occurrence`). reset() restarts frame ids at 0, so the first compile after it has an id
    the process used before (occurrence 2, then 3 after the next reset): the epoch is the
    running maximum of the occurrence in log order, per process (file and rank: one text log
    may hold the records of several ranks). Frame ids name a code object only within an epoch:
    frame 0 before a reset and frame 0 after it may be different functions."""
    import polars as pl

    return pl.col(occurrence).cum_max().over(list(group), order_by=order).cast(pl.Int32)


TEXT_START = "Step 1: torchdynamo start tracing "  # symbolic_convert.py, TORCH_LOGS=dynamo


def text_occurrence_expr(
    text: str = "text",
    attempt: str = "attempt",
    group: tuple[str, ...] = ("file", "rank", "compile_id"),
    order: str = "lineno",
) -> object:
    """`occurrence_expr` for a text log's records: a `Step 1: torchdynamo start tracing`
    record of attempt 0 for an id that already had one opens the next occurrence (a restart
    logs it again as `[0/0_1]`, attempt 1), counted per rank (a text log of a torchrun job
    holds every rank's records, each rank's `[0/0]` its own). Without TORCH_LOGS=dynamo there
    is no such line and every record is occurrence 1."""
    import polars as pl

    start = (pl.col(text).str.starts_with(TEXT_START) & (pl.col(attempt).fill_null(0) == 0)).cast(pl.Int32)
    return pl.max_horizontal(start.cum_sum().over(list(group), order_by=order), pl.lit(1)).cast(pl.Int32)


def text_occurrence_at(rows: pl.DataFrame, records: pl.DataFrame | None) -> pl.Series:
    """`text_occurrence_expr` for rows derived from a text log's records: the occurrence of
    the record the row was read from (`rows` and `records` joined on file and lineno: the
    record's first line). One Int32 per row, in their order; 1 where no record matches (or
    there are no records), null where a row has no compile id."""
    import polars as pl

    need = {"file", "lineno", "rank", "compile_id", "text", "attempt"}
    if records is None or records.height == 0 or not need <= set(records.columns):
        occ = pl.DataFrame(schema={"file": pl.String, "lineno": pl.Int64, "occurrence": pl.Int32})
    else:
        occ = records.select(
            pl.col("file").cast(pl.String),
            pl.col("lineno").cast(pl.Int64),
            text_occurrence_expr().alias("occurrence"),
        ).unique(["file", "lineno"], keep="first")
    out = rows.select(
        pl.col("file").cast(pl.String), pl.col("lineno").cast(pl.Int64), pl.col("compile_id").is_not_null().alias("_id")
    ).join(occ, on=["file", "lineno"], how="left", maintain_order="left")
    return out.select(pl.when(pl.col("_id")).then(pl.col("occurrence").fill_null(1))).to_series().cast(pl.Int32).alias("occurrence")


@functools.lru_cache(maxsize=1 << 16)
def parse(text: str | None) -> CompileId | None:
    """The parts of a compile id, trace id or label (`1/0`, `[1/0]`, `0/0_1`, `[0/0_1]`,
    `!0/1/0`, `0/0 #2`, `[0/0_1 #2]`, `unknown_3013`); None when it is not one. Kept per
    text (a CompileId is frozen): a report on thousands of ranks reads the same few ids
    tens of thousands of times."""
    if not text:
        return None
    bare = text.strip().removeprefix("[").removesuffix("]").strip()
    if re.fullmatch(r"unknown_\d+", bare):  # a compile without a Dynamo frame, named as tlparse names it
        return CompileId(None, None, frameless=bare)
    m = _ID.match(bare)
    if m is None or (m["ca"] is None and m["fid"] is None):
        return None

    def num(s: str | None) -> int | None:
        return int(s) if s is not None and s != "-" else None

    return CompileId(num(m["fid"]), num(m["fcid"]), num(m["ca"]), int(m["att"] or 0), num(m["occ"]))


def typed(text: str) -> CompileId:
    """A compile id a user typed (a command's --compile-id, the UI's go-to): `parse`, with
    ValueError saying what is accepted when `text` is not one."""
    c = parse(text)
    if c is None:
        raise ValueError(f"{text!r} is not a compile id (expected e.g. {EXAMPLES})")
    return c


def without_attempt_expr(column: str) -> pl.Expr:
    """A trace id's text without its attempt ("0/0_1" -> "0/0"), as a polars expression."""
    import polars as pl

    return pl.col(column).str.replace(r"_\d+$", "")


def sort_key(text: str | None) -> tuple:
    """The order of compile ids (see the module doc); usable as `sorted(ids, key=sort_key)`."""
    c = parse(text)
    if c is None:
        return (2, -1, -1, -1, 0, text or "")
    return (
        0 if c.compiled_autograd is None else 1,
        -1 if c.compiled_autograd is None else c.compiled_autograd,
        -1 if c.frame is None else c.frame,
        -1 if c.compile is None else c.compile,
        c.attempt,
        "",
    )


def frame_of(text: str | None) -> int | None:
    """The frame id of a compile id ("!0/3/1" -> 3; a compiled-autograd graph alone has none)."""
    c = parse(text)
    return None if c is None else c.frame


def compile_number(text: str | None) -> int | None:
    """Which compile of its frame this is, from 0 ("3/2" -> 2: the frame's third compile)."""
    c = parse(text)
    return None if c is None else c.compile


def frame_group(text: str | None) -> str:
    """What the UI groups a compile under: its frame id, or `!N` for the compiles of
    compiled-autograd graph N ("3/1" -> "3", "!0/3/1" -> "!0"); a compile without a Dynamo
    frame has no code object to share with another: its own id ("unknown_2515")."""
    c = parse(text)
    if c is None:
        return text or ""
    if c.frameless:
        return c.frameless
    if c.compiled_autograd is not None:
        return f"!{c.compiled_autograd}"
    return str(c.frame)


# sort_key for polars: the same order, as sort columns (Rust's regex has no conditionals)
_ID_COLUMNS = r"^\[?(?:!(?P<ca>\d+))?/?(?:(?P<fid>\d+)/(?P<fcid>\d+|-))?(?:_(?P<att>\d+))?\]?$"


def sort_exprs(column: str = "compile_id") -> list:
    """`sort_key` of a string column as expressions for `DataFrame.sort` (same order)."""
    import polars as pl

    parts = pl.col(column).str.extract_groups(_ID_COLUMNS)
    ca = parts.struct.field("ca").cast(pl.Int64)
    fid = parts.struct.field("fid").cast(pl.Int64)
    parsed = ca.is_not_null() | fid.is_not_null()
    return [
        pl.when(~parsed.fill_null(False)).then(2).when(ca.is_not_null()).then(1).otherwise(0),
        ca.fill_null(-1),
        fid.fill_null(-1),
        parts.struct.field("fcid").cast(pl.Int64, strict=False).fill_null(-1),
        parts.struct.field("att").cast(pl.Int64).fill_null(0),
        pl.when(parsed.fill_null(False)).then(pl.lit("")).otherwise(pl.col(column).fill_null("")),
    ]


# ---------------------------------------------------------------- compiles without a Dynamo frame
# torch.export + AOTInductor, a backend calling Inductor itself: named `unknown_<line>` as tlparse
# names them (parsers.frameless finds them)
FRAMELESS_PREFIX = "unknown_"
KIND_LABELS = {
    "dynamo": "Dynamo compile",
    "aot_inductor": "AOTInductor compile",
    "inductor": "Inductor compile without a Dynamo frame",
}


def is_frameless(compile_id: str | None) -> bool:
    """Whether a compile id names a compile without a Dynamo frame (`unknown_<L>`)."""
    return bool(compile_id) and str(compile_id).startswith(FRAMELESS_PREFIX)


def kind_label(compile_kind: str | None) -> str:
    """What a compile was, in words ("AOTInductor compile")."""
    return KIND_LABELS.get(compile_kind or "dynamo", compile_kind or "compile")


def compile_name(row: dict) -> str:
    """What a compiles row is called in every view: its function, or what a compile without a
    Dynamo frame was ("AOTInductor compile"); "?" when neither is known."""
    if not row.get("function") and row.get("compile_kind") not in (None, "dynamo"):
        return kind_label(row["compile_kind"])
    return row.get("function") or "?"


