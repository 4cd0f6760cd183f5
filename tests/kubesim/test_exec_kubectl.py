"""kubectl 1.20 (SPDY) and 1.33 (WebSocket, SPDY fallback) as real processes against an emulated
hotel-reservation over HTTP: exec into the images' userlands, a debug pod from `kubectl run`,
port-forward to the modelled HTTP servers, and the pod's service account token."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters
from tests.kubesim.apptools import NEEDS_KUBECTL, run_kubectl

pytestmark = NEEDS_KUBECTL
NS = "hotel-reservation"


@pytest.fixture(scope="module")
def hotel(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served("hotel-reservation", seed=5)


def pod_of(hotel: object, prefix: str, namespace: str = NS) -> str:
    names = run_kubectl(hotel, "get", "pods", "-o", "name", namespace=namespace).split()
    return next(n.split("/", 1)[1] for n in names if n.split("/", 1)[1].startswith(prefix + "-"))


def kube(hotel: object, kubectl: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([str(kubectl), "--kubeconfig", str(hotel.kubeconfig), "-n", NS, *args],  # type: ignore[attr-defined]
                         capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    if check:
        assert out.returncode == 0, out.stderr
    return out


def test_exec_reads_the_containers_files_and_env(hotel: object, kubectl_binary: Path) -> None:
    fe = pod_of(hotel, "frontend")
    hosts = kube(hotel, kubectl_binary, "exec", fe, "--", "cat", "/etc/hosts").stdout
    assert hosts.startswith("# Kubernetes-managed hosts file.\n") and hosts.rstrip().endswith(f"\t{fe}")
    env = kube(hotel, kubectl_binary, "exec", fe, "--", "sh", "-c", "env | grep MONGO | cut -d= -f1 | sort | head -2").stdout
    assert env == "MONGODB_GEO_PORT\nMONGODB_GEO_PORT_27017_TCP\n"
    assert "resolv.conf" in kube(hotel, kubectl_binary, "exec", fe, "--", "ls", "/etc").stdout.split()
    ps = kube(hotel, kubectl_binary, "exec", fe, "--", "ps").stdout.splitlines()
    assert ps[0].split() == ["PID", "TTY", "TIME", "CMD"] and ps[1].split()[-1] == "frontend"


def test_exit_codes_and_missing_programs_as_kubectl_shows_them(hotel: object, kubectl_binary: Path) -> None:
    fe = pod_of(hotel, "frontend")
    out = kube(hotel, kubectl_binary, "exec", fe, "--", "sh", "-c", "echo partial; exit 3", check=False)
    assert out.returncode == 3 and out.stdout == "partial\n" and "command terminated with exit code 3" in out.stderr
    out = kube(hotel, kubectl_binary, "exec", fe, "--", "nslookup", "geo", check=False)
    assert out.returncode == 126
    assert 'exec: "nslookup": executable file not found in $PATH: unknown' in out.stdout + out.stderr
    dns = pod_of(hotel, "coredns", "kube-system")
    out = subprocess.run([str(kubectl_binary), "--kubeconfig", str(hotel.kubeconfig), "-n", "kube-system",  # type: ignore[attr-defined]
                          "exec", dns, "--", "sh"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 126 and 'exec: "sh": executable file not found in $PATH' in out.stdout + out.stderr


def test_exec_reads_stdin(hotel: object, kubectl_binary: Path) -> None:
    fe = pod_of(hotel, "frontend")
    out = subprocess.run([str(kubectl_binary), "--kubeconfig", str(hotel.kubeconfig), "-n", NS, "exec", "-i", fe, "--", "sh"],  # type: ignore[attr-defined]
                         input="echo from-stdin; hostname | tr -d '\\n' | wc -c\nexit 4\n", capture_output=True, text=True,
                         timeout=60)
    assert (out.returncode, out.stdout) == (4, f"from-stdin\n{len(fe)}\n")


def test_cp_both_ways_through_tar_in_the_container(hotel: object, kubectl_binary: Path, tmp_path: Path) -> None:
    fe = pod_of(hotel, "frontend")
    kube(hotel, kubectl_binary, "cp", f"{fe}:/etc/resolv.conf", str(tmp_path / "resolv.conf"))
    assert (tmp_path / "resolv.conf").read_text().startswith(f"search {NS}.svc.cluster.local ")
    (tmp_path / "note.txt").write_text("uploaded é\n")
    kube(hotel, kubectl_binary, "cp", str(tmp_path / "note.txt"), f"{fe}:/tmp/note.txt")
    assert kube(hotel, kubectl_binary, "exec", fe, "--", "cat", "/tmp/note.txt").stdout == "uploaded é\n"


def test_mongo_shell_answers_from_the_model(hotel: object, kubectl_binary: Path) -> None:
    geo = pod_of(hotel, "mongodb-geo")
    out = kube(hotel, kubectl_binary, "exec", geo, "--", "mongo", "geo-db", "-u", "admin", "-p", "admin",
               "--authenticationDatabase", "admin", "--eval", "db.stats()").stdout
    assert '"db" : "geo-db"' in out and '"objects" : 80' in out


def test_debug_pod_from_kubectl_run_becomes_ready_and_reaches_services(hotel: object, kubectl_binary: Path) -> None:
    name = f"debug-{kubectl_binary.parent.name.replace('.', '')[-6:]}".lower().replace("_", "-")
    kube(hotel, kubectl_binary, "run", name, "--image=busybox", "--restart=Never", "--", "sh", "-c", "sleep 3600")
    try:
        hotel.advance(15)  # type: ignore[attr-defined]
        ready = kube(hotel, kubectl_binary, "get", "pod", name, "-o",
                     "jsonpath={.status.phase} {.status.conditions[?(@.type=='Ready')].status}").stdout
        assert ready == "Running True"
        out = kube(hotel, kubectl_binary, "exec", name, "--", "nslookup", "mongodb-geo").stdout
        assert f"Name:\tmongodb-geo.{NS}.svc.cluster.local" in out
        out = kube(hotel, kubectl_binary, "exec", name, "--", "wget", "-qO-", "http://frontend:5000/").stdout
        assert "<title>Hotel Reservation</title>" in out
    finally:
        kube(hotel, kubectl_binary, "delete", "pod", name, "--wait=false", check=False)


def test_the_token_a_pod_shows_is_its_service_accounts(hotel: object, kubectl_binary: Path) -> None:
    fe = pod_of(hotel, "frontend")
    token = kube(hotel, kubectl_binary, "exec", fe, "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/token").stdout
    assert token and token not in Path(hotel.kubeconfig).read_text()  # type: ignore[attr-defined]
    sa = subprocess.run([str(kubectl_binary), "--kubeconfig", str(hotel.kubeconfig), "--token", token, "-n", NS,  # type: ignore[attr-defined]
                         "get", "secrets"], capture_output=True, text=True, timeout=60)
    assert sa.returncode == 1 and f'User "system:serviceaccount:{NS}:default" cannot list resource "secrets"' in sa.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_port_forward_reaches_the_frontend(hotel: object, kubectl_binary: Path) -> None:
    fe = pod_of(hotel, "frontend")
    port = _free_port()
    proc = subprocess.Popen([str(kubectl_binary), "--kubeconfig", str(hotel.kubeconfig), "-n", NS,  # type: ignore[attr-defined]
                             "port-forward", f"pod/{fe}", f"{port}:5000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(f"Forwarding from 127.0.0.1:{port} -> 5000")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/hotels?inDate=2015-04-09&outDate=2015-04-10"
                                    "&lat=37.78&lon=-122.40", timeout=20) as resp:
            assert resp.status == 200 and b'"FeatureCollection"' in resp.read()
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/recommendations", timeout=20)
        assert err.value.code == 400 and err.value.read() == b"Please specify require params\n"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _while_advancing(hotel: object, proc: subprocess.Popen[str], stdin: str = "", seconds: int = 60) -> tuple[str, str]:
    """Feed `stdin`, then advance the virtual clock a second at a time while kubectl waits on the cluster."""
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    for _ in range(seconds):
        if proc.poll() is not None:
            break
        hotel.advance(1)  # type: ignore[attr-defined]
        time.sleep(0.1)
    assert proc.stdout is not None and proc.stderr is not None
    proc.wait(timeout=30)
    return proc.stdout.read(), proc.stderr.read()


def _popen(hotel: object, kubectl: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(kubectl), "--kubeconfig", str(hotel.kubeconfig), "-n", NS, *args],  # type: ignore[attr-defined]
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _short(kubectl: Path) -> str:
    return "v" + kubectl.parent.name.replace("kubectl-", "").replace("root", "120").replace("v", "")


def test_run_interactive_pod_runs_stdin_in_its_shell(hotel: object, kubectl_binary: Path) -> None:
    name = f"shell-{_short(kubectl_binary)}"
    proc = _popen(hotel, kubectl_binary, "run", name, "--image=busybox", "--restart=Never", "-i", "--rm", "--", "sh")
    out, err = _while_advancing(hotel, proc, "echo hello-from-run; nslookup frontend | tail -2 | head -1\n")
    svc_ip = run_kubectl(hotel, "get", "service", "frontend", "-o", "jsonpath={.spec.clusterIP}", namespace=NS)
    assert proc.returncode == 0, err
    assert out.startswith(f"hello-from-run\nAddress: {svc_ip}\n") and f'pod "{name}" deleted' in out


def test_attach_follows_a_containers_output_until_it_exits(hotel: object, kubectl_binary: Path) -> None:
    name = f"talker-{_short(kubectl_binary)}"
    kube(hotel, kubectl_binary, "run", name, "--image=busybox", "--restart=Never", "--", "sh", "-c", "echo start; sleep 5; echo done")
    hotel.advance(2)  # type: ignore[attr-defined]
    proc = _popen(hotel, kubectl_binary, "attach", name)
    time.sleep(1.0)
    out, err = _while_advancing(hotel, proc)
    assert proc.returncode == 0, err
    assert out == "start\ndone\n"


def test_debug_adds_an_ephemeral_container_whose_output_is_its_log(hotel: object, kubectl_binary: Path) -> None:
    fe = pod_of(hotel, "frontend")
    out = kube(hotel, kubectl_binary, "debug", fe, "--image=busybox", "--target=hotel-reserv-frontend", "--",
               "sh", "-c", "cat /etc/hosts; ps", check=False)
    if kubectl_binary.parent.name == "bin":  # kubectl 1.20 speaks the pre-1.22 API, which a 1.28 server refuses
        assert out.returncode == 1 and 'no kind "EphemeralContainers" is registered' in out.stderr
        return
    assert out.returncode == 0, out.stderr
    debugger = next(w.rstrip(".") for w in (out.stdout + out.stderr).split() if w.startswith("debugger-"))
    hotel.advance(3)  # type: ignore[attr-defined]
    logs = run_kubectl(hotel, "logs", fe, "-c", debugger, namespace=NS, kubectl=kubectl_binary)
    assert logs.startswith("# Kubernetes-managed hosts file.\n")
    assert "    1 root      0:" in logs and logs.splitlines()[-4].endswith(" frontend")  # the target's process table
    status = run_kubectl(hotel, "get", "pod", fe, "-o", "jsonpath={.status.ephemeralContainerStatuses[0].state.terminated.reason}",
                         namespace=NS)
    assert status == "Completed"
    proc = _popen(hotel, kubectl_binary, "debug", "-i", fe, "--image=busybox", "--", "sh")
    out, err = _while_advancing(hotel, proc, "echo inside-$(hostname)\n")
    assert proc.returncode == 0, err
    assert f"inside-{fe}\n" in out
