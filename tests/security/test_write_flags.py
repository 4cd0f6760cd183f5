"""Writes the interface does not see: every flag the allow-list accepts on a verb that may write,
run by the real kubectl (1.20 and 1.33) through the MCP kubectl tool against the emulated cluster.
For each command, what kubectl actually did (the API server's resourceVersion moved, read with
the cluster's admin credentials) must be what the interface recorded (a Mutation, with its undo).
An adversary's `--dry-run=False` is a write to kubectl; it must be one to the interface too.

Boolean switches are tried bare and in spellings pflag reads but a hand-written parser may not
(`=False`, `=T`); --dry-run in every spelling kubectl's GetDryRunStrategy reads, and some it
refuses; value flags once with a value of their kind."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusters.kube import Kube
from clusters.emulated import SimHandle
from farm.interface import AgentInterface, allowlist
from farm.interface.client import ToolClient
from farm.pytest_plugin import SimClusters, as_built

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]
NS = "hotel-reservation"
DRY_RUNS = ("", "=true", "=True", "=TRUE", "=T", "=t", "=1", "=false", "=False", "=FALSE", "=F", "=f", "=0",
            "=client", "=server", "=none", "=unchanged", "=yes", "=Client")
# Every spelling on these verbs; the others take one of each kind (what differs between verbs is
# which flags they accept and which API calls kubectl makes).
EVERY_DRY_RUN = ("create", "patch", "delete")
SOME_DRY_RUNS = ("", "=T", "=False", "=0", "=F", "=server", "=none", "=yes")
# A value of the right kind for each value flag; one that kubectl rejects is a fine row too (it
# must then write nothing, and the interface record nothing).
VALUES = {
    "namespace": NS, "output": "name", "template": "{{.metadata.name}}", "field-manager": "sre",
    "selector": "io.kompose.service=geo", "field-selector": "metadata.name=geo", "filename": "-",
    "replicas": "1", "current-replicas": "1", "resource-version": "1", "timeout": "5s", "grace-period": "0",
    "env": "ROW=1", "containers": "*", "keys": "a", "from": "configmap/row-src", "prefix": "P_",
    "limits": "cpu=200m", "requests": "cpu=100m", "patch": '{"metadata":{"labels":{"row":"p"}}}',
    "type": "merge", "subresource": "status", "to-revision": "1", "revision": "1", "image": "busybox",
    "port": "8080", "restart": "Never", "labels": "row=l", "overrides": "{}", "image-pull-policy": "Never",
    "annotations": "row=a", "pod-running-timeout": "1s", "serviceaccount": "default", "target-port": "8080",
    "name": "row-name", "protocol": "TCP", "external-ip": "10.0.0.9", "cluster-ip": "", "load-balancer-ip": "",
    "session-affinity": "None", "min": "1", "max": "2", "cpu-percent": "80", "from-literal": "k=v",
    "schedule": "*/5 * * * *", "tcp": "80:8080", "clusterip": "None", "node-port": "30080", "hard": "pods=5",
    "scopes": "BestEffort", "role": "view", "clusterrole": "view", "group": "g", "verb": "get",
    "resource": "pods", "resource-name": "x", "docker-server": "r", "docker-username": "u",
    "docker-password": "p", "docker-email": "e@x", "min-available": "1", "max-unavailable": "1",
    "value": "10", "description": "d", "pod-selector": "app=none", "skip-wait-for-delete-timeout": "0",
    "chunk-size": "10", "raw": "/api/v1/namespaces/hotel-reservation/configmaps",
}


@dataclass
class Base:
    """A command that writes each time it runs ({n}: the row's number), what it needs first
    (done with the admin's credentials), and a manifest for `-f -`."""

    command: str
    prepare: Callable[[Kube, int, list[str]], None] | None = None
    manifest: str | None = None


def _configmap(kube: Kube, name: str) -> None:
    kube.delete("ConfigMap", NS, name)
    kube.create("ConfigMap", NS, {"metadata": {"name": name}, "data": {"k": "v"}})


def _cordoned(value: bool) -> Callable[[Kube, int, list[str]], None]:
    def prepare(kube: Kube, n: int, workers: list[str]) -> None:
        kube.patch("Node", "", workers[0], {"spec": {"unschedulable": value}})
    return prepare


CM_MANIFEST = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: row-applied\ndata:\n  n: '{n}'\n"
BASES: dict[str, Base] = {
    "apply": Base("apply -f -", manifest=CM_MANIFEST),
    "replace": Base("replace -f -", manifest=CM_MANIFEST,
                    prepare=lambda kube, n, w: _configmap(kube, "row-applied")),
    "create": Base("create configmap row-c{n} --from-literal=a=b"),
    "delete": Base("delete configmap row-d{n}", prepare=lambda kube, n, w: _configmap(kube, f"row-d{n}")),
    "patch": Base("patch configmap row-src -p '{{\"data\":{{\"n\":\"{n}\"}}}}'",
                  prepare=lambda kube, n, w: _configmap(kube, "row-src")),
    "scale": Base("scale deployment geo --replicas=2",
                  prepare=lambda kube, n, w: kube.patch("Deployment", NS, "geo", {"spec": {"replicas": 1}})),
    "set": Base("set env deployment/geo ROW={n}"),
    "label": Base("label configmap row-src row={n} --overwrite", prepare=lambda kube, n, w: _configmap(kube, "row-src")),
    "annotate": Base("annotate configmap row-src row={n} --overwrite",
                     prepare=lambda kube, n, w: _configmap(kube, "row-src")),
    "autoscale": Base("autoscale deployment geo --max=3 --name=row-h{n}"),
    "expose": Base("expose deployment geo --port=8083 --name=row-e{n}"),
    "run": Base("run row-r{n} --image=busybox --restart=Never"),
    # (restart writes the wall clock's second: two in one second would be one write)
    "rollout": Base("rollout restart deployment/geo", prepare=lambda kube, n, w: kube.patch(
        "Deployment", NS, "geo",
        {"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": None}}}}})),
    "taint": Base("taint nodes {worker} row{n}=v:NoSchedule"),
    "cordon": Base("cordon {worker}", prepare=_cordoned(False)),
    "uncordon": Base("uncordon {worker}", prepare=_cordoned(True)),
    "drain": Base("drain {worker} --ignore-daemonsets --force --delete-emptydir-data --pod-selector=row=none",
                  prepare=_cordoned(False)),
}


def _rows(verb: str) -> list[str]:
    """The extra flag of each row for `verb`: every flag its allow-list accepts."""
    spec = {**allowlist.GLOBAL, **allowlist.VERBS[verb]}
    rows = [""]
    for long, (kind, short) in sorted(spec.items()):
        if long == "dry-run":
            rows += [f"--dry-run{v}" for v in (DRY_RUNS if verb in EVERY_DRY_RUN else SOME_DRY_RUNS)]
        elif kind == allowlist.B:
            rows += [f"--{long}", f"--{long}=False", f"--{long}=T"] + ([f"-{short}"] if short else [])
        elif long != "filename" or verb in ("apply", "replace"):
            rows.append(f"--{long}={VALUES.get(long, 'x')}")
    return rows


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served("hotel-reservation", seed=23, agent=True)


@pytest.fixture()
def session(cluster: SimHandle, kubectl_binary: Path) -> Iterator[tuple[AgentInterface, ToolClient, Kube]]:
    as_built(cluster)
    iface = AgentInterface(cluster, NS, "t-writeflags", kubectl_binary=str(kubectl_binary), kubectl_timeout_s=20)
    url, token = iface.start()
    try:
        with ToolClient(url, token) as tools, cluster.api_client() as api:
            yield iface, tools, Kube(api)
    finally:
        iface.stop()


def _version(kube: Kube) -> int:
    listed = kube.request("GET", f"/api/v1/namespaces/{NS}/configmaps?limit=1")
    return int(listed["metadata"]["resourceVersion"])


@pytest.mark.parametrize("verb", sorted(BASES))
def test_every_write_kubectl_makes_is_recorded_and_no_other(session: tuple[AgentInterface, ToolClient, Kube],
                                                            verb: str) -> None:
    iface, tools, kube = session
    workers = sorted(n["metadata"]["name"] for n in kube.list("Node") if "control-plane" not in n["metadata"]["name"])
    base = BASES[verb]
    mismatches, table, texts = [], [], {}
    for n, extra in enumerate(_rows(verb)):
        if base.prepare is not None:
            base.prepare(kube, n, workers)
        command = base.command.format(n=n, worker=workers[0]) + (f" {extra}" if extra else "")
        manifest = base.manifest.replace("{n}", str(n)) if base.manifest else None
        recorded_before, version = len(iface.record.mutations), _version(kube)
        text, is_error = tools.call("kubectl", command=command, manifest=manifest)
        wrote = _version(kube) != version
        recorded = len(iface.record.mutations) > recorded_before
        table.append((extra, wrote))
        texts[extra] = f"{command} -> {text.strip()[:200]}"
        if not extra:
            base_text = text
        if wrote != recorded:
            mismatches.append(f"{command!r}: kubectl {'wrote' if wrote else 'did not write'}, the interface "
                              f"{'recorded' if recorded else 'did not record'} a change ({text.strip()[:160]!r})")
    assert not mismatches, f"{len(mismatches)} of {len(table)} commands:\n" + "\n".join(mismatches)
    # The table is not vacuous: the base command and its --dry-run=False write, a client dry
    # run does not.
    wrote = dict(table)
    if not wrote[""] and "UnsupportedMediaType" in base_text:
        pytest.skip(f"the emulated API server cannot decode this kubectl's request: {base_text[:200]}")
    expected = {"": True, "--dry-run=False": True, "--dry-run=0": True, "--dry-run=F": True,
                "--dry-run=T": False, "--dry-run=server": False, "--dry-run=yes": False}
    # (a version of kubectl without --dry-run on this verb refuses it: nothing to expect there)
    expected = {row: w for row, w in expected.items() if "unknown flag: --dry-run" not in texts[row]}
    got = {row: wrote[row] for row in expected}
    assert got == expected, [texts[row] for row in expected if got[row] != expected[row]]
