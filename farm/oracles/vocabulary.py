"""The words of fault kinds, and which kinds describe each fault type of the catalog: how the
offline judge tells a mechanism in other words ('the CPUs run slow' for 'cores throttled to 15%')
from a wrong one ('OOMKilled' for GC thrash), and a fault-type word inside another type's
description ('admission queue') from a claim of that type.

    kinds_in(text) -> {kind, ...}            # kinds whose words the text uses
    FAULT_TYPES[fault_type] -> FaultType     # every catalog fault type has one (tested)

A kind is a fine-grained fault concept; its family groups kinds for counting how many different
faults a text names. A fault type has `core` kinds (a mechanism stated without one of them is
another mechanism, unless it gives the changed value itself) and `compatible` kinds (other words
for the same fault: a wrong memory limit is a misconfiguration too). Words match at a word start
(prefixes: 'throttl' matches 'throttled'); a word ending in '$' matches whole. Hyphens count as
spaces ('file-descriptor' is 'file descriptor').
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache


@dataclass(frozen=True)
class Kind:
    family: str
    words: tuple[str, ...]


KINDS: dict[str, Kind] = {
    "config": Kind("misconfiguration", (
        "misconfig", "wrong value", "incorrect value", "typo", "wrong port", "incorrect port", "port mismatch",
        "wrong env", "environment variable", "env var", "configmap", "config map", "wrong image", "bad image",
        "image tag", "nonexistent tag", "imagepullbackoff", "errimagepull", "wrong selector", "selector",
        "targetport", "target port", "wrong setting", "invalid value", "misspel", "configuration", "config$",
        "liveness probe", "readiness probe", "startup probe", "probe", "replicas", "scaled to zero", "scaled down to",
        "wrong command", "wrong argument", "wrong address", "wrong host", "mistyped", "wrong name", "wrong key",
        "wrong path", "wrong mount", "wrong tag", "misset", "port conflict", "already in use", "sidecar")),
    "missing": Kind("misconfiguration", (
        "deleted", "does not exist", "doesn't exist", "no longer exist", "not found", "is gone", "missing",
        "nxdomain", "does not resolve", "missing object", "missing service", "missing config")),
    "memory": Kind("resource-limit", (
        "oom", "out of memory", "memory limit", "memory leak", "insufficient memory", "memory=", "memory exhaust",
        "runs out of memory", "ran out of memory")),
    "cpu-limit": Kind("resource-limit", (
        "cpu limit", "cpu throttl", "cfs", "cpu quota", "insufficient cpu", "cpu=", "cpu bound", "cpu starv",
        "throttl", "millicore", "cpu request", "cpu cap")),
    "cpu-speed": Kind("resource-limit", (
        "cpus run slow", "cpu runs slow", "cores run", "cpus run", "slow cpu", "slow core", "cpu speed",
        "of their speed", "of its speed", "fraction of their clock", "fraction of its clock", "processors run",
        "processors are running", "processors are slow", "of normal speed", "clock speed", "cpu frequency", "frequency", "thermal",
        "underclock", "cpu throttl", "throttl", "cpu slow", "cpus are slow", "cores are slow")),
    "requests": Kind("resource-limit", (
        "cpu request", "memory request", "resource request", "requests too", "requests only", "limitrange",
        "limit range", "requests 1m", "request of 1m")),
    "contention": Kind("resource-limit", (
        "stress", "noisy neighbo", "cpu burner", "burner", "contention", "cpu hog", "starved by", "competing for cpu",
        "cpu hungry", "stressor",
        # a database's locks: sessions wait on another's, as they wait on another's CPU
        "lock contention", "table lock", "lock table", "accessexclusivelock", "access exclusive", "holds the lock",
        "holds a lock", "waiting on a lock", "waits on a lock", "blocked by a lock", "queue behind the lock",
        "pg_locks")),
    "network": Kind("network", (
        "packet loss", "network partition", "partition", "network delay", "network latency", "netem", "dns",
        "network policy", "networkpolicy", "dropped packets", "drops packets", "bandwidth", "networkchaos",
        "packet", "ingress", "egress", "firewall", "network connectivity", "network issue", "network problem",
        "network fault", "latency injected", "injected latency", "tc qdisc")),
    "nic": Kind("network", (
        "nic$", "nics$", "network card", "network interface", "link speed", "link negotiat", "negotiated down",
        "retransmi", "corrupts packets", "corrupted packets", "packet corruption", "duplex", "physical link",
        "interface errors")),
    "disk-io": Kind("disk", (
        "disk", "i/o error", "io error", "eio", "bad sector", "sector", "filesystem", "storage", "read error",
        "write error", "iochaos", "drive$", "drives$", "ssd", "nvme", "block device", "dying disk", "i/o latency", "io latency", "slow i/o", "i/o delay", "io delay", "i/o is",
        "i/o on", "i/o takes", "slow disk", "iops", "iowait", "io wait", "i/o wait", "blk update request")),
    "disk-full": Kind("disk", (
        "disk full", "disk is full", "full disk", "no space", "enospc", "diskpressure", "disk pressure",
        "out of disk", "fills the disk", "filled the disk", "filled up", "disk filled", "space left")),
    "corruption": Kind("corruption", (
        "corrupt", "checksum", "random bytes", "bit flip", "bitflip", "garbage data", "torn write", "silent data")),
    "code-bug": Kind("code-bug", (
        "bug$", "bugs$", "bug in", "code change", "regression", "null pointer", "nil pointer", "logic error", "buggy",
        "faulty code", "new release", "index out of range", "off by one", "bad build", "broken build",
        "faulty build", "code defect", "code path", "software defect", "out of bounds")),
    "credentials": Kind("credentials", (
        "password", "credential", "authentication fail", "authentication error", "failed authentication",
        "authentication failed", "auth fail", "auth error", "bad login", "unauthorized", "access denied", "login fail",
        "wrong user", "user was dropped", "user admin was dropped", "secret rotated", "rotated")),
    "permissions": Kind("credentials", (
        "rbac", "forbidden", "403", "permission", "role$", "roles$", "rolebinding", "role binding", "not allowed to",
        "service account", "serviceaccount", "clusterrole", "cannot list", "cannot get", "authoriz")),
    "certificate": Kind("credentials", (
        "certificate", "cert$", "certs$", "x509", "tls", "notafter", "not after")),
    "node-down": Kind("node", (
        "node failure", "node down", "node is down", "node died", "node dead", "notready$", "node not ready", "node is not ready", "node crash",
        "node lost", "node unreachable", "powered off", "node failed", "node went down", "runtime stopped",
        "kubelet stopped", "eviction", "evicts", "evicting", "node outage", "lost the node", "node went away")),
    "kubelet": Kind("node", (
        "kubelet", "eviction threshold", "evictionhard", "eviction hard", "memory pressure", "memorypressure",
        "eviction", "evicts", "evicting")),
    "kernel": Kind("node", (
        "kernel", "slab", "page allocation", "allocation fail", "ext4", "hardware", "firmware", "dmesg")),
    "clock": Kind("clock", (
        "clock skew", "clock is", "clock drift", "system clock", "node clock", "node's clock", "clock behind",
        "clock ahead", "clocks", "time skew", "time drift", "ntp", "timechaos", "timestamp", "system time", "wall time",
        "hours behind", "hours ahead", "years ahead", "years behind", "time is off", "wrong time", "time offset",
        "skew")),
    "flag": Kind("feature-flag", (
        "feature flag", "flagd", "toggle", "defaultvariant", "default variant", "variant", "feature switch",
        "flag", "switch")),
    "fd": Kind("exhaustion", (
        "file descriptor", "too many open files", "emfile", "file max", "nofile", "fd limit", "fd exhaust",
        "open files", "fds$", "ulimit", "fd table", "file handle", "fd$", "open file limit")),
    "pid": Kind("exhaustion", (
        "pid", "fork", "thread creation", "create threads", "create new threads", "create native thread",
        "cannot create thread", "spawn threads", "start worker threads", "start threads", "eagain",
        "resource temporarily unavailable", "process limit", "process table", "too many processes")),
    "gc": Kind("gc", (
        "gc$", "gc pause", "gc cycle", "garbage collect", "gomemlimit", "collector", "heap", "thrash", "gogc",
        "memory limit soft", "soft limit")),
    "scheduling": Kind("scheduling", (
        "unschedulable", "cannot be scheduled", "can't be scheduled", "failedscheduling", "taint", "affinity",
        "nodeselector", "node selector", "toleration", "podantiaffinity", "antiaffinity", "nodeaffinity",
        "podaffinity", "no node match", "no node is available", "no nodes available", "no node available", "no node carries",
        "no node satisf", "no node has the", "no node in", "didn't match", "scheduler", "unschedul", "scheduling fail", "failed to schedule",
        "could not be scheduled", "cannot schedule", "can't schedule", "not be scheduled", "fit on any node")),
    "admission": Kind("admission", (
        "admission webhook", "validating webhook", "validatingwebhook", "mutating webhook", "webhook",
        "failurepolicy", "failure policy", "admission controller", "admission control", "failed calling webhook",
        "podsecurity", "pod security", "pod-security", "security standard", "psa")),
    "quota": Kind("quota", (
        "resourcequota", "resource quota", "exceeded quota", "quota exceeded", "pod quota", "namespace quota",
        "quota caps", "quota of", "quota on pods", "quota limits", "failedcreate", "quota compute")),
    "overload": Kind("overload", (
        "retry storm", "retries", "retry", "retried", "metastable", "overload", "thundering herd", "load spike",
        "traffic spike", "saturat", "connection pool", "queue", "backlog", "spike", "amplif", "too much load",
        "cannot keep up", "can't keep up", "more than it serves", "never drains", "doesn't drain", "does not drain")),
    "state-loss": Kind("state-loss", (
        "lost state", "state lost", "state is lost", "state was lost", "in memory", "in-memory", "came back empty", "empty catalog", "empty service catalog",
        "catalog is empty", "lost its state", "lost its catalog", "lost its registrations",
        "lost all registrations", "lost every registration", "registration", "re register", "reregister",
        "deregister", "wiped", "data loss", "lost data", "restarted empty", "ephemeral", "dev mode", "dev agent",
        "forgot", "no longer knows", "not re registered", "never re registered")),
    "pod-failure": Kind("node", (
        "pause container", "pause image", "pod failure", "podchaos", "pod chaos", "not running the server",
        "replaced by pause", "no process listening", "nothing listening")),
}


@dataclass(frozen=True)
class FaultType:
    """A catalog fault type in kinds: `core` kinds identify its mechanism, `compatible` ones
    describe it in other words."""

    core: frozenset[str]
    compatible: frozenset[str] = field(default_factory=frozenset)
    required: bool = True  # False: a wrong value anywhere, whose own words and value name the mechanism

    @property
    def allowed(self) -> frozenset[str]:
        return self.core | self.compatible


def _ft(core: str, compatible: str = "") -> FaultType:
    return FaultType(frozenset(core.split()), frozenset(compatible.split()))


_CONFIGISH = "config missing network credentials permissions certificate flag scheduling quota admission overload"
FAULT_TYPES: dict[str, FaultType] = {
    "misconfiguration": FaultType(frozenset({"config", "missing"}), frozenset(_CONFIGISH.split()), required=False),
    "operator-misconfiguration": FaultType(frozenset({"config", "missing"}),
                                           frozenset((_CONFIGISH + " disk-io requests").split()), required=False),
    "missing-object": _ft("missing", "config network"),
    "feature-flag": FaultType(frozenset({"flag", "config"}), frozenset({"code-bug"}), required=False),
    "code-bug": _ft("code-bug", "config"),
    "credentials": _ft("credentials", "config permissions missing"),
    "stale-credentials": _ft("credentials", "config permissions"),
    "permissions": _ft("permissions", "config credentials missing"),
    "certificate": _ft("certificate", "config credentials admission"),
    "admission": _ft("admission", "config network certificate"),
    "quota": _ft("quota", "config requests permissions missing"),
    "scheduling": _ft("scheduling", "config requests cpu-limit memory missing"),
    "resource-limit": _ft("memory cpu-limit requests", "config scheduling overload quota missing"),
    "resource-requests": _ft("requests cpu-limit", "config scheduling memory missing"),
    "resource-contention": _ft("contention", "cpu-limit memory cpu-speed overload"),
    "cpu-throttling": _ft("cpu-speed", "cpu-limit contention kernel"),
    "gc-thrash": _ft("gc", "memory cpu-limit overload"),
    "queueing": _ft("overload", "config cpu-limit"),
    "retry-storm": _ft("overload", "config network"),
    "state-loss": _ft("state-loss", "config missing"),
    "network": _ft("network", "config nic"),
    "network-hardware": _ft("nic network", "kernel"),
    "disk-io": _ft("disk-io", "kernel corruption"),
    "disk-full": _ft("disk-full", "disk-io kubelet"),
    "data-corruption": _ft("corruption", "disk-io kernel"),
    "kernel": _ft("kernel", "disk-io memory"),
    "fd-exhaustion": _ft("fd", "kernel config"),
    "pid-exhaustion": _ft("pid", "kernel config memory"),
    "clock-skew": _ft("clock", "kernel certificate"),
    "node-failure": _ft("node-down", "kubelet kernel"),
    "kubelet": _ft("kubelet node-down", "config kernel"),
    "pod-failure": _ft("pod-failure", "node-down"),
}


# Fault types outside the catalog (an inline ground truth), by a word of their name.
_BY_WORD = {"flag": "feature-flag", "feature": "feature-flag", "fd": "fd-exhaustion", "pid": "pid-exhaustion",
            "gc": "gc-thrash", "thrash": "gc-thrash", "webhook": "admission", "oom": "resource-limit",
            "memory": "resource-limit", "cpu": "resource-limit", "limit": "resource-limit", "config": "misconfiguration",
            "misconfig": "misconfiguration", "port": "misconfiguration", "image": "misconfiguration",
            "selector": "misconfiguration", "dns": "network", "partition": "network", "disk": "disk-io",
            "io": "disk-io", "storage": "disk-io", "bug": "code-bug", "code": "code-bug", "auth": "credentials",
            "password": "credentials", "rbac": "permissions", "cert": "certificate", "node": "node-failure",
            "clock": "clock-skew", "time": "clock-skew", "retry": "retry-storm", "overload": "retry-storm",
            "metastable": "retry-storm", "queue": "queueing", "corruption": "data-corruption", "full": "disk-full",
            "contention": "resource-contention", "throttling": "cpu-throttling", "unschedulable": "scheduling",
            "taint": "scheduling", "quota": "quota", "state": "state-loss", "missing": "missing-object"}


# Kinds whose words also describe what a victim goes through (it retries, its queue backs up): they
# do not by themselves make a component the one at fault.
SYMPTOM_KINDS = {"overload"}


def fault_type(name: str) -> FaultType | None:
    """The fault type `name` names: a catalog type, or one a word of it names ('disk-io-latency'),
    the last word first; None when no word does."""
    key = name.lower().strip()
    if key in FAULT_TYPES:
        return FAULT_TYPES[key]
    words = [w for w in re.split(r"[^a-z]+", key) if w]
    for w in reversed(words):
        if w in FAULT_TYPES:
            return FAULT_TYPES[w]
        if w in _BY_WORD:
            return FAULT_TYPES[_BY_WORD[w]]
    return None


@cache
def _pattern(word: str) -> re.Pattern[str]:
    whole = word.endswith("$")
    body = re.escape(word.rstrip("$").replace("-", " "))
    return re.compile(r"(?<![a-z0-9])" + body + (r"(?![a-z0-9])" if whole else ""))


def spaced(text: str) -> str:
    """Text as kinds are matched: lower case, hyphens and underscores read as spaces."""
    return re.sub(r"(?<=[a-z0-9])[-_](?=[a-z0-9])", " ", text.lower())


def kinds_in(text: str) -> set[str]:
    """The kinds whose words `text` uses (names of components should be masked out first)."""
    t = spaced(text)
    return {k for k, kind in KINDS.items() if any(_pattern(w).search(t) for w in kind.words)}


def families_of(kinds: set[str]) -> set[str]:
    return {KINDS[k].family for k in kinds}


# The settings of a Kubernetes object a misconfiguration lives in. A diagnosis that puts the fault in
# settings of which the ground truth's account names none ('its targetPort' when the selector was
# changed, 'a taint it does not tolerate' when a nodeSelector matches no node) states another
# mechanism of the same component, however many of the account's other words it shares.
SETTINGS: dict[str, tuple[str, ...]] = {
    "selector": (r"(?<![a-z])(?<!node )selector", r"matches no pod"),
    "node-placement": (r"nodeselector", r"node selector", r"node affinity", r"nodeaffinity", r"hostname="),
    "taint": (r"taint", r"toleration"),
    "target-port": (r"targetport", r"target port", r"container port"),  # a Service's port maps to a container's
    "service-port": (r"spec\.ports(?:\[\d*\])?\.port\b", r"\bexposes\b", r"(?<![a-z-])service(?:'s)? (?:own )?port\b"),
    # the port the server itself listens on, set by the container's own arguments
    "listen-port": (r"listening port", r"listen port", r"port (?:argument|flag|parameter)", r"--port\b"),
    "probe": (r"liveness", r"readiness", r"startup probe", r"startupprobe", r"\bprobe"),
    "probe-delay": (r"initialdelayseconds", r"initial delay"),
    "sidecar": (r"sidecar",),
    "image": (r"\bimage\b", r"imagepull", r"errimagepull"),
    "replicas": (r"\breplicas\b", r"scaled (?:down )?to"),
    "env": (r"env[_ ]?var", r"environment variable", r"\benv\b", r"\b[a-z0-9]+(?:_[a-z0-9]+)+="),
    "certificate": (r"certificate", r"\bcerts?\b", r"x509", r"key pair"),
    "resources": (r"resources?\.(?:requests|limits)", r"\.requests\b", r"\b(?:cpu|memory) (?:requests?|limits?)\b",
                  r"\brequests? (?:more|too much) (?:cpu|memory)", r"\binsufficient (?:cpu|memory)\b"),
}
# A setting that refines another: a text naming it puts the fault in that part of its parent (a probe's
# initial delay is another mechanism than the port the probe checks), unless the account names it too.
REFINES = {"probe-delay": "probe"}


def settings_in(text: str) -> set[str]:
    """The object settings (SETTINGS) a lower-cased text names."""
    return {s for s, pats in SETTINGS.items() if any(re.search(p, text) for p in pats)}
