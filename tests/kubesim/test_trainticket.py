"""train-ticket on the emulated cluster as a call graph, over the real protocols: the farm's
manifests deployed through the Kubernetes API, causes planted with a stock kubectl, symptoms read
from Prometheus (Locust's exporter), Loki and Jaeger as an agent would."""

from __future__ import annotations

import functools
import json
import time

import pytest
import yaml

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters
from tests.kubesim.apptools import NEEDS_KUBECTL, deny_ingress, get, prom, run_kubectl

NS = "train-ticket"
ROUTES = ("/orders/refresh", "/getVoucher", "/contacts/create", "/contacts/delete", "/routes/get", "/stations/get")
pytestmark = NEEDS_KUBECTL
kubectl = functools.partial(run_kubectl, namespace=NS)


@pytest.fixture
def sim(sim_clusters: SimClusters) -> SimHandle:
    tt = sim_clusters.served(NS, seed=11)
    tt.advance(120)  # the clock does not go back: fresh 2-minute windows
    return tt


def client_success(handle: object) -> float:
    q = (f'1 - sum(rate(locust_requests_num_failures{{namespace="{NS}",name!="Aggregated"}}[2m])) / '
         f'sum(rate(locust_requests_num_requests{{namespace="{NS}",name!="Aggregated"}}[2m]))')
    return prom(handle, q)[""]


def failure_ratio(handle: object) -> dict[str, float]:
    """Locust's failed share per request name over the last 2 minutes."""
    return prom(handle, f'sum by (name) (rate(locust_requests_num_failures{{namespace="{NS}"}}[2m])) / '
                        f'sum by (name) (rate(locust_requests_num_requests{{namespace="{NS}"}}[2m]))')


def logs(handle: object, selector: str, minutes: int = 3) -> list[str]:
    now = time.time() if not hasattr(handle, "now") else handle.now()  # type: ignore[attr-defined]
    body = get(handle, "loki", "/loki/api/v1/query_range", query=selector, start=str(int((now - minutes * 60) * 1e9)),
               end=str(int(now * 1e9)), limit="500")
    return [line for stream in body["data"]["result"] for _, line in stream["values"]]


def set_flags(handle: object, **variants: str) -> None:
    """flagd's config map edited (`tt_feat_17="on"`), then flagd restarted: it reads the file at start."""
    cm = json.loads(kubectl(handle, "get", "configmap", "flagd-config", "-o", "json"))
    flags = yaml.safe_load(cm["data"]["flags.yaml"])
    for flag, variant in variants.items():
        flags["flags"][flag.replace("_", "-")]["defaultVariant"] = variant
    patch = json.dumps({"data": {"flags.yaml": yaml.safe_dump(flags, sort_keys=False)}})
    kubectl(handle, "patch", "configmap", "flagd-config", "--type", "merge", "-p", patch)
    # kubectl stamps restartedAt from the wall clock to the second: a second restart within the
    # same second would be the same patch, which kubectl refuses as empty.
    time.sleep(max(0.0, 1.05 - (time.time() - _last_restart[0])))
    kubectl(handle, "rollout", "restart", "deployment/flagd")
    _last_restart[0] = time.time()


_last_restart = [0.0]


def test_deployed_app_serves_the_locust_mix(sim: object) -> None:
    table = kubectl(sim, "get", "pods")
    assert "CrashLoopBackOff" not in table and table.count("Running") >= 42
    assert client_success(sim) > 0.99
    rates = prom(sim, f'sum by (name) (rate(locust_requests_num_requests{{namespace="{NS}"}}[2m]))')
    for name in ROUTES:
        assert rates.get(name, 0) > 0.3, f"{name}: {rates}"
    assert rates["/routes/get"] == pytest.approx(2 * rates["/getVoucher"], rel=0.05)  # task weights 2:1
    assert all(v < 0.01 for v in failure_ratio(sim).values())
    booted = kubectl(sim, "logs", "deploy/ts-order-service")
    assert "Tomcat started on port(s): 12031 (http)" in booted and "Started OrderServiceApplication" in booted
    # the Spring services waited for their Mongo while booting instead of crash-looping
    restarts = {line.split()[0].rsplit("-", 2)[0]: int(line.split()[3]) for line in table.splitlines()[1:]}
    assert restarts["ts-order-service"] == 0 and restarts["ts-station-service"] == 0


def test_a_wrong_target_port_breaks_the_callers_through_the_service(sim: object) -> None:
    kubectl(sim, "patch", "service", "ts-station-service", "--type", "json",
            "-p", '[{"op":"replace","path":"/spec/ports/0/targetPort","value":12355}]')
    sim.advance(150)  # type: ignore[attr-defined]
    ratio = failure_ratio(sim)
    assert ratio["/stations/get"] > 0.95 and ratio["/orders/refresh"] > 0.95  # the UI's and order's calls
    assert ratio["/routes/get"] < 0.01 and ratio["/contacts/create"] < 0.01
    order = logs(sim, f'{{namespace="{NS}", app="ts-order-service"}}')
    assert any("ResourceAccessException: I/O error on POST request for "
               '"http://ts-station-service:12345/api/v1/stationservice/stations/namelist": Connection refused' in line
               for line in order)
    ui = logs(sim, f'{{namespace="{NS}", app="ts-ui-dashboard"}}')
    assert any("connect() failed (111: Connection refused) while connecting to upstream" in line
               and "/api/v1/stationservice/stations" in line for line in ui)
    alerts = get(sim, "prometheus", "/api/v1/alerts")["data"]["alerts"]
    assert any(a["labels"].get("alertname") == "HighRequestErrorRate" and a["state"] == "firing" for a in alerts)
    kubectl(sim, "patch", "service", "ts-station-service", "--type", "json",
            "-p", '[{"op":"replace","path":"/spec/ports/0/targetPort","value":12345}]')
    sim.advance(150)  # type: ignore[attr-defined]
    assert client_success(sim) > 0.99


def test_a_wrong_target_port_on_auth_fails_the_logins(sim: object) -> None:
    kubectl(sim, "patch", "service", "ts-auth-service", "--type", "json",
            "-p", '[{"op":"replace","path":"/spec/ports/0/targetPort","value":12341}]')
    sim.advance(150)  # type: ignore[attr-defined]
    ratio = failure_ratio(sim)
    assert ratio["/users/login"] > 0.95 and ratio["/stations/get"] < 0.01  # tokens already issued stay valid


def test_tt_feat_17_times_the_vouchers_out_and_22_fails_contact_checks(sim: object) -> None:
    set_flags(sim, tt_feat_17="on")
    sim.advance(180)  # type: ignore[attr-defined]
    ratio = failure_ratio(sim)
    assert ratio["/getVoucher"] > 0.95  # SELECT SLEEP(10) on Tornado's one thread, Locust's timeout is 5 s
    assert ratio["/orders/refresh"] < 0.01 and ratio["/contacts/create"] < 0.01
    cpu = prom(sim, f'sum(rate(container_cpu_usage_seconds_total{{namespace="{NS}",container="ts-voucher-service"}}[2m]))')
    assert cpu[""] < 0.05  # it sleeps, it does not burn CPU
    set_flags(sim, tt_feat_17="off", tt_feat_22="on")
    sim.advance(180)  # type: ignore[attr-defined]
    ratio = failure_ratio(sim)
    assert ratio["/getVoucher"] < 0.05 and ratio["/contacts/create"] > 0.95
    contacts = logs(sim, f'{{namespace="{NS}", app="ts-contacts-service"}}')
    assert any("Unknown column 'accountId' in 'where clause'" in line for line in contacts)
    assert any("[create][Contact check failed]" in line for line in contacts)


def test_a_trace_follows_an_order_refresh_from_the_ui_to_the_station_service(sim: object) -> None:
    traces = get(sim, "jaeger", "/api/traces", service="ts-ui-dashboard",
                 operation="POST /api/v1/orderservice/order/refresh", lookback="5m", limit="20")["data"]
    assert traces
    trace = traces[0]
    services = {trace["processes"][s["processID"]]["serviceName"] for s in trace["spans"]}
    assert {"ts-ui-dashboard", "ts-order-service", "ts-station-service"} <= services
    by_id = {s["spanID"]: s for s in trace["spans"]}
    station = next(s for s in trace["spans"] if trace["processes"][s["processID"]]["serviceName"] == "ts-station-service"
                   and s["operationName"] == "POST /api/v1/stationservice/stations/namelist")
    chain = []
    span = station
    while span["references"]:
        span = by_id[span["references"][0]["spanID"]]
        chain.append(trace["processes"][span["processID"]]["serviceName"])
    assert chain[-1] == "ts-ui-dashboard" and "ts-order-service" in chain


def test_an_unreachable_datasource_placeholder_override_stops_contacts_booting(sim: object) -> None:
    kubectl(sim, "set", "env", "deployment/ts-contacts-service", "CONTACTS_MYSQL_HOST=ts-contacts-mysq1")
    sim.advance(240)  # type: ignore[attr-defined]
    table = kubectl(sim, "get", "pods", "-l", "app=ts-contacts-service")
    pod = next(line.split()[0] for line in table.splitlines()[1:] if "1/1" not in line)
    previous = kubectl(sim, "logs", pod, "--previous")
    assert "APPLICATION FAILED TO START" in previous and "Communications link failure" in previous


def test_a_rotated_mysql_password_fails_vouchers_and_a_restarted_voucher_service(sim: object) -> None:
    from kubesim.apps.model import find_model

    if find_model({"image": "mysql:5.6.35"}).name != "mysql":  # type: ignore[union-attr]
        pytest.skip("MySQL is not modelled yet (kubesim/apps/datastores)")
    kubectl(sim, "set", "env", "deployment/ts-voucher-mysql", "MYSQL_ROOT_PASSWORD=Rotated2026#")
    sim.advance(150)  # type: ignore[attr-defined]
    assert failure_ratio(sim)["/getVoucher"] > 0.95
    voucher = logs(sim, f'{{namespace="{NS}", app="ts-voucher-service"}}')
    assert any('pymysql.err.OperationalError: (1045, "Access denied for user' in line for line in voucher)
    kubectl(sim, "rollout", "restart", "deployment/ts-voucher-service")
    sim.advance(120)  # type: ignore[attr-defined]
    table = kubectl(sim, "get", "pods", "-l", "app=ts-voucher-service")
    assert "CrashLoopBackOff" in table or "Error" in table


def test_locust_dials_the_voucher_service_itself(sim: object) -> None:
    """The voucher task's absolute URL bypasses ts-ui-dashboard: a policy in front of the voucher
    service fails exactly those requests, and the voucher service leaves no spans (it has no tracer)."""
    deny_ingress(sim, NS, "voucher-ingress", {"app": "ts-voucher-service"})
    sim.advance(150)  # type: ignore[attr-defined]
    ratio = failure_ratio(sim)
    assert ratio["/getVoucher"] > 0.95 and ratio["/orders/refresh"] < 0.01
    assert "ts-voucher-service" not in get(sim, "jaeger", "/api/services")["data"]
