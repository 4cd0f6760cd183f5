"""kubectl in an OS sandbox (bubblewrap): each agent kubectl call sees a filesystem of only the
kubectl binary, the session's kubeconfig (read-only, credentials inline), a private home for
kubectl's discovery cache and an empty /tmp, in its own PID, IPC and UTS namespaces, as an
unprivileged user with no capabilities. The network stays: kubectl must reach the API server.

The same host requirement holds on every worker (embedded, kind, EKS): a Linux host where
`bwrap` can create mount and user namespaces (Debian's `bubblewrap` package; in a container,
one whose seccomp profile allows namespaces). Where no sandbox can be made the agent session is
refused (SandboxUnavailable, an infrastructure error); FARM_UNSAFE_NO_SANDBOX=1 runs kubectl
unsandboxed on a developer's machine, loudly, and the session record says so."""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from core.errors import InfrastructureError

log = logging.getLogger("farm.interface.sandbox")

UNSAFE_ENV = "FARM_UNSAFE_NO_SANDBOX"
BWRAP_ENV = "FARM_BWRAP"
# Paths inside the sandbox: fixed, so nothing an agent sees names the trial, the problem or the
# worker's folders.
KUBECTL_PATH = "/usr/local/bin/kubectl"
KUBECONFIG_PATH = "/etc/kubectl/config"
HOME_PATH = "/home/agent"
SANDBOX_UID = 65534  # nobody
# What a Go program needs of /etc to resolve a real cluster's host name and trust its CA; none of
# it is the farm's.
HOST_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ssl/certs")
# Where a dynamically linked kubectl's loader and libraries live (the release binary is static).
LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")
PROBE_TIMEOUT_S = 20.0
_PROBED: dict[tuple[str, str], str] = {}  # (bwrap, kubectl) whose sandbox probe passed here -> its Go version
# kubectl is a short process that allocates a few MB: the garbage collector's work is wasted
# (12-26% of a call's CPU, measured by bench/sandbox_bench.py). It runs only when the heap nears
# the memory limit, which Go honours from 1.19; an older kubectl collects less often instead.
GO_MEMORY_LIMIT = "256MiB"


def go_runtime_env(go_version: str) -> tuple[str, ...]:
    """bwrap --setenv arguments tuning the Go runtime of a kubectl built with `go_version`."""
    found = re.match(r"go(\d+)\.(\d+)", go_version)
    if found and (int(found.group(1)), int(found.group(2))) >= (1, 19):
        return ("--setenv", "GOGC", "off", "--setenv", "GOMEMLIMIT", GO_MEMORY_LIMIT)
    return ("--setenv", "GOGC", "400")


class SandboxUnavailable(InfrastructureError):
    """No OS sandbox can be made on this worker: agent sessions are refused, not run unconfined."""

    phase = "agent_session"


def unsafe_opt_out() -> bool:
    return os.environ.get(UNSAFE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def find_bwrap() -> str:
    path = os.environ.get(BWRAP_ENV) or shutil.which("bwrap")
    if not path:
        raise SandboxUnavailable(
            "no sandbox for the agent's kubectl: bubblewrap (bwrap) is not installed; run "
            "`apt-get install bubblewrap` (scripts/setup.sh does), or set FARM_BWRAP to its path")
    return path


def is_dynamic(binary: str) -> bool:
    """True when the ELF file asks for a program interpreter (a dynamic loader)."""
    try:
        with open(binary, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF":
                raise SandboxUnavailable(
                    f"{binary} is not an ELF binary (a wrapper script?): the sandbox holds kubectl alone, "
                    "so FARM_KUBECTL must name the kubectl binary itself")
            is64, little = head[4] == 2, head[5] == 1
            end = "<" if little else ">"
            if is64:
                phoff, = struct.unpack(end + "Q", head[32:40])
                phentsize, phnum = struct.unpack(end + "HH", head[54:58])
            else:
                phoff, = struct.unpack(end + "I", head[28:32])
                phentsize, phnum = struct.unpack(end + "HH", head[42:46])
            for i in range(phnum):
                f.seek(phoff + i * phentsize)
                p_type, = struct.unpack(end + "I", f.read(4))
                if p_type == 3:  # PT_INTERP
                    return True
    except (OSError, struct.error):
        return True
    return False


def inline_kubeconfig(path: Path) -> str:
    """The kubeconfig with every file it names (CA, client certificate and key, token file) read
    in, so the sandbox needs no file but this one. Credential plugins cannot run in the sandbox."""
    try:
        doc: dict[str, Any] = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SandboxUnavailable(f"cannot read the agent's kubeconfig: {exc}") from None
    base = path.parent

    def read(name: str) -> bytes:
        p = Path(name)
        try:
            return (p if p.is_absolute() else base / p).read_bytes()
        except OSError as exc:
            raise SandboxUnavailable(f"the agent's kubeconfig names a file that cannot be read: {exc}") from None

    for entry in doc.get("clusters") or []:
        cluster = entry.get("cluster") or {}
        if "certificate-authority" in cluster:
            cluster["certificate-authority-data"] = base64.b64encode(read(cluster.pop("certificate-authority"))).decode()
    for entry in doc.get("users") or []:
        user = entry.get("user") or {}
        for key in ("client-certificate", "client-key"):
            if key in user:
                user[f"{key}-data"] = base64.b64encode(read(user.pop(key))).decode()
        if "tokenFile" in user:
            user["token"] = read(user.pop("tokenFile")).decode().strip()
        if "exec" in user or "auth-provider" in user:
            raise SandboxUnavailable("the agent's kubeconfig uses a credential plugin (exec/auth-provider), "
                                     "which cannot run in the sandbox; give the agent a token")
    return yaml.safe_dump(doc, sort_keys=False)


class Sandbox:
    """One session's sandbox: `wrap(args)` turns kubectl's arguments into the command to run.
    `close()` removes its private folder (the kubeconfig copy and kubectl's home)."""

    def __init__(self, binary: str, kubeconfig: Path, *, bwrap: str | None = None) -> None:
        self.bwrap = bwrap or find_bwrap()
        self.binary = str(Path(binary).resolve())
        self.kubeconfig = kubeconfig
        # A neutral name: the agent never sees it, but neither should a log reader learn the trial.
        self._dir = Path(tempfile.mkdtemp(prefix="kubectl-sandbox-"))
        self._home = self._dir / "home"
        self._home.mkdir()
        self._config = self._dir / "config"
        self._config_stamp: tuple[int, int] | None = None
        self._refresh_config()
        binds = ["--ro-bind", self.binary, KUBECTL_PATH, "--ro-bind", str(self._config), KUBECONFIG_PATH,
                 "--bind", str(self._home), HOME_PATH]
        for host in HOST_FILES:
            if os.path.exists(host):
                binds += ["--ro-bind", host, host]
        if is_dynamic(self.binary):
            for lib in LIBRARY_DIRS:
                if os.path.isdir(lib):
                    binds += ["--ro-bind", lib, lib]
        self._binds = binds
        self._prefix = self._build_prefix(())

    def _build_prefix(self, go_env: tuple[str, ...]) -> list[str]:
        return [
            self.bwrap, "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", *self._binds,
            "--chdir", HOME_PATH, "--clearenv",
            "--setenv", "PATH", str(Path(KUBECTL_PATH).parent), "--setenv", "HOME", HOME_PATH,
            "--setenv", "KUBECONFIG", KUBECONFIG_PATH, "--setenv", "TMPDIR", "/tmp", *go_env,
            "--hostname", "sandbox", "--",
        ]

    @property
    def home(self) -> Path:
        """kubectl's home inside the sandbox, on the worker's side."""
        return self._home

    def _refresh_config(self) -> None:
        # The provider may re-issue the agent's token into the same file (after a cluster restore).
        try:
            st = self.kubeconfig.stat()
        except OSError as exc:
            raise SandboxUnavailable(f"cannot read the agent's kubeconfig: {exc}") from None
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._config_stamp:
            return
        text = inline_kubeconfig(self.kubeconfig)
        tmp = self._dir / "config.new"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(tmp, self._config)  # each call binds the path afresh, so it sees the new file
        self._config_stamp = stamp

    def wrap(self, args: list[str]) -> list[str]:
        """The command line running kubectl with `args` inside the sandbox."""
        self._refresh_config()
        return [*self._prefix, KUBECTL_PATH, *args]

    def probe(self) -> None:
        """Run kubectl once in the sandbox and check it cannot see the host: SandboxUnavailable when
        the sandbox cannot be made here. What it checks is the host's, not the session's: once it
        passed for a bwrap and a kubectl, later sessions of this process skip it."""
        key = (self.bwrap, self.binary)
        if key in _PROBED:
            self._prefix = self._build_prefix(go_runtime_env(_PROBED[key]))
            return
        try:
            proc = subprocess.run(self.wrap(["version", "--client", "-o", "json"]), capture_output=True,
                                  text=True, timeout=PROBE_TIMEOUT_S, env={}, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"the kubectl sandbox (bwrap) could not run: {exc}") from None
        if proc.returncode != 0 or "clientVersion" not in proc.stdout:
            raise SandboxUnavailable(
                f"the kubectl sandbox (bwrap) failed on this host (exit {proc.returncode}: "
                f"{(proc.stderr or proc.stdout).strip()[:300]}); bwrap needs user and mount namespaces "
                f"(in a container: a seccomp profile that allows them). {UNSAFE_ENV}=1 runs kubectl "
                "unsandboxed on a developer's machine only")
        try:
            go = str(json.loads(proc.stdout)["clientVersion"].get("goVersion") or "")
        except (ValueError, KeyError, TypeError):
            go = ""
        _PROBED[key] = go
        self._prefix = self._build_prefix(go_runtime_env(go))

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)
