"""What the mitigation oracle counts as the farm's own load generator, and how it narrows the
applications' client-side queries to it (issue 23): pure functions, every application's queries."""

from __future__ import annotations

import re

import pytest

from apps.application import APPS_DIR, load_application
from farm.oracles.mitigation import _program, scoped

APPS = sorted(p.parent.name for p in APPS_DIR.glob("*/app.yaml"))
PODS = ["wrk2-load-6c9f-abcde", "load.generator-0"]


@pytest.mark.parametrize("app", APPS)
def test_every_series_selector_of_every_query_is_narrowed_to_the_pods(app: str) -> None:
    application = load_application(app)
    for query in (application.client_success_query, application.client_request_rate_query):
        narrowed = scoped(query.replace("{window}", "2m"), PODS)
        selectors = re.findall(r"\{[^{}]*\}", narrowed)
        assert selectors and all(s.startswith('{pod=~"load[.]generator-0|wrk2-load-6c9f-abcde",') for s in selectors), \
            narrowed
        # what the selectors held before is all still there
        assert narrowed.replace('pod=~"load[.]generator-0|wrk2-load-6c9f-abcde",', "") == query.replace("{window}", "2m")


def test_no_pod_is_never_an_unscoped_query() -> None:
    with pytest.raises(ValueError, match="no load generator pod"):
        scoped('sum(rate(wrk2_requests_total{namespace="x"}[2m]))', [])


TEMPLATE = {"containers": [{"name": "wrk2", "image": "deathstarbench/wrk2-client:latest", "command": ["/bin/sh", "-c"],
                            "args": ["wrk -R 100 http://frontend:5000"],
                            "volumeMounts": [{"name": "wrk2-script", "mountPath": "/scripts"}]}],
            "volumes": [{"name": "wrk2-script", "configMap": {"name": "wrk2-payload-script"}}]}


def test_a_pod_of_the_template_runs_its_program_with_what_admission_adds() -> None:
    pod = {**TEMPLATE, "nodeName": "worker-1", "serviceAccountName": "default",
           "containers": [{**TEMPLATE["containers"][0], "imagePullPolicy": "Always", "volumeMounts": [
               *TEMPLATE["containers"][0]["volumeMounts"],
               {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
           "volumes": [*TEMPLATE["volumes"], {"name": "kube-api-access-x7k2p", "projected": {"sources": []}}]}
    assert _program(pod) == _program(TEMPLATE)


@pytest.mark.parametrize("change", [
    lambda s: s["containers"][0].update(args=["wrk -R 100 http://frontend-direct:5000"]),
    lambda s: s.update(hostAliases=[{"ip": "10.96.0.42", "hostnames": ["frontend"]}]),
    lambda s: s["containers"][0].update(env=[{"name": "HOST", "value": "frontend-direct"}]),
    lambda s: s["volumes"][0]["configMap"].update(name="my-script"),
], ids=["target", "host-alias", "env", "script"])
def test_a_pod_aimed_elsewhere_does_not_run_the_generators_program(change) -> None:  # type: ignore[no-untyped-def]
    import copy

    pod = copy.deepcopy(TEMPLATE)
    change(pod)
    assert _program(pod) != _program(TEMPLATE)
