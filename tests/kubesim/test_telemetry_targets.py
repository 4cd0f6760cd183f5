"""Scrape-time relabelling as a kube-prometheus-stack Prometheus does it: the application's series
carry their pod's target labels, a pod's counters are its own, empty labels are not stored, and
the metadata endpoint gives each family's type and help text."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from kubesim.cluster import SimCluster

NS = "hotel-reservation"


def api(cluster: SimCluster, path: str, **params: str) -> Any:
    query = urllib.parse.parse_qs(urllib.parse.urlencode(params))
    status, _, body = cluster.obs.prometheus_app("GET", path, query, b"")
    assert status == 200, body
    return json.loads(body)["data"]


def vector(cluster: SimCluster, expr: str) -> list[tuple[dict[str, str], float]]:
    return [(r["metric"], float(r["value"][1])) for r in api(cluster, "/api/v1/query", query=expr)["result"]]


def pods_of(cluster: SimCluster, service: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["status"]["podIP"] for p in cluster.store.list("pods", NS)
            if p["metadata"]["labels"].get("io.kompose.service") == service and p["status"].get("phase") == "Running"}


def test_application_series_carry_their_pods_target_labels(cluster: SimCluster) -> None:
    cluster.advance(60)
    search = pods_of(cluster, "search")
    by_pod = vector(cluster, f'sum by (pod) (rate(search_requests_total{{namespace="{NS}"}}[1m]))')
    assert {labels["pod"] for labels, _ in by_pod} == set(search) and all(v > 0 for _, v in by_pod)
    (labels, _), = vector(cluster, f'search_requests_total{{namespace="{NS}"}}')
    pod = labels["pod"]
    assert labels["instance"] == f"{search[pod]}:9092"
    assert (labels["job"], labels["service"], labels["container"]) == ("search", "search", "hotel-reserv-search")
    frontend = vector(cluster, f'sum by (pod, container) (http_server_request_duration_seconds_count{{namespace="{NS}"}})')
    assert [lab["pod"] for lab, _ in frontend] == list(pods_of(cluster, "frontend"))
    # the load generator's own series name its pod too, and the targets are listed as up
    assert all("pod" in lab and "instance" in lab for lab, _ in vector(cluster, "wrk2_requests_total"))
    up = vector(cluster, f'up{{job="search", namespace="{NS}"}}')
    assert [(lab["pod"], v) for lab, v in up] == [(pod, 1.0)]


def test_a_scaled_service_shares_its_traffic_and_a_new_pods_counters_start_at_zero(cluster: SimCluster) -> None:
    cluster.advance(30)
    before = dict((lab["pod"], v) for lab, v in vector(cluster, f'rate_requests_received_total{{namespace="{NS}"}}'))
    cluster.store.mutate("deployments.apps", NS, "rate", lambda d: d["spec"].__setitem__("replicas", 2))
    cluster.advance(90)
    after = dict((lab["pod"], v) for lab, v in vector(cluster, f'rate_requests_received_total{{namespace="{NS}"}}'))
    (old,) = before
    (new,) = set(after) - {old}
    assert set(after) == set(pods_of(cluster, "rate")) == {old, new}
    assert after[old] > before[old]
    assert 0 < after[new] < after[old]  # the new process counted from 0, the old one kept its total
    rates = [v for _, v in vector(cluster, f'rate(rate_requests_received_total{{namespace="{NS}"}}[30s])')]
    assert len(rates) == 2 and abs(rates[0] - rates[1]) < 0.05 * max(rates)


def test_no_stored_series_has_an_empty_label(cluster: SimCluster) -> None:
    cluster.advance(30)
    empty = [s.labels for s in cluster.obs.tsdb.series() if "" in s.labels.values()]
    assert empty == []
    net = vector(cluster, f'container_network_receive_bytes_total{{namespace="{NS}"}}')
    assert net and all("container" not in lab and "image" not in lab for lab, _ in net)
    # a selector on the absent label still matches, as on Prometheus
    assert len(vector(cluster, f'container_network_receive_bytes_total{{namespace="{NS}", container=""}}')) == len(net)


def test_metadata_gives_type_and_help_of_the_exporters(cluster: SimCluster) -> None:
    meta = api(cluster, "/api/v1/metadata")
    assert meta["kube_pod_container_status_restarts_total"] == [
        {"type": "counter", "help": "The number of container restarts per container.", "unit": ""}]
    assert meta["container_memory_working_set_bytes"][0]["help"] == "Current working set in bytes."
    assert meta["http_server_request_duration_seconds"][0]["type"] == "histogram"
    assert "up" not in meta and "ALERTS" not in meta and not any(":" in name for name in meta)
    assert list(api(cluster, "/api/v1/metadata", metric="node_load1")) == ["node_load1"]
    assert len(api(cluster, "/api/v1/metadata", limit="3")) == 3
