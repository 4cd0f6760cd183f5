"""The resource metrics API (metrics.k8s.io/v1beta1 PodMetrics and NodeMetrics) behind
`kubectl top`, computed the way metrics-server reports them: CPU as the rate of
container_cpu_usage_seconds_total over the last window, memory as the latest
container_memory_working_set_bytes, both read from the cluster's own TSDB (cAdvisor's series,
labels namespace/pod/container); a node's usage is the sum of its pods'. A pod is listed once
every container has a CPU rate: from its second scrape, or its first for a fresh container."""

from __future__ import annotations

import math
from typing import Any

from kubesim.store import Obj, Store

WINDOW = 60.0
CPU = "container_cpu_usage_seconds_total"
MEMORY = "container_memory_working_set_bytes"
START = "container_start_time_seconds"
# metrics-server (pkg/storage/pod.go, freshContainerMinMetricsResolution): a container scraped at
# least this long after it started is reported from its first scrape, its start time counting as a
# point with no CPU used; an older one needs two scrapes.
FRESH_CONTAINER_MIN = 10.0


def _samples(series: Any, since: float, until: float) -> list[tuple[float, float]]:
    return [(t, v) for t, v in zip(series.ts, series.vs, strict=False) if since <= t <= until and not math.isnan(v)]


def _rate(points: list[tuple[float, float]]) -> float | None:
    if len(points) < 2:
        return None
    (t0, v0), (t1, v1) = points[0], points[-1]
    if t1 <= t0:
        return None
    return max(0.0, (v1 - v0) if v1 >= v0 else v1) / (t1 - t0)


def cpu_quantity(cores: float) -> str:
    return f"{int(round(cores * 1e9))}n"


def memory_quantity(nbytes: float) -> str:
    return f"{int(nbytes // 1024)}Ki"


class ResourceMetrics:
    """Reads usage from `obs.tsdb` (looked up on each call: a restore may swap it)."""

    def __init__(self, store: Store, obs: Any, kubelet: Any = None) -> None:
        """`kubelet` set: metrics-server's own scrape of each kubelet (every 15 s, more often than
        Prometheus scrapes cAdvisor) is stood in for by the kubelet's live counters, for a
        container not yet in the TSDB's window."""
        self.store, self.obs, self.kubelet = store, obs, kubelet

    def _scraped_now(self, usage: dict[tuple[str, str], dict[str, dict[str, float]]], now: float) -> None:
        """Pods the TSDB has no CPU rate for yet, from the kubelet's counters: a fresh container
        scraped at least FRESH_CONTAINER_MIN after its start, that start counting as the previous point."""
        for rt in self.kubelet.state["pods"].values():
            have = usage.get((rt.namespace, rt.name))
            if have and all("cpu" in c for c in have.values()):
                continue
            fresh: dict[str, dict[str, float]] = {}
            for c in rt.containers.values():
                if c.state != "running" or c.started_at is None or now - c.started_at < FRESH_CONTAINER_MIN:
                    continue
                fresh[c.name] = {"cpu": c.cpu_seconds / (now - c.started_at), "memory": float(c.memory)}
            if fresh:
                usage[(rt.namespace, rt.name)] = fresh

    def _usage(self, namespace: str | None) -> dict[tuple[str, str], dict[str, dict[str, float]]]:
        """(namespace, pod) → container → {"cpu": cores, "memory": bytes}."""
        from kubesim.observability.prometheus.tsdb import Matcher

        now = self.store.clock.now()
        tsdb = self.obs.tsdb
        matchers = [Matcher("container", "!=", ""), Matcher("container", "!=", "POD"), Matcher("pod", "!=", "")]
        if namespace:
            matchers.append(Matcher("namespace", "=", namespace))
        out: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
        started = {s.labels.get("id"): s.vs[-1] for s in tsdb.select([Matcher("__name__", "=", START), *matchers])
                   if s.vs and not math.isnan(s.vs[-1])}
        for metric, key in ((CPU, "cpu"), (MEMORY, "memory")):
            for s in tsdb.select([Matcher("__name__", "=", metric), *matchers]):
                points = _samples(s, now - WINDOW, now)
                if key == "cpu":
                    value = _rate(points) if len(points) >= 2 else _rate(_samples(s, now - 4 * WINDOW, now)[-2:])
                    start = started.get(s.labels.get("id"))
                    if value is None and len(points) == 1 and start and points[0][0] - start >= FRESH_CONTAINER_MIN:
                        # a fresh container's start, with no CPU used yet, is its previous point
                        value = _rate([(start, 0.0), points[0]])
                else:
                    value = points[-1][1] if points else None
                if value is None:
                    continue
                lbl = s.labels
                slot = out.setdefault((lbl.get("namespace", ""), lbl["pod"]), {}).setdefault(lbl["container"], {})
                slot[key] = slot.get(key, 0.0) + value
        return out

    def _pod_item(self, pod: Obj, usage: dict[str, dict[str, float]], now: float) -> Obj:
        meta = pod["metadata"]
        names = [c["name"] for c in pod["spec"].get("containers", [])]
        return {"metadata": {"name": meta["name"], "namespace": meta["namespace"],
                             "creationTimestamp": self.store.clock.rfc3339(now), "labels": meta.get("labels") or {}},
                "timestamp": self.store.clock.rfc3339(now), "window": f"{int(WINDOW)}s",
                "containers": [{"name": n, "usage": {"cpu": cpu_quantity(usage[n].get("cpu", 0.0)),
                                                     "memory": memory_quantity(usage[n].get("memory", 0.0))}}
                               for n in names if n in usage]}

    def pods(self, namespace: str | None, name: str | None, label_filter: Any) -> list[Obj]:
        """PodMetrics of running pods that have samples (metrics-server leaves the others out)."""
        now = self.store.clock.now()
        usage = self._usage(namespace)
        if self.kubelet is not None:
            self._scraped_now(usage, now)
        items = []
        with self.store.lock:
            for pod in self.store.iter_raw("pods"):
                meta = pod["metadata"]
                if namespace and meta.get("namespace") != namespace or name and meta["name"] != name:
                    continue
                if (pod.get("status") or {}).get("phase") != "Running" or not label_filter(pod):
                    continue
                u = usage.get((meta["namespace"], meta["name"]))
                # metrics-server reports a pod once every container has a CPU rate, i.e. from its
                # second scrape (one cumulative sample gives none)
                if u and all("cpu" in c for c in u.values()):
                    items.append(self._pod_item(pod, u, now))
        items.sort(key=lambda i: (i["metadata"]["namespace"], i["metadata"]["name"]))
        return items

    def nodes(self, name: str | None, label_filter: Any) -> list[Obj]:
        now = self.store.clock.now()
        usage = self._usage(None)
        totals: dict[str, dict[str, float]] = {}
        with self.store.lock:
            for pod in self.store.iter_raw("pods"):
                node = (pod.get("spec") or {}).get("nodeName")
                u = usage.get((pod["metadata"].get("namespace", ""), pod["metadata"]["name"]))
                if node and u:
                    t = totals.setdefault(node, {"cpu": 0.0, "memory": 0.0})
                    for c in u.values():
                        t["cpu"] += c.get("cpu", 0.0)
                        t["memory"] += c.get("memory", 0.0)
            nodes = [n for n in self.store.iter_raw("nodes") if (not name or n["metadata"]["name"] == name) and label_filter(n)]
            return [{"metadata": {"name": n["metadata"]["name"], "creationTimestamp": self.store.clock.rfc3339(now),
                                  "labels": n["metadata"].get("labels") or {}},
                     "timestamp": self.store.clock.rfc3339(now), "window": f"{int(WINDOW)}s",
                     "usage": {"cpu": cpu_quantity(totals.get(n["metadata"]["name"], {}).get("cpu", 0.0)),
                               "memory": memory_quantity(totals.get(n["metadata"]["name"], {}).get("memory", 0.0))}}
                    for n in sorted(nodes, key=lambda n: n["metadata"]["name"])]
