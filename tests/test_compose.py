"""docker-compose.yml parses and its services carry the farm's environment; the Dockerfile stage
each service builds provides what it runs (no Docker engine here: the Dockerfile is parsed, and
the kind worker's download step is run by /bin/sh with a fake `curl`)."""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ("redis", "postgres", "minio")
PUBLISHED = {"redis": 6379, "postgres": 5432, "minio": 9000}


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's `${VAR:-default}` and `${VAR}` substitution."""
    def value(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(3)
        return env.get(name) or (default if default is not None else "")
    return re.sub(r"\$\{(\w+)(:-([^}]*))?\}", value, text)


def test_compose_names_the_farm_services():
    doc = compose()
    services = doc["services"]
    for name in ("redis", "postgres", "minio", "flower", "sim-worker"):
        assert name in services, name
    assert services["sim-worker"]["command"][:3] == ["farm", "worker", "--cluster"]
    assert services["flower"]["command"][:4] == ["celery", "-A", "tasks", "flower"]
    for name in ("sim-worker", "flower", "kind-worker"):
        env = services[name]["environment"]
        for var in ("FARM_BROKER_URL", "FARM_DATABASE_URL", "FARM_ARTIFACTS", "AWS_ENDPOINT_URL"):
            assert env.get(var), f"{name} lacks {var}"
    assert services["sim-worker"]["environment"]["FARM_ARTIFACTS"].startswith("s3://")
    assert "/var/run/docker.sock:/var/run/docker.sock" in services["kind-worker"]["volumes"]
    # The worker service scales: no fixed container name or host port.
    assert "container_name" not in services["sim-worker"] and "ports" not in services["sim-worker"]


@pytest.mark.parametrize("bind", [None, "0.0.0.0", "10.1.2.3"])
def test_the_services_other_hosts_need_are_published_on_FARM_BIND(bind: str | None) -> None:
    env = {"FARM_BIND": bind} if bind else {}
    services = yaml.safe_load(interpolate((ROOT / "docker-compose.yml").read_text(), env))["services"]
    expected = bind or "127.0.0.1"
    for name in SERVICES:
        published = {int(p.rsplit(":", 2)[2]): p.rsplit(":", 2)[0] for p in services[name]["ports"]}
        assert published[PUBLISHED[name]] == expected, (name, services[name]["ports"])
    assert services["minio"]["ports"][1].startswith("127.0.0.1:")  # the console never leaves the host
    assert services["flower"]["ports"] == ["127.0.0.1:5555:5555"]  # Flower's API is unauthenticated
    # The kind worker shares the host's network: it reaches the services where they are published.
    kind_env = services["kind-worker"]["environment"]
    assert kind_env["FARM_BROKER_URL"] == f"redis://{expected}:6379/0"
    assert f"@{expected}:5432/" in kind_env["FARM_DATABASE_URL"]
    assert kind_env["AWS_ENDPOINT_URL"] == f"http://{expected}:9000"


# -- the Dockerfile ------------------------------------------------------------------------------

def dockerfile_stages() -> dict[str, dict]:
    """name -> {base, args: {name: default}, instructions: [(keyword, text)]}, in file order."""
    lines: list[str] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        if raw.lstrip().startswith("#") or not raw.strip():
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    stages: dict[str, dict] = {}
    current: dict | None = None
    for line in lines:
        keyword, _, rest = line.strip().partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?", rest.strip(), re.IGNORECASE)
            assert m, line
            current = {"base": m.group(1), "args": {}, "instructions": []}
            stages[m.group(2) or f"stage{len(stages)}"] = current
            continue
        assert current is not None, f"{line!r} before any FROM"
        if keyword == "ARG":
            name, _, default = rest.strip().partition("=")
            current["args"][name] = default
        current["instructions"].append((keyword, rest.strip()))
    return stages


def stage_chain(stages: dict[str, dict], target: str) -> list[str]:
    chain = [target]
    while stages[chain[-1]]["base"] in stages:
        chain.append(stages[chain[-1]]["base"])
    return chain


def test_the_submit_service_reads_the_users_own_specs() -> None:
    submit = compose()["services"]["submit"]
    assert submit["volumes"] == ["${FARM_SPECS:-.}:/specs:ro"]  # the user's folder, the project's by default
    assert submit["working_dir"] == "/specs"
    assert (ROOT / "examples" / "hotel-smoke.yaml").exists()  # the README's command resolves under it


def test_each_service_builds_a_stage_that_exists() -> None:
    stages = dockerfile_stages()
    services = compose()["services"]
    for name in ("flower", "sim-worker", "submit", "kind-worker"):
        build = services[name]["build"]
        assert build["dockerfile"] == "Dockerfile" and build["target"] in stages, name
    assert services["sim-worker"]["build"]["target"] == "farm"
    assert services["kind-worker"]["build"]["target"] == "kind-worker"
    assert services["kind-worker"]["image"] != services["sim-worker"]["image"]  # two images, two tags
    assert stage_chain(stages, "kind-worker")[-1] == "farm"  # the kind worker is the farm plus tools
    farm = stages["farm"]
    assert re.match(r"python:3\.11-slim-\w+$", farm["base"]), "the base names its Debian release"
    assert any(k == "RUN" and "pip install" in t for k, t in farm["instructions"])


TOOLS = {  # tool -> (version ARG, its pattern, the URL it is fetched from)
    "kind": ("KIND_VERSION", r"v\d+\.\d+\.\d+", "https://github.com/kubernetes-sigs/kind/releases/download/"),
    "helm": ("HELM_VERSION", r"v3\.\d+\.\d+", "https://get.helm.sh/helm-"),
    "docker": ("DOCKER_VERSION", r"\d+\.\d+\.\d+", "https://download.docker.com/linux/static/stable/"),
}


def test_the_kind_worker_image_installs_pinned_kind_helm_and_docker() -> None:
    stages = dockerfile_stages()
    final = stages["kind-worker"]["instructions"]
    copies = [t for k, t in final if k == "COPY" and "--from=" in t]
    assert len(copies) == 1, copies
    source_stage = re.search(r"--from=(\S+)", copies[0]).group(1)
    tools = stages[source_stage]
    copied = copies[0].split()[1:]
    assert copied[-1] == "/usr/local/bin/"
    assert sorted(Path(p).name for p in copied[:-1]) == sorted(TOOLS)
    run = " ".join(t for k, t in tools["instructions"] if k == "RUN")
    for tool, (version_arg, pattern, url) in TOOLS.items():
        assert re.fullmatch(pattern, tools["args"][version_arg]), f"{tool} is not pinned to a release"
        for arch in ("AMD64", "ARM64"):
            assert re.fullmatch(r"[0-9a-f]{64}", tools["args"][f"{tool.upper()}_SHA256_{arch}"]), (tool, arch)
        assert url in run and f"${{{version_arg}}}" in run, f"{tool}: not downloaded from {url}"
    assert run.count("sha256sum -c") == len(TOOLS)
    checks = " ".join(t for k, t in final if k == "RUN")
    for command in ("kind version", "helm version", "docker --version"):
        assert command in checks  # the build fails if a tool does not run in the image


def _download_script(out: Path, work: Path) -> tuple[str, dict[str, str]]:
    stages = dockerfile_stages()
    name = re.search(r"--from=(\S+)", next(t for k, t in stages["kind-worker"]["instructions"]
                                            if k == "COPY" and "--from=" in t)).group(1)
    tools = stages[name]
    script = next(t for k, t in tools["instructions"] if k == "RUN" and "sha256sum" in t)
    return script.replace("/out", str(out)).replace("/tmp/dl", str(work)), dict(tools["args"])


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_the_download_step_installs_each_tool_and_refuses_a_changed_one(arch: str, tmp_path: Path) -> None:
    """The RUN step of the tools stage, executed by /bin/sh as the build would, with a fake
    `curl` serving stand-in release files and the checksum ARGs set to theirs."""
    served = tmp_path / "served"
    served.mkdir()
    docker_arch = {"amd64": "x86_64", "arm64": "aarch64"}[arch]
    files = {
        "kind": b"#!/bin/sh\necho kind\n",
        "helm.tar.gz": _tar({f"linux-{arch}/helm": b"#!/bin/sh\necho helm\n", f"linux-{arch}/LICENSE": b"x"}),
        "docker.tgz": _tar({"docker/docker": b"#!/bin/sh\necho docker\n", "docker/dockerd": b"daemon"}),
    }
    for name, data in files.items():
        (served / name).write_bytes(data)
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "curl.log"
    (fake / "curl").write_text(
        "#!/bin/sh\n"  # curl -fsSLo FILE URL
        f'echo "$3" >> {log}\n'
        f'case "$3" in */kind-linux-*) src=kind ;; *helm-*) src=helm.tar.gz ;; *docker-*) src=docker.tgz ;; esac\n'
        f'cp "{served}/$src" "$2"\n')
    (fake / "curl").chmod(0o755)
    out, work = tmp_path / "out", tmp_path / "dl"
    script, args = _download_script(out, work)
    env = {**args, "TARGETARCH": arch, "PATH": f"{fake}:/usr/bin:/bin"}
    for tool, name in (("KIND", "kind"), ("HELM", "helm.tar.gz"), ("DOCKER", "docker.tgz")):
        env[f"{tool}_SHA256_{arch.upper()}"] = hashlib.sha256(files[name]).hexdigest()
    done = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["docker", "helm", "kind"]  # the daemon is not copied
    for tool in ("kind", "helm", "docker"):
        assert os.access(out / tool, os.X_OK)
        assert subprocess.run([str(out / tool)], capture_output=True, text=True).stdout.strip() == tool
    urls = log.read_text().split()
    assert urls == [
        f"https://github.com/kubernetes-sigs/kind/releases/download/{args['KIND_VERSION']}/kind-linux-{arch}",
        f"https://get.helm.sh/helm-{args['HELM_VERSION']}-linux-{arch}.tar.gz",
        f"https://download.docker.com/linux/static/stable/{docker_arch}/docker-{args['DOCKER_VERSION']}.tgz",
    ]
    assert not work.exists()  # nothing left behind in the layer

    # A changed download (the pinned checksum, a different file) stops the build.
    for path in (out, log):
        subprocess.run(["rm", "-rf", str(path)], check=True)
    (served / "helm.tar.gz").write_bytes(_tar({f"linux-{arch}/helm": b"#!/bin/sh\necho tampered\n"}))
    failed = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert failed.returncode != 0
    assert "FAILED" in failed.stdout + failed.stderr
    assert not (out / "helm").exists()


def test_an_architecture_without_checksums_is_one_clear_error(tmp_path: Path) -> None:
    script, args = _download_script(tmp_path / "out", tmp_path / "dl")
    done = subprocess.run(["/bin/sh", "-c", script], env={**args, "TARGETARCH": "s390x", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == "no pinned kind/helm/docker checksums for architecture 's390x'"
