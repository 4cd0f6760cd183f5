"""apps/<app>/topology.yaml and the emulator's graphs say the same thing: the graphs are built from
the files, so reading every graph back into the file's form must give the file exactly (a field the
emulator ignores, or structure it declares in code instead, shows up here), and the workloads the
file names for each service are the ones the emulator's own identification finds in the manifests."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from apps.application import APPS_DIR
from apps.topology import load_topology
from core.errors import ConfigurationError
from kubesim.apps.model import _load_builtin
from kubesim.apps.graph import GRAPHS, AppGraph, Peer
from kubesim.apps.graph import Service as GraphService

_load_builtin()

PEER_FIELDS = ("name", "protocol", "service", "env", "port_env", "config", "default", "required", "at_start",
               "suffix_env", "discovery")
CALL_FIELDS = ("peer", "op", "share", "on_error", "write", "on_miss")
ROUTE_FIELDS = ("name", "method", "service", "op", "share", "script", "timeout", "target", "path")
DEFAULTS = {"service": "", "env": "", "port_env": "", "config": None, "default": "", "required": False,
            "at_start": False, "suffix_env": "", "discovery": False, "share": 1.0, "on_error": "fail", "write": False,
            "on_miss": "", "script": "", "timeout": None, "target": "", "path": ""}


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def _fields(obj: Any, names: tuple[str, ...], always: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields of `obj` that differ from their defaults (and `always`), as the file writes them."""
    out = {}
    for name in names:
        value = getattr(obj, name)
        if name in always or name not in DEFAULTS or value != DEFAULTS[name]:
            out[name] = _plain(value)
    return out


def manifest_workloads(app: str, graph: AppGraph) -> dict[str, list[str]]:
    """service → the manifests' workloads the graph's identification says run it, in file order."""
    out: dict[str, list[str]] = {}
    for path in sorted((APPS_DIR / app / "manifests").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or doc.get("kind") not in ("Deployment", "StatefulSet", "DaemonSet"):
                continue
            containers = doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
            name = graph.identify(containers[0]) if containers else None
            if name in graph.services:
                out.setdefault(name, []).append(doc["metadata"]["name"])
    return out


def structure_of(graph: AppGraph) -> dict[str, Any]:
    """A graph's structure in topology.yaml's form."""
    workloads = manifest_workloads(graph.name, graph)

    def service(svc: GraphService) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if workloads.get(svc.name):
            body["workloads"] = workloads[svc.name]
        body["ports"] = list(svc.ports)
        if svc.required_env:
            body["required_env"] = list(svc.required_env)
        if svc.names:
            body["names"] = dict(svc.names)
        if svc.peers:
            body["peers"] = [_peer(p) for p in svc.peers]
        body["ops"] = {op: [_fields(c, CALL_FIELDS, ("peer", "op")) for c in calls] for op, calls in svc.ops.items()}
        return body

    def _peer(p: Peer) -> dict[str, Any]:
        return _fields(p, PEER_FIELDS, ("name", "protocol"))

    return {"app": graph.name, "entry": graph.routes[0].service,
            "services": {name: service(svc) for name, svc in graph.services.items()},
            "routes": [_fields(r, ROUTE_FIELDS, ("name", "method", "service", "op", "share")) for r in graph.routes]}


# the applications the farm ships (other tests register toy graphs of their own in GRAPHS)
GRAPH_APPS = sorted(p.parent.name for p in APPS_DIR.glob("*/topology.yaml"))


def test_every_shipped_graph_application_declares_its_topology() -> None:
    shipped = sorted(name for name, graph in GRAPHS.items() if graph.identify.__module__.startswith("kubesim.apps."))
    assert shipped == GRAPH_APPS == ["astronomy-shop", "hotel-reservation", "social-network", "train-ticket"]


@pytest.mark.parametrize("app", GRAPH_APPS)
def test_the_emulators_graph_is_its_topology_file(app: str) -> None:
    declared = yaml.safe_load((APPS_DIR / app / "topology.yaml").read_text())
    assert structure_of(GRAPHS[app]) == declared


@pytest.mark.parametrize("app", GRAPH_APPS)
def test_the_file_validates_and_names_only_manifest_workloads(app: str) -> None:
    top = load_topology(app)
    assert top.entry == top.routes[0].service
    for svc in top.services.values():
        for call in (c for calls in svc.ops.values() for c in calls):
            assert call.peer in {p.name for p in svc.peers}
    assert top.services[top.entry].workloads  # the entry point runs somewhere


def test_a_call_to_an_undeclared_peer_is_one_clear_error(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import apps.topology as topology

    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "topology.yaml").write_text(yaml.safe_dump({
        "app": "toy", "entry": "web",
        "services": {"web": {"ports": [80], "ops": {"GET /": [{"peer": "db", "op": "SELECT"}]}}},
        "routes": [{"name": "/", "method": "GET", "service": "web", "op": "GET /", "share": 1.0}]}))
    monkeypatch.setattr(topology, "APPS_DIR", tmp_path)
    topology.load_topology.cache_clear()
    try:
        with pytest.raises(ConfigurationError, match=r"web 'GET /' calls 'db', which is none of its peers"):
            topology.load_topology("toy")
        with pytest.raises(ConfigurationError, match="declares no topology"):
            topology.load_topology("absent")
    finally:
        topology.load_topology.cache_clear()


def test_hotels_own_start_up_agrees_with_its_topology() -> None:
    # HotelService starts the binaries itself (config.json keys, Consul registration): the names and
    # ports it uses are the ones the file declares, which the injectors aim by
    from kubesim.apps.hotel import CONFIG, SERVICES

    top = load_topology("hotel-reservation")
    for name, svc in SERVICES.items():
        decl = top.services[name]
        assert decl.names.get("consul", "") == (svc.consul or "")
        assert decl.names.get("db", "") == svc.db
        assert decl.ports == (int(CONFIG[svc.port_key]),) + ((svc.metrics_port,) if svc.metrics_port else ())
