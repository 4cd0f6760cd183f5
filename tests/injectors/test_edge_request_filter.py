"""edge-request-filter-backtracking's own check, as strict as SREGym's EdgeRequestFilterMitigationOracle:
fixed when the rule is made linear or switched off and the crafted request is then served within
3 s; restarting the proxy (its workers freed for a moment) or scaling it to zero is not; recovery
leaves neither the rule nor its replay behind."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.handle import ClusterHandle
from clusters.kube import Kube
from farm.pytest_plugin import SimClusters
from injectors.injector import faults

NS = "astronomy-shop"


def _env(name: str, value: str) -> Any:
    def edit(container: dict[str, Any]) -> None:
        container["env"] = [e for e in container.get("env") or [] if e.get("name") != name] + [
            {"name": name, "value": value}]
    return edit


def _restart(container: dict[str, Any]) -> None:
    container.setdefault("env", []).append({"name": "RESTARTED", "value": "1"})  # a new ReplicaSet, rule kept


EDITS: dict[str, tuple[Any, bool]] = {
    "linear rule": (_env("WAF_RULE_REGEX", "^[A-Za-z]+$"), False),
    "filter off": (_env("WAF_RULE_ENABLED", "false"), False),
    "restart only": (_restart, True),
    "scaled to zero": ("scale", True),
}


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> ClusterHandle:
    return sim_clusters.served(NS, seed=7)


@pytest.mark.slow
@pytest.mark.parametrize("edit", list(EDITS))
def test_only_a_linear_or_disabled_rule_that_serves_the_trigger_resolves_it(cluster: ClusterHandle, edit: str) -> None:
    kube = Kube.of(cluster)
    fault = faults.create("edge-request-filter-backtracking")
    injection = fault.inject(cluster, NS)
    try:
        assert fault.affects(cluster, injection) and fault.is_active(cluster, injection)
        change, still = EDITS[edit]
        obj = kube.get("Deployment", NS, "frontend-proxy")
        if change == "scale":
            obj["spec"]["replicas"] = 0
        else:
            change(obj["spec"]["template"]["spec"]["containers"][0])
        obj.pop("status", None)
        kube.replace("Deployment", NS, obj)
        cluster.advance(90)
        assert fault.affects(cluster, injection) is still
    finally:
        fault.recover(cluster, injection)
        cluster.advance(60)
    proxy = kube.get("Deployment", NS, "frontend-proxy")["spec"]["template"]
    assert "edge.platform/change-ticket" not in (proxy["metadata"].get("annotations") or {})
    assert not any(e.get("name") == "WAF_RULE_REGEX" for c in proxy["spec"]["containers"] for e in c.get("env") or [])
    assert kube.find("Deployment", "chaos-testing", "edge-traffic-replay") is None
