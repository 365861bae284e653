"""Reading traceview exports back: one export (`read_export`), or the exports of one run's
hosts (`read_exports`), as one Trace whose tables are read from parquet when first asked for.
An export is an input like a log directory (traceview.ingest.loading), so this module is on the
loading side: it imports nothing from the analysis, report or export-writing modules."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from parsers.kinds import (
    SUMMARY_PAYLOAD_ARTIFACTS,
    SUMMARY_PAYLOAD_GRAPH_MARKS,
    SUMMARY_PAYLOAD_KINDS,
)
from parsers.schemas import empty_table
from traceview.errors import ExportError
from traceview.ingest.digest import DIGEST_FILES, DIGEST_VERSION, INDEX, SUMMARY_FORMS, digest_of
from traceview.ingest.manifest import inputs_of_exports, read_manifest
from traceview.trace import TABLES, Trace
from traceview.versions import SCHEMA_VERSION


def read_export(path: str | os.PathLike[str]) -> Trace:
    """Read an export written by `write_export` back into a Trace (same tables, same schemas)."""
    root = Path(path)
    if not (root / "manifest.json").exists():
        raise ExportError(f"{root}: no manifest.json; not a traceview export")
    return read_exports([root])


def read_exports(roots: list[Path], *, where: str | None = None, digests: bool = False) -> Trace:
    """One Trace over several exports (one per host, each written by `write_export`): every
    table is the exports' tables one after another, read when something first asks for it
    (the summary never reads the graph tables). Raises ExportError when a manifest is not
    traceview's, was written by another schema version, or two exports hold the same rank
    (`where`: the directory named in the Trace's inputs; default the first export).

    `digests` (summary, report, diff): the tables the summary reads come from the exports'
    digests (traceview.ingest.digest: a few small files per host, read now) when every export
    has one; the others (events, graph tables) from the full tables, when a view asks. An export
    whose digest cannot be read is left out and named in the inputs' stray files (the others
    are read)."""
    manifests = [_manifest_of(r) for r in roots]
    for name in TABLES:
        missing = [str(r) for r, m in zip(roots, manifests) if name not in m["tables"]]
        if missing:
            raise ExportError(f"{missing[0]}: its manifest.json lists no table {name!r}")
    damaged: list[tuple[str, str]] = []
    held: list[dict[str, pl.DataFrame]] = []
    if digests and all(digest_of(m) is not None for m in manifests):  # else (older exports among them): whole
        for r, m in zip(roots, manifests):
            if digest_of(m).get("version") != DIGEST_VERSION:  # type: ignore[union-attr]
                raise ExportError(
                    f"{r}: its digest is version {digest_of(m).get('version')}, this traceview reads {DIGEST_VERSION}; "  # type: ignore[union-attr]
                    "export it again"
                )
        read = [_read_digest(r, m) for r, m in zip(roots, manifests)]
        damaged = [(str(r), why) for r, (_, why) in zip(roots, read) if why]
        kept = [(r, m, t) for r, m, (t, why) in zip(roots, manifests, read) if not why]
        if not kept:
            raise ExportError(f"{damaged[0][0]}: {damaged[0][1]}; no export left to read")
        roots, manifests, held = [k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept]
    _check_ranks(roots, manifests)

    def loader(name: str) -> Callable[[], pl.DataFrame]:
        def read() -> pl.DataFrame:
            if held and name in held[0]:
                return _concat([h[name] for h in held])
            return _concat([_read_table(r, m, name) for r, m in zip(roots, manifests)])

        return read

    def index() -> pl.DataFrame:
        return _concat([h[INDEX] for h in held] if held else [index_events_of(r, m) for r, m in zip(roots, manifests)])

    inputs = inputs_of_exports(roots, manifests, where=where)
    inputs.stray.extend(damaged)
    trace = Trace.from_tables({name: loader(name) for name in TABLES}, inputs=inputs, index=index)
    for file, name in SUMMARY_FORMS.items() if held else ():
        trace.provide_summary(name, (lambda f: lambda: _concat([h[f] for h in held]))(file))

    def rank_rows(name: str, rank: int | None) -> pl.DataFrame:
        of_rank = pl.col("rank").is_null() if rank is None else pl.col("rank") == rank
        frames = [read_rows(r, m, name, lambda lf: lf.filter(of_rank)) for r, m in zip(roots, manifests) if rank in export_ranks(r, m)]
        return _concat(frames) if frames else empty_table(name)

    trace.provide_rank_reader(rank_rows)
    return trace


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    # an export with no rows (a share of `export --shard` that got no rank) may lack a
    # column the others have (stats' rank): its empty table adds nothing to them
    frames = [f for f in frames if f.height] or frames[:1]
    return frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical_relaxed")


def _read_digest(root: Path, manifest: dict) -> tuple[dict[str, pl.DataFrame], str | None]:
    """Every file of an export's digest (name -> rows), or why it cannot be read."""
    d = digest_of(manifest) or {}
    tables = {}
    try:
        for name in DIGEST_FILES:
            meta = d["tables"][name]
            df = pl.read_parquet(root / meta["path"])
            if df.height != meta.get("rows"):
                raise ValueError(f"{meta['path']} holds {df.height} rows, its manifest says {meta.get('rows')}")
            tables[name] = df
    except KeyError as e:
        return {}, f"a damaged traceview export, left out (its digest lists no {e.args[0]!r})"
    except (OSError, TypeError, ValueError, pl.exceptions.PolarsError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        return {}, f"a damaged traceview export, left out ({why[:200]})"
    return tables, None


def _manifest_of(root: Path) -> dict:
    manifest = read_manifest(root)
    if manifest is None:
        if (root / "manifest.json").exists():
            raise ExportError(f"{root}/manifest.json: not written by traceview export (no traceview mark)")
        raise ExportError(f"{root}: no manifest.json; not a traceview export")
    version = manifest.get("traceview_schema_version")
    if version != SCHEMA_VERSION:
        raise ExportError(
            f"{root}: written with table schema version {version}, this traceview reads {SCHEMA_VERSION}; export it again"
        )
    if not isinstance(manifest.get("tables"), dict):
        raise ExportError(f"{root}/manifest.json: no tables listed")
    return manifest


def export_ranks(root: Path, manifest: dict) -> set[int | None]:
    """The ranks an export holds: its trace files' (None: a process without a rank), and
    the ranks of its text logs' lines (`[rank3]:` prefixes; only the rank column is read, or
    the digest's list)."""
    d = digest_of(manifest)
    if d is not None and isinstance(d.get("ranks"), list):
        return set(d["ranks"])
    inp = manifest.get("inputs") or {}
    ranks: set[int | None] = {t.get("rank") for t in inp.get("trace_files") or []}
    meta = manifest["tables"]["log_records"]
    if meta["path"].endswith("/"):
        dirs = [d.name.split("=", 1)[1] for d in (root / meta["path"]).glob("rank=*")]
        ranks.update(int(r) for r in dirs if r.isdigit())
    elif meta.get("rows"):
        col = pq.read_table(root / meta["path"], columns=["rank"]).column("rank")
        ranks.update(int(r) for r in col.unique().to_pylist() if r is not None)
    return ranks


def _check_ranks(roots: list[Path], manifests: list[dict]) -> None:
    """Two exports that hold the same rank (or both a process without a rank) are two runs
    or one run exported twice: merging them would mix two processes' compiles as one."""
    seen: dict[int | None, Path] = {}
    for root, manifest in zip(roots, manifests):
        ranks = export_ranks(root, manifest)
        for rank in sorted(ranks, key=lambda r: -1 if r is None else r):
            if rank in seen:
                who = "a process without a rank" if rank is None else f"rank {rank}"
                raise ExportError(
                    f"{root}: holds {who}, and so does {seen[rank]}; ranks must not collide across the "
                    "exports of one run (two runs, or one host exported twice?)"
                )
        for rank in ranks:
            seen[rank] = root


def read_rows(root: Path, manifest: dict, name: str, rows: Callable[[pl.LazyFrame], pl.LazyFrame]) -> pl.DataFrame:
    """The rows `rows` picks of an export's table `name`, as the whole table would give them
    (columns, types and order)."""
    df = rows(_scan_table(root, manifest, name)).collect()
    return _restore(df, manifest["tables"][name], name, _file_order(manifest))


def _scan_table(root: Path, manifest: dict, name: str) -> pl.LazyFrame:
    meta = manifest["tables"][name]
    p = root / meta["path"]
    if meta["path"].endswith("/"):
        # polars reads the rank=R/ files in parallel: with 256 ranks per export, 5-10x faster
        # than opening them as a pyarrow dataset (a null rank's directory reads as null)
        return pl.scan_parquet(p / "**" / "*.parquet", hive_partitioning=True, hive_schema={"rank": pl.Int32})
    return pl.scan_parquet(p)


def _read_table(root: Path, manifest: dict, name: str) -> pl.DataFrame:
    df = _scan_table(root, manifest, name).collect()
    return _restore(df, manifest["tables"][name], name, _file_order(manifest))


def index_events_of(root: Path, manifest: dict) -> pl.DataFrame:
    """An export's events with only the payloads the summary reads (Trace.index_events): those
    a lazy parse keeps (parsers.kinds: small artifacts, the Dynamo graphs that name a
    higher-order op or a runtime assert) and the chromium events of template autotuning (their
    spans' first and last envelopes). The other payloads (graphs, code, chromium events: most of
    an export) are never read: the payload column is read for the rows picked by kind and name
    only."""
    wanted = (pl.col("kind") == "artifact") & pl.col("name").is_in(sorted(SUMMARY_PAYLOAD_ARTIFACTS))
    wanted = wanted | (pl.col("kind") == "dynamo_output_graph") | pl.col("kind").is_in(sorted(SUMMARY_PAYLOAD_KINDS))
    sp = _read_table(root, manifest, "spans")
    at = sp.filter(pl.col("name").str.contains("_template_(?:autotuning|precompiling)$")) if sp.height else sp
    ends = (
        pl.concat([at.select("file", "lineno"), at.select("file", pl.col("end_lineno").alias("lineno"))]).drop_nulls().unique()
        if at.height
        else None
    )
    if ends is not None:
        wanted = wanted | ((pl.col("kind") == "chromium_event") & pl.col("lineno").is_in(ends["lineno"].unique().implode()))
    lf = _scan_table(root, manifest, "events")
    base = lf.drop("payload").collect().with_row_index("_i")
    pay = lf.with_row_index("_i").filter(wanted).select("_i", "kind", "file", "lineno", "payload").collect()
    graph = pl.col("kind") == "dynamo_output_graph"
    keep = ~graph | pl.any_horizontal(pl.col("payload").str.contains(m, literal=True) for m in SUMMARY_PAYLOAD_GRAPH_MARKS)
    pay = pay.filter(keep)
    if ends is not None:  # a chromium row of another file at the same line number is not one
        chrom = pl.col("kind") == "chromium_event"
        pay = pl.concat([pay.filter(~chrom), pay.filter(chrom).join(ends, on=["file", "lineno"], how="semi")])
    df = base.join(pay.select("_i", "payload"), on="_i", how="left", maintain_order="left").drop("_i")
    return _restore(df, manifest["tables"]["events"], "events", _file_order(manifest))


def _file_order(manifest: dict) -> dict[str, int]:
    files = [s["file"] for s in manifest.get("stats", [])]
    return {f: i for i, f in enumerate(files)}


def _restore(df: pl.DataFrame, meta: dict, name: str, file_order: dict[str, int]) -> pl.DataFrame:
    """Put columns back in their order and types (hive partitions come back last) and, for a
    partitioned table, rows back in input-file order."""
    cols = list(meta["columns"])
    want = _schema_of(name)
    exprs = []
    for c in cols:
        if c not in df.columns:
            exprs.append(pl.lit(None).alias(c))
        elif c in want:
            exprs.append(pl.col(c).cast(want[c]))
        else:
            exprs.append(pl.col(c))
    out = df.select(exprs)
    if meta["path"].endswith("/") and "file" in out.columns and "lineno" in out.columns:
        order = pl.col("file").replace_strict(file_order, default=len(file_order), return_dtype=pl.Int64)
        out = out.sort(order, pl.col("lineno"), maintain_order=True)
    return out


def _schema_of(name: str) -> dict[str, pl.DataType]:
    """The declared schema of a table (the one every parser and builder produces)."""
    return dict(empty_table(name).schema)
