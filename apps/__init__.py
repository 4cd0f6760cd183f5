"""Applications, each defined once as Kubernetes manifests (the real public images) plus an
`app.yaml` of what the farm needs to know about it and, for those the emulated cluster models as
call graphs, a `topology.yaml` of their structure (services, calls, peers, the load's requests);
deployed identically on every cluster."""

from apps.application import Application, load_application
from apps.topology import AppTopology, load_topology

__all__ = ["AppTopology", "Application", "load_application", "load_topology"]
