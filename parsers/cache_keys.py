"""The components of each compile-cache lookup's key: the `cache_keys` table.

torch logs every FX graph cache and AOTAutograd cache lookup as an artifact
(`fx_graph_cache_{hit,miss,bypass}`, `aotautograd_cache_{hit,miss,bypass}`: one-line JSON)
whose `components` list is the key's inputs, one string per input with that input's own hash:
`[hash] name: text` (`[pr5n…] cpp_runtime_thread_count: 2`, `[kq7p…] example_inputs[0]:
TensorMetadata(dtype=torch.float32, …)`, `[tusf…] gm: <lambda>() …`). The FX graph cache always
logs them; torch 2.13 computes the AOTAutograd key's only when its logger
(`torch._functorch._aot_autograd.autograd_cache`) is at DEBUG, and logs `[]` otherwise. A
bypass logs no key.

One row per component of each lookup; a lookup whose components were not logged (an empty
list, a bypass) or are unreadable (`status` `bad`: no payload, not JSON, no `components`, not a
list, an entry that is not `[hash] name: text`) is one row with `component` null. Payloads are
read on demand (not at parse time): the parse only checks them (`key_problem`, a
`bad_cache_key` row of `problems`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import polars as pl

from parsers.compile_ids import occurrence_at

# artifact name -> (cache, state)
CACHE_KEY_ARTIFACTS: dict[str, tuple[str, str]] = {
    "fx_graph_cache_hit": ("fx_graph", "hit"),
    "fx_graph_cache_miss": ("fx_graph", "miss"),
    "fx_graph_cache_bypass": ("fx_graph", "bypass"),
    "aotautograd_cache_hit": ("aot_autograd", "hit"),
    "aotautograd_cache_miss": ("aot_autograd", "miss"),
    "aotautograd_cache_bypass": ("aot_autograd", "bypass"),
}
# the lookups whose payload carries a key (a bypass carries its reason instead)
KEYED_ARTIFACTS: frozenset[str] = frozenset(n for n, (_, s) in CACHE_KEY_ARTIFACTS.items() if s != "bypass")

# `[hash] name: text` (text may be empty: `cache_key_tag: `; may span lines: the graph)
_COMPONENT = re.compile(r"\[([A-Za-z0-9_+/=-]+)\] ([^\n:]+?):(?: |$)(.*)", re.DOTALL)

_S, _I32, _I64 = pl.String, pl.Int32, pl.Int64
CACHE_KEYS_SCHEMA = {
    "rank": _I32, "compile_id": _S, "occurrence": _I32, "cache": _S, "state": _S, "lookup": _I32,
    "key": _S, "status": _S, "detail": _S, "position": _I32, "component": _S, "hash": _S, "text": _S,
    "file": _S, "lineno": _I64,
}


def split_component(line: Any) -> tuple[str, str, str] | None:
    """(name, hash, text) of one `[hash] name: text` component; None when it is not one."""
    if not isinstance(line, str):
        return None
    m = _COMPONENT.fullmatch(line)
    return (m.group(2), m.group(1), m.group(3)) if m else None


def read_key(payload: str | bytes | None) -> tuple[str, str | None, str | None, list[tuple[str, str, str]]]:
    """What a lookup's payload says of its key: (status, detail, key, components). `status`:
    `logged` (components read), `empty` (torch logged `[]`: it did not compute them), `bad`
    (`detail` says why: no payload, not JSON, no components, not a list, an entry that is not
    `[hash] name: text`: nothing of it is used)."""
    if payload is None or (isinstance(payload, (str, bytes)) and not payload.strip()):
        return "bad", "no payload", None, []
    try:
        d = orjson.loads(payload)
    except orjson.JSONDecodeError:
        try:  # what Python's json reads and orjson does not (NaN, lone surrogates)
            d = json.loads(payload)
        except ValueError as exc:
            return "bad", f"not JSON (cut short?): {exc}", None, []
    if not isinstance(d, dict):
        return "bad", "not a JSON object", None, []
    key = d.get("key") if isinstance(d.get("key"), str) else None
    if "components" not in d:
        return "bad", "no components", key, []
    comps = d["components"]
    if not isinstance(comps, list):
        return "bad", f"components is a {type(comps).__name__}, not a list", key, []
    if not comps:
        return "empty", None, key, []
    out = []
    for i, c in enumerate(comps):
        parts = split_component(c)
        if parts is None:
            shown = c if isinstance(c, str) else json.dumps(c)
            return "bad", f"component {i} is not `[hash] name: text`: {shown[:80]!r}", key, []
        out.append(parts)
    return "logged", None, key, out


def key_problem(payload: str | bytes | None) -> str | None:
    """Why a cache lookup's key components cannot be read (a `bad_cache_key` problem), or None."""
    status, detail, _, _ = read_key(payload)
    return detail if status == "bad" else None


def build_cache_keys(events: pl.DataFrame, markers: pl.DataFrame | None = None) -> pl.DataFrame:
    """The `cache_keys` table from the events of the cache artifacts, their payloads read
    (docs/tables.md); `markers`: the `dynamo_start` / `compilation_metrics` records that say
    which compile of an id a lookup is in (default: `events`). `lookup`: which lookup of that
    cache in that compile (0-based, log order: a compile with a backward looks its FX graph up
    twice)."""
    if events.is_empty() or "name" not in events.columns:
        return pl.DataFrame(schema=CACHE_KEYS_SCHEMA)
    ev = events.filter((pl.col("kind") == "artifact") & pl.col("name").is_in(list(CACHE_KEY_ARTIFACTS)))
    if ev.is_empty():
        return pl.DataFrame(schema=CACHE_KEYS_SCHEMA)
    ev = ev.sort("file", "lineno")
    ev = ev.with_columns(occurrence_at(ev, events if markers is None else markers).alias("occurrence"))
    rows: list[dict[str, Any]] = []
    seen: dict[tuple, int] = {}
    for r in ev.select("file", "lineno", "rank", "compile_id", "occurrence", "name", "payload").iter_rows(named=True):
        cache, state = CACHE_KEY_ARTIFACTS[r["name"]]
        k = (r["file"], r["compile_id"], r["occurrence"], cache)
        lookup = seen.get(k, 0)
        seen[k] = lookup + 1
        base = {"rank": r["rank"], "compile_id": r["compile_id"], "occurrence": r["occurrence"], "cache": cache,
                "state": state, "lookup": lookup, "file": r["file"], "lineno": r["lineno"]}
        if state == "bypass":
            rows.append({**base, "key": None, "status": "bypass", "detail": None, "position": None,
                         "component": None, "hash": None, "text": None})
            continue
        status, detail, key, comps = read_key(r["payload"])
        if not comps:
            rows.append({**base, "key": key, "status": status, "detail": detail, "position": None,
                         "component": None, "hash": None, "text": None})
            continue
        rows.extend({**base, "key": key, "status": status, "detail": None, "position": i, "component": name,
                     "hash": h, "text": text} for i, (name, h, text) in enumerate(comps))
    return pl.DataFrame(rows, schema=CACHE_KEYS_SCHEMA)
