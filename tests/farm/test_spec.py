"""Every malformed spec gets one error naming the file, the field and why — and nothing is
written: no database, no artifact folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.errors import SpecError
from farm.spec import load_spec, select_problems

ROOT = Path(__file__).resolve().parents[2]
GOOD = {
    "name": "hotel-smoke",
    "problems": {"apps": ["hotel-reservation"]},
    "agents": ["baseline"],
    "seeds": 2,
}


def write(tmp_path: Path, data: object, raw: str | None = None) -> Path:
    p = tmp_path / "spec.yaml"
    p.write_text(raw if raw is not None else yaml.safe_dump(data))
    return p


def test_good_spec_loads(tmp_path):
    spec = load_spec(write(tmp_path, GOOD))
    assert spec.seeds == [0, 1] and spec.noise == [False] and spec.agents[0].name == "baseline"
    assert select_problems(spec), "the example selection must match catalog problems"


def test_shipped_examples_load():
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        load_spec(path)


def _with(**changes: object) -> dict:
    d = dict(GOOD)
    for k, v in changes.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    return d


MALFORMED = [
    ("not yaml", None, "name: [unclosed", "(file)", "not valid YAML"),
    ("not a mapping", ["a", "b"], None, "(top level)", "YAML mapping"),
    ("missing name", _with(name=None), None, "name", "required"),
    ("bad name", _with(name="Hotel Smoke!"), None, "name", "lowercase"),
    ("unknown field", _with(colour="blue"), None, "colour", "not a known field"),
    ("empty selection", _with(problems={}), None, "problems", "at least one of"),
    ("unknown problem id", _with(problems={"ids": ["no-such-problem"]}), None, "problems.ids[0]", "unknown problem"),
    ("unknown layer", _with(problems={"layers": ["firmware"]}), None, "problems.layers", "unknown layer"),
    ("selects nothing", _with(problems={"apps": ["hotel-reservation"], "tags": ["no-such-tag-xyz"]}), None,
     "problems", "selects no problem"),
    ("unknown agent", _with(agents=["sherlock"]), None, "agents[0].name", "unknown agent"),
    ("model agent without models", _with(agents=["react"]), None, "models", "needs a model"),
    ("negative seeds", _with(seeds=[-1]), None, "seeds", "non-negative"),
    ("zero seed count", _with(seeds=0), None, "seeds", "at least 1"),
    ("duplicate seeds", _with(seeds=[1, 1]), None, "seeds", "twice"),
    ("bad model string", _with(models=["open ai/gpt 4"]), None, "models[0].name", "litellm model string"),
    ("duplicate model", _with(models=["openai/gpt-4o", {"name": "openai/gpt-4o", "temperature": 1}]), None,
     "models[1]", "give the second a label"),
    ("key in a model entry", _with(models=[{"name": "openai/gpt-4o", "api_key": "sk-x"}]), None,
     "models[0].api_key", "not a known field"),
    ("key as api_key_env", _with(models=[{"name": "openai/gpt-4o", "api_key_env": "sk-abc123"}]), None,
     "models[0].api_key_env", "environment variable"),
    ("bad reasoning effort", _with(models=[{"name": "openai/o3", "reasoning_effort": "max"}]), None,
     "models[0].reasoning_effort", "'minimal', 'low'"),
    ("negative price", _with(models=[{"name": "openai/x", "price": {"input_per_mtok": -1, "output_per_mtok": 1}}]),
     None, "models[0].price.input_per_mtok", "greater than or equal"),
    ("unpriced model under a cost cap", _with(agents=["react"], models=["openai/my-local-model"], cost_cap_usd=10),
     None, "models[0].price", "no known price"),
    ("pair with an unknown agent", _with(agents=["react"], models=["openai/gpt-4o"],
                                         pairs=[{"agent": "stratus", "model": "openai/gpt-4o"}]), None,
     "pairs[0].agent", "not an agent label"),
    ("pair with an unknown model", _with(agents=["react"], models=["openai/gpt-4o"],
                                         pairs=[{"agent": "react", "model": "openai/o3"}]), None,
     "pairs[0].model", "not a model label"),
    ("same agent twice alike", _with(agents=["react", "react"], models=["openai/gpt-4o"]), None, "agents[1]",
     "distinct label"),
    ("unknown local model", _with(models=["local/gpt-5-tiny"]), None, "models[0].name",
     "no local model 'gpt-5-tiny' (known: local/smollm2-135m)"),
    ("unknown local judge", _with(judge="local/nope"), None, "judge", "no local model 'nope'"),
    ("negative limit", _with(limits={"max_steps": -3}), None, "limits.max_steps", "greater than 0"),
    ("unknown limit", _with(limits={"max_beers": 3}), None, "limits.max_beers", "not a known field"),
    ("concurrency for absent model", _with(models=["openai/gpt-4o"], concurrency={"openai/o3": 2}), None,
     "concurrency.openai/o3", "not in models"),
    ("negative cost cap", _with(cost_cap_usd=-5), None, "cost_cap_usd", "greater than 0"),
    ("noise wrong type", _with(noise="sometimes"), None, "noise", ""),
    ("secret in options", _with(agents=[{"name": "baseline", "options": {"api_key": "sk-x"}}]), None,
     "agents[0].options", "environment"),
    ("bad tool mode", _with(agents=[{"name": "baseline", "tool_mode": "verbose"}]), None, "agents[0].tool_mode",
     "raw"),
    ("too few agent processes", _with(limits={"processes": 4}), None, "limits.processes", "greater than or equal"),
    ("agent memory in GiB", _with(limits={"memory_mib": "2Gi"}), None, "limits.memory_mib", "integer"),
]


@pytest.mark.parametrize("label,data,raw,field,reason", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_spec_is_one_clear_error(tmp_path, label, data, raw, field, reason):
    path = write(tmp_path, data, raw)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    err = info.value
    assert err.path == str(path)
    assert err.field == field, f"{label}: named field {err.field!r}"
    assert reason.lower() in err.reason.lower(), f"{label}: reason {err.reason!r}"
    assert str(path) in str(err) and field in str(err)


def test_cli_writes_nothing_for_a_bad_spec(tmp_path):
    path = write(tmp_path, _with(agents=["sherlock"]))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "farm.cli", "run", str(path), "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert "agents[0].name" in proc.stderr and "unknown agent 'sherlock'" in proc.stderr
    assert proc.stderr.count("error:") == 1
    assert not out.exists(), "a rejected spec must not create the output folder"


WRITES_NOTHING = [m for m in MALFORMED if m[0] in {
    "not yaml", "not a mapping", "missing name", "unknown field", "unknown problem id", "unknown agent",
    "model agent without models", "bad model string", "negative cost cap", "secret in options",
    "concurrency for absent model"}]


@pytest.mark.parametrize("command", ["run", "submit"])
@pytest.mark.parametrize("label,data,raw,field,reason", WRITES_NOTHING, ids=[m[0] for m in WRITES_NOTHING])
def test_no_command_writes_anything_for_a_bad_spec(tmp_path, monkeypatch, command, label, data, raw, field, reason):
    """`farm run` and `farm sweep submit` refuse every kind of malformed spec with one error and
    leave no database, artifact folder or output folder behind (cwd, --out, FARM_DATABASE_URL)."""
    from typer.testing import CliRunner

    from farm.cli import app

    spec_dir, work = tmp_path / "spec", tmp_path / "work"
    spec_dir.mkdir()
    work.mkdir()
    path = write(spec_dir, data, raw)
    monkeypatch.chdir(work)
    db = work / "elsewhere" / "farm.sqlite"
    monkeypatch.setenv("FARM_DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("FARM_ARTIFACTS", str(work / "artifacts"))
    args = ["run", str(path), "--out", str(work / "out")] if command == "run" else ["sweep", "submit", str(path)]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 2, f"{label}: {out.output}"
    assert out.output.count("error:") == 1 and field in out.output, out.output
    assert list(work.iterdir()) == [], f"{label}: {command} wrote {list(work.rglob('*'))}"
    assert [p.name for p in spec_dir.iterdir()] == ["spec.yaml"]
