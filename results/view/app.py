"""The web app behind `farm view`: server-rendered pages over the farm's SQL rows and artifacts,
read-only (GET only, a read-only database session), live where a sweep is still running (a small
script polls HTML fragments). Every value from a row or an artifact is escaped by the templates; a
transcript is adversarial input.

Routes: / (sweeps), /sweeps/{id} (progress, leaderboard by any columns, heatmap), /sweeps/{id}/trials
(filter, search, sort, pages), /sweeps/{id}/errors, /trials/{id} (transcript, verdicts beside the
ground truth, checks, snapshot, previous/next), /compare (two sweeps)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from core.states import TRIAL_DONE, TrialState
from results import leaderboard, progress
from results.db import redact_url
from results.report import queries as report_queries
from results.report.trials import ARTIFACTS, ArtifactReader, attempt_html, ground_truth_html
from results.view import format as fmt
from results.view import queries
from results.view.auth import TokenGate

log = logging.getLogger("results.view")

GroundTruthLookup = Callable[[str], dict[str, Any] | None]
# The leaderboard's columns this page knows how to show; any other a row carries (pass@k, a
# clustered interval: columns other changes add) is shown after them as it is.
KNOWN = set(leaderboard.COLUMNS)
BY_NAME = {column: name for name, column in leaderboard.GROUP_COLUMNS.items()}
HEATMAP_PROBLEMS = 400
LIVE_MS = 2000
FILTER_MENUS = ("agent", "model", "layer", "app", "composition", "problem")
# A page's independent queries run side by side: on a large sweep each is a scan of its own, and
# the database serves them on as many cores as it has.
_queries = ThreadPoolExecutor(max_workers=6, thread_name_prefix="view-query")


def together(**calls: Callable[[], Any]) -> dict[str, Any]:
    """Run the calls at once; their results by name (the first exception is raised)."""
    futures = {name: _queries.submit(call) for name, call in calls.items()}
    return {name: f.result() for name, f in futures.items()}


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("results.view", "templates"), autoescape=select_autoescape(["html"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(fmt.FILTERS)
    env.globals.update(interval=fmt.interval, live_ms=LIVE_MS, urlencode=urlencode)
    return env


class View:
    """The pages; one instance per app, holding the engine, the artifact reader and the templates."""

    def __init__(self, engine: Engine, ground_truth: GroundTruthLookup | None = None) -> None:
        self.engine, self.ground_truth = engine, ground_truth
        self.reader = ArtifactReader()
        self.env = _environment()

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(template).render(**context), status_code=status)

    # -- sweeps ---------------------------------------------------------------------------------
    def sweeps(self, request: Request) -> Response:
        rows = queries.sweeps(self.engine)
        return self.render("sweeps.html", sweeps=rows, live=not all(r["settled"] for r in rows))

    def sweeps_live(self, request: Request) -> Response:
        rows = queries.sweeps(self.engine)
        return self._fragment("sweeps_table.html", all(r["settled"] for r in rows), sweeps=rows)

    def _sweep_or_404(self, sweep_id: str) -> None:
        if not report_queries.exists(self.engine, sweep_id):
            raise HTTPException(404, f"no sweep '{sweep_id}' in the database")

    def _progress_calls(self, sweep_id: str) -> dict[str, Callable[[], Any]]:
        """The queries of the progress block (none of them may call `together`: a task that waits
        on the pool it runs in could wait forever)."""
        return {"snap": lambda: progress.snapshot(self.engine, sweep_id),
                "recent_errors": lambda: queries.failed_attempts(self.engine, sweep_id, per_page=5, counted=False)[0]}

    def _progress(self, sweep_id: str) -> dict[str, Any]:
        return {"sweep_id": sweep_id, **together(**self._progress_calls(sweep_id))}

    def sweep(self, request: Request) -> Response:
        sweep_id = request.path_params["sweep"]
        by = request.query_params.get("by", "agent,model")
        try:
            names = leaderboard.group_keys(by)
        except ValueError as exc:
            raise queries.BadQuery(str(exc)) from None
        flt = queries.TrialFilter.parse(request.query_params)
        where = {k: v for k, v in flt.equal.items() if k in leaderboard.GROUP_COLUMNS}
        base = {k: v for k, v in flt.params().items() if k in leaderboard.GROUP_COLUMNS}
        self._sweep_or_404(sweep_id)
        got = together(rows=lambda: leaderboard.compute(self.engine, sweep_id, by, where=where),
                       heatmap=lambda: self._heatmap(sweep_id, where, base),
                       values=lambda: queries.distinct_values(self.engine, sweep_id, FILTER_MENUS),
                       info=lambda: report_queries.sweep_info(self.engine, sweep_id), **self._progress_calls(sweep_id))
        info, rows = got["info"], got["rows"]
        q = flt.q.casefold()
        if q:
            rows = [r for r in rows if q in " ".join(str(r.get(k)) for k in names).casefold()]
        sort, descending = request.query_params.get("sort", ""), request.query_params.get("desc") == "1"
        if sort:
            if rows and sort not in rows[0]:
                raise queries.BadQuery(f"the leaderboard has no column '{sort}'")
            present = [r for r in rows if r.get(sort) is not None]
            rows = sorted(present, key=lambda r: r[sort], reverse=descending) + [r for r in rows if r.get(sort) is None]
        extras = [k for k in (rows[0] if rows else {}) if k not in KNOWN and k not in names and k != "sweep"]
        rules = sorted({str(r["diagnosis_pass_rule"]) for r in rows if r.get("diagnosis_pass_rule")})

        def link(row: dict[str, Any], **extra: Any) -> str:
            params = dict(base)
            for column in names:
                value = row.get("sweep" if column == "sweep_id" else column)
                if value is not None:
                    params[BY_NAME.get(column, column)] = str(value).lower() if isinstance(value, bool) else str(value)
            params.update({k: str(v) for k, v in extra.items()})
            return f"/sweeps/{sweep_id}/trials?{urlencode(params)}"

        def sort_link(column: str) -> str:
            params = {**flt.params(), "by": by, "sort": column}
            if sort == column and not descending:
                params["desc"] = "1"
            return "?" + urlencode(params)

        return self.render(
            "sweep.html", info=info, by=by, names=names, rows=rows, extras=extras, rules=rules,
            link=link, sort_link=sort_link, flt=flt, values=got["values"], groupings=list(leaderboard.GROUPINGS),
            heatmap=got["heatmap"], spec=json.dumps(info["spec"], indent=2),
            noise_name=lambda r: "noise" if r else "quiet", by_name=BY_NAME, sweep_id=sweep_id, snap=got["snap"],
            recent_errors=got["recent_errors"])

    def _heatmap(self, sweep_id: str, where: dict[str, Any], base: dict[str, str]) -> dict[str, Any]:
        rows = [r for r in leaderboard.compute(self.engine, sweep_id, "problem,agent,model", where=where) if r["n"]]
        columns = sorted({(r["agent"], r["model"]) for r in rows})
        cell = {(r["problem_id"], r["agent"], r["model"]): r for r in rows}
        problems = sorted({r["problem_id"] for r in rows})

        def difficulty(p: str) -> tuple[float, str]:
            vals = [cell[(p, a, m)]["e2e_rate"] for a, m in columns
                    if (p, a, m) in cell and cell[(p, a, m)]["e2e_rate"] is not None]
            return (sum(vals) / len(vals) if vals else 1.0, p)

        problems.sort(key=difficulty)
        grid = []
        for p in problems[:HEATMAP_PROBLEMS]:
            line = []
            for a, m in columns:
                r = cell.get((p, a, m))
                params = {**base, "problem": p, "agent": a, "model": m, "state": TrialState.FINISHED}
                line.append(None if r is None else {
                    "rate": r["e2e_rate"], "n": r["n"], "href": f"/sweeps/{sweep_id}/trials?{urlencode(params)}"})
            grid.append((p, line))
        return {"columns": columns, "grid": grid, "problems": len(problems), "shown": min(len(problems), HEATMAP_PROBLEMS)}

    def sweep_live(self, request: Request) -> Response:
        sweep_id = request.path_params["sweep"]
        self._sweep_or_404(sweep_id)
        ctx = self._progress(sweep_id)
        return self._fragment("progress.html", ctx["snap"]["settled"], **ctx)

    def _fragment(self, template: str, settled: bool, **context: Any) -> Response:
        response = self.render(template, **context)
        # The page's script stops polling once the sweep has nothing left to run.
        response.headers["X-Live"] = "settled" if settled else "running"
        return response

    # -- trials ---------------------------------------------------------------------------------
    def _page(self, request: Request) -> tuple[int, int]:
        try:
            return int(request.query_params.get("page", 1)), int(request.query_params.get("per_page", 100))
        except ValueError:
            raise queries.BadQuery("page and per_page must be whole numbers") from None

    def trials(self, request: Request) -> Response:
        sweep_id = request.path_params["sweep"]
        self._sweep_or_404(sweep_id)
        flt = queries.TrialFilter.parse(request.query_params)
        sort = request.query_params.get("sort", "key")
        descending = request.query_params.get("desc") == "1"
        page, per_page = self._page(request)
        got = together(listed=lambda: queries.trials(self.engine, sweep_id, flt, sort, descending, page, per_page),
                       values=lambda: queries.distinct_values(self.engine, sweep_id, FILTER_MENUS[:-2] + ("problem", "state")))
        rows, total = got["listed"]
        pages = max(1, -(-total // per_page))

        def at(**changes: Any) -> str:
            params = {**flt.params(), "sort": sort, "desc": "1" if descending else "", "page": page,
                      "per_page": per_page if per_page != 100 else "", **changes}
            return "?" + urlencode({k: v for k, v in params.items() if v not in ("", None)})

        def sort_link(column: str) -> str:
            return at(sort=column, desc="1" if sort == column and not descending else "", page=1)

        return self.render("trials.html", sweep_id=sweep_id, rows=rows, total=total, page=page, pages=pages, at=at,
                           sort_link=sort_link, flt=flt, sort=sort, descending=descending, values=got["values"],
                           sorts=queries.SORTS, outcomes=queries.OUTCOMES, outcome_values=queries.OUTCOME_VALUES,
                           context=flt.query_string())

    def trial(self, request: Request) -> Response:
        t = queries.trial(self.engine, request.path_params["trial"])
        if t is None:
            raise HTTPException(404, f"no trial '{request.path_params['trial']}' in the database")
        flt = queries.TrialFilter.parse(request.query_params)
        search = str(request.query_params.get("find", ""))[: queries.SEARCH_CHARS].strip()
        prev, nxt = queries.neighbours(self.engine, t, flt)
        truth = self._ground_truth(t["problem_id"])
        attempts = []
        for a in t["attempts"]:
            uri = a.get("artifacts_uri")
            links = " · ".join(
                f'<a href="/trials/{t["id"]}/attempts/{a["token"]}/{name}.json">{name}</a>'
                for name in ARTIFACTS if uri and self._may_exist(uri, name))
            attempts.append(Markup(attempt_html(a, self.reader, links, search, truth)))
        return self.render("trial.html", t=t, attempts=attempts, prev=prev, next=nxt, context=flt.query_string(),
                           find=search, truth=Markup(ground_truth_html(truth)) if truth else None)

    @staticmethod
    def _may_exist(uri: str, name: str) -> bool:
        # A local folder is asked; an S3 listing per page would cost more than a link that 404s.
        return not uri.startswith("file://") or (Path(uri.removeprefix("file://")) / f"{name}.json").is_file()

    def _ground_truth(self, problem_id: str) -> dict[str, Any] | None:
        if self.ground_truth is None:
            return None
        try:
            return self.ground_truth(problem_id)
        except Exception as exc:  # a problem gone from the catalog: the page says so, the rest stands
            log.info("no ground truth for %s: %s", problem_id, exc)
            return None

    def artifact(self, request: Request) -> Response:
        t = queries.trial(self.engine, request.path_params["trial"])
        name = request.path_params["name"]
        if t is None or name not in ARTIFACTS:
            raise HTTPException(404, "no such trial or artifact")
        uri = next((a["artifacts_uri"] for a in t["attempts"] if str(a["token"]) == request.path_params["token"]), None)
        found = self.reader.raw(uri, name) if uri else None
        if found is None:
            raise HTTPException(404, f"attempt {request.path_params['token']} recorded no {name}")
        file, data = found
        # A compressed document (the cluster snapshot) is sent as stored: the browser inflates it.
        headers = {"Content-Encoding": "gzip"} if file.endswith(".gz") else None
        return Response(data, media_type="application/json", headers=headers)

    # -- errors and comparison ------------------------------------------------------------------
    def _errors(self, request: Request, sweep_id: str) -> dict[str, Any]:
        phase = request.query_params.get("phase") or None
        page, per_page = self._page(request)
        rows, total = queries.failed_attempts(self.engine, sweep_id, phase, page, per_page)
        assert total is not None
        return {"sweep_id": sweep_id, "attempts": rows, "total": total, "phase": phase, "page": page,
                "pages": max(1, -(-total // per_page))}

    def _settled(self, sweep_id: str) -> bool:
        return not any(n for state, n in progress.status(self.engine, sweep_id).items() if state not in TRIAL_DONE)

    def errors(self, request: Request) -> Response:
        sweep_id = request.path_params["sweep"]
        self._sweep_or_404(sweep_id)
        got = together(infra=lambda: report_queries.infrastructure(self.engine, sweep_id),
                       events=lambda: queries.infra_events(self.engine, sweep_id),
                       settled=lambda: self._settled(sweep_id), errors=lambda: self._errors(request, sweep_id))
        return self.render("errors.html", infra=got["infra"], events=got["events"], settled=got["settled"],
                           live_url=f"/sweeps/{sweep_id}/errors/live?{request.url.query}", **got["errors"])

    def errors_live(self, request: Request) -> Response:
        sweep_id = request.path_params["sweep"]
        self._sweep_or_404(sweep_id)
        got = together(settled=lambda: self._settled(sweep_id), errors=lambda: self._errors(request, sweep_id))
        return self._fragment("errors_table.html", got["settled"], **got["errors"])

    def compare(self, request: Request) -> Response:
        from results.report.compare import compare

        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        by = request.query_params.get("by", "agent,model")
        try:
            names = leaderboard.group_keys(by)
        except ValueError as exc:
            raise queries.BadQuery(str(exc)) from None
        rows = None
        if a and b:
            for s in (a, b):
                self._sweep_or_404(s)
            rows = compare(self.engine, a, b, by)
            for r in rows:  # each rate links to the trials it pairs
                r["filter"] = {BY_NAME.get(k, k): str(r[k]).lower() if isinstance(r[k], bool) else str(r[k])
                               for k in names if r.get(k) is not None}
                r["filter"]["state"] = TrialState.FINISHED
        return self.render("compare.html", a=a, b=b, by=by, names=names, rows=rows,
                           sweeps=queries.sweep_ids(self.engine))


def create_app(engine: Engine, token: str | None = None, ground_truth: GroundTruthLookup | None = None,
               allowed_hosts: list[str] | None = None) -> Starlette:
    """The view's ASGI app. `token`: every request must carry it (once as ?token=, then a cookie);
    `allowed_hosts`: the Host headers accepted (a loopback server refuses other names, so a web page
    elsewhere cannot reach it through DNS rebinding); `ground_truth`: a problem id's ground truth
    (the catalog lives above this package)."""
    view = View(engine, ground_truth)
    url = redact_url(str(engine.url))

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return view.render("error.html", status=exc.status_code, message=exc.detail)

    async def on_bad_query(request: Request, exc: Exception) -> Response:
        return view.render("error.html", status=400, message=str(exc))

    async def on_database(request: Request, exc: Exception) -> Response:
        log.warning("database %s: %s", url, exc)
        return view.render("error.html", status=503,
                           message=f"the database {url} cannot be read right now: {str(exc).splitlines()[0]}; "
                                   "check that it is up, then reload")

    routes = [
        Route("/", view.sweeps), Route("/live/sweeps", view.sweeps_live), Route("/healthz", healthz),
        Route("/sweeps/{sweep}", view.sweep), Route("/sweeps/{sweep}/live", view.sweep_live),
        Route("/sweeps/{sweep}/trials", view.trials), Route("/sweeps/{sweep}/errors", view.errors),
        Route("/sweeps/{sweep}/errors/live", view.errors_live), Route("/trials/{trial}", view.trial),
        Route("/trials/{trial}/attempts/{token}/{name}.json", view.artifact), Route("/compare", view.compare),
        Mount("/static", StaticFiles(packages=[("results.view", "static")]), name="static"),
    ]
    middleware = [Middleware(TokenGate, token=token)]
    if allowed_hosts:
        middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts))
    return Starlette(routes=routes, middleware=middleware,
                     exception_handlers={HTTPException: on_http, queries.BadQuery: on_bad_query,
                                         OperationalError: on_database})
