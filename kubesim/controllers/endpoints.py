"""The endpoints controller: for every Service with a selector, the pods it selects, split into
ready and not-ready addresses, with each service port's targetPort resolved against the pod (a
named targetPort the pod does not declare drops the pod, as the real controller does)."""

from __future__ import annotations

import hashlib
from typing import Any

from kubesim.controllers.common import SUFFIX_ALPHABET, is_ready, is_terminal, owner_ref
from kubesim.store import Obj, Store, StoreError, match_labels


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
    """The endpoints and endpointslice controllers in one pass over the services."""

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
                # terminating pods too: EndpointSlices list them (terminating, not ready); Endpoints do not
                pods_by_ns[ns] = [p for p in self.store.scan("pods", ns) if not is_terminal(p)
                                  and (p.get("status") or {}).get("podIP")]
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
                g = groups.setdefault(key, {"ports": ports, "addresses": [], "notReadyAddresses": [], "slice": []})
                addr = {"ip": pod["status"]["podIP"], "nodeName": pod["spec"].get("nodeName", ""),
                        "targetRef": {"kind": "Pod", "namespace": ns, "name": pod["metadata"]["name"],
                                      "uid": pod["metadata"]["uid"]}}
                serving = is_ready(pod) or bool(spec.get("publishNotReadyAddresses"))
                terminating = bool(pod["metadata"].get("deletionTimestamp"))
                g["slice"].append({"addresses": [addr["ip"]], "nodeName": addr["nodeName"], "targetRef": addr["targetRef"],
                                   "conditions": {"ready": serving and not terminating, "serving": serving,
                                                  "terminating": terminating}})
                if terminating:
                    continue
                if serving:
                    g["addresses"].append(addr)
                else:
                    g["notReadyAddresses"].append(addr)
            self._slices(svc, [(g["ports"], g.pop("slice")) for g in groups.values()])
            subsets = []
            for g in groups.values():
                if not g["addresses"] and not g["notReadyAddresses"]:
                    continue
                g["addresses"].sort(key=lambda a: a["ip"])
                g["notReadyAddresses"].sort(key=lambda a: a["ip"])
                sub = {k: v for k, v in g.items() if v}
                subsets.append(sub)
            subsets.sort(key=lambda s: str(s.get("ports")))
            cur = self.store.raw("endpoints", ns, name)
            labels = dict(svc["metadata"].get("labels") or {})
            if cur is None:
                obj: dict[str, Any] = {"metadata": {"name": name, "namespace": ns, "labels": labels}}
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
        # endpoints of deleted services go with them (their EndpointSlices with their owner reference)
        with store.lock:
            orphans = [(e["metadata"]["namespace"], e["metadata"]["name"]) for e in store.iter_raw("endpoints")]
        svc_keys = {(s["metadata"]["namespace"], s["metadata"]["name"]) for s in services}
        for orphan in orphans:
            if orphan not in svc_keys:
                try:
                    store.delete("endpoints", *orphan)
                except StoreError:
                    pass

    def _slices(self, svc: Obj, groups: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]) -> None:
        """One EndpointSlice per distinct set of ports, named and labelled as the endpointslice
        controller does; every selected pod is listed, a terminating one with ready=false and
        terminating=true (serving tells whether it still passes readiness)."""
        store, ns, name = self.store, svc["metadata"]["namespace"], svc["metadata"]["name"]
        want: dict[str, Obj] = {}
        for i, (ports, endpoints) in enumerate(sorted(groups, key=lambda g: str(g[0])) or [([], [])]):
            digest = hashlib.sha256(f"{svc['metadata']['uid']}/{i}".encode()).digest()
            slice_name = f"{name}-" + "".join(SUFFIX_ALPHABET[b % len(SUFFIX_ALPHABET)] for b in digest[:5])
            want[slice_name] = {
                "metadata": {"name": slice_name, "namespace": ns, "generateName": f"{name}-",
                             "labels": {**(svc["metadata"].get("labels") or {}), "kubernetes.io/service-name": name,
                                        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                             "ownerReferences": [owner_ref(svc)]},
                "addressType": "IPv4",
                "endpoints": sorted(endpoints, key=lambda e: e["addresses"][0]),
                "ports": [{k: p[k] for k in ("name", "port", "protocol") if k in p} for p in ports]}
        for slice_name, obj in want.items():
            cur = self.store.raw("endpointslices.discovery.k8s.io", ns, slice_name)
            if cur is None:
                try:
                    store.create("endpointslices.discovery.k8s.io", obj)
                except StoreError:
                    pass
            elif (cur.get("endpoints"), cur.get("ports")) != (obj["endpoints"], obj["ports"]):
                def put(o: Obj, new: Obj = obj) -> None:
                    o["endpoints"], o["ports"] = new["endpoints"], new["ports"]
                store.mutate("endpointslices.discovery.k8s.io", ns, slice_name, put)
        with store.lock:
            stale = [o["metadata"]["name"] for o in store.iter_raw("endpointslices.discovery.k8s.io")
                     if o["metadata"].get("namespace") == ns
                     and (o["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == name
                     and o["metadata"]["name"] not in want]
        for slice_name in stale:
            try:
                store.delete("endpointslices.discovery.k8s.io", ns, slice_name)
            except StoreError:
                pass
