"""Test plugins (loaded through FARM_PLUGINS=tests.tasks.plugins), for the farm's failure paths:

- cluster provider `faulty`: an emulated cluster whose API server refuses what a fault plan names
  (FARM_TEST_CLUSTER_FAULTS or the `faults` option, e.g. "deploy:2,inject:1,reset:1": each kind
  fails its first N times in this process; a kind without a count always fails):
  `deploy` refuses creating Deployments, `inject` refuses changing Services (the fault of
  hr-frontend-service-targetport-wrong), `reset` makes the reset fail, `reopen` makes opening a
  replacement cluster fail (the first cluster of a process always opens), `open` makes any
  opening fail, the first included (a worker that cannot get a cluster);
The `probe` agent these tests use is an agent plugin: tests/fakes/probe_agent.py
(FARM_AGENT_PLUGINS), which runs only in the agent's own process.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from clusters.handle import ClusterProvider, providers
from core.errors import ClusterUnavailable, ResetError

FAULTS_ENV = "FARM_TEST_CLUSTER_FAULTS"
_lock = threading.Lock()
_budget: dict[str, int | None] | None = None  # kind -> failures left (None: always), per process
_opened = 0


def set_faults(spec: str) -> None:
    """Replace this process's fault plan (in-process tests); resets the count of opened clusters."""
    global _budget, _opened
    with _lock:
        _budget, _opened = {}, 0
        for item in filter(None, spec.split(",")):
            kind, _, count = item.strip().partition(":")
            _budget[kind] = int(count) if count else None


def _plan(spec: str | None) -> None:
    """The plan comes from the `faults` option, else the environment, once per process."""
    if spec is not None:
        if _budget is None:
            set_faults(spec)
    elif _budget is None:
        set_faults(os.environ.get(FAULTS_ENV, ""))


def _take(kind: str) -> bool:
    """True when this occurrence of `kind` must fail (and the budget is spent by one)."""
    with _lock:
        plan = _budget or {}
        if kind not in plan:
            return False
        left = plan[kind]
        if left is None:
            return True
        if left <= 0:
            return False
        plan[kind] = left - 1
        return True


def _refusal(method: str, url: str) -> str | None:
    path = url.split("?", 1)[0]
    if method == "POST" and path.endswith("/deployments") and "/apis/apps/v1/" in path:
        return "deploy"
    if method in ("PUT", "PATCH") and "/api/v1/namespaces/" in path and "/services/" in path:
        return "inject"
    return None


def _faulty_class(base: type) -> type:
    class FaultyHandle(base):  # type: ignore[misc, valid-type]
        """The emulated cluster, with an API server that refuses what the fault plan names."""

        def api_client(self) -> Any:
            from kubernetes.client.exceptions import ApiException

            client = super().api_client()
            call_api = client.call_api

            def refusing(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
                kind = _refusal(method.upper(), url)
                if kind and _take(kind):
                    exc = ApiException(status=503, reason="Service Unavailable")
                    exc.body = json.dumps({"kind": "Status", "status": "Failure", "code": 503,
                                           "message": f"test cluster refuses this {kind} request"})
                    raise exc
                return call_api(method, url, *args, **kwargs)

            client.call_api = refusing
            return client

        def reset(self) -> None:
            if _take("reset"):
                raise ResetError(f"test cluster {self.name}: reset refused by the fault plan")
            super().reset()

    return FaultyHandle


@providers.register("faulty")
class FaultyProvider(ClusterProvider):
    def open(self, name: str, faults: str | None = None, **options: Any) -> Any:
        global _opened
        from clusters.emulated import SimProvider

        _plan(faults)
        with _lock:
            _opened += 1
            first = _opened == 1
        if _take("open"):
            raise ClusterUnavailable(f"test cluster {name}: it does not open (fault plan)")
        if not first and _take("reopen"):
            raise ClusterUnavailable(f"test cluster {name}: no replacement opens (fault plan)")
        handle = SimProvider().open(name, **options)
        handle.__class__ = _faulty_class(type(handle))
        return handle
