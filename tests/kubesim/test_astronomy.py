"""astronomy-shop on the emulated cluster as a call graph, over the real protocols: the farm's
manifests deployed through the Kubernetes API, causes planted with a stock kubectl, symptoms read
from Prometheus, Loki and Jaeger as an agent would."""

from __future__ import annotations

import functools
import json
import time

import pytest

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters
from tests.kubesim.apptools import NEEDS_KUBECTL, deny_ingress, get, prom, run_kubectl

NS = "astronomy-shop"
pytestmark = NEEDS_KUBECTL
kubectl = functools.partial(run_kubectl, namespace=NS)


@pytest.fixture
def sim(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(NS, seed=7)


def client_success(handle: object) -> float:
    q = (f'1 - sum(rate(locust_requests_num_failures{{namespace="{NS}",name!="Aggregated"}}[2m])) / '
         f'sum(rate(locust_requests_num_requests{{namespace="{NS}",name!="Aggregated"}}[2m]))')
    return prom(handle, q)[""]


def logs(handle: object, selector: str, minutes: int = 5) -> list[str]:
    now = time.time() if not hasattr(handle, "now") else handle.now()  # type: ignore[attr-defined]
    body = get(handle, "loki", "/loki/api/v1/query_range", query=selector, start=str(int((now - minutes * 60) * 1e9)),
               end=str(int(now * 1e9)), limit="500")
    return [line for stream in body["data"]["result"] for _, line in stream["values"]]


def test_deployed_shop_serves_its_users(sim: object) -> None:
    table = kubectl(sim, "get", "pods")
    assert "CrashLoopBackOff" not in table and table.count("Running") >= 22
    assert client_success(sim) > 0.99
    served = prom(sim, f'sum by (service_name) (rate(traces_span_metrics_calls_total{{namespace="{NS}"}}[2m]))')
    for service in ("frontend-proxy", "frontend", "checkout", "product-catalog", "cart", "payment", "currency",
                    "shipping", "quote", "ad", "recommendation", "product-reviews"):
        assert served.get(service, 0) > 0, f"{service} serves nothing: {served}"
    # checkout's order of work reaches payment for every order and quote through shipping
    assert served["payment"] == pytest.approx(served["checkout"], rel=0.2)
    assert "Now listening on: http://[::]:8080" in kubectl(sim, "logs", "deploy/cart")


def test_missing_valkey_address_stops_cart_with_its_own_message(sim: object) -> None:
    kubectl(sim, "set", "env", "deployment/cart", "VALKEY_ADDR-")
    sim.advance(120)  # type: ignore[attr-defined]
    table = kubectl(sim, "get", "pods", "-l", "app.kubernetes.io/component=cart")
    assert "CrashLoopBackOff" in table or "Error" in table
    pod = next(line.split()[0] for line in table.splitlines()[1:] if "cart" in line and "1/1" not in line)
    previous = kubectl(sim, "logs", pod, "--previous")
    assert "VALKEY_ADDR" in previous and "Unhandled exception" in previous


def test_a_network_policy_in_front_of_valkey_fails_carts_and_checkouts(sim: object) -> None:
    deny_ingress(sim, NS, "valkey-ingress", {"app.kubernetes.io/component": "valkey-cart"})
    sim.advance(240)  # type: ignore[attr-defined]
    errors = prom(sim, f'sum by (service_name) (rate(traces_span_metrics_calls_total{{namespace="{NS}",'
                       f'status_code="STATUS_CODE_ERROR"}}[2m]))')
    assert errors.get("cart", 0) > 0 and errors.get("checkout", 0) > 0
    assert errors.get("payment", 0) == 0  # payment is not on the failing path
    assert client_success(sim) < 0.9
    cart_lines = logs(sim, f'{{namespace="{NS}", pod=~"cart-.*"}} |= "cart storage"')
    assert any("ValkeyCartStore" in line for line in cart_lines)
    traces = get(sim, "jaeger", "/api/traces", service="frontend-proxy", tags=json.dumps({"error": "true"}),
                 lookback="5m", limit="50")["data"]
    assert any(t["processes"][s["processID"]]["serviceName"] == "cart" for t in traces for s in t["spans"])
    kubectl(sim, "delete", "networkpolicy", "valkey-ingress")
    sim.advance(300)  # type: ignore[attr-defined]
    assert client_success(sim) > 0.99


def test_payment_failure_flag_reaches_payment_through_flagd(sim: object) -> None:
    cm = json.loads(kubectl(sim, "get", "configmap", "flagd-config", "-o", "json"))
    flags = json.loads(cm["data"]["demo.flagd.json"])
    flags["flags"]["paymentFailure"]["defaultVariant"] = "50%"
    patch = json.dumps({"data": {"demo.flagd.json": json.dumps(flags)}})
    kubectl(sim, "patch", "configmap", "flagd-config", "--type", "merge", "-p", patch)
    sim.advance(120)  # type: ignore[attr-defined]
    assert prom(sim, f'sum(rate(traces_span_metrics_calls_total{{namespace="{NS}",service_name="payment",'
                     f'status_code="STATUS_CODE_ERROR"}}[1m]))').get("", 0) == 0  # flagd read the file at start
    kubectl(sim, "rollout", "restart", "deployment/flagd")
    sim.advance(240)  # type: ignore[attr-defined]
    by_code = prom(sim, f'sum by (status_code) (rate(traces_span_metrics_calls_total{{namespace="{NS}",'
                        f'service_name="payment"}}[2m]))')
    share = by_code["STATUS_CODE_ERROR"] / (by_code["STATUS_CODE_ERROR"] + by_code["STATUS_CODE_UNSET"])
    assert 0.3 < share < 0.7
    lines = logs(sim, f'{{namespace="{NS}", pod=~"checkout-.*"}}')
    assert any("Invalid token" in line for line in lines) or prom(
        sim, f'sum(rate(locust_requests_num_failures{{namespace="{NS}",name="/api/checkout"}}[2m]))')[""] > 0


def test_a_memory_limit_below_checkouts_working_set_oom_kills_it(sim: object) -> None:
    kubectl(sim, "set", "resources", "deployment/checkout", "--limits=memory=8Mi")
    sim.advance(180)  # type: ignore[attr-defined]
    described = kubectl(sim, "describe", "pods", "-l", "app.kubernetes.io/component=checkout")
    assert "OOMKilled" in described
    assert prom(sim, f'sum(rate(locust_requests_num_failures{{namespace="{NS}",name="/api/checkout"}}[2m]))')[""] > 0


def test_exec_meets_each_images_userland(sim: object) -> None:
    """Distroless services have no shell; the Alpine-based ones have busybox, whose wget reaches
    the shop through frontend-proxy as the load generator does."""
    pods = kubectl(sim, "get", "pods", "-o", "name").split()

    def pod(prefix: str) -> str:
        return next(p.split("/", 1)[1] for p in pods if p.split("/", 1)[1].startswith(prefix + "-"))
    out = run_kubectl(sim, "exec", pod("checkout"), "--", "sh", "-c", "ls", namespace=NS, check=False)
    assert 'exec: "sh": executable file not found in $PATH' in out
    out = kubectl(sim, "exec", pod("cart"), "--", "sh", "-c",
                  "grep ^ID= /etc/os-release; wget -qO- http://frontend-proxy:8080/ | head -c 15")
    assert out == "ID=alpine\n<!DOCTYPE html>"
