"""The exporters Prometheus scrapes every 15 s: kube-state-metrics (from the store), cAdvisor
(per container, from the kubelet's runtime records), node_exporter (from the node models) and the
counters the workload keeps (spanmetrics, the search/rate metrics endpoints, wrk2's client side)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesim.controllers.common import is_ready
from kubesim.quantity import parse_quantity

if TYPE_CHECKING:
    from kubesim.view import ClusterView

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
KSM = (("job", "kube-state-metrics"), ("instance", "10.244.0.3:8080"))


class Telemetry:
    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.state: dict[str, Any] = {}
        self._rows: list[tuple[str, tuple, float]] = []
        self._cache: dict[tuple[str, str], tuple[str, list[tuple[str, tuple, float]]]] = {}
        self._plans: dict[tuple, tuple | None] = {}  # (metric, labels) → how its scrape relabels it
        # (series key, container, pod IP) → the relabelled label set, kept while the container is
        # scraped: the same tuple each scrape is found in the TSDB by identity, not rebuilt and rehashed
        self._relabelled: dict[tuple, tuple] = {}
        # cAdvisor's and node_exporter's label tuples, kept while their container or node is
        # scraped, for the same reason
        self._cadvisor_labels: dict[tuple, tuple] = {}
        self._node_labels: dict[tuple, _NodeLabels] = {}

    def _emit(self, metric: str, labels: tuple, t: float, value: float) -> None:
        # rows of the scrape in progress; label tuples go to B's TSDB as they are
        self._rows.append((metric, labels, value))

    def _write(self, target: str, t: float) -> None:
        tsdb = self.cluster.obs.tsdb
        rows, self._rows = self._rows, []
        scrape = getattr(tsdb, "scrape", None)
        if scrape is not None:
            scrape(target, t, rows)  # series missing from this scrape go stale, as in Prometheus
        else:
            for metric, labels, value in rows:
                tsdb.append(metric, dict(labels), t, value)

    def scrape(self, now: float) -> None:
        self._rows = []
        self._ksm(now)
        self._write("kube-state-metrics/10.244.0.3:8080", now)
        self._cadvisor(now)
        self._write("kubernetes-cadvisor", now)
        self._node_exporter(now)
        self._write("node-exporter", now)
        wl = self.cluster.workload
        wl.flush_histograms()
        self._rows = self._application_rows(wl.state["counters"], wl.state["gauges"])
        for job, inst in (("kube-state-metrics", "10.244.0.3:8080"), ("prometheus-self", "localhost:9090")):
            self._emit("up", (("job", job), ("instance", inst)), now, 1.0)
        for node in self.cluster.nodes:
            self._emit("up", (("job", "kubernetes-cadvisor"), ("instance", node.name)), now, 1.0)
            self._emit("up", (("job", "node-exporter"), ("instance", f"{node.ip}:9100")), now, 1.0)
        self._write("applications", now)

    # -- application exporters, relabelled at scrape time -----------------------------------------
    def _application_rows(self, counters: dict, gauges: dict) -> list[tuple[str, tuple, float]]:
        """The workload's counters and gauges as a kube-prometheus-stack Prometheus stores them
        after scraping each pod's exporter: every series of an application container carries the
        target's `namespace`, `pod`, `container`, `instance` (podIP:port), `job` and `service`.

        The workload keeps one figure per service; a real Prometheus scrapes one process per pod,
        so what the service did since the last scrape is shared out among the pods running it.
        Each pod's counters are its own (a restarted container starts again from 0, as a
        process's counters do)."""
        targets: dict[tuple[str, str], list[tuple[Any, Any]]] = {}
        pods: dict[tuple[str, str], Any] = {}
        for rt in self.cluster.kubelet.state["pods"].values():
            pods[(rt.namespace, rt.name)] = rt
            for c in rt.containers.values():
                inst = c.instance
                if c.state == "running" and c.stage == "run" and isinstance(inst, dict) and inst.get("svc"):
                    targets.setdefault((rt.namespace, inst["svc"]), []).append((rt, c))
        plans = self._plans
        last_total = self.state.setdefault("service_totals", {})
        own = self.state.get("pod_counters", {})
        fresh_own: dict[tuple, float] = {}
        rows: list[tuple[str, tuple, float]] = []
        add = rows.append
        scraped: dict[tuple, tuple] = {}
        pod_extra: dict[tuple, tuple] = {}
        relabelled, fresh_relabelled = self._relabelled, {}
        for table, is_counter in ((counters, True), (gauges, False)):
            for key, v in table.items():
                plan = plans.get(key, _UNPLANNED)
                if plan is _UNPLANNED:
                    plan = plans[key] = _plan(key[1])
                if plan is None:
                    add((key[0], key[1], v))
                    continue
                how, ns, name, port, kept = plan
                if how == "pod":
                    extra = pod_extra.get((ns, name, kept))
                    if extra is None:
                        rt = pods.get((ns, name))
                        extra = pod_extra[(ns, name, kept)] = _pod_target(rt, *kept) if rt is not None else ()
                    add((key[0], key[1] + extra, v))
                    continue
                live = targets.get((ns, name), ())
                if is_counter:
                    delta = v - last_total.get(key, 0.0)
                    last_total[key] = v
                    share = (delta if delta >= 0 else v) / len(live) if live else 0.0
                for rt, c in live:
                    lk = (key, c.container_id, rt.ip)
                    got = relabelled.get(lk)
                    if got is None:
                        target = _service_target(rt, c, name, port)
                        got = (target, kept + target)
                    fresh_relabelled[lk] = got
                    scraped[got[0]] = got[0]
                    if is_counter:
                        own_key = (key, c.container_id)
                        value = fresh_own[own_key] = own.get(own_key, 0.0) + share
                    else:
                        value = v / len(live)
                    add((key[0], got[1], value))
        self.state["pod_counters"] = fresh_own
        self._relabelled = fresh_relabelled
        for target in scraped:
            add(("up", target, 1.0))
        return rows

    # -- kube-state-metrics ---------------------------------------------------------------------
    def _ksm(self, t: float) -> None:
        store = self.cluster.store
        with store.lock:
            pods = list(store.iter_raw("pods"))
            deps = list(store.iter_raw("deployments.apps"))
            stss = list(store.iter_raw("statefulsets.apps"))
            rss = list(store.iter_raw("replicasets.apps"))
            nodes = list(store.iter_raw("nodes"))
            quotas = list(store.iter_raw("resourcequotas"))
            pvcs = list(store.iter_raw("persistentvolumeclaims"))
            jobs = list(store.iter_raw("jobs.batch"))
        cache, fresh = self._cache, {}
        rows: list[tuple[str, tuple, float]] = []
        for kind, objs in (("pod", pods), ("deployment", deps), ("replicaset", rss), ("statefulset", stss), ("node", nodes),
                           ("quota", quotas), ("pvc", pvcs), ("job", jobs)):
            for obj in objs:
                key = (kind, obj["metadata"].get("uid", ""))
                rv = obj["metadata"].get("resourceVersion", "")
                hit = cache.get(key)
                if hit is None or hit[0] != rv:
                    self._rows = []
                    getattr(self, f"_ksm_{kind}")(obj, t)
                    hit = (rv, self._rows)
                fresh[key] = hit
                rows.extend(hit[1])
        self._cache = fresh
        self._rows = rows

    def _ksm_pod(self, p: Any, t: float) -> None:
        emit = self._emit
        m = p["metadata"]
        base = KSM + (("namespace", m["namespace"]), ("pod", m["name"]), ("uid", m.get("uid", "")))
        st = p.get("status") or {}
        phase = st.get("phase", "Pending")
        for ph in PHASES:
            emit("kube_pod_status_phase", base + (("phase", ph),), t, 1.0 if ph == phase else 0.0)
        ready = is_ready(p)
        for cond in ("true", "false", "unknown"):
            emit("kube_pod_status_ready", base + (("condition", cond),), t, 1.0 if (cond == "true") == ready and cond != "unknown" else 0.0)
        sched = next((c for c in st.get("conditions") or [] if c["type"] == "PodScheduled"), None)
        if sched is not None:
            emit("kube_pod_status_unschedulable", base, t, 1.0 if sched.get("reason") == "Unschedulable" else 0.0) \
                if sched.get("reason") == "Unschedulable" else None
            for cond in ("true", "false", "unknown"):
                emit("kube_pod_status_scheduled", base + (("condition", cond),), t,
                     1.0 if cond == sched.get("status", "").lower() else 0.0)
        owner = (m.get("ownerReferences") or [{}])[0]
        emit("kube_pod_info", base + (("host_ip", st.get("hostIP", "")), ("pod_ip", st.get("podIP", "")),
                                      ("node", p["spec"].get("nodeName", "")),
                                      ("created_by_kind", owner.get("kind", "<none>")),
                                      ("created_by_name", owner.get("name", "<none>")),
                                      ("priority_class", p["spec"].get("priorityClassName", "")),
                                      ("host_network", str(bool(p["spec"].get("hostNetwork"))).lower())), t, 1.0)
        emit("kube_pod_owner", base + (("owner_kind", owner.get("kind", "<none>")), ("owner_name", owner.get("name", "<none>")),
                                       ("owner_is_controller", str(bool(owner.get("controller"))).lower())), t, 1.0)
        specs = {c["name"]: c for c in p["spec"].get("containers") or []}
        for cs in st.get("containerStatuses") or []:
            cb = base + (("container", cs["name"]),)
            emit("kube_pod_container_status_restarts_total", cb, t, float(cs.get("restartCount", 0)))
            state = cs.get("state") or {}
            emit("kube_pod_container_status_ready", cb, t, 1.0 if cs.get("ready") else 0.0)
            emit("kube_pod_container_status_running", cb, t, 1.0 if "running" in state else 0.0)
            emit("kube_pod_container_status_waiting", cb, t, 1.0 if "waiting" in state else 0.0)
            emit("kube_pod_container_status_terminated", cb, t, 1.0 if "terminated" in state else 0.0)
            if "waiting" in state:
                emit("kube_pod_container_status_waiting_reason", cb + (("reason", state["waiting"].get("reason", "")),), t, 1.0)
            if "terminated" in state:
                emit("kube_pod_container_status_terminated_reason", cb + (("reason", state["terminated"].get("reason", "")),), t, 1.0)
            last = (cs.get("lastState") or {}).get("terminated")
            if last:
                emit("kube_pod_container_status_last_terminated_reason", cb + (("reason", last.get("reason", "")),), t, 1.0)
                emit("kube_pod_container_status_last_terminated_exitcode", cb, t, float(last.get("exitCode", 0)))
            spec = specs.get(cs["name"]) or {}
            emit("kube_pod_container_info", cb + (("image", spec.get("image", "")), ("image_spec", spec.get("image", "")),
                                                  ("image_id", cs.get("imageID", "")), ("container_id", cs.get("containerID", ""))), t, 1.0)
            res = spec.get("resources") or {}
            for kind, metric in (("requests", "kube_pod_container_resource_requests"), ("limits", "kube_pod_container_resource_limits")):
                for r, v in (res.get(kind) or {}).items():
                    unit = "core" if r == "cpu" else "byte"
                    emit(metric, cb + (("node", p["spec"].get("nodeName", "")), ("resource", r.replace(".", "_").replace("/", "_")),
                                       ("unit", unit)), t, parse_quantity(v))

    def _ksm_deployment(self, d: Any, t: float) -> None:
        emit = self._emit
        m, st = d["metadata"], d.get("status") or {}
        b = self._ksm_replicas("deployment", d, t, "kube_deployment_spec_replicas", (
            ("kube_deployment_status_replicas", "replicas"), ("kube_deployment_status_replicas_ready", "readyReplicas"),
            ("kube_deployment_status_replicas_available", "availableReplicas"),
            ("kube_deployment_status_replicas_unavailable", "unavailableReplicas"),
            ("kube_deployment_status_replicas_updated", "updatedReplicas")))
        emit("kube_deployment_metadata_generation", b, t, float(m.get("generation", 1)))
        emit("kube_deployment_status_observed_generation", b, t, float(st.get("observedGeneration", 0)))
        for c in st.get("conditions") or []:
            for s in ("true", "false", "unknown"):
                emit("kube_deployment_status_condition", b + (("condition", c["type"]), ("status", s), ("reason", c.get("reason", ""))),
                     t, 1.0 if c.get("status", "").lower() == s else 0.0)

    def _ksm_replicas(self, label: str, obj: Any, t: float, spec_metric: str,
                      status: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        """A workload's replica series: spec.replicas (default 1), then each (metric, status
        field), absent counts as 0; returns the series' labels."""
        m, st = obj["metadata"], obj.get("status") or {}
        b = KSM + (("namespace", m["namespace"]), (label, m["name"]))
        self._emit(spec_metric, b, t, float((obj.get("spec") or {}).get("replicas", 1)))
        for metric, field in status:
            self._emit(metric, b, t, float(st.get(field, 0)))
        return b

    def _ksm_replicaset(self, rs: Any, t: float) -> None:
        self._ksm_replicas("replicaset", rs, t, "kube_replicaset_spec_replicas", (
            ("kube_replicaset_status_replicas", "replicas"), ("kube_replicaset_status_ready_replicas", "readyReplicas")))

    def _ksm_statefulset(self, s: Any, t: float) -> None:
        self._ksm_replicas("statefulset", s, t, "kube_statefulset_replicas", (
            ("kube_statefulset_status_replicas", "replicas"), ("kube_statefulset_status_replicas_ready", "readyReplicas"),
            ("kube_statefulset_status_replicas_available", "availableReplicas")))

    def _ksm_node(self, n: Any, t: float) -> None:
        emit = self._emit
        m, st = n["metadata"], n.get("status") or {}
        b = KSM + (("node", m["name"]),)
        info = st.get("nodeInfo") or {}
        emit("kube_node_info", b + (("kernel_version", info.get("kernelVersion", "")), ("os_image", info.get("osImage", "")),
                                    ("container_runtime_version", info.get("containerRuntimeVersion", "")),
                                    ("kubelet_version", info.get("kubeletVersion", "")),
                                    ("internal_ip", next((a["address"] for a in st.get("addresses") or [] if a["type"] == "InternalIP"), "")),
                                    ("pod_cidr", (n.get("spec") or {}).get("podCIDR", ""))), t, 1.0)
        for c in st.get("conditions") or []:
            for s_ in ("true", "false", "unknown"):
                emit("kube_node_status_condition", b + (("condition", c["type"]), ("status", s_)), t,
                     1.0 if c.get("status", "").lower() == s_ else 0.0)
        emit("kube_node_spec_unschedulable", b, t, 1.0 if (n.get("spec") or {}).get("unschedulable") else 0.0)
        for taint in (n.get("spec") or {}).get("taints") or []:
            emit("kube_node_spec_taint", b + (("key", taint.get("key", "")), ("value", taint.get("value", "")),
                                              ("effect", taint.get("effect", ""))), t, 1.0)
        for kind, metric in (("allocatable", "kube_node_status_allocatable"), ("capacity", "kube_node_status_capacity")):
            for r, v in (st.get(kind) or {}).items():
                if r in ("cpu", "memory", "pods", "ephemeral-storage"):
                    unit = {"cpu": "core", "pods": "integer"}.get(r, "byte")
                    emit(metric, b + (("resource", r.replace("-", "_")), ("unit", unit)), t, parse_quantity(v))

    def _ksm_quota(self, q: Any, t: float) -> None:
        emit = self._emit
        m = q["metadata"]
        st = q.get("status") or {}
        hard = st.get("hard") or (q.get("spec") or {}).get("hard") or {}
        for kind, values in (("hard", hard), ("used", st.get("used") or {})):
            for r, v in values.items():
                emit("kube_resourcequota", KSM + (("namespace", m["namespace"]), ("resourcequota", m["name"]),
                                                  ("resource", r), ("type", kind)), t, parse_quantity(v))

    def _ksm_pvc(self, c: Any, t: float) -> None:
        emit = self._emit
        m = c["metadata"]
        ph = (c.get("status") or {}).get("phase", "Pending")
        for p_ in ("Pending", "Bound", "Lost"):
            emit("kube_persistentvolumeclaim_status_phase", KSM + (("namespace", m["namespace"]),
                                                                   ("persistentvolumeclaim", m["name"]), ("phase", p_)),
                 t, 1.0 if p_ == ph else 0.0)

    def _ksm_job(self, j: Any, t: float) -> None:
        emit = self._emit
        m, st = j["metadata"], j.get("status") or {}
        b = KSM + (("namespace", m["namespace"]), ("job_name", m["name"]))
        emit("kube_job_status_active", b, t, float(st.get("active", 0)))
        emit("kube_job_status_succeeded", b, t, float(st.get("succeeded", 0)))
        failed_cond = next((c for c in st.get("conditions") or [] if c["type"] == "Failed" and c["status"] == "True"), None)
        if failed_cond:
            for reason in ("BackoffLimitExceeded", "DeadlineExceeded", "Evicted"):
                emit("kube_job_status_failed", b + (("reason", reason),), t, 1.0 if failed_cond.get("reason") == reason else 0.0)
        else:
            emit("kube_job_status_failed", b, t, float(st.get("failed", 0)))
        emit("kube_job_failed", b + (("condition", "true"),), t, 1.0 if failed_cond else 0.0)

    # -- cAdvisor -------------------------------------------------------------------------------
    def _cadvisor(self, t: float) -> None:
        emit = self._emit
        kubelet = self.cluster.kubelet
        store = self.cluster.store
        known, fresh = self._cadvisor_labels, {}
        for rt in kubelet.state["pods"].values():
            pod = store._buckets["pods"].objects.get((rt.namespace, rt.name))
            if pod is None:
                continue
            specs = {c["name"]: c for c in pod["spec"].get("containers") or []}
            pod_key = (rt.uid, rt.node, rt.namespace, rt.name)
            pod_labels = known.get(pod_key)
            if pod_labels is None:
                pod_slice = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{rt.uid.replace('-', '_')}.slice"
                node = (("job", "kubernetes-cadvisor"), ("instance", rt.node), ("kubernetes_io_hostname", rt.node))
                pbase = node + (("namespace", rt.namespace), ("pod", rt.name))
                pod_labels = (pod_slice, pbase,
                              pbase + (("container", ""), ("image", ""), ("id", pod_slice), ("name", ""), ("interface", "eth0")))
            fresh[pod_key] = pod_labels
            pod_slice, pbase, pb = pod_labels
            rx = tx = 0.0
            for c in rt.containers.values():
                if not c.container_id or c.name not in specs:
                    continue
                spec = specs[c.name]
                ctr_key = (pod_key, c.name, c.container_id, spec.get("image", ""))
                ctr_labels = known.get(ctr_key)
                if ctr_labels is None:
                    b = pbase + (("container", c.name), ("image", spec.get("image", "")),
                                 ("id", f"{pod_slice}/cri-containerd-{c.container_id[-64:]}.scope"),
                                 ("name", c.container_id[-64:]))
                    ctr_labels = (b, b + (("cpu", "total"),))
                fresh[ctr_key] = ctr_labels
                b = ctr_labels[0]
                emit("container_cpu_usage_seconds_total", ctr_labels[1], t, c.cpu_seconds)
                emit("container_memory_working_set_bytes", b, t, c.memory if c.state == "running" else 0.0)
                emit("container_memory_usage_bytes", b, t, c.memory * 1.15 if c.state == "running" else 0.0)
                emit("container_oom_events_total", b, t, float(c.oom_events))
                lim = (spec.get("resources") or {}).get("limits") or {}
                emit("container_spec_memory_limit_bytes", b, t, parse_quantity(lim["memory"]) if "memory" in lim else 0.0)
                if "cpu" in lim:
                    emit("container_spec_cpu_quota", b, t, parse_quantity(lim["cpu"]) * 100000)
                    emit("container_spec_cpu_period", b, t, 100000.0)
                    emit("container_cpu_cfs_periods_total", b, t, c.cpu_periods)
                    emit("container_cpu_cfs_throttled_periods_total", b, t, c.cpu_throttled_periods)
                    emit("container_cpu_cfs_throttled_seconds_total", b, t, c.cpu_throttled_periods * 0.05)
                emit("container_start_time_seconds", b, t, float(c.started_at or 0))
                rx += c.net_rx
                tx += c.net_tx
            emit("container_network_receive_bytes_total", pb, t, rx)
            emit("container_network_transmit_bytes_total", pb, t, tx)
        self._cadvisor_labels = fresh

    # -- node_exporter ----------------------------------------------------------------------------
    def _node_exporter(self, t: float) -> None:
        emit = self._emit
        nodes = self.cluster.nodes
        known, fresh = self._node_labels, {}
        for n in nodes:
            key = (n.name, n.ip, int(n.cpu), tuple((d.device, d.partition) for d in n.disks), tuple(nic.device for nic in n.nics))
            labels = fresh[key] = known.get(key) or _NodeLabels(n)
            b = labels.base
            busy = n.cpu_seconds
            elapsed = t - self.cluster.clock.start + 3600.0  # the nodes booted an hour before the cluster's start
            for idle, user, system in labels.cpus:
                share = busy / n.cpu
                emit("node_cpu_seconds_total", idle, t, max(0.0, elapsed - share))
                emit("node_cpu_seconds_total", user, t, share * 0.7)
                emit("node_cpu_seconds_total", system, t, share * 0.3)
            emit("node_memory_MemTotal_bytes", b, t, n.memory)
            used = sum(c.memory for rt in self.cluster.kubelet.state["pods"].values() if rt.node == n.name
                       for c in rt.containers.values())
            emit("node_memory_MemAvailable_bytes", b, t, max(0.0, n.memory * 0.9 - used))
            for d, (db, fb) in zip(n.disks, labels.disks, strict=True):
                emit("node_disk_reads_completed_total", db, t, d.reads)
                emit("node_disk_writes_completed_total", db, t, d.writes)
                emit("node_disk_read_bytes_total", db, t, d.read_bytes)
                emit("node_disk_written_bytes_total", db, t, d.written_bytes)
                emit("node_disk_io_time_seconds_total", db, t, d.io_time)
                full = nodes.fault(n.name, "diskFullPercent")
                avail = d.size_bytes - d.used_bytes if not full else d.size_bytes * max(0.0, 1 - float(full) / 100.0)
                emit("node_filesystem_size_bytes", fb, t, d.size_bytes)
                emit("node_filesystem_avail_bytes", fb, t, avail)
                emit("node_filesystem_free_bytes", fb, t, avail)
                emit("node_filesystem_readonly", fb, t, 0.0)
                emit("node_filesystem_device_error", fb, t, 0.0)
            link = nodes.link(n.name)
            for nic, nb in zip(n.nics, labels.nics, strict=True):
                rate_rx = 200_000.0
                nic.rx_bytes += rate_rx * 15
                nic.tx_bytes += rate_rx * 15
                nic.rx_packets += 300 * 15
                nic.tx_packets += 300 * 15
                nic.rx_drop += 300 * 15 * link["loss"]
                nic.rx_errs += 300 * 15 * link["corrupt"]
                emit("node_network_receive_bytes_total", nb, t, nic.rx_bytes)
                emit("node_network_transmit_bytes_total", nb, t, nic.tx_bytes)
                emit("node_network_receive_packets_total", nb, t, nic.rx_packets)
                emit("node_network_transmit_packets_total", nb, t, nic.tx_packets)
                emit("node_network_receive_drop_total", nb, t, nic.rx_drop)
                emit("node_network_receive_errs_total", nb, t, nic.rx_errs)
                emit("node_network_up", nb, t, 0.0 if link["down"] else 1.0)
            off = nodes.clock_offset(n.name)
            emit("node_timex_offset_seconds", b, t, off)
            emit("node_timex_sync_status", b, t, 0.0 if abs(off) > 0.5 else 1.0)
            emit("node_timex_maxerror_seconds", b, t, 16.0 if abs(off) > 0.5 else 0.2)
            emit("node_time_seconds", b, t, t + off)
            fd_max = nodes.fault(n.name, "fileMax")
            if fd_max is not None:
                n.fd_allocated = float(fd_max)
            emit("node_filefd_allocated", b, t, n.fd_allocated)
            emit("node_filefd_maximum", b, t, float(fd_max) if fd_max is not None else n.fd_max)
            pid_max = nodes.fault(n.name, "pidMax")
            if pid_max is not None:
                n.pids = float(pid_max)
            emit("node_processes_pids", b, t, n.pids)
            emit("node_processes_max_processes", b, t, float(pid_max) if pid_max is not None else n.pid_max)
            emit("node_load1", b, t, busy / max(1.0, elapsed) * 4)
        self._node_labels = fresh


class _NodeLabels:
    """One node's node_exporter label tuples: per CPU (idle, user, system), per disk (device,
    filesystem), per NIC."""

    __slots__ = ("base", "cpus", "disks", "nics")

    def __init__(self, n: Any) -> None:
        b = self.base = (("job", "node-exporter"), ("instance", f"{n.ip}:9100"), ("node", n.name))
        self.cpus = [(b + (("cpu", str(cpu)), ("mode", "idle")), b + (("cpu", str(cpu)), ("mode", "user")),
                      b + (("cpu", str(cpu)), ("mode", "system"))) for cpu in range(int(n.cpu))]
        self.disks = [(b + (("device", d.device),), b + (("device", f"/dev/{d.partition}"), ("mountpoint", "/"), ("fstype", "ext4")))
                      for d in n.disks]
        self.nics = [b + (("device", nic.device),) for nic in n.nics]


# The job the workload's per-service exporters (hotel-reservation's frontend, search and rate
# metrics endpoints) report under before scrape-time relabelling gives them their pod's target.
SERVICE_EXPORTER_JOB = "hotel-reservation-application"
_UNPLANNED = ("unplanned",)  # a plan cache miss (None is the plan "keep the series as it is")


def _plan(labels: tuple) -> tuple | None:
    """How a scrape relabels one series of the workload: None (it is already a target's own:
    the collector's span metrics, the Kafka exporter's), ("service", ns, svc, port, kept) for a
    per-service figure shared out among that service's pods, ("pod", ns, pod, None, have) for a
    series a pod's exporter already names its pod in (wrk2, locust, TiDB)."""
    d = dict(labels)
    ns = d.get("namespace", "")
    if d.get("job") == SERVICE_EXPORTER_JOB:
        host, _, port = d.get("instance", "").partition(":")
        svc = host or d.get("service_name", "")
        kept = tuple((k, v) for k, v in labels if k not in ("job", "instance", "namespace"))
        return ("service", ns, svc, int(port) if port.isdigit() else None, kept)
    if "pod" in d and ns:
        return ("pod", ns, d["pod"], None, ("container" in d, "instance" in d))
    return None


def _service_target(rt: Any, c: Any, svc: str, port: int | None) -> tuple:
    if port is None:
        port = min(c.ports) if c.ports else 8080
    return (("container", c.name), ("instance", f"{rt.ip}:{port}"), ("job", svc), ("namespace", rt.namespace),
            ("pod", rt.name), ("service", svc))


def _pod_target(rt: Any, has_container: bool, has_instance: bool) -> tuple:
    """The target labels a pod's series lacks (a series' own labels win, as with honor_labels)."""
    c = next((c for c in rt.containers.values() if c.instance is not None), None) or next(iter(rt.containers.values()), None)
    out: tuple = ()
    if c is not None and not has_container:
        out += (("container", c.name),)
    if not has_instance:
        port = min(c.ports) if c is not None and c.ports else 9090
        out += (("instance", f"{rt.ip}:{port}"),)
    return out
