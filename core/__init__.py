"""The ground floor: what every other package shares and nothing of the project's own. Errors and
states, the plugin registry, secret scrubbing, typed events, the artifact records the farm writes
and results reads, the problem model, and the Kubernetes facts every cluster kind agrees on (label
selectors, RBAC rules, the farm's reserved namespaces). Imported by module, never by name here."""

__all__ = ["addresses", "errors", "events", "labels", "namespaces", "pod_security", "pricing", "problem", "rbac", "records",
           "registry", "secrets", "states", "tls"]
