"""What each image ships: its base (busybox, Alpine, Debian, Ubuntu, distroless...), the shell at
/bin/sh if any, the everyday tools on PATH and the image's own programs. A command that is not
there fails as runc says; one that is runs in kubesim/userland/tools.py or, for the image's
own programs (mongo, psql, redis-cli...), in the container's behaviour model."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kubesim.apps.model import IMAGES, ImageInfo, _load_builtin, normalize_image

# busybox's applets that tools.py implements (a busybox build has ~400; these are the ones an SRE types)
BUSYBOX = frozenset({
    "sh", "ash", "cat", "ls", "env", "printenv", "echo", "printf", "ps", "hostname", "nslookup", "wget", "df", "free",
    "top", "date", "grep", "egrep", "head", "tail", "wc", "sort", "uniq", "cut", "tr", "sed", "awk", "sleep", "true",
    "false", "id", "whoami", "uname", "pwd", "test", "[", "which", "uptime", "base64", "seq", "tee", "basename",
    "dirname", "nc", "ping", "kill", "touch", "mkdir", "rm", "xargs", "mount", "stat", "du", "netstat", "busybox", "tar",
    "dd"})
COREUTILS = frozenset({
    "sh", "dash", "bash", "cat", "ls", "env", "printenv", "echo", "printf", "hostname", "df", "date", "grep", "egrep",
    "head", "tail", "wc", "sort", "uniq", "cut", "tr", "sed", "awk", "mawk", "sleep", "true", "false", "id", "whoami",
    "uname", "pwd", "test", "[", "which", "base64", "seq", "tee", "basename", "dirname", "touch", "mkdir", "rm",
    "xargs", "mount", "stat", "du", "getent", "tar", "dd"})
PROCPS = frozenset({"ps", "free", "top", "uptime", "kill"})
NET = frozenset({"curl", "wget"})

OS_RELEASE = {
    "alpine": 'NAME="Alpine Linux"\nID=alpine\nVERSION_ID=3.20.3\nPRETTY_NAME="Alpine Linux v3.20"\n'
              'HOME_URL="https://alpinelinux.org/"\nBUG_REPORT_URL="https://gitlab.alpinelinux.org/alpine/aports/-/issues"\n',
    "debian": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\n'
              'VERSION="12 (bookworm)"\nVERSION_CODENAME=bookworm\nID=debian\nHOME_URL="https://www.debian.org/"\n',
    "ubuntu": 'NAME="Ubuntu"\nVERSION="20.04.6 LTS (Focal Fossa)"\nID=ubuntu\nID_LIKE=debian\n'
              'PRETTY_NAME="Ubuntu 20.04.6 LTS"\nVERSION_ID="20.04"\nVERSION_CODENAME=focal\n',
    "distroless": 'PRETTY_NAME="Distroless"\nNAME="Debian GNU/Linux"\nID="debian"\nVERSION_ID="12"\n'
                  'VERSION="Debian GNU/Linux 12 (bookworm)"\nHOME_URL="https://github.com/GoogleContainerTools/distroless"\n',
}
# files an image ships that a client reads or writes beside (kr8s's suite writes into nginx's docroot)
IMAGE_FILES: dict[str, dict[str, str]] = {
    "docker.io/library/nginx": {"/usr/share/nginx/html/index.html": (
        "<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n<style>\n"
        "html { color-scheme: light dark; }\nbody { width: 35em; margin: 0 auto;\n"
        "font-family: Tahoma, Verdana, Arial, sans-serif; }\n</style>\n</head>\n<body>\n"
        "<h1>Welcome to nginx!</h1>\n<p>If you see this page, the nginx web server is successfully installed and\n"
        "working. Further configuration is required.</p>\n\n<p>For online documentation and support please refer to\n"
        "<a href=\"http://nginx.org/\">nginx.org</a>.<br/>\nCommercial support is available at\n"
        "<a href=\"http://nginx.com/\">nginx.com</a>.</p>\n\n<p><em>Thank you for using nginx.</em></p>\n"
        "</body>\n</html>\n")},
}
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_ON_PATH = tuple(PATH.split(":"))


@dataclass(frozen=True)
class Userland:
    """One image's userland: `family` names its base, `tools` the generic programs on PATH,
    `programs` the image's own (run by its behaviour model), `shell` the path of /bin/sh."""

    family: str  # busybox | alpine | debian | ubuntu | distroless | scratch
    tools: frozenset[str]
    programs: tuple[str, ...]
    shell: str | None

    def resolve(self, name: str) -> tuple[str, str] | None:
        """`name` as execve finds it: (kind, program) with kind "tool" or "program", else None."""
        base = name.rsplit("/", 1)[-1]
        if "/" in name:
            directory = name.rsplit("/", 1)[0] or "/"
            for p in self.programs:
                if p == name or ("/" not in p and base == p and directory in _ON_PATH):
                    return "program", base
            if base in self.tools and directory in _ON_PATH:
                return "tool", base
            return None
        for p in self.programs:
            if "/" not in p and p == base:
                return "program", base
            if "/" in p and p.rsplit("/", 1)[0] in _ON_PATH and p.rsplit("/", 1)[1] == base:
                return "program", base
        if base in self.tools:
            return "tool", base
        return None

    def bin_names(self) -> list[str]:
        names = set(self.tools) | {p.rsplit("/", 1)[-1] for p in self.programs if "/" not in p or
                                   p.rsplit("/", 1)[0] in _ON_PATH}
        return sorted(names)


# Images whose base is not what ImageInfo alone tells (repository → family and extras); the
# OpenTelemetry demo's services are told apart by the tag suffix.
_FAMILY = {
    "docker.io/library/busybox": ("busybox", frozenset()),
    "docker.io/library/alpine": ("alpine", frozenset()),
    "docker.io/curlimages/curl": ("alpine", frozenset({"curl"})),
    "docker.io/hashicorp/consul": ("alpine", frozenset({"curl"})),
    "docker.io/library/ubuntu": ("ubuntu", frozenset()),
    "docker.io/library/debian": ("debian", frozenset()),
    "docker.io/library/mongo": ("ubuntu", PROCPS),  # the Dockerfile installs procps for its entrypoint
    "docker.io/library/memcached": ("debian", frozenset()),
    "docker.io/library/redis": ("debian", frozenset()),
    "docker.io/valkey/valkey": ("debian", frozenset()),
    "docker.io/library/postgres": ("debian", frozenset()),
    "docker.io/library/mysql": ("debian", frozenset()),
    "docker.io/library/nginx": ("debian", frozenset({"curl"})),
    "docker.io/library/python": ("debian", PROCPS | NET),
    "docker.io/deathstarbench/wrk2-client": ("ubuntu", PROCPS | NET),
    "docker.io/pingcap/pd": ("alpine", frozenset()),
    "docker.io/pingcap/tikv": ("alpine", frozenset()),
    "docker.io/pingcap/tidb": ("alpine", frozenset()),
    "docker.io/pingcap/tidb-operator": ("alpine", frozenset()),
    "docker.io/pingcap/go-ycsb": ("alpine", frozenset()),
    "docker.io/groundnuty/k8s-wait-for": ("alpine", frozenset()),
    "docker.io/polinux/stress": ("alpine", frozenset()),
    "docker.io/progrium/stress": ("busybox", frozenset()),
    # hotel-reservation's services run in the golang image they are built in (buildpack-deps:scm)
    **{f"docker.io/{r}": ("debian", PROCPS | NET) for r in ("deathstarbench/hotel-reservation",
                                                           "yinfangchen/hotelreservation", "igorrudyk1/hotelreservation")},
    "ghcr.io/sregym/hotel-reservation": ("debian", PROCPS | NET),
}
_OTEL_DEMO = "ghcr.io/open-telemetry/demo"
_OTEL_DISTROLESS = ("checkout", "product-catalog", "payment", "shipping", "fraud-detection")
_OTEL_ALPINE = ("cart", "currency", "frontend", "quote", "image-provider")
_DEFAULT_PROGRAM = {"busybox": "sh", "alpine": "/bin/sh", "ubuntu": "bash", "debian": "bash"}


def _family(info: ImageInfo, tag: str) -> tuple[str, frozenset[str]]:
    if info.repository == _OTEL_DEMO:
        suffix = re.sub(r"^\d+\.\d+\.\d+-?", "", tag)
        if suffix in _OTEL_DISTROLESS:
            return "distroless", frozenset()
        if suffix in _OTEL_ALPINE:
            return "alpine", frozenset()
        return "debian", frozenset()
    if info.repository in _FAMILY:
        family, extra = _FAMILY[info.repository]
        if "alpine" in tag and family != "busybox":
            family = "alpine"
        return family, extra
    if not info.shell:
        return "distroless", frozenset()
    return "debian", frozenset()


def image_files(image: str) -> dict[str, str]:
    return IMAGE_FILES.get(normalize_image(image)[0], {})


def userland_of(image: str) -> Userland:
    """The userland of the image a container runs (an image the registry does not know has none)."""
    _load_builtin()
    repo, tag, _ = normalize_image(image)
    info = IMAGES.get(repo)
    if info is None:
        return Userland("scratch", frozenset(), (), None)
    family, extra = _family(info, tag)
    programs = tuple(p for p in info.executables if p.rsplit("/", 1)[-1] not in BUSYBOX | COREUTILS | PROCPS | NET)
    if repo == "docker.io/library/mongo":
        major = int(tag.split(".")[0]) if tag[:1].isdigit() else 7
        # the legacy shell left the image with 6.0, mongosh came with 5.0
        programs = tuple(p for p in programs if not (p == "mongo" and major >= 6 or p == "mongosh" and major < 5))
    if family == "busybox":
        return Userland(family, BUSYBOX, programs, "/bin/sh")
    if family == "alpine":
        return Userland(family, BUSYBOX | extra, programs, "/bin/sh")
    if family in ("debian", "ubuntu"):
        return Userland(family, COREUTILS | extra, programs, "/bin/sh")
    return Userland(family, frozenset(), programs, None)


def default_argv(image: str, program: str = "") -> list[str]:
    """What the image runs when the pod gives no command (its ENTRYPOINT + CMD); `program` names
    the service binary of an application image whose registry entry lists no executables."""
    _load_builtin()
    repo, _, _ = normalize_image(image)
    info = IMAGES.get(repo)
    land = userland_of(image)
    if info is not None and not info.executables and program:
        return [program]
    if info is not None and info.executables:
        first = info.executables[0]
        if first not in ("sh", "bash") or land.family not in _DEFAULT_PROGRAM:
            return [first]
    return [_DEFAULT_PROGRAM.get(land.family, "/pause")]
