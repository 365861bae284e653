"""Every version number traceview writes (bumped on any incompatible change), in one place.

- SCHEMA_VERSION: the tables (docs/tables*.md), in exports' manifest.json;
- REPORT_SCHEMA_VERSION: the JSON report of `summary --json` (traceview/schemas/report.schema.json);
- DIFF_SCHEMA_VERSION: the JSON of `diff --json` (docs/diff.md);
- PARSER_VERSION: what the parse cache's entries hold (part of the cache key: a bump makes
  every older entry a miss);
- PART_FORMAT_VERSION: the layout of a parse directory (`parts.json`, traceview.ingest.parts);
- `code_version()`: the findings document's key beside the parse cache (traceview.ingest.cache):
  what traceview's own code is, so a changed analyzer never answers from an older judgement.
"""

from __future__ import annotations

import functools
import hashlib
import os

SCHEMA_VERSION = 6
REPORT_SCHEMA_VERSION = 3
DIFF_SCHEMA_VERSION = 1
PARSER_VERSION = "31"

PART_FORMAT_VERSION = 1


@functools.cache
def code_version() -> str:
    """A fingerprint of traceview's code (the `traceview` and `parsers` packages: every file's
    name, size and mtime) and the report's schema: a findings document is reused only by the
    code that judged it. Stats about 200 files, once per process (a few ms)."""
    h = hashlib.sha256(f"report={REPORT_SCHEMA_VERSION};parser={PARSER_VERSION}".encode())
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (here, os.path.join(os.path.dirname(here), "parsers")):
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for f in sorted(files):
                if f.endswith((".py", ".json", ".j2", ".tcss", ".md")):
                    st = os.stat(os.path.join(d, f))
                    h.update(f"{os.path.relpath(os.path.join(d, f), root)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:16]
