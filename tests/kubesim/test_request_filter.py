"""A request filter on astronomy-shop's frontend-proxy (SREGym's edge_request_filter_cpu_saturation):
a rule with a nested quantifier runs away on a long near-matching `waf` value, each such request
holds a proxy worker at a full core, and once the workers are held every user's request times out;
a linear rule answers the same request at once."""

from __future__ import annotations

import functools
import json

import pytest

from kubesim.apps.reqfilter import eval_seconds, nested_quantifier
from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters
from tests.kubesim.apptools import NEEDS_KUBECTL, prom, run_kubectl

NS = "astronomy-shop"
pytestmark = NEEDS_KUBECTL
kubectl = functools.partial(run_kubectl, namespace=NS)
BAD, SAFE = "^([a-zA-Z]+)*$", "^[A-Za-z]+$"
CRAFTED = "http://frontend-proxy.astronomy-shop.svc.cluster.local:8080/?waf=" + "a" * 5000 + "!"


def test_only_nested_unbounded_quantifiers_backtrack_exponentially() -> None:
    assert nested_quantifier(BAD) and nested_quantifier("(a*)+b")
    assert not nested_quantifier(SAFE) and not nested_quantifier("(ab)*c") and not nested_quantifier("(a{2})*")
    near_miss = "a" * 5000 + "!"
    assert eval_seconds(BAD, near_miss) > 1e40  # 2^n ways to split the run before the `!` fails it
    assert eval_seconds(BAD, "a" * 5000) < 1e-3  # a match is found on the first path
    assert eval_seconds(SAFE, near_miss) < 1e-3


@pytest.fixture
def sim(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(NS, seed=7)


def client_success(handle: object) -> float:
    q = (f'1 - sum(rate(locust_requests_num_failures{{namespace="{NS}",name!="Aggregated"}}[1m])) / '
         f'sum(rate(locust_requests_num_requests{{namespace="{NS}",name!="Aggregated"}}[1m]))')
    return prom(handle, q)[""]


def proxy_cpu(handle: object) -> float:
    q = (f'sum(rate(container_cpu_usage_seconds_total{{namespace="{NS}",container="frontend-proxy"}}[1m])) / '
         f'sum(kube_pod_container_resource_limits{{namespace="{NS}",container="frontend-proxy",resource="cpu"}})')
    return prom(handle, q)[""]


def admin_stats(sim: SimHandle) -> str:
    """Envoy's admin port (ENVOY_ADMIN_PORT, not on the Service) on the proxy's pod."""
    ip = kubectl(sim, "get", "pods", "-l", "app.kubernetes.io/name=frontend-proxy", "--field-selector",
                 "status.phase=Running", "-o", "jsonpath={.items[0].status.podIP}").strip()
    return kubectl(sim, "exec", "edge-traffic-replay", "--", "wget", "-q", "-O", "-", f"http://{ip}:10000/stats")


def set_rule(sim: SimHandle, rule: str) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "frontend-proxy", "env": [
        {"name": "WAF_RULE_REGEX", "value": rule}, {"name": "WAF_RULE_ENABLED", "value": "true"}],
        "resources": {"limits": {"cpu": "500m", "memory": "65Mi"}}}]}}}}
    kubectl(sim, "patch", "deployment", "frontend-proxy", "-p", json.dumps(patch))
    sim.advance(60)


@pytest.mark.slow
def test_a_backtracking_rule_saturates_the_proxy_until_the_rule_is_made_linear(sim: SimHandle) -> None:
    set_rule(sim, BAD)
    assert client_success(sim) > 0.99  # the rule alone harms nobody: no request carries `waf`
    replay = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "edge-traffic-replay"},
              "spec": {"containers": [{"name": "replay", "image": "busybox:1.36", "command": ["sh", "-c"],
                                       "args": [f"while true; do wget -q -T 10 -O /dev/null '{CRAFTED}'; "
                                                "sleep 1; done"]}]}}
    kubectl(sim, "apply", "-f", "-", stdin=json.dumps(replay))
    sim.advance(120)
    assert client_success(sim) < 0.2, client_success(sim)  # every user queues behind the held workers
    assert proxy_cpu(sim) > 0.9  # the container spins at its CPU limit
    probe = kubectl(sim, "exec", "edge-traffic-replay", "--", "wget", "-q", "-T", "3", "-O", "-", CRAFTED, check=False)
    assert "download timed out" in probe
    assert "Running" in kubectl(sim, "get", "pods", "-l", "app.kubernetes.io/name=frontend-proxy")  # no restart
    # Envoy's admin listener runs on the main thread: it answers, and holds every worker's request
    stats = dict(line.split(": ") for line in admin_stats(sim).splitlines())
    assert int(stats["http.ingress_http.downstream_rq_active"]) >= int(stats["server.concurrency"]) >= 1

    set_rule(sim, SAFE)  # the replay keeps going: only the rule changed
    sim.advance(120)
    assert client_success(sim) > 0.99
    assert proxy_cpu(sim) < 0.5
    assert "http.ingress_http.downstream_rq_active: 0\n" in admin_stats(sim)
    served = kubectl(sim, "exec", "edge-traffic-replay", "--", "wget", "-q", "-T", "3", "-O", "-", CRAFTED)
    assert "OTel demo" in served  # the crafted request itself is served
