# ruff: noqa: F811  (pytest fixtures imported from test_real_support and test_eks)
"""`farm cluster list|create|delete`: workers' registrations read from SQL; kind through the fake
kind, EKS through moto in server mode."""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from farm.cli.cluster import app

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_eks import aws, moto_url  # noqa: E402,F401
from test_real_support import TcpRelay, api_server, fakes_on_path  # noqa: E402,F401

runner = CliRunner()


def test_list_shows_owners_and_health(sqlite_url: str) -> None:
    from results.db import engine_for
    from results.ledger import register_worker, worker_heartbeat

    engine = engine_for(sqlite_url)
    register_worker(engine, "w-sim-1", "sim:sim", "host-a", 101)
    register_worker(engine, "w-kind-1", "kind:farm-1", "host-b", 202)
    worker_heartbeat(engine, "w-kind-1", "busy", "trial-42", healthy=False, detail="readyz answered 500")
    register_worker(engine, "w-eks-1", "eks:prod", "host-c", 303)
    from sqlalchemy import update
    from sqlmodel import Session

    from results.models import Worker

    with Session(engine) as session:  # a worker that stopped sending heartbeats ten minutes ago
        session.execute(update(Worker).where(Worker.name == "w-eks-1").values(heartbeat_at=time.time() - 600))
        session.commit()
    result = runner.invoke(app, ["list", "--db", sqlite_url, "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["worker"]: r for r in map(json.loads, result.output.splitlines())}
    assert rows["w-sim-1"]["cluster"] == "sim:sim" and rows["w-sim-1"]["status"] == "healthy"
    assert rows["w-kind-1"]["status"] == "unhealthy" and rows["w-kind-1"]["trial"] == "trial-42"
    assert rows["w-eks-1"]["status"] == "stale"
    table = runner.invoke(app, ["list", "--db", sqlite_url], env={"COLUMNS": "200"})
    assert table.exit_code == 0
    for text in ("w-kind-1", "kind:farm-1", "unhealthy (readyz answered 500)", "stale", "host-b:202"):
        assert text in table.output


def _listed(db: str, worker: str) -> dict[str, Any]:
    result = runner.invoke(app, ["list", "--db", db, "--json"])
    assert result.exit_code == 0, result.output
    return next(r for r in map(json.loads, result.output.splitlines()) if r["worker"] == worker)


def _wait_for(db: str, worker: str, status: str, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        row = _listed(db, worker)
        if row["status"] == status or time.monotonic() > deadline:
            return row
        time.sleep(0.05)


def test_a_worker_heartbeat_keeps_reporting_an_unhealthy_cluster(api_server: dict[str, Any], sqlite_url: str,
                                                                   tmp_path: Path) -> None:
    """The owner's heartbeat thread for real against SQLite, with a real cluster handle whose API
    server becomes unreachable: every heartbeat between two health probes still says so."""
    from clusters.real import KubeconfigClusterHandle
    from clusters.emulated import write_kubeconfig
    from farm.owner import ClusterOwner
    from results.artifact_store import open_store
    from results.db import engine_for

    relay = TcpRelay(api_server["kubernetes"])
    kubeconfig = write_kubeconfig(tmp_path / "relay.kubeconfig", relay.url, api_server["ca_cert"],
                                  api_server["admin_token"], "farm-admin")
    handle = KubeconfigClusterHandle("kind", "beat", kubeconfig, workdir=tmp_path, app_namespaces=set())
    # lease 0.8 s: a beat every 0.2 s, a health probe on the first beat and every 8th after it.
    owner = ClusterOwner("w-beat", handle.ref, engine_for(sqlite_url), open_store(str(tmp_path / "artifacts")),
                         lease_s=0.8, reap=False)
    owner.cluster = handle
    owner.open()
    try:
        assert _wait_for(sqlite_url, "w-beat", "healthy")["status"] == "healthy"
        relay.cut()
        row = _wait_for(sqlite_url, "w-beat", "unhealthy")
        assert row["status"] == "unhealthy", row
        assert "kind:beat: API unreachable" in row["detail"]
        # Three probe periods (24 beats): every row read says unhealthy, while the heartbeat
        # itself stays fresh (the worker is alive; its cluster is not).
        deadline = time.monotonic() + 3 * 8 * 0.2
        reads = 0
        while time.monotonic() < deadline:
            row = _listed(sqlite_url, "w-beat")
            assert row["status"] == "unhealthy" and "API unreachable" in row["detail"], row
            assert row["heartbeat_age_s"] < 2, row
            reads += 1
            time.sleep(0.05)
        assert reads > 10
        table = runner.invoke(app, ["list", "--db", sqlite_url], env={"COLUMNS": "400"})
        assert table.exit_code == 0
        assert "unhealthy (kind:beat: API unreachable" in table.output
        relay.mend()
        assert _wait_for(sqlite_url, "w-beat", "healthy")["detail"] == "readyz: ok"
    finally:
        owner.close()
        relay.cut()
    assert _listed(sqlite_url, "w-beat")["status"] == "stopped"


def test_list_with_no_workers(sqlite_url: str) -> None:
    result = runner.invoke(app, ["list", "--db", sqlite_url])
    assert result.exit_code == 0 and "no workers registered" in result.output


def test_create_and_delete_kind(fakes_on_path: dict[str, Path], api_server: dict[str, Any],
                                monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FAKE_KIND_SERVER", api_server["kubernetes"])
    monkeypatch.setenv("FAKE_KIND_TOKEN", api_server["admin_token"])
    monkeypatch.setenv("FAKE_KIND_CA", base64.b64encode(api_server["ca_cert"].encode()).decode())
    monkeypatch.setenv("FARM_STATE_DIR", str(tmp_path / "state"))
    created = runner.invoke(app, ["create", "kind:cli-1", "--workers", "1", "--no-stack",
                                  "--preload", "social-network"])
    assert created.exit_code == 0, created.output
    assert "kind:cli-1: healthy (readyz: ok)" in created.output
    log = fakes_on_path["kind"]
    load = next(json.loads(line) for line in log.read_text().splitlines() if json.loads(line)[0] == "load")
    assert {"library/mongo:4.4.6", "yg397/openresty-thrift:xenial", "deathstarbench/wrk2-client:latest",
            "ghcr.io/sregym/social-network-assets:v1"} <= set(load)
    assert len(load) == len(set(load))  # each image once
    refused = runner.invoke(app, ["delete", "kind:cli-1"], input="n\n")
    assert refused.exit_code == 1 and "not deleted" in refused.output
    assert not any(json.loads(line)[0] == "delete" for line in log.read_text().splitlines())
    deleted = runner.invoke(app, ["delete", "kind:cli-1", "--yes"])
    assert deleted.exit_code == 0, deleted.output
    assert ["delete", "cluster", "--name", "cli-1"] in [json.loads(line) for line in log.read_text().splitlines()]


def test_delete_eks_asks_then_tears_down(aws: str) -> None:
    from clusters.eks import EksProvider

    EksProvider(farm="sre-farm", poll_seconds=0.01).ensure("cli-eks")
    raw = boto3.client("eks", region_name="eu-west-1")
    assert "cli-eks" in raw.list_clusters()["clusters"]
    result = runner.invoke(app, ["delete", "eks:cli-eks"], input="y\n")
    assert result.exit_code == 0, result.output
    assert "eks:cli-eks deleted" in result.output
    assert "cli-eks" not in raw.list_clusters()["clusters"]


def test_errors_are_one_line(aws: str) -> None:
    result = runner.invoke(app, ["delete", "eks:never-made", "--yes"])
    assert result.exit_code == 1 and "EKS cluster 'never-made' does not exist in eu-west-1" in result.output
    sim = runner.invoke(app, ["create", "sim"])
    assert sim.exit_code == 2 and "only kind:NAME and eks:NAME" in sim.output
    bad = runner.invoke(app, ["create", "kind:"])
    assert bad.exit_code == 1 and "needs a name" in bad.output
