"""Feature-flag faults: flagd flags of astronomy-shop and train-ticket (a config map holding the
flagd JSON, picked up when flagd restarts), and env-var switches such as hotel-reservation's
SEARCH_BACKEND_VERSION latent bug."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import yaml

from clusters.handle import ClusterHandle
from clusters.kube import Kube
from injectors.fault import MISSING, ConfigMapKeyMutation, Params, require
from injectors.injector import Injection, faults
from injectors.objects import Ref
from injectors.workload import RESTARTED_AT


class FlagParams(Params):
    flag: str
    variant: str = "on"
    configmap: str = "flagd-config"
    key: str = "demo.flagd.json"
    restart: str | None = "flagd"  # the flagd workload, restarted so that it reads the file


@faults.register("feature-flag-enabled")
class FeatureFlagEnabled(ConfigMapKeyMutation):
    """Switches a flagd flag's defaultVariant (e.g. paymentFailure → 100%), the way the
    OpenTelemetry demo's fault flags are meant to be used."""

    Params = FlagParams

    def rewrite(self, text: str) -> str:
        doc = self._load(text)
        flags = doc.get("flags", {})
        require(self.p.flag in flags, f"flagd has no flag {self.p.flag}")
        variants = flags[self.p.flag].get("variants", {})
        require(self.p.variant in variants, f"flag {self.p.flag} has no variant {self.p.variant} ({', '.join(variants)})")
        flags[self.p.flag]["defaultVariant"] = self.p.variant
        if self.p.key.endswith((".yaml", ".yml")):
            return yaml.safe_dump(doc, sort_keys=False)
        return json.dumps(doc, indent=2)

    def _load(self, text: str) -> dict[str, Any]:
        # flagd reads JSON or YAML; the key's extension says which (JSON is YAML anyway).
        return yaml.safe_load(text) if self.p.key.endswith((".yaml", ".yml")) else json.loads(text)

    def still_in_place(self, current: Any, injection: Any) -> bool:
        if current == MISSING:
            return False
        try:
            flag = self._load(current)["flags"][self.p.flag]
        except (ValueError, KeyError, yaml.YAMLError):
            return False
        return flag.get("defaultVariant") == self.p.variant

    def _restart(self, cluster: ClusterHandle, namespace: str, value: Any) -> None:
        if not self.p.restart:
            return
        kube = Kube.of(cluster)
        kind, _ = kube.workload(namespace, self.p.restart)
        annotation = None if value == MISSING else value
        kube.patch(kind, namespace, self.p.restart,
                   {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: annotation}}}}})

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        injection = super().inject(cluster, namespace)
        if self.p.restart:
            kube = Kube.of(cluster)
            kind, obj = kube.workload(namespace, self.p.restart)
            annotations = obj["spec"]["template"].get("metadata", {}).get("annotations") or {}
            injection.saved["restarted_before"] = annotations.get(RESTARTED_AT, MISSING)
            injection.saved["reader"] = str(Ref(kind, namespace, self.p.restart))
            when = dt.datetime.fromtimestamp(cluster.now(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            self._restart(cluster, namespace, when)
        return injection

    def restart_targets(self, injection: Injection) -> list[str]:
        """flagd, which reads the flag file when it starts: a fixed file must survive it."""
        reader = injection.saved.get("reader")
        return [reader] if reader else []

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        super().recover(cluster, injection)
        if self.p.restart:
            self._restart(cluster, injection.namespace, injection.saved.get("restarted_before", MISSING))
