"""A farm started the way `docker compose up --scale worker=4` starts one: four workers at the
same moment on a fresh database, one of them unable to open its cluster for a while. The sweep
completes, nothing is recorded twice, the sick worker takes no claim until its cluster opens and
says it is unhealthy meanwhile, and no task fails in any log."""

from __future__ import annotations

import pytest

from farm.cli.cluster import worker_rows
from farm.testing.harness import audit, hotel_problems, write_spec
from tests.tasks.farmhelpers import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres, pytest.mark.timeout(600)]


def test_four_workers_cold_start_on_a_fresh_database(farm, tmp_path):
    names = ["w1", "w2", "w3"]
    for n in names:
        farm.start_worker(n)
    # The fourth cannot open its cluster for its first five tries (1 + 2 + 4 + 8 + 16 s of backoff).
    farm.start_worker("sick", cluster="faulty:sick", FARM_TEST_CLUSTER_FAULTS="open:5")
    spec = write_spec(tmp_path, "cold", hotel_problems(4), seeds=4)  # 16 trials
    farm.submit(spec)

    def sick_reported() -> bool:
        # What `farm cluster list` prints, read in-process: a CLI start per poll could miss the window.
        return any(r["worker"] == "sick" and r["status"] == "unhealthy" and "cannot open cluster" in r["detail"]
                   for r in worker_rows(farm.db_url, stale_after=180))

    wait_for(sick_reported, 120, "the sick worker to report itself unhealthy")
    took = farm.wait_settled("cold", 16, timeout=300)
    result = audit(farm, "cold")
    assert result.ok(), (result, farm.counts("cold"), took)
    assert farm.task_errors() == []
    # The sick worker subscribed to the claim queue only after its cluster opened, so it never
    # took a claim it had to hand back for want of a cluster.
    log = farm.log("sick").read_text()
    assert log.rindex("cannot open cluster") < log.index("serves farm.trials")
    assert "takes no trial" not in log
    print(f"cold start: 16 trials in {took:.1f} s, {result}")
