"""kubectl (each installed version, as a process) against the full emulated cluster: the APIServices
kube-apiserver's aggregator keeps (one per served group version, metrics-server's among them, those
of a CustomResourceDefinition removed with it) and the metrics-server behind metrics.k8s.io."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
  - {name: v2alpha1, served: false, storage: false, schema: {openAPIV3Schema: {type: object}}}
"""


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(seed=3)


def run(kubectl_binary: Path, cluster: SimHandle, *args: str, stdin: str | None = None) -> str:
    if not kubectl_binary.exists():
        pytest.skip(f"{kubectl_binary} is installed by the test setup in .tools")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cluster.workdir), "KUBECONFIG": str(cluster.kubeconfig)}
    proc = subprocess.run([str(kubectl_binary), *args], env=env, capture_output=True, text=True, timeout=60,
                          input=stdin)
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def test_get_apiservices_lists_the_served_group_versions(kubectl_binary: Path, cluster: SimHandle) -> None:
    table = {line.split()[0]: line.split()[1:3]
             for line in run(kubectl_binary, cluster, "get", "apiservices").strip().splitlines()[1:]}
    for name in ("v1.", "v1.apps", "v1.batch", "v1.rbac.authorization.k8s.io", "v1.events.k8s.io",
                 "v1.coordination.k8s.io", "v1alpha1.chaos-mesh.org"):
        assert table.pop(name) == ["Local", "True"], name
    assert table.pop("v1beta1.metrics.k8s.io") == ["kube-system/metrics-server", "True"]
    assert not any(name.endswith(".apiregistration.k8s.io") for name in table)  # the aggregator's own group has none
    core = json.loads(run(kubectl_binary, cluster, "get", "apiservice", "v1.", "-o", "json"))
    assert core["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "onstart"}
    assert (core["spec"]["groupPriorityMinimum"], core["spec"]["versionPriority"]) == (18000, 1)


def test_a_definition_brings_and_takes_its_apiservice(kubectl_binary: Path, cluster: SimHandle) -> None:
    run(kubectl_binary, cluster, "apply", "-f", "-", stdin=CRD)
    names = run(kubectl_binary, cluster, "get", "apiservices", "-o", "name").split()
    assert "apiservice.apiregistration.k8s.io/v1.example.com" in names
    assert "apiservice.apiregistration.k8s.io/v2alpha1.example.com" not in names  # not served
    spec = json.loads(run(kubectl_binary, cluster, "get", "apiservice", "v1.example.com", "-o", "json"))["spec"]
    assert (spec["groupPriorityMinimum"], spec["versionPriority"]) == (1000, 100)
    run(kubectl_binary, cluster, "delete", "crd", "widgets.example.com")
    assert "apiservice.apiregistration.k8s.io/v1.example.com" not in run(
        kubectl_binary, cluster, "get", "apiservices", "-o", "name").split()


def test_metrics_server_runs_behind_its_service_and_reports_a_new_pod(kubectl_binary: Path, cluster: SimHandle) -> None:
    pods = run(kubectl_binary, cluster, "get", "pods", "-n", "kube-system", "-l", "k8s-app=metrics-server",
               "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.phase}{'\\n'}{end}").split()
    assert pods[0].startswith("metrics-server-") and pods[1] == "Running"
    endpoints = run(kubectl_binary, cluster, "get", "endpoints", "metrics-server", "-n", "kube-system",
                    "-o", "jsonpath={.subsets[0].ports[0].port}")
    assert endpoints == "10250"
    assert "Serving securely on [::]:10250" in run(kubectl_binary, cluster, "logs", "-n", "kube-system",
                                                  "deploy/metrics-server")
    name = f"fresh-{kubectl_binary.parent.name}".lower().replace(".", "-").replace("_", "-")
    run(kubectl_binary, cluster, "run", name, "--image=nginx:1.25")
    cluster.advance(45)  # a metric resolution (15 s) and the cAdvisor scrapes after the pod starts
    top = run(kubectl_binary, cluster, "top", "pod", name, "--no-headers").split()
    assert top[0] == name and top[1].endswith("m") and top[2].endswith("Mi")
