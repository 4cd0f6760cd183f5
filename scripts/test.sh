#!/usr/bin/env bash
# Sets up the development environment and runs the whole test suite, slow tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --dev
export LITELLM_LOCAL_MODEL_COST_MAP=True
export PATH="$PWD/.tools/kubectl-root/usr/bin:$PATH"
export PYTHONHASHSEED=0  # the in-process emulated clusters iterate sets: same seed, same run
.venv/bin/python -m ruff check core apps kubesim clusters injectors results farm tasks bench
# The packages of [tool.mypy] in pyproject.toml; incremental through .mypy_cache (ignored by git).
.venv/bin/python -m mypy
# Two processes (one per core); a test module stays on one of them, so its shared cluster does too.
exec .venv/bin/python -m pytest -q -n "${FARM_TEST_PROCESSES:-2}" --dist loadfile "$@"
