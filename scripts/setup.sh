#!/usr/bin/env bash
# Set up traceview in ./.venv (installed editable, with the dev extras: pytest, pytest-xdist, ruff, duckdb,
# and torch==2.13.0, CPU build; and the dask extra, for the LocalCluster test of traceview.export_hosts) and run the main job once on an included real trace.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
PIP_ARGS=(--quiet --disable-pip-version-check)
# A machine that carries the CPU wheel of torch locally (as this project's machines do) uses it;
# an unpinned or CUDA torch from the index would pull gigabytes.
if [ -d /opt/wheels ]; then PIP_ARGS+=(--find-links /opt/wheels); fi
.venv/bin/python -m pip install "${PIP_ARGS[@]}" --upgrade pip >/dev/null
.venv/bin/python -m pip install "${PIP_ARGS[@]}" -e '.[dev,dask]'

echo "== traceview summary fixtures/recompiles (a real torch 2.13 trace + TORCH_LOGS text)"
.venv/bin/traceview summary fixtures/recompiles --no-cache
