"""The application's own change history on the emulated cluster (kubesim/controllers/churn.py):
the deployer of each object keeps syncing it, an Update by that manager recorded in managedFields
at times drawn from the seed, without touching its spec (no rollout) or the cluster's own objects."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from clusters.kube import Kube
from kubesim.controllers.churn import ANNOTATION, revision_of
from farm.pytest_plugin import SimClusters, as_built
from tests.conftest import KUBECTLS

NS = "shop"


def _deploy(kube: Kube) -> None:
    kube.ensure_namespace(NS)
    kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "1"}}, NS)
    for i in range(6):
        kube.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"web-{i}"},
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": f"web-{i}"}},
                             "template": {"metadata": {"labels": {"app": f"web-{i}"}},
                                          "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}}, NS)


def _history(kube: Kube) -> dict[str, Any]:
    out = {}
    for kind in ("Deployment", "ConfigMap"):
        for o in kube.list(kind, NS):
            meta = o["metadata"]
            if meta["name"] == "kube-root-ca.crt":  # the cluster's own (its controller manager's)
                continue
            out[f"{kind}/{meta['name']}"] = ((meta.get("annotations") or {}).get(ANNOTATION), meta.get("generation"),
                                             [(e["manager"], e["time"]) for e in meta.get("managedFields") or []
                                              if not e.get("subresource")])
    return out


def test_the_deployer_keeps_syncing_its_objects_the_same_way_for_a_seed(sim_clusters: SimClusters) -> None:
    seen = []
    for _ in range(2):
        cluster = sim_clusters.served(seed=11)
        kube = Kube(cluster.api_client())
        _deploy(kube)
        cluster.advance(1800)
        seen.append(_history(kube))
        uids = {f"{kind}/{o['metadata']['name']}": o["metadata"]["uid"]
                for kind in ("Deployment", "ConfigMap") for o in kube.list(kind, NS)}
        system = kube.list("ConfigMap", "kube-system")
        as_built(cluster)
    history = seen[0]
    assert seen[1] == history  # the same seed, the same history (after a restore too)
    # The revision is a digest, never the count (a count dates an object's first sync); the
    # controller reads the count back from it.
    assert all(rev and not rev.isdigit() for rev, _, _ in history.values())
    revisions = [revision_of(11, uids[name], rev) for name, (rev, _, _) in history.items()]
    assert min(revisions) >= 1 and sum(revisions) >= 2 * len(revisions)  # every object, about every 10 min
    for name, (_, generation, writers) in history.items():
        managers = {m for m, _ in writers}
        assert managers == {writers[0][0]}, (name, writers)  # its deployer's own Updates, no one else's
        assert generation in (None, 1), name  # metadata only: no rollout
    assert not any(ANNOTATION in (o["metadata"].get("annotations") or {}) for o in system)


@pytest.mark.kubectl
def test_what_the_agent_makes_with_kubectl_is_not_synced(sim_clusters: SimClusters) -> None:
    cluster = sim_clusters.served(seed=13)
    kube = Kube(cluster.api_client())
    _deploy(kube)
    kubeconfig = cluster.agent_kubeconfig(NS)
    made = subprocess.run([str(KUBECTLS["1.20"]), f"--kubeconfig={kubeconfig}", "-n", NS, "create", "configmap", "notes",
                           "--from-literal=a=1"], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    cluster.advance(1800)
    history = _history(kube)
    rev, _, writers = history["ConfigMap/notes"]
    assert rev is None and [m for m, _ in writers] == ["kubectl-create"]  # its own write alone
    assert history["ConfigMap/settings"][0] is not None  # not vacuous: the app's own are synced


def test_an_objects_syncs_move_its_last_change_past_its_creation(sim_clusters: SimClusters) -> None:
    cluster = sim_clusters.served(seed=12)
    kube = Kube(cluster.api_client())
    _deploy(kube)
    cluster.advance(90)  # every object's first sync comes within a minute of its creation
    for o in kube.list("Deployment", NS) + kube.list("ConfigMap", NS):
        meta = o["metadata"]
        if meta["name"] == "kube-root-ca.crt":
            continue
        last = max(e["time"] for e in meta["managedFields"] if not e.get("subresource"))
        assert last > meta["creationTimestamp"], meta["name"]
