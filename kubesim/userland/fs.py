"""The filesystem a container shows: the files its image has (/etc/os-release, /etc/passwd), the
ones the kubelet writes (/etc/hosts, /etc/resolv.conf, /etc/hostname, the service account's
token, ca.crt and namespace), its ConfigMap and Secret mounts, /proc/1 from the container spec,
and what commands wrote since it started (kept per container, gone with a restart)."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim.runtime import DOMAIN, NODE_RESOLVER, local_port_range
from kubesim.userland.images import OS_RELEASE, PATH, Userland, default_argv, image_files

if TYPE_CHECKING:
    from kubesim.apps.model import StartContext

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_SECONDS = 3607  # what a projected service account token volume asks for


def service_links(ctx: StartContext) -> dict[str, str]:
    """The docker-link style variables kubelet adds for every Service of the namespace
    (enableServiceLinks), and for the API server's `kubernetes` Service."""
    spec = ctx.pod.get("spec") or {}
    out: dict[str, str] = {}
    store = ctx.cluster.store
    services = list(store.list("services", ctx.namespace)) if spec.get("enableServiceLinks", True) else []
    kube = store.try_get("services", "default", "kubernetes")
    if kube is not None and ctx.namespace != "default":
        services.append(kube)
    for svc in services:
        ip = (svc.get("spec") or {}).get("clusterIP", "")
        ports = (svc.get("spec") or {}).get("ports") or []
        if not ip or ip == "None" or not ports:
            continue
        name = svc["metadata"]["name"].upper().replace("-", "_")
        first = ports[0]
        proto = first.get("protocol", "TCP")
        out[f"{name}_SERVICE_HOST"] = ip
        out[f"{name}_SERVICE_PORT"] = str(first.get("port"))
        out[f"{name}_PORT"] = f"{proto.lower()}://{ip}:{first.get('port')}"
        for p in ports:
            pname = p.get("name")
            if pname:
                out[f"{name}_SERVICE_PORT_{pname.upper().replace('-', '_')}"] = str(p.get("port"))
            key = f"{name}_PORT_{p.get('port')}_{p.get('protocol', 'TCP')}"
            out[key] = f"{p.get('protocol', 'TCP').lower()}://{ip}:{p.get('port')}"
            out[f"{key}_PROTO"] = p.get("protocol", "TCP").lower()
            out[f"{key}_PORT"] = str(p.get("port"))
            out[f"{key}_ADDR"] = ip
    return out


def hostname_of(pod: dict[str, Any]) -> str:
    return (pod.get("spec") or {}).get("hostname") or pod["metadata"]["name"]


def hosts_file(pod: dict[str, Any], ip: str) -> str:
    """/etc/hosts as kubelet writes it (pkg/kubelet/kubelet_pods.go managedHostsFileContent)."""
    spec = pod.get("spec") or {}
    lines = ["# Kubernetes-managed hosts file.", "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback",
             "fe00::0\tip6-localnet", "fe00::0\tip6-mcastprefix", "fe00::1\tip6-allnodes", "fe00::2\tip6-allrouters"]
    host = hostname_of(pod)
    if spec.get("subdomain"):
        lines.append(f"{ip}\t{host}.{spec['subdomain']}.{pod['metadata']['namespace']}.svc.{DOMAIN}\t{host}")
    else:
        lines.append(f"{ip}\t{host}")
    aliases = spec.get("hostAliases") or []
    if aliases:
        lines.append("")
        lines.append("# Entries added by HostAliases.")
        for a in aliases:
            lines.append(f"{a.get('ip', '')}\t" + "\t".join(a.get("hostnames") or []))
    return "\n".join(lines) + "\n"


def resolv_conf(ctx: StartContext) -> str:
    server, search = ctx.cluster.network._resolver(ctx.pod)
    spec = ctx.pod.get("spec") or {}
    options = {"ndots": "5"} if server != NODE_RESOLVER else {}
    for opt in (spec.get("dnsConfig") or {}).get("options") or []:
        options[opt.get("name", "")] = opt.get("value", "")
    text = (f"search {' '.join(search)}\n" if search else "") + f"nameserver {server}\n"
    if options:
        text += "options " + " ".join(k if v in ("", None) else f"{k}:{v}" for k, v in options.items()) + "\n"
    return text


def mounts_token(ctx: StartContext) -> bool:
    spec = ctx.pod.get("spec") or {}
    if "automountServiceAccountToken" in spec:
        return bool(spec["automountServiceAccountToken"])
    sa = ctx.cluster.store.try_get("serviceaccounts", ctx.namespace, spec.get("serviceAccountName") or "default")
    return bool((sa or {}).get("automountServiceAccountToken", True))


def service_account_token(ctx: StartContext, container_id: str) -> str:
    """The pod's own projected token: from the API server's issuer when one serves this cluster
    (SimServer sets `cluster.token_issuer`), so it authenticates as the pod's service account;
    else a token no server accepts. Never any other credential."""
    cluster = ctx.cluster
    spec = ctx.pod.get("spec") or {}
    sa_name = spec.get("serviceAccountName") or "default"
    cache = cluster.kubelet.state.setdefault("sa_tokens", {})
    key = (ctx.pod["metadata"].get("uid", ""), sa_name)
    hit = cache.get(key)
    if hit is not None and hit[1] > ctx.now + 600:
        return str(hit[0])
    issuer = getattr(cluster, "token_issuer", None)
    sa = cluster.store.try_get("serviceaccounts", ctx.namespace, sa_name)
    if issuer is not None and sa is not None:
        token, exp = issuer(ctx.namespace, sa, TOKEN_SECONDS)
    else:
        claims = {"iss": f"https://kubernetes.default.svc.{DOMAIN}", "sub": f"system:serviceaccount:{ctx.namespace}:{sa_name}",
                  "exp": int(ctx.now + TOKEN_SECONDS)}
        body = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":")).encode()).rstrip(b"=").decode()
        sig = hashlib.sha256(f"{container_id}{body}".encode()).hexdigest()[:43]
        token, exp = f"eyJhbGciOiJSUzI1NiIsImtpZCI6InNpbSJ9.{body}.{sig}", ctx.now + TOKEN_SECONDS
    cache[key] = (token, exp)
    return token


def passwd(family: str) -> str:
    if family in ("busybox",):
        return "root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/bin/false\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
    if family == "alpine":
        return ("root:x:0:0:root:/root:/bin/sh\nbin:x:1:1:bin:/bin:/sbin/nologin\ndaemon:x:2:2:daemon:/sbin:/sbin/nologin\n"
                "nobody:x:65534:65534:nobody:/:/sbin/nologin\n")
    return ("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
            "bin:x:2:2:bin:/bin:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")


@dataclass
class Filesystem:
    """Files by absolute path, plus the directories that hold them; `written` is the container's
    own writable layer (shared by every exec into the same container instance)."""

    files: dict[str, str]
    written: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        for path in list(self.files) + list(self.written):
            self._add_parents(path)

    def _add_parents(self, path: str) -> None:
        parts = path.strip("/").split("/")[:-1]
        cur = ""
        self.dirs.add("/")
        for p in parts:
            cur += "/" + p
            self.dirs.add(cur)

    def read(self, path: str) -> str | None:
        path = normalize(path)
        if path in self.written:
            return self.written[path]
        return self.files.get(path)

    def write(self, path: str, text: str, append: bool = False) -> None:
        path = normalize(path)
        self.written[path] = (self.read(path) or "") + text if append else text
        self._add_parents(path)

    def remove(self, path: str) -> bool:
        path = normalize(path)
        found = path in self.written or path in self.files
        self.written.pop(path, None)
        self.files.pop(path, None)
        return found

    def is_dir(self, path: str) -> bool:
        return normalize(path) in self.dirs

    def exists(self, path: str) -> bool:
        return self.read(path) is not None or self.is_dir(path)

    def listdir(self, path: str) -> list[str]:
        path = normalize(path)
        prefix = path.rstrip("/") + "/"
        names = set()
        for p in list(self.files) + list(self.written) + list(self.dirs):
            if p.startswith(prefix) and p != path:
                names.add(p[len(prefix):].split("/", 1)[0])
        return sorted(names)


def normalize(path: str) -> str:
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        out.append(part)
    return "/" + "/".join(out)


def build(ctx: StartContext, land: Userland, env: dict[str, str], argv: list[str], ip: str,
          container_id: str, written: dict[str, str]) -> Filesystem:
    files: dict[str, str] = {}
    if land.family in OS_RELEASE:
        files["/etc/os-release"] = OS_RELEASE[land.family]
    elif land.family == "busybox":
        files["/etc/group"] = "root:x:0:\nnobody:x:65534:\n"
    files["/etc/passwd"] = passwd(land.family)
    files["/etc/hosts"] = hosts_file(ctx.pod, ip)
    files["/etc/resolv.conf"] = resolv_conf(ctx)
    files["/etc/hostname"] = hostname_of(ctx.pod) + "\n"
    if mounts_token(ctx):
        files[f"{SA_DIR}/token"] = service_account_token(ctx, container_id)
        files[f"{SA_DIR}/ca.crt"] = getattr(ctx.cluster, "api_ca_pem", "") or ""
        files[f"{SA_DIR}/namespace"] = ctx.namespace
    files.update(image_files(ctx.container.get("image", "")))
    files.update(ctx.files)
    argv = argv or default_argv(ctx.container.get("image", ""))
    files["/proc/1/cmdline"] = "\0".join(argv) + "\0"
    files["/proc/1/environ"] = "".join(f"{k}={v}\0" for k, v in env.items())
    files["/proc/1/comm"] = argv[0].rsplit("/", 1)[-1][:15] + "\n"
    lo, hi = local_port_range(ctx.pod)
    files["/proc/sys/net/ipv4/ip_local_port_range"] = f"{lo}\t{hi}\n"
    bins = "/bin" if land.family in ("busybox",) else "/usr/bin"
    for name in land.bin_names():
        files.setdefault(f"{bins}/{name}", "")
    for p in land.programs:
        files.setdefault(p if p.startswith("/") else f"/usr/local/bin/{p}", "")
    fs = Filesystem(files, written)
    for d in ("/tmp", "/root", "/home", "/dev", "/proc", "/sys", "/var", "/usr", "/etc", "/run", "/mnt", "/opt"):
        fs.dirs.add(d)
    for m in ctx.container.get("volumeMounts") or []:
        fs.dirs.add(normalize(m.get("mountPath", "/")))
    return fs


def base_env(ctx: StartContext, land: Userland) -> dict[str, str]:
    """The environment of an exec'd process: the image's PATH and HOME, HOSTNAME, the service
    links, then the container's env from its spec (which wins)."""
    env = {"PATH": PATH, "HOSTNAME": hostname_of(ctx.pod)}
    env.update(service_links(ctx))
    env.update(ctx.env)
    env.setdefault("HOME", "/root")
    return env
