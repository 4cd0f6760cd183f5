"""Discovery documents (/api, /apis, group/version resource lists, /version) and the minimal
OpenAPI v2 document kubectl 1.20 fetches as protobuf before `apply` validates a manifest."""

from __future__ import annotations

from typing import Any

from kubesim.resources import EVENTS_V1, METRICS_TYPES, NODE_LEASES, REVIEW_TYPES
from kubesim.store import ResourceType

ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

# The version of kind's node image the nodes run (nodes.KUBELET_VERSION): one version throughout.
SERVER_VERSION = {
    "major": "1", "minor": "29", "gitVersion": "v1.29.2", "gitCommit": "4b8e819355d791d96b7e9d9efe4cbafae2311c88",
    "gitTreeState": "clean", "buildDate": "2024-02-14T22:24:00Z", "goVersion": "go1.21.7",
    "compiler": "gc", "platform": "linux/amd64",
}

# (kind, group, version, verbs) of sub-resources whose kind is not the parent's.
_SUBRESOURCES: dict[str, tuple[str, str, str, list[str]]] = {
    "log": ("Pod", "", "", ["get"]),
    "exec": ("PodExecOptions", "", "", ["create", "get"]),
    "portforward": ("PodPortForwardOptions", "", "", ["create", "get"]),
    "attach": ("PodAttachOptions", "", "", ["create", "get"]),
    "ephemeralcontainers": ("", "", "", ["get", "patch", "update"]),
    "status": ("", "", "", ["get", "patch", "update"]),
    "scale": ("Scale", "autoscaling", "v1", ["get", "patch", "update"]),
    "eviction": ("Eviction", "policy", "v1", ["create"]),
    "binding": ("Binding", "", "", ["create"]),
    "token": ("TokenRequest", "authentication.k8s.io", "v1", ["create"]),
    "finalize": ("", "", "", ["update"]),
}


def group_versions(types: list[ResourceType], metrics: bool = False) -> dict[str, list[ResourceType]]:
    """groupVersion → its types, core first, then groups in a stable order."""
    out: dict[str, list[ResourceType]] = {}
    for rt in [*types, EVENTS_V1, NODE_LEASES, *REVIEW_TYPES, *(METRICS_TYPES if metrics else ())]:
        out.setdefault(rt.api_version, []).append(rt)
    return out


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def api_group_list(types: list[ResourceType], metrics: bool = False) -> dict[str, Any]:
    groups: dict[str, dict[str, Any]] = {}
    for gv in group_versions(types, metrics):
        if "/" not in gv:
            continue
        group, version = gv.split("/", 1)
        entry = groups.setdefault(group, {"name": group, "versions": []})
        entry["versions"].append({"groupVersion": gv, "version": version})
        entry.setdefault("preferredVersion", {"groupVersion": gv, "version": version})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": list(groups.values())}


def api_group(types: list[ResourceType], group: str, metrics: bool = False) -> dict[str, Any] | None:
    for entry in api_group_list(types, metrics)["groups"]:
        if entry["name"] == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **entry}
    return None


def resource_list(types: list[ResourceType], group_version: str, metrics: bool = False) -> dict[str, Any] | None:
    members = group_versions(types, metrics).get(group_version)
    if members is None:
        return None
    resources: list[dict[str, Any]] = []
    for rt in members:
        verbs = (["create"] if rt in REVIEW_TYPES else ["get", "list"] if rt in METRICS_TYPES or rt is NODE_LEASES else
                 ["create", "delete", "get", "list", "watch"] if rt is EVENTS_V1 else ALL_VERBS)
        entry: dict[str, Any] = {
            "name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced, "kind": rt.kind,
            "verbs": verbs,
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        for sub in rt.subresources:
            kind, group, version, verbs = _SUBRESOURCES[sub]
            sub_entry: dict[str, Any] = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                                         "kind": kind or rt.kind, "verbs": verbs}
            if group:
                sub_entry["group"], sub_entry["version"] = group, version
            resources.append(sub_entry)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}

