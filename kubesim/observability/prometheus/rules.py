"""Prometheus rule evaluation on the cluster clock: rule groups loaded from Prometheus rule files
(rules/*.yaml), alerting rules going inactive → pending → firing after their `for`, recording
rules writing back to the TSDB, ALERTS series, and the /api/v1/alerts and /rules JSON shapes."""

from __future__ import annotations

import copy
import functools
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from kubesim.observability.formats import (
    format_e,
    format_value,
    humanize,
    humanize_duration,
    parse_prom_duration,
    rfc3339_nano,
)
from kubesim.observability.prometheus.promql import Evaluator, PromQLError, Scalar, parse
from kubesim.observability.prometheus.tsdb import TSDB

RULES_DIR = Path(__file__).parent / "rules"
# Which rule files make up a named rule set; the default is what a kube-prometheus-stack install
# ships (kubernetes-mixin, node-exporter mixin, general) plus SREGym's own application rules.
RULE_SETS = {
    "kube-prometheus": ["general.yaml", "kubernetes-apps.yaml", "kubernetes-resources.yaml",
                        "kubernetes-system.yaml", "k8s-recording.yaml", "node-exporter.yaml"],
    "sregym": ["sregym.yaml"],
}
DEFAULT_RULE_SETS = ("kube-prometheus", "sregym")


class RuleFileError(ValueError):
    """A rule file is malformed: names the file, the rule and the reason."""


@dataclass
class Alert:
    labels: dict[str, str]
    annotations: dict[str, str]
    state: str
    active_at: float
    value: float
    fired_at: float | None = None


@dataclass
class Rule:
    kind: str  # "alerting" or "recording"
    name: str
    query: str
    duration: float = 0.0
    keep_firing_for: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    health: str = "unknown"
    last_error: str = ""
    last_evaluation: float | None = None
    evaluation_time: float = 0.0
    active: dict[frozenset[tuple[str, str]], Alert] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.expr = parse(self.query)

    @property
    def state(self) -> str:
        states = {a.state for a in self.active.values()}
        return "firing" if "firing" in states else "pending" if "pending" in states else "inactive"


@dataclass
class RuleGroup:
    name: str
    file: str
    interval: float
    rules: list[Rule]
    last_evaluation: float | None = None
    evaluation_time: float = 0.0


def _seconds(raw: Any, where: str) -> float:
    if raw is None:
        return 0.0
    try:
        return parse_prom_duration(str(raw))
    except ValueError as e:
        raise RuleFileError(f"{where}: {e}") from e


@functools.lru_cache(maxsize=64)
def _read_yaml(path: Path, mtime: float) -> Any:
    try:
        return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        raise RuleFileError(f"{path}: not valid YAML: {e}") from e


def load_rule_file(path: Path, default_interval: float, api_file: str | None = None) -> list[RuleGroup]:
    try:
        doc = _read_yaml(path, path.stat().st_mtime)
    except OSError as e:
        raise RuleFileError(f"{path}: cannot read: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("groups"), list):
        raise RuleFileError(f"{path}: field 'groups': a list of rule groups is required")
    groups = []
    for gi, g in enumerate(doc["groups"]):
        where = f"{path}: groups[{gi}]"
        if not isinstance(g, dict) or not g.get("name"):
            raise RuleFileError(f"{where}: field 'name' is required")
        interval = _seconds(g.get("interval"), f"{where}.interval") or default_interval
        rules = []
        for ri, r in enumerate(g.get("rules") or []):
            rwhere = f"{where} ({g['name']}).rules[{ri}]"
            if not isinstance(r, dict) or "expr" not in r or not (r.get("alert") or r.get("record")):
                raise RuleFileError(f"{rwhere}: a rule needs 'expr' and one of 'alert' or 'record'")
            try:
                rule = Rule(
                    kind="alerting" if r.get("alert") else "recording",
                    name=str(r.get("alert") or r.get("record")),
                    query=str(r["expr"]).strip(),
                    duration=_seconds(r.get("for"), f"{rwhere}.for"),
                    keep_firing_for=_seconds(r.get("keep_firing_for"), f"{rwhere}.keep_firing_for"),
                    labels={str(k): str(v) for k, v in (r.get("labels") or {}).items()},
                    annotations={str(k): str(v) for k, v in (r.get("annotations") or {}).items()},
                )
            except PromQLError as e:
                raise RuleFileError(f"{rwhere} ({r.get('alert') or r.get('record')}): field 'expr': {e.message}") from e
            rules.append(rule)
        groups.append(RuleGroup(name=str(g["name"]), file=api_file or str(path), interval=interval, rules=rules))
    return groups


# --- annotation templates (the subset of Go templates that alert annotations use) -----------------
_BLOCK = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.DOTALL)
_PRINTF = re.compile(r'^printf\s+"((?:[^"\\]|\\.)*)"\s+(.+)$')


def _term(term: str, labels: dict[str, str], value: float) -> Any:
    term = term.strip()
    if term == "$value":
        return value
    if term.startswith("$labels."):
        return labels.get(term[len("$labels."):], "")
    if term.startswith('"') and term.endswith('"'):
        return term[1:-1]
    return term


def _apply(func: str, v: Any) -> Any:
    func = func.strip()
    try:
        num = float(v)
    except (TypeError, ValueError):
        num = None
    if func == "humanizePercentage" and num is not None:
        return humanize(num * 100) + "%"
    if func == "humanize" and num is not None:
        return humanize(num)
    if func == "humanizeDuration" and num is not None:
        return humanize_duration(num)
    if func == "humanize1024" and num is not None:
        return humanize(num)
    return v


def _render_value(v: Any) -> str:
    if isinstance(v, float):
        return format_value(v) if v != int(v) or abs(v) >= 1e21 else format_value(v)
    return str(v)


def expand_template(text: str, labels: dict[str, str], value: float) -> str:
    def block(m: re.Match[str]) -> str:
        body = m.group(1)
        pm = _PRINTF.match(body)
        if pm:
            fmt, arg = pm.group(1), _term(pm.group(2), labels, value)
            try:
                return fmt % (float(arg) if re.search(r"%[-+ 0#]*\d*(\.\d+)?[eEfFgGd]", fmt) else arg)
            except (TypeError, ValueError):
                return str(arg)
        parts = body.split("|")
        v: Any = _term(parts[0], labels, value)
        for f in parts[1:]:
            v = _apply(f, v)
        return _render_value(v)

    return _BLOCK.sub(block, text)


class RuleManager:
    """Evaluates rule groups against the TSDB when the cluster says so (`evaluate(now)`)."""

    def __init__(self, tsdb: TSDB, rule_sets: tuple[str, ...] = DEFAULT_RULE_SETS,
                 default_interval: float = 30.0, extra_files: tuple[Path, ...] = ()) -> None:
        self.tsdb = tsdb
        self.groups: list[RuleGroup] = []
        for name in rule_sets:
            if name not in RULE_SETS:
                raise RuleFileError(f"unknown rule set {name!r}; known: {', '.join(sorted(RULE_SETS))}")
            for fname in RULE_SETS[name]:
                api_file = (f"/etc/prometheus/rules/prometheus-kube-prometheus-stack-prometheus-rulefiles-0/"
                            f"monitoring-kube-prometheus-stack-{fname}" if name == "kube-prometheus"
                            else "/etc/config/alerting_rules.yml")
                self.groups.extend(load_rule_file(RULES_DIR / fname, default_interval, api_file))
        for path in extra_files:
            self.groups.extend(load_rule_file(path, default_interval))

    # --- evaluation --------------------------------------------------------------------------
    def evaluate(self, now: float) -> None:
        for g in self.groups:
            if g.last_evaluation is not None and now < g.last_evaluation + g.interval - 1e-6:
                continue
            t0 = time.perf_counter()
            for rule in g.rules:
                self._eval_rule(rule, now)
            g.last_evaluation = now
            g.evaluation_time = time.perf_counter() - t0

    def _eval_rule(self, rule: Rule, now: float) -> None:
        t0 = time.perf_counter()
        try:
            val = Evaluator(self.tsdb, now, now).eval(rule.expr, now)
            if isinstance(val, Scalar):
                val = [({}, val.v)]
            if not isinstance(val, list):
                raise PromQLError("execution", "rule result is not a vector")
        except PromQLError as e:
            rule.health, rule.last_error = "err", e.message
            rule.last_evaluation, rule.evaluation_time = now, time.perf_counter() - t0
            return
        rule.health, rule.last_error = "ok", ""
        if rule.kind == "recording":
            for labels, v in val:
                out = {k: x for k, x in labels.items() if k != "__name__"}
                out.update(rule.labels)
                self.tsdb.append(rule.name, out, now, v)
        else:
            self._update_alerts(rule, val, now)
        rule.last_evaluation, rule.evaluation_time = now, time.perf_counter() - t0

    def _update_alerts(self, rule: Rule, val: list[tuple[dict[str, str], float]], now: float) -> None:
        seen = set()
        for labels, v in val:
            series = {k: x for k, x in labels.items() if k != "__name__"}
            alert_labels = dict(series)
            for k, x in rule.labels.items():
                alert_labels[k] = expand_template(x, series, v)
            alert_labels["alertname"] = rule.name
            key = frozenset(alert_labels.items())
            if key in seen:
                rule.health, rule.last_error = "err", "vector contains metrics with the same labelset after applying alert labels"
                return
            seen.add(key)
            annotations = {k: expand_template(x, series, v) for k, x in rule.annotations.items()}
            alert = rule.active.get(key)
            if alert is None:
                rule.active[key] = alert = Alert(alert_labels, annotations, "pending", now, v)
            else:
                alert.value, alert.annotations = v, annotations
            if alert.state == "pending" and now - alert.active_at >= rule.duration:
                alert.state, alert.fired_at = "firing", now
                # Prometheus ends the pending ALERTS series with a staleness marker.
                self.tsdb.mark_stale("ALERTS", {**alert.labels, "alertstate": "pending"}, now)
        for key in [k for k in rule.active if k not in seen]:
            gone = rule.active.pop(key)
            self.tsdb.mark_stale("ALERTS", {**gone.labels, "alertstate": gone.state}, now)
            self.tsdb.mark_stale("ALERTS_FOR_STATE", gone.labels, now)
        for alert in rule.active.values():
            self.tsdb.append("ALERTS", {**alert.labels, "alertstate": alert.state}, now, 1.0)
            self.tsdb.append("ALERTS_FOR_STATE", alert.labels, now, alert.active_at)

    # --- API shapes --------------------------------------------------------------------------
    @staticmethod
    def _alert_json(a: Alert) -> dict[str, Any]:
        return {
            "labels": dict(sorted(a.labels.items())),
            "annotations": dict(sorted(a.annotations.items())),
            "state": a.state,
            "activeAt": rfc3339_nano(a.active_at),
            "value": format_e(a.value),
        }

    def active_alerts(self) -> list[Alert]:
        return [a for g in self.groups for r in g.rules for a in r.active.values()]

    def alerts_json(self) -> list[dict[str, Any]]:
        return [self._alert_json(a) for a in self.active_alerts()]

    def rules_json(self, kind: str | None = None, rule_names: set[str] | None = None,
                   group_names: set[str] | None = None, files: set[str] | None = None,
                   exclude_alerts: bool = False) -> dict[str, Any]:
        groups = []
        for g in self.groups:
            if group_names and g.name not in group_names:
                continue
            if files and g.file not in files:
                continue
            rules = []
            for r in g.rules:
                if kind == "alert" and r.kind != "alerting" or kind == "record" and r.kind != "recording":
                    continue
                if rule_names and r.name not in rule_names:
                    continue
                last = rfc3339_nano(r.last_evaluation) if r.last_evaluation is not None else "0001-01-01T00:00:00Z"
                if r.kind == "alerting":
                    entry: dict[str, Any] = {
                        "state": r.state, "name": r.name, "query": r.query, "duration": r.duration,
                        "keepFiringFor": r.keep_firing_for, "labels": r.labels, "annotations": r.annotations,
                    }
                    if not exclude_alerts:
                        entry["alerts"] = [self._alert_json(a) for a in r.active.values()]
                else:
                    entry = {"name": r.name, "query": r.query}
                    if r.labels:
                        entry["labels"] = r.labels
                entry["health"] = r.health
                if r.last_error:
                    entry["lastError"] = r.last_error
                entry.update({"evaluationTime": r.evaluation_time, "lastEvaluation": last, "type": r.kind})
                rules.append(entry)
            if (kind or rule_names) and not rules:
                continue
            groups.append({
                "name": g.name, "file": g.file, "rules": rules, "interval": g.interval, "limit": 0,
                "evaluationTime": g.evaluation_time,
                "lastEvaluation": rfc3339_nano(g.last_evaluation) if g.last_evaluation is not None
                else "0001-01-01T00:00:00Z",
            })
        return {"groups": groups}

    # --- state ---------------------------------------------------------------------------------
    def checkpoint(self) -> dict[str, Any]:
        return {
            "groups": [(g.last_evaluation, g.evaluation_time) for g in self.groups],
            "rules": [[(r.health, r.last_error, r.last_evaluation, r.evaluation_time, copy.deepcopy(r.active))
                       for r in g.rules] for g in self.groups],
        }

    def restore(self, state: dict[str, Any]) -> None:
        for g, (last, et), rstates in zip(self.groups, state["groups"], state["rules"], strict=True):
            g.last_evaluation, g.evaluation_time = last, et
            for r, (health, err, rlast, ret, active) in zip(g.rules, rstates, strict=True):
                r.health, r.last_error, r.last_evaluation, r.evaluation_time = health, err, rlast, ret
                r.active = copy.deepcopy(active)

    def clear(self) -> None:
        for g in self.groups:
            g.last_evaluation, g.evaluation_time = None, 0.0
            for r in g.rules:
                r.health, r.last_error, r.last_evaluation, r.evaluation_time = "unknown", "", None, 0.0
                r.active = {}
