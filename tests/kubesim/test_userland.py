"""The userland `kubectl exec` runs in (kubesim/userland), in process on hotel-reservation:
the files the kubelet writes, the shell's grammar, the tools of each image, the network clients
against the emulated Services, the datastore shells, and what an image without a tool says."""

from __future__ import annotations

import base64
import json

import pytest

from kubesim.cluster import SimCluster
from kubesim.userland.images import userland_of

NS = "hotel-reservation"


def pod_name(cluster: SimCluster, prefix: str, namespace: str = NS) -> str:
    return next(p["metadata"]["name"] for p in cluster.store.list("pods", namespace)
                if p["metadata"]["name"].startswith(prefix + "-"))


def run(cluster: SimCluster, pod: str, *cmd: str, namespace: str = NS) -> tuple[int, str, str]:
    return cluster.exec(namespace, pod, None, list(cmd))


@pytest.fixture
def debug_pod(cluster: SimCluster) -> str:
    cluster.store.create("pods", {"metadata": {"name": "debug", "namespace": NS},
                                  "spec": {"containers": [{"name": "debug", "image": "busybox", "args": ["sleep", "3600"]}]}})
    cluster.advance(15)
    return "debug"


def test_kubelet_files_are_the_pods_own(cluster: SimCluster) -> None:
    fe = pod_name(cluster, "frontend")
    obj = cluster.store.get("pods", NS, fe)
    code, hosts, _ = run(cluster, fe, "cat", "/etc/hosts")
    assert code == 0 and hosts.startswith("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n")
    assert hosts.endswith(f"{obj['status']['podIP']}\t{fe}\n")
    assert run(cluster, fe, "cat", "/etc/resolv.conf")[1] == (
        f"search {NS}.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n")
    assert run(cluster, fe, "cat", "/var/run/secrets/kubernetes.io/serviceaccount/namespace")[1] == NS
    token = run(cluster, fe, "cat", "/var/run/secrets/kubernetes.io/serviceaccount/token")[1]
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["sub"] == f"system:serviceaccount:{NS}:{obj['spec'].get('serviceAccountName') or 'default'}"
    assert run(cluster, fe, "cat", "/proc/1/cmdline")[1].split("\0")[0] == "frontend"
    assert run(cluster, fe, "hostname")[1] == fe + "\n"


def test_env_has_the_spec_and_the_service_links(cluster: SimCluster) -> None:
    geo = pod_name(cluster, "geo")
    code, out, _ = run(cluster, geo, "sh", "-c", "env | grep MONGODB_GEO_SERVICE | sort")
    svc_ip = cluster.store.get("services", NS, "mongodb-geo")["spec"]["clusterIP"]
    assert code == 0 and out == (f"MONGODB_GEO_SERVICE_HOST={svc_ip}\nMONGODB_GEO_SERVICE_PORT=27017\n"
                                 "MONGODB_GEO_SERVICE_PORT_MONGODB_GEO=27017\n")  # the Service's port is named
    assert "KUBERNETES_SERVICE_HOST=" in run(cluster, geo, "env")[1]


def test_shell_grammar(cluster: SimCluster) -> None:
    fe = pod_name(cluster, "frontend")
    cases = {
        "a=1; b=\"$a two\"; echo \"$b\" '$b' ${c:-dflt} ${#b}": "1 two $b dflt 5\n",
        "false && echo no || echo yes; true; echo $?": "yes\n0\n",
        "for i in 3 1 2; do echo $i; done | sort | tr '\\n' ,": "1,2,3,",
        "if [ -f /etc/hosts ]; then echo file; else echo none; fi; [ -d /nope ] || echo nodir": "file\nnodir\n",
        "echo $(echo inner) $((2 * 21)); x=$(hostname | cut -c1-8); echo $x": f"inner 42\n{fe[:8]}\n",
        "echo saved > /tmp/f && cat /tmp/f; cat /tmp/f | wc -l": "saved\n1\n",
        "ls /etc | grep -c host": "2\n",
        "echo one two three | awk '{print $2}'; echo a:b | cut -d: -f2": "two\nb\n",
    }
    for script, want in cases.items():
        code, out, err = run(cluster, fe, "sh", "-c", script)
        assert (code, out) == (0, want), (script, out, err)
    assert run(cluster, fe, "sh", "-c", "exit 7") == (7, "", "")
    code, _, err = run(cluster, fe, "sh", "-c", "echo x > /var/run/secrets/kubernetes.io/serviceaccount/token")
    assert code == 1 and "Read-only file system" in err
    assert "1\n" in run(cluster, fe, "sh", "-c", "cat /nope 2>/dev/null; echo $?")[1]
    code, out, err = run(cluster, fe, "sh", "-c", "if then")
    assert code == 2 and "syntax error" in err
    # a script that would hold the cluster (unbounded loops, memory) is killed as the OOM killer would
    assert run(cluster, fe, "sh", "-c", "x=a; while :; do x=$x$x; done") == (137, "", "Killed\n")
    assert run(cluster, fe, "sh", "-c", "while :; do while :; do :; done; done")[0] == 137


def test_commands_an_image_lacks_fail_as_runc_and_the_shell_say(cluster: SimCluster) -> None:
    fe = pod_name(cluster, "frontend")
    code, _, err = run(cluster, fe, "nslookup", "mongodb-geo")  # the golang image has no dnsutils
    assert code == 126 and err == ('OCI runtime exec failed: exec failed: unable to start container process: exec: '
                                   '"nslookup": executable file not found in $PATH: unknown\n')
    assert run(cluster, fe, "sh", "-c", "nslookup x") == (127, "", "sh: 1: nslookup: not found\n")
    assert run(cluster, fe, "bash", "-c", "nslookup x")[2] == "bash: line 1: nslookup: command not found\n"
    mc = pod_name(cluster, "memcached-profile")
    assert run(cluster, mc, "ps")[0] == 126  # memcached's Debian slim has no procps
    dns = pod_name(cluster, "coredns", "kube-system")
    assert userland_of(cluster.store.get("pods", "kube-system", dns)["spec"]["containers"][0]["image"]).shell is None
    code, _, err = run(cluster, dns, "sh", "-c", "ls", namespace="kube-system")
    assert code == 126 and 'exec: "sh": executable file not found in $PATH' in err


def test_network_clients_reach_the_modelled_services(cluster: SimCluster, debug_pod: str) -> None:
    svc_ip = cluster.store.get("services", NS, "mongodb-geo")["spec"]["clusterIP"]
    code, out, _ = run(cluster, debug_pod, "nslookup", "mongodb-geo")
    assert code == 0 and out.endswith(f"Name:\tmongodb-geo.{NS}.svc.cluster.local\nAddress: {svc_ip}\n\n")
    code, out, _ = run(cluster, debug_pod, "nslookup", "no-such-service")
    assert code == 1 and "** server can't find no-such-service: NXDOMAIN" in out
    code, out, _ = run(cluster, debug_pod, "wget", "-qO-", "http://frontend:5000/hotels?inDate=2015-04-09&outDate=2015-04-10"
                                                          "&lat=37.7867&lon=-122.4075")
    assert code == 0 and json.loads(out)["type"] == "FeatureCollection"
    code, _, err = run(cluster, debug_pod, "wget", "-qO-", "http://frontend:5000/hotels")
    assert code == 1 and err == "wget: server returned error: HTTP/1.1 400 Bad Request\n"
    code, _, err = run(cluster, debug_pod, "wget", "-qO-", "http://search:8082/")
    assert code == 1 and "Connection reset by peer" in err  # gRPC only
    cluster.store.mutate("deployments.apps", NS, "frontend", lambda d: d["spec"].update(replicas=0))
    cluster.advance(30)
    code, _, err = run(cluster, debug_pod, "wget", "-qO-", "http://frontend:5000/")
    assert code == 1 and "Connection refused" in err


def test_process_table_and_resources(cluster: SimCluster, debug_pod: str) -> None:
    code, out, _ = run(cluster, debug_pod, "ps")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "PID   USER     TIME  COMMAND" and lines[1].endswith(" sleep 3600")
    assert lines[-1].endswith(" ps")
    geo = pod_name(cluster, "mongodb-geo")
    out = run(cluster, geo, "ps", "aux")[1]
    assert out.splitlines()[1].split()[1] == "1" and "mongod" in out.splitlines()[1]
    assert run(cluster, debug_pod, "free")[1].splitlines()[1].startswith("Mem:")
    assert "Mounted on" in run(cluster, debug_pod, "df", "-h")[1]
    assert run(cluster, debug_pod, "top", "-b", "-n1")[1].startswith("Mem: ")
    assert run(cluster, debug_pod, "date", "+%s")[1] == f"{int(cluster.clock.now())}\n"


def test_datastore_shells_answer_from_their_models(cluster: SimCluster) -> None:
    geo = pod_name(cluster, "mongodb-geo")
    code, _, err = run(cluster, geo, "mongo", "geo-db", "--eval", "db.stats()")
    assert code == 1 and "requires authentication" in err  # geo's mongod runs with --auth
    code, out, _ = run(cluster, geo, "sh", "-c", "mongo geo-db -u admin -p admin --authenticationDatabase admin "
                                                 "--eval 'db.stats()' | grep objects")
    assert code == 0 and out == '\t"objects" : 80,\n'
    code, out, _ = run(cluster, geo, "mongo", "-u", "admin", "-p", "admin", "--authenticationDatabase", "admin",
                       "--eval", "db.adminCommand('ping')")
    assert code == 0 and out.endswith('{\n\t"ok" : 1\n}\n')
    res = pod_name(cluster, "mongodb-reservation")
    assert run(cluster, res, "mongo", "reservation-db", "--eval", "db.getCollectionNames()")[1].endswith(
        '[ "number", "reservation" ]\n')


def test_dd_writes_the_file_it_counts(cluster: SimCluster, debug_pod: str) -> None:
    cluster.store.create("pods", {"metadata": {"name": "web", "namespace": NS},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:latest"}]}})
    cluster.advance(15)
    # kr8s's nginx fixture: 40 MiB from /dev/random into the docroot, coreutils' report on stderr
    code, out, err = run(cluster, "web", "dd", "if=/dev/random", "of=/usr/share/nginx/html/foo.dat", "bs=4M", "count=10")
    assert (code, out) == (0, ""), err
    assert err.startswith("10+0 records in\n10+0 records out\n41943040 bytes (42 MB, 40 MiB) copied, ")
    assert run(cluster, "web", "sh", "-c", "wc -c < /usr/share/nginx/html/foo.dat")[1].strip() == "41943040"
    # busybox's wording; a partial last block counts as one more record
    code, _, err = run(cluster, debug_pod, "sh", "-c", "echo hello-worlds | dd of=/tmp/x bs=4")
    assert code == 0 and err.startswith("3+1 records in\n3+1 records out\n13 bytes (13B) copied, ")
    assert run(cluster, debug_pod, "cat", "/tmp/x")[1] == "hello-worlds\n"
    assert run(cluster, debug_pod, "dd", "if=/nope", "of=/tmp/y") == (1, "", "dd: can't open '/nope': No such file or directory\n")
