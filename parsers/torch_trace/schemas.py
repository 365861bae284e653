"""The schemas of the tables a TORCH_TRACE log is parsed into (`events`, `strings`,
`stats`, `problems`; `chromium` and the payload ranges of a lazy parse)."""

from __future__ import annotations

import polars as pl

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
CHROMIUM_FIELDS = ("name", "cat", "ph", "ts", "dur", "args_compile_id")
