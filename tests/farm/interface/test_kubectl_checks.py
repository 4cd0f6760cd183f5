"""The agent's kubectl command checks: what is refused, with which reason, and what counts as a
change that is recorded and can be undone."""

from __future__ import annotations

import pytest

from core.errors import ToolError
from farm.interface.kubectl import Target, parse_command, targets_of

NS = "hotel-reservation"


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("get pods | grep geo", "shell operator"),
        ("get pods > /tmp/x", "shell operator"),
        ("get pods; delete pod x", "shell operator"),
        ("get pods && get svc", "shell operator"),
        ("exec -it geo-1 -- sh", "interactive"),
        ("exec geo-1 -ti -- sh", "interactive"),
        ("attach geo-1", "interactive terminal"),
        ("edit deployment geo", "editor"),
        ("port-forward svc/frontend 5000", "port-forward"),
        ("proxy", "proxy"),
        ("cp geo-1:/etc/passwd /tmp/p", "local files"),
        ("get pods -n chaos-mesh", "only reach namespace"),
        ("get pods --namespace=kube-system", "only reach namespace"),
        ("get pods -nkube-system", "only reach namespace"),
        ("get podchaos -A", "only reach namespace"),
        ("get pods --all-namespaces", "only reach namespace"),
        ("get pods --kubeconfig=/root/.kube/config", "cannot be overridden"),
        ("get pods --token abc", "cannot be overridden"),
        ("get pods --server=https://10.0.0.1", "cannot be overridden"),
        ("--context admin get pods", "cannot be overridden"),
        ("get pods --as=system:admin", "cannot be overridden"),
        ("apply -f /work/main/farm/problems/catalog/x.yaml", "local files"),
        ("get pods -w", "watching"),
        ("logs -f geo-1", "watching"),
        ("config view --raw", "kubeconfig is fixed"),
        ("", "empty command"),
        ("get pods 'unterminated", "quotes"),
        ("-o json", "no kubectl verb"),
    ],
)
def test_refused_commands_say_why(command: str, reason: str) -> None:
    with pytest.raises(ToolError) as info:
        parse_command(command, NS)
    assert reason in str(info.value)


def test_wait_verb_is_refused_only_on_a_virtual_clock() -> None:
    with pytest.raises(ToolError, match="wait tool"):
        parse_command("wait --for=condition=Ready pod/geo-1", NS, virtual_time=True)
    assert parse_command("wait --for=condition=Ready pod/geo-1", NS).verb == "wait"


@pytest.mark.parametrize(
    ("command", "mutating"),
    [
        ("get pods", False),
        ("kubectl describe pod geo-1", False),
        ("logs geo-1 --tail=20", False),
        (f"get pods -n {NS} -o wide", False),
        ("rollout status deployment/geo", False),
        ("rollout history deployment/geo", False),
        ("rollout undo deployment/geo", True),
        ("rollout restart deployment/geo", True),
        ("scale deployment geo --replicas=2", True),
        ("set env deployment/geo GEO_DB_PORT=27017", True),
        ("delete pod geo-1", True),
        ("patch svc geo -p '{\"spec\":{}}'", True),
        ("delete pod geo-1 --dry-run=client", False),
        # --dry-run as kubectl's GetDryRunStrategy reads it: a boolean spelling is the deprecated
        # form, and strconv.ParseBool's false spellings are real writes
        *[(f"delete pod geo-1 --dry-run={v}", True) for v in ("none", "false", "False", "FALSE", "F", "f", "0")],
        *[(f"delete pod geo-1 --dry-run={v}", False)
          for v in ("client", "server", "unchanged", "true", "True", "TRUE", "T", "t", "1")],
        ("delete pod geo-1 --dry-run", False),
        ("delete pod geo-1 --dry_run=server --dry-run=none", True),  # the last value wins, as in pflag
        ("delete pod geo-1 --dry-run=client --dry-run=0", True),
        ("label pod geo-1 a=b", True),
    ],
)
def test_mutating_commands_are_recognised(command: str, mutating: bool) -> None:
    assert parse_command(command, NS).mutating is mutating


@pytest.mark.parametrize("value", ["yes", "tRuE", "Client", "NONE", ""])
def test_a_dry_run_kubectl_would_refuse_is_refused(value: str) -> None:
    with pytest.raises(ToolError, match="not a dry-run strategy"):
        parse_command(f"delete pod geo-1 --dry-run={value}", NS)


@pytest.mark.parametrize("command", ["get pods --all-namespaces=True", "get pods -A=1", "get pods --all-namespaces=T",
                                     "get pods --all-namespaces=yes", "logs geo-1 --follow=TRUE", "exec geo-1 -i=t -- sh"])
def test_refused_switches_are_on_for_every_spelling_kubectl_reads_as_true(command: str) -> None:
    with pytest.raises(ToolError, match="refused"):
        parse_command(command, NS)


def test_refused_switches_may_be_turned_off_in_any_false_spelling() -> None:
    for value in ("false", "False", "FALSE", "F", "f", "0"):
        assert parse_command(f"get pods --all-namespaces={value}", NS).verb == "get"


def test_quoted_operators_are_arguments_not_shell() -> None:
    parsed = parse_command("get pods -l 'app in (geo,rate)' -o jsonpath='{.items[*].metadata.name}'", NS)
    assert parsed.verb == "get"
    assert parsed.flags["selector"] == "app in (geo,rate)"


def test_exec_without_terminal_is_allowed_and_stops_at_dashdash() -> None:
    parsed = parse_command("exec geo-1 -- ls -n /", NS)
    assert parsed.verb == "exec" and "namespace" not in parsed.flags and parsed.tokens[-3:] == ["ls", "-n", "/"]


def test_exec_is_a_mutation_without_undo() -> None:
    parsed = parse_command("exec geo-1 -c hotel-reserv-geo -- rm -rf /data", NS)
    assert parsed.mutating and not parsed.undoable
    assert parsed.exec_target() == "pod/geo-1 (container hotel-reserv-geo)"
    assert parse_command("exec deploy/geo -- kill 1", NS).exec_target() == "deploy/geo"
    scale = parse_command("scale deployment geo --replicas=2", NS)
    assert scale.mutating and scale.undoable


def test_rollout_status_does_not_watch() -> None:
    assert parse_command("rollout status deployment/geo", NS).tokens[-1] == "--watch=false"


def test_delete_does_not_wait_for_a_grace_period_only_the_wait_tool_can_pass() -> None:
    # on a virtual clock a deleted pod stays Terminating until time passes
    assert parse_command("delete pod geo-1", NS, virtual_time=True).tokens[-1] == "--wait=false"
    assert "--wait=false" not in parse_command("delete pod geo-1", NS).tokens  # live time: kubectl waits, as usual
    assert parse_command("drain node-1 --ignore-daemonsets", NS, virtual_time=True).tokens[-1] == "--timeout=1s"
    assert "--timeout=1s" not in parse_command("drain node-1 --ignore-daemonsets", NS).tokens
    assert parse_command("delete pod geo-1 --wait=true", NS, virtual_time=True).tokens[-1] == "--wait=true"


def test_stdin_manifest_is_the_only_file() -> None:
    parsed = parse_command("apply -f -", NS)
    assert parsed.uses_stdin and parsed.mutating


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("scale deployment geo --replicas=0", ["deployment/geo"]),
        ("scale deploy/geo --replicas=0", ["deployment/geo"]),
        ("rollout undo deployment/geo", ["deployment/geo"]),
        ("set env deployment/geo A=1", ["deployment/geo"]),
        ("set image deployment geo hotel-reserv-geo=img:2", ["deployment/geo"]),
        ("delete pods geo-1 geo-2", ["pod/geo-1", "pod/geo-2"]),
        ("delete po -l app=geo", ["pod (app=geo)"]),
        ("label pod geo-1 tier=db", ["pod/geo-1"]),
        ("create configmap extra --from-literal=a=b", ["configmap/extra"]),
        ("create secret generic creds --from-literal=a=b", ["secret/creds"]),
        ("patch svc geo --type=merge -p '{\"spec\":{}}'", ["service/geo"]),
        ("expose deployment geo --port=8083 --name=geo2", ["service/geo2"]),
        ("create service clusterip geo2 --tcp=80:8083", ["service/geo2"]),
        ("label pods --all=True tier=db", ["pod (all)"]),
        ("label pods --all=1 tier=db", ["pod (all)"]),
        ("label pods --all=F tier=db", []),
        ("taint nodes --all k=v:NoExecute", ["node (all)"]),
        ("cordon -l pool=a", ["node (pool=a)"]),
    ],
)
def test_targets_of_mutations(command: str, expected: list[str]) -> None:
    assert [str(t) for t in targets_of(parse_command(command, NS), None)] == expected


def test_targets_of_a_manifest() -> None:
    manifest = "kind: ConfigMap\nmetadata: {name: a}\n---\nkind: Deployment\nmetadata: {name: geo}\n"
    targets = targets_of(parse_command("apply -f -", NS), manifest)
    assert targets == [Target("configmap", "a"), Target("deployment", "geo")]
