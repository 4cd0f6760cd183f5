"""Applications, each defined once as Kubernetes manifests (the real public images) plus an
`app.yaml` of what the farm needs to know about it; deployed identically on every cluster."""

from apps.base import Application, load_application

__all__ = ["Application", "load_application"]
