"""Regenerate ``tests/parsers/data/tlparse_compile_ids.json``: the compile ids tlparse reports.

For every TORCH_TRACE log under ``<traces>/peer-tlparse/`` (the top-level ``*.log`` and
``*.txt`` files, and every file inside the multi-rank directories) and, unless
``--no-gpu``, every ``<traces>/gpu/*/trace/*.log``, this runs

    tlparse INPUT --no-browser --overwrite -o OUT

in a temporary directory and reads ``OUT/compile_directory.json``.  For each multi-rank
directory it also runs

    tlparse DIR --all-ranks-html --no-browser --overwrite -o OUT

which writes one ``OUT/rank_<N>/compile_directory.json`` per rank (N is taken from the
``rank_<N>`` part of the file name, not from the envelope), and probes the plain and
``--latest`` directory forms (both fail in tlparse 0.4.3; the exit code and error line
are recorded).

Run from the repository root (nothing is written outside ``tests/parsers/data``)::

    /work/venv/bin/python tests/parsers/data/make_tlparse_expected.py \\
        --tlparse /work/tlparse-venv/bin/tlparse --traces /work/shared/traces

Options: ``--out FILE`` (default: ``tlparse_compile_ids.json`` next to this script),
``--no-gpu`` (only tlparse's own test inputs), ``--allow-other-version`` (otherwise the
script refuses to run anything but tlparse 0.4.3).

How tlparse 0.4.3 names a compile id (``compile_directory.json`` keys)
------------------------------------------------------------------------
The envelope (the JSON after the glog prefix) is deserialised with the top-level fields
``compiled_autograd_id``, ``frame_id``, ``frame_compile_id`` and ``attempt`` flattened
into a ``CompileId`` (all optional; a record without any of them still gets an all-None
id).  Every record except ``str`` interning records, lines that fail to parse and
records of another rank opens a directory entry, even when it writes no artifact.  If
``frame_compile_id`` is set and ``attempt`` is missing, attempt becomes 0.  The key is
``[`` + (``!<compiled_autograd_id>/`` if set) + ``<frame_id>/<frame_compile_id>``
(``-`` for a missing part) + (``_<attempt>`` if attempt is non-zero) + ``]``, e.g.
``[0/0]``, ``[2/0_1]``, ``[!0/3/0]``, and ``[-/-]`` for records without a compile id.
The keys are written sorted as strings (``[0/10]`` before ``[0/1]``).

In the output, ``raw_keys`` are the keys exactly as tlparse wrote them, in its order;
``compile_ids`` drops the brackets, leaves out the no-compile-id bucket (``[-/-]``, or
``unknown``), and is sorted numerically by (compiled autograd id, frame id, frame
compile id, attempt).  ``rank`` is the ``rank_<N>`` from the file name (null if none);
``envelope_rank`` is the rank tlparse detected from the envelopes (its "Detected rank"
line; null if the records carry no rank).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

EXPECTED_VERSION = "0.4.3"
COMMAND = "{tlparse} {input} --no-browser --overwrite -o {out}"
ALL_RANKS_COMMAND = "{tlparse} {dir} --all-ranks-html --no-browser --overwrite -o {out}"
PROBE_COMMANDS = {
    "plain": "{tlparse} {dir} --no-browser --overwrite -o {out}",
    "latest": "{tlparse} {dir} --latest --no-browser --overwrite -o {out}",
}
MULTI_RANK_DIRS = (
    "multi_rank_logs",
    "multi_rank_runtime",
    "multi_rank_schedule",
    "multi_rank_messy_input",
    "collectives_parity",
)
NO_ID_KEYS = frozenset({"[-/-]", "unknown"})
KEY_RE = re.compile(r"^\[(?:!(\d+)/)?(\d+|-)/(\d+|-)(?:_(\d+))?\]$")
RANK_RE = re.compile(r"rank_(\d+)")
DETECTED_RE = re.compile(r"Detected rank: Some\((\d+)\)")
STATS_RE = re.compile(r"^Stats \{.*\}$", re.M)


def tlparse_version(tlparse: str) -> str:
    """Return the version tlparse reports, e.g. ``0.4.3``."""
    out = subprocess.run([tlparse, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip().split()[-1]


def normalise(key: str) -> str | None:
    """``[0/1_1]`` -> ``0/1_1``; ``None`` for the no-compile-id bucket."""
    if key in NO_ID_KEYS:
        return None
    if key.startswith("[") and key.endswith("]"):
        return key[1:-1]
    return key


def sort_key(cid: str) -> tuple[int, int, int, int, str]:
    """Numeric order: (compiled autograd id, frame id, frame compile id, attempt)."""
    m = KEY_RE.match(f"[{cid}]")
    if not m:
        return (1 << 30, 0, 0, 0, cid)
    ca, frame, fcid, attempt = m.groups()

    def num(s: str | None) -> int:
        return -1 if s is None or s == "-" else int(s)

    return (num(ca), num(frame), num(fcid), int(attempt or 0), cid)


def keys_entry(directory_json: Path) -> dict[str, Any]:
    """raw_keys and compile_ids from one ``compile_directory.json``."""
    if not directory_json.is_file():
        return {"raw_keys": None, "compile_ids": None}
    raw = list(json.loads(directory_json.read_text()))
    unexpected = [k for k in raw if k not in NO_ID_KEYS and not KEY_RE.match(k)]
    if unexpected:
        print(f"warning: unexpected key form in {directory_json}: {unexpected}", file=sys.stderr)
    ids = [c for c in (normalise(k) for k in raw) if c is not None]
    return {"raw_keys": raw, "compile_ids": sorted(ids, key=sort_key)}


def run(argv: list[str]) -> tuple[int, str]:
    """Run a command; return (exit code, stdout+stderr)."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def error_line(output: str, traces: Path) -> str | None:
    """The ``Error: ...`` line of a failed tlparse run (backtrace dropped, paths relative)."""
    lines = [
        ln for ln in output.splitlines() if ln.startswith("Error:")
    ] or output.strip().splitlines()
    return lines[0].replace(f"{traces}/", "<traces>/") if lines else None


def file_rank(path: Path) -> int | None:
    """The ``rank_<N>`` in a file name, as tlparse --all-ranks-html reads it."""
    m = RANK_RE.search(path.name)
    return int(m.group(1)) if m else None


def one_file(tlparse: str, path: Path, traces: Path, tmp: Path) -> dict[str, Any]:
    """Run tlparse on one file and collect its compile ids."""
    out = tmp / "single"
    code, output = run([tlparse, str(path), "--no-browser", "--overwrite", "-o", str(out)])
    detected = DETECTED_RE.search(output)
    stats = STATS_RE.search(output)
    entry: dict[str, Any] = {
        "rank": file_rank(path) if path.parent.name in MULTI_RANK_DIRS else None,
        "envelope_rank": int(detected.group(1)) if detected else None,
        "exit_code": code,
        "stats": stats.group(0) if stats else None,
    }
    entry.update(keys_entry(out / "compile_directory.json"))
    if code != 0 or entry["raw_keys"] is None:
        entry["error"] = error_line(output, traces)
        print(f"FAILED ({code}): {path.relative_to(traces)}: {entry['error']}", file=sys.stderr)
    return entry


def all_ranks(
    tlparse: str, directory: Path, traces: Path, tmp: Path, singles: dict[str, Any]
) -> dict[str, Any]:
    """Run tlparse --all-ranks-html on a multi-rank directory (and probe other forms)."""
    result: dict[str, Any] = {"probes": {}}
    for name, template in PROBE_COMMANDS.items():
        out = tmp / f"probe_{name}"
        argv = template.format(tlparse=tlparse, dir=directory, out=out).split()
        code, output = run(argv)
        result["probes"][name] = {
            "exit_code": code,
            "error": error_line(output, traces) if code else None,
        }
    out = tmp / "all_ranks"
    argv = ALL_RANKS_COMMAND.format(tlparse=tlparse, dir=directory, out=out).split()
    code, output = run(argv)
    result["exit_code"] = code
    if code != 0:
        result["error"] = error_line(output, traces)
        print(f"FAILED ({code}): --all-ranks-html {directory}: {result['error']}", file=sys.stderr)
    files = {file_rank(p): p for p in sorted(directory.iterdir()) if file_rank(p) is not None}
    ranks: dict[str, Any] = {}
    for rank_dir in sorted(out.glob("rank_*"), key=lambda p: int(p.name.split("_")[1])):
        rank = int(rank_dir.name.split("_")[1])
        src = files.get(rank)
        rel = str(src.relative_to(traces)) if src else None
        entry: dict[str, Any] = {"rank": rank, "file": rel}
        entry.update(keys_entry(rank_dir / "compile_directory.json"))
        if rel in singles:
            entry["same_as_single_file_run"] = entry["raw_keys"] == singles[rel]["raw_keys"]
        ranks[str(rank)] = entry
    result["ranks"] = ranks
    return result


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--tlparse", default="/work/tlparse-venv/bin/tlparse", help="tlparse binary")
    ap.add_argument("--traces", default="/work/shared/traces", type=Path, help="traces directory")
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).with_name("tlparse_compile_ids.json")
    )
    ap.add_argument("--no-gpu", action="store_true", help="skip <traces>/gpu/*/trace/*.log")
    ap.add_argument("--allow-other-version", action="store_true")
    args = ap.parse_args(argv)

    traces: Path = args.traces.resolve()
    version = tlparse_version(args.tlparse)
    if version != EXPECTED_VERSION and not args.allow_other_version:
        print(f"tlparse is {version}, expected {EXPECTED_VERSION}", file=sys.stderr)
        return 2

    peer = traces / "peer-tlparse"
    files = sorted(p for p in peer.iterdir() if p.is_file() and p.suffix in (".log", ".txt"))
    for name in MULTI_RANK_DIRS:
        files += sorted(p for p in (peer / name).iterdir() if p.is_file())
    if not args.no_gpu:
        files += sorted(traces.glob("gpu/*/trace/*.log"))

    inputs: dict[str, Any] = {}
    multi: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tlparse-expected-") as tmpname:
        tmp = Path(tmpname)
        for path in files:
            rel = str(path.relative_to(traces))
            inputs[rel] = one_file(args.tlparse, path, traces, tmp)
            print(f"{rel}: {inputs[rel]['compile_ids']}", file=sys.stderr)
        for name in MULTI_RANK_DIRS:
            rel = str((peer / name).relative_to(traces))
            multi[rel] = all_ranks(args.tlparse, peer / name, traces, tmp, inputs)

    doc = {
        "tlparse_version": version,
        "command": COMMAND.format(tlparse="tlparse", input="{input}", out="{out}"),
        "all_ranks_command": ALL_RANKS_COMMAND.format(tlparse="tlparse", dir="{dir}", out="{out}"),
        "generated_by": "tests/parsers/data/make_tlparse_expected.py",
        "notes": {
            "raw_keys": "keys of OUT/compile_directory.json exactly as tlparse wrote them (its order)",
            "compile_ids": "raw_keys without brackets and without the no-compile-id bucket "
            "'[-/-]', sorted by (compiled_autograd_id, frame_id, frame_compile_id, attempt)",
            "key_format": "[!CA/]FRAME/FCID[_ATTEMPT] from envelope fields compiled_autograd_id, "
            "frame_id, frame_compile_id, attempt; attempt 0 (or missing) is not shown",
            "rank": "rank_<N> from the file name for files in multi-rank directories, else null",
            "envelope_rank": "rank tlparse detected from the envelopes ('Detected rank'), or null",
            "all_ranks": "--all-ranks-html run per multi-rank directory; OUT/rank_<N>/"
            "compile_directory.json per rank; probes record the plain and --latest forms",
        },
        "inputs": inputs,
        "all_ranks": multi,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
