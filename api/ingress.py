"""The ingress: public service routes of a sandbox, served by this server on its own port.

A request whose ``Host`` is an exposure host (``<sandbox>--p<port>.<exposure domain>``) or whose
path is the path form (``/api/v1/sandboxes/<sandbox>/ingress/<port>/…``) never reaches the API:
before routing, its target is taken from the host or path and the request is routed to the two
ingress handlers (HTTP and WebSocket), which no API middleware (token, origin, runtime gate)
applies to. The route decides everything else (``ingress_admission.py``): its CORS, auth and
rate limit, whether a paused sandbox is woken, and the ``cmd`` session behind it. The request
then goes to the sandbox's own address on that port (``ingress_proxy.py``); nothing else is ever
a destination, so no port, host, rewrite or header can point a route at the host, the API or
another sandbox.
"""
from __future__ import annotations

from dataclasses import dataclass

from httptools import parse_url
from sanic import Request

from .exposure import exposed_target, path_target

HTTP_PATH = "/_sessiond/ingress"
WS_PATH = "/_sessiond/ingress-ws"


@dataclass(frozen=True)
class IngressTarget:
    sandbox_id: str
    port: int
    raw_path: str  # as sent (still percent-encoded); normalized by the admission
    query: str
    form: str  # "host" or "path"


def target_of(request: Request, domain: str) -> IngressTarget | None:
    parsed = request._parsed_url  # the request line as sent (Sanic parsed it with httptools)
    raw_path = parsed.path.decode("latin-1") if parsed.path else "/"
    query = parsed.query.decode("latin-1") if parsed.query else ""
    hit = exposed_target(request.headers.get("host", ""), domain)
    if hit is not None:
        return IngressTarget(hit[0], hit[1], raw_path, query, "host")
    if raw_path.startswith("/api/v1/sandboxes/"):
        found = path_target(raw_path)
        if found is not None:
            return IngressTarget(found[0], found[1], found[2], query, "path")
    return None


def install_ingress(app) -> None:
    """Before routing: exposure hosts and the path form go to the ingress handlers."""
    from .ingress_admission import Ingress
    from .ingress_handlers import bp

    app.ctx.ingress = Ingress(app.ctx.container)

    @app.signal("http.routing.before")
    async def route_exposed_requests(request: Request):
        target = target_of(request, request.app.ctx.container.settings.exposure_domain)
        if target is None:
            return
        request.ctx.ingress = target
        # Sanic routes on the parsed request line: point it at the handler; the request line as
        # sent stays in the target (and in request.raw_url).
        upgrade = request.headers.get("upgrade", "").lower() == "websocket"
        request._parsed_url = parse_url((WS_PATH if upgrade else HTTP_PATH).encode())

    app.blueprint(bp)
