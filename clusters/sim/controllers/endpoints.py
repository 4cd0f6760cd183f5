"""The endpoints controller: for every Service with a selector, the pods it selects, split into
ready and not-ready addresses, with each service port's targetPort resolved against the pod (a
named targetPort the pod does not declare drops the pod, as the real controller does)."""

from __future__ import annotations

from typing import Any

from clusters.sim.controllers.common import is_ready, is_terminal
from clusters.sim.store import Obj, Store, StoreError, match_labels


def _target_port(pod: Obj, sport: dict[str, Any]) -> int | None:
    tp = sport.get("targetPort", sport.get("port"))
    if isinstance(tp, int) or (isinstance(tp, str) and tp.isdigit()):
        return int(tp)
    for c in pod["spec"].get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") == tp and p.get("protocol", "TCP") == sport.get("protocol", "TCP"):
                return int(p["containerPort"])
    return None


class EndpointsController:
    # A function of stored objects alone: the cluster skips it while nothing in the store changed.
    store_driven = True

    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, now: float) -> None:
        store = self.store
        pods_by_ns: dict[str, list[Obj]] = {}
        services = self.store.scan("services")
        seen = set()
        for svc in services:
            ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
            spec = svc.get("spec") or {}
            selector = spec.get("selector")
            if not selector or spec.get("type") == "ExternalName":
                continue
            seen.add((ns, name))
            if ns not in pods_by_ns:
                pods_by_ns[ns] = [p for p in self.store.scan("pods", ns) if not is_terminal(p)
                                  and (p.get("status") or {}).get("podIP") and not p["metadata"].get("deletionTimestamp")]
            groups: dict[tuple, dict[str, Any]] = {}
            for pod in pods_by_ns[ns]:
                if not match_labels(selector, pod["metadata"].get("labels")):
                    continue
                ports = []
                for sp in spec.get("ports") or []:
                    tp = _target_port(pod, sp)
                    if tp is None:
                        continue
                    entry = {"port": tp, "protocol": sp.get("protocol", "TCP")}
                    if sp.get("name"):
                        entry["name"] = sp["name"]
                    ports.append(entry)
                if not ports:
                    continue
                key = tuple(sorted((p.get("name", ""), p["port"], p["protocol"]) for p in ports))
                g = groups.setdefault(key, {"ports": ports, "addresses": [], "notReadyAddresses": []})
                addr = {"ip": pod["status"]["podIP"], "nodeName": pod["spec"].get("nodeName", ""),
                        "targetRef": {"kind": "Pod", "namespace": ns, "name": pod["metadata"]["name"],
                                      "uid": pod["metadata"]["uid"]}}
                if is_ready(pod) or spec.get("publishNotReadyAddresses"):
                    g["addresses"].append(addr)
                else:
                    g["notReadyAddresses"].append(addr)
            subsets = []
            for g in groups.values():
                g["addresses"].sort(key=lambda a: a["ip"])
                g["notReadyAddresses"].sort(key=lambda a: a["ip"])
                sub = {k: v for k, v in g.items() if v}
                subsets.append(sub)
            subsets.sort(key=lambda s: str(s.get("ports")))
            cur = self.store.raw("endpoints", ns, name)
            labels = dict(svc["metadata"].get("labels") or {})
            if cur is None:
                obj = {"metadata": {"name": name, "namespace": ns, "labels": labels}}
                if subsets:
                    obj["subsets"] = subsets
                try:
                    store.create("endpoints", obj)
                except StoreError:
                    pass
            elif (cur.get("subsets") or []) != subsets:
                def put(o: Obj, s: list[Any] = subsets) -> None:
                    if s:
                        o["subsets"] = s
                    else:
                        o.pop("subsets", None)
                store.mutate("endpoints", ns, name, put)
        # endpoints of deleted services go with them
        with store.lock:
            orphans = [(e["metadata"]["namespace"], e["metadata"]["name"]) for e in store.iter_raw("endpoints")]
        svc_keys = {(s["metadata"]["namespace"], s["metadata"]["name"]) for s in services}
        for key in orphans:
            if key not in svc_keys:
                try:
                    store.delete("endpoints", *key)
                except StoreError:
                    pass
