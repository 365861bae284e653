#!/usr/bin/env bash
# tlhub 0.3.5, the second reference (a Python peer that ingests traces into SQLite), in a venv
# of its own (.venv-tlhub); bench/bench.py --tools tlhub runs bench/tlhub_ingest.py with it.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-tlhub
.venv-tlhub/bin/python -m pip install --quiet --disable-pip-version-check tlhub==0.3.5
.venv-tlhub/bin/python -c "import tlhub; print('tlhub', tlhub.__version__)"
