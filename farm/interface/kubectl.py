"""The agent's kubectl: one command, parsed without a shell, checked against what an agent may do,
run as a real kubectl process with the agent's namespace-scoped kubeconfig and a bare
environment. Mutating commands capture the objects they touch first, so they can be undone."""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.errors import ConfigurationError, ToolError
from farm.interface import allowlist, restread, warmcache

log = logging.getLogger("farm.interface.kubectl")

MUTATING_VERBS = {
    "apply", "create", "delete", "patch", "replace", "scale", "set", "label", "annotate",
    "autoscale", "expose", "run", "cordon", "uncordon", "drain", "taint",
}
MUTATING_ROLLOUT = {"undo", "restart", "pause", "resume"}
# Verbs that change state the farm cannot capture: `exec` runs a command inside a container (it may
# edit files, kill processes, flush caches), so it is recorded as a mutation with no undo.
OPAQUE_MUTATING_VERBS = {"exec"}
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
    flags: dict[str, str] = field(default_factory=dict)  # last value of each flag, by long name
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
        container = self.flags.get("container")
        return f"{target} (container {container})" if container else target


def _flag_name(token: str) -> str:
    return token.split("=", 1)[0]


def _refuse_flag(shown: str, long: str, verb: str) -> ToolError:
    reason = allowlist.REFUSED_FLAG_REASONS.get(long)
    if reason:
        return ToolError(f"refused: {shown} {reason}")
    if long in ("watch", "watch-only", "follow"):
        return ToolError("refused: watching or following never returns; use the wait tool, then ask again")
    if long == "all-namespaces":
        return ToolError(f"refused: {shown}: this session can only reach its own namespace")
    if long == "raw":  # `delete --raw PATH` deleted what it named with no target to record or undo
        return ToolError(f"refused: {shown} is for reading only (get --raw); name what to {verb} "
                         f"({verb} TYPE NAME), so the session records it and can undo it")
    return ToolError(f"refused: {shown} is not an option this tool accepts for '{verb}'")


def _lex(command: str) -> list[str]:
    if not command or not command.strip():
        raise ToolError("empty command: give one kubectl command, e.g. 'get pods'")
    if "\n" in command.strip() or "\r" in command or "\x00" in command:
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
    return tokens


# Flags that take a value under some verb: before the verb, their value is not the verb.
_VALUE_LONGS = {long for spec in (allowlist.GLOBAL, *allowlist.VERBS.values())
                for long, (kind, _) in spec.items() if kind == allowlist.V}
_VALUE_SHORTS = {short for spec in (allowlist.GLOBAL, *allowlist.VERBS.values())
                 for _, (kind, short) in spec.items() if kind == allowlist.V and short}


def _find_verb(tokens: list[str]) -> str:
    """The first word that is not a flag (nor the value of -n). Flags before it are checked with
    the verb's own, and the command is rebuilt verb first, so kubectl runs what was checked."""
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "--":
            break
        if tok.startswith("-") and tok != "-":
            name = _flag_name(tok)
            long = name[2:].replace("_", "-") if name.startswith("--") else allowlist.REFUSED_SHORT.get(name[1:2], "")

            if long in allowlist.REFUSED_FLAG_REASONS:  # before the verb, a credential switch's value
                raise _refuse_flag(name, long, "kubectl")  # would be taken for the verb
            takes_value = "=" not in tok and (long in _VALUE_LONGS if name.startswith("--")
                                               else len(name) == 2 and name[1] in _VALUE_SHORTS)
            i += 2 if takes_value else 1
            continue
        return tok
    raise ToolError("no kubectl verb found: give a command such as 'get pods' or 'describe pod NAME'")


def parse_command(command: str, namespace: str, *, virtual_time: bool = False, also: tuple[str, ...] = ()) -> Parsed:
    """Parse and check one kubectl command against the allow-list (farm/interface/allowlist.py) the
    way kubectl's flag parser (pflag) reads it; raise ToolError naming the refused verb or flag.
    `also`: the application's other namespaces (an operator's), reachable with -n. `tokens` is
    the command rebuilt in one canonical spelling (`--long=value`), so kubectl runs exactly what
    was checked."""
    tokens = _lex(command)
    verb = _find_verb(tokens)
    if verb in allowlist.REFUSED_VERBS:
        raise ToolError(f"refused: {allowlist.REFUSED_VERBS[verb]}")
    if verb not in allowlist.VERBS:
        raise ToolError(f"refused: '{verb}' is not a kubectl verb this tool offers (plugins are not available)")
    spec = {**allowlist.GLOBAL, **allowlist.VERBS[verb]}
    shorts = {short: long for long, (_, short) in spec.items() if short}

    positionals: list[str] = []
    after: list[str] = []  # words after `--`: the command exec/run starts in the container
    pairs: list[tuple[str, str]] = []  # (long name, value) in order; repeats kept (-e A=1 -e B=2)
    seen_verb = False
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok == "--":
            if verb not in allowlist.DASHDASH_VERBS:
                raise ToolError(f"refused: '--' is only for the command of exec or run, not '{verb}'")
            after = tokens[i:]
            break
        if tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            long = name.replace("_", "-")  # kubectl normalises '_' to '-' in flag names
            shown = f"--{name}"
            if long not in spec:
                raise _refuse_flag(shown, long, verb)
            kind = spec[long][0]
            if not eq and kind == allowlist.V:
                if i >= len(tokens):
                    raise ToolError(f"refused: {shown} needs a value")
                value = tokens[i]
                i += 1
            elif not eq:
                value = "true"
            pairs.append((long, value))
        elif tok.startswith("-") and tok != "-":
            cluster = tok[1:]
            while cluster:
                short, cluster = cluster[0], cluster[1:]
                shown = f"-{short}"
                if short not in shorts:
                    raise _refuse_flag(shown, allowlist.REFUSED_SHORT.get(short, short), verb)
                long = shorts[short]
                if spec[long][0] == allowlist.V:
                    if cluster:
                        value = cluster[1:] if cluster.startswith("=") else cluster
                    elif i < len(tokens):
                        value = tokens[i]
                        i += 1
                    else:
                        raise ToolError(f"refused: {shown} needs a value")
                    pairs.append((long, value))
                    cluster = ""
                elif cluster.startswith("="):
                    pairs.append((long, cluster[1:]))
                    cluster = ""
                else:
                    pairs.append((long, "true"))
        elif not seen_verb and tok == verb:
            seen_verb = True
        else:
            positionals.append(tok)
    flags = {long: value for long, value in pairs}
    _check(verb, positionals, flags, pairs, namespace, also, virtual_time)

    uses_stdin = "filename" in flags
    mutating = verb in MUTATING_VERBS or verb in OPAQUE_MUTATING_VERBS or (
        verb == "rollout" and bool(positionals) and positionals[0] in MUTATING_ROLLOUT
    )
    if "dry-run" in flags and dry_run_strategy(flags["dry-run"]) != "none":
        mutating = False
    if verb == "rollout" and positionals and positionals[0] == "status" and "watch" not in flags:
        # `rollout status` watches by default; report the current status instead.
        pairs.append(("watch", "false"))
        flags["watch"] = "false"
    if verb == "delete" and virtual_time and "wait" not in flags:
        # kubectl waits for a deleted pod to be gone, which on a virtual clock happens only once
        # the wait tool lets its grace period pass: answer at once, the pod shown Terminating.
        pairs.append(("wait", "false"))
        flags["wait"] = "false"
    if verb == "drain" and virtual_time and "timeout" not in flags:
        # the same for the pods a drain evicts: it stops waiting for them after a second (they
        # stay Terminating until the wait tool lets their grace periods pass)
        pairs.append(("timeout", "1s"))
        flags["timeout"] = "1s"
    canonical = [verb, *positionals, *(f"--{long}={value}" for long, value in pairs)]
    if after:
        canonical += ["--", *after]
    return Parsed(canonical, verb, positionals, flags, mutating, uses_stdin)


# strconv.ParseBool's spellings, which pflag's boolean flags and kubectl's --dry-run accept.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def pflag_bool(value: str) -> bool | None:
    """A boolean flag's value as pflag reads it (strconv.ParseBool): None when kubectl rejects it."""
    return True if value in _TRUE else False if value in _FALSE else None


def dry_run_strategy(value: str) -> str:
    """"none", "client" or "server", as kubectl's GetDryRunStrategy reads --dry-run (the same in
    1.20 and 1.33): a boolean spelling is the deprecated form (true: client, false: none), the
    bare flag is "unchanged" (client); anything else kubectl refuses, and so does this tool."""
    as_bool = pflag_bool(value)
    if as_bool is not None:
        return "client" if as_bool else "none"
    if value in ("client", "server", "none"):
        return value
    if value == "unchanged":
        return "client"
    raise ToolError(f'refused: --dry-run={value!r} is not a dry-run strategy: use "none", "server" or "client"')


def _truthy(value: str) -> bool:
    """Whether a switch the tool refuses is on: anything but pflag's false (a value kubectl would
    reject is refused here too, with the tool's reason)."""
    return pflag_bool(value) is not False


def _check(verb: str, positionals: list[str], flags: dict[str, str], pairs: list[tuple[str, str]],
           namespace: str, also: tuple[str, ...], virtual_time: bool) -> None:
    allowed = (namespace, *also)
    for long, value in pairs:
        if long == "namespace" and value not in allowed:
            raise ToolError(
                f"refused: this session can only reach namespace{'s' if also else ''} "
                f"{', '.join(repr(n) for n in allowed)}, not '{value}'")
        if long == "all-namespaces" and _truthy(value):
            raise ToolError(f"refused: this session can only reach namespace '{namespace}'; drop -A/--all-namespaces")
        if long in ("stdin", "tty", "attach") and _truthy(value):
            raise ToolError(f"refused: {verb} with an interactive terminal (-i/-t) is not available; "
                            "run a single non-interactive command instead")
        if long in ("watch", "watch-only", "follow") and _truthy(value):
            raise ToolError("refused: watching or following never returns; use the wait tool, then ask again")
        if long == "filename" and value != "-":
            raise ToolError("refused: local files are not reachable; pass the manifest text in the "
                            "'manifest' argument and use '-f -'")
        if long == "output":
            fmt = value.split("=", 1)[0].strip().lower()
            if fmt in allowlist.FILE_OUTPUTS:
                raise ToolError(f"refused: -o {fmt} reads a local file, which is not reachable; "
                                "give the template inline (-o go-template=..., -o jsonpath=...)")
        if long == "raw":
            _check_raw(value, allowed)
    sub = allowlist.SUBCOMMANDS.get(verb)
    if sub is not None and positionals and positionals[0] not in sub:
        if verb == "apply":
            raise ToolError("refused: apply takes only '-f -' with the manifest argument (or view-last-applied)")
        raise ToolError(f"refused: '{verb} {positionals[0]}' is not available; "
                        f"{verb} takes one of: {', '.join(sorted(sub))}")
    if verb == "cluster-info" and positionals:
        raise ToolError("refused: only plain 'cluster-info' is available")
    if verb == "wait" and virtual_time:
        raise ToolError("refused: on this cluster time passes only through the wait tool; "
                        "call wait(seconds), then check the condition with get")


_RAW_NAMESPACED = re.compile(r"^/(api/v1|apis/[a-z0-9.-]+/[a-z0-9]+)/namespaces/([a-z0-9-]+)(/[A-Za-z0-9._/-]*)?(\?[^#]*)?$")


def _check_raw(path: str, allowed: tuple[str, ...]) -> None:
    """`--raw` reaches any API path: only paths inside the session's namespaces pass."""
    found = _RAW_NAMESPACED.match(path)
    if not found or ".." in path or "%" in path or "//" in path or found.group(2) not in allowed:
        raise ToolError(f"refused: --raw {path!r}: only API paths inside this session's namespace "
                        f"(/api/v1/namespaces/{allowed[0]}/...) are available")


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
    if verb == "create" and pflag_bool(flags.get("append-hash", "false")) is not False:
        return []  # the name gets a hash of the content: unknown until it is created
    if verb == "create" and pos:
        created = _kind(pos[0])
        rest = pos[1:]
        if created in ("secret", "service") and rest:
            rest = rest[1:]  # create secret generic NAME, create service clusterip NAME
        return [Target(created, rest[0])] if rest else []
    if verb == "run" and pos:
        return [Target("pod", pos[0])]
    if verb == "expose" and pos:
        first = pos[0]
        name = flags.get("name") or (first.split("/", 1)[1] if "/" in first else (pos[1] if len(pos) > 1 else None))
        return [Target("service", name)] if name else []
    if verb == "autoscale" and pos:
        first = pos[0]
        name = flags.get("name") or (first.split("/", 1)[1] if "/" in first else (pos[1] if len(pos) > 1 else None))
        return [Target("horizontalpodautoscaler", name)] if name else []
    if verb in ("cordon", "uncordon", "drain"):
        if not pos and flags.get("selector"):
            return [Target("node", selector=flags["selector"])]
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
        selector = flags.get("selector")
        if selector or pflag_bool(flags.get("all", "false")):
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
    """Runs checked commands for one session in the OS sandbox (farm/interface/sandbox.py): kubectl
    sees the agent's kubeconfig, a private home and nothing of the worker. `sandbox` is the record's
    word for how it ran ("bwrap", or the loud opt-out)."""

    def __init__(self, kubeconfig: Path, namespace: str, *, binary: str | None = None,
                 timeout_s: float = 60.0, virtual_time: bool = False) -> None:
        from farm.interface import sandbox as sandbox_mod

        self.binary = binary or find_kubectl()
        self.kubeconfig = kubeconfig  # on the worker; the sandbox holds an inlined copy
        self.namespace = namespace
        self.timeout_s = timeout_s
        self.virtual_time = virtual_time
        self._sandbox: sandbox_mod.Sandbox | None = None
        self._home = ""
        self._rest = restread.RestReader(kubeconfig, namespace)
        if sandbox_mod.unsafe_opt_out():
            log.warning("%s is set: the agent's kubectl runs WITHOUT a sandbox and can read and write the "
                        "worker's files; never use this for an evaluation", sandbox_mod.UNSAFE_ENV)
            self.sandbox = f"none ({sandbox_mod.UNSAFE_ENV}=1)"
            self._home = tempfile.mkdtemp(prefix="kubectl-home-")
            self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self._home,
                        "KUBECONFIG": str(kubeconfig)}
        else:
            self._sandbox = sandbox_mod.Sandbox(self.binary, kubeconfig)
            try:
                self._sandbox.probe()
            except BaseException:
                self._sandbox.close()
                raise
            self.sandbox = "bwrap"
            self.env = {}
        digest = self._rest.discovery_digest()
        self._cache_key = (str(Path(self.binary).resolve()), self._rest.server, digest) if digest else None
        self._cache_kept = False
        warmcache.seed(self._kubectl_home, self._cache_key)

    @property
    def _kubectl_home(self) -> str:
        return str(self._sandbox.home) if self._sandbox is not None else self._home

    def close(self) -> None:
        self._rest.close()
        if self._sandbox is not None:
            self._sandbox.close()
        if self._home:
            shutil.rmtree(self._home, ignore_errors=True)

    def run_tokens(self, tokens: list[str], stdin: str | None = None) -> Result:
        args = ["--request-timeout=30s"]
        own = tokens[:tokens.index("--")] if "--" in tokens else tokens
        if not any(_flag_name(t) in ("-n", "--namespace") for t in own):
            args.append(f"--namespace={self.namespace}")
        args += tokens
        if self._sandbox is not None:
            argv, cwd = self._sandbox.wrap(args), None
        else:
            argv, cwd = [self.binary, *args], self._home
        try:
            proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=self.env,
                                  timeout=self.timeout_s, cwd=cwd,
                                  stdin=None if stdin is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ToolError(f"kubectl did not finish within {self.timeout_s:.0f} s and was stopped") from None
        if proc.returncode == 0 and not self._cache_kept:
            self._cache_kept = warmcache.keep(self._kubectl_home, self._cache_key)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def get_json(self, target: Target) -> list[tuple[str, dict[str, Any] | None]]:
        """The current objects a target names: [("kind/name", object or None when absent)]. Read
        over the API with the agent's credentials where the reader serves the kind (restread.py),
        else by a kubectl process: both give what `kubectl get -o json` prints."""
        try:
            body = self._rest.get(target.kind, target.name, target.selector)
        except restread.Unreadable:
            return self._get_json_kubectl(target)
        except restread.ReadFailed:
            return []
        if target.name:
            return [(str(target), body)]
        return [(f"{target.kind}/{item['metadata']['name']}", item) for item in (body or {}).get("items", [])]

    def _get_json_kubectl(self, target: Target) -> list[tuple[str, dict[str, Any] | None]]:
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
