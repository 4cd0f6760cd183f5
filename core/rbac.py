"""The vocabulary of RBAC rules the farm writes and the emulated cluster's stock roles are written
in: one rule, the read and write verbs, and the resources an application is made of. Shared
below both, so the agent's grant on a real cluster and the emulator's bootstrap policy cannot
drift apart."""

from __future__ import annotations

from typing import Any

Rule = dict[str, Any]


def policy_rule(groups: list[str], resources: list[str], verbs: list[str]) -> Rule:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
APP_CORE = ["pods", "pods/log", "pods/status", "services", "endpoints", "configmaps", "persistentvolumeclaims",
            "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "events"]
APP_GROUPS = [
    (["apps"], ["deployments", "deployments/scale", "replicasets", "replicasets/scale", "statefulsets",
                "statefulsets/scale", "daemonsets", "controllerrevisions"]),
    (["batch"], ["jobs", "cronjobs"]),
    (["autoscaling"], ["horizontalpodautoscalers"]),
    (["policy"], ["poddisruptionbudgets"]),
    (["networking.k8s.io"], ["networkpolicies", "ingresses"]),
]
