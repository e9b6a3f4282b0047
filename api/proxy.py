"""Any node serves any sandbox: a call for a sandbox another node runs goes to that node.

The routing middleware asks the manager where a sandbox lives (``locate``). When another
node owns it, an HTTP call (JSON, SSE, file up- and downloads) is forwarded as it came and
the owner's answer streamed back as it goes; a WebSocket (the Sandbox0 ``/ws``, AeroLVM
attach, a context's stream, the files watch) is accepted here and bridged frame by frame to
the same route on the owner. The official SDKs therefore work against any node.

A forwarded call carries ``X-Sessiond-Forwarded-By``; a node never forwards such a call
again (ownership may have moved meanwhile: it serves it or answers 503), so a stale view of
ownership can never make calls loop between nodes.
"""
from __future__ import annotations

import asyncio
import logging
from functools import wraps

import httpx
import websockets
from sanic import Request

from .errors import AEROLVM_PREFIX, aerolvm_error, envelope
from .ws_bridge import bridge

log = logging.getLogger(__name__)

FORWARDED_BY = "x-sessiond-forwarded-by"
# Hop-by-hop headers (RFC 9110, section 7.6.1) and those httpx sets from what it sends.
_NOT_FORWARDED = frozenset(("connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                            "trailer", "transfer-encoding", "upgrade", "host", "content-length"))
_WS_HANDSHAKE = frozenset(("sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
                           "sec-websocket-protocol", "sec-websocket-accept"))
WS_MAX_SIZE = 256 * 1024 * 1024  # as the local WebSocket routes accept
CONNECT_TIMEOUT_S = 5.0
# Between two reads of the owner's answer: SSE sends a heartbeat every 15 s; a context run that
# waits until done answers only at its end. A node that is alive but stuck answers 503 after it.
READ_TIMEOUT_S = 300.0


class ForwardTo(Exception):
    """Raised by the routing middleware: the owner at ``base_url`` answers this call."""

    def __init__(self, base_url: str) -> None:
        super().__init__(base_url)
        self.base_url = base_url


def forwarded(request: Request) -> bool:
    return FORWARDED_BY in request.headers


def bridged(request: Request) -> bool:
    """A WebSocket upgrade the owner answers: the local pre-upgrade checks do not apply."""
    return getattr(request.ctx, "forward_to", None) is not None


def _target(base_url: str, request: Request) -> str:
    query = f"?{request.query_string}" if request.query_string else ""
    return f"{base_url.rstrip('/')}{request.path}{query}"


def _headers(request: Request, node_id: str, drop: frozenset = _NOT_FORWARDED) -> list[tuple[str, str]]:
    headers = [(name, value) for name, value in request.headers.items() if name.lower() not in drop]
    headers.append((FORWARDED_BY, node_id))
    return headers


async def _request_body(request: Request):
    """A streamed upload (``stream=True`` routes) is forwarded as it arrives."""
    while True:
        chunk = await request.stream.read()
        if chunk is None:
            return
        yield chunk


def unreachable(request: Request, base_url: str, error: Exception):
    message = f"the node that runs this sandbox ({base_url}) cannot be reached: {error}"
    if request.path.startswith(AEROLVM_PREFIX):
        return aerolvm_error(503, message)
    return envelope(503, "unavailable", message)


async def forward_http(request: Request, base_url: str, client: httpx.AsyncClient, node_id: str):
    """Send the call to the owner and stream its answer back. Returns None once streamed
    (Sanic's error path then finishes the response), or an error response."""
    # A streaming route's body has not been read yet: forward it as it arrives.
    streaming = request.stream is not None and request.stream.request_body and \
        hasattr(request.route.handler, "is_stream")
    body = _request_body(request) if streaming else request.body
    outgoing = client.build_request(request.method, _target(base_url, request),
                                    headers=_headers(request, node_id), content=body)
    try:
        upstream = await client.send(outgoing, stream=True)
    except httpx.HTTPError as error:
        return unreachable(request, base_url, error)
    try:
        headers = [(name, value) for name, value in upstream.headers.multi_items()
                   if name.lower() not in _NOT_FORWARDED and name.lower() != "content-type"]
        response = await request.respond(status=upstream.status_code, headers=headers,
                                         content_type=upstream.headers.get("content-type", "text/plain"))
        async for chunk in upstream.aiter_raw():
            await response.send(chunk)
        # No eof() here: Sanic ends the stream itself after this error handler (an end sent
        # twice would make it drop the keep-alive connection).
    except httpx.HTTPError as error:  # the owner went away mid-answer: end what was sent
        log.warning("forwarded %s %s ended early: %s", request.method, request.path, error)
    finally:
        await upstream.aclose()
    return None


def owned_here(handler):
    """For a WebSocket route: bridge to the owner when the routing middleware says so."""

    @wraps(handler)
    async def websocket_or_bridge(request: Request, ws, *args, **kwargs):
        base_url = getattr(request.ctx, "forward_to", None)
        if base_url is None:
            return await handler(request, ws, *args, **kwargs)
        await bridge_websocket(request, ws, base_url, request.app.ctx.container.node_id)

    return websocket_or_bridge


async def bridge_websocket(request: Request, ws, base_url: str, node_id: str) -> None:
    url = "ws" + _target(base_url, request).removeprefix("http")
    offered = [p.strip() for p in request.headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    try:
        upstream = await websockets.connect(
            url, additional_headers=_headers(request, node_id, _NOT_FORWARDED | _WS_HANDSHAKE),
            subprotocols=offered or None, max_size=WS_MAX_SIZE, open_timeout=CONNECT_TIMEOUT_S,
            compression=None)
    except (OSError, websockets.InvalidHandshake, asyncio.TimeoutError) as error:
        await ws.close(1011, f"owner node unreachable: {error}"[:120])
        return
    await bridge(ws, upstream)


def install_forwarding(app) -> None:
    """Install after auth and before the runtime gate: a call for a sandbox another node runs
    must neither wake nor count against this node's copy of it."""

    @app.on_request
    async def route_to_owner(request: Request):
        sandbox_id = request.match_info.get("sandbox_id") if request.route is not None else None
        container = request.app.ctx.container
        if sandbox_id is None or container.manager is None or not container.manager.placement.clustered \
                or forwarded(request):
            return None
        base_url = await container.manager.placement.locate(sandbox_id)
        if base_url is None:
            return None
        if request.headers.get("upgrade", "").lower() == "websocket":
            request.ctx.forward_to = base_url  # accepted here, then bridged (owned_here)
            return None
        raise ForwardTo(base_url)

    async def answer_from_owner(request: Request, error: ForwardTo):
        container = request.app.ctx.container
        client = getattr(request.app.ctx, "forward_client", None)
        if client is None:
            client = request.app.ctx.forward_client = httpx.AsyncClient(
                timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S), follow_redirects=False)
        return await forward_http(request, error.base_url, client, container.node_id)

    app.error_handler.add(ForwardTo, answer_from_owner)

    @app.after_server_stop
    async def close_forward_client(app):
        client = getattr(app.ctx, "forward_client", None)
        if client is not None:
            await client.aclose()
