"""The report's figures, drawn with matplotlib's object API on the Agg canvas (no display, no
pyplot global state) and returned as PNG bytes. A figure only draws numbers it is given; with
nothing to draw it returns None and the page says why."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before anything else of matplotlib's: the report never opens a window

from matplotlib.figure import Figure  # noqa: E402

METRICS = (("diagnosis", "#4c72b0"), ("mitigation", "#dd8452"), ("e2e", "#55a868"))
DPI = 90


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return buf.getvalue()


def _yerr(rows: Sequence[dict[str, Any]], metric: str) -> list[list[float]]:
    lows, highs = [], []
    for r in rows:
        rate, lo, hi = r.get(f"{metric}_rate"), r.get(f"{metric}_lo"), r.get(f"{metric}_hi")
        # clamped: the interval's float ends can sit a rounding error inside a rate of 0 or 1
        lows.append(0.0 if rate is None or lo is None else max(0.0, rate - lo))
        highs.append(0.0 if rate is None or hi is None else max(0.0, hi - rate))
    return [lows, highs]


def rate_bars(rows: Sequence[dict[str, Any]], label: Callable[[dict[str, Any]], str], title: str) -> bytes | None:
    """Diagnosis, mitigation and E2E rates per group, with 95% Wilson intervals as error bars."""
    rows = [r for r in rows if r.get("n")]
    if not rows:
        return None
    width = max(5.0, 0.9 * len(rows) + 2)
    fig = Figure(figsize=(min(width, 18), 3.6))
    ax = fig.subplots()
    xs = range(len(rows))
    for i, (metric, colour) in enumerate(METRICS):
        ax.bar([x + (i - 1) * 0.27 for x in xs], [r[f"{metric}_rate"] or 0.0 for r in rows], 0.27,
               yerr=_yerr(rows, metric), capsize=3, color=colour, label=metric)
    names = [label(r) for r in rows]
    crowded = len(rows) > 6 or sum(len(n) for n in names) > 12 * len(rows) and len(rows) > 2
    ax.set_xticks(list(xs), [f"{n}\nn={r['n']}" for n, r in zip(names, rows, strict=True)], fontsize=8,
                  rotation=25 if crowded else 0, ha="right" if crowded else "center")
    ax.set_ylim(0, 1.22)  # headroom for the legend above the 100% bars
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("rate (95% Wilson)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, ncols=3, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indexes of the points no other point beats on both axes (lower x, higher y), by x."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front, best = [], float("-inf")
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return front


def pareto(rows: Sequence[dict[str, Any]], label: Callable[[dict[str, Any]], str]) -> bytes | None:
    """E2E against mean cost and mean tokens per trial, per agent × model, the Pareto front drawn."""
    rows = [r for r in rows if r.get("n") and r.get("e2e_rate") is not None]
    if not rows:
        return None
    fig = Figure(figsize=(11, 4))
    axes = fig.subplots(1, 2)
    for ax, key, xlabel in ((axes[0], "mean_cost_usd", "mean cost per trial ($)"),
                            (axes[1], "mean_tokens", "mean tokens per trial")):
        pts = [(float(r.get(key) or 0.0), float(r["e2e_rate"])) for r in rows]
        yerr = _yerr(rows, "e2e")
        for (x, y), r, lo, hi in zip(pts, rows, yerr[0], yerr[1], strict=True):
            ax.errorbar([x], [y], yerr=[[lo], [hi]], fmt="o", capsize=3)
            ax.annotate(label(r), (x, y), fontsize=7, xytext=(4, 4), textcoords="offset points")
        front = pareto_front(pts)
        ax.plot([pts[i][0] for i in front], [pts[i][1] for i in front], "--", color="grey", lw=1,
                label="Pareto front")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("E2E rate")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _png(fig)


def simple_bars(labels: Sequence[str], values: Sequence[float | None], title: str, ylabel: str,
                errors: Sequence[tuple[float | None, float | None]] | None = None,
                horizontal: bool = False) -> bytes | None:
    pairs = [(lab, v) for lab, v in zip(labels, values, strict=True) if v is not None]
    if not pairs:
        return None
    fig = Figure(figsize=(max(5.0, min(0.7 * len(pairs) + 3, 16)), 3.4) if not horizontal
                 else (7, max(2.5, 0.3 * len(pairs) + 1)))
    ax = fig.subplots()
    names, vals = [p[0] for p in pairs], [float(p[1]) for p in pairs]
    err = None
    if errors is not None:
        kept = [e for e, v in zip(errors, values, strict=True) if v is not None]
        err = [[max(0.0, v - (lo if lo is not None else v)) for v, (lo, _) in zip(vals, kept, strict=True)],
               [max(0.0, (hi if hi is not None else v) - v) for v, (_, hi) in zip(vals, kept, strict=True)]]
    if horizontal:
        ax.barh(names[::-1], vals[::-1], color="#4c72b0")
        ax.set_xlabel(ylabel)
    else:
        ax.bar(names, vals, yerr=err, capsize=3, color="#4c72b0")
        ax.set_ylabel(ylabel)
        ax.tick_params(axis="x", labelsize=8, rotation=30 if len(names) > 5 else 0)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x" if horizontal else "y", alpha=0.3)
    return _png(fig)


def conditional(rows: Sequence[dict[str, Any]], label: Callable[[dict[str, Any]], str]) -> bytes | None:
    """P(M|D) against P(M|not D) per agent × model: does a right diagnosis lead to a fix?"""
    rows = [r for r in rows if r["n"]]
    if not rows:
        return None
    fig = Figure(figsize=(max(5.0, min(1.0 * len(rows) + 3, 16)), 3.4))
    ax = fig.subplots()
    for i, (key, colour, name) in enumerate((("p_m_given_d", "#55a868", "P(M|D)"),
                                             ("p_m_given_not_d", "#c44e52", "P(M|not D)"))):
        vals = [r[key] if r[key] is not None else 0.0 for r in rows]
        err = [[max(0.0, r[key] - r[f"{key}_lo"]) if r[key] is not None else 0.0 for r in rows],
               [max(0.0, r[f"{key}_hi"] - r[key]) if r[key] is not None else 0.0 for r in rows]]
        ax.bar([x + (i - 0.5) * 0.38 for x in range(len(rows))], vals, 0.38, yerr=err, capsize=3,
               color=colour, label=name)
    ax.set_xticks(range(len(rows)), [f"{label(r)}\nD {r['diagnosed']} / not D {r['not_diagnosed']}"
                                     for r in rows], fontsize=8)
    ax.set_ylim(0, 1.22)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("mitigation rate (95% Wilson)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def distributions(groups: dict[str, dict[str, list[float]]]) -> bytes | None:
    """TTD and TTM box plots per agent × model (cluster seconds from the injection)."""
    if not any(v["ttd"] or v["ttm"] for v in groups.values()):
        return None
    fig = Figure(figsize=(11, 3.8))
    axes = fig.subplots(1, 2)
    names = list(groups)
    for ax, key, title in ((axes[0], "ttd", "time to diagnosis"), (axes[1], "ttm", "time to mitigation")):
        data = [groups[n][key] for n in names]
        kept = [(n, d) for n, d in zip(names, data, strict=True) if d]
        if kept:
            ax.boxplot([d for _, d in kept], showmeans=True)
            ax.set_xticks(range(1, len(kept) + 1), [f"{n}\nn={len(d)}" for n, d in kept], fontsize=8)
        else:
            ax.text(0.5, 0.5, "none recorded", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("cluster seconds after injection")
        ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def heatmap(problems: Sequence[str], columns: Sequence[str], values: Sequence[Sequence[float | None]]) -> bytes | None:
    """Problems (rows, hardest first) × agent/model (columns): E2E rate; blank where none ran."""
    if not problems or not columns:
        return None
    import numpy as np

    grid = np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)
    fig = Figure(figsize=(max(5.0, min(1.1 * len(columns) + 4, 18)), max(2.5, 0.22 * len(problems) + 1.5)))
    ax = fig.subplots()
    image = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", cmap="RdYlGn", vmin=0, vmax=1,
                      interpolation="nearest")
    ax.set_yticks(range(len(problems)), problems, fontsize=6 if len(problems) > 40 else 8)
    ax.set_xticks(range(len(columns)), columns, fontsize=8, rotation=30, ha="right")
    fig.colorbar(image, ax=ax, label="E2E rate")
    return _png(fig)


def token_stack(rows: Sequence[dict[str, Any]]) -> bytes | None:
    """Prompt (uncached and cached) and completion tokens per model (per agent / model when the
    rows name the agent), cache-hit share on top."""
    rows = [r for r in rows if r["prompt_tokens"] or r["completion_tokens"]]
    if not rows:
        return None
    fig = Figure(figsize=(max(5.0, min(1.2 * len(rows) + 3, 16)), 3.6))
    ax = fig.subplots()
    names = [f"{r['agent']} / {r['model']}" if "agent" in r else r["model"] for r in rows]
    cached = [r["cached_tokens"] or 0 for r in rows]
    uncached = [r["prompt_tokens"] - c for r, c in zip(rows, cached, strict=True)]
    completion = [r["completion_tokens"] for r in rows]
    ax.bar(names, uncached, color="#4c72b0", label="prompt (not cached)")
    ax.bar(names, cached, bottom=uncached, color="#8172b3", label="prompt (cached)")
    ax.bar(names, completion, bottom=[u + c for u, c in zip(uncached, cached, strict=True)], color="#dd8452",
           label="completion")
    for x, r in enumerate(rows):
        share = r["cache_hit_share"]
        text = "cache: not recorded" if share is None else f"cache hit {100 * share:.0f}%"
        ax.annotate(text, (x, r["prompt_tokens"] + r["completion_tokens"]), ha="center", fontsize=7,
                    xytext=(0, 3), textcoords="offset points")
    ax.set_ylabel("tokens (all attempts)")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)
