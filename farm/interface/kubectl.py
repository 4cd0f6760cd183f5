"""The agent's kubectl: one command, parsed without a shell, checked against what an agent may do,
run as a real kubectl process with the agent's namespace-scoped kubeconfig and a bare
environment. Mutating commands capture the objects they touch first, so they can be undone."""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from farm.errors import ConfigurationError, ToolError

# Verbs that need a terminal or reach outside the namespace's API (the farm's disk, a local port).
REFUSED_VERBS = {
    "attach": "attach needs an interactive terminal",
    "edit": "edit opens an editor; use patch, set, scale or apply -f - with the manifest argument",
    "port-forward": "port-forward is not available to agents",
    "proxy": "proxy is not available to agents",
    "cp": "cp reads and writes local files, which agents cannot reach",
    "debug": "debug creates privileged debugging pods, which agents may not",
    "config": "the kubeconfig is fixed for this session",
    "plugin": "kubectl plugins are not available",
    "certificate": "certificate approval is not available to agents",
    "completion": "shell completion is not useful here",
    "kustomize": "kustomize reads local directories, which agents cannot reach",
    "alpha": "alpha commands are not available",
}
# Flags that would switch credentials or cluster.
REFUSED_FLAGS = (
    "--kubeconfig", "--token", "--server", "-s", "--context", "--cluster", "--user", "--as",
    "--as-group", "--as-uid", "--username", "--password", "--certificate-authority",
    "--client-certificate", "--client-key", "--insecure-skip-tls-verify", "--tls-server-name",
)
MUTATING_VERBS = {
    "apply", "create", "delete", "patch", "replace", "scale", "set", "label", "annotate",
    "autoscale", "expose", "run", "cordon", "uncordon", "drain", "taint",
}
MUTATING_ROLLOUT = {"undo", "restart", "pause", "resume"}
# Verbs that change state the farm cannot capture: `exec` runs a command inside a container (it may
# edit files, kill processes, flush caches), so it is recorded as a mutation with no undo.
OPAQUE_MUTATING_VERBS = {"exec"}
# Flags that take a separate value, so that value is not mistaken for a verb or a name.
VALUE_FLAGS = {
    "-n", "--namespace", "-l", "--selector", "-o", "--output", "-c", "--container", "-f",
    "--filename", "-p", "--patch", "--field-selector", "--type", "--replicas", "--since",
    "--tail", "--sort-by", "--timeout", "--image", "--port", "--target-port", "--name",
    "--to-revision", "--grace-period", "--from-literal", "--from-file", "--overrides",
    "--env", "-e", "--limits", "--requests", "--min", "--max", "--cpu-percent", "--protocol",
    "--current-replicas", "--resource-version", "--since-time", "--template", "-L",
    "--label-columns", "--for", "--dry-run", "--subresource", "--chunk-size", "--output-watch-events",
}
SHELL_OPERATORS = {"|", "||", "&", "&&", ";", ";;", "<", ">", ">>", "<<", "(", ")", "&>", ">&", "|&"}
# Fields the server owns: a captured object stripped of them can be created or replaced again.
_SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation",
                  "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds")
# Resource aliases, so captures use one spelling.
_ALIASES = {
    "po": "pod", "pods": "pod", "deploy": "deployment", "deployments": "deployment",
    "svc": "service", "services": "service", "cm": "configmap", "configmaps": "configmap",
    "secrets": "secret", "sts": "statefulset", "statefulsets": "statefulset", "ds": "daemonset",
    "daemonsets": "daemonset", "rs": "replicaset", "replicasets": "replicaset",
    "no": "node", "nodes": "node", "pvc": "persistentvolumeclaim",
    "persistentvolumeclaims": "persistentvolumeclaim", "hpa": "horizontalpodautoscaler",
    "horizontalpodautoscalers": "horizontalpodautoscaler", "quota": "resourcequota",
    "resourcequotas": "resourcequota", "ep": "endpoints", "netpol": "networkpolicy",
    "networkpolicies": "networkpolicy", "sa": "serviceaccount", "serviceaccounts": "serviceaccount",
    "jobs": "job", "ing": "ingress", "ingresses": "ingress", "limitranges": "limitrange",
    "pv": "persistentvolume", "persistentvolumes": "persistentvolume",
}


def find_kubectl() -> str:
    """FARM_KUBECTL, else the first kubectl on PATH."""
    path = os.environ.get("FARM_KUBECTL") or shutil.which("kubectl")
    if not path:
        raise ConfigurationError("no kubectl found: put kubectl on PATH or set FARM_KUBECTL")
    return path


@dataclass
class Parsed:
    """A checked command: the tokens to pass to kubectl and what they mean."""

    tokens: list[str]
    verb: str
    positionals: list[str]  # non-flag words after the verb (up to `--`)
    flags: dict[str, str] = field(default_factory=dict)  # last value of each flag seen
    mutating: bool = False
    uses_stdin: bool = False

    @property
    def undoable(self) -> bool:
        """A mutation whose objects can be captured before and restored after."""
        return self.mutating and self.verb not in OPAQUE_MUTATING_VERBS

    def exec_target(self) -> str:
        """What an `exec` ran in: "pod/NAME" (or the TYPE/NAME given), with its container if named."""
        first = self.positionals[0] if self.positionals else "?"
        target = first if "/" in first else f"pod/{first}"
        container = self.flags.get("-c") or self.flags.get("--container")
        return f"{target} (container {container})" if container else target


def _flag_name(token: str) -> str:
    return token.split("=", 1)[0]


def parse_command(command: str, namespace: str, *, virtual_time: bool = False, also: tuple[str, ...] = ()) -> Parsed:
    """Parse and check one kubectl command; raise ToolError with the reason when refused. `also`:
    the application's other namespaces (an operator's), reachable with -n."""
    if not command or not command.strip():
        raise ToolError("empty command: give one kubectl command, e.g. 'get pods'")
    if "\n" in command.strip():
        raise ToolError("one command per call: the command contains a line break")
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as exc:
        raise ToolError(f"cannot parse the command ({exc}); check the quotes") from None
    for tok in tokens:
        if tok in SHELL_OPERATORS or (tok and set(tok) <= set("|&;<>()")):
            raise ToolError(
                f"refused: '{tok}' is a shell operator; this tool runs one kubectl command without a "
                "shell (no pipes, redirects, ';' or '&&'); filter with -l, --field-selector, -o jsonpath"
            )
    if tokens and tokens[0] == "kubectl":
        tokens = tokens[1:]
    if not tokens:
        raise ToolError("empty command: give one kubectl command, e.g. 'get pods'")

    verb = ""
    positionals: list[str] = []
    flags: dict[str, str] = {}
    i = 0
    after_dashdash = False
    while i < len(tokens):
        tok = tokens[i]
        if after_dashdash:
            i += 1
            continue
        if tok == "--":
            after_dashdash = True
        elif tok.startswith("-") and tok != "-":
            name = _flag_name(tok)
            if "=" in tok:
                flags[name] = tok.split("=", 1)[1]
            elif name in VALUE_FLAGS and i + 1 < len(tokens):
                flags[name] = tokens[i + 1]
                i += 1
            elif name.startswith("-n") and not name.startswith("--") and len(name) > 2:
                flags["-n"] = name[2:]  # -nNAMESPACE
            else:
                flags[name] = "true"
            _check_flag(name, tok)
        elif not verb:
            verb = tok
        else:
            positionals.append(tok)
        i += 1

    if not verb:
        raise ToolError("no kubectl verb found: give a command such as 'get pods' or 'describe pod NAME'")
    if verb in REFUSED_VERBS:
        raise ToolError(f"refused: {REFUSED_VERBS[verb]}")
    allowed = (namespace, *also)
    for key in ("-n", "--namespace"):
        if key in flags and flags[key] not in allowed:
            raise ToolError(
                f"refused: this session can only reach namespace{'s' if also else ''} "
                f"{', '.join(repr(n) for n in allowed)}, not '{flags[key]}'"
            )
    for key in ("-A", "--all-namespaces"):
        if key in flags and flags[key] != "false":
            raise ToolError(f"refused: this session can only reach namespace '{namespace}'; drop {key}")
    interactive = {"-i", "-t", "-it", "-ti", "--stdin", "--tty", "--attach"}
    if verb in ("exec", "run") and any(f in flags and flags[f] != "false" for f in interactive):
        raise ToolError(f"refused: {verb} with an interactive terminal (-i/-t) is not available; "
                        "run a single non-interactive command instead")
    if any(f in flags and flags[f] != "false" for f in ("-w", "--watch", "--watch-only")) or (
        verb == "logs" and any(f in flags for f in ("-f", "--follow"))
    ):
        raise ToolError("refused: watching or following never returns; use the wait tool, then ask again")
    if verb == "wait" and virtual_time:
        raise ToolError("refused: on this cluster time passes only through the wait tool; "
                        "call wait(seconds), then check the condition with get")

    uses_stdin = False
    if verb != "logs":
        for key in ("-f", "--filename", "-k", "--kustomize"):
            if key in flags:
                if key in ("-f", "--filename") and flags[key] == "-":
                    uses_stdin = True
                else:
                    raise ToolError(
                        "refused: local files are not reachable; pass the manifest text in the "
                        "'manifest' argument and use '-f -'"
                    )

    mutating = verb in MUTATING_VERBS or verb in OPAQUE_MUTATING_VERBS or (
        verb == "rollout" and bool(positionals) and positionals[0] in MUTATING_ROLLOUT
    )
    if flags.get("--dry-run", "none") not in ("none", "false"):
        mutating = False
    if verb == "rollout" and positionals and positionals[0] == "status" and "--watch" not in flags:
        # `rollout status` watches by default; report the current status instead.
        tokens = [*tokens, "--watch=false"]
    return Parsed(tokens, verb, positionals, flags, mutating, uses_stdin)


def _check_flag(name: str, token: str) -> None:
    if name in REFUSED_FLAGS:
        raise ToolError(f"refused: {name} is fixed for this session and cannot be overridden")


@dataclass
class Target:
    kind: str  # singular resource name as kubectl accepts it, e.g. deployment
    name: str | None = None
    selector: str | None = None
    all: bool = False

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}" if self.name else f"{self.kind} ({self.selector or 'all'})"


def _kind(word: str) -> str:
    word = word.lower()
    return _ALIASES.get(word, word)


def targets_of(parsed: Parsed, manifest: str | None) -> list[Target]:
    """The objects a mutating command will touch, as far as the command says."""
    verb, pos, flags = parsed.verb, list(parsed.positionals), parsed.flags
    if parsed.uses_stdin:
        found: list[Target] = []
        for doc in yaml.safe_load_all(manifest or ""):
            if isinstance(doc, dict) and doc.get("kind"):
                items = doc.get("items") if doc["kind"].endswith("List") else [doc]
                for item in items or []:
                    name = (item.get("metadata") or {}).get("name")
                    if name:
                        found.append(Target(_kind(item["kind"]), name))
        return found
    if verb in ("set", "rollout"):
        pos = pos[1:]  # set env / rollout undo: the resource follows the sub-verb
    if verb == "create" and pos:
        created = _kind(pos[0])
        rest = pos[1:]
        if created == "secret" and rest:
            rest = rest[1:]  # create secret generic NAME
        return [Target(created, rest[0])] if rest else []
    if verb == "run" and pos:
        return [Target("pod", pos[0])]
    if verb == "expose" and pos:
        first = pos[0]
        name = flags.get("--name") or (first.split("/", 1)[1] if "/" in first else (pos[1] if len(pos) > 1 else None))
        return [Target("service", name)] if name else []
    if verb == "autoscale" and pos:
        first = pos[0]
        name = flags.get("--name") or (first.split("/", 1)[1] if "/" in first else (pos[1] if len(pos) > 1 else None))
        return [Target("horizontalpodautoscaler", name)] if name else []
    if verb in ("cordon", "uncordon", "drain"):
        return [Target("node", p.split("/", 1)[-1]) for p in pos]
    if verb in OPAQUE_MUTATING_VERBS:
        return []  # nothing to capture: what changes is inside the container

    words = [p for p in pos if "=" not in p and not p.endswith("-") and ":" not in p]
    out: list[Target] = []
    kind: str | None = None
    for word in words:
        if "/" in word:
            k, _, name = word.partition("/")
            out.append(Target(_kind(k), name))
        elif kind is None:
            kinds = word.split(",")
            kind = _kind(kinds[0])
        else:
            out.append(Target(kind, word))
    if kind and not out:
        selector = flags.get("-l") or flags.get("--selector")
        if selector or flags.get("--all") == "true":
            out.append(Target(kind, selector=selector, all=not selector))
    return out


def clean_for_restore(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    meta = obj.get("metadata") or {}
    for key in _SERVER_FIELDS:
        meta.pop(key, None)
    obj.pop("status", None)
    return obj


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def text(self) -> str:
        if self.returncode == 0:
            return self.stdout if self.stdout.strip() else (self.stderr or "(no output)")
        return (self.stderr + ("\n" + self.stdout if self.stdout.strip() else "")).strip() or (
            f"kubectl exited with status {self.returncode}"
        )


class Kubectl:
    """Runs checked commands for one session; `env` carries nothing from the farm's environment
    but PATH, a private HOME and the agent's KUBECONFIG."""

    def __init__(self, kubeconfig: Path, namespace: str, *, binary: str | None = None,
                 timeout_s: float = 60.0, virtual_time: bool = False) -> None:
        self.binary = binary or find_kubectl()
        self.namespace = namespace
        self.timeout_s = timeout_s
        self.virtual_time = virtual_time
        self._home = tempfile.mkdtemp(prefix="farm-kubectl-home-")
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self._home,
            "KUBECONFIG": str(kubeconfig),
        }

    def close(self) -> None:
        shutil.rmtree(self._home, ignore_errors=True)

    def run_tokens(self, tokens: list[str], stdin: str | None = None) -> Result:
        args = [self.binary, "--request-timeout=30s"]
        if not any(_flag_name(t) in ("-n", "--namespace") or (t.startswith("-n") and not t.startswith("--"))
                   for t in tokens if t.startswith("-")):
            args.append(f"--namespace={self.namespace}")
        args += tokens
        try:
            proc = subprocess.run(args, input=stdin, capture_output=True, text=True, env=self.env,
                                  timeout=self.timeout_s, cwd=self._home)
        except subprocess.TimeoutExpired:
            raise ToolError(f"kubectl did not finish within {self.timeout_s:.0f} s and was stopped") from None
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def get_json(self, target: Target) -> list[tuple[str, dict[str, Any] | None]]:
        """The current objects a target names: [("kind/name", object or None when absent)]."""
        if target.name:
            res = self.run_tokens(["get", target.kind, target.name, "-o", "json"])
            if res.returncode != 0:
                return [(str(target), None)] if "NotFound" in res.stderr or "not found" in res.stderr else []
            return [(str(target), json.loads(res.stdout))]
        tokens = ["get", target.kind, "-o", "json"]
        if target.selector:
            tokens += ["-l", target.selector]
        res = self.run_tokens(tokens)
        if res.returncode != 0:
            return []
        return [(f"{target.kind}/{item['metadata']['name']}", item) for item in json.loads(res.stdout).get("items", [])]
