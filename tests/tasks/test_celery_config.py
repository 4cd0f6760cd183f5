"""The long-task settings of the real Celery app (tasks/celery_app.py), pinned: a trial chain runs
for minutes to hours, and each of these is what keeps it from being lost or run twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.tasks.farmhelpers import ROOT

_DUMP = """
import json
from tasks.celery_app import app
c = app.conf
print(json.dumps({"acks_late": c.task_acks_late, "prefetch": c.worker_prefetch_multiplier,
                  "reject_on_worker_lost": c.task_reject_on_worker_lost, "soft": c.task_soft_time_limit,
                  "hard": c.task_time_limit, "visibility": c.broker_transport_options["visibility_timeout"],
                  "prefix": c.broker_transport_options.get("global_keyprefix")}))
"""


def _conf(**env: str) -> dict:
    """The configuration a worker started with this environment would run with."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("FARM_")}
    full.update(env, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", _DUMP], env=full, cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _assert_long_task_settings(c: dict) -> None:
    assert c["acks_late"] is True  # a message is acknowledged only when its task finished
    assert c["prefetch"] == 1  # a busy worker holds no second trial hostage
    assert c["reject_on_worker_lost"] is True  # a worker process that dies puts its message back
    assert 0 < c["soft"] < c["hard"]  # the task hears of its deadline before it is killed
    # Redis redelivers an unacknowledged message after the visibility timeout: below the hard
    # limit, a long trial still running would be handed to a second worker.
    assert c["visibility"] > c["hard"]


def test_the_app_runs_long_tasks_safely():
    from tasks.celery_app import app

    c = app.conf
    _assert_long_task_settings({
        "acks_late": c.task_acks_late, "prefetch": c.worker_prefetch_multiplier,
        "reject_on_worker_lost": c.task_reject_on_worker_lost, "soft": c.task_soft_time_limit,
        "hard": c.task_time_limit, "visibility": c.broker_transport_options["visibility_timeout"]})
    assert c.task_ignore_result is True  # results live in SQL


def test_limits_from_the_environment_keep_the_invariants():
    default = _conf()
    _assert_long_task_settings(default)
    assert (default["soft"], default["hard"]) == (3600, 3900) and default["prefix"] is None
    custom = _conf(FARM_SOFT_TIME_LIMIT="7200", FARM_HARD_TIME_LIMIT="9000", FARM_BROKER_KEYPREFIX="farm-a:")
    _assert_long_task_settings(custom)
    assert (custom["soft"], custom["hard"], custom["prefix"]) == (7200, 9000, "farm-a:")
    # A hard limit set below the soft one is raised above it rather than killing tasks early.
    inverted = _conf(FARM_SOFT_TIME_LIMIT="7200", FARM_HARD_TIME_LIMIT="60")
    _assert_long_task_settings(inverted)
    assert inverted["hard"] > inverted["soft"] == 7200
