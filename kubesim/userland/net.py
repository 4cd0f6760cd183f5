"""What a client inside a pod (wget, curl, nc, nslookup) or a forwarded port reaches: the cluster's
DNS and Services, then the program listening on the target port, answering HTTP as its
application model says (hotel-reservation's frontend, consul, jaeger's UI...), or not at all
(a gRPC or database port resets an HTTP/1.1 request)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from kubesim.runtime import KUBE_DNS
from kubesim.userland.images import image_files

if TYPE_CHECKING:
    from kubesim.view import ClusterView

HTTP_PORTS = {80, 8080, 8000, 3000, 5000, 9090, 16686, 8500, 8081, 8088, 4000}
HOTELS = (("1", "Clift Hotel", "(415) 775-4700", -122.4071, 37.7867), ("2", "W San Francisco", "(415) 777-5300", -122.3997, 37.7854),
          ("3", "Hotel Zetta", "(415) 543-8555", -122.4056, 37.7834), ("4", "Hotel Vitale", "(415) 278-3700", -122.3938, 37.7936),
          ("5", "Phoenix Hotel", "(415) 776-1380", -122.4182, 37.7841), ("6", "St. Regis San Francisco", "(415) 284-4000", -122.4006, 37.7860))


@dataclass
class Answer:
    status: int
    body: str = ""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    reset: bool = False  # the server closed the connection without an HTTP response
    hang: bool = False  # the server accepted the request and never answers: the client's deadline ends it

    def raw(self) -> bytes:
        """The response as bytes on the wire (HTTP/1.1, Go net/http's header set)."""
        from http import HTTPStatus
        phrase = HTTPStatus(self.status).phrase if self.status in HTTPStatus._value2member_map_ else ""
        body = self.body.encode()
        head = [f"HTTP/1.1 {self.status} {phrase}", f"Content-Type: {self.content_type}", f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in self.headers.items()]
        return ("\r\n".join(head) + "\r\n\r\n").encode() + body


@dataclass
class Dialed:
    """Where host:port led: the serving pod and container, or the client's error."""

    ip: str = ""
    pod: dict[str, Any] | None = None
    container: Any = None
    port: int = 0
    error: str | None = None
    timeout: bool = False


def dial(cluster: ClusterView, client: dict[str, Any] | None, host: str, port: int) -> Dialed:
    if host in ("localhost", "127.0.0.1", "::1") and client is not None:
        return dial_pod(cluster, client, port, "127.0.0.1")
    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", host):
        for pod in cluster.store.iter_raw("pods"):
            if (pod.get("status") or {}).get("podIP") == host and not (pod.get("spec") or {}).get("hostNetwork"):
                return dial_pod(cluster, pod, port, host, client)
        for svc in cluster.store.iter_raw("services"):
            if (svc.get("spec") or {}).get("clusterIP") == host:
                host = f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local."
                break
        else:
            return Dialed(host, error=f"dial tcp {host}:{port}: i/o timeout", timeout=True)
    conn = cluster.network.connect(client, host, port)
    ip = ((conn.service or {}).get("spec") or {}).get("clusterIP", "")
    if conn.error or not conn.targets:
        err = conn.first_error() or f"dial tcp {host}:{port}: connect: connection refused"
        return Dialed(ip, error=err, timeout="i/o timeout" in err)
    target = next((t for t in conn.targets if not t.error), None)
    if target is None:
        err = conn.targets[0].error or "connection refused"
        return Dialed(ip, error=err, timeout="i/o timeout" in err)
    found = dial_pod(cluster, target.pod, target.port, ip)
    found.ip = ip if ip and ip != "None" else found.ip
    return found


def dial_pod(cluster: ClusterView, pod: dict[str, Any], port: int, ip: str = "",
             client: dict[str, Any] | None = None) -> Dialed:
    ip = ip or (pod.get("status") or {}).get("podIP", "")
    if client is not None:
        reach = cluster.network.connect_pod(client, pod, port)
        if reach.error:
            return Dialed(ip, error=reach.error, timeout="i/o timeout" in reach.error)
    rt = cluster.kubelet.runtime(pod)
    for c in (rt.containers.values() if rt is not None and rt.uid == pod["metadata"].get("uid") else []):
        if c.state == "running" and c.stage == "run" and port in c.ports:
            return Dialed(ip, pod, c, port)
    return Dialed(ip, error=f"dial tcp {ip}:{port}: connect: connection refused")


def http_answer(cluster: ClusterView, found: Dialed, method: str, target: str) -> Answer:
    """What the program behind `found` answers to `method target` over HTTP/1.1."""
    assert found.pod is not None and found.container is not None
    inst = found.container.instance
    url = urlsplit(target)
    path, query = url.path or "/", parse_qs(url.query)
    kind = inst.get("kind") if isinstance(inst, dict) else None
    if kind == "mongo":
        return Answer(200, "It looks like you are trying to access MongoDB over HTTP on the native driver port.\n")
    if kind == "graph" and inst.get("app") == "hotel-reservation":
        return _hotel(cluster, found, inst, method, path, query)
    if kind == "graph":
        return _graph(cluster, found, inst, method, path, query)
    image = found.container.image
    if "consul" in image:
        return _consul(cluster, found, path)
    if "jaeger" in image and found.port == 16686:
        return Answer(200, '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Jaeger UI</title></head>'
                           '<body><div id="jaeger-ui-root"></div></body></html>\n', "text/html; charset=utf-8")
    if found.port == 80 and image_files(image).get(NGINX_ROOT + "/index.html") is not None and method == "GET":
        served = _docroot(cluster, found, path)
        if served is not None:
            return served
    if found.port in HTTP_PORTS or "nginx" in image:
        return Answer(404, "404 page not found\n")
    return Answer(0, reset=True)


NGINX_ROOT = "/usr/share/nginx/html"


def _docroot(cluster: ClusterView, found: Dialed, path: str) -> Answer | None:
    """nginx's default server: a file under its docroot, as the image ships it or as an exec wrote
    it into the container's layer (kr8s's suite fetches the file its fixture wrote with dd)."""
    file = NGINX_ROOT + ("/index.html" if path == "/" else path)
    layer = cluster.kubelet.state.get("writable_layers", {}).get(found.container.container_id, {})
    body = layer.get(file, image_files(found.container.image).get(file))
    if body is None:
        return None
    kind = "text/html" if file.endswith(".html") else "application/octet-stream"
    return Answer(200, body, kind, {"Server": "nginx/1.27.3", "Accept-Ranges": "bytes"})


def _hotel(cluster: ClusterView, found: Dialed, inst: Any, method: str, path: str,
           query: dict[str, list[str]]) -> Answer:
    svc = inst.get("svc") if isinstance(inst, dict) else None
    if svc != "frontend":
        return Answer(0, reset=True)  # the other services speak gRPC only
    ns = found.pod["metadata"]["namespace"] if found.pod else ""
    flow = cluster.workload.graphs.state.get(ns, {})
    succ = flow.get("prev", {})
    errors = flow.get("errors", {})

    def arg(name: str) -> str:
        return (query.get(name) or [""])[0]

    def outcome(op: str) -> Answer | None:
        ok = succ.get(("frontend", op), 1.0)
        if ok < 0.5:
            return Answer(500, (errors.get(("frontend", op)) or "rpc error: code = Unavailable desc = connection error") + "\n")
        return None

    if path in ("/", "/index.html"):
        return Answer(200, "<!DOCTYPE html>\n<html>\n<head>\n<title>Hotel Reservation</title>\n</head>\n<body>\n"
                           "<div id=\"map\"></div>\n<script src=\"/javascripts/app.js\"></script>\n</body>\n</html>\n",
                      "text/html; charset=utf-8")
    if path == "/hotels":
        if not arg("inDate") or not arg("outDate"):
            return Answer(400, "Please specify inDate/outDate params\n")
        if not arg("lat") or not arg("lon"):
            return Answer(400, "Please specify location params\n")
        return outcome("HTTP GET /hotels") or Answer(200, _geojson(HOTELS), "application/json")
    if path == "/recommendations":
        if not arg("require"):
            return Answer(400, "Please specify require params\n")
        if arg("require") not in ("dis", "rate", "price"):
            return Answer(400, "Please specify require params\n")
        return outcome("HTTP GET /recommendations") or Answer(200, _geojson(HOTELS[:3]), "application/json")
    if path == "/user":
        if not arg("username") or not arg("password"):
            return Answer(400, "Please specify username and password\n")
        return outcome("HTTP POST /user") or Answer(200, json.dumps({"message": "Login successfully!"}), "application/json")
    if path == "/reservation":
        if not arg("inDate") or not arg("outDate"):
            return Answer(400, "Please specify inDate/outDate params\n")
        return outcome("HTTP POST /reservation") or Answer(200, json.dumps({"message": "Reserve successfully!"}),
                                                            "application/json")
    return Answer(404, "404 page not found\n")


def _graph(cluster: ClusterView, found: Dialed, inst: dict[str, Any], method: str, path: str,
           query: dict[str, list[str]]) -> Answer:
    """A call-graph application's entry service (astronomy-shop's frontend-proxy...): the routes
    its load generator sends answer as the last step of the call graph served them; its other
    services speak gRPC or a protocol of their own."""
    from kubesim.apps.graph import GRAPHS
    graph = GRAPHS.get(inst.get("app", ""))
    if graph is None:
        return Answer(0, reset=True)
    svc = graph.services.get(inst.get("svc", ""))
    if svc is not None and svc.language == "envoy" and found.port == ENVOY_ADMIN_PORT and found.container is not None:
        return _envoy_admin(cluster, found, path)
    routes = [r for r in graph.routes if r.service == inst.get("svc")]
    if not routes:
        return Answer(0, reset=True)
    from kubesim.apps.reqfilter import screen
    node = cluster.nodes.get(((found.pod or {}).get("spec") or {}).get("nodeName", ""))
    if found.container is not None and not screen(found.container, query, float(node.cpu) if node else 1.0):
        return Answer(0, hang=True)
    ns = found.pod["metadata"]["namespace"] if found.pod else ""
    prev = cluster.workload.graphs.state.get(ns, {}).get("prev", {})
    for route in routes:
        pattern = "^" + re.sub(r"\\\[[^\]]+\\\]", "[^/]+", re.escape(route.name.rstrip("/"))) + "/?$"
        if route.method == method and re.match(pattern, path):
            if prev.get((route.service, route.op), 1.0) < 0.5:
                return Answer(503, "upstream connect error or disconnect/reset before headers. reset reason: "
                                   "connection failure\n")
            if path == "/":
                return Answer(200, "<!DOCTYPE html><html><head><title>OTel demo</title></head><body>"
                                   "<div id=\"__next\"></div></body></html>\n", "text/html; charset=utf-8")
            return Answer(200, "[]" if method == "GET" else "{}", "application/json")
    return Answer(404, "Not Found\n")


ENVOY_ADMIN_PORT = 10000  # the demo's ENVOY_ADMIN_PORT


def _envoy_admin(cluster: ClusterView, found: Dialed, path: str) -> Answer:
    """Envoy's admin listener (served by the main thread, so it answers while every worker is
    busy): liveness and the gauges of requests it holds."""
    from kubesim.apps.reqfilter import workers
    assert found.container is not None and found.pod is not None
    if path == "/ready":
        return Answer(200, "LIVE\n")
    if path != "/stats":
        return Answer(404, "invalid path. admin commands are:\n  /ready: print server state\n"
                           "  /stats: print server stats\n")
    ns = found.pod["metadata"]["namespace"]
    queued = cluster.workload.graphs.state.get(ns, {}).get("queues", {}).get("frontend-proxy", {}).get("q", 0.0)
    pods = cluster.store.list("pods", ns, "app.kubernetes.io/name=frontend-proxy") or [found.pod]
    node = cluster.nodes.get((found.pod.get("spec") or {}).get("nodeName", ""))
    held = int(found.container.instance.get("filter_pinned", 0))
    active = held + int(round(queued / max(1, len(pods))))
    lines = {"http.ingress_http.downstream_cx_active": active, "http.ingress_http.downstream_rq_active": active,
             "server.concurrency": workers(found.container, float(node.cpu) if node else 1.0),
             "server.live": 1, "server.state": 0}
    return Answer(200, "".join(f"{k}: {v}\n" for k, v in sorted(lines.items())))


def _geojson(hotels: tuple[tuple[str, str, str, float, float], ...]) -> str:
    features = [{"type": "Feature", "id": h[0], "properties": {"name": h[1], "phone_number": h[2]},
                 "geometry": {"type": "Point", "coordinates": [h[3], h[4]]}} for h in hotels]
    return json.dumps({"type": "FeatureCollection", "features": features})


def _consul(cluster: ClusterView, found: Dialed, path: str) -> Answer:
    key = f"{found.pod['metadata']['namespace']}/{found.pod['metadata']['name']}" if found.pod else ""
    regs = cluster.workload.state.get("consul", {}).get(key, {})
    if path == "/v1/status/leader":
        return Answer(200, json.dumps(f"{found.ip}:8300"), "application/json")
    if path == "/v1/catalog/services":
        return Answer(200, json.dumps({"consul": [], **{name: [] for name in sorted(regs)}}), "application/json")
    if path.startswith("/v1/health/service/") or path.startswith("/v1/catalog/service/"):
        name = path.rsplit("/", 1)[-1]
        entries = []
        for ns, pod_name, port in regs.get(name, []):
            pod = cluster.store.try_get("pods", ns, pod_name) or {}
            ip = (pod.get("status") or {}).get("podIP", "")
            entries.append({"Node": {"Node": found.pod["metadata"]["name"] if found.pod else ""},
                            "Service": {"ID": f"{pod_name}", "Service": name, "Address": ip, "Port": int(port)}})
        return Answer(200, json.dumps(entries), "application/json")
    if path in ("/", "/ui", "/ui/"):
        return Answer(301 if path == "/" else 200, "" if path == "/" else "<!DOCTYPE html><title>Consul by HashiCorp</title>\n",
                      "text/html; charset=utf-8", {"Location": "/ui/"} if path == "/" else {})
    return Answer(404, "404 page not found\n")


def forward(cluster: ClusterView, pod: dict[str, Any], port: int, request: bytes) -> tuple[bytes, str | None]:
    """One forwarded connection: the answer of what listens on `port` in `pod`, or the error the
    kubelet reports on the port-forward's error stream."""
    found = dial_pod(cluster, pod, port)
    if found.error:
        uid = pod["metadata"].get("uid", "")
        sandbox = uid.replace("-", "")[:32] * 2
        return b"", (f"error forwarding port {port} to pod {sandbox}, uid : failed to execute portforward in network "
                     f'namespace "/var/run/netns/cni-{uid}": failed to connect to localhost:{port} inside namespace '
                     f'"{sandbox}", IPv4: dial tcp4 127.0.0.1:{port}: connect: connection refused IPv6 dial tcp6 '
                     f"[::1]:{port}: connect: connection refused ")
    line = request.split(b"\r\n", 1)[0].decode(errors="replace").split()
    if len(line) < 3 or not line[2].startswith("HTTP/1"):
        return b"", None  # gRPC (HTTP/2) and database protocols: not modelled byte for byte; the server hangs up
    answer = http_answer(cluster, found, line[0], line[1])
    return (b"" if answer.reset or answer.hang else answer.raw()), None


def lookup(cluster: ClusterView, client: dict[str, Any] | None, host: str) -> tuple[str | None, str, str | None]:
    """nslookup's view: (address, canonical name, error)."""
    svc, err = cluster.network.lookup(client, host)
    if err:
        return None, host, err
    if svc is None:
        return host, host, None
    name = f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local"
    ip = (svc.get("spec") or {}).get("clusterIP", "")
    if ip == "None":
        ep = cluster.store.try_get("endpoints", svc["metadata"]["namespace"], svc["metadata"]["name"]) or {}
        ips = [a.get("ip", "") for s in ep.get("subsets") or [] for a in s.get("addresses") or []]
        return (ips[0] if ips else None), name, (None if ips else "NXDOMAIN")
    return ip, name, None


__all__ = ["Answer", "Dialed", "KUBE_DNS", "dial", "dial_pod", "forward", "http_answer", "lookup"]
