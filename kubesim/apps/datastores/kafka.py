"""Kafka in KRaft mode (apache/kafka, bitnami/kafka, the OpenTelemetry demo's image): listeners and
log dirs from the environment, auto-created topics with end offsets, consumer groups with committed
offsets (lag emerges from them), the kafka-exporter series, log-dir failure on I/O errors, and the
/opt/kafka/bin tools."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from kubesim.apps.datastores.common import (
    ERRNO_TEXT,
    ConsumeReply,
    StoreModel,
    disk_io,
    exec_argv,
    not_found,
    once,
    peer_instance,
    pod_of,
    queue_latency,
    shell_fallback,
    step_faults,
    utc,
    version_from_tag,
    write_log,
)
from kubesim.apps.graph import Address, StoreReply
from kubesim.apps.model import (
    Exited,
    StartContext,
    Started,
    app_model,
    normalize_image,
    register_image,
)

if TYPE_CHECKING:
    from kubesim.runtime import Ctr, PodRt

register_image("apache/kafka", tags=("3.7.0", "3.7.1", "3.8.0", "3.8.1", "3.9.0", "3.9.1", "4.0.0", "4.1.0", "latest"),
               size=390_000_000, executables=("/etc/kafka/docker/run", "/opt/kafka/bin/kafka-server-start.sh",
                                              "/opt/kafka/bin/kafka-topics.sh", "/opt/kafka/bin/kafka-consumer-groups.sh",
                                              "/opt/kafka/bin/kafka-log-dirs.sh", "/opt/kafka/bin/kafka-storage.sh",
                                              "sh", "bash", "cat", "env", "ls"))
register_image("bitnami/kafka", tags=("3.7", "3.8", "3.9", "3.9.0", "4.0", "latest"), size=420_000_000,
               executables=("/opt/bitnami/scripts/kafka/entrypoint.sh", "/opt/bitnami/scripts/kafka/run.sh",
                            "kafka-server-start.sh", "kafka-topics.sh", "kafka-consumer-groups.sh", "kafka-log-dirs.sh",
                            "sh", "bash", "cat", "env", "ls"))


OTEL_DEMO = "ghcr.io/open-telemetry/demo"


# The demo's src/kafka/Dockerfile builds on apache/kafka and sets these (the manifest may override them).
OTEL_DEMO_KAFKA_ENV = {
    "KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093",
    "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@0.0.0.0:9093", "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0", "KAFKA_PROCESS_ROLES": "controller,broker", "KAFKA_NODE_ID": "1",
    "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "true", "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
    "CLUSTER_ID": "ckjPoprWQzOf0-FuNkGfFQ"}


OTEL_DEMO_KAFKA_VERSION = "3.9.1"  # assumption: the 2.x demo images build on apache/kafka 3.9


KAFKA_COMMIT = {"3.7.0": "2ae524ed625438c5", "3.8.0": "771b9576b00ecf5b", "3.9.0": "a60e31147e6b01ee",
                "3.9.1": "f745dfdcee2b9851", "4.0.0": "985bc99521dd22bb", "4.1.0": "13f70256db3c994c"}


KAFKA_CPU_PER_MSG = 0.00004


KAFKA_DELIVERY_TIMEOUT_MS = 120000


KAFKA_EXPORTER_JOB = "kafka-exporter"


MAX_POLL_RECORDS = 500


def kafka_line(t: float, level: str, msg: str, logger: str) -> str:
    """log4j's `[2026-12-03 07:00:00,123] INFO msg (logger)`."""
    d = utc(t)
    return f"[{d.strftime('%Y-%m-%d %H:%M:%S')},{d.microsecond // 1000:03d}] {level} {msg} ({logger})"


def java_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h


def _jvm_bytes(text: str) -> float:
    m = re.match(r"^(\d+)([kKmMgG]?)$", text)
    if not m:
        return 0.0
    return float(m.group(1)) * {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[m.group(2).lower()]


def _listeners(text: str) -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for part in (text or "").split(","):
        m = re.match(r"^\s*([A-Za-z0-9_]+)://\[?([^\]]*?)\]?:(\d+)\s*$", part)
        if m:
            out[m.group(1).upper()] = (m.group(2), int(m.group(3)))
    return out


@app_model
class Kafka(StoreModel):
    """A KRaft broker+controller (apache/kafka, bitnami/kafka, the OpenTelemetry demo's image): listeners,
    log dirs, auto-created topics with end offsets, consumer groups with committed offsets (so lag is
    what producers wrote minus what consumers read), the kafka-exporter series, and the log-dir
    failure an I/O error causes. The CLI tools live in /opt/kafka/bin (not on PATH) for the apache
    images and on PATH for bitnami's."""

    name = "kafka"
    protocol = "kafka"
    images = ("apache/kafka", "bitnami/kafka")
    memory_base = 150 * 2**20
    entry = ("/etc/kafka/docker/run", "/opt/bitnami/scripts/kafka/entrypoint.sh", "/opt/bitnami/scripts/kafka/run.sh",
             "run", "entrypoint.sh", "run.sh", "kafka-server-start.sh")

    def matches(self, container: dict[str, Any]) -> bool:
        repo, tag, _ = normalize_image(container.get("image", ""))
        if repo == OTEL_DEMO:
            return tag.endswith("-kafka")
        return super().matches(container)

    @staticmethod
    def _flavor(ctx: StartContext) -> tuple[str, str]:
        repo, tag, _ = normalize_image(ctx.container.get("image", ""))
        if repo == OTEL_DEMO:
            return "otel-demo", OTEL_DEMO_KAFKA_VERSION
        flavor = "bitnami" if repo.endswith("bitnami/kafka") else "apache"
        return flavor, version_from_tag(ctx, {"3.7": "3.7.1", "3.8": "3.8.1", "3.9": "3.9.1", "4.0": "4.0.0",
                                               "4": "4.1.0", "3": "3.9.1"}, "4.1.0")

    @staticmethod
    def _config(flavor: str, env: dict[str, str]) -> dict[str, str]:
        """Broker properties from the environment the way each image's entrypoint maps them."""
        merged = dict(OTEL_DEMO_KAFKA_ENV) if flavor == "otel-demo" else {}
        merged.update(env)
        props = {"log.dirs": "/bitnami/kafka/data" if flavor == "bitnami" else "/tmp/kraft-combined-logs",
                 "num.partitions": "1", "auto.create.topics.enable": "true", "node.id": "1",
                 "process.roles": "broker,controller", "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                 "controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@localhost:9093",
                 "num.io.threads": "8"}
        prefix = "KAFKA_CFG_" if flavor == "bitnami" else "KAFKA_"
        skip = {"KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS",
                "KAFKA_VERSION", "KAFKA_HOME", "KAFKA_GC_LOG_OPTS", "KAFKA_DEBUG", "KAFKA_LOG_DIR"}
        for k, v in merged.items():
            if not k.startswith(prefix) or k in skip:
                continue
            name = k[len(prefix):].lower().replace("___", "-").replace("__", "\0").replace("_", ".").replace("\0", "_")
            props[name] = v
        if "advertised.listeners" not in props:
            props["advertised.listeners"] = props["listeners"]
        return props

    # -- start --------------------------------------------------------------------------------------
    def start(self, ctx: StartContext) -> Started | Exited:
        flavor, version = self._flavor(ctx)
        env = ctx.env
        props = self._config(flavor, env)
        t = ctx.app_time()
        node = int(props.get("node.id", "1") or 1)
        cluster_id = env.get("CLUSTER_ID") or OTEL_DEMO_KAFKA_ENV["CLUSTER_ID"] if flavor == "otel-demo" else \
            env.get("CLUSTER_ID", "5L6g3nShT-eMCtK--X86sw")
        heap = env.get("KAFKA_HEAP_OPTS") or ("-Xmx1024m -Xms1024m" if flavor == "bitnami" else "-Xmx1G -Xms1G")
        mx, ms = re.search(r"-Xmx(\S+)", heap), re.search(r"-Xms(\S+)", heap)
        xmx = _jvm_bytes(mx.group(1) if mx else "1g")
        xms = _jvm_bytes(ms.group(1) if ms else "0")
        pre = (["===> User", "uid=1000(appuser) gid=1000(appuser) groups=1000(appuser)",
                "===> Setting default values of environment variables if not already set.",
                "===> Configuring ...", "Running in KRaft mode...", "===> Launching ... ",
                f"===> Using provided cluster id {cluster_id} ..."] if flavor != "bitnami" else
               [f"kafka {utc(t).strftime('%H:%M:%S.%f')[:11]} INFO  ==> ", f"kafka {utc(t).strftime('%H:%M:%S.%f')[:11]} "
                "INFO  ==> Welcome to the Bitnami kafka container", f"kafka {utc(t).strftime('%H:%M:%S.%f')[:11]} INFO  "
                "==> ** Starting Kafka setup **", f"kafka {utc(t).strftime('%H:%M:%S.%f')[:11]} INFO  ==> ** Kafka setup "
                "finished! **", "", f"kafka {utc(t).strftime('%H:%M:%S.%f')[:11]} INFO  ==> ** Starting Kafka **"])
        listeners = _listeners(props["listeners"])
        advertised = _listeners(props.get("advertised.listeners", ""))
        fatal = None
        extra = set(advertised) - set(listeners)
        if extra:
            fatal = ("java.lang.IllegalArgumentException: requirement failed: advertised.listeners listener names must be "
                     f"equal to or a subset of the ones defined in listeners. Found {','.join(sorted(extra))}. The valid "
                     f"options based on the current configuration are {','.join(sorted(listeners))}")
        controller_names = [n.strip().upper() for n in props.get("controller.listener.names", "").split(",") if n.strip()]
        if "controller" in props.get("process.roles", "") and not any(n in listeners for n in controller_names):
            fatal = ("java.lang.IllegalArgumentException: requirement failed: The listeners config must contain at least one "
                     "value from controller.listener.names")
        if set(advertised) & set(controller_names) and "broker" in props.get("process.roles", ""):
            fatal = ("java.lang.IllegalArgumentException: requirement failed: The advertised.listeners config must not "
                     "contain KRaft controller listeners from controller.listener.names when process.roles contains the "
                     "broker role because Kafka clients that send requests via advertised listeners do not send requests "
                     "to KRaft controllers -- they only send requests to KRaft brokers.")
        if fatal:
            return Exited(1, pre + [kafka_line(t + 1, "INFO", "Registered kafka:type=kafka.Log4jController MBean",
                                               "kafka.utils.Log4jControllerRegistration$"),
                                    kafka_line(t + 1, "ERROR", "Exiting Kafka due to fatal exception", "kafka.Kafka$"), fatal],
                          after=2.0)
        log_dirs = [d.strip().rstrip("/") for d in props["log.dirs"].split(",") if d.strip()]
        meta_dir = props.get("metadata.log.dir", log_dirs[0]).rstrip("/")
        volume = ctx.volume_for(log_dirs[0])
        data: dict[str, Any] = volume if volume is not None else {}
        rt = ctx.cluster.kubelet.runtime(ctx.pod)
        ctr = rt.containers.get(ctx.container["name"]) if rt else None
        t1 = t + 1.5
        lines = list(pre)
        if not data.get("formatted"):
            mv = version.rsplit(".", 1)[0] + "-IV0" if version >= "3.7" else "3.6-IV2"
            lines.append(f"Formatting metadata directory {meta_dir} with metadata.version {mv}.")
            data.update({"formatted": True, "topics": {}, "groups": {}, "cluster_id": cluster_id})
        lines += [kafka_line(t1, "INFO", "Registered kafka:type=kafka.Log4jController MBean",
                             "kafka.utils.Log4jControllerRegistration$"),
                  kafka_line(t1, "INFO", "Setting -D jdk.tls.rejectClientInitiatedRenegotiation=true to disable "
                                         "client-initiated TLS renegotiation", "org.apache.zookeeper.common.X509Util"),
                  kafka_line(t1, "INFO", f"[ControllerServer id={node}] Starting controller", "kafka.server.ControllerServer")]
        if rt is not None and ctr is not None:
            probe: dict[str, Any] = {"kind": "kafka"}
            for d in dict.fromkeys(log_dirs + [meta_dir]):
                f = step_faults(ctx.cluster, rt, ctr, probe, d)
                probe.pop("_faults", None)
                errno = f["r_errno"] or f["w_errno"]
                if errno:
                    word = ERRNO_TEXT.get(errno, "Input/output error")
                    return Exited(1, lines + [
                        kafka_line(t1, "ERROR", f"Failed to create or validate data directory {d}", "kafka.log.LogManager"),
                        f"java.io.IOException: {word}",
                        "\tat java.base/java.io.UnixFileSystem.createFileExclusively0(Native Method)",
                        "\tat java.base/java.io.File.createNewFile(File.java:1043)",
                        "\tat org.apache.kafka.server.util.FileLock.<init>(FileLock.java:40)",
                        kafka_line(t1, "ERROR", "Exiting Kafka due to fatal exception during startup.", "kafka.Kafka$"),
                        "org.apache.kafka.common.errors.KafkaStorageException: None of the specified log dirs from "
                        f"{', '.join(log_dirs)} can be created or validated"], after=3.0)
        voters = props.get("controller.quorum.voters", "")
        quorum_err = None
        for v in voters.split(","):
            m = re.match(r"^\s*(\d+)@\[?([^\]:]+)\]?:(\d+)", v)
            if m and int(m.group(1)) == node and m.group(2) not in ("0.0.0.0", "localhost", "127.0.0.1", ctx.pod_ip):
                _, err = ctx.cluster.network.lookup(ctx.pod, m.group(2))
                if err:
                    quorum_err = (m.group(2), int(m.group(3)))
        ports = {p for _, p in listeners.values()}
        topics = data.setdefault("topics", {})
        lines += [kafka_line(t1 + 0.5, "INFO", f"[RaftManager id={node}] Completed transition to Leader(localId={node}, "
                                               "epoch=1, epochStartOffset=0, highWatermark=Optional.empty, "
                                               "voterStates={1=ReplicaState(nodeId=1, endOffset=Optional.empty)})",
                             "org.apache.kafka.raft.QuorumState") if quorum_err is None else
                  kafka_line(t1 + 0.5, "WARN", f"[RaftManager id={node}] Connection to node {node} ({quorum_err[0]}/"
                                               f"<unresolved>:{quorum_err[1]}) could not be established. Node may not be "
                                               "available.", "org.apache.kafka.clients.NetworkClient"),
                  kafka_line(t1 + 1, "INFO", f"[BrokerServer id={node}] Transition from SHUTDOWN to STARTING",
                             "kafka.server.BrokerServer"),
                  kafka_line(t1 + 1, "INFO", f"Loading logs from log dirs ArrayBuffer({', '.join(log_dirs)})",
                             "kafka.log.LogManager")]
        if quorum_err is not None:
            ports = {p for name, (_, p) in listeners.items() if name in controller_names}
        else:
            lines += [kafka_line(t1 + 1.2, "INFO", f"Loaded {len(topics)} logs in 12ms", "kafka.log.LogManager"),
                      kafka_line(t1 + 1.5, "INFO", f"[BrokerLifecycleManager id={node}] The broker has been unfenced. "
                                                   "Transitioning from RECOVERY to RUNNING.",
                                 "kafka.server.BrokerLifecycleManager")]
            for name, (host, port) in listeners.items():
                if name not in controller_names:
                    lines.append(kafka_line(t1 + 1.6, "INFO", f"Awaiting socket connections on {host or '0.0.0.0'}:{port}.",
                                            "kafka.network.DataPlaneAcceptor"))
            lines += [kafka_line(t1 + 1.7, "INFO", f"[BrokerServer id={node}] Transition from STARTING to STARTED",
                                 "kafka.server.BrokerServer"),
                      kafka_line(t1 + 1.7, "INFO", f"Kafka version: {version}", "org.apache.kafka.common.utils.AppInfoParser"),
                      kafka_line(t1 + 1.7, "INFO", f"Kafka commitId: {KAFKA_COMMIT.get(version, '2ae524ed625438c5')}",
                                 "org.apache.kafka.common.utils.AppInfoParser"),
                      kafka_line(t1 + 1.7, "INFO", f"Kafka startTimeMs: {int((t1 + 1.7) * 1000)}",
                                 "org.apache.kafka.common.utils.AppInfoParser"),
                      kafka_line(t1 + 1.8, "INFO", f"[KafkaRaftServer nodeId={node}] Kafka Server started",
                                 "kafka.server.KafkaRaftServer")]
        _exporter_hook(ctx.cluster)
        for g in data.setdefault("groups", {}).values():
            g["members"] = 0  # every consumer rejoins a restarted coordinator
        inst = {"kind": "kafka", "flavor": flavor, "version": version, "node": node, "props": props, "data": data,
                "log_dirs": log_dirs, "meta_dir": meta_dir, "listeners": {k: list(v) for k, v in listeners.items()},
                "advertised": {k: list(v) for k, v in advertised.items()}, "controller": controller_names,
                "xmx": xmx or 2**30, "xms": xms, "offline": {}, "started": ctx.now, "now": ctx.now, "util": 0.0,
                "acc": _kafka_acc(), "quorum_err": list(quorum_err) if quorum_err else None,
                "auto_create": props.get("auto.create.topics.enable", "true").lower() == "true",
                "partitions": int(props.get("num.partitions", "1") or 1), "ns": ctx.namespace, "pod": ctx.pod_name,
                "container": ctx.container["name"], "io_threads": int(props.get("num.io.threads", "8") or 8)}
        return Started(lines, ports, inst, ready_after=5.0)

    # -- the protocol -----------------------------------------------------------------------------------
    def authenticate(self, instance: Any, address: Address) -> str | None:
        inst = instance
        if not isinstance(inst, dict) or inst.get("kind") != "kafka":
            return "EOF"
        for name, (_, port) in inst["listeners"].items():
            if port == address.port and name in inst["controller"]:
                return ("kafka: client has run out of available brokers to talk to: unexpected EOF (the controller "
                        "listener does not serve clients)")
        return None

    def _advertised_error(self, cluster: Any, rt: PodRt, inst: dict[str, Any], address: Address, now: float) -> str | None:
        """Clients bootstrap on `address`, then reconnect to the advertised listener the metadata names."""
        cached = inst.get("_adv")
        if cached and cached[0] == now:
            return cached[1]
        err = None
        name = next((n for n, (_, p) in inst["listeners"].items() if p == address.port), None)
        adv = inst["advertised"].get(name or "")
        pod = pod_of(cluster, rt)
        if adv and pod is not None:
            host, port = adv[0], int(adv[1])
            if host in ("", "0.0.0.0"):
                err = f"dial tcp 0.0.0.0:{port}: connect: connection refused"
            elif host not in ("localhost", "127.0.0.1"):
                conn = cluster.network.connect(pod, host, port)
                if conn.ok_share == 0:
                    err = conn.first_error() or f"dial tcp {host}:{port}: connect: connection refused"
                    err = err if err.startswith("dial tcp") else f"dial tcp: {err}"
        inst["_adv"] = (now, err)
        return err

    def _topic(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], topic: str, now: float) -> dict[str, Any] | None:
        topics = inst["data"]["topics"]
        rec = topics.get(topic)
        if rec is not None or not inst["auto_create"]:
            return rec
        n = inst["partitions"]
        d = inst["log_dirs"][java_hash(topic) % len(inst["log_dirs"])]
        rec = {"partitions": n, "end": [0.0] * n, "start": [0.0] * n, "dir": d,
               "id": hashlib.sha256(f"{topic}{now}".encode()).hexdigest()[:22]}
        topics[topic] = rec
        lines = [kafka_line(now, "INFO", f"Sent auto-creation request for Set({topic}) to the active controller.",
                            "kafka.server.DefaultAutoTopicCreationManager"),
                 kafka_line(now, "INFO", f"[QuorumController id={inst['node']}] CreateTopics result(s): "
                                         f"CreatableTopic(name='{topic}', numPartitions={n}, replicationFactor=1, "
                                         "assignments=[], configs=[]): SUCCESS",
                            "org.apache.kafka.controller.ReplicationControlManager")]
        for p in range(n):
            lines += [kafka_line(now, "INFO", f"[LogLoader partition={topic}-{p}, dir={d}] Loading producer state till "
                                              "offset 0 with message format version 2", "kafka.log.UnifiedLog$"),
                      kafka_line(now, "INFO", f"Created log for partition {topic}-{p} in {d}/{topic}-{p} with properties {{}}",
                                 "kafka.log.LogManager")]
        write_log(cluster, rt, c, lines, now)
        return rec

    def serve_running(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], command: str, write: bool,
                      rate: float, dt: float, address: Address, now: float) -> StoreReply:
        parts = command.split()
        verb = parts[0].lower() if parts else ""
        if verb not in ("produce", "consume") or len(parts) < 2:
            return StoreReply(1.0, 0.002, None)
        topic = parts[1]
        err = self._advertised_error(cluster, rt, inst, address, now)
        if err:
            return (ConsumeReply(0.0, 0.5, err) if verb == "consume" else StoreReply(0.0, 0.5, err))
        rec = self._topic(cluster, rt, c, inst, topic, now)
        acc = inst["acc"]
        n = rate * dt
        snap = step_faults(cluster, rt, c, inst, (rec or {}).get("dir", inst["log_dirs"][0]))
        wait = queue_latency(0.0008 + snap["delay"], inst["util"]) - (0.0008 + snap["delay"])
        if verb == "produce":
            return self._produce(cluster, rt, c, inst, rec, topic, n, dt, wait, snap, now)
        group = parts[2] if len(parts) > 2 else "console-consumer"
        return self._consume(cluster, rt, c, inst, rec, topic, group, rate, dt, wait, snap, now, acc)

    def _produce(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], rec: dict[str, Any] | None, topic: str,
                 n: float, dt: float, wait: float, snap: dict[str, Any], now: float) -> StoreReply:
        acc = inst["acc"]
        if rec is None:
            return StoreReply(0.0, 60.0, f"Topic {topic} not present in metadata after 60000 ms.")
        tp = f"{topic}-0"
        if rec["dir"] in inst["offline"]:
            since = now - inst["offline"][rec["dir"]]
            if since * 1000 < KAFKA_DELIVERY_TIMEOUT_MS:
                return StoreReply(0.0, since, "NOT_LEADER_OR_FOLLOWER: For requests intended only for the leader, this "
                                              "error indicates that the broker is not the current leader.")
            return StoreReply(0.0, KAFKA_DELIVERY_TIMEOUT_MS / 1000, f"Expiring {max(1, int(n))} record(s) for {tp}:"
                                                                     f"{KAFKA_DELIVERY_TIMEOUT_MS} ms has passed since batch creation")
        requests = min(n, max(dt * 10, n / 16)) if n > 0 else 0.0  # the producer batches under load
        errno, share = disk_io(cluster, rt, c, inst, rec["dir"], "write", requests, "java")
        if errno and share > 0 and requests * share >= 0.2:
            self._dir_failure(cluster, rt, c, inst, rec["dir"], tp, errno, "write", now)
            return StoreReply(0.0, 0.01, "KAFKA_STORAGE_ERROR: Disk error when trying to access log file on the disk.")
        latency = 0.002 + snap["delay"] + wait  # acks=all: the leader's append (RF 1) before the response
        acc["produced"] += n
        acc["requests"] += requests
        acc["lat"] += latency * n
        per = n / rec["partitions"]
        rec["end"] = [e + per for e in rec["end"]]
        if latency * 1000 > 30000:
            share = min(1.0, (latency * 1000 - 30000) / (KAFKA_DELIVERY_TIMEOUT_MS - 30000))
            return StoreReply(1.0 - share, min(latency, KAFKA_DELIVERY_TIMEOUT_MS / 1000),
                              f"Expiring {max(1, int(n * share))} record(s) for {tp}:{KAFKA_DELIVERY_TIMEOUT_MS} ms has "
                              "passed since batch creation")
        return StoreReply(1.0, latency, None)

    def _consume(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], rec: dict[str, Any] | None, topic: str,
                 group: str, rate: float, dt: float, wait: float, snap: dict[str, Any], now: float,
                 acc: dict[str, Any]) -> ConsumeReply:
        groups = inst["data"]["groups"]
        g = groups.setdefault(group, {"offsets": {}, "members": 0, "generation": 0, "last_seen": now})
        acc["members"][group] = acc["members"].get(group, 0) + 1
        g["last_seen"] = now
        acc["requests"] += dt * 2
        if rec is None:
            return ConsumeReply(1.0, 0.5, None, read=0.0)
        if rec["dir"] in inst["offline"]:
            return ConsumeReply(0.0, 0.5, "NOT_LEADER_OR_FOLLOWER: For requests intended only for the leader, this error "
                                          "indicates that the broker is not the current leader.", read=0.0)
        committed = g["offsets"].setdefault(topic, list(rec["start"]))  # auto.offset.reset=earliest
        while len(committed) < rec["partitions"]:
            committed.append(0.0)
        lags = [max(0.0, e - o) for e, o in zip(rec["end"], committed, strict=False)]
        lag = sum(lags)
        fetch_latency = 0.005 + snap["delay"] + wait
        if lag < 1.0 or rate <= 0:
            return ConsumeReply(1.0, fetch_latency + 0.5 * (lag < 1.0), None, read=0.0)
        fetches = max(1.0, dt / max(fetch_latency, 0.01))
        errno, share = disk_io(cluster, rt, c, inst, rec["dir"], "read", min(fetches, 1000.0), "java")
        if errno and share > 0 and fetches * share >= 0.2:
            self._dir_failure(cluster, rt, c, inst, rec["dir"], f"{topic}-0", errno, "read", now)
            return ConsumeReply(0.0, fetch_latency, "KAFKA_STORAGE_ERROR: Disk error when trying to access log file on the "
                                                    "disk.", read=0.0)
        batch = min(float(MAX_POLL_RECORDS), lag)
        throughput = batch / (batch / rate + fetch_latency)  # poll, process the batch, poll again
        read = min(lag, throughput * dt, rate * dt)
        for i, lg in enumerate(lags):
            committed[i] += read * lg / lag
        acc["consumed"] += read
        return ConsumeReply(1.0, fetch_latency, None, read=read / dt)

    def _dir_failure(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], d: str, tp: str, errno: int, op: str,
                     now: float) -> None:
        """LogDirFailureChannel: the dir goes offline; with no live log dir (or the metadata dir) the broker halts."""
        if d in inst["offline"]:
            return
        node = inst["node"]
        word = ERRNO_TEXT.get(errno, "Input/output error")
        what = f"Error while appending records to {tp} in dir {d}" if op == "write" else \
            f"Error while reading from {tp} in dir {d}"
        frames = (["\tat java.base/sun.nio.ch.FileDispatcherImpl.write0(Native Method)",
                   "\tat java.base/sun.nio.ch.FileDispatcherImpl.write(FileDispatcherImpl.java:62)",
                   "\tat java.base/sun.nio.ch.IOUtil.writeFromNativeBuffer(IOUtil.java:132)",
                   "\tat java.base/sun.nio.ch.FileChannelImpl.write(FileChannelImpl.java:285)",
                   "\tat org.apache.kafka.common.record.MemoryRecords.writeFullyTo(MemoryRecords.java:92)",
                   "\tat org.apache.kafka.common.record.FileRecords.append(FileRecords.java:188)",
                   "\tat org.apache.kafka.storage.internals.log.LogSegment.append(LogSegment.java:263)"]
                  if op == "write" else
                  ["\tat java.base/sun.nio.ch.FileDispatcherImpl.pread0(Native Method)",
                   "\tat java.base/sun.nio.ch.FileChannelImpl.readInternal(FileChannelImpl.java:816)",
                   "\tat org.apache.kafka.common.record.FileRecords.readInto(FileRecords.java:120)",
                   "\tat org.apache.kafka.storage.internals.log.LogSegment.read(LogSegment.java:441)"])
        parts = [f"{t}-{p}" for t, r in sorted(inst["data"]["topics"].items()) if r["dir"] == d for p in range(r["partitions"])]
        lines = [kafka_line(now, "ERROR", what, "org.apache.kafka.storage.internals.log.LogDirFailureChannel"),
                 f"java.io.IOException: {word}"] + frames + [
            kafka_line(now, "WARN", f"[ReplicaManager broker={node}] Stopping serving replicas in dir {d}",
                       "kafka.server.ReplicaManager"),
            kafka_line(now, "WARN", f"[ReplicaManager broker={node}] Broker {node} stopped fetcher for partitions "
                                    f"{','.join(parts)} and stopped moving logs for partitions  because they are in the "
                                    f"failed log directory {d}.", "kafka.server.ReplicaManager"),
            kafka_line(now, "WARN", f"Stopping serving logs in dir {d}", "kafka.log.LogManager")]
        inst["offline"][d] = now
        live = [x for x in inst["log_dirs"] if x not in inst["offline"]]
        if not live or d == inst["meta_dir"]:
            why = (f"Shutdown broker because all log dirs in {', '.join(inst['log_dirs'])} have failed" if not live else
                   f"Shutdown broker because the metadata log dir {d} has failed")
            lines.append(kafka_line(now, "ERROR", f"[ReplicaManager broker={node}] {why}", "kafka.server.ReplicaManager"))
            cluster.kubelet.terminate(rt.namespace, rt.name, c.name, 1, "Error", lines)
            return
        write_log(cluster, rt, c, lines, now)

    # -- per step ---------------------------------------------------------------------------------------
    def tick(self, cluster: Any, rt: PodRt, c: Ctr, now: float, dt: float) -> None:
        inst = self.own_instance(c, now)
        if inst is None:
            return
        acc = inst["acc"]
        if inst.get("quorum_err") and once(inst, "quorum", now, 30.0):
            host, port = inst["quorum_err"]
            write_log(cluster, rt, c, [kafka_line(now, "WARN", f"[RaftManager id={inst['node']}] Connection to node "
                                                         f"{inst['node']} ({host}/<unresolved>:{port}) could not be "
                                                         "established. Node may not be available.",
                                             "org.apache.kafka.clients.NetworkClient")], now)
        # KRaft appends to the metadata log all the time (no-op records every 500 ms)
        if inst["meta_dir"] not in inst["offline"]:
            errno, share = disk_io(cluster, rt, c, inst, inst["meta_dir"], "write", dt * 2, "java")
            if errno and share > 0:
                self._dir_failure(cluster, rt, c, inst, inst["meta_dir"], "__cluster_metadata-0", errno, "write", now)
                if c.instance is None:
                    return
        snap = step_faults(cluster, rt, c, inst, inst["log_dirs"][0])
        capacity = inst["io_threads"] / (0.0008 + snap["delay"])
        inst["util"] = min(5.0, acc["requests"] / max(dt, 1e-6) / capacity)
        self._groups(cluster, rt, c, inst, now)
        self._export(cluster, rt, c, inst)
        msgs = acc["produced"] + acc["consumed"]
        self.account(cluster, rt, c, inst, msgs, KAFKA_CPU_PER_MSG, dt)
        c.cpu_seconds += 0.01 * dt  # the JVM's own threads (GC, raft, purgatory) when idle
        inst["acc"] = _kafka_acc()

    def _groups(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], now: float) -> None:
        """The group coordinator: a group with polling members is Stable; one whose members stopped
        heartbeating for session.timeout.ms (45 s) is emptied."""
        node = inst["node"]
        lines = []
        for name, g in inst["data"]["groups"].items():
            seen = inst["acc"]["members"].get(name, 0)
            part = f"__consumer_offsets-{(java_hash(name) & 0x7FFFFFFF) % 50}"
            if seen and not g.get("members"):
                gen = g.get("generation", 0)
                h = hashlib.sha256(f"{name}{now}".encode()).hexdigest()
                member = f"consumer-{name}-1-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
                g["member_id"] = member
                lines += [kafka_line(now, "INFO", f"[GroupCoordinator {node}]: Dynamic member with unknown member id "
                                                  f"joins group {name} in Empty state. Created a new member id {member} "
                                                  "and request the member to rejoin with this id.",
                                     "kafka.coordinator.group.GroupCoordinator"),
                          kafka_line(now, "INFO", f"[GroupCoordinator {node}]: Preparing to rebalance group {name} in state "
                                                  f"PreparingRebalance with old generation {gen} ({part}) (reason: Adding "
                                                  f"new member {member} with group instance id None; client reason: "
                                                  "need to re-join with the given member-id: " + member + ")",
                                     "kafka.coordinator.group.GroupCoordinator"),
                          kafka_line(now, "INFO", f"[GroupCoordinator {node}]: Stabilized group {name} generation {gen + 1} "
                                                  f"({part}) with {seen} members", "kafka.coordinator.group.GroupCoordinator")]
                g["generation"] = gen + 1
                g["members"] = seen
            elif seen:
                g["members"] = seen
            elif g.get("members") and now - g.get("last_seen", now) >= 45.0:
                gen = g.get("generation", 1)
                lines += [kafka_line(now, "INFO", f"[GroupCoordinator {node}]: Member {g.get('member_id', 'consumer-1')} in "
                                                  f"group {name} has failed, removing it from the group",
                                     "kafka.coordinator.group.GroupCoordinator"),
                          kafka_line(now, "INFO", f"[GroupCoordinator {node}]: Preparing to rebalance group {name} in state "
                                                  f"PreparingRebalance with old generation {gen} ({part}) (reason: removing "
                                                  f"member {g.get('member_id', 'consumer-1')} on heartbeat expiration)",
                                     "kafka.coordinator.group.GroupCoordinator"),
                          kafka_line(now, "INFO", f"[GroupCoordinator {node}]: Group {name} with generation {gen + 1} is now "
                                                  f"empty ({part})", "kafka.coordinator.group.GroupCoordinator")]
                g["members"] = 0
                g["generation"] = gen + 1
        if lines:
            write_log(cluster, rt, c, lines, now)

    def _export(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any]) -> None:
        """danielqsj/kafka_exporter's series, as a kafka-exporter scraping this broker would report them."""
        ns = rt.namespace
        base = (("namespace", ns), ("job", KAFKA_EXPORTER_JOB), ("instance", f"kafka-exporter.{ns}:9308"))
        wl = cluster.workload
        index = wl.state.setdefault("kafka_exporter", {})
        entry = index.setdefault(f"{ns}/{rt.name}", {"container": c.name, "keys": []})
        for key in entry["keys"]:
            wl.state["gauges"].pop((key[0], tuple(tuple(x) for x in key[1])), None)
        keys: list[tuple[str, tuple]] = []

        def g(metric: str, labels: tuple, value: float) -> None:
            wl.gauge(metric, base + labels, value)
            keys.append((metric, base + labels))

        g("kafka_brokers", (), 1.0)
        g("kafka_broker_info", (("address", f"{inst['advertised'].get('PLAINTEXT', ['kafka', 9092])[0]}:"
                                            f"{inst['advertised'].get('PLAINTEXT', ['kafka', 9092])[1]}"),
                                ("id", str(inst["node"]))), 1.0)
        topics = inst["data"]["topics"]
        for t, rec in sorted(topics.items()):
            offline = rec["dir"] in inst["offline"]
            g("kafka_topic_partitions", (("topic", t),), float(rec["partitions"]))
            for p in range(rec["partitions"]):
                lp = (("partition", str(p)), ("topic", t))
                g("kafka_topic_partition_current_offset", lp, float(int(rec["end"][p])))
                g("kafka_topic_partition_oldest_offset", lp, float(int(rec["start"][p])))
                g("kafka_topic_partition_leader", lp, -1.0 if offline else float(inst["node"]))
                g("kafka_topic_partition_replicas", lp, 1.0)
                g("kafka_topic_partition_in_sync_replica", lp, 0.0 if offline else 1.0)
                g("kafka_topic_partition_leader_is_preferred", lp, 0.0 if offline else 1.0)
                g("kafka_topic_partition_under_replicated_partition", lp, 0.0)
        for name, grp in sorted(inst["data"]["groups"].items()):
            g("kafka_consumergroup_members", (("consumergroup", name),), float(grp.get("members", 0)))
            for t, offs in sorted(grp["offsets"].items()):
                rec = topics.get(t)
                if rec is None:
                    continue
                lag_sum = cur_sum = 0.0
                for p, o in enumerate(offs[: rec["partitions"]]):
                    cur = float(int(o))
                    lag = max(0.0, float(int(rec["end"][p])) - cur)
                    gp = (("consumergroup", name), ("partition", str(p)), ("topic", t))
                    g("kafka_consumergroup_current_offset", gp, cur)
                    g("kafka_consumergroup_lag", gp, lag)
                    lag_sum += lag
                    cur_sum += cur
                g("kafka_consumergroup_lag_sum", (("consumergroup", name), ("topic", t)), lag_sum)
                g("kafka_consumergroup_current_offset_sum", (("consumergroup", name), ("topic", t)), cur_sum)
        entry["keys"] = [[k, [list(x) for x in labels]] for k, labels in keys]

    def memory(self, instance: Any, load_rps: float) -> float:
        if not isinstance(instance, dict):
            return float(self.memory_base)
        heap = max(instance.get("xms", 0.0), 0.75 * instance.get("xmx", 2**30))
        return heap + self.memory_base + load_rps * 20_000

    # -- kubectl exec ------------------------------------------------------------------------------------
    def exec(self, ctx: StartContext, instance: Any, command: list[str]) -> tuple[int, str, str]:
        env, argv = exec_argv(command)
        if not argv:
            return 1, "", "error: you must specify at least one command for the container"
        prog = argv[0]
        base = prog.rsplit("/", 1)[-1]
        tools = ("kafka-topics.sh", "kafka-consumer-groups.sh", "kafka-log-dirs.sh", "kafka-broker-api-versions.sh",
                 "kafka-metadata-quorum.sh")
        if base in tools:
            flavor = (instance or {}).get("flavor", "apache")
            if flavor != "bitnami" and "/" not in prog:
                return not_found(prog)  # /opt/kafka/bin is not on the apache image's PATH
            return self._tool(ctx, instance, base, argv[1:])
        return shell_fallback(ctx, command)

    def _tool(self, ctx: StartContext, instance: Any, tool: str, args: list[str]) -> tuple[int, str, str]:
        opts: dict[str, str] = {}
        flags: set[str] = set()
        i = 0
        while i < len(args):
            a = args[i]
            if a.startswith("--"):
                if "=" in a:
                    k, _, v = a[2:].partition("=")
                    opts[k] = v
                elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                    opts[a[2:]] = args[i + 1]
                    i += 1
                else:
                    flags.add(a[2:])
            i += 1
        bootstrap = opts.get("bootstrap-server", "")
        if not bootstrap:
            return 1, "", "Missing required argument \"[bootstrap-server]\"\n"
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        inst: Any = instance
        if host not in ("localhost", "127.0.0.1", "") and isinstance(instance, dict) and host != ctx.pod_ip:
            inst, _, err = peer_instance(ctx, host, int(port or 9092), "kafka")
            if err:
                return 1, "", (f"Error while executing {'topic' if 'topics' in tool else 'consumer group'} command : "
                               "Timed out waiting for a node assignment. Call: listTopics\n")
        if not isinstance(inst, dict):
            return 1, "", "Error: Timed out waiting for a node assignment.\n"
        data = inst["data"]
        topics, groups = data["topics"], data["groups"]
        if tool == "kafka-topics.sh":
            if "list" in flags:
                names = sorted(topics) + (["__consumer_offsets"] if groups else [])
                return 0, "".join(n + "\n" for n in sorted(names)), ""
            if "create" in flags:
                name = opts.get("topic", "")
                if name in topics:
                    return 1, "", f"Error while executing topic command : Topic '{name}' already exists.\n"
                n = int(opts.get("partitions") or inst["partitions"])
                topics[name] = {"partitions": n, "end": [0.0] * n, "start": [0.0] * n, "dir": inst["log_dirs"][0],
                                "id": hashlib.sha256(name.encode()).hexdigest()[:22]}
                return 0, f"Created topic {name}.\n", ""
            if "describe" in flags:
                names = [opts["topic"]] if "topic" in opts else sorted(topics)
                out = []
                for name in names:
                    rec = topics.get(name)
                    if rec is None:
                        return 1, "", (f"Error while executing topic command : Topic '{name}' does not exist as expected\n")
                    off = rec["dir"] in inst["offline"]
                    out.append(f"Topic: {name}\tTopicId: {rec['id']}\tPartitionCount: {rec['partitions']}\t"
                               "ReplicationFactor: 1\tConfigs: \n")
                    for p in range(rec["partitions"]):
                        leader = "none" if off else str(inst["node"])
                        out.append(f"\tTopic: {name}\tPartition: {p}\tLeader: {leader}\tReplicas: {inst['node']}\t"
                                   f"Isr: {'' if off else inst['node']}\tElr: \tLastKnownElr: \n")
                return 0, "".join(out), ""
            return 1, "", "Exactly one of --list, --describe, --create, --alter or --delete must be specified\n"
        if tool == "kafka-consumer-groups.sh":
            if "list" in flags:
                return 0, "".join(g + "\n" for g in sorted(groups)), ""
            names = sorted(groups) if "all-groups" in flags else [opts.get("group", "")]
            if "reset-offsets" in flags:
                return self._reset(inst, names, opts, flags)
            if "describe" in flags:
                out = []
                for name in names:
                    grp = groups.get(name)
                    if grp is None:
                        return 1, "", f"\nError: Consumer group '{name}' does not exist.\n"
                    active = grp.get("members", 0) > 0
                    rows = []
                    for t, offs in sorted(grp["offsets"].items()):
                        rec = topics.get(t)
                        if rec is None:
                            continue
                        for p in range(rec["partitions"]):
                            cur, end = int(offs[p]), int(rec["end"][p])
                            cid = grp.get("member_id", "-") if active else "-"
                            rows.append([name, t, str(p), str(cur), str(end), str(end - cur), cid,
                                         "/10.244.1.12" if active else "-", cid[:-37] if active else "-"])
                    head = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                            "CLIENT-ID"]
                    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
                    table = "".join(" ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() + "\n"
                                    for r in [head] + rows)
                    note = "" if active else f"\nConsumer group '{name}' has no active members.\n"
                    out.append(note + "\n" + table)
                return 0, "".join(out), ""
        if tool == "kafka-log-dirs.sh":
            dirs = [{"logDir": d, "error": "KafkaStorageException" if d in inst["offline"] else None,
                     "partitions": [] if d in inst["offline"] else
                     [{"partition": f"{t}-{p}", "size": int(rec["end"][p] * 180), "offsetLag": 0, "isFuture": False}
                      for t, rec in sorted(topics.items()) if rec["dir"] == d for p in range(rec["partitions"])]}
                    for d in inst["log_dirs"]]
            import json
            body = json.dumps({"version": 1, "brokers": [{"broker": inst["node"], "logDirs": dirs}]}, separators=(",", ":"))
            return 0, ("Querying brokers for log directories information\nReceived log directory information from brokers "
                       f"{inst['node']}\n{body}\n"), ""
        return 0, "", ""

    @staticmethod
    def _reset(inst: dict[str, Any], names: list[str], opts: dict[str, str], flags: set[str]) -> tuple[int, str, str]:
        topics, groups = inst["data"]["topics"], inst["data"]["groups"]
        rows = []
        for name in names:
            grp = groups.get(name)
            if grp is None:
                return 1, "", f"\nError: Consumer group '{name}' does not exist.\n"
            if grp.get("members", 0) > 0 and "execute" in flags:
                return 1, "", (f"\nError: Assignments can only be reset if the group '{name}' is inactive, but the "
                               "current state is Stable.\n\n")
            wanted = [opts["topic"].split(":")[0]] if "topic" in opts else (sorted(grp["offsets"]) if "all-topics" in flags else [])
            for t in wanted:
                rec = topics.get(t)
                if rec is None:
                    continue
                offs = grp["offsets"].setdefault(t, list(rec["start"]))
                new = []
                for p in range(rec["partitions"]):
                    if "to-latest" in flags:
                        v = rec["end"][p]
                    elif "to-earliest" in flags:
                        v = rec["start"][p]
                    elif "to-offset" in opts:
                        v = float(opts["to-offset"])
                    elif "shift-by" in opts:
                        v = offs[p] + float(opts["shift-by"])
                    else:
                        v = offs[p]
                    new.append(min(max(v, rec["start"][p]), rec["end"][p]))
                    rows.append([name, t, str(p), str(int(new[-1]))])
                if "execute" in flags:
                    grp["offsets"][t] = new
        out = "\n" + "".join(f"{g:<30} {t:<30} {p:<10} {o:<15}\n" for g, t, p, o in
                             [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + rows)
        warn = "" if flags & {"execute", "dry-run"} else (
            "WARN: No action will be performed as the --execute option is missing. In a future major release, the default "
            "behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. "
            "You should add the --dry-run option explicitly if you are scripting this command and want to keep the "
            "current default behavior without prompting.\n")
        return 0, warn + out, ""


def _kafka_acc() -> dict[str, Any]:
    return {"produced": 0.0, "consumed": 0.0, "requests": 0.0, "lat": 0.0, "members": {}}


def _exporter_hook(cluster: Any) -> None:
    """When a broker's container stops, the exporter can no longer read its offsets: drop its series
    and report no brokers (store hooks see the kubelet's pod status writes)."""
    if getattr(cluster, "_kafka_exporter_hook", False):
        return
    cluster._kafka_exporter_hook = True

    def hook(verb: str, key: str, old: Any, new: Any) -> None:
        if key != "pods":
            return
        index = cluster.workload.state.get("kafka_exporter")
        obj = new or old
        if not index or not obj:
            return
        k = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        entry = index.get(k)
        if entry is None:
            return
        statuses = ((new or {}).get("status") or {}).get("containerStatuses") or []
        if verb != "delete" and new is not None and any(cs.get("name") == entry["container"] and "running" in
                                                        (cs.get("state") or {}) for cs in statuses):
            return
        index.pop(k)
        gauges = cluster.workload.state["gauges"]
        base = None
        for metric, labels in entry["keys"]:
            lt = tuple(tuple(x) for x in labels)
            gauges.pop((metric, lt), None)
            if metric == "kafka_brokers":
                base = lt
        if base is not None:
            gauges[("kafka_brokers", base)] = 0.0

    cluster.on(hook)
