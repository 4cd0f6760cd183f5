#!/usr/bin/env bash
# Sets up the farm on a fresh machine: a virtualenv with the package, and kubectl when the
# machine has none (Debian's kubernetes-client unpacked into .tools/, never replacing a
# kubectl you already have). `--dev` adds the test dependencies and Debian's kubectl 1.20,
# which the tests use whatever else is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
DEV=0
[ "${1:-}" = "--dev" ] && DEV=1
PY=${PYTHON:-python3}

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
if [ "$DEV" = 1 ]; then
  .venv/bin/python -m pip install -q -e '.[dev]'
else
  .venv/bin/python -m pip install -q -e .
fi

debian_kubectl() {
  # Debian's kubernetes-client (kubectl 1.20), unpacked into an ignored project folder.
  [ -x .tools/kubectl-root/usr/bin/kubectl ] && return 0
  command -v apt-get >/dev/null || { echo "setup: no apt-get; install kubectl yourself (https://kubernetes.io/docs/tasks/tools/)" >&2; return 1; }
  mkdir -p .tools
  ( cd .tools
    if ! ls kubernetes-client_*.deb >/dev/null 2>&1; then
      apt-get download kubernetes-client >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get download kubernetes-client >/dev/null; }
    fi
    rm -rf kubectl-root && dpkg-deb -x kubernetes-client_*.deb kubectl-root )
}

if [ "$DEV" = 1 ] || ! command -v kubectl >/dev/null; then
  debian_kubectl
fi
# The report test looks at the rendered page in headless Chromium (Debian's package).
if [ "$DEV" = 1 ] && ! command -v chromium >/dev/null; then
  if command -v apt-get >/dev/null; then
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; } \
      || echo "setup: could not install chromium; the report's browser test will be skipped" >&2
  else
    echo "setup: no apt-get; install chromium for the report's browser test" >&2
  fi
fi
echo "setup: ready ($(.venv/bin/python --version); kubectl: $(command -v kubectl || echo .tools/kubectl-root/usr/bin/kubectl))"
