"""A whole trial of the claude-code adapter through farm/trial/'s chain on an emulated cluster: the
CLI (the fake `claude`, which speaks the Anthropic Messages API) runs in the agent's sandbox with
the session's model proxy as its only model endpoint, in front of the faulty provider. The
provider's key, held by the worker (`api_key_env`), reaches no file, command line, environment,
context or artifact of the agent's; a provider that keeps failing ends the attempt as the
provider's (phase `provider`), not as the agent's error."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from core.states import END_SUBMITTED
from farm.agenthost import process as process_mod
from farm.dispatcher import submit
from farm.llm.faulty import FaultyProvider
from farm.llm.scripted import tool_plan
from farm.pytest_plugin import SimClusters
from farm.spec import SweepSpec
from farm.trial import run_all, start_run
from results import ledger
from results.artifact_store import LocalArtifactStore
from results.db import engine_for
from results.models import Attempt, Trial
from tests.farm.agents.cli_fakes import observe_handoff, sandboxed_fake

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]
PROBLEM = "hr-geo-image-tag-wrong"
KEY = "sk-worker-held-provider-key-5c3b"
PLAN = tool_plan([("kubectl", {"command": "get pods"}),
                  ("submit_diagnosis", {"text": "geo runs an image tag that does not exist."})], finish="Done.")


def _trial(sim_clusters: SimClusters, tmp_path: Path, name: str, provider: FaultyProvider) -> tuple[Any, Any, Any]:
    engine = engine_for(f"sqlite:///{tmp_path / f'{name}.sqlite'}")
    store = LocalArtifactStore(tmp_path / f"{name}-artifacts")
    cluster = sim_clusters.served(seed=3)
    spec = SweepSpec(name=name, problems={"ids": [PROBLEM]},
                     agents=[{"name": "claude-code", "options": {
                         "max_backoff_retries": 1, "max_backoff_s": 0.05,
                         "executable": str(sandboxed_fake("claude", tmp_path))}}],
                     models=[{"name": "openai/cli-e2e-model", "api_base": provider.url, "api_key_env": "CLI_E2E_KEY"}],
                     limits={"max_steps": 6, "wall_time_s": 300})
    sub = submit(engine, spec)
    claim = ledger.claim(engine, sub.to_run[0], "e2e-worker", cluster.ref)
    assert claim is not None
    run = start_run(engine, claim, cluster, store)
    assert run is not None
    run_all(run)
    with Session(engine) as s:
        return run, s.exec(select(Trial)).one(), s.exec(select(Attempt)).all()


def test_a_claude_code_trial_through_the_model_proxy(sim_clusters: SimClusters, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLI_E2E_KEY", KEY)
    contexts, commands = observe_handoff(monkeypatch)
    process_mod.discard_spare()
    with FaultyProvider(answer=PLAN) as provider:
        run, trial, attempts = _trial(sim_clusters, tmp_path, "e2e-cli", provider)
        requests = list(provider.requests)
    assert trial.state == "finished" and trial.end_reason == END_SUBMITTED, [a.error for a in attempts]
    assert len(requests) == 3 and all(r["authorized"] for r in requests)  # the worker's client, with its key
    assert trial.tokens_in > 0 and trial.steps == 3  # the worker's count of the model calls
    assert run.interface.record.diagnosis and "image tag" in run.interface.record.diagnosis
    assert commands and all("--unshare-net" in argv for argv, _ in commands)
    assert contexts and contexts[0].options["model_endpoint"].startswith("http://127.0.0.1:")
    folder = Path(attempts[0].artifacts_uri.removeprefix("file://"))
    # A compressed artifact (the cluster snapshot) is searched as the text it holds.
    written = {p.name: (gzip.decompress(p.read_bytes()).decode(errors="replace") if p.suffix == ".gz"
                        else p.read_text(errors="replace")) for p in folder.rglob("*") if p.is_file()}
    assert "transcript.json" in written
    seen = {**written, "the agent's context": contexts[0].model_dump_json(),
            "the agent process's command line and environment": json.dumps(commands)}
    for where, text in seen.items():
        assert KEY not in text, f"the provider's key reached {where}"
    process_mod.discard_spare()


def test_a_failing_provider_ends_a_claude_code_attempt_as_the_providers(sim_clusters: SimClusters, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLI_E2E_KEY", KEY)
    process_mod.discard_spare()
    with FaultyProvider({"*": "auth"}, answer=PLAN) as provider:
        run, trial, attempts = _trial(sim_clusters, tmp_path, "e2e-cli-auth", provider)
    assert trial.state == "infra_failed"  # refused credentials: given up at once, outside n
    assert [a.error_phase for a in attempts] == ["provider"] and "refused the credentials" in (attempts[0].error or "")
    assert KEY not in (attempts[0].error or "")
    process_mod.discard_spare()
