"""The agent's access to a cluster, the same on every cluster kind: the RBAC rules its account is
granted (the emulated cluster's stock roles are written in the same vocabulary), the farm's
namespaces it never reaches, and `grant_agent`, which creates its account, roles and bindings
through the Kubernetes API and returns its token.

Chaos Mesh's group is absent from every rule on purpose: the agent must not see the fault."""

from __future__ import annotations

import base64
import time
from collections.abc import Sequence
from typing import Any

from clusters.kube import Kube, KubeError, NotFound
from core.errors import ClusterUnavailable, InfrastructureError
from core.namespaces import CHAOS_NAMESPACE, STACK_NAMESPACE
from core.rbac import APP_CORE, APP_GROUPS, READ, WRITE, Rule, policy_rule

AGENT_ACCOUNT = "sre-agent"
AGENT_CLUSTER_ROLE = f"{AGENT_ACCOUNT}-cluster-view"
RBAC_GROUP = "rbac.authorization.k8s.io"
_RBAC_API = f"/apis/{RBAC_GROUP}/v1"

# The cluster's own namespaces and the farm's: never the agent's, never deleted by a reset.
PROTECTED_NAMESPACES = frozenset(
    {"default", "kube-system", "kube-public", "kube-node-lease", "local-path-storage",
     STACK_NAMESPACE, CHAOS_NAMESPACE}
)

# How long a legacy token Secret may take to be filled in by the cluster's token controller.
LEGACY_TOKEN_WAIT_S = 30.0


def agent_role_rules() -> list[Rule]:
    """What the agent's Role grants in its namespace: read and change the application, the
    namespace's quotas and limit ranges and its RBAC, nothing of chaos-mesh.org."""
    return [
        policy_rule([""], [*APP_CORE, "secrets", "resourcequotas", "limitranges"], READ),
        # Quotas too: a capacity cut held in place by a quota (the paper's metastable case) is only
        # fixable by someone allowed to raise it, as the namespace's owners are.
        policy_rule([""], [*APP_CORE, "secrets", "resourcequotas", "limitranges"], WRITE),
        policy_rule([""], ["pods/eviction"], ["create"]),
        policy_rule([""], ["pods/exec"], ["create", "get"]),
        *[policy_rule(g, r, READ + WRITE) for g, r in APP_GROUPS],
        # The custom resources an operator-managed application is declared with (a TidbCluster):
        # the agent manages the application through them, as its owners do.
        policy_rule(["pingcap.com"], ["tidbclusters"], READ + WRITE),
        # Its namespace's RBAC too, as the namespace's owners have it: a component locked out of
        # the API by a dropped rule or binding is theirs to let back in. A Role and RoleBinding
        # here reach this namespace only (a real API server also refuses to grant what the agent
        # does not hold itself).
        policy_rule([RBAC_GROUP], ["roles", "rolebindings"], READ + WRITE),
        policy_rule(["metrics.k8s.io"], ["pods"], READ),
        policy_rule(["events.k8s.io"], ["events"], READ),
    ]


# The label kubeadm (kind) puts on the nodes that run the control plane (and the legacy spelling).
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


def agent_cluster_rules(workers: Sequence[str]) -> list[Rule]:
    """A view of the cluster-scoped objects an SRE needs to diagnose (nodes, volumes, classes),
    and what an SRE on call may do to a worker node: cordon and uncordon it, taint it (a patch).
    Taking a workload off a broken node is the fix of every node and disk fault; deleting or
    replacing a node, and reading pods of other namespaces, stay out of reach (so `drain` is not,
    and deleting the workload's own pods after a cordon is how they leave). The patch names the
    worker nodes, as a shared cluster's RBAC gives an application team its node pool and never the
    control plane: tainting every node NoExecute leaves the cluster's own components (CoreDNS
    tolerates the control plane's taint) a node to run on."""
    return [
        policy_rule([""], ["nodes", "persistentvolumes"], READ),
        *([{**policy_rule([""], ["nodes"], ["patch"]), "resourceNames": sorted(workers)}] if workers else []),
        policy_rule(["storage.k8s.io"], ["storageclasses"], READ),
        policy_rule(["scheduling.k8s.io"], ["priorityclasses"], READ),
        policy_rule(["metrics.k8s.io"], ["nodes"], READ),
        policy_rule(["coordination.k8s.io"], ["leases"], ["get"]),
    ]


def worker_nodes(kube: Kube) -> list[str]:
    """The nodes that do not run the control plane."""
    return sorted(node["metadata"]["name"] for node in kube.list("Node")
                  if not any(label in (node["metadata"].get("labels") or {}) for label in CONTROL_PLANE_LABELS))


def refuse_protected(namespaces: Sequence[str]) -> None:
    for ns in namespaces:
        if ns in PROTECTED_NAMESPACES:
            raise InfrastructureError(f"refusing to give the agent access to farm namespace '{ns}'")


def grant_agent(kube: Kube, namespace: str, also: Sequence[str] = (), *, create_namespace: bool = False,
                token_seconds: int | None = None) -> str:
    """Create (or bring up to date) the agent's service account in `namespace`, its Role and
    RoleBinding there and in `also` (the application's other namespaces: same rights, same
    account), its read-only cluster view, and return a token for it.

    `create_namespace`: a missing namespace is created (the emulated cluster, where credentials
    may come before the deploy) instead of refused. `token_seconds`: a TokenRequest token of that
    lifetime, falling back to a service-account-token Secret where the API has none; None asks
    for the Secret's token, which lives as long as the account (on the emulated cluster it
    survives a restore, since the account made again has the same uid)."""
    refuse_protected((namespace, *also))
    try:
        if create_namespace:
            kube.ensure_namespace(namespace)
        elif kube.find("Namespace", "", namespace) is None:
            raise InfrastructureError(f"namespace '{namespace}' does not exist; deploy before "
                                      "creating the agent's credentials")
        # No label naming the farm: the agent reads its own account, and that would be a giveaway
        # (the validator's leak check flags it).
        meta = {"name": AGENT_ACCOUNT, "namespace": namespace}
        subjects = [{"kind": "ServiceAccount", "name": AGENT_ACCOUNT, "namespace": namespace}]
        _ensure(kube, f"/api/v1/namespaces/{namespace}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})
        for ns in (namespace, *also):
            rbac = f"{_RBAC_API}/namespaces/{ns}"
            _ensure(kube, f"{rbac}/roles", {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role",
                                            "metadata": {**meta, "namespace": ns}, "rules": agent_role_rules()})
            binding = AGENT_ACCOUNT if ns == namespace else f"{AGENT_ACCOUNT}-{namespace}"
            _ensure(kube, f"{rbac}/rolebindings", {
                "apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding",
                "metadata": {**meta, "namespace": ns, "name": binding},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": AGENT_ACCOUNT}, "subjects": subjects})
        _ensure(kube, f"{_RBAC_API}/clusterroles", {
            "apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole",
            "metadata": {"name": AGENT_CLUSTER_ROLE}, "rules": agent_cluster_rules(worker_nodes(kube))})
        _ensure(kube, f"{_RBAC_API}/clusterrolebindings", {
            "apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{AGENT_ACCOUNT}-{namespace}"},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": AGENT_CLUSTER_ROLE},
            "subjects": subjects})
        token = _requested_token(kube, namespace, token_seconds) if token_seconds else None
        return token or _secret_token(kube, namespace)
    except KubeError as exc:
        if exc.code == 0:
            raise ClusterUnavailable(f"creating the agent's credentials in {namespace}: {exc}") from exc
        raise InfrastructureError(f"creating the agent's credentials in {namespace} failed: {exc}") from exc


def _ensure(kube: Kube, collection: str, obj: dict[str, Any]) -> None:
    """Create, or replace what a previous grant left (its rules may have changed since)."""
    try:
        kube.request("POST", collection, obj)
    except KubeError as exc:
        if exc.code != 409:
            raise
        kube.request("PUT", f"{collection}/{obj['metadata']['name']}", obj)


def _requested_token(kube: Kube, namespace: str, seconds: int) -> str | None:
    """A TokenRequest token; None where the API serves none (older clusters)."""
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{AGENT_ACCOUNT}/token"
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": seconds}}
    try:
        answer = kube.request("POST", path, request)
    except KubeError as exc:
        if exc.code not in (404, 405, 501):
            raise
        return None
    return (answer or {}).get("status", {}).get("token") or None


def _secret_token(kube: Kube, namespace: str) -> str:
    """The token of a service-account-token Secret, filled in by the token controller."""
    name = f"{AGENT_ACCOUNT}-token"
    try:
        kube.create("Secret", namespace, {
            "type": "kubernetes.io/service-account-token",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {"kubernetes.io/service-account.name": AGENT_ACCOUNT}}})
    except KubeError as exc:
        if exc.code != 409:  # one from an earlier grant: its token is the account's
            raise
    deadline = time.monotonic() + LEGACY_TOKEN_WAIT_S
    while True:
        try:
            data = kube.get("Secret", namespace, name).get("data") or {}
        except NotFound:
            data = {}
        if data.get("token"):
            return base64.b64decode(data["token"]).decode()
        if time.monotonic() > deadline:
            raise InfrastructureError(
                f"secret {namespace}/{name} got no token within {LEGACY_TOKEN_WAIT_S:.0f} s (no TokenRequest "
                "API and no token controller)")
        time.sleep(0.5)
