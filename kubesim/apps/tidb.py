"""A TiDB cluster as tidb-operator deploys it: pd-server, tikv-server and tidb-server behind the
operator's start scripts, the operator's own binaries (tidb-controller-manager, tidb-discovery),
and the go-ycsb SQL client. Each process checks what it needs at start (its start script, the
discovery service, a PD quorum) and logs in its real format; once per fluid step PD's view of
the cluster (members, stores, heartbeats) decides which SQL statements succeed, which go-ycsb
counts and Prometheus scrapes. PD's records live in the workload state, so checkpoints keep them."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kubesim.apps.invocation import find_invocation
from kubesim.apps.model import (
    AppModel,
    Exited,
    StartContext,
    Started,
    app_model,
    fluid_ticks,
    normalize_image,
    register_image,
)

if TYPE_CHECKING:
    from kubesim.runtime import Ctr, PodRt
    from kubesim.view import ClusterView

# Published tags (a version without images fails to pull, as a typo'd spec.version does).
TIDB_VERSIONS = ("v6.5.0", "v6.5.12", "v7.1.0", "v7.1.5", "v7.5.0", "v7.5.1", "v7.5.4", "v8.1.0", "v8.1.1",
                 "v8.5.0", "latest", "nightly")
for _repo, _size, _exe in (("pingcap/pd", 62_000_000, ("/pd-server", "sh", "wget")),
                           ("pingcap/tikv", 190_000_000, ("/tikv-server", "sh", "wget")),
                           ("pingcap/tidb", 78_000_000, ("/tidb-server", "sh", "wget"))):
    register_image(_repo, tags=TIDB_VERSIONS, size=_size, executables=_exe)
register_image("pingcap/tidb-operator", tags=("v1.5.0", "v1.5.4", "v1.6.0", "v1.6.1", "v1.6.3", "latest"),
               size=120_000_000, executables=("/usr/local/bin/tidb-controller-manager", "/usr/local/bin/tidb-discovery",
                                              "/usr/local/bin/tidb-scheduler", "sh"))
register_image("pingcap/go-ycsb", tags=("latest",), size=40_000_000, executables=("go-ycsb", "/go-ycsb", "sh"))

STATE_KEY = "tidb"
STORE_DISCONNECT_S = 20.0  # PD: a store without heartbeats for this long is Disconnected
STORE_DOWN_S = 1800.0  # PD's max-store-down-time (30m)
OFFLINE_TO_TOMBSTONE_S = 15.0  # region migration off a deleted store (a small data set)
LEADER_ELECTION_S = 15.0  # raft election timeout plus TiDB's region cache refresh after a store dies
BASE_LATENCY_S = 0.0012
FAILED_OP_S = 1.0  # a statement that cannot reach its region backs off this long before failing
RELEASE = {"pd": "v7.5.0", "tikv": "7.5.0", "tidb": "v7.5.0"}


# -- log formats ----------------------------------------------------------------------------
_PLAIN = re.compile(r"^[A-Za-z0-9_.:/@+-]*$")


def _field(text: str) -> str:
    return text if text and _PLAIN.match(text) else json.dumps(text)


def tidb_log(t: float, level: str, caller: str, msg: str, **fields: Any) -> str:
    """PD/TiKV/TiDB's unified format: `[2026/01/05 09:00:00.000 +00:00] [INFO] [server.go:123] ["msg"] [k=v]`."""
    stamp = datetime.fromtimestamp(t, UTC).strftime("%Y/%m/%d %H:%M:%S.") + f"{int((t % 1) * 1000):03d} +00:00"
    extra = "".join(f" [{_field(k.replace('_', '-') if k.islower() else k)}={_field(str(v))}]" for k, v in fields.items())
    return f"[{stamp}] [{level}] [{caller}] [{json.dumps(msg)}]{extra}"


def klog(t: float, level: str, caller: str, msg: str) -> str:
    """klog's header, as the operator prints it: `I0105 09:00:00.000000       1 file.go:12] msg`."""
    d = datetime.fromtimestamp(t, UTC)
    return f"{level[0]}{d.strftime('%m%d %H:%M:%S')}.{int((t % 1) * 1e6):06d}       1 {caller}] {msg}"


# -- PD's records of one cluster -------------------------------------------------------------
def cluster_key(pod: dict[str, Any]) -> str:
    """`namespace/name` of the TidbCluster a pod belongs to (the operator's instance label)."""
    meta = pod.get("metadata") or {}
    instance = (meta.get("labels") or {}).get("app.kubernetes.io/instance", "")
    return f"{meta.get('namespace', '')}/{instance}"


def pd_records(cluster: ClusterView, key: str) -> dict[str, Any]:
    """What the PD cluster of `key` has persisted: its id, members, stores and the id allocator."""
    root = cluster.workload.state.setdefault(STATE_KEY, {})
    rec = root.get(key)
    if rec is None:
        cid = 7_300_000_000_000_000_000 + int(hashlib.sha256(f"{cluster.seed}/{key}".encode()).hexdigest()[:12], 16)
        rec = root[key] = {"cluster_id": cid, "members": {}, "stores": {}, "next_id": 1, "leader": "",
                           "logged": {}}
    return rec


def _alloc_id(rec: dict[str, Any]) -> int:
    """PD's id allocator: the first store gets 1, the bootstrap region and its peer take 2 and 3."""
    value = rec["next_id"]
    rec["next_id"] = value + (3 if value == 1 else 1)
    return int(value)


@dataclass
class PdView:
    """PD as its HTTP API answers (members, health, stores), for the operator and the servers."""

    cluster: ClusterView
    key: str

    @property
    def rec(self) -> dict[str, Any]:
        return pd_records(self.cluster, self.key)

    def serving(self) -> set[str]:
        """PD members whose pd-server is up and serving its client port."""
        ns, _ = self.key.split("/", 1)
        out = set()
        for rt, c in self.cluster.kubelet.running():
            inst = c.instance
            if rt.namespace == ns and isinstance(inst, dict) and inst.get("kind") == "tidb-pd" \
                    and inst.get("cluster") == self.key and 2379 in c.ports:
                out.add(inst["name"])
        return out

    def quorum(self) -> bool:
        members = self.rec["members"]
        up = self.serving() & set(members)
        return bool(members) and len(up) * 2 > len(members)

    def health(self) -> dict[str, bool]:
        up = self.serving()
        return {name: name in up for name in sorted(self.rec["members"])}

    def leader(self) -> str:
        rec = self.rec
        up = sorted(self.serving() & set(rec["members"]))
        if not self.quorum():
            return ""
        if rec["leader"] not in up:
            rec["leader"] = up[0]
        return str(rec["leader"])

    def delete_member(self, name: str) -> bool:
        return self.rec["members"].pop(name, None) is not None

    def stores(self) -> dict[str, dict[str, Any]]:
        return self.rec["stores"]

    def delete_store(self, store_id: str, now: float) -> None:
        store = self.rec["stores"].get(store_id)
        if store is not None and store["state"] not in ("Offline", "Tombstone"):
            store.update(state="Offline", since=now, leaders_evicted=now)

    def evict_leaders(self, store_id: str, now: float) -> bool:
        """The evict-leader scheduler for one store; True once its leaders have moved."""
        store = self.rec["stores"].get(store_id)
        if store is None:
            return True
        store.setdefault("leaders_evicted", now)
        return now - store["leaders_evicted"] >= 5.0


# -- start scripts ----------------------------------------------------------------------------
def _script_var(script: str, name: str) -> str | None:
    m = re.search(rf'^\s*{name}="([^"]*)"', script, re.M)
    return m.group(1) if m else None


def _script(ctx: StartContext) -> tuple[str | None, Exited | None]:
    """The start script the container runs (`/bin/sh /usr/local/bin/<x>_start_script.sh`)."""
    argv = ctx.argv
    path = next((a for a in argv[1:] if a.endswith(".sh")), None)
    if path is None:
        return None, None
    text = ctx.files.get(path)
    if text is None:
        return None, Exited(2, [], after=0.0, stderr=[f"/bin/sh: can't open '{path}': No such file or directory"])
    return text, None


@app_model
class TidbServers(AppModel):
    """pd-server, tikv-server and tidb-server, each started by the operator's start script."""

    name = "tidb-servers"
    images = ("pingcap/pd", "pingcap/tikv", "pingcap/tidb")
    memory_base = 200 * 2**20

    def start(self, ctx: StartContext) -> Started | Exited:
        comp = normalize_image(ctx.container.get("image", ""))[0].rsplit("/", 1)[-1]  # pd | tikv | tidb
        script, failed = _script(ctx)
        if failed is not None:
            return failed
        inst: dict[str, Any] = {"kind": "tidb-starting", "component": comp, "cluster": cluster_key(ctx.pod), "name": ctx.pod_name,
                "script": script or "", "since": ctx.now}
        lines = _script_preamble(comp, ctx.pod)
        outcome = advance_start(ctx.cluster, ctx.pod, ctx.container, inst, ctx.now, ctx)
        if isinstance(outcome, Exited):
            return Exited(outcome.code, lines + outcome.lines, outcome.after, outcome.reason, outcome.stderr)
        if outcome is None:  # still waiting for what the script waits for: the process keeps looping
            return Started(lines + inst.pop("pending_lines", []), set(), inst)
        return Started(lines + outcome.lines, outcome.ports, outcome.instance, outcome.ready_after)

    def memory(self, instance: Any, load_rps: float) -> float:
        comp = (instance or {}).get("component") or {"tidb-pd": "pd", "tidb-tikv": "tikv"}.get(
            (instance or {}).get("kind", ""), "tidb")
        return {"pd": 180.0, "tikv": 900.0, "tidb": 320.0}[comp] * 2**20 + 20_000 * load_rps

    def exec(self, ctx: StartContext, instance: Any, command: list[str]) -> tuple[int, str, str]:
        from kubesim.apps.generic import run_shell
        return run_shell(ctx, command)


def _script_preamble(comp: str, pod: dict[str, Any]) -> list[str]:
    """What the script prints before it starts waiting: PD resolves its own peer domain first."""
    if comp == "pd":
        peer = (pod.get("spec") or {}).get("subdomain") or "pd-peer"
        return [f"domain resolve {_peer_domain(pod, peer)} success"]
    return []


def _discovery_answers(cluster: ClusterView, pod: dict[str, Any], url: str | None) -> bool:
    if not url:
        return True
    host, _, port = url.partition(":")
    conn = cluster.network.connect(pod, host, int(port or 10261))
    return conn.ok_share > 0


def advance_start(cluster: ClusterView, pod: dict[str, Any], container: dict[str, Any], inst: dict[str, Any],
                  now: float, ctx: StartContext | None = None) -> Started | Exited | None:
    """One attempt of a start script to get its server going: None while it still waits (for
    the discovery service), else the server's outcome."""
    comp, script = inst["component"], inst["script"]
    discovery = _script_var(script, "discovery_url")
    t = now
    volumes = ctx.volumes if ctx is not None else _volumes_of(cluster, pod, container)
    data_path = {"pd": "/var/lib/pd", "tikv": "/var/lib/tikv", "tidb": ""}[comp]
    data = _volume_for(volumes, data_path) if data_path else None
    # A PD member with data of its own starts from it; a new one asks discovery how to join.
    restarting_pd = comp == "pd" and bool((data or {}).get("member_id"))
    if not restarting_pd and not _discovery_answers(cluster, pod, discovery):
        waiting = ("waiting for discovery service to return start args ..." if comp == "pd"
                   else "waiting for the verification of PD endpoints ...")
        inst["pending_lines"] = [waiting]
        return None
    if comp == "pd":
        return _start_pd(cluster, pod, inst, script, data, t)
    if comp == "tikv":
        return _start_tikv(cluster, pod, container, inst, script, data, t)
    return _start_tidb(cluster, pod, inst, script, t)


def _volumes_of(cluster: ClusterView, pod: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    rt = cluster.kubelet.runtime(pod)
    out: dict[str, Any] = {}
    if rt is None:
        return out
    for key, data_key in rt.volumes.items():
        cname, _, path = key.partition(":")
        if cname == container.get("name"):
            out[path] = cluster.kubelet.volume_data(data_key)
    return out


def _volume_for(volumes: dict[str, Any], path: str) -> dict[str, Any] | None:
    best = None
    for mount in volumes:
        if path == mount or path.startswith(mount.rstrip("/") + "/"):
            if best is None or len(mount) > len(best):
                best = mount
    return volumes[best] if best is not None else None


def _peer_domain(pod: dict[str, Any], service: str) -> str:
    meta = pod["metadata"]
    return f"{meta['name']}.{service}.{meta['namespace']}.svc"


def _start_pd(cluster: ClusterView, pod: dict[str, Any], inst: dict[str, Any], script: str,
              data: dict[str, Any] | None, t: float) -> Started | Exited:
    rec = pd_records(cluster, inst["cluster"])
    name = inst["name"]
    svc = f"{inst['cluster'].split('/', 1)[1]}-pd-peer"
    domain = _peer_domain(pod, svc)
    data = data if data is not None else {}
    lines = ["starting pd-server ..."]
    if data.get("cluster_id") and data["cluster_id"] != rec["cluster_id"]:
        return Exited(1, lines + [tidb_log(t, "FATAL", "main.go:117", "run server failed",
                                           error=f"etcd cluster ID mismatch, expect {rec['cluster_id']}, got "
                                                 f"{data['cluster_id']}")], after=2.0)
    joined = name in rec["members"]
    if not joined:
        if rec["members"]:
            lines.append(f"/pd-server --data-dir=/var/lib/pd --name={name} --peer-urls=http://0.0.0.0:2380 "
                         f"--advertise-peer-urls=http://{domain}:2380 --client-urls=http://0.0.0.0:2379 "
                         f"--advertise-client-urls=http://{domain}:2379 --config=/etc/pd/pd.toml "
                         f"--join={','.join(m['client'] for m in rec['members'].values())}")
        else:
            lines.append(f"/pd-server --data-dir=/var/lib/pd --name={name} --peer-urls=http://0.0.0.0:2380 "
                         f"--advertise-peer-urls=http://{domain}:2380 --client-urls=http://0.0.0.0:2379 "
                         f"--advertise-client-urls=http://{domain}:2379 --config=/etc/pd/pd.toml "
                         f"--initial-cluster={name}=http://{domain}:2380")
        member_id = int(hashlib.sha256(f"{rec['cluster_id']}/{name}/{len(rec['members'])}".encode()).hexdigest()[:15], 16)
        rec["members"][name] = {"id": member_id, "client": f"http://{domain}:2379", "peer": f"http://{domain}:2380"}
    member = rec["members"][name]
    data.update(cluster_id=rec["cluster_id"], member_id=member["id"])
    lines += [tidb_log(t, "INFO", "util.go:41", "Welcome to Placement Driver (PD)"),
              tidb_log(t, "INFO", "util.go:42", "PD", release_version=RELEASE["pd"], edition="Community",
                       git_hash="4e7f8d2d7c2fe2b1a4a2c4c79bcd4d2b3f2f7bd1", go_version="go1.21.4"),
              tidb_log(t + 0.2, "INFO", "server.go:252", "init cluster id", cluster_id=rec["cluster_id"]),
              tidb_log(t + 0.4, "INFO", "etcdutil.go:308", "member joined the cluster" if joined or len(rec["members"]) > 1
                       else "bootstrapped a new etcd cluster", member_id=f"{member['id']:x}", name=name),
              tidb_log(t + 1.0, "INFO", "server.go:1645", "PD leader is ready to serve", leader_name=name)
              if len(rec["members"]) == 1 else
              tidb_log(t + 1.0, "INFO", "member.go:344", "server is ready to serve")]
    return Started(lines, {2379, 2380}, {"kind": "tidb-pd", "component": "pd", "cluster": inst["cluster"], "name": name,
                                         "member_id": member["id"]}, ready_after=1.0)


def _pd_reachable(cluster: ClusterView, pod: dict[str, Any], script: str, key: str) -> str | None:
    """None if the server's PD endpoint answers with a quorum; else the client library's error."""
    url = _script_var(script, "pd_url") or f"{key.split('/', 1)[1]}-pd:2379"
    host, _, port = url.replace("http://", "").partition(":")
    conn = cluster.network.connect(pod, host, int(port or 2379))
    if conn.ok_share == 0:
        return conn.first_error() or "connection refused"
    if not PdView(cluster, key).quorum():
        return "context deadline exceeded"
    return None


def _start_tikv(cluster: ClusterView, pod: dict[str, Any], container: dict[str, Any], inst: dict[str, Any],
                script: str, data: dict[str, Any] | None, t: float) -> Started | Exited:
    key, name = inst["cluster"], inst["name"]
    rec = pd_records(cluster, key)
    url = _script_var(script, "pd_url") or f"{key.split('/', 1)[1]}-pd:2379"
    lines = ["starting tikv-server ...",
             tidb_log(t, "INFO", "lib.rs:88", "Welcome to TiKV"),
             tidb_log(t, "INFO", "lib.rs:93", f"Release Version:   {RELEASE['tikv']}"),
             tidb_log(t, "INFO", "lib.rs:93", "Edition:           Community"),
             tidb_log(t + 0.1, "INFO", "util.rs:639", "connecting to PD endpoint", endpoints=url)]
    err = _pd_reachable(cluster, pod, script, key)
    if err is not None:
        return Exited(1, lines + [
            tidb_log(t + 0.3, "WARN", "client.rs:168", "validate PD endpoints failed",
                     err="Other(\"[components/pd_client/src/util.rs:634]: PD cluster failed to respond\")"),
            tidb_log(t + 60.0, "FATAL", "server.rs:1072", "failed to start node: Other(\"[components/pd_client/src/"
                     f"util.rs:634]: PD cluster failed to respond: {err}\")")], after=60.0)
    data = data if data is not None else {}
    failed = _rocksdb_read_error(cluster, pod, container, "/var/lib/tikv", t, reads=64)
    if failed:
        return Exited(1, lines + failed, after=1.0)
    store_id = data.get("store_id")
    address = f"{_peer_domain(pod, key.split('/', 1)[1] + '-tikv-peer')}:20160"
    if store_id is None or str(store_id) not in rec["stores"]:
        store_id = _alloc_id(rec)
        rec["stores"][str(store_id)] = {"id": str(store_id), "address": address, "pod": name, "state": "Up",
                                        "since": t, "heartbeat": t}
    lines.append(tidb_log(t + 0.4, "INFO", "server.rs:363", "connect to PD cluster", cluster_id=rec["cluster_id"]))
    lines.append(tidb_log(t + 0.5, "INFO", "node.rs:396", "put store to PD",
                          store=f'id:{store_id} address:"{address}" version:"{RELEASE["tikv"]}"'))
    store = rec["stores"][str(store_id)]
    if store["state"] == "Tombstone":
        return Exited(1, lines + [tidb_log(t + 0.5, "FATAL", "server.rs:1072",
                                           f"failed to start node: StoreTombstone(\"store is tombstone: {store_id}\")")],
                      after=1.0)
    data.update(cluster_id=rec["cluster_id"], store_id=store_id)
    store["heartbeat"] = t
    store.pop("leaders_evicted", None)  # a restarted store takes leaders again
    if store["state"] != "Offline":
        store["state"] = "Up"
    lines += [tidb_log(t + 1.5, "INFO", "node.rs:251", "start raft store thread", store_id=store_id),
              tidb_log(t + 2.0, "INFO", "server.rs:1271", "TiKV is ready to serve")]
    return Started(lines, {20160, 20180}, {"kind": "tidb-tikv", "component": "tikv", "cluster": key, "name": name,
                                           "store_id": str(store_id)}, ready_after=2.0)


def _rocksdb_read_error(cluster: ClusterView, pod: dict[str, Any], container: dict[str, Any], path: str, t: float,
                        reads: float) -> list[str]:
    """RocksDB's fatal background error when reads of the data directory hit EIO."""
    node = (pod.get("spec") or {}).get("nodeName")
    errno = cluster.chaos.io_error(pod, container.get("name", ""), path, "read", reads)
    frac = cluster.nodes.io(node, "read", 4096, reads, comm="tikv-server") if node else 0.0
    if not errno and not (frac > 0 and cluster.rng.random() < 1 - (1 - frac) ** max(1.0, reads)):
        return []
    file = f"{path}/db/{1000 + int(t) % 9000:06d}.sst"
    return [tidb_log(t, "ERROR", "rocksdb.rs:172", "rocksdb background error", db="kv", reason="compaction",
                     err=f"IO error: While pread offset 4096 len 4096: {file}: Input/output error"),
            tidb_log(t, "FATAL", "lib.rs:522", f"rocksdb background error. db: kv, reason: compaction, error: IO error: "
                     f"While pread offset 4096 len 4096: {file}: Input/output error")]


def _start_tidb(cluster: ClusterView, pod: dict[str, Any], inst: dict[str, Any], script: str, t: float) -> Started | Exited:
    key = inst["cluster"]
    url = _script_var(script, "pd_url") or f"{key.split('/', 1)[1]}-pd:2379"
    lines = ["starting tidb-server ...",
             tidb_log(t, "INFO", "printer.go:47", "Welcome to TiDB.", **{"Release Version": RELEASE["tidb"],
                                                                           "Edition": "Community",
                                                                           "Git Commit Hash": "069631e2ecfedc000ffd92c67207bea81380f020",
                                                                           "Store": "tikv"}),
             tidb_log(t + 0.1, "INFO", "store.go:82", "new store", path=f"tikv://{url}")]
    err = _pd_reachable(cluster, pod, script, key)
    if err is not None:
        return Exited(1, lines + [tidb_log(t + 10.0, "WARN", "base_client.go:179", "[pd] failed to get cluster id",
                                           url=f"http://{url}", error=f"[PD:client:ErrClientGetMember]{err}"),
                                  tidb_log(t + 30.0, "FATAL", "terror.go:309", "unexpected error",
                                           error=f"[PD:client:ErrClientGetClusterID]get cluster id failed: {err}")],
                      after=30.0)
    if tikv_availability(cluster, key) <= 0.0:
        return Exited(1, lines + [tidb_log(t + 20.0, "WARN", "backoff.go:158", "tikvRPC backoffer.maxSleep 20000ms is "
                                                                                  "exceeded", errors="[tikv:9005]Region is unavailable"),
                                  tidb_log(t + 30.0, "FATAL", "session.go:3537", "check bootstrapped failed",
                                           error="[tikv:9005]Region is unavailable")], after=30.0)
    lines += [tidb_log(t + 1.0, "INFO", "domain.go:1178", "DDL owner", owner=pod["metadata"]["name"]),
              tidb_log(t + 2.0, "INFO", "server.go:262", "server is running MySQL protocol", addr="0.0.0.0:4000"),
              tidb_log(t + 2.0, "INFO", "http_status.go:95", "for status and metrics report",
                       **{"listening on addr": "0.0.0.0:10080"})]
    return Started(lines, {4000, 10080}, {"kind": "tidb-server", "component": "tidb", "cluster": key,
                                          "name": inst["name"], "queries": 0.0}, ready_after=2.0)


# -- the operator's binaries --------------------------------------------------------------------
@app_model
class TidbOperatorImage(AppModel):
    """pingcap/tidb-operator: tidb-controller-manager (the reconciler lives in
    kubesim/controllers/tidb_operator.py and acts while this process runs) or tidb-discovery."""

    name = "tidb-operator"
    images = ("pingcap/tidb-operator",)
    memory_base = 60 * 2**20

    def start(self, ctx: StartContext) -> Started | Exited:
        argv = ctx.argv
        binary = argv[0].rsplit("/", 1)[-1] if argv else ""
        t = ctx.app_time()
        if binary == "tidb-discovery":
            return Started([klog(t, "I", "version.go:38", "Welcome to TiDB Operator."),
                            klog(t, "I", "version.go:39", "TiDB Discovery Version: v1.6.1"),
                            klog(t + 0.1, "I", "mux.go:47", "starting TiDB Discovery server, listening on 0.0.0.0:10261"),
                            klog(t + 0.1, "I", "proxy.go:68", "starting proxy server, listening on 0.0.0.0:10262")],
                           {10261, 10262}, {"kind": "tidb-discovery"}, ready_after=0.5)
        if binary != "tidb-controller-manager":
            return Exited(0, [], after=0.0)
        flags = {}
        for a in argv[1:]:
            k, _, v = a.lstrip("-").partition("=")
            flags[k] = v
        if not ctx.env.get("NAMESPACE"):
            return Exited(255, [klog(t, "F", "main.go:82", "NAMESPACE environment variable not set")], after=0.2)
        lines = [klog(t, "I", "version.go:38", "Welcome to TiDB Operator."),
                 klog(t, "I", "version.go:39", "TiDB Operator Version: version.Info{GitVersion:\"v1.6.1\", "
                      "GitCommit:\"7b2ff4ec5f9a1fa7d4a2c7eb5fc7b2a4e7f3d3c1\", GitTreeState:\"clean\", "
                      "BuildDate:\"2024-12-05T08:12:45Z\", GoVersion:\"go1.21.10\", Compiler:\"gc\", Platform:\"linux/amd64\"}"),
                 *[klog(t, "I", "main.go:105", f'FLAG: --{k}="{v}"') for k, v in sorted(flags.items())],
                 klog(t + 0.2, "I", "leaderelection.go:250",
                      f"attempting to acquire leader lease {ctx.namespace}/tidb-controller-manager..."),
                 klog(t + 0.3, "I", "leaderelection.go:260",
                      f"successfully acquired lease {ctx.namespace}/tidb-controller-manager"),
                 klog(t + 0.3, "I", "main.go:246", "cache of informer factories sync successfully"),
                 klog(t + 0.4, "I", "tidb_cluster_controller.go:98", "Starting tidbcluster controller")]
        return Started(lines, {6060}, {"kind": "tidb-operator", "flags": flags}, ready_after=1.0)


# -- the SQL client ---------------------------------------------------------------------------
def parse_ycsb(argv: list[str]) -> dict[str, Any] | None:
    """`go-ycsb load|run mysql -P workload -p k=v ...` (possibly inside `sh -c`)."""
    found = find_invocation(argv, r"go-ycsb\s+(load|run)\s+(\w+)")
    if found is None:
        return None
    m, words = found
    props: dict[str, str] = {}
    files: list[str] = []
    for i, w in enumerate(words):
        if w == "-p" and i + 1 < len(words) and "=" in words[i + 1]:
            k, _, v = words[i + 1].partition("=")
            props[k] = v
        elif w == "-P" and i + 1 < len(words):
            files.append(words[i + 1])
    return {"command": m.group(1), "db": m.group(2), "props": props, "files": files}


def _prop_float(props: dict[str, str], key: str, default: float) -> float:
    try:
        return float(props.get(key, default))
    except ValueError:
        return default


@app_model
class GoYcsb(AppModel):
    """pingcap/go-ycsb against TiDB's MySQL port: `load` fills usertable and exits, `run` keeps a
    closed-loop workload at `target` ops/s over `threadcount` connections; its operation counts
    go to Prometheus from the debug port (`debug.pprof`)."""

    name = "go-ycsb"
    images = ("pingcap/go-ycsb",)
    memory_base = 30 * 2**20

    def start(self, ctx: StartContext) -> Started | Exited:
        cfg = parse_ycsb(ctx.argv)
        if cfg is None:
            return Exited(0, [], after=0.0)
        props = dict(cfg["props"])
        for path in cfg["files"]:
            text = ctx.files.get(path)
            if text is None:
                return Exited(1, [f"open {path}: no such file or directory"], after=0.1)
            for line in text.splitlines():
                k, sep, v = line.partition("=")
                if sep and not k.strip().startswith("#"):
                    props.setdefault(k.strip(), v.strip())
        if cfg["db"] != "mysql":
            return Exited(1, [f"{cfg['db']} is not registered"], after=0.1)
        host, port = props.get("mysql.host", "127.0.0.1"), int(_prop_float(props, "mysql.port", 3306))
        conn = ctx.connect(host, port)
        t = ctx.app_time()
        stamp = datetime.fromtimestamp(t, UTC).strftime("%Y/%m/%d %H:%M:%S")
        if conn.ok_share == 0:
            err = conn.first_error() or "connection refused"
            return Exited(1, [f"{stamp} create db mysql failed dial tcp {host}:{port}: {err}"], after=1.0)
        target = next(tg for tg in conn.targets if not tg.error)
        inst = ctx.cluster.workload.instance_of(target.pod, target.port)
        if not isinstance(inst, dict) or inst.get("kind") != "tidb-server":
            return Exited(1, [f"{stamp} create db mysql failed invalid connection"], after=1.0)
        key = inst["cluster"]
        if cfg["command"] == "load":
            ok = sql_success(ctx.cluster, key)
            records = int(_prop_float(props, "recordcount", 1000))
            if ok < 0.5:
                return Exited(1, [f"{stamp} [mysql] Error 9005 (HY000): Region is unavailable",
                                  "Run finished, takes 30s", f"INSERT_ERROR - Takes(s): 30.0, Count: {records}"],
                              after=30.0)
            return Exited(0, ["***************** properties *****************",
                              f'"recordcount"="{records}"', f'"mysql.host"="{host}"', f'"mysql.port"="{port}"',
                              "**********************************************",
                              f"Run finished, takes {records / 2000:.3f}s",
                              f"INSERT - Takes(s): {records / 2000:.1f}, Count: {records}, OPS: 2000.0, "
                              "Avg(us): 3950, Min(us): 1706, Max(us): 31455, 50th(us): 3561, 90th(us): 5191, "
                              "95th(us): 6119, 99th(us): 11551, 99.9th(us): 24831, 99.99th(us): 31455"],
                          after=max(1.0, records / 2000))
        threads = max(1.0, _prop_float(props, "threadcount", 1))
        rate = _prop_float(props, "target", 0) or threads * 500.0
        read = _prop_float(props, "readproportion", 0.5)
        lines = ["***************** properties *****************",
                 *[f'"{k}"="{v}"' for k, v in sorted(props.items()) if not k.endswith("password")],
                 "**********************************************"]
        return Started(lines, {int(props.get("debug.pprof", ":6060").rsplit(":", 1)[-1] or 6060)},
                       {"kind": "go-ycsb", "host": host, "port": port, "rate": rate, "threads": threads,
                        "read": read, "round": {"start": ctx.now, "ok": {}, "err": {}, "lat": 0.0}}, ready_after=1.0)


# -- one fluid step -----------------------------------------------------------------------------
def tikv_availability(cluster: ClusterView, key: str) -> float:
    """Share of regions a statement can use: replicas (3, or fewer stores) sit on distinct
    stores, so with k of N stores without a live tikv-server a region is lost when a majority of
    its replicas are on those k; and the regions led by a store that died unannounced (its leaders
    not evicted first) wait for a new leader for a raft election timeout."""
    stores = [s for s in pd_records(cluster, key)["stores"].values() if s["state"] != "Tombstone"]
    n = len(stores)
    if n == 0:
        return 0.0
    live = _live_stores(cluster, key)
    down = [s for s in stores if s["id"] not in live]
    k = len(down)
    r = min(3, n)
    need = r // 2 + 1
    lost = sum(math.comb(k, j) * math.comb(n - k, r - j) for j in range(need, r + 1)) / math.comb(n, r)
    now = cluster.clock.now()
    leaderless = sum(1 for s in down if s["state"] == "Up" and not s.get("leaders_evicted")
                     and now - s.get("heartbeat", now) <= LEADER_ELECTION_S)
    return max(0.0, 1.0 - lost - (1.0 - lost) * leaderless / n)


def _live_stores(cluster: ClusterView, key: str) -> set[str]:
    out = set()
    for _, c in cluster.kubelet.running():
        inst = c.instance
        if isinstance(inst, dict) and inst.get("kind") == "tidb-tikv" and inst.get("cluster") == key and 20160 in c.ports:
            out.add(inst["store_id"])
    return out


def sql_success(cluster: ClusterView, key: str) -> float:
    """Share of statements a TiDB server of cluster `key` completes: PD must have a quorum (for
    timestamps) and the statement's region a quorum of replicas."""
    if not PdView(cluster, key).quorum():
        return 0.0
    return tikv_availability(cluster, key)


def _sql_error(cluster: ClusterView, key: str) -> str:
    if not PdView(cluster, key).quorum():
        return "[tikv:9001]PD server timeout: start timestamp may fall behind safe point"
    return "[tikv:9005]Region is unavailable"


class _Tick:
    """Everything TiDB does in one fluid step, for every cluster at once."""

    def __init__(self, cluster: ClusterView, now: float, dt: float) -> None:
        self.cluster, self.now, self.dt = cluster, now, dt
        self.wl = cluster.workload

    def run(self) -> None:
        by_kind: dict[str, list[tuple[PodRt, Ctr]]] = {}
        for rt, c in self.cluster.kubelet.running():
            inst = c.instance
            if isinstance(inst, dict) and str(inst.get("kind", "")).startswith(("tidb-", "go-ycsb")):
                by_kind.setdefault(inst["kind"], []).append((rt, c))
        for rt, c in by_kind.get("tidb-starting", []):
            self._finish_start(rt, c)
        keys = {c.instance["cluster"] for kind in ("tidb-pd", "tidb-tikv", "tidb-server")
                for _, c in by_kind.get(kind, []) if isinstance(c.instance, dict)}
        for key in sorted(keys | set(self.wl.state.get(STATE_KEY, {}))):
            self._pd_tick(key)
        for rt, c in by_kind.get("tidb-tikv", []):
            self._tikv_io(rt, c)
        served: dict[tuple[str, str], float] = {}
        for rt, c in by_kind.get("go-ycsb", []):
            self._client(rt, c, served)
        for rt, c in by_kind.get("tidb-server", []):
            self._tidb_metrics(rt, c, served)

    def _pod(self, rt: PodRt) -> dict[str, Any] | None:
        return self.cluster.raw("pods", rt.namespace, rt.name)

    def _finish_start(self, rt: PodRt, c: Ctr) -> None:
        pod = self._pod(rt)
        if pod is None:
            return
        spec: dict[str, Any] = next((x for x in pod["spec"].get("containers") or [] if x["name"] == c.name), {})
        outcome = advance_start(self.cluster, pod, spec, c.instance, self.now)
        if outcome is None:
            if int(self.now) % 15 < self.dt:
                self.cluster.logs.write(pod, c.name, c.instance.pop("pending_lines", [])[:1], self.now)
            return
        if isinstance(outcome, Exited):
            self.cluster.kubelet.terminate(rt.namespace, rt.name, c.name, outcome.code, outcome.reason,
                                           outcome.lines, outcome.stderr)
            return
        self.cluster.logs.write(pod, c.name, outcome.lines, self.now)
        c.ports, c.instance = set(outcome.ports), outcome.instance
        self.cluster.touch()

    def _pd_tick(self, key: str) -> None:
        """PD's store bookkeeping: heartbeats, Disconnected/Down, Offline stores become Tombstone
        once their regions have another home; and its status metrics from the leader."""
        rec = pd_records(self.cluster, key)
        view = PdView(self.cluster, key)
        if not view.quorum():
            return
        live = _live_stores(self.cluster, key)
        now = self.now
        up_others = sum(1 for s in rec["stores"].values() if s["state"] == "Up" and s["id"] in live)
        for sid, s in rec["stores"].items():
            if sid in live:
                s["heartbeat"] = now
            quiet = now - s.get("heartbeat", now)
            if s["state"] in ("Up", "Disconnected", "Down"):
                new = "Up" if quiet < STORE_DISCONNECT_S else "Disconnected" if quiet < STORE_DOWN_S else "Down"
                if new != s["state"]:
                    self._pd_log(key, f"store/{sid}/{new}", "WARN" if new != "Up" else "INFO", "cluster.go:1534",
                                 f"store {'is ' if new != 'Up' else ''}{new.lower() if new != 'Up' else 'is up'}",
                                 store_id=sid, address=s["address"])
                    s.update(state=new, since=now)
            elif s["state"] == "Offline":
                # its replicas move to the other Up stores: three are needed to hold a region's three
                if up_others >= 3 and now - s.get("since", now) >= OFFLINE_TO_TOMBSTONE_S:
                    s.update(state="Tombstone", since=now)
                    self._pd_log(key, f"store/{sid}/tombstone", "INFO", "cluster.go:1612", "store has been Tombstone",
                                 store_id=sid, store_address=s["address"])
        leader = view.leader()
        ns = key.split("/", 1)[0]
        counts: dict[str, int] = {}
        for s in rec["stores"].values():
            counts[s["state"]] = counts.get(s["state"], 0) + 1
        base = (("namespace", ns), ("job", "tidb-cluster"), ("instance", f"{leader}:2379"), ("pod", leader))
        for state in ("Up", "Disconnected", "Down", "Offline", "Tombstone"):
            self.wl.gauge("pd_cluster_status", base + (("type", f"store_{state.lower()}_count"),), float(counts.get(state, 0)))
        self.wl.gauge("pd_cluster_status", base + (("type", "leader_count"),), 1.0 if leader else 0.0)

    def _pd_log(self, key: str, what: str, level: str, caller: str, msg: str, **fields: Any) -> None:
        leader = PdView(self.cluster, key).leader()
        ns = key.split("/", 1)[0]
        pod = self.cluster.raw("pods", ns, leader) if leader else None
        if pod is not None:
            self.cluster.logs.write(pod, "pd", tidb_log(self.now, level, caller, msg, **fields), self.now)

    def _tikv_io(self, rt: PodRt, c: Ctr) -> None:
        pod = self._pod(rt)
        if pod is None:
            return
        spec = {"name": c.name}
        lines = _rocksdb_read_error(self.cluster, pod, spec, "/var/lib/tikv", self.now, reads=4 * self.dt)
        if lines:
            self.cluster.kubelet.terminate(rt.namespace, rt.name, c.name, 1, "Error", lines)

    def _client(self, rt: PodRt, c: Ctr, served: dict[tuple[str, str], float]) -> None:
        """go-ycsb's closed loop: statements spread over the TiDB endpoints it connected to; one
        that fails waits out TiDB's back-off, so failures also slow the loop down."""
        pod = self._pod(rt)
        if pod is None:
            return
        inst = c.instance
        conn = self.wl._connect(pod, inst["host"], inst["port"])
        targets = conn.targets if not conn.error else []
        n = len(targets) or 1
        ok_share = 0.0
        connect_share = 0.0 if targets else 1.0
        errors: list[str] = []
        for tg in targets:
            ti = self.wl.instance_of(tg.pod, tg.port) if not tg.error else None
            if not isinstance(ti, dict) or ti.get("kind") != "tidb-server":
                connect_share += 1.0 / n
                errors.append(tg.error or "connection refused")
                continue
            s = sql_success(self.cluster, ti["cluster"])
            ok_share += s / n
            where = (tg.pod["metadata"]["namespace"], tg.pod["metadata"]["name"])
            served[where] = served.get(where, 0.0) + inst["rate"] / n  # statements this server is sent
            if s < 1.0:
                errors.append(_sql_error(self.cluster, ti["cluster"]))
        fail_share = max(0.0, 1.0 - ok_share - connect_share)
        latency = ok_share * BASE_LATENCY_S + fail_share * FAILED_OP_S + connect_share * 0.001
        rate = min(inst["rate"], inst["threads"] / max(latency, 1e-4))
        n_ops = rate * self.dt
        labels = (("namespace", rt.namespace), ("job", "go-ycsb"), ("pod", rt.name))
        rnd = inst["round"]
        for op, share in (("READ", inst["read"]), ("UPDATE", 1.0 - inst["read"])):
            good, bad = n_ops * share * ok_share, n_ops * share * (1.0 - ok_share)
            self.wl.inc("ycsb_operations_total", labels + (("operation", op), ("result", "ok")), good)
            self.wl.inc("ycsb_operations_total", labels + (("operation", op), ("result", "error")), bad)
            rnd["ok"][op] = rnd["ok"].get(op, 0.0) + good
            rnd["err"][op] = rnd["err"].get(op, 0.0) + bad
        rnd["lat"] += n_ops * latency
        if errors and self.wl._log_once(f"ycsb/{rt.namespace}/{rt.name}", 10.0, self.now):
            stamp = datetime.fromtimestamp(self.now, UTC).strftime("%Y/%m/%d %H:%M:%S")
            self.cluster.logs.write(pod, c.name, f"[mysql] {stamp} {_mysql_error(errors[0])}", self.now,
                                    stream="stderr")
        if self.now - rnd["start"] >= 10.0:
            self._round(pod, c, rnd)

    def _round(self, pod: dict[str, Any], c: Ctr, rnd: dict[str, Any]) -> None:
        took = self.now - rnd["start"]
        total = sum(rnd["ok"].values()) + sum(rnd["err"].values())
        avg_us = int(rnd["lat"] / total * 1e6 * (0.9 + 0.2 * self.cluster.rng.random())) if total else 0
        lines = []
        for op in sorted(set(rnd["ok"]) | set(rnd["err"])):
            for name, count in ((op, rnd["ok"].get(op, 0.0)), (f"{op}_ERROR", rnd["err"].get(op, 0.0))):
                if count >= 1:
                    lines.append(f"{name:<6} - Takes(s): {took:.1f}, Count: {int(count)}, OPS: {count / took:.1f}, "
                                 f"Avg(us): {avg_us}, Min(us): {int(avg_us * 0.4)}, Max(us): {int(avg_us * 8)}, "
                                 f"99th(us): {int(avg_us * 3)}, 99.9th(us): {int(avg_us * 6)}, "
                                 f"99.99th(us): {int(avg_us * 8)}")
        self.cluster.logs.write(pod, c.name, lines, self.now)
        c.instance["round"] = {"start": self.now, "ok": {}, "err": {}, "lat": 0.0}

    def _tidb_metrics(self, rt: PodRt, c: Ctr, served: dict[tuple[str, str], float]) -> None:
        """tidb_server_* as its status port exports them, and the log lines of failing statements."""
        inst = c.instance
        key = inst["cluster"]
        ok = sql_success(self.cluster, key)
        load = served.get((rt.namespace, rt.name), 0.0)
        base = (("namespace", rt.namespace), ("job", "tidb-cluster"), ("instance", f"{rt.name}:10080"), ("pod", rt.name))
        clients = [c2 for _, c2 in self.cluster.kubelet.running() if isinstance(c2.instance, dict)
                   and c2.instance.get("kind") == "go-ycsb"]
        conns = sum(cl.instance["threads"] for cl in clients) / max(1, self._tidb_count(key))
        self.wl.gauge("tidb_server_connections", base, float(int(conns)))
        if load <= 0:
            return
        rate = load * self.dt
        for kind, share in (("Select", 0.5), ("Update", 0.5)):
            self.wl.inc("tidb_server_query_total", base + (("result", "OK"), ("type", kind)), rate * share * ok)
            self.wl.inc("tidb_server_query_total", base + (("result", "Error"), ("type", kind)), rate * share * (1 - ok))
        if ok < 1.0 and self.wl._log_once(f"tidb/{rt.namespace}/{rt.name}", 15.0, self.now):
            pod = self._pod(rt)
            if pod is not None:
                err = _sql_error(self.cluster, key)
                conn_id = 2_097_152 + int(self.now) % 4096
                self.cluster.logs.write(pod, c.name, [
                    tidb_log(self.now, "WARN", "backoff.go:158", "regionMiss backoffer.maxSleep 40000ms is exceeded",
                             errors=f"{err}, {err}"),
                    tidb_log(self.now, "INFO", "conn.go:1184", "command dispatched failed", conn=conn_id,
                             connInfo=f"id:{conn_id}, addr:10.244.1.23:51764 status:10, collation:utf8mb4_general_ci, "
                                      "user:root", command="Execute", status="inTxn:0, autocommit:1",
                             sql="UPDATE usertable SET field5=? WHERE YCSB_KEY=?", txn_mode="PESSIMISTIC",
                             timestamp=0, err=err)], self.now)

    def _tidb_count(self, key: str) -> int:
        return sum(1 for _, c in self.cluster.kubelet.running() if isinstance(c.instance, dict)
                   and c.instance.get("kind") == "tidb-server" and c.instance.get("cluster") == key)


def _mysql_error(err: str) -> str:
    if err.startswith("[tikv:"):
        code = err[6:10]
        return f"Error {code} (HY000): {err.split(']', 1)[1]}"
    return f"driver: bad connection ({err})"


def tidb_tick(cluster: ClusterView, now: float, dt: float) -> None:
    """The TiDB clusters' step (registered with the workload's fluid step)."""
    if any(isinstance(c.instance, dict) and str(c.instance.get("kind", "")).startswith(("tidb-", "go-ycsb"))
           for _, c in cluster.kubelet.running()):
        _Tick(cluster, now, dt).run()


fluid_ticks.append(tidb_tick)

