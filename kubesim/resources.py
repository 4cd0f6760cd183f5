"""Every REST resource the emulated cluster serves, with the real plural, kind, group, short names,
sub-resources and categories, so discovery looks like a real cluster's to kubectl and the client."""

from __future__ import annotations

from kubesim.store import ResourceType, Store

ALL = ("all",)


def _core(plural: str, kind: str, *, namespaced: bool = True, short: tuple[str, ...] = (),
          sub: tuple[str, ...] = (), singular: str = "", categories: tuple[str, ...] = ()) -> ResourceType:
    return ResourceType(plural, kind, "", "v1", namespaced, short, sub, singular or kind.lower(), categories)


def _grp(group: str, version: str, plural: str, kind: str, *, namespaced: bool = True,
         short: tuple[str, ...] = (), sub: tuple[str, ...] = (), categories: tuple[str, ...] = ()) -> ResourceType:
    return ResourceType(plural, kind, group, version, namespaced, short, sub, kind.lower(), categories)


_CHAOS = ("chaos-mesh",)

RESOURCE_TYPES: tuple[ResourceType, ...] = (
    # core/v1
    _core("namespaces", "Namespace", namespaced=False, short=("ns",), sub=("status", "finalize")),
    _core("pods", "Pod", short=("po",), sub=("log", "status", "eviction", "binding", "exec", "portforward", "attach", "ephemeralcontainers"), categories=ALL),
    _core("services", "Service", short=("svc",), sub=("status",), categories=ALL),
    _core("endpoints", "Endpoints", short=("ep",), singular="endpoints"),
    _core("configmaps", "ConfigMap", short=("cm",)),
    _core("secrets", "Secret"),
    _core("events", "Event", short=("ev",)),
    _core("nodes", "Node", namespaced=False, short=("no",), sub=("status",)),
    _core("resourcequotas", "ResourceQuota", short=("quota",), sub=("status",)),
    _core("limitranges", "LimitRange", short=("limits",)),
    _core("persistentvolumes", "PersistentVolume", namespaced=False, short=("pv",), sub=("status",)),
    _core("persistentvolumeclaims", "PersistentVolumeClaim", short=("pvc",), sub=("status",)),
    _core("serviceaccounts", "ServiceAccount", short=("sa",), sub=("token",)),
    _core("replicationcontrollers", "ReplicationController", short=("rc",), sub=("scale", "status"),
          categories=ALL),
    # apps/v1
    _grp("apps", "v1", "deployments", "Deployment", short=("deploy",), sub=("scale", "status"), categories=ALL),
    _grp("apps", "v1", "replicasets", "ReplicaSet", short=("rs",), sub=("scale", "status"), categories=ALL),
    _grp("apps", "v1", "statefulsets", "StatefulSet", short=("sts",), sub=("scale", "status"), categories=ALL),
    _grp("apps", "v1", "daemonsets", "DaemonSet", short=("ds",), sub=("status",), categories=ALL),
    _grp("apps", "v1", "controllerrevisions", "ControllerRevision"),
    # batch/v1
    _grp("batch", "v1", "jobs", "Job", sub=("status",), categories=ALL),
    _grp("batch", "v1", "cronjobs", "CronJob", short=("cj",), sub=("status",), categories=ALL),
    # autoscaling, policy
    _grp("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", short=("hpa",),
         sub=("status",), categories=ALL),
    _grp("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short=("pdb",), sub=("status",)),
    # networking.k8s.io/v1
    _grp("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short=("netpol",)),
    _grp("networking.k8s.io", "v1", "ingresses", "Ingress", short=("ing",), sub=("status",)),
    _grp("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
    # rbac.authorization.k8s.io/v1
    _grp("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _grp("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _grp("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    _grp("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    # scheduling, storage, admission, coordination
    _grp("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False, short=("pc",)),
    _grp("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False, short=("sc",)),
    # stored and listed as kube-apiserver serves them (no controller acts on them here)
    _grp("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity"),
    _grp("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", namespaced=False,
         short=("csr",), sub=("status",)),
    _grp("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
         "ValidatingWebhookConfiguration", namespaced=False),
    _grp("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
         "MutatingWebhookConfiguration", namespaced=False),
    _grp("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
         namespaced=False, short=("crd", "crds"), sub=("status",)),
    _grp("apiregistration.k8s.io", "v1", "apiservices", "APIService", namespaced=False, sub=("status",),
         categories=("api-extensions",)),
    # Chaos Mesh and an operator-managed database (custom resources)
    _grp("chaos-mesh.org", "v1alpha1", "podchaos", "PodChaos", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "networkchaos", "NetworkChaos", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "iochaos", "IOChaos", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "stresschaos", "StressChaos", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "timechaos", "TimeChaos", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "kernelchaos", "KernelChaos", sub=("status",), categories=_CHAOS),
    # The rest of the Chaos Mesh 2.x kinds: served (stored) as on a real install; the farm's chaos
    # controller acts on the six above.
    _grp("chaos-mesh.org", "v1alpha1", "httpchaos", "HTTPChaos", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "dnschaos", "DNSChaos", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "jvmchaos", "JVMChaos", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "awschaos", "AWSChaos", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "gcpchaos", "GCPChaos", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "azurechaos", "AzureChaos", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "blockchaos", "BlockChaos", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "physicalmachinechaos", "PhysicalMachineChaos", sub=("status",),
         categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "physicalmachines", "PhysicalMachine"),
    _grp("chaos-mesh.org", "v1alpha1", "schedules", "Schedule", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "workflows", "Workflow", sub=("status",), categories=_CHAOS),
    _grp("chaos-mesh.org", "v1alpha1", "workflownodes", "WorkflowNode", sub=("status",)),
    _grp("chaos-mesh.org", "v1alpha1", "statuschecks", "StatusCheck", sub=("status",)),
    _grp("chaos-mesh.org", "v1alpha1", "remoteclusters", "RemoteCluster", namespaced=False, sub=("status",)),
    _grp("chaos-mesh.org", "v1alpha1", "podhttpchaos", "PodHttpChaos", sub=("status",)),
    _grp("chaos-mesh.org", "v1alpha1", "podiochaos", "PodIOChaos", sub=("status",)),
    _grp("chaos-mesh.org", "v1alpha1", "podnetworkchaos", "PodNetworkChaos", sub=("status",)),
    _grp("pingcap.com", "v1alpha1", "tidbclusters", "TidbCluster", short=("tc",), sub=("status",)),
)

# Groups served by CustomResourceDefinitions on a real cluster: strategic merge patch is refused there.
CUSTOM_GROUPS = frozenset({"chaos-mesh.org", "pingcap.com"})

# Virtual resources answered by the API server itself, never stored.
REVIEW_TYPES: tuple[ResourceType, ...] = (
    _grp("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", namespaced=False),
    _grp("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", namespaced=False),
    _grp("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", namespaced=False),  # kubectl auth whoami
    _grp("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False),  # webhook authn, kr8s whoami
)
# Node leases (kube-node-lease) are a view of the nodes' heartbeats.
NODE_LEASES = _grp("coordination.k8s.io", "v1", "leases", "Lease")
# events.k8s.io/v1 Events are a view of the core/v1 "events" bucket.
EVENTS_V1 = _grp("events.k8s.io", "v1", "events", "Event")
METRICS_TYPES: tuple[ResourceType, ...] = (
    _grp("metrics.k8s.io", "v1beta1", "pods", "PodMetrics"),
    _grp("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", namespaced=False),
)


def register_all(store: Store) -> None:
    """Register every resource type on `store` (idempotent)."""
    for rt in RESOURCE_TYPES:
        if rt.key not in store.types:
            store.register(rt)


def lookup(store: Store, group: str, version: str, plural: str) -> ResourceType | None:
    rt = store.types.get(f"{plural}.{group}" if group else plural)
    if rt is None or rt.version != version:
        return None
    return rt
