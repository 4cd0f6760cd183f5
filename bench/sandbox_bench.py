"""What the agent's sandboxes cost: the kubectl sandbox per call (target: at most 20 ms on top of
kubectl's own start), and the agent's own sandboxed process (targets: at most 100 ms added per
trial start, at most 5 ms per tool call).

kubectl: the same kubectl commands against an emulated cluster with hotel-reservation deployed,
plain (the agent's kubeconfig, a private home) and through the bubblewrap sandbox the agent's tool
uses, alternating so both see the same cluster load; the median and p90 wall time per call of
each and the median overhead. Like is compared with like: when `kubectl` is a version dispatcher
(Google Cloud SDK's starts a `kubectl.1.NN` beside it as a second process, which it cannot find
in the sandbox), both modes run the newest of those binaries itself.

The agent's process (farm/agenthost): how long a session waits for its agent to start, in the
worker's thread as agents ran before (the baseline for "added"), in a new sandboxed process, and
in the spare process the worker starts ahead of the session (what a trial pays); the CPU an
agent process's start costs (measured unsandboxed: the sandbox's PID namespace hides its CPU time
from the caller); then the wall time of MCP tool calls and model calls made from the sandboxed
agent against the same calls made from the worker's process (model calls: through the session's
model proxy against the worker's client calling the scripted server directly). The sandboxed
agent's calls cross the relays from its own network to the worker's loopback, as in a session.
On a loaded machine the figures are noise; the load average is printed with them.

    .venv/bin/python bench/sandbox_bench.py [--calls 30] [--starts 8]
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

COMMANDS = (["version", "--client"], ["get", "pods"], ["get", "deploy", "geo", "-o", "json"])
PLUGIN = "bench.agent_bench_plugin"


def real_kubectl(binary: str) -> tuple[str, str]:
    """The binary that serves a call (and a note when it is not `binary`): a version dispatcher's
    newest versioned kubectl, else the binary itself."""
    resolved = str(Path(binary).resolve())
    versions = [p for p in glob.glob(resolved + ".*") if re.fullmatch(r".*\.\d+\.\d+", p) and os.access(p, os.X_OK)]
    if not versions:
        return resolved, ""
    newest = max(versions, key=lambda p: tuple(int(x) for x in p.rsplit(".", 2)[-2:]))
    return newest, (f"{resolved} dispatches to a versioned kubectl as a second process (not inside the sandbox): "
                    f"both modes run {newest}")


def bench_kubectl(cluster: Any, app: Any, calls: int) -> None:
    from farm.interface.kubectl import find_kubectl
    from farm.interface.sandbox import Sandbox

    binary, note = real_kubectl(find_kubectl())
    home = tempfile.mkdtemp(prefix="kubectl-home-")
    kubeconfig = cluster.agent_kubeconfig(app.namespace)
    sandbox = Sandbox(binary, kubeconfig)
    try:
        plain_env = {"PATH": "/usr/bin:/bin", "HOME": home, "KUBECONFIG": str(kubeconfig)}
        print(f"kubectl {binary}, {calls} calls per command and mode" + (f"\n  ({note})" if note else ""))
        print(f"{'command':34} {'plain ms':>9} {'p90':>6} {'sandbox ms':>11} {'p90':>6} {'overhead ms':>12}")
        overheads = []
        for cmd in COMMANDS:
            plain: list[float] = []
            boxed: list[float] = []
            full = ["--request-timeout=30s", f"--namespace={app.namespace}", *cmd]
            for i in range(calls + 2):
                for argv, env, out in (([binary, *full], plain_env, plain), (sandbox.wrap(full), {}, boxed)):
                    t0 = time.perf_counter()
                    proc = subprocess.run(argv, env=env, capture_output=True, cwd=home, stdin=subprocess.DEVNULL)
                    took = (time.perf_counter() - t0) * 1000
                    if proc.returncode != 0:
                        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode()[:300]}")
                    if i >= 2:  # the first calls fill the discovery caches
                        out.append(took)
            p_med, b_med = statistics.median(plain), statistics.median(boxed)
            p90 = statistics.quantiles(plain, n=10)[-1]
            b90 = statistics.quantiles(boxed, n=10)[-1]
            overheads.append(b_med - p_med)
            print(f"{' '.join(cmd):34} {p_med:9.1f} {p90:6.1f} {b_med:11.1f} {b90:6.1f} {b_med - p_med:12.1f}")
        worst = max(overheads)
        print(f"kubectl sandbox overhead per call: median {statistics.median(overheads):.1f} ms, worst command "
              f"{worst:.1f} ms (target <= 20 ms): {'OK' if worst <= 20 else 'OVER'}; "
              f"load average {os.getloadavg()[0]:.1f}")
    finally:
        sandbox.close()
        shutil.rmtree(home, ignore_errors=True)


def _cpu_ms(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, bytes]:
    """(CPU ms, wall ms, stdout) of one process, from the caller's rusage."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, cwd=cwd, stdin=subprocess.DEVNULL)
    wall = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[-3:])} failed: {proc.stderr.decode()[:300]}")
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000, wall, proc.stdout


def bench_kubectl_runtime(cluster: Any, app: Any, calls: int) -> None:
    """What each kubectl process of a session costs, before and after issue 29's changes, measured
    interleaved: the Go runtime's garbage collector off (GOGC) against the default, a session's
    first call in a cold kubectl home against one seeded from the warm discovery cache, and the
    farm's own read of an object (undo capture) by a kubectl process against the REST reader.
    CPU is measured on kubectl run unsandboxed with the sandbox's environment (the sandbox's PID
    namespace hides its CPU from the caller); the sandbox changes none of kubectl's work."""
    from farm.interface import warmcache
    from farm.interface.kubectl import Kubectl, Target, find_kubectl
    from farm.interface.sandbox import go_runtime_env

    binary, _ = real_kubectl(find_kubectl())
    kubeconfig = cluster.agent_kubeconfig(app.namespace)
    version = subprocess.run([binary, "version", "--client", "-o", "json"], capture_output=True, text=True).stdout
    go_version = re.search(r'"goVersion":\s*"([^"]+)"', version)
    tuned = go_runtime_env(go_version.group(1) if go_version else "")
    tuned_env = dict(zip(tuned[1::3], tuned[2::3], strict=True))
    home = tempfile.mkdtemp(prefix="kubectl-home-")
    base = {"PATH": "/usr/bin:/bin", "HOME": home, "KUBECONFIG": str(kubeconfig)}
    try:
        print(f"kubectl per process ({calls} interleaved calls each, median CPU ms; Go runtime "
              f"{' '.join(f'{k}={v}' for k, v in tuned_env.items())} against the default):")
        savings = []
        for cmd in COMMANDS[1:] + (["describe", "deploy", "geo"],):
            full = ["--request-timeout=30s", f"--namespace={app.namespace}", *cmd]
            default, gc_off = [], []
            for i in range(calls + 1):
                a = _cpu_ms([binary, *full], base, home)
                b = _cpu_ms([binary, *full], {**base, **tuned_env}, home)
                if "json" in cmd and a[2] != b[2]:  # table output carries ages, which move between calls
                    raise SystemExit(f"{' '.join(cmd)}: output differs with {tuned_env}")
                if i:
                    default.append(a[0])
                    gc_off.append(b[0])
            d, g = statistics.median(default), statistics.median(gc_off)
            savings.append(1 - g / d)
            print(f"  {' '.join(cmd):34} default {d:6.1f}  tuned {g:6.1f}  saved {100 * (1 - g / d):4.0f}%")
        print(f"Go runtime tuning saves {100 * statistics.median(savings):.0f}% of a kubectl call's CPU "
              f"(the same JSON); load average {os.getloadavg()[0]:.1f}")

        # a session's first call: a cold home against one seeded from the warm copy
        warm_home = tempfile.mkdtemp(prefix="kubectl-warm-")
        subprocess.run([binary, f"--namespace={app.namespace}", "get", "pods"], capture_output=True,
                       env={**base, "HOME": warm_home}, check=True)
        cold_ms, seeded_ms = [], []
        full = ["--request-timeout=30s", f"--namespace={app.namespace}", "get", "pods"]
        for _ in range(calls):
            for out, seed in ((cold_ms, False), (seeded_ms, True)):
                fresh = tempfile.mkdtemp(prefix="kubectl-first-")
                if seed:
                    shutil.copytree(Path(warm_home) / warmcache.CACHE, Path(fresh) / warmcache.CACHE,
                                    copy_function=shutil.copyfile)
                out.append(_cpu_ms([binary, *full], {**base, **tuned_env, "HOME": fresh}, fresh)[0])
                shutil.rmtree(fresh, ignore_errors=True)
        shutil.rmtree(warm_home, ignore_errors=True)
        print(f"a session's first kubectl call, median CPU ms: cold discovery cache {statistics.median(cold_ms):.1f}, "
              f"seeded from the warm copy {statistics.median(seeded_ms):.1f}")

        # the farm's own reads for undo: a kubectl process against the REST reader, same JSON
        kubectl = Kubectl(kubeconfig, app.namespace, binary=binary)
        try:
            target = Target("deployment", "geo")
            by_process, by_rest = [], []
            for _ in range(calls):
                t0 = time.perf_counter()
                slow = kubectl._get_json_kubectl(target)
                by_process.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                fast = kubectl.get_json(target)
                by_rest.append((time.perf_counter() - t0) * 1000)
                if slow != fast:
                    raise SystemExit("the REST reader read something else than kubectl get -o json")
        finally:
            kubectl.close()
        print(f"undo capture read (get deployment geo -o json), median wall ms: kubectl process in the sandbox "
              f"{statistics.median(by_process):.1f}, REST reader {statistics.median(by_rest):.1f}; "
              f"load average {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _ctx(url: str = "http://127.0.0.1:65531/mcp", token: str = "t", **options: Any) -> Any:
    from farm.agents.agent import AgentContext

    return AgentContext(trial_id="bench", namespace="hotel-reservation", mcp_url=url, mcp_token=token, options=options)


def _answered(proc: Any) -> dict[str, Any]:
    proc.wait(120)
    out = proc.outcome()
    if not out.answer or "result" not in out.answer:
        raise SystemExit(f"the agent's process failed: {out.answer} {out.stderr[-800:]}")
    return dict(out.answer["result"])


def bench_agent_start(starts: int) -> float:
    from farm.agenthost.process import AgentProcess
    from farm.agents.agent import agents

    agents.names()  # the worker has its agents loaded; the thread start measures the thread alone
    thread_ms, cold_ms, warm_ms = [], [], []
    for _ in range(starts):
        t0 = time.perf_counter()
        thread = threading.Thread(target=agents.create, args=("baseline",))
        thread.start()
        thread.join()
        thread_ms.append((time.perf_counter() - t0) * 1000)

        t0 = time.perf_counter()
        cold = AgentProcess([PLUGIN])
        cold.start("bench-noop", _ctx())
        _answered(cold)
        cold_ms.append((time.perf_counter() - t0) * 1000)

        warm = AgentProcess([PLUGIN]).spawn()
        if not warm.ready(120):  # the worker deploys the cluster meanwhile; the spare loads its imports
            raise SystemExit("the spare agent process did not get ready")
        t0 = time.perf_counter()
        warm.start("bench-noop", _ctx())
        _answered(warm)
        warm_ms.append((time.perf_counter() - t0) * 1000)
    cpu_ms = _start_cpu_ms(starts)
    t, c, w = (statistics.median(x) for x in (thread_ms, cold_ms, warm_ms))
    print(f"agent start ({starts} starts, median ms): worker thread {t:.1f}; new sandboxed process {c:.0f}; "
          f"spare sandboxed process {w:.1f}; CPU of one process start (unsandboxed) {cpu_ms:.0f} ms")
    added = w - t
    print(f"agent process start added per trial: {added:.1f} ms (target <= 100 ms): "
          f"{'OK' if added <= 100 else 'OVER'}; load average {os.getloadavg()[0]:.1f}")
    return added


def _start_cpu_ms(starts: int) -> float:
    """CPU of an agent process's start (its interpreter and imports), run without the sandbox so
    the caller's rusage sees it."""
    from farm.agenthost.sandbox import runner_command
    from farm.interface.sandbox import UNSAFE_ENV

    old = os.environ.get(UNSAFE_ENV)
    os.environ[UNSAFE_ENV] = "1"
    try:
        argv, env = runner_command([PLUGIN], env={})
    finally:
        if old is None:
            os.environ.pop(UNSAFE_ENV)
        else:
            os.environ[UNSAFE_ENV] = old
    import json

    request = json.dumps({"agent": "bench-noop", "context": _ctx().model_dump(mode="json")})
    spent = []
    for _ in range(starts):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(argv, env=env, input=request.encode(), capture_output=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return statistics.median(spent)


def bench_agent_calls(cluster: Any, app: Any, calls: int) -> float:
    from farm.agenthost.process import AgentProcess
    from farm.agenthost.relay import Relay
    from farm.interface import AgentInterface
    from farm.interface.client import ToolClient
    from farm.llm.client import LLMClient
    from farm.llm.proxy import ModelProxy
    from farm.llm.scripted import ScriptedLLM

    with ScriptedLLM([{"content": "pong"}], repeat_last=True) as llm, \
            AgentInterface(cluster, app.namespace, "bench") as iface:
        url, token = iface.url, iface.token
        direct = LLMClient("openai/scripted-model", api_base=llm.url)
        proxy = ModelProxy(LLMClient("openai/scripted-model", api_base=llm.url))
        endpoint, proxy_token = proxy.start()
        try:
            worker_tool, worker_model = [], []
            with ToolClient(url, token) as tools:
                tools.call("get_alerts")
                for _ in range(calls):
                    t0 = time.perf_counter()
                    tools.call("get_alerts")
                    worker_tool.append((time.perf_counter() - t0) * 1000)
            direct.complete([{"role": "user", "content": "ping"}])
            for _ in range(calls):
                t0 = time.perf_counter()
                direct.complete([{"role": "user", "content": "ping"}])
                worker_model.append((time.perf_counter() - t0) * 1000)
            # As a session runs it: the sandbox's own network, its two endpoints relayed to the worker's.
            agent = AgentProcess([PLUGIN]).spawn()
            assert agent.relay_dir is not None
            relays = [Relay(agent.relay_dir / "mcp.sock", int(url.split(":")[2].split("/")[0])).start(),
                      Relay(agent.relay_dir / "model.sock", int(endpoint.split(":")[2].split("/")[0])).start()]
            agent.start("bench-calls", _ctx(url, token, calls=calls + 1, model_calls=calls + 1,
                                            model_endpoint=endpoint, model_token=proxy_token).model_copy(
                update={"model": "openai/scripted-model"}))
            timings = _answered(agent)["transcript"][0]
            for relay in relays:
                relay.stop()
        finally:
            proxy.stop()
    boxed_tool, boxed_model = timings["tool"][1:], timings["model"][1:]  # the first call opens the connection
    wt, bt = statistics.median(worker_tool), statistics.median(boxed_tool)
    wm, bm = statistics.median(worker_model), statistics.median(boxed_model)
    print(f"{calls} calls each, median ms: MCP tool call (get_alerts) from the worker {wt:.1f}, from the sandboxed "
          f"agent {bt:.1f}; model call direct {wm:.1f}, through the model proxy from the sandboxed agent {bm:.1f}")
    tool_added, model_added = bt - wt, bm - wm
    print(f"agent process overhead per tool call: {tool_added:.1f} ms (target <= 5 ms): "
          f"{'OK' if tool_added <= 5 else 'OVER'}; per model call (the proxy's hop): {model_added:.1f} ms; "
          f"load average {os.getloadavg()[0]:.1f}")
    return tool_added


def main() -> None:
    from apps import load_application
    from clusters.handle import open_cluster
    from farm.deploy import deploy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30, help="calls per command and mode")
    parser.add_argument("--starts", type=int, default=8, help="agent process starts per mode")
    parser.add_argument("--only", choices=("kubectl", "agent"), help="run one part only")
    args = parser.parse_args()
    os.environ["FARM_AGENT_PLUGINS"] = PLUGIN
    app = load_application("hotel-reservation")
    cluster = open_cluster("sim", seed=1)
    try:
        deploy(cluster, app, app.namespace)
        if args.only != "agent":
            bench_kubectl(cluster, app, args.calls)
            bench_kubectl_runtime(cluster, app, args.calls)
        if args.only != "kubectl":
            bench_agent_start(args.starts)
            bench_agent_calls(cluster, app, args.calls)
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
