"""Every version number traceview writes (bumped on any incompatible change), in one place.

- SCHEMA_VERSION: the tables (docs/tables*.md), in exports' manifest.json;
- REPORT_SCHEMA_VERSION: the JSON report of `summary --json` (traceview/schemas/report.schema.json);
- DIFF_SCHEMA_VERSION: the JSON of `diff --json` (docs/diff.md);
- PARSER_VERSION: what the parse cache's entries hold (part of the cache key: a bump makes
  every older entry a miss);
- PART_FORMAT_VERSION: the layout of a parse directory (`parts.json`, traceview.ingest.parts).
"""

SCHEMA_VERSION = 4
REPORT_SCHEMA_VERSION = 3
DIFF_SCHEMA_VERSION = 1
PARSER_VERSION = "19"
PART_FORMAT_VERSION = 1
