"""The kube-system processes of a kind cluster besides CoreDNS: the control plane's static pods
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler), kube-proxy and the kindnet CNI
on every node. They run, log their start-up lines and serve their ports; the emulated cluster's
own machinery does their work."""

from __future__ import annotations

from datetime import UTC, datetime

from kubesim.apps.model import AppModel, StartContext, Started, app_model, register_image
from kubesim.runtime import KUBELET_VERSION as KUBERNETES_VERSION  # one version throughout

ETCD_TAG = "3.5.10-0"
KINDNET_TAG = "v20240202-8f1494ea"
NODE_EXPORTER_TAG = "v1.8.2"
METRICS_SERVER_TAG = "v0.7.0"

for _component in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"):
    register_image(f"registry.k8s.io/{_component}", tags=(KUBERNETES_VERSION,), size=30_000_000,
                   executables=(f"/usr/local/bin/{_component}",), shell=False)
register_image("registry.k8s.io/etcd", tags=(ETCD_TAG,), size=57_000_000, executables=("etcd", "etcdctl"), shell=True)
register_image("quay.io/prometheus/node-exporter", tags=(NODE_EXPORTER_TAG,), size=11_000_000,
               executables=("/bin/node_exporter",), shell=False)
register_image("registry.k8s.io/metrics-server/metrics-server", tags=(METRICS_SERVER_TAG,), size=19_000_000,
               executables=("/metrics-server",), shell=False)
register_image("docker.io/kindest/kindnetd", tags=(KINDNET_TAG,), size=26_000_000, executables=("/bin/kindnetd",),
               shell=False)


def _klog(t: float, pid: int, source: str, msg: str, level: str = "I") -> str:
    """klog's header: Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg."""
    d = datetime.fromtimestamp(t, UTC)
    return f"{level}{d.strftime('%m%d %H:%M:%S.%f')}       {pid} {source}] {msg}"


class _KubeSystem(AppModel):
    ports: frozenset[int] = frozenset()
    lines: tuple[tuple[str, str], ...] = ()

    def start(self, ctx: StartContext) -> Started:
        t = ctx.now
        return Started([_klog(t + i * 1e-3, 1, src, msg) for i, (src, msg) in enumerate(self.lines)], set(self.ports),
                       {"kind": self.name}, ready_after=2.0)


@app_model
class KubeAPIServer(_KubeSystem):
    name = "kube-apiserver"
    images = ("registry.k8s.io/kube-apiserver",)
    memory_base = 280 * 2**20
    ports = frozenset({6443})
    lines = (("options.go:222", "external host was not specified, using 172.18.0.2"),
             ("server.go:148", f"Version: {KUBERNETES_VERSION}"),
             ("secure_serving.go:213", "Serving securely on [::]:6443"),
             ("controller.go:624", "quota admission added evaluator for: leases.coordination.k8s.io"))


@app_model
class KubeControllerManager(_KubeSystem):
    name = "kube-controller-manager"
    images = ("registry.k8s.io/kube-controller-manager",)
    memory_base = 60 * 2**20
    ports = frozenset({10257})
    lines = (("serving.go:380", "Generated self-signed cert in-memory"),
             ("controllermanager.go:189", f"\"Starting\" version=\"{KUBERNETES_VERSION}\""),
             ("leaderelection.go:250", "attempting to acquire leader lease kube-system/kube-controller-manager..."),
             ("leaderelection.go:260", "successfully acquired lease kube-system/kube-controller-manager"))


@app_model
class KubeScheduler(_KubeSystem):
    name = "kube-scheduler"
    images = ("registry.k8s.io/kube-scheduler",)
    memory_base = 25 * 2**20
    ports = frozenset({10259})
    lines = (("serving.go:380", "Generated self-signed cert in-memory"),
             ("server.go:154", f"\"Starting Kubernetes Scheduler\" version=\"{KUBERNETES_VERSION}\""),
             ("leaderelection.go:260", "successfully acquired lease kube-system/kube-scheduler"))


@app_model
class KubeProxy(_KubeSystem):
    name = "kube-proxy"
    images = ("registry.k8s.io/kube-proxy",)
    memory_base = 20 * 2**20
    ports = frozenset({10249, 10256})
    lines = (("server_others.go:72", "\"Using iptables proxy\""),
             ("server.go:865", f"\"Version info\" version=\"{KUBERNETES_VERSION}\""),
             ("config.go:188", "\"Starting service config controller\""),
             ("shared_informer.go:318", "Caches are synced for service config"))


@app_model
class MetricsServer(_KubeSystem):
    """metrics-server: what it logs and serves; the emulated API server answers metrics.k8s.io
    from the cluster's cAdvisor series itself (kubesim.api.metrics)."""

    name = "metrics-server"
    images = ("registry.k8s.io/metrics-server/metrics-server",)
    memory_base = 22 * 2**20
    ports = frozenset({10250})
    lines = (("serving.go:374", "Generated self-signed cert (/tmp/apiserver.crt, /tmp/apiserver.key)"),
             ("handler.go:275", "Adding GroupVersion metrics.k8s.io v1beta1 to ResourceManager"),
             ("requestheader_controller.go:169", "Starting RequestHeaderAuthRequestController"),
             ("secure_serving.go:213", "Serving securely on [::]:10250"),
             ("tlsconfig.go:240", "\"Starting DynamicServingCertificateController\""))


@app_model
class Etcd(AppModel):
    name = "etcd"
    images = ("registry.k8s.io/etcd",)
    memory_base = 45 * 2**20

    def start(self, ctx: StartContext) -> Started:
        stamp = datetime.fromtimestamp(ctx.now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lines = [f'{{"level":"info","ts":"{stamp}","caller":"etcdmain/etcd.go:73","msg":"Running: ","args":["etcd"]}}',
                 f'{{"level":"info","ts":"{stamp}","caller":"embed/etcd.go:309","msg":"starting an etcd server",'
                 f'"etcd-version":"3.5.10","data-dir":"/var/lib/etcd"}}',
                 f'{{"level":"info","ts":"{stamp}","caller":"etcdserver/server.go:2062","msg":"published local member to '
                 'cluster through raft","local-member-id":"b8e14bda2255bc24"}']
        return Started(lines, {2379, 2380, 2381}, {"kind": "etcd"}, ready_after=2.0)


@app_model
class Kindnet(AppModel):
    name = "kindnet"
    images = ("docker.io/kindest/kindnetd",)
    memory_base = 12 * 2**20

    def start(self, ctx: StartContext) -> Started:
        node = (ctx.pod.get("spec") or {}).get("nodeName", "")
        return Started(["INFO: kindnetd starting", f"Handling node with IPs: map[{ctx.pod_ip}:{{}}]",
                        f"handling current node {node}"], set(), {"kind": "kindnet"}, ready_after=1.0)


@app_model
class NodeExporter(AppModel):
    """prometheus-node-exporter on the host network: it serves :9100 on the node's own address."""

    name = "node-exporter"
    images = ("quay.io/prometheus/node-exporter",)
    memory_base = 18 * 2**20

    def start(self, ctx: StartContext) -> Started:
        stamp = datetime.fromtimestamp(ctx.now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lines = [f'ts={stamp} caller=node_exporter.go:193 level=info msg="Starting node_exporter" '
                 f'version="(version={NODE_EXPORTER_TAG.lstrip("v")}, branch=HEAD)"',
                 f"ts={stamp} caller=tls_config.go:313 level=info msg=\"Listening on\" address=[0.0.0.0]:9100"]
        return Started(lines, {9100}, {"kind": "node-exporter"}, ready_after=1.0)
