"""Flower on the farm's broker shows the workers and the trial tasks, with readable names and
the trial key as their argument."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest
import yaml

from tests.conftest import free_port
from tests.tasks.farmhelpers import ROOT, farm_cmd, farm_env, kill_group, start_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres, pytest.mark.timeout(900)]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def test_flower_shows_workers_and_trial_tasks(tmp_path, redis_prefix, pg_url, s3_endpoint):
    import boto3

    env = farm_env(redis_prefix, pg_url, s3_endpoint, tmp_path, FLOWER_UNAUTHENTICATED_API="true")
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket="farm-test-artifacts")
    port = free_port()
    flower = subprocess.Popen([sys.executable, "-m", "farm.cli", "flower", "--port", str(port)], env=env, cwd=ROOT,
                              stdout=(tmp_path / "flower.log").open("w"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    worker = start_worker(env, "wf", tmp_path / "wf.log")
    try:
        spec = tmp_path / "flower.yaml"
        spec.write_text(yaml.safe_dump({"name": "flower-view", "problems": {"ids": ["hr-geo-image-tag-wrong"]},
                                        "agents": ["baseline"]}))
        base = f"http://127.0.0.1:{port}"

        def worker_listed() -> bool:
            try:
                return any(name.startswith("wf@") for name in _get(f"{base}/api/workers?refresh=1"))
            except OSError:
                return False

        wait_for(worker_listed, 180, "Flower to list worker wf")
        assert farm_cmd(env, "sweep", "submit", str(spec)).returncode == 0

        def recorded() -> bool:
            tasks = _get(f"{base}/api/tasks")
            return any(t.get("name") == "farm.record" and t.get("state") == "SUCCESS" for t in tasks.values())

        wait_for(recorded, 300, "the trial's record task in Flower")
        tasks = _get(f"{base}/api/tasks").values()
        names = {t["name"] for t in tasks}
        assert {"farm.claim_trial", "farm.deploy", "farm.inject", "farm.agent_session", "farm.oracle",
                "farm.record"} <= names
        deploy = next(t for t in tasks if t["name"] == "farm.deploy")
        assert "hr-geo-image-tag-wrong|baseline|-|0|quiet" in deploy["args"]
        assert deploy["worker"].startswith("wf@")
    finally:
        kill_group(worker)
        kill_group(flower)
