"""The Chaos Mesh specs the faults and noises write, built from the action blocks spelled once in
injectors.fault (netem_delay, netem_share, io_chaos): each one as it was before they were shared,
field for field, so a change to a block shows up here as a reviewable diff."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kube import Obj
from injectors.injector import faults, noises
from injectors.noise import Event


class _Workloads:
    """The one Kube call a spec makes: the target workload, whose selector the experiment copies."""

    def workload(self, namespace: str, name: str) -> tuple[str, Obj]:
        return "Deployment", {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": name}}}}


def _sel(app: str) -> Obj:
    return {"labelSelectors": {"app": app}, "namespaces": ["ns"]}


POD_FAULTS: list[tuple[str, dict[str, Any], Obj]] = [
    ("stress-cpu", {"service": "geo"},
     {"mode": "all", "selector": _sel("geo"), "stressors": {"cpu": {"load": 100, "workers": 2}}}),
    ("stress-memory", {"service": "geo", "memory_size": "1GB"},
     {"mode": "all", "selector": _sel("geo"), "stressors": {"memory": {"size": "1GB", "workers": 1}}}),
    ("network-delay", {"service": "geo", "latency": "200ms", "jitter": "10ms"},
     {"action": "delay", "delay": {"correlation": "0", "jitter": "10ms", "latency": "200ms"}, "direction": "to",
      "mode": "all", "selector": _sel("geo")}),
    ("network-loss", {"service": "geo", "loss": 40},
     {"action": "loss", "direction": "to", "loss": {"correlation": "0", "loss": "40"}, "mode": "all",
      "selector": _sel("geo")}),
    ("io-latency", {"service": "mongodb-geo"},
     {"action": "latency", "delay": "200ms", "mode": "all", "path": "/data/db/**/*", "percent": 100,
      "selector": _sel("mongodb-geo"), "volumePath": "/data/db"}),
    ("latency-spike", {"service": "geo"},
     {"action": "delay", "delay": {"correlation": "0", "jitter": "0ms", "latency": "500ms"}, "direction": "to",
      "mode": "all", "selector": _sel("geo")}),
]


@pytest.mark.parametrize(("name", "params", "expected"), POD_FAULTS, ids=[f[0] for f in POD_FAULTS])
def test_pod_fault_spec(name: str, params: dict[str, Any], expected: Obj) -> None:
    assert faults.create(name, **params).spec(_Workloads(), "ns") == expected  # type: ignore[attr-defined]


NODE_FAULTS: list[tuple[str, dict[str, Any], Obj, Obj | None]] = [
    ("nic-packet-corruption", {"percent": 20},
     {"action": "corrupt", "corrupt": {"correlation": "0", "corrupt": "20"}, "direction": "to"},
     {"nic": {"corruptPercent": 20}}),
    ("nic-packet-loss", {}, {"action": "loss", "direction": "to", "loss": {"correlation": "0", "loss": "30"}},
     {"nic": {"lossPercent": 30}}),
    ("disk-degraded", {},
     {"action": "latency", "delay": "800ms", "path": "/data/db/**/*", "percent": 100, "volumePath": "/data/db"}, None),
    ("disk-full", {},
     {"action": "fault", "errno": 28, "methods": ["write", "fsync", "flush", "create", "mkdir"],
      "path": "/data/db/**/*", "percent": 100, "volumePath": "/data/db"}, None),
    ("volume-open-emfile", {"volume_path": "/var/lib/mysql"},
     {"action": "fault", "errno": 24, "methods": ["open", "create"], "path": "/var/lib/mysql/**/*", "percent": 100,
      "volumePath": "/var/lib/mysql"}, None),
    ("disk-silent-corruption", {"max_length": 16},
     {"action": "mistake", "methods": ["read"], "mistake": {"filling": "random", "maxLength": 16, "maxOccurrences": 1},
      "path": "/data/db/**/*", "percent": 100, "volumePath": "/data/db"}, None),
    ("disk-latent-sector-errors", {"ops": ["read", "write"]},
     {"action": "fault", "errno": 5, "methods": ["read", "write"], "path": "/data/db/**/*", "percent": 30,
      "volumePath": "/data/db"},
     {"disk": {"errorPercent": 30, "ops": ["read", "write"], "sectorCount": 64, "sectorStart": 1953792}}),
]


@pytest.mark.parametrize(("name", "params", "expected", "emulated"), NODE_FAULTS, ids=[f[0] for f in NODE_FAULTS])
def test_node_fault_spec(name: str, params: dict[str, Any], expected: Obj, emulated: Obj | None) -> None:
    fault: Any = faults.create(name, node="worker-1", **params)
    assert fault.node_spec() == expected
    assert (fault.sim_spec() if hasattr(fault, "sim_spec") else None) == emulated


NOISES: list[tuple[str, Obj]] = [
    ("packet-loss-burst", {"action": "loss", "direction": "to", "loss": {"correlation": "0", "loss": "12"}}),
    ("latency-burst", {"action": "delay", "delay": {"correlation": "0", "jitter": "5ms", "latency": "70ms"},
                       "direction": "to"}),
    ("error-burst", {"action": "loss", "direction": "to", "loss": {"correlation": "25", "loss": "12"}}),
    ("alert-burst", {"action": "delay", "delay": {"correlation": "25", "jitter": "50ms", "latency": "70ms"},
                     "direction": "to"}),
]


@pytest.mark.parametrize(("name", "expected"), NOISES, ids=[n[0] for n in NOISES])
def test_noise_chaos_spec(name: str, expected: Obj) -> None:
    event = Event(at=0.0, until=1.0, target="x", data={"loss": 12, "ms": 70})
    assert noises.create(name).chaos_spec(event) == expected  # type: ignore[attr-defined]
