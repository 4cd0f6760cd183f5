"""The view's gate and headers. With a token (a server reachable beyond loopback), every request
must carry it: once as `?token=` (the URL `farm view` prints), which sets an HttpOnly cookie and
redirects to the URL without it, then the cookie; or `Authorization: Bearer`. Every response says
the page runs only its own script and may not be framed."""

from __future__ import annotations

import hmac
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "farm_view_token"
HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                               "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class TokenGate:
    def __init__(self, app: ASGIApp, token: str | None = None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for k, v in HEADERS.items():
                    headers.setdefault(k, v)
            await send(message)

        if self.token and scope["path"] != "/healthz":
            request = Request(scope)
            given = request.query_params.get("token")
            if given is not None and self._holds(given):
                rest = urlencode([(k, v) for k, v in parse_qsl(request.url.query) if k != "token"])
                response = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303)
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
                await response(scope, receive, with_headers)
                return
            bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not (self._holds(request.cookies.get(COOKIE, "")) or self._holds(bearer)):
                page = HTMLResponse("<!DOCTYPE html><title>farm view: token needed</title><p>This view needs its "
                                    "token: open the address <code>farm view</code> printed (it ends in "
                                    "<code>?token=…</code>).</p>", status_code=401)
                await page(scope, receive, with_headers)
                return
        await self.app(scope, receive, with_headers)

    def _holds(self, given: str) -> bool:
        assert self.token
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())
