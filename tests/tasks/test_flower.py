"""Flower on the farm's broker shows the workers and the trial tasks, with readable names and the
trial key as their argument (the claim task included), its API answers as the README says (open on
loopback, basic auth from FARM_FLOWER_AUTH), and `farm flower` keeps its history across restarts."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.conftest import free_port
from tests.tasks.farmhelpers import ROOT, farm_cmd, farm_env, kill_group, start_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres, pytest.mark.timeout(900)]
KEY = "hr-geo-image-tag-wrong|baseline|-|"  # seeds 0 and 1, then "|quiet"


def _get(url: str, auth: str | None = None):
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())


def _flower(env: dict[str, str], port: int, log: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "farm.cli", "flower", "--port", str(port), *extra], env=env,
                            cwd=ROOT, stdout=log.open("a"), stderr=subprocess.STDOUT, start_new_session=True)


def _answers(url: str, auth: str | None = None) -> bool:
    try:
        _get(url, auth)
        return True
    except urllib.error.HTTPError:
        return True  # up, and refusing
    except OSError:
        return False


def test_flower_shows_workers_and_trial_tasks_and_keeps_them(tmp_path, redis_prefix, pg_url, s3_endpoint):
    import boto3

    env = farm_env(redis_prefix, pg_url, s3_endpoint, tmp_path)
    env.pop("FLOWER_UNAUTHENTICATED_API", None)  # the README's command alone must open the API on loopback
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket="farm-test-artifacts")
    port = free_port()
    history = tmp_path / "flower-history.db"
    flower = _flower(env, port, tmp_path / "flower.log", "--history", str(history))
    worker = start_worker(env, "wf", tmp_path / "wf.log")
    base = f"http://127.0.0.1:{port}"
    try:
        spec = tmp_path / "flower.yaml"
        spec.write_text(yaml.safe_dump({"name": "flower-view", "problems": {"ids": ["hr-geo-image-tag-wrong"]},
                                        "agents": ["baseline"], "seeds": 2}))

        def worker_listed() -> bool:
            try:
                return any(name.startswith("wf@") for name in _get(f"{base}/api/workers?refresh=1"))
            except OSError:
                return False

        wait_for(worker_listed, 180, "Flower to list worker wf")
        assert farm_cmd(env, "sweep", "submit", str(spec)).returncode == 0

        def recorded() -> bool:
            tasks = _get(f"{base}/api/tasks")
            return sum(t.get("name") == "farm.record" and t.get("state") == "SUCCESS" for t in tasks.values()) == 2

        wait_for(recorded, 300, "both trials' record tasks in Flower")
        tasks = list(_get(f"{base}/api/tasks").values())
        names = {t["name"] for t in tasks}
        assert {"farm.claim_trial", "farm.deploy", "farm.inject", "farm.agent_session", "farm.oracle",
                "farm.record"} <= names
        for task in tasks:  # every task of the chain, the claim included, reads as the trial's key
            assert KEY in task["args"], task
        # One worker, two trials: a claim that found the cluster busy went back to the queue, and
        # kept its trial key through Celery's retry.
        assert any(t["name"] == "farm.claim_trial" and (t.get("retries") or 0) > 0 for t in tasks), \
            [(t["name"], t.get("state"), t.get("retries")) for t in tasks]
        deploy = next(t for t in tasks if t["name"] == "farm.deploy")
        assert deploy["worker"].startswith("wf@")
        seen = {t["uuid"] for t in tasks}

        kill_group(flower, signal.SIGTERM)  # Flower saves its state on SIGTERM
        kill_group(worker, signal.SIGTERM)
        assert history.exists() or any(tmp_path.glob("flower-history.db*")), "no history written"
        flower = _flower(env, port, tmp_path / "flower.log", "--history", str(history))
        wait_for(lambda: _answers(f"{base}/api/tasks"), 120, "Flower to start again")
        kept = _get(f"{base}/api/tasks")
        assert seen <= set(kept), f"lost across the restart: {seen - set(kept)}"
        assert any(t["name"] == "farm.record" and KEY in t["args"] for t in kept.values())
    finally:
        kill_group(worker)
        kill_group(flower)


def test_flower_api_takes_basic_auth_from_the_environment(tmp_path, redis_prefix, pg_url, s3_endpoint):
    env = farm_env(redis_prefix, pg_url, s3_endpoint, tmp_path, FARM_FLOWER_AUTH="farm:s3cret")
    port = free_port()
    flower = _flower(env, port, tmp_path / "flower.log", "--no-history")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(f"{base}/api/workers"), 120, "Flower to start")
        with pytest.raises(urllib.error.HTTPError) as refused:
            _get(f"{base}/api/workers")
        assert refused.value.code == 401
        with pytest.raises(urllib.error.HTTPError) as wrong:
            _get(f"{base}/api/workers", auth="farm:guess")
        assert wrong.value.code == 401
        assert isinstance(_get(f"{base}/api/workers", auth="farm:s3cret"), dict)
    finally:
        kill_group(flower)
    assert "s3cret" not in (tmp_path / "flower.log").read_text()


def test_flower_refuses_to_listen_beyond_loopback_without_auth(tmp_path, redis_prefix, pg_url, s3_endpoint):
    env = farm_env(redis_prefix, pg_url, s3_endpoint, tmp_path)
    env.pop("FARM_FLOWER_AUTH", None)
    out = subprocess.run([sys.executable, "-m", "farm.cli", "flower", "--address", "0.0.0.0", "--no-history"],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "FARM_FLOWER_AUTH" in out.stderr and "Traceback" not in out.stderr
