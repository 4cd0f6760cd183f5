"""An application the farm can deploy: `apps/<name>/app.yaml` plus `manifests/*.yaml`."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from core.errors import ConfigurationError

APPS_DIR = Path(__file__).parent


class Application(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str  # e.g. hotel-reservation
    namespace: str  # the namespace it is deployed into (the agent's namespace)
    # Namespaces its manifests also deploy into (an operator's): deployed, waited for and checked
    # with the application; a manifest names its own namespace there.
    extra_namespaces: list[str] = []
    entrypoint: str  # the user-facing service, e.g. frontend
    load_generator: str  # the workload's deployment name; deleting it is never a fix
    # PromQL giving the client-side fraction of successful requests; `{window}` is replaced by
    # the window, e.g. "2m".
    client_success_query: str
    client_request_rate_query: str
    services: list[str]  # the deployments/statefulsets the app consists of
    manifests_dir: Path

    def manifest_files(self) -> list[Path]:
        return sorted(self.manifests_dir.glob("*.yaml"))


@cache
def load_application(name: str) -> Application:
    path = APPS_DIR / name / "app.yaml"
    if not path.is_file():
        known = sorted(p.parent.name for p in APPS_DIR.glob("*/app.yaml"))
        raise ConfigurationError(f"unknown application '{name}' (known: {', '.join(known)})")
    data = yaml.safe_load(path.read_text())
    data["manifests_dir"] = path.parent / "manifests"
    return Application.model_validate(data)
