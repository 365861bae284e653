"""TORCH_TRACE log files -> the `events`, `strings`, `stats` and `problems` tables.

The file is split into lines with numpy, and lines are classified by their first byte:
a TAB starts a payload line, anything else is a record header (or a line that is not one)
(`lines`). The glog prefix of every header is matched by polars' vectorized regex; only the
header JSON is decoded per envelope, once, with orjson (`scanning`). Payload text stays in
Arrow/polars buffers, cut out of the file at computed offsets (the tab that starts each line
removed by one vectorized replace). A lazy parse (what traceview.ingest.pipeline uses) keeps most
payloads as byte ranges of the file, read later by `hydrate`, which also checks their md5
(`payloads`). Several files are parsed as one batch by `read_trace_files`: a per-file pass,
then each table built once (`tables`). The schemas are in `schemas`, the problem rows in
`problems`; `reading` holds the entry points exported here.
"""

from parsers.torch_trace.payloads import VERIFIED_MAX_BYTES, InputChanged, hydrate
from parsers.torch_trace.problems import file_changed
from parsers.torch_trace.reading import (
    parse_trace_bytes,
    parse_trace_pieces,
    read_trace,
    read_trace_file,
    read_trace_files,
)
from parsers.torch_trace.scanning import FILE_RANK_RE, GZIP_PIECE, PREFIX_PATTERN, last_record_start
from parsers.torch_trace.schemas import (
    CHROMIUM_SCHEMA,
    EVENTS_SCHEMA,
    INDEX_SCHEMA,
    PROBLEMS_SCHEMA,
    STATS_SCHEMA,
    STRINGS_SCHEMA,
)
from parsers.torch_trace.tables import ParsedFile, decode_chromium, empty_tables

__all__ = [
    "CHROMIUM_SCHEMA",
    "EVENTS_SCHEMA",
    "FILE_RANK_RE",
    "GZIP_PIECE",
    "INDEX_SCHEMA",
    "PREFIX_PATTERN",
    "PROBLEMS_SCHEMA",
    "STATS_SCHEMA",
    "STRINGS_SCHEMA",
    "VERIFIED_MAX_BYTES",
    "InputChanged",
    "ParsedFile",
    "decode_chromium",
    "empty_tables",
    "file_changed",
    "hydrate",
    "last_record_start",
    "parse_trace_bytes",
    "parse_trace_pieces",
    "read_trace",
    "read_trace_file",
    "read_trace_files",
]
