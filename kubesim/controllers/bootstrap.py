"""What a fresh kind cluster holds before anyone deploys: the system namespaces, the `standard`
local-path StorageClass, the `kubernetes` Service, CoreDNS behind kube-dns (10.96.0.10), the
kube-proxy and kindnet DaemonSets, the control plane's static pods (their mirror pods), a CRD per
custom resource type served, and the observability stack's node exporter (the DaemonSet that serves
the `node-exporter` job the emulated Prometheus scrapes, holding host port 9100 on every node), and
metrics-server, which kind leaves out but every cluster that serves metrics.k8s.io, as this one
does for `kubectl top` and the HPA, runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesim.store import Obj
    from kubesim.view import ClusterView

COREFILE = """.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
"""


def bootstrap_cluster(cluster: ClusterView) -> None:
    store = cluster.store
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease", "local-path-storage"):
        store.create("namespaces", {"metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                                    "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    store.create("storageclasses.storage.k8s.io", {
        "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "rancher.io/local-path", "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"})
    store.create("services", {"metadata": {"name": "kubernetes", "namespace": "default",
                                           "labels": {"component": "apiserver", "provider": "kubernetes"}},
                              "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                                                             "targetPort": 6443}], "type": "ClusterIP"}})
    store.create("configmaps", {"metadata": {"name": "coredns", "namespace": "kube-system"}, "data": {"Corefile": COREFILE}})
    labels = {"k8s-app": "kube-dns"}
    store.create("services", {
        "metadata": {"name": "kube-dns", "namespace": "kube-system",
                     "labels": {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"},
                     "annotations": {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}},
        "spec": {"clusterIP": "10.96.0.10", "selector": labels,
                 "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                           {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                           {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153}]}})
    store.create("deployments.apps", {
        "metadata": {"name": "coredns", "namespace": "kube-system", "labels": labels},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "priorityClassName": "system-cluster-critical", "dnsPolicy": "Default",
                     "nodeSelector": {"kubernetes.io/os": "linux"},
                     "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                                     {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
                     "containers": [{"name": "coredns", "image": "registry.k8s.io/coredns/coredns:v1.11.1",
                                     "imagePullPolicy": "IfNotPresent", "args": ["-conf", "/etc/coredns/Corefile"],
                                     "ports": [{"containerPort": 53, "name": "dns", "protocol": "UDP"},
                                               {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
                                               {"containerPort": 9153, "name": "metrics", "protocol": "TCP"}],
                                     "resources": {"limits": {"memory": "170Mi"}, "requests": {"cpu": "100m", "memory": "70Mi"}},
                                     "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": True}]}],
                     "volumes": [{"name": "config-volume", "configMap": {"name": "coredns",
                                                                         "items": [{"key": "Corefile", "path": "Corefile"}]}}]}}}})
    # kind preloads the system images on every node
    for node in cluster.nodes:
        cluster.kubelet.state["images"][node.name] = ["registry.k8s.io/coredns/coredns:v1.11.1"]
    create_node_agents(cluster)
    create_control_plane(cluster)
    create_custom_resource_definitions(cluster)
    create_node_exporter(cluster)
    create_metrics_server(cluster)


# Who installs each custom group on a real cluster (the CRDs' labels say so).
_CRD_OWNERS = {"chaos-mesh.org": {"app.kubernetes.io/name": "chaos-mesh", "app.kubernetes.io/part-of": "chaos-mesh"},
               "pingcap.com": {"app.kubernetes.io/name": "tidb-operator"}}


def create_custom_resource_definitions(cluster: ClusterView) -> None:
    """A CustomResourceDefinition per custom resource type served (Chaos Mesh, the TiDB
    operator), Established, as `kubectl get crd` lists them on a cluster with those installed."""
    from kubesim.resources import CUSTOM_GROUPS

    store, stamp = cluster.store, cluster.clock.rfc3339()
    for rt in sorted((t for t in store.types.values() if t.group in CUSTOM_GROUPS), key=lambda t: t.key):
        names = {"kind": rt.kind, "listKind": f"{rt.kind}List", "plural": rt.plural, "singular": rt.singular or rt.kind.lower(),
                 **({"shortNames": list(rt.short_names)} if rt.short_names else {}),
                 **({"categories": list(rt.categories)} if rt.categories else {})}
        store.create("customresourcedefinitions.apiextensions.k8s.io", {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": rt.key, "labels": dict(_CRD_OWNERS.get(rt.group, {})),
                         "annotations": {"controller-gen.kubebuilder.io/version": "v0.11.1"}},
            "spec": {"group": rt.group, "names": names, "scope": "Namespaced" if rt.namespaced else "Cluster",
                     "versions": [{"name": rt.version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object", "description": f"{rt.kind} is the Schema for the {rt.plural} API",
                                       "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                                      "metadata": {"type": "object"},
                                                      "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                                      "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}},
                                   **({"subresources": {"status": {}}} if "status" in rt.subresources else {})}],
                     "conversion": {"strategy": "None"}},
            "status": {"acceptedNames": names, "storedVersions": [rt.version], "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": stamp},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": stamp}]}})


_TOLERATE_ALL = [{"operator": "Exists"}]


def create_node_agents(cluster: ClusterView) -> None:
    """kube-proxy and kindnet, the DaemonSets kind runs on every node (both tolerate every taint)."""
    from kubesim.apps.kubesystem import KINDNET_TAG, KUBERNETES_VERSION

    store = cluster.store
    for sa in ("kube-proxy", "kindnet"):
        store.create("serviceaccounts", {"metadata": {"name": sa, "namespace": "kube-system"}}, namespace="kube-system")
    store.create("configmaps", {"metadata": {"name": "kube-proxy", "namespace": "kube-system", "labels": {"app": "kube-proxy"}},
                                "data": {"config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                                                        "clusterCIDR: 10.244.0.0/16\nmode: iptables\n",
                                         "kubeconfig.conf": "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n"
                                                            "    server: https://sim-control-plane:6443\n  name: default\n"}},
                 namespace="kube-system")

    def daemonset(name: str, labels: dict[str, str], container: dict, **spec: object) -> None:
        store.create("daemonsets.apps", {
            "metadata": {"name": name, "namespace": "kube-system", "labels": dict(labels)},
            "spec": {"selector": {"matchLabels": labels},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                     "template": {"metadata": {"labels": dict(labels)}, "spec": {
                         "serviceAccountName": name, "hostNetwork": True, "tolerations": _TOLERATE_ALL,
                         "nodeSelector": {"kubernetes.io/os": "linux"}, "priorityClassName": "system-node-critical",
                         "containers": [{"imagePullPolicy": "IfNotPresent", **container}], **spec}}}},
            namespace="kube-system")

    daemonset("kube-proxy", {"k8s-app": "kube-proxy"}, {
        "name": "kube-proxy", "image": f"registry.k8s.io/kube-proxy:{KUBERNETES_VERSION}",
        "command": ["/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf",
                    "--hostname-override=$(NODE_NAME)"],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
        "securityContext": {"privileged": True},
        "volumeMounts": [{"name": "kube-proxy", "mountPath": "/var/lib/kube-proxy"}]},
        volumes=[{"name": "kube-proxy", "configMap": {"name": "kube-proxy"}}])
    daemonset("kindnet", {"app": "kindnet", "k8s-app": "kindnet", "tier": "node"}, {
        "name": "kindnet-cni", "image": f"docker.io/kindest/kindnetd:{KINDNET_TAG}",
        "env": [{"name": "HOST_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.hostIP"}}},
                {"name": "POD_SUBNET", "value": "10.244.0.0/16"}],
        # kind's kindnet requests (and limits) 100m and 50Mi; left out: the catalog's workloads are
        # placed on nodes without them (that request on every node moved a train-ticket pod).
        "securityContext": {"capabilities": {"add": ["NET_RAW", "NET_ADMIN"]}, "privileged": False}})
    for node in cluster.nodes:
        cluster.kubelet.state["images"].setdefault(node.name, []).extend(
            [f"registry.k8s.io/kube-proxy:{KUBERNETES_VERSION}", f"docker.io/kindest/kindnetd:{KINDNET_TAG}"])


def create_metrics_server(cluster: ClusterView) -> None:
    """metrics-server as its release manifest (v0.7.0 components.yaml) installs it, with the
    --kubelet-insecure-tls a kind cluster needs: the Deployment and Service behind the
    v1beta1.metrics.k8s.io APIService that `kubectl top` and the HPA controller read."""
    from kubesim.apps.kubesystem import METRICS_SERVER_TAG

    store, ns = cluster.store, "kube-system"
    labels = {"k8s-app": "metrics-server"}
    store.create("serviceaccounts", {"metadata": {"name": "metrics-server", "namespace": ns, "labels": dict(labels)}},
                 namespace=ns)
    store.create("services", {
        "metadata": {"name": "metrics-server", "namespace": ns, "labels": dict(labels)},
        "spec": {"selector": dict(labels), "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                                       "targetPort": "https"}]}}, namespace=ns)
    def probe(path: str, **extra: int) -> dict[str, Any]:
        return {"failureThreshold": 3, "periodSeconds": 10, **extra,
                "httpGet": {"path": path, "port": "https", "scheme": "HTTPS"}}

    store.create("deployments.apps", {
        "metadata": {"name": "metrics-server", "namespace": ns, "labels": dict(labels)},
        "spec": {"selector": {"matchLabels": dict(labels)}, "strategy": {"rollingUpdate": {"maxUnavailable": 0}},
                 "template": {"metadata": {"labels": dict(labels)}, "spec": {
                     "serviceAccountName": "metrics-server", "priorityClassName": "system-cluster-critical",
                     # on the control-plane node (a selector and toleration the manifest lacks): the
                     # workers hold only what the catalog's applications were placed against (on a
                     # worker it changed which of two pods won a volume attach)
                     "nodeSelector": {"kubernetes.io/os": "linux", "node-role.kubernetes.io/control-plane": ""},
                     "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
                     "containers": [{
                         "name": "metrics-server", "image": f"registry.k8s.io/metrics-server/metrics-server:{METRICS_SERVER_TAG}",
                         "imagePullPolicy": "IfNotPresent",
                         "args": ["--cert-dir=/tmp", "--secure-port=10250",
                                  "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
                                  "--kubelet-use-node-status-port", "--metric-resolution=15s", "--kubelet-insecure-tls"],
                         "ports": [{"containerPort": 10250, "name": "https", "protocol": "TCP"}],
                         "livenessProbe": probe("/livez"),
                         "readinessProbe": probe("/readyz", initialDelaySeconds=20),
                         # the manifest requests 100m and 200Mi; left out, as kindnet's are: the
                         # catalog's workloads are placed on nodes without them
                         "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                             "runAsNonRoot": True, "runAsUser": 1000,
                                             "capabilities": {"drop": ["ALL"]},
                                             "seccompProfile": {"type": "RuntimeDefault"}},
                         "volumeMounts": [{"mountPath": "/tmp", "name": "tmp-dir"}]}],
                     "volumes": [{"name": "tmp-dir", "emptyDir": {}}]}}}}, namespace=ns)
    _rolled_out(cluster, store.get("deployments.apps", ns, "metrics-server"))


def _rolled_out(cluster: ClusterView, deployment: Obj) -> None:
    """The ReplicaSet and pod the deployment controller would make, written here with names from
    hashes: an add-on installed with the cluster takes nothing from the controllers' seeded random
    source, so the pods created after it are named as they were before it existed."""
    import copy
    import hashlib

    from kubesim.controllers.common import (
        SUFFIX_ALPHABET,
        normalized,
        owner_ref,
        pod_from_template,
        template_hash,
    )

    store, meta, spec = cluster.store, deployment["metadata"], deployment["spec"]
    phash = template_hash(normalized(spec["template"]))
    template = copy.deepcopy(spec["template"])
    template["metadata"]["labels"]["pod-template-hash"] = phash
    selector = copy.deepcopy(spec["selector"])
    selector["matchLabels"]["pod-template-hash"] = phash
    replicas = int(spec.get("replicas", 1))
    rs = store.create("replicasets.apps", {
        "metadata": {"name": f"{meta['name']}-{phash}", "namespace": meta["namespace"],
                     "labels": dict(template["metadata"]["labels"]), "ownerReferences": [owner_ref(deployment)],
                     "annotations": {"deployment.kubernetes.io/revision": "1",
                                     "deployment.kubernetes.io/desired-replicas": str(replicas),
                                     "deployment.kubernetes.io/max-replicas": str(replicas + 1)}},
        "spec": {"replicas": replicas, "selector": selector, "template": template}}, namespace=meta["namespace"])
    for i in range(replicas):
        digest = int(hashlib.sha256(f"{rs['metadata']['name']}/{i}".encode()).hexdigest()[:12], 16)
        suffix = "".join(SUFFIX_ALPHABET[(digest >> (5 * k)) % len(SUFFIX_ALPHABET)] for k in range(5))
        store.create("pods", pod_from_template(template, f"{rs['metadata']['name']}-{suffix}", meta["namespace"], rs),
                     namespace=meta["namespace"])


NODE_EXPORTER_PORT = 9100


def create_node_exporter(cluster: ClusterView) -> None:
    """The observability stack's node exporter (the prometheus chart's prometheus-node-exporter
    sub-chart, release `prometheus` in the stack's namespace, as the farm and SREGym install it on
    a real cluster) as the chart renders its DaemonSet: host
    network, host PID, port 9100 declared as a host port (so the scheduler counts it: a pod that
    asks for host port 9100 fits no node this runs on), tolerating NoSchedule taints (it runs on
    the control plane too)."""
    from core.namespaces import STACK_NAMESPACE
    from kubesim.apps.kubesystem import NODE_EXPORTER_TAG

    store = cluster.store
    ns = STACK_NAMESPACE
    store.create("namespaces", {"metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    name = "prometheus-prometheus-node-exporter"
    labels = {"app.kubernetes.io/instance": "prometheus", "app.kubernetes.io/name": "prometheus-node-exporter"}
    store.create("serviceaccounts", {"metadata": {"name": name, "namespace": ns, "labels": dict(labels)}}, namespace=ns)
    store.create("services", {
        "metadata": {"name": name, "namespace": ns, "labels": {**labels, "jobLabel": "node-exporter"},
                     "annotations": {"prometheus.io/scrape": "true"}},
        "spec": {"type": "ClusterIP", "selector": dict(labels),
                 "ports": [{"name": "http-metrics", "port": NODE_EXPORTER_PORT, "protocol": "TCP",
                            "targetPort": NODE_EXPORTER_PORT}]}}, namespace=ns)
    probe = {"httpGet": {"path": "/", "port": NODE_EXPORTER_PORT, "scheme": "HTTP"}, "failureThreshold": 3,
             "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1}
    store.create("daemonsets.apps", {
        "metadata": {"name": name, "namespace": ns, "labels": {**labels, "jobLabel": "node-exporter"}},
        "spec": {"selector": {"matchLabels": labels},
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                 "template": {"metadata": {"labels": {**labels, "jobLabel": "node-exporter"}}, "spec": {
                     "serviceAccountName": name, "hostNetwork": True, "hostPID": True,
                     # As the farm installs it: node-critical, so node-pressure eviction passes it over.
                     "priorityClassName": "system-node-critical",
                     "nodeSelector": {"kubernetes.io/os": "linux"},
                     "tolerations": [{"effect": "NoSchedule", "operator": "Exists"}],
                     "securityContext": {"fsGroup": 65534, "runAsGroup": 65534, "runAsNonRoot": True, "runAsUser": 65534},
                     "containers": [{
                         "name": "node-exporter", "image": f"quay.io/prometheus/node-exporter:{NODE_EXPORTER_TAG}",
                         "imagePullPolicy": "IfNotPresent",
                         "args": ["--path.procfs=/host/proc", "--path.sysfs=/host/sys", "--path.rootfs=/host/root",
                                  f"--web.listen-address=[$(HOST_IP)]:{NODE_EXPORTER_PORT}"],
                         "env": [{"name": "HOST_IP", "value": "0.0.0.0"}],
                         "ports": [{"name": "http-metrics", "containerPort": NODE_EXPORTER_PORT,
                                    "hostPort": NODE_EXPORTER_PORT, "protocol": "TCP"}],
                         "livenessProbe": probe, "readinessProbe": probe,
                         "securityContext": {"readOnlyRootFilesystem": True}}]}}}},
        namespace=ns)
    for node in cluster.nodes:
        cluster.kubelet.state["images"].setdefault(node.name, []).append(f"quay.io/prometheus/node-exporter:{NODE_EXPORTER_TAG}")


def create_control_plane(cluster: ClusterView) -> None:
    """The control plane node's static pods, as the kubelet mirrors them into the API (config
    source file, owned by the Node): etcd, kube-apiserver, kube-controller-manager, kube-scheduler."""
    import hashlib

    from kubesim.apps.kubesystem import ETCD_TAG, KUBERNETES_VERSION

    store = cluster.store
    node = next(n for n in cluster.nodes if n.control_plane)
    node_obj = store.get("nodes", "", node.name)
    ip = node.ip
    components = {
        "etcd": (f"registry.k8s.io/etcd:{ETCD_TAG}", ["etcd", f"--advertise-client-urls=https://{ip}:2379",
                                                      "--data-dir=/var/lib/etcd", f"--name={node.name}"],
                 {"cpu": "100m", "memory": "100Mi"}),
        "kube-apiserver": (f"registry.k8s.io/kube-apiserver:{KUBERNETES_VERSION}",
                           ["kube-apiserver", f"--advertise-address={ip}", "--authorization-mode=Node,RBAC",
                            "--etcd-servers=https://127.0.0.1:2379", "--secure-port=6443",
                            "--service-cluster-ip-range=10.96.0.0/16"], {"cpu": "250m"}),
        "kube-controller-manager": (f"registry.k8s.io/kube-controller-manager:{KUBERNETES_VERSION}",
                                    ["kube-controller-manager", "--allocate-node-cidrs=true",
                                     "--cluster-cidr=10.244.0.0/16", "--leader-elect=true"], {"cpu": "200m"}),
        "kube-scheduler": (f"registry.k8s.io/kube-scheduler:{KUBERNETES_VERSION}",
                           ["kube-scheduler", "--leader-elect=true"], {"cpu": "100m"}),
    }
    for component, (image, command, requests) in components.items():
        digest = hashlib.sha256(f"{component}/{node.name}".encode()).hexdigest()[:32]
        store.create("pods", {
            "metadata": {"name": f"{component}-{node.name}", "namespace": "kube-system",
                         "labels": {"component": component, "tier": "control-plane"},
                         "annotations": {"kubernetes.io/config.hash": digest, "kubernetes.io/config.mirror": digest,
                                         "kubernetes.io/config.seen": cluster.clock.rfc3339(), "kubernetes.io/config.source": "file"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node.name,
                                              "uid": node_obj["metadata"]["uid"], "controller": True}]},
            "spec": {"nodeName": node.name, "hostNetwork": True, "priorityClassName": "system-node-critical",
                     "priority": 2000001000, "tolerations": [{"operator": "Exists", "effect": "NoExecute"}],
                     "containers": [{"name": component, "image": image, "imagePullPolicy": "IfNotPresent",
                                     "command": command, "resources": {"requests": requests}}]}},
            namespace="kube-system")
        cluster.kubelet.state["images"].setdefault(node.name, []).append(image)
