"""Sweep analytics: the HTML report (`farm report`), paired comparisons (`farm compare`),
table exports (`farm export`). Modules: queries (SQL aggregates), plots (matplotlib figures),
html (the page), trials (per-trial drill-down pages), compare, export, build (assembles)."""

from results.report.build import build_report, code_version

__all__ = ["build_report", "code_version"]
