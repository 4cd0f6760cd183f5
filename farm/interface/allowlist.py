"""What the agent's kubectl accepts, as data: the verbs an SRE needs and, per verb, the flags it
may pass. A flag is "value" (takes an argument: `--f=v`, `--f v`, `-fv`) or "bool" (takes one only
as `--f=false`, as pflag parses booleans and flags with a default when bare, e.g. `--dry-run`).
Anything not listed is refused; REFUSED_FLAG_REASONS words the refusal of the flags an adversary
tries first."""

from __future__ import annotations

V, B = "value", "bool"
Flags = dict[str, tuple[str, str | None]]  # long name -> (kind, shorthand)

GLOBAL: Flags = {"namespace": (V, "n")}
OUTPUT: Flags = {"output": (V, "o"), "template": (V, None), "show-managed-fields": (B, None),
                 "allow-missing-template-keys": (B, None)}
SELECT: Flags = {"selector": (V, "l"), "field-selector": (V, None)}
ALL_NS: Flags = {"all-namespaces": (B, "A")}
DRY: Flags = {"dry-run": (B, None), "field-manager": (V, None)}
FILE: Flags = {"filename": (V, "f")}  # only "-": the tool's manifest argument
MUTATE: Flags = {**OUTPUT, **DRY, "record": (B, None)}

VERBS: dict[str, Flags] = {
    "get": {**OUTPUT, **SELECT, **ALL_NS, **FILE, "watch": (B, "w"), "watch-only": (B, None),
            "label-columns": (V, "L"), "show-labels": (B, None), "show-kind": (B, None), "sort-by": (V, None),
            "no-headers": (B, None), "chunk-size": (V, None), "ignore-not-found": (B, None), "raw": (V, None),
            "output-watch-events": (B, None), "server-print": (B, None), "subresource": (V, None)},
    "describe": {**SELECT, **ALL_NS, **FILE, "show-events": (B, None), "chunk-size": (V, None)},
    "logs": {"container": (V, "c"), "all-containers": (B, None), "previous": (B, "p"), "since": (V, None),
             "since-time": (V, None), "tail": (V, None), "timestamps": (B, None), "limit-bytes": (V, None),
             "selector": (V, "l"), "prefix": (B, None), "follow": (B, "f"), "max-log-requests": (V, None),
             "pod-running-timeout": (V, None), "ignore-errors": (B, None)},
    "top": {**SELECT, **ALL_NS, "containers": (B, None), "no-headers": (B, None), "sort-by": (V, None),
            "use-protocol-buffers": (B, None)},
    "events": {**OUTPUT, **ALL_NS, "for": (V, None), "types": (V, None), "watch": (B, "w"),
               "no-headers": (B, None), "chunk-size": (V, None)},
    "exec": {"container": (V, "c"), "stdin": (B, "i"), "tty": (B, "t"), "quiet": (B, "q"),
             "pod-running-timeout": (V, None)},
    "rollout": {**MUTATE, **SELECT, **FILE, "to-revision": (V, None), "revision": (V, None),
                "watch": (B, "w"), "timeout": (V, None)},
    "scale": {**MUTATE, **SELECT, **FILE, "replicas": (V, None), "current-replicas": (V, None),
              "resource-version": (V, None), "all": (B, None), "timeout": (V, None)},
    "set": {**MUTATE, **SELECT, **FILE, "env": (V, "e"), "list": (B, None), "containers": (V, "c"),
            "keys": (V, None), "overwrite": (B, None), "resolve": (B, None), "from": (V, None),
            "prefix": (V, None), "all": (B, None), "limits": (V, None), "requests": (V, None),
            "resource-version": (V, None)},
    "patch": {**MUTATE, **FILE, "patch": (V, "p"), "type": (V, None), "subresource": (V, None)},
    "apply": {**MUTATE, **FILE, **SELECT, "server-side": (B, None), "force-conflicts": (B, None),
              "validate": (B, None), "overwrite": (B, None), "force": (B, None), "grace-period": (V, None),
              "wait": (B, None), "timeout": (V, None), "prune": (B, None), "cascade": (B, None),
              "all": (B, None)},
    "replace": {**MUTATE, **FILE, "force": (B, None), "grace-period": (V, None), "cascade": (B, None),
                "validate": (B, None), "save-config": (B, None), "wait": (B, None), "timeout": (V, None)},
    "create": {**MUTATE, **FILE, "from-literal": (V, None), "image": (V, None), "replicas": (V, None),
               "port": (V, None), "save-config": (B, None), "validate": (B, None), "schedule": (V, None),
               "restart": (V, None), "tcp": (V, None), "clusterip": (V, None), "node-port": (V, None),
               "type": (V, None), "from": (V, None), "hard": (V, None), "scopes": (V, None),
               "role": (V, None), "clusterrole": (V, None), "serviceaccount": (V, None), "group": (V, None),
               "verb": (V, None), "resource": (V, None), "resource-name": (V, None),
               "docker-server": (V, None), "docker-username": (V, None), "docker-password": (V, None),
               "docker-email": (V, None), "append-hash": (B, None), "min-available": (V, None),
               "max-unavailable": (V, None), "value": (V, None), "description": (V, None)},
    "label": {**MUTATE, **SELECT, **FILE, "overwrite": (B, None), "all": (B, None), "list": (B, None),
              "resource-version": (V, None)},
    "annotate": {**MUTATE, **SELECT, **FILE, "overwrite": (B, None), "all": (B, None), "list": (B, None),
                 "resource-version": (V, None)},
    "cordon": {**DRY, "selector": (V, "l")},
    "uncordon": {**DRY, "selector": (V, "l")},
    "drain": {**DRY, "selector": (V, "l"), "pod-selector": (V, None), "ignore-daemonsets": (B, None),
              "delete-emptydir-data": (B, None), "delete-local-data": (B, None), "force": (B, None),
              "grace-period": (V, None), "timeout": (V, None), "disable-eviction": (B, None),
              "skip-wait-for-delete-timeout": (V, None), "chunk-size": (V, None)},
    "taint": {**MUTATE, "selector": (V, "l"), "overwrite": (B, None), "all": (B, None), "validate": (B, None)},
    "delete": {**MUTATE, **SELECT, **FILE, **ALL_NS, "all": (B, None), "grace-period": (V, None),
               "force": (B, None), "now": (B, None), "wait": (B, None), "timeout": (V, None),
               "cascade": (B, None), "ignore-not-found": (B, None)},
    "auth": {**ALL_NS, "list": (B, None), "quiet": (B, "q"), "no-headers": (B, None),
             "subresource": (V, None), **OUTPUT},
    "api-resources": {"namespaced": (B, None), "api-group": (V, None), "verbs": (V, None), "output": (V, "o"),
                      "sort-by": (V, None), "no-headers": (B, None), "cached": (B, None)},
    "api-versions": {},
    "explain": {"recursive": (B, None), "api-version": (V, None), "output": (V, "o")},
    "version": {"client": (B, None), "short": (B, None), "output": (V, "o")},
    "cluster-info": {},
    "wait": {**OUTPUT, **SELECT, **FILE, **ALL_NS, "for": (V, None), "timeout": (V, None), "all": (B, None)},
    "run": {**MUTATE, "image": (V, None), "env": (V, None), "labels": (V, "l"), "port": (V, None),
            "restart": (V, None), "command": (B, None), "rm": (B, None), "attach": (B, None), "stdin": (B, "i"),
            "tty": (B, "t"), "overrides": (V, None), "image-pull-policy": (V, None), "limits": (V, None),
            "requests": (V, None), "annotations": (V, None), "pod-running-timeout": (V, None),
            "expose": (B, None), "serviceaccount": (V, None)},
    "expose": {**MUTATE, **FILE, "port": (V, None), "target-port": (V, None), "name": (V, None),
               "type": (V, None), "protocol": (V, None), "selector": (V, None), "labels": (V, "l"),
               "external-ip": (V, None), "cluster-ip": (V, None), "load-balancer-ip": (V, None),
               "session-affinity": (V, None)},
    "autoscale": {**MUTATE, **FILE, "min": (V, None), "max": (V, None), "cpu-percent": (V, None),
                  "name": (V, None)},
}
# Verbs whose first word is a sub-command, with the sub-commands allowed.
SUBCOMMANDS: dict[str, frozenset[str]] = {
    "rollout": frozenset({"status", "history", "undo", "restart", "pause", "resume"}),
    "set": frozenset({"env", "image", "resources", "selector", "serviceaccount"}),
    "auth": frozenset({"can-i", "whoami"}),
    "apply": frozenset({"view-last-applied"}),
}
# Verbs that take words after `--` (the command to run in the container).
DASHDASH_VERBS = frozenset({"exec", "run"})

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
    "diff": "diff runs a local diff program; use apply --dry-run=server -o yaml with the manifest argument",
    "convert": "convert reads local files, which agents cannot reach",
}

_FIXED = "is fixed for this session and cannot be overridden"
_LOCAL = ("reads or writes local files, which are not reachable; pass manifest text in the 'manifest' "
          "argument and use '-f -'")
_LOGS = "writes local files (profiles, logs, caches), which are not reachable"
REFUSED_FLAG_REASONS: dict[str, str] = {
    **{name: _FIXED for name in (
        "kubeconfig", "token", "server", "context", "cluster", "user", "as", "as-group", "as-uid",
        "username", "password", "certificate-authority", "client-certificate", "client-key",
        "insecure-skip-tls-verify", "tls-server-name", "request-timeout", "match-server-version",
        "disable-compression")},
    **{name: _LOCAL for name in ("from-file", "from-env-file", "kustomize", "recursive", "local", "cert", "key",
                                 "env-file", "output-directory", "edit", "windows-line-endings")},
    **{name: _LOGS for name in (
        "profile", "profile-output", "log-file", "log-dir", "cache-dir", "log-backtrace-at", "alsologtostderr",
        "logtostderr", "log-file-max-size", "log-flush-frequency", "add-dir-header", "skip-headers",
        "skip-log-headers", "one-output", "stderrthreshold", "vmodule", "warnings-as-errors")},
    "v": "request logging (-v/--v) prints the session's credentials; it is not available",
    "privileged": "privileged pods are not available to agents",
}
# Shorthands an adversary reaches for that no allowed verb defines; named in the refusal.
REFUSED_SHORT: dict[str, str] = {"s": "server", "k": "kustomize", "v": "v", "R": "recursive"}
# `-o` formats that load a file of the worker (a template, a column spec).
FILE_OUTPUTS = ("go-template-file", "jsonpath-file", "custom-columns-file", "templatefile")
