"""The two ingress handlers (HTTP and WebSocket) that ``ingress.install_ingress`` routes exposure
requests to. Requests that reach these paths by their own name (not through an exposure host or
the path form) get 404: nothing about the ingress is reachable except as a sandbox's route."""
from __future__ import annotations

import asyncio

from sanic import Blueprint, Request
from sanic.exceptions import ServerError

from .ingress import HTTP_PATH, WS_PATH
from .ingress_admission import Refused
from .ingress_proxy import open_upstream_websocket, proxy_http, refusal
from .ws_bridge import bridge

bp = Blueprint("ingress")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


def _target(request: Request):
    return getattr(request.ctx, "ingress", None)


@bp.route(HTTP_PATH, methods=METHODS, stream=True, ctx_action="ingress")
async def ingress_http(request: Request):
    target = _target(request)
    if target is None:
        return refusal(404, "not_found", "not found")
    try:
        upstream = await request.app.ctx.ingress.admit(request, target)
    except Refused as refused:
        return refused.response
    return await proxy_http(request, upstream)


class UpstreamSubprotocol:
    """The subprotocol the client's handshake answers with: the one the service chose (the
    upstream WebSocket is open before the client's 101), decided per handshake."""

    def __iter__(self):
        try:
            request = Request.get_current()
        except ServerError:
            return iter(())
        upstream = getattr(request.ctx, "ingress_ws", None)
        chosen = upstream.subprotocol if upstream is not None else None
        return iter((chosen,) if chosen else ())


@bp.on_request(priority=-1)
async def open_service_websocket(request: Request):
    """Before the 101: admission and the service's WebSocket, so a refusal is a plain HTTP answer."""
    if request.route is None or request.route.uri.rstrip("/") != WS_PATH:
        return None
    target = _target(request)
    if target is None:
        return refusal(404, "not_found", "not found")
    try:
        upstream = await request.app.ctx.ingress.admit(request, target)
    except Refused as refused:
        return refused.response
    connection, failed = await open_upstream_websocket(request, upstream)
    if failed is not None:
        return failed
    request.ctx.ingress_ws = connection
    return None


@bp.on_response
async def close_if_not_upgraded(request: Request, response):
    connection = getattr(request.ctx, "ingress_ws", None)
    if connection is not None and not getattr(request.ctx, "ingress_ws_owned", False):
        await connection.close()


@bp.websocket(WS_PATH, subprotocols=UpstreamSubprotocol(), ctx_action="ingress")
async def ingress_ws(request: Request, ws):
    request.ctx.ingress_ws_owned = True
    try:
        await bridge(ws, request.ctx.ingress_ws)
    except asyncio.CancelledError:
        await request.ctx.ingress_ws.close()
        raise
