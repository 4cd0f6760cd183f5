"""Prometheus as the emulated cluster serves it: the time-series store the exporters' samples go to
(tsdb), PromQL parsed and evaluated as Prometheus 2.x does (promql_ast, promql, promql_functions),
the recording and alerting rules with their state (rules, and the rule files under rules/), the
exporters' metric metadata, and the HTTP API (api)."""

from kubesim.observability.prometheus.api import PrometheusAPI
from kubesim.observability.prometheus.rules import DEFAULT_RULE_SETS, RuleManager
from kubesim.observability.prometheus.tsdb import TSDB

__all__ = ["DEFAULT_RULE_SETS", "TSDB", "PrometheusAPI", "RuleManager"]
