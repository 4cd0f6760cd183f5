"""The host's server for a local model (farm/llm/local_server.py): two worker processes share one
server; it outlives a user that exits while another still uses it, stops once the last one is gone
(even one killed without a goodbye), and the next user starts a fresh one. Real processes, the
real llama-cpp server, a state folder of the test's own (so the suite's shared server is untouched)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from core.errors import ConfigurationError
from farm.llm import local_server
from farm.llm.models import check_model, resolve

pytestmark = [pytest.mark.slow, pytest.mark.local_model]
NAME = "smollm2-135m"
ROOT = Path(__file__).resolve().parents[3]
# A worker process: asks for the model, prints the api_base, then keeps it until stdin closes.
WORKER = ("import sys\nfrom farm.llm import local_server\n"
          f"print(local_server.ensure({NAME!r}), flush=True)\nsys.stdin.read()\n")


def start_worker(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", WORKER], cwd=ROOT, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), f"worker said {url!r}"
    return proc, url


def serves(url: str) -> bool:
    try:
        return httpx.get(f"{url}/models", timeout=2).json()["data"][0]["id"] == NAME
    except (httpx.HTTPError, ValueError, KeyError, IndexError):
        return False


def wait_until(cond, timeout: float = 60.0) -> bool:  # noqa: ANN001
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.2)
    return False


def test_workers_share_one_server_that_stops_when_the_last_is_gone(
        local_model_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "FARM_LOCAL_LLM_DIR": str(tmp_path), "FARM_LOCAL_LLM_IDLE_S": "1"}
    a, url_a = start_worker(env)
    b, url_b = start_worker(env)
    try:
        assert url_a == url_b and url_a != local_model_url  # one server in this folder, not the suite's
        states = list(tmp_path.glob("*.json"))
        assert len(states) == 1
        supervisor = json.loads(states[0].read_text())["supervisor_pid"]
        users = sorted(int(p.name) for p in tmp_path.glob("*.users/*"))
        assert users == sorted([a.pid, b.pid])
        # a exits (its atexit hook releases): b still uses the server past the idle grace
        a.communicate("", timeout=30)
        assert not wait_until(lambda: not serves(url_a), timeout=3)
        # b dies without a goodbye: the supervisor sees no live user and stops the server
        b.send_signal(signal.SIGKILL)
        b.wait(timeout=10)
        assert wait_until(lambda: not serves(url_a) and not local_server._alive(supervisor))
        assert not states[0].exists()
        # the next user starts a fresh one
        c, url_c = start_worker(env)
        assert serves(url_c)
        c.communicate("", timeout=30)
        assert wait_until(lambda: not serves(url_c))
    finally:
        for proc in (a, b):
            if proc.poll() is None:
                proc.kill()


def test_a_dead_server_is_replaced(local_model_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FARM_LOCAL_LLM_DIR", str(tmp_path))
    monkeypatch.setenv("FARM_LOCAL_LLM_IDLE_S", "1")
    first = local_server.ensure(NAME)
    supervisor = int(str((local_server.running(NAME) or {})["supervisor_pid"]))
    os.kill(supervisor, signal.SIGTERM)
    assert wait_until(lambda: local_server.running(NAME) is None)  # withdrawn before it stops serving
    assert wait_until(lambda: not serves(first))
    second = local_server.ensure(NAME)
    assert serves(second) and local_server.running(NAME) is not None
    local_server.release(NAME)
    assert wait_until(lambda: local_server.running(NAME) is None)


def test_resolution_of_model_strings(local_model_url: str) -> None:
    assert resolve("openai/gpt-4o", "http://x/v1").litellm_model == "openai/gpt-4o"
    local = resolve(f"local/{NAME}")
    assert (local.litellm_model, local.api_base, local.served_locally) == (f"openai/{NAME}", local_model_url, True)
    assert local.call_options["tool_choice"] == "auto"  # else chatml-function-calling hides the tools
    assert check_model("local/nope") and check_model(f"local/{NAME}") is None and check_model("openai/o3") is None


def test_a_model_whose_package_is_missing_says_how_to_install_it() -> None:
    ghost = local_server.LocalModel("ghost", "no_such_weights_package", "ghost.gguf")
    with pytest.raises(ConfigurationError, match=r"no_such_weights_package is not installed.*setup.sh --local"):
        local_server.weights_path(ghost)


def test_a_worker_arriving_while_the_server_is_busy_reuses_it(local_model_url: str) -> None:
    # the host's shared server, busy with one worker's completion while another worker asks for it:
    # the newcomer gets the same server and the completion in flight is not cut
    import threading

    answer: dict = {}
    body = {"model": NAME, "max_tokens": 48, "temperature": 0.7,
            "messages": [{"role": "user", "content": "Write a long story about a pod."}]}
    busy = threading.Thread(target=lambda: answer.update(
        httpx.post(f"{local_model_url}/chat/completions", json=body, timeout=600).json()))
    busy.start()
    time.sleep(0.5)
    worker, url = start_worker({**os.environ})
    worker.communicate("", timeout=30)
    busy.join(timeout=600)
    assert url == local_model_url
    assert answer["usage"]["completion_tokens"] > 0 and answer["choices"][0]["message"]["content"]
