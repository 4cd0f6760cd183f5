"""RBAC rule evaluation as the real authorizer does it: verbs, groups, resources with
sub-resources and wildcards, resourceNames, and bindings to Roles and ClusterRoles."""

from __future__ import annotations

from kubesim.api.authn import service_account_user
from kubesim.api.rbac import RBACAuthorizer, rule_allows
from kubesim.clock import VirtualClock
from kubesim.resources import register_all
from kubesim.store import Store

RBAC = "rbac.authorization.k8s.io"


def test_rule_matching() -> None:
    rule = {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}
    assert rule_allows(rule, "get", "", "pods", "", "x")
    assert rule_allows(rule, "get", "", "pods", "log", "x")
    assert not rule_allows(rule, "get", "", "pods", "exec", "x")
    assert not rule_allows(rule, "delete", "", "pods", "", "x")
    assert not rule_allows(rule, "get", "apps", "pods", "", "x")
    assert rule_allows({"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["*"]}, "patch", "apps", "deployments", "scale", "w")
    assert not rule_allows({"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["*"]}, "patch", "apps", "deployments", "", "w")
    named = {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["get", "list"]}
    assert rule_allows(named, "get", "", "configmaps", "", "a")
    assert not rule_allows(named, "get", "", "configmaps", "", "b")
    assert not rule_allows(named, "list", "", "configmaps", "", "")  # a list names no object


def test_bindings_grant_in_their_scope() -> None:
    store = Store(VirtualClock())
    register_all(store)
    for ns in ("app", "other"):
        store.create("namespaces", {"metadata": {"name": ns}})
    store.create(f"clusterroles.{RBAC}", {"metadata": {"name": "reader"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
    store.create(f"roles.{RBAC}", {"metadata": {"name": "cm-writer", "namespace": "app"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"]}]})
    sa = {"kind": "ServiceAccount", "name": "agent", "namespace": "app"}
    store.create(f"rolebindings.{RBAC}", {"metadata": {"name": "r", "namespace": "app"}, "subjects": [sa],
                                          "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "reader"}})
    store.create(f"rolebindings.{RBAC}", {"metadata": {"name": "w", "namespace": "app"}, "subjects": [sa],
                                          "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "cm-writer"}})
    store.create(f"clusterrolebindings.{RBAC}", {"metadata": {"name": "all-sa"}, "subjects": [
        {"kind": "Group", "name": "system:serviceaccounts:other"}], "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole",
                                                                                "name": "reader"}})
    authz = RBACAuthorizer(store)
    agent, stranger = service_account_user("app", "agent"), service_account_user("other", "x")
    assert authz.allowed(agent, "list", "", "pods", "", "app", "")
    assert not authz.allowed(agent, "list", "", "pods", "", "other", "")  # a RoleBinding grants in its namespace only
    assert not authz.allowed(agent, "list", "", "pods", "", "", "")
    assert authz.allowed(agent, "update", "", "configmaps", "", "app", "c")
    assert not authz.allowed(agent, "delete", "", "configmaps", "", "app", "c")
    assert authz.allowed(stranger, "list", "", "pods", "", "", "")  # a ClusterRoleBinding grants everywhere
    assert authz.allowed(stranger, "get", "", "pods", "", "app", "p")
    assert authz.allowed_path(agent, "get", "/apis/apps/v1") and not authz.allowed_path(agent, "get", "/metrics")


def test_escalation_refused_as_kube_apiserver_does() -> None:
    """A user who may write its namespace's RBAC can grant only what it holds there, and cannot
    re-point a binding; what it holds it can hand on."""
    import pytest

    from kubesim.store import StoreError

    store = Store(VirtualClock())
    register_all(store)
    store.create("namespaces", {"metadata": {"name": "app"}})
    store.create(f"clusterroles.{RBAC}", {"metadata": {"name": "cluster-admin"}, "rules": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})
    store.create(f"roles.{RBAC}", {"metadata": {"name": "agent", "namespace": "app"}, "rules": [
        {"apiGroups": [""], "resources": ["pods", "configmaps"], "verbs": ["get", "list", "update"]},
        {"apiGroups": [RBAC], "resources": ["roles", "rolebindings"], "verbs": ["get", "create", "update", "patch"]}]})
    sa = {"kind": "ServiceAccount", "name": "agent", "namespace": "app"}
    store.create(f"rolebindings.{RBAC}", {"metadata": {"name": "agent", "namespace": "app"}, "subjects": [sa],
                                          "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "agent"}})
    authz = RBACAuthorizer(store)
    agent = service_account_user("app", "agent")
    roles, bindings = f"roles.{RBAC}", f"rolebindings.{RBAC}"

    held = {"metadata": {"name": "reader", "namespace": "app"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}
    authz.check_escalation(agent, roles, "app", held, None)  # a subset of what it holds
    for rules in ([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
                  [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}],
                  [{"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}],
                  [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}]):
        with pytest.raises(StoreError) as err:
            authz.check_escalation(agent, roles, "app", {"metadata": {"name": "x"}, "rules": rules}, None)
        assert err.value.code == 403 and "not currently held" in str(err.value)
    # Widening its own Role is an escalation too.
    widened = {"metadata": {"name": "agent", "namespace": "app"}, "rules": [
        {"apiGroups": ["chaos-mesh.org"], "resources": ["*"], "verbs": ["list"]}]}
    with pytest.raises(StoreError):
        authz.check_escalation(agent, roles, "app", widened, store.get(roles, "app", "agent"))
    to_admin = {"metadata": {"name": "mine", "namespace": "app"}, "subjects": [sa],
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "cluster-admin"}}
    with pytest.raises(StoreError) as err:
        authz.check_escalation(agent, bindings, "app", to_admin, None)
    assert err.value.code == 403
    to_own = dict(to_admin, roleRef={"apiGroup": RBAC, "kind": "Role", "name": "agent"})
    authz.check_escalation(agent, bindings, "app", to_own, None)
    with pytest.raises(StoreError) as err:
        authz.check_escalation(agent, bindings, "app", to_admin, to_own)
    assert err.value.code == 422 and "cannot change roleRef" in str(err.value)
    to_missing = dict(to_admin, roleRef={"apiGroup": RBAC, "kind": "ClusterRole", "name": "no-such-role"})
    with pytest.raises(StoreError) as err:
        authz.check_escalation(agent, bindings, "app", to_missing, None)
    assert err.value.code == 403 and "does not exist" in str(err.value)
    admin = type(agent)("kubernetes-admin", ("system:masters",))
    authz.check_escalation(admin, bindings, "app", to_admin, None)
