#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite; extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
