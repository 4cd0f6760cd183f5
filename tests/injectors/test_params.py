"""Every injector and noise validates its parameters when it is created: an unknown key or a
value of the wrong type is one ParamsError naming the injector and the field."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel

from injectors.injector import faults, noises
from injectors.fault import ParamsError


def _minimal(model: type[BaseModel]) -> dict[str, object]:
    """Values for the required fields of a params model, of the right type."""
    out: dict[str, object] = {}
    for name, field in model.model_fields.items():
        if not field.is_required():
            continue
        ann = field.annotation
        origin = typing.get_origin(ann)
        if ann is int:
            out[name] = 3
        elif ann is float:
            out[name] = 3.0
        elif origin is list:
            out[name] = ["geo"]
        elif origin is dict:
            out[name] = {"KEY": "1"}
        else:
            out[name] = "geo"
    return out


FAULTS = faults.names()
NOISES = noises.names()


def test_there_are_enough_injectors_and_noises() -> None:
    assert len(FAULTS) >= 50
    assert len(NOISES) >= 6


@pytest.mark.parametrize("name", FAULTS)
def test_injector_accepts_good_params_and_names_a_bad_one(name: str) -> None:
    cls = faults.factory(name)
    good = _minimal(cls.Params)
    injector = faults.create(name, **good)
    assert injector.name == name
    with pytest.raises(ParamsError) as unknown:
        faults.create(name, **good, no_such_param=1)
    assert unknown.value.injector == name and unknown.value.field == "no_such_param"
    # A wrong type for a field: a nested mapping where a scalar or list is expected.
    field = next(iter(cls.Params.model_fields))
    with pytest.raises(ParamsError) as wrong:
        faults.create(name, **{**good, field: {"not": {"a": "scalar"}}})
    assert wrong.value.field.split(".")[0] == field
    assert name in str(wrong.value) and field in str(wrong.value)


@pytest.mark.parametrize("name", NOISES)
def test_noise_names_a_bad_param(name: str) -> None:
    noises.create(name)
    with pytest.raises(ParamsError) as err:
        noises.create(name, window_seconds="soon")
    assert err.value.field == "window_seconds"


def test_range_checks_are_errors_too() -> None:
    with pytest.raises(ParamsError, match="percent"):
        faults.create("nic-packet-loss", service="geo", percent=150)
    with pytest.raises(ParamsError, match="latency"):
        faults.create("network-delay", service="geo", latency="slow")
    with pytest.raises(ParamsError, match="multiplier"):
        faults.create("load-spike", load_generator="load-generator", multiplier=0.5)


def test_flags_mark_triggers_and_real_cluster_paths() -> None:
    assert faults.factory("load-spike").trigger and faults.factory("pod-kill").trigger
    assert not faults.factory("env-var-wrong").trigger
    # Node faults the emulated cluster models run there (as NodeFault objects); a node task
    # without an emulated path would need a real node.
    for name in ("fd-exhaustion", "pid-exhaustion", "cpu-throttling", "node-disk-fill", "kubelet-crash", "node-failure",
                 "eviction-threshold-misconfigured"):
        assert not faults.factory(name).needs_real_cluster, name
    from injectors.node_faults import NodeTask

    assert NodeTask.needs_real_cluster


def test_disk_fill_sizes_read_like_fallocate() -> None:
    from injectors.node_faults import fallocate_bytes

    assert fallocate_bytes("200G") == 200 * 2**30 and fallocate_bytes("1.5GiB") == 1.5 * 2**30
    assert fallocate_bytes("10GB") == 10e9 and fallocate_bytes("4096") == 4096
    with pytest.raises(ParamsError, match="size"):
        faults.create("node-disk-fill", service="geo", size="lots")


def test_no_param_is_called_name() -> None:
    # Registry.create(name, **params) would take it for the plugin's own name.
    for name in FAULTS:
        assert "name" not in faults.factory(name).Params.model_fields, name
    for name in NOISES:
        assert "name" not in noises.factory(name).Params.model_fields, name
