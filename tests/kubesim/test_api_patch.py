"""The patch kinds against the documents kubectl and clients send: JSON merge patch, JSON patch
and strategic merge patch with merge keys and directives."""

from __future__ import annotations

import pytest

from kubesim.api.patch import apply_patch, json_patch, merge_patch, strategic_merge_patch
from kubesim.store import StoreError

POD_SPEC = {"spec": {"containers": [
    {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
     "ports": [{"containerPort": 8080, "protocol": "TCP"}],
     "volumeMounts": [{"name": "cfg", "mountPath": "/etc/app"}]},
    {"name": "proxy", "image": "envoy:1"}],
    "volumes": [{"name": "cfg", "configMap": {"name": "app-config"}}]}}


def test_merge_patch_rfc7386() -> None:
    assert merge_patch({"a": "b", "c": {"d": "e", "f": "g"}}, {"a": "z", "c": {"f": None}}) == {"a": "z", "c": {"d": "e"}}
    assert merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    assert merge_patch({"a": 1}, {"b": {"c": None}}) == {"a": 1, "b": {}}


def test_json_patch_rfc6902() -> None:
    doc = {"a": {"b": [1, 2, 3]}, "x~y": 1, "s/t": 2}
    out = json_patch(doc, [{"op": "add", "path": "/a/b/1", "value": 9}, {"op": "remove", "path": "/a/b/0"},
                           {"op": "replace", "path": "/x~0y", "value": 5}, {"op": "move", "from": "/s~1t", "path": "/m"},
                           {"op": "copy", "from": "/m", "path": "/n"}, {"op": "add", "path": "/a/b/-", "value": 4}])
    assert out == {"a": {"b": [9, 2, 3, 4]}, "x~y": 5, "m": 2, "n": 2}
    assert doc["a"]["b"] == [1, 2, 3]
    for bad in ([{"op": "replace", "path": "/nope", "value": 1}], [{"op": "remove", "path": "/a/b/7"}],
                [{"op": "test", "path": "/x~0y", "value": 2}], [{"op": "frobnicate", "path": "/a"}], {"op": "add"}):
        with pytest.raises(StoreError) as err:
            json_patch(doc, bad)
        assert err.value.code == 422


def test_strategic_merge_by_merge_keys() -> None:
    out = strategic_merge_patch(POD_SPEC, {"spec": {"containers": [
        {"name": "app", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
         "ports": [{"containerPort": 9090}], "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}, "Pod")
    app = out["spec"]["containers"][0]
    assert [(e["name"], e["value"]) for e in app["env"]] == [("A", "1"), ("B", "3"), ("C", "4")]
    assert [p["containerPort"] for p in app["ports"]] == [8080, 9090]
    assert [m["mountPath"] for m in app["volumeMounts"]] == ["/etc/app", "/data"]
    assert out["spec"]["containers"][1] == {"name": "proxy", "image": "envoy:1"}
    assert POD_SPEC["spec"]["containers"][0]["env"][1]["value"] == "2"  # the original is untouched


def test_strategic_merge_directives() -> None:
    out = strategic_merge_patch(POD_SPEC, {"spec": {
        "$setElementOrder/containers": [{"name": "proxy"}, {"name": "app"}],
        "containers": [{"name": "app", "env": [{"$patch": "delete", "name": "A"}]}],
        "volumes": [{"name": "cfg", "$retainKeys": ["name", "emptyDir"], "emptyDir": {}}]}}, "Pod")
    assert [c["name"] for c in out["spec"]["containers"]] == ["proxy", "app"]
    assert [e["name"] for e in out["spec"]["containers"][1]["env"]] == ["B"]
    assert out["spec"]["volumes"] == [{"name": "cfg", "emptyDir": {}}]
    out = strategic_merge_patch(POD_SPEC, {"spec": {"containers": [{"name": "app", "env": [{"$patch": "replace"},
                                                                                            {"name": "Z", "value": "9"}]}]}}, "Pod")
    assert out["spec"]["containers"][0]["env"] == [{"name": "Z", "value": "9"}]
    out = strategic_merge_patch({"metadata": {"labels": {"a": "1"}, "finalizers": ["x"]}},
                                {"metadata": {"labels": {"$patch": "replace", "b": "2"}, "finalizers": ["y"]}}, "Pod")
    assert out["metadata"] == {"labels": {"b": "2"}, "finalizers": ["x", "y"]}
    out = strategic_merge_patch({"metadata": {"finalizers": ["x", "y"]}, "spec": {"a": {"b": 1}}},
                                {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}, "spec": {"a": {"$patch": "delete"}}}, "Pod")
    assert out == {"metadata": {"finalizers": ["y"]}, "spec": {}}


def test_service_ports_merge_on_port_and_atomic_lists_replace() -> None:
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}],
                    "externalIPs": ["1.2.3.4"]}}
    out = strategic_merge_patch(svc, {"spec": {"ports": [{"port": 80, "targetPort": 9999}], "externalIPs": ["5.6.7.8"]}},
                                "Service")
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 9999}, {"port": 443, "targetPort": 8443}]
    assert out["spec"]["externalIPs"] == ["5.6.7.8"]
    with pytest.raises(StoreError) as err:
        strategic_merge_patch(POD_SPEC, {"spec": {"containers": [{"image": "x"}]}}, "Pod")
    assert "does not contain declared merge key: name" in err.value.message


def test_unknown_patch_type_is_415() -> None:
    with pytest.raises(StoreError) as err:
        apply_patch("application/xml", {}, {}, "Pod")
    assert err.value.code == 415
