"""What a process group says when a collective times out, read from a TORCH_LOGS capture.

Only reading: which rank's collective timed out, which one (its sequence number, op, size),
after how long, and what each rank says it had enqueued and completed. What it means (which
rank the collective waited for, and why) is traceview.analyze.timeouts'.

The forms (torch's own texts, `torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp`, gloo's
`transport/tcp/unbound_buffer.cc`, `ProcessGroupGloo.cpp`), keyed on their grammar, not on a
file's wording around them:

* NCCL's watchdog: `Watchdog caught collective operation timeout: WorkNCCL(SeqNum=13,
  OpType=ALLREDUCE, NumelIn=16777216, NumelOut=16777216, Timeout(ms)=30000) ran for 30091
  milliseconds before timing out.` (`watchdog`; the same text again in the exception the
  watchdog thread dies of: one row per rank and sequence number, the first);
* NCCL's flight-recorder signal: `Received a dump signal due to a collective timeout from this
  local rank ... Last enqueued NCCL work: 9, last completed NCCL work: 8.` (`from  rank 0` on
  the other ranks): each rank's last enqueued and completed sequence numbers (`dump_signal`);
* NCCL's status of the timed-out rank's process group, in the forms torch has used:
  `Timeout at NCCL work: 13, last enqueued NCCL work: 15, last completed NCCL work: 12.`,
  `Exception (either an error or timeout) detected by watchdog at work: 13, last enqueued NCCL
  work: 15, last completed NCCL work: 12.`, `failure detected by watchdog at work sequence id:
  13 PG status: last enqueued work: 15, last completed work: 12` (`pg_status`);
* gloo: `Timed out waiting 10000ms for recv operation to complete` (`gloo`), raised from the
  collective's wait on the rank that waited; `Rank 0 timed out in monitoredBarrier after
  10000ms` (`gloo_barrier`).

The time is the line's own where it has one (C++'s `[E1128 14:42:50.761832761 file:line]`
prefix, or torch's glog prefix); a line inside a Python traceback has none.
"""

from __future__ import annotations

import datetime as _dt
import re

import polars as pl

TIMEOUTS_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String,
    "lineno": pl.Int64,
    "ts": pl.Datetime("us"),  # the line's own time (null: none on the line)
    "rank": pl.Int32,  # the rank that says it
    "kind": pl.String,  # watchdog, pg_status, dump_signal, gloo, gloo_barrier
    "backend": pl.String,  # nccl, gloo
    "seq": pl.Int64,  # the collective's sequence number in its process group (NCCL's SeqNum)
    "op": pl.String,  # ALLREDUCE, BROADCAST, ... (NCCL's OpType); gloo: send / recv
    "numel_in": pl.Int64,
    "numel_out": pl.Int64,
    "timeout_ms": pl.Int64,  # the process group's timeout
    "ran_ms": pl.Int64,  # how long it ran before the watchdog gave up
    "last_enqueued": pl.Int64,  # dump_signal: the rank's last enqueued / completed work
    "last_completed": pl.Int64,
    "from_rank": pl.Int32,  # dump_signal: the rank whose timeout asked for the dump (itself: "this local rank")
    "pg": pl.String,  # the process group as the line names it (`0(default_pg)`)
    "text": pl.String,
}

_WORK = re.compile(
    r"WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?P<rest>.*?)\) ran for (?P<ran>\d+) milliseconds before timing out"
)
_FIELD = re.compile(r"(NumelIn|NumelOut|Timeout\(ms\))=(-?\d+)")
_DUMP = re.compile(
    r"Received a dump signal due to a collective timeout from (?:this local rank|\s*rank (?P<from>\d+)).*?"
    r"Last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: (?P<done>-?\d+)"
)
_STATUS = re.compile(
    r"(?:Timeout at NCCL work|detected by watchdog at work|failure detected by watchdog at work sequence id): (?P<seq>-?\d+)"
    r"[,.]? (?:PG status: )?last enqueued (?:NCCL )?work: (?P<enq>-?\d+), last completed (?:NCCL )?work: (?P<done>-?\d+)"
)
_GLOO = re.compile(r"Timed out waiting (?P<ms>\d+)ms for (?P<op>send|recv) operation to complete")
_GLOO_BARRIER = re.compile(r"Rank (?P<rank>\d+) timed out in monitoredBarrier after (?P<ms>\d+)(?: ?ms)?")
_RANK_IN = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")
_PG = re.compile(r"\[PG (?:ID \S+ PG GUID )?(\S+?(?: \([^)]*\))?) Rank \d+\]")
_CPP_TIME = re.compile(r"\[[VIWEF](?P<md>\d{4}) (?P<time>\d\d:\d\d:\d\d)\.(?P<frac>\d{1,9}) [^\]]*\]")
_ANY = re.compile(r"WorkNCCL\(SeqNum=|dump signal due to a collective timeout|last enqueued (?:NCCL )?work: |Timed out waiting \d+ms for|timed out in monitoredBarrier")


def _time(text: str, year: int) -> _dt.datetime | None:
    m = _CPP_TIME.search(text)
    if m is None:
        return None
    md, frac = m.group("md"), (m.group("frac") + "000000")[:6]
    try:
        return _dt.datetime.strptime(f"{year}{md} {m.group('time')}.{frac}", "%Y%m%d %H:%M:%S.%f")
    except ValueError:
        return None


def _row(**kw: object) -> dict:
    row = dict.fromkeys(TIMEOUTS_SCHEMA)
    row.update(kw)
    return row


def timeouts_from_text(log_records: pl.DataFrame, other_lines: pl.DataFrame, *, year: int | None = None) -> pl.DataFrame:
    """Every line of a capture that says a collective timed out (see the module doc), one row
    per rank and collective (the first line that says it), in file and line order. `year`:
    the year of the C++ lines' `MMDD` (the capture's; this year when not given)."""
    year = year or _dt.datetime.now().year
    lines: list[tuple[str, int, int | None, object, str]] = []
    for df, has_ts in ((other_lines, False), (log_records, True)):
        if df.height == 0:
            continue
        hits = df.filter(pl.col("text").str.contains(_ANY.pattern))
        for r in hits.iter_rows(named=True):
            for text in r["text"].split("\n"):
                if _ANY.search(text):
                    lines.append((r["file"], r["lineno"], r.get("rank"), r.get("ts") if has_ts else None, text))
    rows: list[dict] = []
    seen: set[tuple] = set()
    for file, lineno, line_rank, ts, text in sorted(lines, key=lambda x: (x[0], x[1])):
        said = _RANK_IN.search(text)
        rank = int(said.group(1)) if said else line_rank
        pg = m.group(1) if (m := _PG.search(text)) else None
        when = ts or _time(text, year)
        if m := _WORK.search(text):
            fields = dict(_FIELD.findall(m.group("rest")))
            key = (file, rank, "watchdog", int(m.group("seq")))
            if key in seen:
                continue
            seen.add(key)
            rows.append(_row(file=file, lineno=lineno, ts=when, rank=rank, kind="watchdog", backend="nccl",
                             seq=int(m.group("seq")), op=m.group("op"),
                             numel_in=int(fields["NumelIn"]) if "NumelIn" in fields else None,
                             numel_out=int(fields["NumelOut"]) if "NumelOut" in fields else None,
                             timeout_ms=int(fields["Timeout(ms)"]) if "Timeout(ms)" in fields else None,
                             ran_ms=int(m.group("ran")), pg=pg, text=text.strip()))
        elif m := _DUMP.search(text):
            key = (file, rank, "dump_signal")
            if key in seen:
                continue
            seen.add(key)
            rows.append(_row(file=file, lineno=lineno, ts=when, rank=rank, kind="dump_signal", backend="nccl",
                             last_enqueued=int(m.group("enq")), last_completed=int(m.group("done")),
                             from_rank=int(m.group("from")) if m.group("from") else rank, pg=pg, text=text.strip()))
        elif m := _STATUS.search(text):
            key = (file, rank, "pg_status", int(m.group("seq")))
            if key in seen:
                continue
            seen.add(key)
            rows.append(_row(file=file, lineno=lineno, ts=when, rank=rank, kind="pg_status", backend="nccl",
                             seq=int(m.group("seq")), last_enqueued=int(m.group("enq")),
                             last_completed=int(m.group("done")), pg=pg, text=text.strip()))
        elif m := _GLOO.search(text):
            key = (file, rank, "gloo", m.group("op"))
            if key in seen:
                continue
            seen.add(key)
            rows.append(_row(file=file, lineno=lineno, ts=when, rank=rank, kind="gloo", backend="gloo",
                             op=m.group("op"), timeout_ms=int(m.group("ms")), text=text.strip()))
        elif m := _GLOO_BARRIER.search(text):
            rank = int(m.group("rank"))
            key = (file, rank, "gloo_barrier")
            if key in seen:
                continue
            seen.add(key)
            rows.append(_row(file=file, lineno=lineno, ts=when, rank=rank, kind="gloo_barrier", backend="gloo",
                             op="monitoredBarrier", timeout_ms=int(m.group("ms")), text=text.strip()))
    return pl.DataFrame(rows, schema=TIMEOUTS_SCHEMA)
