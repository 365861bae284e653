"""An export's digest: what the summary reads of each host's ranks, a few small files.

`traceview export` writes, beside the full tables, `digest/<name>.parquet`: every row of the
tables the judgement reads (compiles, spans, stops' records, collectives, ...; DIGEST_TABLES),
the events' index without their payload text (only the short payloads the summary reads,
traceview.ingest.exports.index_events_of), and the guards the summary reads without the guards
table (`summary_guards`) and the cache keys with each list of components once
(traceview.analyze.cache_keys.factorized). One file per table and host with `rank` as a column, written from the
export's own tables, so that a summary over many hosts' exports reads a few files per host
instead of every rank's partition of every table, and never the payloads, the graphs or the
guard trees (traceview.ingest.exports.read_exports reads those only when a view asks).

The digest is what the full tables would give the summary, row for row: the findings are the
same either way (tests/test_digest.py compares them). Versioned on its own (DIGEST_VERSION,
in the manifest's `digest` entry): an export whose digest is of another version is refused
with "export it again"; one without a digest (an older traceview) is read whole.
"""

from __future__ import annotations

import polars as pl

from traceview.trace import GRAPH_TABLES, TABLES

# 1: the summary's tables, its events index and its guards (docs/tables.md "The digest").
DIGEST_VERSION = 1
DIGEST_DIR = "digest"
# Every table but the events (their payloads: the index stands for them), the strings
# (only build_compiles reads them; `compiles` is in the digest) and the graph tables.
DIGEST_TABLES = tuple(n for n in TABLES if n not in ("events", "strings") and n not in GRAPH_TABLES)
INDEX = "index"  # the events' index (Trace.index_events)
# The tables the summary reads in a smaller form (Trace.summary_table): the digest's file name
# -> the name the Trace gives it.
SUMMARY_FORMS = {
    "summary_guards": "guards",  # the guard rows of `summary_guards`
    "cache_lookups": "cache_lookups",  # traceview.analyze.cache_keys.factorized: one row per lookup
    "cache_components": "cache_components",  # ... and each distinct list of components once
}
DIGEST_FILES = (*DIGEST_TABLES, INDEX, *SUMMARY_FORMS)


def summary_guards(guards: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame | pl.DataFrame:
    """The guard rows the summary reads (Trace.summary_guards): the value guards whose value a
    recompile's newest compile holds (traceview.analyze.storms: EQUALS_MATCH / NONE_MATCH), and
    every guard on `L['self']` / `L['fn']` (traceview.analyze.code_objects: the module class a
    compile is for, and whether it is for that one object)."""
    return guards.filter(
        pl.col("kind").is_in(["EQUALS_MATCH", "NONE_MATCH"]) | pl.col("guard_source").is_in(["L['self']", "L['fn']"])
    )


def digest_of(manifest: dict) -> dict | None:
    """The manifest's digest entry (None: the export has none)."""
    d = manifest.get("digest")
    return d if isinstance(d, dict) else None
