"""RBAC authorization as kube-apiserver's RBAC authorizer evaluates it: ClusterRoleBindings
grant cluster-wide, RoleBindings grant in their namespace (to a Role or a ClusterRole); a rule
matches on verbs, apiGroups, resources (with `res/sub` and `*/sub`) and resourceNames."""

from __future__ import annotations

import json
from typing import Any

from core.rbac import APP_CORE, APP_GROUPS, READ, WRITE, policy_rule
from kubesim.api.authn import UserInfo
from kubesim.store import Obj, Store, StoreError

_RBAC = "rbac.authorization.k8s.io"

# Paths every authenticated user may GET (the system:discovery and system:public-info-viewer roles).
_PUBLIC_PREFIXES = ("/api", "/apis", "/version", "/openapi", "/healthz", "/livez", "/readyz")


def _subject_matches(subject: dict[str, Any], user: UserInfo, binding_ns: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return subject.get("name") == user.name
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return user.name == f"system:serviceaccount:{ns}:{subject.get('name')}"
    return False


def rule_allows(rule: dict[str, Any], verb: str, group: str, resource: str, subresource: str, name: str) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and verb not in verbs:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and group not in groups:
        return False
    combined = f"{resource}/{subresource}" if subresource else resource
    resources = rule.get("resources") or []
    if not any(r == "*" or r == combined or (subresource and r == f"*/{subresource}") for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or name in names


def non_resource_allows(rule: dict[str, Any], verb: str, path: str) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and verb not in verbs:
        return False
    for url in rule.get("nonResourceURLs") or []:
        if url == path or url == "*" or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


class RBACAuthorizer:
    def __init__(self, store: Store) -> None:
        self.store = store

    def _rules(self, user: UserInfo, namespace: str) -> list[dict[str, Any]]:
        """Every rule that applies to `user` in `namespace` ('' = cluster scope only). Hold the lock."""
        rules: list[dict[str, Any]] = []
        for crb in self.store.iter_raw(f"clusterrolebindings.{_RBAC}"):
            if any(_subject_matches(s, user, "") for s in crb.get("subjects") or []):
                rules += self._role_rules(crb.get("roleRef") or {}, "")
        if namespace:
            for rb in self.store.iter_raw(f"rolebindings.{_RBAC}"):
                if rb["metadata"].get("namespace") != namespace:
                    continue
                if any(_subject_matches(s, user, namespace) for s in rb.get("subjects") or []):
                    rules += self._role_rules(rb.get("roleRef") or {}, namespace)
        return rules

    def _role(self, ref: dict[str, Any], namespace: str) -> Obj | None:
        kind, name = ref.get("kind"), ref.get("name", "")
        if kind == "ClusterRole":
            return self.store.try_get(f"clusterroles.{_RBAC}", "", name)
        if kind == "Role" and namespace:
            return self.store.try_get(f"roles.{_RBAC}", namespace, name)
        return None

    def _role_rules(self, ref: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
        return list((self._role(ref, namespace) or {}).get("rules") or [])

    def allowed(self, user: UserInfo, verb: str, group: str, resource: str, subresource: str,
                namespace: str, name: str) -> bool:
        if user.is_admin:
            return True
        with self.store.lock:
            return any(rule_allows(r, verb, group, resource, subresource, name) for r in self._rules(user, namespace))

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(resource rules, non-resource rules) that apply to `user` in `namespace`, as
        SelfSubjectRulesReview reports them (`kubectl auth can-i --list`)."""
        if user.is_admin:
            rules = BOOTSTRAP_CLUSTER_ROLES["cluster-admin"]
        else:
            with self.store.lock:
                rules = self._rules(user, namespace)
            rules = rules + [{"nonResourceURLs": [f"{p}" for p in ("/api", "/api/*", "/apis", "/apis/*", "/version",
                                                                   "/openapi", "/openapi/*", "/healthz", "/livez", "/readyz")],
                              "verbs": ["get"]}]
        resource = [{k: r[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if r.get(k)}
                    for r in rules if r.get("resources")]
        non_resource = [{"verbs": r["verbs"], "nonResourceURLs": r["nonResourceURLs"]} for r in rules if r.get("nonResourceURLs")]
        return resource, non_resource

    def check_escalation(self, user: UserInfo, key: str, namespace: str, obj: Obj,
                         current: Obj | None) -> None:
        """Refuse a Role or RoleBinding that grants what `user` does not hold in `namespace`, as
        kube-apiserver's RBAC escalation check does (the agent may manage its namespace's RBAC,
        never widen its own reach through it); a RoleBinding's roleRef cannot change."""
        plural = key.removesuffix(f".{_RBAC}")
        if user.is_admin or key not in (f"roles.{_RBAC}", f"rolebindings.{_RBAC}"):
            return
        name = (obj.get("metadata") or {}).get("name", "")
        if plural == "rolebindings" and current is not None and obj.get("roleRef") != current.get("roleRef"):
            raise StoreError(422, "Invalid", f'RoleBinding.rbac.authorization.k8s.io "{name}" is invalid: '
                             "roleRef: Invalid value: cannot change roleRef")
        with self.store.lock:
            held = self._rules(user, namespace)
            if plural == "roles":
                granted = list(obj.get("rules") or [])
            elif self._role(obj.get("roleRef") or {}, namespace) is None:
                # kube-apiserver cannot confirm what a missing role would grant, so it refuses.
                ref = obj.get("roleRef") or {}
                raise StoreError(403, "Forbidden", f'{plural}.{_RBAC} "{name}" is forbidden: user "{user.name}" '
                                 f'cannot bind to {ref.get("kind")} "{ref.get("name")}": it does not exist',
                                 {"kind": plural, "name": name, "group": _RBAC})
            else:
                granted = self._role_rules(obj.get("roleRef") or {}, namespace)
        missing = [rule for rule in granted if not _covered(rule, held)]
        if missing:
            listed = "\n".join(_describe(rule) for rule in missing)
            raise StoreError(403, "Forbidden",
                             f'{plural}.{_RBAC} "{name}" is forbidden: user "{user.name}" '
                             f"(groups={list(user.groups)}) is attempting to grant RBAC permissions not "
                             f"currently held:\n{listed}", {"kind": plural, "name": name, "group": _RBAC})

    def allowed_path(self, user: UserInfo, verb: str, path: str) -> bool:
        if user.is_admin or (verb == "get" and path.startswith(_PUBLIC_PREFIXES)):
            return True
        with self.store.lock:
            return any(non_resource_allows(r, verb, path) for r in self._rules(user, ""))


def _covered(rule: dict[str, Any], held: list[dict[str, Any]]) -> bool:
    """Every (verb, group, resource, name) `rule` grants is allowed by some rule in `held`; a
    wildcard is covered only by a wildcard."""
    if rule.get("nonResourceURLs") and not rule.get("resources"):
        return False  # not grantable in a namespace at all
    for verb in rule.get("verbs") or []:
        for group in rule.get("apiGroups") or []:
            for res in rule.get("resources") or []:
                resource, _, sub = res.partition("/")
                for name in rule.get("resourceNames") or [""]:
                    if not any(rule_allows(h, verb, group, resource, sub, name) for h in held):
                        return False
    return True


def _describe(rule: dict[str, Any]) -> str:
    parts = [f'{key[0].upper()}{key[1:]}:{json.dumps(rule[key])}'
             for key in ("apiGroups", "resources", "resourceNames", "verbs") if rule.get(key)]
    return "{" + ", ".join(parts) + "}"


# The bootstrap cluster roles a stock cluster ships (abridged to the resources served here).
BOOTSTRAP_CLUSTER_ROLES: dict[str, list[dict[str, Any]]] = {
    "cluster-admin": [policy_rule(["*"], ["*"], ["*"]), {"nonResourceURLs": ["*"], "verbs": ["*"]}],
    "system:basic-user": [policy_rule(["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                                ["create"]),
                          policy_rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"])],
    # what a delegating webhook or aggregated server needs (kube-apiserver's bootstrap policy)
    "system:auth-delegator": [policy_rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
                              policy_rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"])],
    "admin": [policy_rule([""], [*APP_CORE, "secrets", "resourcequotas", "limitranges", "pods/eviction"], READ + WRITE),
              *[policy_rule(g, r, READ + WRITE) for g, r in APP_GROUPS],
              policy_rule([_RBAC], ["roles", "rolebindings"], READ + WRITE)],
    "edit": [policy_rule([""], [*APP_CORE, "secrets", "pods/eviction"], READ + WRITE),
             policy_rule([""], ["resourcequotas", "limitranges"], READ),
             *[policy_rule(g, r, READ + WRITE) for g, r in APP_GROUPS]],
    "view": [policy_rule([""], [*APP_CORE, "resourcequotas", "limitranges"], READ),
             *[policy_rule(g, r, READ) for g, r in APP_GROUPS]],
}


# binding name → (cluster role, group bound to it)
BOOTSTRAP_CLUSTER_ROLE_BINDINGS: dict[str, tuple[str, str]] = {
    "cluster-admin": ("cluster-admin", "system:masters"),
    "system:basic-user": ("system:basic-user", "system:authenticated"),
}
