"""The emulated cluster: an object store and controllers behind the real Kubernetes, Chaos Mesh,
Prometheus, Loki and Jaeger HTTP protocols, over a model of real applications, on a virtual clock."""
