#!/usr/bin/env bash
# tlparse 0.4.3, the tool traceview is measured against, in a venv of its own (.venv-tlparse).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-tlparse
.venv-tlparse/bin/python -m pip install --quiet --disable-pip-version-check tlparse==0.4.3
.venv-tlparse/bin/tlparse --version
