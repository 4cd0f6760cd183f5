"""apiextensions on the emulated API server: a CustomResourceDefinition written through the API is
Established and serves its resource (discovery, REST) at once, a malformed one is refused with
the field named, deleting it stops serving its kind, and a restore rewinds what is served."""

from __future__ import annotations

import pytest

from clusters.kube import Kube, KubeError
from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def definition(name: str = "widgets.example.com", plural: str = "widgets") -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": plural, "kind": "Widget", "shortNames": ["wg"]},
                     "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture(scope="module")
def rest(sim_clusters: SimClusters) -> tuple[SimHandle, Kube]:
    handle = sim_clusters.served()
    return handle, Kube(handle.api_client())


def test_a_definition_serves_its_kind_until_deleted(rest: tuple[SimHandle, Kube]) -> None:
    handle, api = rest
    handle.checkpoint("before-widgets")
    created = api.request("POST", CRDS, definition())
    assert {c["type"]: c["status"] for c in created["status"]["conditions"]} == {"NamesAccepted": "True",
                                                                                 "Established": "True"}
    assert created["status"]["acceptedNames"]["listKind"] == "WidgetList"
    resources = api.request("GET", "/apis/example.com/v1")["resources"]
    assert [(r["name"], r["namespaced"], r.get("shortNames")) for r in resources if "/" not in r["name"]] == \
        [("widgets", True, ["wg"])]
    assert "status" in {r["name"].split("/")[1] for r in resources if "/" in r["name"]}
    api.request("POST", "/apis/example.com/v1/namespaces/default/widgets",
             {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}})
    assert api.request("GET", "/apis/example.com/v1/namespaces/default/widgets/w1")["spec"] == {"size": 3}

    handle.checkpoint("with-widgets")
    api.request("DELETE", f"{CRDS}/widgets.example.com")
    with pytest.raises(KubeError) as err:
        api.request("GET", "/apis/example.com/v1/namespaces/default/widgets")
    assert err.value.code == 404
    handle.restore("with-widgets")  # the definition and its object are back, and served
    assert api.request("GET", "/apis/example.com/v1/namespaces/default/widgets/w1")["metadata"]["name"] == "w1"
    handle.restore("before-widgets")
    with pytest.raises(KubeError) as err:
        api.request("GET", "/apis/example.com/v1/namespaces/default/widgets")
    assert err.value.code == 404


def test_a_malformed_definition_is_refused_naming_the_field(rest: tuple[SimHandle, Kube]) -> None:
    _, api = rest
    with pytest.raises(KubeError) as err:
        api.request("POST", CRDS, definition(name="gadgets.example.com"))
    assert err.value.code == 422 and "metadata.name" in str(err.value)


def test_built_in_custom_kinds_keep_being_served(rest: tuple[SimHandle, Kube]) -> None:
    _, api = rest
    assert api.request("GET", "/apis/chaos-mesh.org/v1alpha1/namespaces/default/podchaos")["items"] == []
