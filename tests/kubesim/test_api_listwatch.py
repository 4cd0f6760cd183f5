"""list and watch resourceVersion semantics through the official kubernetes client, as
kube-apiserver's watch cache and ValidateListOptions give them: lists at an exact past
resourceVersion, paginated lists as one snapshot, 504 for a version the store has not reached,
bookmarks when the client allows them, watch-list (sendInitialEvents) and the 422s of options
that do not go together."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from farm.pytest_plugin import SimClusters
from tests.kubesim.standin import STANDIN, namespace_for


@pytest.fixture()
def api(sim_clusters: SimClusters) -> client.ApiClient:
    return sim_clusters.served(cluster_factory=STANDIN).api_client()


@pytest.fixture()
def ns(api: client.ApiClient, request: pytest.FixtureRequest) -> str:
    return namespace_for(request, api)


def status_of(exc: ApiException) -> dict[str, Any]:
    return dict(json.loads(exc.body))


def test_an_exact_list_is_the_state_at_that_resource_version(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}, "data": {"x": "1"}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "gone"}})
    then = core.list_namespaced_config_map(ns).metadata.resource_version
    core.patch_namespaced_config_map("a", ns, {"data": {"x": "2"}})
    core.delete_namespaced_config_map("gone", ns)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "later"}})

    exact = core.list_namespaced_config_map(ns, resource_version=then, resource_version_match="Exact")
    assert exact.metadata.resource_version == then
    assert {cm.metadata.name: cm.data for cm in exact.items if cm.metadata.name != "kube-root-ca.crt"} == {
        "a": {"x": "1"}, "gone": None}
    fresh = core.list_namespaced_config_map(ns, resource_version=then, resource_version_match="NotOlderThan")
    assert int(fresh.metadata.resource_version) > int(then)
    assert {cm.metadata.name: cm.data for cm in fresh.items if cm.metadata.name != "kube-root-ca.crt"} == {
        "a": {"x": "2"}, "later": None}


def test_a_paginated_list_pages_through_one_snapshot(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    for name in ("p1", "p2", "p3"):
        core.create_namespaced_config_map(ns, {"metadata": {"name": name}})
    first = core.list_namespaced_config_map(ns, limit=2)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "p4"}})
    core.delete_namespaced_config_map("p3", ns)
    rest = core.list_namespaced_config_map(ns, limit=10, _continue=first.metadata._continue)
    names = [cm.metadata.name for cm in first.items + rest.items]
    assert names == ["kube-root-ca.crt", "p1", "p2", "p3"] or names == ["p1", "p2", "p3"]
    assert rest.metadata.resource_version == first.metadata.resource_version


def test_a_resource_version_not_reached_is_504_too_large(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    ahead = str(int(core.list_namespaced_config_map(ns).metadata.resource_version) + 1000)
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(ns, resource_version=ahead)
    status = status_of(err.value)
    assert (err.value.status, status["reason"]) == (504, "Timeout")
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert status["message"].startswith(f"Too large resource version: {ahead}, current: ")


@pytest.mark.parametrize(("options", "message"), [
    ({"resource_version_match": "Exact"}, "resourceVersionMatch is forbidden unless resourceVersion is provided"),
    ({"resource_version": "0", "resource_version_match": "Exact"},
     'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
    ({"resource_version": "1", "resource_version_match": "Newest"}, 'Unsupported value: "Newest"'),
    ({"send_initial_events": True}, "sendInitialEvents is forbidden for list"),
    ({"watch": True, "send_initial_events": True, "allow_watch_bookmarks": True},
     "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
    ({"watch": True, "resource_version_match": "NotOlderThan"},
     "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"),
])
def test_list_options_that_do_not_go_together_are_invalid(api: client.ApiClient, ns: str, options: dict[str, Any],
                                                          message: str) -> None:
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api).list_namespaced_config_map(ns, timeout_seconds=1, **options)
    status = status_of(err.value)
    assert (err.value.status, status["reason"], status["details"]["kind"]) == (422, "Invalid", "ListOptions")
    assert status["message"].startswith('ListOptions.meta.k8s.io "" is invalid: ') and message in status["message"]


def test_a_watch_allowing_bookmarks_gets_one_before_its_deadline(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "quiet"}})
    since = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": f"elsewhere-{ns}"}})  # not watched

    def events(**options: Any) -> list[dict[str, Any]]:
        return list(watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=since,
                                         timeout_seconds=3, **options))

    marks = events(allow_watch_bookmarks=True)
    assert [e["type"] for e in marks] == ["BOOKMARK"]
    # the bookmark carries the store's version: the write in another namespace need not be replayed
    assert int(marks[0]["raw_object"]["metadata"]["resourceVersion"]) > int(since)
    assert marks[0]["raw_object"]["kind"] == "ConfigMap"
    assert events() == []


def test_a_watch_list_sends_the_state_then_the_initial_events_end_bookmark(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    for name in ("w1", "w2"):
        core.create_namespaced_config_map(ns, {"metadata": {"name": name}})
    stream = watch.Watch().stream(core.list_namespaced_config_map, ns, send_initial_events=True,
                                  allow_watch_bookmarks=True, resource_version_match="NotOlderThan", timeout_seconds=2)
    seen = []
    for event in stream:
        seen.append(event)
        if event["type"] == "BOOKMARK":
            break
    added = [e["object"].metadata.name for e in seen if e["type"] == "ADDED"]
    assert {"w1", "w2"} <= set(added) and seen[-1]["type"] == "BOOKMARK"
    end = seen[-1]["raw_object"]["metadata"]
    assert end["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(end["resourceVersion"]) >= max(int(e["object"].metadata.resource_version) for e in seen[:-1])
