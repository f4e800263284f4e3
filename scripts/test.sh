#!/usr/bin/env bash
# Set up (idempotent) and run the checks and the whole test suite; extra arguments go to pytest.
# `--fast` first: the inner loop, no vLLM engine and no sandbox worker (docs/testing.md says what each tier covers).
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi
bash scripts/setup.sh
say() { printf '\033[1m[test]\033[0m %s\n' "$*"; }
if [ "$fast" = 0 ] && ! command -v chromium >/dev/null 2>&1; then
  # Only the playground's browser test needs it (it skips, saying why, where none can be installed).
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's chromium for the playground test"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || say "could not install chromium: the playground browser test will be skipped"
  else
    say "no chromium and no root apt-get: the playground browser test will be skipped"
  fi
fi
say "checks: ruff check, ruff format --check, mypy --strict, lint-imports (the server's layers, the sandbox's layers, no cycles), deno lint and deno check (the worker's runtime)"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache
runtime=interpreter_service/runtime  # its deno.json: the lint rules and the type checking of the JS
.venv/bin/deno lint --config "$runtime/deno.json" "$runtime"
.venv/bin/deno check --config "$runtime/deno.json" --no-lock --no-remote --no-npm "$runtime"/*.mjs
if [ "$fast" = 1 ]; then
  say "fast tier: no engine, no sandbox, nothing marked slow"
  exec .venv/bin/python -m pytest -m "not engine and not sandbox and not slow" "$@"
fi
exec .venv/bin/python -m pytest "$@"
