"""The objects a diagnosis can blame: an application's Kubernetes objects, each under the component
it belongs to. A diagnosis quotes evidence by many names (a pod 'geo-7c9d5b8f4-q8wzt', its
ReplicaSet, its container 'hotel-reserv-geo-mongo', its claim 'geo-pvc'); naming one of them names
the workload that owns it, and a word that names no object of the inventory ('anti-affinity',
'command-line') names no component at all.

    app_inventory(app) -> {object name: owning component}
    app_object_names(app) -> {component, ...}

Owners: a workload owns its containers (and init containers) and the PersistentVolumeClaims it
mounts; every other object (Service, ConfigMap, Secret, NetworkPolicy, Role...) is its own component,
and so are the components the catalog's ground truths name and the cluster's own (CLUSTER_OBJECTS). Pod and ReplicaSet names are not listed:
they are the owner's name with Kubernetes' hash suffixes, which the reader recognises
(farm.oracles.claims.POD_SUFFIX).
"""

from __future__ import annotations

from functools import cache
from typing import Any

WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"}
# The cluster's own components a diagnosis may blame besides the application's (the kubelet and the
# container runtime are the node's, so they are not here).
CLUSTER_OBJECTS = ("kube-proxy", "coredns", "kube-dns", "kube-apiserver", "kube-scheduler", "kube-controller-manager",
                   "calico", "cilium", "flannel", "metrics-server", "ingress-nginx")


def _pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc.get("spec") or {}
    if doc.get("kind") == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    return ((spec.get("template") or {}).get("spec")) or {}


def owned_names(doc: dict[str, Any]) -> set[str]:
    """The names a workload's pods carry that are not the workload's own: its containers' and the
    claims it mounts."""
    pod = _pod_spec(doc)
    names = {str(c.get("name", "")).lower() for key in ("containers", "initContainers")
             for c in pod.get(key) or [] if isinstance(c, dict)}
    names |= {str((v.get("persistentVolumeClaim") or {}).get("claimName", "")).lower()
              for v in pod.get("volumes") or [] if isinstance(v, dict)}
    return {n for n in names if len(n) > 1}


@cache
def app_inventory(app: str) -> dict[str, str]:
    """Every object name of `app` (manifests and catalog ground truths) mapped to the component
    that owns it; a workload's containers and claims map to the workload. A name two workloads
    share (a container called 'mongo' in every database) maps to neither: it names no one object;
    nor does a one-word container name, which is an ordinary word more often than a name."""
    import yaml  # type: ignore[import-untyped]

    from apps.application import APPS_DIR

    own: dict[str, str] = {}
    owned: dict[str, set[str]] = {}
    for path in sorted((APPS_DIR / app / "manifests").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or not (doc.get("metadata") or {}).get("name"):
                continue
            name = str(doc["metadata"]["name"]).lower()
            if doc.get("kind") != "PersistentVolumeClaim":  # a claim is its workload's (below)
                own[name] = name
            if doc.get("kind") in WORKLOADS:
                for n in owned_names(doc):
                    owned.setdefault(n, set()).add(name)
    try:
        from farm.problems.catalog import load_catalog

        for p in load_catalog().problems:
            if p.app != app:
                continue
            for gt in [p.ground_truth, *p.ground_truth.also]:
                # the app's namespace is where everything is, not an object a diagnosis blames by naming
                # it ('the quota in hotel-reservation'); the problem that faults it names it as its root
                own_name = [] if gt.component_kind == "Namespace" else [gt.component]
                for c in [*own_name, *gt.affected]:
                    if "{" not in c and " " not in c:
                        n = c.lower().split("/", 1)[-1]
                        own[n] = n
    except Exception:  # the catalog is an extra source of names, not a requirement
        pass
    for n in CLUSTER_OBJECTS:
        own.setdefault(n, n)
    for n, owners in owned.items():
        if n not in own and len(owners) == 1 and "-" in n:
            own[n] = next(iter(owners))
    return {n: o for n, o in own.items() if len(n) > 1}


def app_object_names(app: str) -> frozenset[str]:
    """The components of `app`: every object a diagnosis can blame, by its own name."""
    return frozenset(app_inventory(app).values())
