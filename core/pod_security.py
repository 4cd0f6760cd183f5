"""The Pod Security Standards as the API server's PodSecurity admission plugin evaluates them: a
namespace's `pod-security.kubernetes.io/enforce` label picks a level (privileged, baseline,
restricted), and a pod that violates it is refused with the plugin's own wording
(`violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "x" must
set securityContext.allowPrivilegeEscalation=false), ...`). The checks and their order are the
plugin's (sorted by check id); the emulated API server enforces them and an injector uses them to
tell whether a workload still violates its namespace's level."""

from __future__ import annotations

from typing import Any

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION_LABEL = "pod-security.kubernetes.io/enforce-version"
LEVELS = ("privileged", "baseline", "restricted")
# The capabilities the baseline level lets a container add (the container runtime's defaults).
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
_RESTRICTED_VOLUMES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                       "projected", "secret")


def enforce_level(namespace_labels: dict[str, str] | None) -> tuple[str, str]:
    """(level, version) the namespace enforces; ("privileged", "latest") when unlabelled. An
    unknown level is enforced as restricted, as the plugin does with an invalid label."""
    labels = namespace_labels or {}
    level = labels.get(ENFORCE_LABEL, "privileged")
    if level not in LEVELS:
        level = "restricted"
    return level, labels.get(ENFORCE_VERSION_LABEL) or "latest"


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or []),
            *(spec.get("ephemeralContainers") or [])]


def _names(containers: list[dict[str, Any]], pod_or: bool = False) -> str:
    quoted = ", ".join(f'"{c.get("name", "")}"' for c in containers)
    word = "container" if len(containers) == 1 else "containers"
    return f"pod or {word} {quoted}" if pod_or else f"{word} {quoted}"


def _sc(c: dict[str, Any]) -> dict[str, Any]:
    return c.get("securityContext") or {}


def violations(spec: dict[str, Any], level: str) -> list[str]:
    """What the pod spec violates at `level`, each as the plugin words it, in its order."""
    if level == "privileged":
        return []
    restricted = level == "restricted"
    pod_sc = spec.get("securityContext") or {}
    containers = _containers(spec)
    out: list[tuple[str, str]] = []

    if restricted:
        bad = [c for c in containers if _sc(c).get("allowPrivilegeEscalation") is not False]
        if bad:
            out.append(("allowPrivilegeEscalation", f"allowPrivilegeEscalation != false ({_names(bad)} must set "
                                                   "securityContext.allowPrivilegeEscalation=false)"))
    added = {c.get("name", ""): [cap for cap in ((_sc(c).get("capabilities") or {}).get("add") or [])]
             for c in containers}
    if not restricted:
        extra = [(c, [a for a in added[c.get("name", "")] if a not in BASELINE_CAPABILITIES]) for c in containers]
        extra = [(c, caps) for c, caps in extra if caps]
        if extra:
            text = "; ".join(f'{_names([c])} must not include {", ".join(repr_go(a) for a in caps)} in '
                             "securityContext.capabilities.add" for c, caps in extra)
            out.append(("capabilities_baseline", f"non-default capabilities ({text})"))
    else:
        no_drop = [c for c in containers if "ALL" not in ((_sc(c).get("capabilities") or {}).get("drop") or [])]
        adds = [(c, [a for a in added[c.get("name", "")] if a != "NET_BIND_SERVICE"]) for c in containers]
        parts = []
        if no_drop:
            parts.append(f'{_names(no_drop)} must set securityContext.capabilities.drop=["ALL"]')
        parts += [f'{_names([c])} must not include {", ".join(repr_go(a) for a in caps)} in '
                  "securityContext.capabilities.add" for c, caps in adds if caps]
        if parts:
            out.append(("capabilities_restricted", f"unrestricted capabilities ({'; '.join(parts)})"))
    hosts = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    if hosts:
        out.append(("hostNamespaces", f"host namespaces ({', '.join(hosts)})"))
    host_paths = [v.get("name", "") for v in spec.get("volumes") or [] if "hostPath" in v]
    if host_paths:
        out.append(("hostPathVolumes", f"hostPath volumes ({'volume' if len(host_paths) == 1 else 'volumes'} "
                                       f"{', '.join(repr_go(n) for n in host_paths)})"))
    ports = [(c, p["hostPort"]) for c in containers for p in c.get("ports") or [] if p.get("hostPort")]
    if ports:
        text = ", ".join(f'{_names([c])} uses hostPort {port}' for c, port in ports)
        out.append(("hostPorts", f"hostPort ({text})"))
    privileged = [c for c in containers if _sc(c).get("privileged")]
    if privileged:
        out.append(("privileged", f"privileged ({_names(privileged)} must not set securityContext.privileged=true)"))
    if restricted:
        odd = [(v.get("name", ""), next((k for k in v if k != "name"), "")) for v in spec.get("volumes") or []]
        odd = [(n, kind) for n, kind in odd if kind not in _RESTRICTED_VOLUMES]
        if odd:
            text = ", ".join(f'volume {repr_go(n)} uses restricted volume type {repr_go(kind)}' for n, kind in odd)
            out.append(("restrictedVolumes", f"restricted volume types ({text})"))
        pod_non_root = pod_sc.get("runAsNonRoot") is True
        unset = [c for c in containers if _sc(c).get("runAsNonRoot") is not True
                 and not (pod_non_root and _sc(c).get("runAsNonRoot") is None)]
        if unset:
            out.append(("runAsNonRoot", f"runAsNonRoot != true ({_names(unset, pod_or=not pod_non_root)} must "
                                        "set securityContext.runAsNonRoot=true)"))
        root = [c for c in containers if _sc(c).get("runAsUser") == 0]
        if pod_sc.get("runAsUser") == 0 or root:
            who = "pod" if pod_sc.get("runAsUser") == 0 else _names(root)
            out.append(("runAsUser", f"runAsUser=0 ({who} must not set runAsUser=0)"))
        pod_type = (pod_sc.get("seccompProfile") or {}).get("type")
        ok = ("RuntimeDefault", "Localhost")

        def seccomp(c: dict[str, Any]) -> str | None:
            return (_sc(c).get("seccompProfile") or {}).get("type")
        missing = [c for c in containers if seccomp(c) not in ok and not (pod_type in ok and seccomp(c) is None)]
        if missing:
            out.append(("seccompProfile_restricted",
                        f"seccompProfile ({_names(missing, pod_or=pod_type not in ok)} must set "
                        'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'))
    return [text for _, text in sorted(out, key=lambda item: item[0])]


def repr_go(text: str) -> str:
    return f'"{text}"'


def refusal(pod_name: str, spec: dict[str, Any], namespace_labels: dict[str, str] | None) -> str | None:
    """The API server's Forbidden message for creating this pod in a namespace with these labels,
    or None when the namespace's level admits it."""
    level, version = enforce_level(namespace_labels)
    found = violations(spec, level)
    if not found:
        return None
    return f'pods "{pod_name}" is forbidden: violates PodSecurity "{level}:{version}": {", ".join(found)}'
