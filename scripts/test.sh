#!/usr/bin/env bash
# Sets up the development environment and runs the whole test suite, slow tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --dev
export LITELLM_LOCAL_MODEL_COST_MAP=True
export PATH="$PWD/.tools/kubectl-root/usr/bin:$PATH"
.venv/bin/python -m ruff check farm tasks injectors clusters results bench
exec .venv/bin/python -m pytest -q "$@"
