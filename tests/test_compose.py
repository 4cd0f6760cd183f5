"""docker-compose.yml parses and its services carry the farm's environment."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_compose_names_the_farm_services():
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = doc["services"]
    for name in ("redis", "postgres", "minio", "flower", "sim-worker"):
        assert name in services, name
    assert services["sim-worker"]["command"][:3] == ["farm", "worker", "--cluster"]
    assert services["flower"]["command"][:4] == ["celery", "-A", "tasks", "flower"]
    for name in ("sim-worker", "flower", "kind-worker"):
        env = services[name]["environment"]
        for var in ("FARM_BROKER_URL", "FARM_DATABASE_URL", "FARM_ARTIFACTS", "AWS_ENDPOINT_URL"):
            assert env.get(var), f"{name} lacks {var}"
    assert services["sim-worker"]["environment"]["FARM_ARTIFACTS"].startswith("s3://")
    assert "/var/run/docker.sock:/var/run/docker.sock" in services["kind-worker"]["volumes"]
    # The worker service scales: no fixed container name or host port.
    assert "container_name" not in services["sim-worker"] and "ports" not in services["sim-worker"]
