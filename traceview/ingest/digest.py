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
same either way (tests/ingest/test_digest.py compares the whole report). Versioned on its own (DIGEST_VERSION,
in the manifest's `digest` entry): an export whose digest is of another version is refused
with "export it again"; one without a digest (an older traceview) is read whole.
"""

from __future__ import annotations

import polars as pl

from traceview.trace import GRAPH_TABLES, TABLES

# 1: the summary's tables, its events index, its guards and its cache keys (docs/tables.md "The digest").
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


# The events' metadata the summary never reads: the metrics records' is mostly torch's whole
# configuration (Inductor's alone ~26 KB a record, nine tenths of a small rank's events), of
# which it reads one setting (traceview.analyze.signals: the index checks turned off); the
# tensors' descriptions and the frames' stacks (the `compiles` table holds what it reads of them).
METRICS_KINDS = ("compilation_metrics", "bwd_compilation_metrics")
UNREAD_METADATA_KINDS = ("describe_tensor", "describe_storage", "dynamo_start")
KEPT_SETTINGS = {"inductor_config": ("assert_indirect_indexing",)}


def slim_metadata(text: str | None) -> str | None:
    """A metrics record's metadata as the digest keeps it: only the settings the summary reads
    (KEPT_SETTINGS, written as torch writes JSON, `"key": value`); the text itself when it is
    not a JSON object."""
    import json

    import orjson

    try:
        meta = orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return text
    if not isinstance(meta, dict):
        return text
    out = {}
    for key, kept in KEPT_SETTINGS.items():
        value = meta.get(key)
        conf = value
        if isinstance(value, str):
            try:
                conf = orjson.loads(value)
            except orjson.JSONDecodeError:
                conf = None
        if isinstance(conf, dict):
            sub = {k: conf[k] for k in kept if k in conf}
            if sub:
                out[key] = json.dumps(sub) if isinstance(value, str) else sub
    return json.dumps(out)


# Rows of these kinds are read by the summary only for their timestamps (where a compile
# starts, a rank's and the capture's last record): the digest keeps the first and the last of
# each file and of each compile in it (a chromium event with a payload the summary reads, an
# autotuning span's, is always kept).
THIN_KINDS = ("chromium_event", "describe_tensor", "describe_storage")


def slim_index(index: pl.DataFrame) -> pl.DataFrame:
    """The events' index as the digest keeps it: the metrics records' metadata reduced to what
    the summary reads (slim_metadata), none for the kinds whose metadata it never reads
    (UNREAD_METADATA_KINDS), the rows of THIN_KINDS thinned to the first and last of each file
    and of each compile in it, no payload md5s; every other row and column as it is."""
    if index.is_empty():
        return index
    metrics = pl.col("kind").is_in(METRICS_KINDS)
    slim = pl.col("metadata").map_elements(slim_metadata, return_dtype=pl.String)
    index = index.with_columns(
        pl.when(pl.col("kind").is_in(UNREAD_METADATA_KINDS)).then(pl.lit(None, dtype=pl.String))
        .when(metrics).then(slim)
        .otherwise(pl.col("metadata")).alias("metadata")
    )
    n = pl.int_range(pl.len())
    ends = lambda *by: (n.over(*by, order_by="lineno") == 0) | (n.over(*by, order_by="lineno") == pl.len().over(*by) - 1)  # noqa: E731
    keep = ~pl.col("kind").is_in(THIN_KINDS) | pl.col("payload").is_not_null() | ends("file") | ends("file", "compile_id")
    index = index.filter(keep)
    # torch's md5 of each payload: the page's, read with the payloads from the full events
    return index.with_columns(pl.lit(None, dtype=index.schema["payload_md5"]).alias("payload_md5")) if "payload_md5" in index.columns else index


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
