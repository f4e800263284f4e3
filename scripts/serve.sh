#!/usr/bin/env bash
# Set up (idempotent) and serve on 127.0.0.1:8000; extra arguments go to `vllm-responses serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/vllm-responses serve "$@"
