"""What is wrong with a trace file, as rows of the `problems` table: collected line by line
while a file is scanned (`Problems`), then one frame per file."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from parsers.torch_trace.schemas import PROBLEMS_SCHEMA


@dataclass
class Problems:
    """The problems of one file (or piece) found while it is scanned, one per line that has one
    (a detail is cut at 200 characters)."""

    linenos: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    def add(self, lineno: int, kind: str, detail: str) -> None:
        self.linenos.append(lineno)
        self.kinds.append(kind)
        self.details.append(detail[:200])


def problem_frame(file: str, problems: Problems) -> pl.DataFrame:
    """The `problems` table rows of `problems` (PROBLEMS_SCHEMA)."""
    return pl.DataFrame(
        {
            "file": [file] * len(problems.linenos),
            "lineno": problems.linenos,
            "problem": problems.kinds,
            "detail": problems.details,
        },
        schema=PROBLEMS_SCHEMA,
    )


def with_problem(problems: pl.DataFrame, file: str, lineno: int, kind: str, detail: str) -> pl.DataFrame:
    """`problems` and one more row."""
    row = pl.DataFrame({"file": [file], "lineno": [lineno], "problem": [kind], "detail": [detail]}, schema=PROBLEMS_SCHEMA)
    return pl.concat([problems, row])


def file_changed(problems: pl.DataFrame, file: str, lines: int, expected: int, got: int) -> pl.DataFrame:
    """`problems` and one more: the file was shorter when read than when its size was taken
    (a log still being written, or rotated): what was read is parsed, the rest is missing."""
    detail = f"the file changed while it was read: {expected} bytes expected, {got} read"
    return with_problem(problems, file, lines, "file_changed", detail)
