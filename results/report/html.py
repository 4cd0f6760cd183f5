"""The report page: one self-contained HTML file (figures as base64 PNG, no script, no external
resource) from the numbers results.report.queries computed and the figures results.report.plots
drew. Every string that came from a row or a spec is escaped."""

from __future__ import annotations

import base64
import json
from html import escape
from typing import Any

from results.keys import noise_part

STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:90em;color:#222;padding:0 1em}
h1{margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;font-size:13px;margin:.4em 0}td,th{border:1px solid #ccc;padding:2px 6px}
th{background:#f3f3f3}td.num{text-align:right}.meta td:first-child{font-weight:600}
img.plot{max-width:100%;display:block;margin:.5em 0;border:1px solid #eee}.note{color:#666;font-size:13px}
.missing{color:#a60;font-style:italic}pre{background:#f7f7f7;padding:6px;font-size:12px;white-space:pre-wrap}
.pass{color:#2a7a2a}.fail{color:#b22}"""


def figure(png: bytes | None, alt: str, why_missing: str = "no data to draw") -> str:
    if png is None:
        return f'<p class="missing">{escape(alt)}: {escape(why_missing)}.</p>'
    data = base64.b64encode(png).decode()
    return f'<img class="plot" alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def fmt(v: Any, kind: str = "") -> str:
    if v is None:
        return "–"
    if kind == "pct":
        return f"{100 * v:.1f}%"
    if kind == "ci":
        return f"{100 * v[0]:.0f}–{100 * v[1]:.0f}" if v[0] is not None and v[1] is not None else "–"
    if kind == "usd":
        return f"${v:.4f}"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    return escape(str(v))


def table(header: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    """Cells are already-escaped HTML; columns from `numeric_from` on are right-aligned."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="num">{c}</td>' if i >= numeric_from else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def rate_table(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> str:
    """Rates per group. The 95% intervals resample problems where a problem has repeated trials
    (seeds: results/stats.py), and are Wilson's per-trial ones otherwise; an unpriced model's cost
    is marked."""
    header = [*keys, "n", "infra", "of which provider", "agent errors", "capped", "diagnosis", "95% CI", "mitigation", "95% CI", "E2E", "95% CI",
              "E2E pass@k", "E2E pass^k", "P(M|D)", "mean tokens", "mean cost"]
    body = []
    clustered = unpriced = False
    for r in rows:
        k = r.get("k") or 0
        clustered |= k > 1

        def interval(name: str, r: dict[str, Any] = r, k: int = k) -> str:
            ends = (r.get(f"{name}_cluster_lo"), r.get(f"{name}_cluster_hi")) if k > 1 else \
                (r.get(f"{name}_lo"), r.get(f"{name}_hi"))
            return fmt(ends, "ci")

        unpriced |= r.get("priced") is False
        body.append([fmt(r[k]) if k != "noise" else noise_part(bool(r[k])) for k in keys] + [
            fmt(r["n"]), fmt(r["infra_failed"]), fmt(r["provider_failed"]), fmt(r["agent_errors"]), fmt(r["cost_capped"]),
            fmt(r["diagnosis_rate"], "pct"), interval("diagnosis"),
            fmt(r["mitigation_rate"], "pct"), interval("mitigation"),
            fmt(r["e2e_rate"], "pct"), interval("e2e"),
            (fmt(r.get("e2e_pass_at_k"), "pct") + f" (k={k})") if k > 1 else "–",
            (fmt(r.get("e2e_pass_hat_k"), "pct") + f" (k={k})") if k > 1 else "–",
            fmt(r["p_mitigation_given_diagnosis"], "pct"), fmt(r["mean_tokens"]),
            fmt(r["mean_cost_usd"], "usd") + (" (unpriced)" if r.get("priced") is False else "")])
    note = ("95% intervals from a bootstrap over problems (a problem's seeds are not independent)" if clustered
            else "95% Wilson intervals (one trial per problem)")
    if unpriced:
        note += "; an unpriced model's cost is recorded as 0, not measured"
    if any(r.get("no_fault_n") for r in rows):
        # No-fault controls: the share whose diagnosis blamed something, with its Wilson interval.
        header += ["no-fault controls", "false alarms", "95% CI"]
        for line, r in zip(body, rows, strict=True):
            line += [fmt(r.get("no_fault_n")), fmt(r.get("false_alarm_rate"), "pct"),
                     fmt((r.get("false_alarm_lo"), r.get("false_alarm_hi")), "ci")]
        note += ("; false alarms: the no-fault controls (nothing injected) whose diagnosis blamed something, "
                 "95% Wilson interval")
    return table(header, body, numeric_from=len(keys)) + f'<p class="note">{escape(note)}.</p>'


def page(title: str, sections: list[tuple[str, str]], meta: list[tuple[str, str]]) -> str:
    nav = " · ".join(f'<a href="#s{i}">{escape(name)}</a>' for i, (name, _) in enumerate(sections))
    meta_html = "<table class='meta'>" + "".join(f"<tr><td>{escape(k)}</td><td>{v}</td></tr>" for k, v in meta) + "</table>"
    body = "".join(f'<h2 id="s{i}">{escape(name)}</h2>{content}' for i, (name, content) in enumerate(sections))
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{meta_html}<p>{nav}</p>{body}</body></html>")


def spec_block(spec: dict[str, Any]) -> str:
    return f"<details><summary>sweep spec (as recorded)</summary><pre>{escape(json.dumps(spec, indent=2))}</pre></details>"
