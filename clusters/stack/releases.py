"""The stack's pinned parts: helm releases (repository, chart, version, values file) and the
manifests applied through the Kubernetes API. Bump a version here and only here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.namespaces import CHAOS_NAMESPACE, STACK_NAMESPACE

HERE = Path(__file__).parent
VALUES_DIR = HERE / "values"
MANIFESTS_DIR = HERE / "manifests"

REPOSITORIES = {
    "chaos-mesh": "https://charts.chaos-mesh.org",
    "prometheus-community": "https://prometheus-community.github.io/helm-charts",
    "grafana": "https://grafana.github.io/helm-charts",
}


@dataclass(frozen=True)
class HelmRelease:
    """`repository` empty: `chart` is a chart directory or archive on disk (an offline mirror),
    installed without `helm repo add`."""

    name: str
    repository: str
    chart: str
    version: str
    namespace: str
    values: Path | None = None  # default: values/<name>.yaml

    @property
    def values_file(self) -> Path:
        return self.values or VALUES_DIR / f"{self.name}.yaml"

    @property
    def chart_ref(self) -> str:
        return f"{self.repository}/{self.chart}" if self.repository else self.chart


RELEASES: list[HelmRelease] = [
    HelmRelease("chaos-mesh", "chaos-mesh", "chaos-mesh", "2.7.2", CHAOS_NAMESPACE),
    HelmRelease("prometheus", "prometheus-community", "prometheus", "27.2.0", STACK_NAMESPACE),
    HelmRelease("loki", "grafana", "loki", "6.30.1", STACK_NAMESPACE),
    HelmRelease("promtail", "grafana", "promtail", "6.16.6", STACK_NAMESPACE),
]

# Applied in this order through the Kubernetes API (no helm needed, so the emulated cluster
# accepts them too).
MANIFESTS: list[Path] = [MANIFESTS_DIR / "namespaces.yaml", MANIFESTS_DIR / "jaeger.yaml"]

# Deployments the stack waits for after installing (namespace, name).
READY_DEPLOYMENTS: list[tuple[str, str]] = [(STACK_NAMESPACE, "jaeger")]
