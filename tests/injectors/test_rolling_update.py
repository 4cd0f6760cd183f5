"""rolling-update-misconfigured's strategy check, as SREGym's RollingUpdateMitigationOracle scales
maxUnavailable (rounded down) and maxSurge (rounded up): a strategy passes only when a rollout
keeps a replica available and can make progress."""

from __future__ import annotations

import pytest

from injectors.app_batch import strategy_preserves_availability


def spec(max_unavailable: object, max_surge: object, replicas: int = 3, kind: str = "RollingUpdate") -> dict:
    return {"replicas": replicas, "strategy": {"type": kind, "rollingUpdate": {
        "maxUnavailable": max_unavailable, "maxSurge": max_surge}}}


@pytest.mark.parametrize(("strategy", "ok"), [
    (spec("100%", "0%"), False),  # the injected one: every replica drained at once
    (spec(3, 0), False),
    (spec("0%", "0%"), False),  # no progress possible
    (spec("25%", "25%"), True),  # the default: floor(0.75) = 0 unavailable, ceil(0.75) = 1 surge
    (spec("66%", "0%"), True),  # floor(1.98) = 1 of 3
    (spec(1, 0), True),
    (spec("25%", "25%", kind="Recreate"), False),
    ({"replicas": 3}, True),  # no strategy: the API's defaults
    (spec("50%", "0%", replicas=0), False),
])
def test_only_a_strategy_that_keeps_a_replica_and_progresses_passes(strategy: dict, ok: bool) -> None:
    assert strategy_preserves_availability(strategy) is ok
