"""One-off helper workloads for faults that need a command to run: a Job against a database,
or a privileged pod on a node (the real-cluster path for kubelet, sysctl and disk faults).
Both live in the farm's own namespace, which the agent cannot read, and leave nothing behind."""

from __future__ import annotations

from clusters.handle import ClusterHandle
from clusters.kube import Kube, Obj, api_for
from core.errors import InjectionError
from injectors.fault import CHAOS_NAMESPACE

POLL_SECONDS = 2.0


def _wait_pod_done(kube: Kube, cluster: ClusterHandle, namespace: str, selector: str, timeout: float) -> Obj:
    waited = 0.0
    while waited <= timeout:
        for pod in kube.list("Pod", namespace, selector):
            phase = pod.get("status", {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                return pod
        cluster.advance(POLL_SECONDS)
        waited += POLL_SECONDS
    raise InjectionError(f"helper pods '{selector}' in {namespace} did not finish within {timeout:.0f}s")


def _logs(kube: Kube, namespace: str, pod: str) -> str:
    try:
        raw = kube.api.param_serialize(
            method="GET", resource_path=f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
            header_params={"Accept": "*/*"}, auth_settings=["BearerToken"],
        )
        resp = kube.api.call_api(*raw[:3])
        resp.read()
        return resp.data.decode() if resp.status < 400 else ""
    except Exception:  # logs are best effort; the exit status already said what matters
        return ""


def run_job(cluster: ClusterHandle, name: str, image: str, command: list[str], timeout: float = 300) -> str:
    """Runs `command` once in a Job and returns its output; raises InjectionError if it fails."""
    kube = Kube.of(cluster)
    kube.ensure_namespace(CHAOS_NAMESPACE)
    kube.delete("Job", CHAOS_NAMESPACE, name)
    body = {
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"job-name": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "run", "image": image, "command": command}],
                },
            },
        },
    }
    kube.create("Job", CHAOS_NAMESPACE, body)
    try:
        pod = _wait_pod_done(kube, cluster, CHAOS_NAMESPACE, f"job-name={name}", timeout)
        out = _logs(kube, CHAOS_NAMESPACE, pod["metadata"]["name"])
        if pod["status"]["phase"] != "Succeeded":
            raise InjectionError(f"helper job {name} failed: {out.strip()[-300:]}")
        return out
    finally:
        kube.delete("Job", CHAOS_NAMESPACE, name)
        for pod in kube.list("Pod", CHAOS_NAMESPACE, f"job-name={name}"):
            kube.delete("Pod", CHAOS_NAMESPACE, pod["metadata"]["name"])


def run_on_node(cluster: ClusterHandle, node: str, name: str, script: str, timeout: float = 300) -> str:
    """Runs a shell script in the host's namespaces on `node` (nsenter into PID 1) and returns
    its output. Real clusters only: it needs a privileged pod and a real kernel."""
    kube = Kube.of(cluster)
    kube.ensure_namespace(CHAOS_NAMESPACE)
    kube.delete("Pod", CHAOS_NAMESPACE, name)
    body = {
        "metadata": {"name": name, "labels": {"node-task": name}},
        "spec": {
            "nodeName": node,
            "hostPID": True,
            "hostNetwork": True,
            "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "run",
                    "image": "busybox:1.36",
                    "command": ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--", "sh", "-c", script],
                    "securityContext": {"privileged": True},
                }
            ],
        },
    }
    kube.create("Pod", CHAOS_NAMESPACE, body)
    try:
        pod = _wait_pod_done(kube, cluster, CHAOS_NAMESPACE, f"node-task={name}", timeout)
        out = _logs(kube, CHAOS_NAMESPACE, name)
        if pod["status"]["phase"] != "Succeeded":
            raise InjectionError(f"node task {name} on {node} failed: {out.strip()[-300:]}")
        return out
    finally:
        kube.delete("Pod", CHAOS_NAMESPACE, name)


def exec_in(cluster: ClusterHandle, namespace: str, workload: str, command: list[str],
            container: str | None = None) -> tuple[int, str]:
    """Runs `command` in the first running pod of `workload` (pods/exec, as kubectl exec does)
    and returns (exit code, output)."""
    from kubernetes import client
    from kubernetes.stream import stream

    kube = Kube.of(cluster)
    _, obj = kube.workload(namespace, workload)
    pods = [p for p in kube.pods_of(namespace, obj) if p.get("status", {}).get("phase") == "Running"]
    if not pods:
        raise InjectionError(f"no running pod of {workload} to run a command in")
    pod = pods[0]
    name = container or pod["spec"]["containers"][0]["name"]
    core = client.CoreV1Api(api_for(cluster))
    try:
        resp = stream(core.connect_get_namespaced_pod_exec, pod["metadata"]["name"], namespace, command=command,
                      container=name, stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
        resp.run_forever(timeout=60)
        out = resp.read_stdout() + resp.read_stderr()
        code = resp.returncode
        resp.close()
    except Exception as exc:  # websocket or API errors
        raise InjectionError(f"exec in {pod['metadata']['name']}: {exc}") from exc
    return int(code or 0), out
