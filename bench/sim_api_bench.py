"""Requests per second of the emulated Kubernetes API (get, list of 100 pods as JSON and as a
Table, strategic-merge patch) over keep-alive HTTPS, and the wall time of `kubectl get pods`.

    .venv/bin/python bench/sim_api_bench.py [--pods 100] [--seconds 2] [--process]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusters.emulated import write_kubeconfig  # noqa: E402
from kubesim.api import KubeAPI, serve_app  # noqa: E402
from kubesim.api.tls import make_serving_cert  # noqa: E402
from kubesim.clock import VirtualClock  # noqa: E402
from kubesim.store import Store  # noqa: E402

KUBECTL = ROOT / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def pod(i: int) -> dict:
    return {"metadata": {"name": f"web-{i:03d}", "labels": {"app": "web", "shard": str(i % 4)}},
            "spec": {"nodeName": "worker-1", "containers": [
                {"name": "app", "image": "app:1", "env": [{"name": f"E{j}", "value": "x" * 20} for j in range(8)],
                 "ports": [{"containerPort": 8080}], "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
            "status": {"phase": "Running", "podIP": f"10.244.0.{i % 250}", "containerStatuses": [
                {"name": "app", "ready": True, "restartCount": 0, "image": "app:1", "imageID": "",
                 "state": {"running": {"startedAt": "2026-01-05T09:00:00Z"}}}]}}


def rate(conn: http.client.HTTPSConnection, token: str, method: str, path: str, seconds: float,
         body: bytes | None = None, ctype: str = "application/json", accept: str = "application/json") -> tuple[float, float]:
    """(requests per second, median latency in ms) of one request repeated for `seconds`."""
    headers = {"Authorization": f"Bearer {token}", "Accept": accept, "Content-Type": ctype}
    lat = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status >= 300:
            raise SystemExit(f"{method} {path} answered {resp.status}")
        lat.append(time.perf_counter() - t)
    return len(lat) / sum(lat), statistics.median(lat) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--process", action="store_true", help="also time the server process with the full SimCluster")
    args = parser.parse_args()

    t0 = time.perf_counter()
    store = Store(VirtualClock())
    token = "bench-admin-token"
    api = KubeAPI(store, token)
    cert = make_serving_cert()
    server, url = serve_app(api, "127.0.0.1", 0, cert.server_context())
    print(f"API server up in {(time.perf_counter() - t0) * 1000:.0f} ms (store, TLS certificate, listener)")
    store.create("namespaces", {"metadata": {"name": "bench"}})
    store.create("nodes", {"metadata": {"name": "worker-1"}})
    for i in range(args.pods):
        store.create("pods", pod(i), namespace="bench")

    ctx = ssl.create_default_context(cadata=cert.ca_pem.decode())
    host, port = url.split("//")[1].split(":")
    conn = http.client.HTTPSConnection(host, int(port), context=ctx)
    base = "/api/v1/namespaces/bench/pods"
    figures = [
        ("get one pod", rate(conn, token, "GET", f"{base}/web-007", args.seconds)),
        (f"list {args.pods} pods (JSON)", rate(conn, token, "GET", base, args.seconds)),
        (f"list {args.pods} pods (Table)", rate(conn, token, "GET", base, args.seconds, accept=TABLE)),
        ("list by label (25 pods)", rate(conn, token, "GET", f"{base}?labelSelector=shard%3D1", args.seconds)),
        ("strategic-merge patch", rate(conn, token, "PATCH", f"{base}/web-007", args.seconds,
                                       json.dumps({"metadata": {"labels": {"bench": "yes"}}}).encode(),
                                       "application/strategic-merge-patch+json")),
        ("merge patch (labels flip)", rate(conn, token, "PATCH", f"{base}/web-008", args.seconds,
                                           json.dumps({"metadata": {"annotations": {"t": str(time.time())}}}).encode(),
                                           "application/merge-patch+json")),
    ]
    for name, (rps, ms) in figures:
        print(f"{name:32s} {rps:8.0f} req/s   median {ms:6.2f} ms")

    if KUBECTL.exists():
        tmp = Path(tempfile.mkdtemp(prefix="sim-api-bench-"))
        kubeconfig = write_kubeconfig(tmp / "kubeconfig", url, cert.ca_pem.decode(), token, "bench", "bench")
        env = {"PATH": f"{KUBECTL.parent}:/usr/bin:/bin", "HOME": str(tmp), "KUBECONFIG": str(kubeconfig)}
        times = []
        for i in range(6):
            t = time.perf_counter()
            subprocess.run(["kubectl", "get", "pods"], env=env, check=True, capture_output=True)
            if i:  # the first run also fills kubectl's discovery cache
                times.append(time.perf_counter() - t)
        print(f"{'kubectl get pods (' + str(args.pods) + ' rows)':32s} median {statistics.median(times) * 1000:6.0f} ms "
              f"wall (process start included; kubectl's own discovery cache warm)")
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"kubectl not found at {KUBECTL}: kubectl latency not measured")
    server.shutdown()
    if args.process:
        from clusters.handle import open_cluster

        t = time.perf_counter()
        try:
            handle = open_cluster("sim", seed=0)
        except Exception as exc:  # the full cluster may not build on this checkout
            print(f"server process: did not start ({exc})")
        else:
            print(f"{'server process ready':32s} {time.perf_counter() - t:6.2f} s (python start, SimCluster(0), "
                  f"TLS, 5 listeners, first checkpoint)")
            t = time.perf_counter()
            handle.reset()
            print(f"{'reset (restore checkpoint)':32s} {(time.perf_counter() - t) * 1000:6.1f} ms")
            handle.close()
    os._exit(0)


if __name__ == "__main__":
    main()
