"""What a fresh kind cluster holds before anyone deploys: the system namespaces, the `standard`
local-path StorageClass, the `kubernetes` Service, and CoreDNS behind kube-dns (10.96.0.10)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusters.sim.cluster import SimCluster

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


def bootstrap_cluster(cluster: SimCluster) -> None:
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
