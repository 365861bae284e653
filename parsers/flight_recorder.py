"""The flight recorder's dumps: each rank's last collectives, as torch wrote them.

With `TORCH_FR_BUFFER_SIZE` (older: `TORCH_NCCL_TRACE_BUFFER_SIZE`) set, a process group keeps
its last collectives in a ring buffer and, on a timeout (`TORCH_NCCL_DUMP_ON_TIMEOUT=1`),
writes it to `TORCH_FR_DUMP_TEMP_FILE` (older: `TORCH_NCCL_DEBUG_INFO_TEMP_FILE`) + the rank,
one file per rank (`torch/csrc/distributed/c10d/FlightRecorder*`; torch's own reader is
`torch/distributed/flight_recorder`). The file is a pickle of plain data (a dict of `version`,
`pg_config`, `pg_status`, `entries`), or JSON with the same keys.

A pickle is read with an unpickler that builds plain containers only (dict, list, tuple, str,
numbers, bool, None): any class or callable in the stream is refused, so a dump can never run
code. Only reading here; what the collectives mean is traceview.analyze.timeouts'.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import pickle
import re
from pathlib import Path
from typing import Any

_TAIL_RANK = re.compile(r"(\d+)$")
MAX_BYTES = 256 * 1024 * 1024


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"not plain data: {module}.{name}")


def looks_like_dump(head: bytes) -> bool:
    """Whether a file's first bytes are a flight-recorder dump: a pickle or JSON holding its
    `pg_config` and `entries` keys (torch writes both, the process groups first)."""
    if head[:1] == b"\x80":
        return b"pg_config" in head[:4096] and b"entries" in head[:4096]
    stripped = head.lstrip()[:4096]
    return stripped[:1] == b"{" and b'"entries"' in stripped and b'"pg_config"' in stripped


def read_dump(path: str) -> dict[str, Any] | None:
    """One dump as plain data, or None when the file is not one (or not plain data)."""
    try:
        p = Path(path)
        if p.stat().st_size > MAX_BYTES:
            return None
        data = p.read_bytes()
    except OSError:
        return None
    try:
        if data[:1] == b"\x80":
            out = _PlainUnpickler(io.BytesIO(data)).load()
        else:
            out = json.loads(data.decode("utf-8"))
    except Exception:  # a damaged or foreign file: not a dump
        return None
    if not isinstance(out, dict) or not isinstance(out.get("entries"), list) or "pg_config" not in out:
        return None
    return out


def dump_rank(path: str, dump: dict[str, Any]) -> int | None:
    """The rank a dump is of: torch names the file prefix + rank."""
    m = _TAIL_RANK.search(Path(path).name)
    return int(m.group(1)) if m else None


def _when(ns: Any) -> _dt.datetime | None:
    if not isinstance(ns, int) or ns <= 0:
        return None
    return _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.timezone.utc).replace(tzinfo=None)


def collectives(path: str) -> dict[str, Any] | None:
    """A dump read into what an analysis needs: `rank`, `version`, `status` (per process
    group: last_enqueued / last_started / last_completed collective), `entries` (one per
    collective: pg, seq, op (`all_reduce`), state (scheduled / started / completed), created
    (UTC, naive), input_sizes, timeout_ms, p2p, user frame (the innermost frame outside torch)).
    None when the file is not a dump."""
    dump = read_dump(path)
    if dump is None:
        return None
    status: dict[str, dict[str, int | None]] = {}
    for pg, st in (dump.get("pg_status") or {}).items():
        if isinstance(st, dict):
            status[str(pg)] = {k: st.get(k) if isinstance(st.get(k), int) else None
                               for k in ("last_enqueued_collective", "last_started_collective", "last_completed_collective")}
    entries = []
    for e in dump["entries"]:
        if not isinstance(e, dict):
            continue
        pg = e.get("process_group")
        frames = [f for f in e.get("frames") or [] if isinstance(f, dict)]
        user = next((f for f in frames if "/torch/" not in str(f.get("filename", "")).replace("\\", "/")), None)
        name = str(e.get("profiling_name") or "")
        entries.append({
            "pg": str(pg[0]) if isinstance(pg, (list, tuple)) and pg else str(e.get("pg_id")),
            "pg_desc": str(pg[1]) if isinstance(pg, (list, tuple)) and len(pg) > 1 else None,
            "seq": e.get("collective_seq_id") if not e.get("is_p2p") else e.get("p2p_seq_id"),
            "op": name.split(":", 1)[-1] if name else None,
            "backend": name.split(":", 1)[0] if ":" in name else None,
            "state": e.get("state"),
            "created": _when(e.get("time_created_ns")),
            "input_sizes": e.get("input_sizes"),
            "timeout_ms": e.get("timeout_ms"),
            "p2p": bool(e.get("is_p2p")),
            "frame": None if user is None else f"{user.get('filename')}:{user.get('line')} in {user.get('name')}",
        })
    return {"rank": dump_rank(path, dump), "version": dump.get("version"), "status": status, "entries": entries, "file": path}
