"""`farm report`: the sweep report a researcher publishes from. Numbers from queries, figures
from plots, the page from html, one drill-down page per trial from trials; written to a folder
(`index.html`, `trials/`)."""

from __future__ import annotations

import datetime as dt
import subprocess
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from results.keys import noise_part
from results.leaderboard import group_keys
from results.report import html, plots, queries
from results.report.trials import ArtifactReader, trial_page_name, write_trial_page


def code_version() -> str:
    """`git describe` of the checkout the farm runs from, else the installed package's version."""
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty", "--tags"], cwd=root, capture_output=True,
                             text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            return f"git {out.stdout.strip()}"
    except (OSError, subprocess.SubprocessError):
        pass  # no git here: the package version says what it can
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"sre-farm {version('sre-farm')}"
    except PackageNotFoundError:
        return "unknown"


def _label(*keys: str):  # type: ignore[no-untyped-def]
    def label(r: dict[str, Any]) -> str:
        parts = []
        for k in keys:
            v = r[k]
            parts.append(noise_part(bool(v)) if k == "noise" else str(v))
        return " / ".join(parts)
    return label


def _judge_text(info: dict[str, Any], seen_in_verdicts: dict[str, int]) -> tuple[str, str]:
    judges = info["judges"]
    if not judges:
        judge = f"no attempt recorded yet (spec: {escape(str(info['spec_judge'] or 'offline judge'))})"
    else:
        judge = "; ".join(
            f"{escape(str(j['judge']))}{' (offline, deterministic)' if j['offline'] else ''}: {j['attempts']} attempt(s), "
            f"threshold {escape(str(j['threshold'])) if j['threshold'] is not None else 'not recorded'}"
            for j in judges)
    rules = info["pass_rules"]
    if (rules is None or not any(r for r, _ in rules)) and seen_in_verdicts:
        rules = sorted(seen_in_verdicts.items())
    if rules is None or not any(r for r, _ in rules):
        rule = ('<span class="missing">not recorded</span> (the rows predate a recorded pass rule; a diagnosis '
                "passed when the judge's composite score reached the threshold above)")
    else:
        rule = "; ".join(f"{escape(str(r))}: {n}" for r, n in rules)
    return judge, rule


def build_report(engine: Engine, sweep_id: str, out_dir: str | Path, compare_with: str | None = None,
                 drill_down: bool = True, compare_by: str = "agent,model",
                 sregym_ids: Mapping[str, Sequence[str]] | None = None) -> Path:
    """Write the report of `sweep_id` into `out_dir` (index.html, trials/); returns index.html.
    `sregym_ids`: per problem id, the SREGym problems it corresponds to (the catalog's `sregym_ids`,
    which the caller reads: results does not know the catalog), printed beside each problem."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    info = queries.sweep_info(engine, sweep_id)
    by_am = queries.rates(engine, sweep_id, "agent,model")
    am = _label("agent", "model")
    sections: list[tuple[str, str]] = []

    sections.append(("Rates by agent × model", html.figure(
        plots.rate_bars(by_am, am, "diagnosis / mitigation / E2E per agent × model"), "rates per agent × model")
        + html.rate_table(by_am, ("agent", "model"))))

    for title, by in (("By layer", "layer"), ("By composition", "composition"), ("With and without noise", "noise"),
                      ("Noise per agent × model", "agent,model,noise")):
        rows = queries.rates(engine, sweep_id, by)
        keys = group_keys(by)
        sections.append((title, html.figure(plots.rate_bars(rows, _label(*keys), title), title)
                         + html.rate_table(rows, keys) + (_noise_pairs(engine, sweep_id) if by == "noise" else "")))

    spend = queries.spend(engine, sweep_id)
    cost_rows = []
    solved_labels, solved_values = [], []
    for r in by_am:
        s = spend.get((r["agent"], r["model"]), {"agent_cost_usd": 0.0, "judge_cost_usd": 0.0, "attempts": 0})
        solved = round((r["e2e_rate"] or 0) * r["n"])
        per_solved = s["agent_cost_usd"] / solved if solved else None
        cost_rows.append([html.fmt(r["agent"]), html.fmt(r["model"]), html.fmt(r["n"]), html.fmt(solved),
                          html.fmt(s["attempts"]), html.fmt(s["agent_cost_usd"], "usd"),
                          html.fmt(s["judge_cost_usd"], "usd"), html.fmt(per_solved, "usd"),
                          html.fmt(r["mean_cost_usd"], "usd"), html.fmt(r["mean_tokens"])])
        solved_labels.append(am(r))
        solved_values.append(per_solved)
    sections.append(("Cost and tokens against E2E", html.figure(plots.pareto(by_am, am), "Pareto: cost and tokens vs E2E")
                     + html.figure(plots.simple_bars(solved_labels, solved_values, "agent cost per solved incident (E2E)",
                                                     "$ per solved incident"), "cost per solved incident",
                                   "no incident solved, or no cost recorded")
                     + html.table(["agent", "model", "n", "solved (E2E)", "attempts", "agent cost (all attempts)",
                                   "judge cost", "cost per solved", "mean cost per trial", "mean tokens"],
                                  cost_rows, numeric_from=2)
                     + '<p class="note">Agent cost counts every attempt (lost and cut ones spent money too); '
                       "the mean per trial counts the recorded attempt of each finished trial.</p>"))

    times = queries.times(engine, sweep_id)
    named = {f"{a} / {m}": v for (a, m), v in times.items()}
    sections.append(("Time to diagnosis and to mitigation", html.figure(
        plots.distributions(named), "TTD and TTM distributions", "no diagnosis or mitigation time recorded")
        + '<p class="note">Cluster seconds from the injection to the submitted diagnosis, and to the submitted '
          "mitigation (or the agent's last change); successful mitigations only.</p>"))

    cond = queries.conditional_mitigation(engine, sweep_id)
    sections.append(("P(M|D) and P(M|not D)", html.figure(plots.conditional(cond, am), "P(M|D) and P(M|not D)")
                     + html.table(["agent", "model", "n", "diagnosed", "P(M|D)", "95% CI", "not diagnosed",
                                   "P(M|not D)", "95% CI"],
                                  [[html.fmt(r["agent"]), html.fmt(r["model"]), html.fmt(r["n"]), html.fmt(r["diagnosed"]),
                                    html.fmt(r["p_m_given_d"], "pct"),
                                    html.fmt((r["p_m_given_d_lo"], r["p_m_given_d_hi"]), "ci"),
                                    html.fmt(r["not_diagnosed"]), html.fmt(r["p_m_given_not_d"], "pct"),
                                    html.fmt((r["p_m_given_not_d_lo"], r["p_m_given_not_d_hi"]), "ci")] for r in cond],
                                  numeric_from=2)))

    sections.append(("Problems × agent/model (E2E, hardest first)", _heatmap(engine, sweep_id)))
    sections.append(("Per problem", _per_problem(engine, sweep_id, sregym_ids or {})))
    sections.append(("Token analytics", _tokens(engine, sweep_id)))
    sections.append(("Infrastructure, cost cap and lost attempts (apart from the scores)",
                     _infrastructure(engine, sweep_id, info)))
    if compare_with:
        sections.append((f"Paired comparison with {compare_with}", _comparison(engine, compare_with, sweep_id, compare_by)))

    trial_list = queries.trial_rows(engine, sweep_id)
    reader = ArtifactReader()
    sections.append(("Trials", _trial_table(out, trial_list, drill_down, reader)))

    judge, rule = _judge_text(info, dict(reader.pass_rules))
    meta = [("sweep", escape(sweep_id)), ("judge", judge), ("pass rule", rule),
            ("code version", escape(code_version())),
            ("generated", escape(dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))),
            ("sweep created", escape(dt.datetime.fromtimestamp(info["created_at"], dt.UTC).strftime("%Y-%m-%d %H:%M UTC"))),
            ("spec", html.spec_block(info["spec"])),
            ("source", "every figure is computed from the recorded trial and attempt rows")]
    if info.get("rejudged"):
        meta.insert(3, ("judged again", "; ".join(
            f"{escape(str(v['judge']))} ({escape(str(v['pass_rule']))}): {v['passed']} of {v['trials']} trial(s) pass"
            for v in info["rejudged"]) + " (`farm judge rescore`; this report's figures use the recorded verdicts, "
            "`farm leaderboard --judge` the others)"))
    if info["mitigation_not_scored"] is not None:
        meta.insert(3, ("diagnosis-only trials", f"{info['mitigation_not_scored']} trial(s) whose problem scores no "
                                                 "mitigation (as recorded)"))
    index = out / "index.html"
    tmp = index.with_suffix(".html.tmp")
    tmp.write_text(html.page(f"Sweep report: {sweep_id}", sections, meta))
    tmp.replace(index)
    return index


def _heatmap(engine: Engine, sweep_id: str) -> str:
    rows = queries.rates(engine, sweep_id, "problem,agent,model")
    columns = sorted({(r["agent"], r["model"]) for r in rows})
    cell = {(r["problem_id"], r["agent"], r["model"]): r for r in rows if r["n"]}
    problems = sorted({r["problem_id"] for r in rows if r["n"]})

    def difficulty(p: str) -> tuple[float, str]:
        # A diagnosis-only problem's E2E is not scored (None): it neither eases nor hardens the order.
        vals = [cell[(p, a, m)]["e2e_rate"] for a, m in columns
                if (p, a, m) in cell and cell[(p, a, m)]["e2e_rate"] is not None]
        return (sum(vals) / len(vals) if vals else 1.0, p)

    problems.sort(key=difficulty)
    grid = [[cell[(p, a, m)]["e2e_rate"] if (p, a, m) in cell else None for a, m in columns] for p in problems]
    return (html.figure(plots.heatmap(problems, [f"{a} / {m}" for a, m in columns], grid), "problem × agent/model E2E")
            + f'<p class="note">{len(problems)} problems, ordered by mean E2E across agent/model (hardest first); '
              'a diagnosis-only problem has no E2E (blank).</p>')


def _per_problem(engine: Engine, sweep_id: str, sregym_ids: Mapping[str, Sequence[str]]) -> str:
    rows = queries.rates(engine, sweep_id, "problem")
    body = [[html.fmt(r["problem_id"]), escape(", ".join(sregym_ids.get(r["problem_id"], ()))) or "–",
             html.fmt(r["n"]), html.fmt(r["diagnosis_rate"], "pct"), html.fmt(r["mitigation_rate"], "pct"),
             html.fmt(r["e2e_rate"], "pct")] for r in rows]
    return (html.table(["problem", "SREGym id", "n", "diagnosis", "mitigation", "E2E"], body, numeric_from=2)
            + '<p class="note">SREGym id: the problem(s) of SREGym\'s registry this one injects the same root cause '
              "as, in the same application (`farm problems list --sregym`).</p>")


def _tokens(engine: Engine, sweep_id: str) -> str:
    usage = queries.token_usage(engine, sweep_id)
    tools = queries.tool_tokens(engine, sweep_id)
    parts = [html.figure(plots.token_stack(usage), "prompt / cached / completion tokens per model",
                         "no model tokens recorded (agents that use no model)")]
    parts.append(html.table(
        ["model", "attempts", "prompt", "completion", "cached", "cache-hit share", "cost"],
        [[html.fmt(u["model"]), html.fmt(u["attempts"]), html.fmt(u["prompt_tokens"]), html.fmt(u["completion_tokens"]),
          html.fmt(u["cached_tokens"]) if u["cached_tokens"] is not None else '<span class="missing">not recorded</span>',
          html.fmt(u["cache_hit_share"], "pct") if u["cache_hit_share"] is not None else
          '<span class="missing">not recorded</span>', html.fmt(u["cost_usd"], "usd")] for u in usage]))
    per_tool = tools["per_tool"]
    parts.append("<h3>Tool output tokens per tool (which tools flood the context)</h3>")
    parts.append(html.figure(plots.simple_bars([t["tool"] for t in per_tool], [t["tokens"] for t in per_tool],
                                               "tool output tokens, all attempts", "tokens", horizontal=True),
                             "tool output tokens per tool", "no per-tool token counts recorded"))
    parts.append(html.table(["tool", "calls", "output tokens", "tokens per call"],
                            [[html.fmt(t["tool"]), html.fmt(t["calls"]), html.fmt(t["tokens"]),
                              html.fmt(t["tokens_per_call"])] for t in per_tool]))
    if tools["attempts_not_recorded"]:
        parts.append(f'<p class="missing">{tools["attempts_not_recorded"]} attempt(s) carry no per-tool counts '
                     "(recorded before they were stored): not recorded, left out above.</p>")
    modes = tools["per_mode"]
    parts.append("<h3>Raw against summarised tool output</h3>")
    labels = list(modes)
    parts.append(html.figure(plots.simple_bars(labels, [modes[m]["tokens_per_call"] for m in labels],
                                               "tool output tokens per call, by tool mode", "tokens per call"),
                             "tool tokens per call by mode", "no tool calls recorded"))
    parts.append(html.table(["tool mode", "attempts", "tool calls", "output tokens", "tokens per call", "finished trials",
                             "E2E", "95% CI"],
                            [[html.fmt(m), html.fmt(v["attempts"]), html.fmt(v["tool_calls"]), html.fmt(v["tokens"]),
                              html.fmt(v["tokens_per_call"]), html.fmt(v["trials"]), html.fmt(v["e2e_rate"], "pct"),
                              html.fmt((v["e2e_lo"], v["e2e_hi"]), "ci")] for m, v in modes.items()]))
    return "".join(parts)


def _infrastructure(engine: Engine, sweep_id: str, info: dict[str, Any]) -> str:
    infra = queries.infrastructure(engine, sweep_id)
    from results.ledger import sweep_cost

    spent, cap = sweep_cost(engine, sweep_id), info["cost_cap_usd"]

    def counts(d: dict[str, int]) -> str:
        return html.table(["", "count"], [[html.fmt(k), html.fmt(v)] for k, v in sorted(d.items())]) if d else "<p>none</p>"

    from results.leaderboard import failure_counts

    failed = failure_counts(engine, sweep_id)
    return ("<p>Never counted against an agent: trials infrastructure failed (deploy, inject, oracle, or the model "
            "provider: phase <code>provider</code>), trials the sweep's cost cap kept from running or cut short, "
            "attempts lost with their worker.</p>"
            + html.table(["", "trials"], [
                ["given up because the model provider failed (not counted; a re-run retries them)",
                 html.fmt(failed["provider_failed"])],
                ["given up on other infrastructure (not counted)", html.fmt(failed["infra_failed_other"])],
                ["ended in the agent's own error (counted in n)", html.fmt(failed["agent_errors"])],
                ["… of which its conversation outgrew the model's context", html.fmt(failed["context_length"])]])
            + f"<p>spent {html.fmt(spent, 'usd')}" + (f" of a {html.fmt(cap, 'usd')} cap" if cap is not None else
                                                      " (no cap)") + "</p>"
            "<h3>Trials by state</h3>" + counts(infra["trial_states"])
            + "<h3>Attempts by state</h3>" + counts(infra["attempt_states"])
            + "<h3>Infrastructure errors by phase</h3>" + counts(infra["infra_errors_by_phase"])
            + "<h3>Infrastructure events (the trial's result stands)</h3>" + counts(infra["infra_events"]))


def _comparison(engine: Engine, other: str, sweep_id: str, by: str) -> str:
    from results.report.compare import compare

    rows = compare(engine, other, sweep_id, by)
    if not rows:
        return f"<p>No finished trial is shared with {escape(other)} (same problem, agent, model, seed, noise).</p>"
    return (f"<p>A = {escape(other)}, B = {escape(sweep_id)}; pairs are the trials both finished. Interval: seeded "
            "bootstrap over the pairs; p: McNemar's exact test on the discordant pairs.</p>"
            + _paired_table(rows, group_keys(by)))


def _noise_pairs(engine: Engine, sweep_id: str) -> str:
    from results.report.compare import noise_effect

    rows = noise_effect(engine, sweep_id)
    if not rows:
        return "<p>No problem ran both without and with noise (same agent, model and seed) to pair.</p>"
    return ("<h3>Paired: the same problem, agent, model and seed, A without noise, B with</h3>"
            + _paired_table(rows, ("agent", "model")))


def _paired_table(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> str:
    body = [[html.fmt(r[k]) for k in keys] + [
        html.fmt(r["metric"]), html.fmt(r["pairs"]), html.fmt(r["rate_a"], "pct"), html.fmt(r["rate_b"], "pct"),
        "–" if r["diff"] is None else f"{100 * r['diff']:+.1f} pp [{100 * r['diff_lo']:+.1f}, {100 * r['diff_hi']:+.1f}]",
        html.fmt(r["a_only"]), html.fmt(r["b_only"]), f"{r['mcnemar_p']:.4g}"] for r in rows]
    return (html.table([*keys, "metric", "pairs", "A", "B", "B − A [95%]", "A only", "B only", "McNemar p"], body,
                         numeric_from=len(keys) + 1))


def _trial_table(out: Path, trials: list[dict[str, Any]], drill_down: bool, reader: ArtifactReader) -> str:
    rows = []
    for t in trials:
        link = escape(t["key"])
        if drill_down:
            write_trial_page(out, t, reader)
            link = f'<a href="{escape(trial_page_name(t["id"]))}">{link}</a>'

        def v(x: Any) -> str:
            return "–" if x is None else ('<span class="pass">✓</span>' if x else '<span class="fail">✗</span>')

        rows.append([link, html.fmt(t["state"]), v(t["diagnosis_passed"]), v(t["mitigation_passed"]), v(t["e2e_passed"]),
                     html.fmt(t["tokens_in"]), html.fmt(t["tokens_out"]), html.fmt(t["cost_usd"], "usd"),
                     html.fmt(t["time_to_diagnosis_s"]), html.fmt(t["time_to_mitigation_s"]), html.fmt(len(t["attempts"]))])
    note = ("<p class='note'>Each trial links to its page: the ATIF trajectory, tool calls, verdicts with the judge's "
            "quoted evidence and the cluster snapshot of every attempt.</p>" if drill_down else "")
    return note + html.table(["trial (problem|agent|model|seed|noise)", "state", "D", "M", "E2E", "tokens in", "tokens out",
                              "cost", "TTD s", "TTM s", "attempts"], rows)
