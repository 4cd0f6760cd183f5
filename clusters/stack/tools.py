"""Running the command-line tools a real cluster needs (kind, helm): retries with backoff on
transient failures, and ClusterUnavailable carrying the tool's stderr on hard ones, so that a
setup failure is reported as such and never as an agent's failure."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from core.errors import ClusterUnavailable

INSTALL_HINTS = {
    "kind": "install kind (https://kind.sigs.k8s.io/docs/user/quick-start/#installation, e.g. "
            "`go install sigs.k8s.io/kind@v0.23.0`) and make sure Docker is running",
    "helm": "install helm 3 (https://helm.sh/docs/intro/install/)",
    "kubectl": "install kubectl (https://kubernetes.io/docs/tasks/tools/)",
}

# Failures worth another try: the network, the Docker daemon or the API server being briefly away.
TRANSIENT = re.compile(
    r"timed? ?out|timeout|connection (refused|reset)|temporarily unavailable|TLS handshake|"
    r"i/o timeout|EOF|too many requests|503|502|504|context deadline exceeded|"
    r"failed to download|Internal error occurred|try again",
    re.IGNORECASE,
)


@dataclass
class ToolResult:
    argv: list[str]
    stdout: str
    stderr: str


def require_tool(executable: str) -> str:
    """The tool's full path, or one sentence saying how to install it."""
    path = shutil.which(executable)
    if path is None:
        name = executable.rsplit("/", 1)[-1]
        hint = INSTALL_HINTS.get(name, f"install {name}")
        raise ClusterUnavailable(f"'{executable}' was not found on PATH: {hint}.")
    return path


def run_tool(
    argv: Sequence[str],
    *,
    what: str,
    retries: int = 3,
    backoff: float = 2.0,
    timeout: float = 900.0,
    input_text: str | None = None,
) -> ToolResult:
    """Run `argv`; retry transient failures with exponential backoff (backoff, 2×, 4× …)."""
    argv = [require_tool(argv[0]), *argv[1:]]
    attempt = 0
    while True:
        attempt += 1
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input_text)
        except subprocess.TimeoutExpired as exc:
            stderr = f"timed out after {timeout:.0f} s"
            if attempt > retries:
                raise ClusterUnavailable(f"{what} failed: {' '.join(argv)}: {stderr}") from exc
        else:
            if done.returncode == 0:
                return ToolResult(list(argv), done.stdout, done.stderr)
            stderr = done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}"
            if attempt > retries or not TRANSIENT.search(stderr):
                tries = f" after {attempt} attempts" if attempt > 1 else ""
                raise ClusterUnavailable(f"{what} failed{tries}: {stderr[-2000:]}")
        time.sleep(backoff * 2 ** (attempt - 1))
