"""CoreDNS's template plugin in the emulated cluster's resolver: a `template ... { match REGEX
rcode NXDOMAIN }` block in kube-system/coredns answers NXDOMAIN for the names it matches, in its
zones, before the kubernetes plugin; other names still resolve, and removing the block restores
them."""

from __future__ import annotations

from farm.pytest_plugin import SimClusters
from kubesim.store import Obj

NS = "demo"
BLOCK = ('    template ANY ANY web.demo.svc.cluster.local {\n        match "^web\\.demo\\.svc\\.cluster\\.local\\.$"\n'
         "        rcode NXDOMAIN\n        fallthrough\n    }\n")


def service(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}}


def test_an_nxdomain_template_hides_only_the_names_it_matches(sim_clusters: SimClusters) -> None:
    cluster = sim_clusters.in_process(seed=2)
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, service("web"), service("api")])
    net = cluster.network
    assert net.lookup(None, "web.demo")[0] is not None
    original = cluster.store.get("configmaps", "kube-system", "coredns")["data"]["Corefile"]
    at = original.index("    kubernetes ")

    def put(corefile: str) -> None:
        def edit(o: Obj) -> None:
            o["data"]["Corefile"] = corefile
        cluster.store.mutate("configmaps", "kube-system", "coredns", edit)

    put(original[:at] + BLOCK + original[at:])
    svc, err = net.lookup(None, "web.demo")
    assert svc is None and err is not None and err.endswith("no such host")
    assert net.lookup(None, "web.demo.svc.cluster.local.")[0] is None
    assert net.lookup(None, "api.demo")[0] is not None  # another name of the zone's parent resolves
    put(original)
    assert net.lookup(None, "web.demo")[0] is not None
