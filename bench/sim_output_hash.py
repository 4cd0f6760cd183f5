"""Digests of what one emulated cluster produces, to show that a change of the engine or of how
an application is declared leaves its output identical: an application deployed and run under its
load, then a fault (a store's pods deleted and a service's address variable pointed nowhere), then
more time. Prints one SHA-256 (first 16 hex digits) each for the metric samples, the log lines, the
spans, the Kubernetes events, the final store and the next draw of the cluster's random generator.

    PYTHONHASHSEED=0 .venv/bin/python bench/sim_output_hash.py [--app social-network] [--minutes 3]

Run it on two commits (e.g. `git worktree` or `git archive` of each) with the same arguments and
compare the lines: any difference is a change of behaviour."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import io
import pickle
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# per application: (a store whose pods the fault deletes, a deployment and the address variable the fault breaks)
FAULTS = {
    "hotel-reservation": ("mongodb-rate", "frontend", "JAEGER_SAMPLE_RATIO"),
    "social-network": ("post-storage-memcached", "compose-post-service", "fqdn_suffix"),
    "astronomy-shop": ("valkey-cart", "checkout", "CART_ADDR"),
    "train-ticket": ("ts-order-mongo", "ts-travel-service", "NACOS_ADDRS"),
}


START = 1_780_000_000.0  # a fixed clock: the default is the wall clock, which would change every digest


def _plain(value: Any) -> Any:
    """The value as plain data: an object becomes (its class's name, its fields), so moving a class
    to another module (a refactor) changes no digest while any change of content does."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | collections.deque):
        return type(value).__name__, [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return type(value).__name__, sorted((_plain(v) for v in value), key=repr)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value).__qualname__, {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return type(value).__qualname__, _plain(vars(value))
    if hasattr(value, "__slots__") and not isinstance(value, type):
        return type(value).__qualname__, {k: _plain(getattr(value, k, None)) for k in value.__slots__}
    return value


def digest(value: Any) -> str:
    """A digest of the value, not of its objects' identities: pickle's memo would write a string shared
    by two records once and a copy twice, so equal output built from other objects would differ."""
    buf = io.BytesIO()
    pickler = pickle._Pickler(buf, protocol=4)  # the C pickler cannot do without its memo
    pickler.fast = True  # no memo
    pickler.dump(_plain(value))
    return hashlib.sha256(buf.getvalue()).hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", default="social-network")
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-fault", action="store_true")
    args = ap.parse_args()
    from apps import load_application
    from kubesim.cluster import SimCluster

    cluster = SimCluster(seed=args.seed, start=START)
    app = load_application(args.app)
    cluster.apply_files(app.manifest_files(), app.namespace)
    cluster.advance(args.minutes * 60)
    if not args.no_fault and args.app in FAULTS:
        store, deployment, var = FAULTS[args.app]
        for pod in cluster.store.list("pods", app.namespace):
            if pod["metadata"]["name"].startswith(store + "-"):
                cluster.store.delete("pods", app.namespace, pod["metadata"]["name"])

        def break_address(obj: dict[str, Any]) -> None:
            container = obj["spec"]["template"]["spec"]["containers"][0]
            env = [e for e in container.get("env") or [] if e.get("name") != var]
            container["env"] = env + [{"name": var, "value": "nowhere.invalid:1"}]

        if cluster.store.try_get("deployments", app.namespace, deployment) is not None:
            cluster.store.mutate("deployments", app.namespace, deployment, break_address)
        cluster.advance(args.minutes * 60)
    telemetry = cluster.obs.checkpoint()
    print(f"app {args.app}, {args.minutes:g} min{'' if args.no_fault else ' + fault + the same again'}, seed {args.seed}")
    print(f"samples {digest(telemetry['tsdb'])}")
    print(f"logs    {digest((telemetry['logs'], cluster.logs.state))}")
    print(f"spans   {digest(telemetry['traces'])}")
    print(f"events  {digest(cluster.events.state)}")
    print(f"store   {digest(cluster.store.checkpoint())}")
    print(f"rng     {cluster.rng.random()!r}")


if __name__ == "__main__":
    main()
