"""Services restarting mid-sweep, and workers stopped or killed mid-trial: in every case the
sweep completes with exactly one recorded attempt per trial, every artifact in S3, nothing lost
and nothing stranded.
- Redis killed and started empty (every claim and chain message gone);
- PostgreSQL stopped (immediate: every connection dropped) and started again;
- the S3 endpoint down while trials record: artifacts wait in the workers' spools;
- a worker told to stop (SIGTERM) mid-trial exits cleanly and hands its trial back;
- RabbitMQ as the broker."""

from __future__ import annotations

import shutil
import signal
import subprocess
import uuid

import pytest

from farm.testing.harness import audit, hotel_problems, write_spec
from tests.tasks.farmhelpers import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres, pytest.mark.timeout(600)]

SWEEP_TIMEOUT_S = 360


def _finished(farm, sweep: str) -> int:
    return farm.counts(sweep).get("finished", 0)


def _start(farm, tmp_path, sweep: str, trials_per_problem: int, workers: int = 2, agent: str = "slow-baseline"):
    for i in range(workers):
        farm.start_worker(f"w{i}", FARM_TEST_AGENT_SLEEP="1")
    spec = write_spec(tmp_path, sweep, hotel_problems(3), seeds=trials_per_problem, agent=agent)
    farm.submit(spec)
    return 3 * trials_per_problem


def _settled_and_audited(farm, sweep: str, total: int):
    took = farm.wait_settled(sweep, total, SWEEP_TIMEOUT_S)
    result = audit(farm, sweep)
    assert result.ok(), (result, farm.counts(sweep), f"{took:.0f} s")
    return result


def test_redis_restarted_empty_mid_sweep(farm, redis_server, tmp_path):
    # 6 trials: when two have finished, two are in flight and two queued, whose claims the flush loses.
    total = _start(farm, tmp_path, "redis-flush", 2)
    wait_for(lambda: _finished(farm, "redis-flush") >= 2, 180, "two trials to finish")
    redis_server.restart(down_s=2)  # without persistence: every queued claim and chain step is gone
    _settled_and_audited(farm, "redis-flush", total)
    status = farm.farm("sweep", "status", "redis-flush")
    assert f"finished {total}" in status.stdout, status.stdout


def test_postgres_restarted_mid_sweep(farm, pg_server, tmp_path):
    total = _start(farm, tmp_path, "pg-restart", 2)  # 6 trials: two done, four to run across the restart
    wait_for(lambda: _finished(farm, "pg-restart") >= 2, 180, "two trials to finish")
    pg_server.restart(down_s=3)
    _settled_and_audited(farm, "pg-restart", total)


def test_s3_down_while_trials_record(farm, moto_s3, tmp_path):
    total = _start(farm, tmp_path, "s3-down", 2)  # 6 trials: one before the outage, at least two during it
    wait_for(lambda: _finished(farm, "s3-down") >= 1, 180, "a first trial to finish")
    moto_s3.stop()
    before = _finished(farm, "s3-down")
    # Trials keep finishing while the endpoint is down: their documents wait in the spools.
    wait_for(lambda: _finished(farm, "s3-down") >= before + 2, 180, "trials to finish with S3 down")
    spool = farm.folder / "spool"
    assert any(spool.rglob("*.spooled")), "nothing was spooled while S3 was down"
    moto_s3.start()
    farm.wait_settled("s3-down", total, SWEEP_TIMEOUT_S)
    wait_for(lambda: not any(spool.rglob("*.spooled")), 60, "the spools to drain")
    _settled_and_audited(farm, "s3-down", total)


def test_sigterm_hands_the_trial_back_and_exits(farm, tmp_path):
    from sqlmodel import Session, select

    from core.states import AttemptState
    from results.models import Attempt

    farm.start_worker("stays", FARM_TEST_AGENT_SLEEP="1")
    leaving = farm.start_worker("leaves", FARM_TEST_AGENT_SLEEP="6")
    spec = write_spec(tmp_path, "sigterm", hotel_problems(3), seeds=2, agent="slow-baseline")  # 6 trials
    farm.submit(spec)

    def leaving_in_session() -> bool:
        with Session(farm.engine()) as s:
            return s.exec(select(Attempt).where(Attempt.worker == "leaves", Attempt.state == AttemptState.RUNNING,
                                                Attempt.phase == "agent_session")).first() is not None

    wait_for(leaving_in_session, 180, "the leaving worker to be in an agent session")
    with Session(farm.engine()) as s:
        victim = s.exec(select(Attempt).where(Attempt.worker == "leaves", Attempt.state == AttemptState.RUNNING)).one()
    leaving.send_signal(signal.SIGTERM)  # the Celery main process: a warm shutdown
    assert leaving.wait(timeout=120) == 0
    farm.workers.pop("leaves")
    result = _settled_and_audited(farm, "sigterm", 6)
    with Session(farm.engine()) as s:
        ended = s.get(Attempt, victim.id)
    # It either finished the step it was in and handed the trial back, or recorded it before exiting.
    assert ended.state in (AttemptState.LOST, AttemptState.RECORDED), ended.state
    if ended.state == AttemptState.LOST:
        assert "handed back" in (ended.error or "")
    assert result.attempts == 6 + (ended.state == AttemptState.LOST)


def _rabbitmqctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture()
def rabbit_vhost():
    if shutil.which("rabbitmqctl") is None:
        pytest.skip("rabbitmqctl is not installed")
    vhost = f"farmtest-{uuid.uuid4().hex[:8]}"
    made = _rabbitmqctl("add_vhost", vhost)
    if made.returncode != 0:
        pytest.skip(f"cannot make a RabbitMQ vhost: {made.stderr.strip()}")
    _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    yield vhost
    _rabbitmqctl("delete_vhost", vhost)


def test_rabbitmq_as_the_broker(farm, rabbit_vhost, tmp_path):
    farm.broker_url = f"amqp://guest:guest@127.0.0.1:5672/{rabbit_vhost}"
    total = _start(farm, tmp_path, "rabbit", 2, agent="baseline")  # 6 trials
    _settled_and_audited(farm, "rabbit", total)
    assert farm.task_errors() == []
    farm.stop_all()  # before the vhost goes
