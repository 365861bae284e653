"""Versions of the table schemas and of the JSON report (bumped on any incompatible change)."""

SCHEMA_VERSION = 1
REPORT_SCHEMA_VERSION = 1
