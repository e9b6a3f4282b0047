"""The ingress's reverse proxy into a sandbox: HTTP/1.1 with streamed bodies (SSE included) and
WebSockets bridged frame by frame, always to the sandbox's own address on the route's port.

httpx streams both ways (the request body as it arrives, the answer as it comes: an SSE stream is
never buffered), and ``websockets`` opens the upstream WebSocket before the client's handshake,
so the client gets the subprotocol the service chose. Hop-by-hop headers, the route's own
credential and any forwarding header a client sent are not passed on; ``X-Forwarded-For``,
``-Host`` and ``-Proto`` are set from what this server saw.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import httpx
import websockets
from sanic import Request

from .errors import envelope

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0
PROBE_TIMEOUT_S = 1.0
WS_MAX_SIZE = 64 * 1024 * 1024
# Hop-by-hop (RFC 9110, section 7.6.1), what httpx sets itself, and forwarding headers only this server
# may set: a client's own X-Forwarded-* or X-Sandbox-ID must not reach the service as ours.
_NOT_FORWARDED = frozenset((
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
    "transfer-encoding", "upgrade", "expect", "content-length", "forwarded", "x-forwarded-for",
    "x-forwarded-host", "x-forwarded-proto", "x-forwarded-port", "x-real-ip", "x-sandbox-id", "x-exposure-port"))
_WS_HANDSHAKE = frozenset(("host", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
                           "sec-websocket-protocol", "sec-websocket-accept"))
_NOT_RETURNED = frozenset(("connection", "keep-alive", "transfer-encoding", "trailer", "upgrade",
                           "proxy-authenticate", "content-type"))


@dataclass
class Upstream:
    """Where one admitted request goes, and what is added to its answer."""

    address: str  # the sandbox's own address (its end of the veth pair)
    port: int
    path: str  # normalized, rewritten and encoded
    query: str
    timeout_s: float | None  # the route's timeout_seconds; None: no read timeout
    dropped_header: str | None = None  # the route's credential, consumed here
    answer_headers: list[tuple[str, str]] = field(default_factory=list)  # CORS, sandboxing

    @property
    def target(self) -> str:
        return f"{self.address}:{self.port}{self.path}" + (f"?{self.query}" if self.query else "")


def refusal(status: int, code: str, message: str, headers=()):
    """An ingress error in the API's envelope (the service behind the route never saw it)."""
    return envelope(status, code, message, headers=list(headers) or None)


def _outgoing_headers(request: Request, upstream: Upstream, drop: frozenset = _NOT_FORWARDED) -> list:
    skip = drop | ({upstream.dropped_header} if upstream.dropped_header else frozenset())
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in skip]
    client = request.remote_addr or (request.conn_info.client_ip if request.conn_info else "")
    headers += [("X-Forwarded-For", client), ("X-Forwarded-Host", request.headers.get("host", "")),
                ("X-Forwarded-Proto", request.app.ctx.container.settings.exposure_scheme)]
    return headers


async def _body(request: Request):
    while True:
        chunk = await request.stream.read()
        if chunk is None:
            return
        yield chunk


def client_for(app) -> httpx.AsyncClient:
    client = getattr(app.ctx, "ingress_client", None)
    if client is None:
        # No proxy from the environment (trust_env): the sandbox's address is always direct.
        client = app.ctx.ingress_client = httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_S), follow_redirects=False, trust_env=False,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))
    return client


async def proxy_http(request: Request, upstream: Upstream):
    """Stream the request to the service and its answer back; None once streamed."""
    streaming = request.stream is not None and request.stream.request_body
    outgoing = client_for(request.app).build_request(
        request.method, "http://" + upstream.target, headers=_outgoing_headers(request, upstream),
        content=_body(request) if streaming else None,
        timeout=httpx.Timeout(upstream.timeout_s, connect=CONNECT_TIMEOUT_S))
    try:
        answer = await client_for(request.app).send(outgoing, stream=True)
    except httpx.TimeoutException:
        return refusal(504, "unavailable", "the service did not answer in time", upstream.answer_headers)
    except httpx.HTTPError as error:
        return refusal(502, "unavailable", f"the service on port {upstream.port} is not reachable: {error}",
                       upstream.answer_headers)
    try:
        headers = [(k, v) for k, v in answer.headers.multi_items() if k.lower() not in _NOT_RETURNED]
        headers += upstream.answer_headers
        response = await request.respond(status=answer.status_code, headers=headers,
                                         content_type=answer.headers.get("content-type"))
        async for chunk in answer.aiter_raw():
            await response.send(chunk)
        # No eof(): Sanic ends a response the handler streamed itself (twice would drop keep-alive).
    except (httpx.HTTPError, OSError) as error:  # the service or the client went away mid-answer
        log.info("ingress %s %s ended early: %s", request.method, upstream.target, error)
    finally:
        await answer.aclose()
    return None


async def open_upstream_websocket(request: Request, upstream: Upstream):
    """The service's WebSocket, opened before the client's handshake (None and a refusal when not)."""
    offered = [p.strip() for v in request.headers.getall("sec-websocket-protocol", []) for p in v.split(",")
               if p.strip()]
    try:
        connection = await websockets.connect(
            "ws://" + upstream.target, additional_headers=_outgoing_headers(request, upstream, _NOT_FORWARDED | _WS_HANDSHAKE),
            subprotocols=offered or None, max_size=WS_MAX_SIZE, open_timeout=CONNECT_TIMEOUT_S, compression=None,
            proxy=None, ping_interval=None)
    except websockets.InvalidStatus as error:
        return None, refusal(502, "unavailable",
                             f"the service refused the WebSocket: HTTP {error.response.status_code}",
                             upstream.answer_headers)
    except (OSError, websockets.InvalidHandshake, asyncio.TimeoutError) as error:
        return None, refusal(502, "unavailable", f"the service on port {upstream.port} is not reachable: {error}",
                             upstream.answer_headers)
    return connection, None


async def probe(app, address: str, port: int, health_path: str | None) -> bool:
    """Is the service answering: an HTTP GET of its health path (any answer below 500), else
    a TCP connection to its port."""
    if health_path:
        try:
            answer = await client_for(app).get(f"http://{address}:{port}{health_path}",
                                               timeout=httpx.Timeout(PROBE_TIMEOUT_S))
        except httpx.HTTPError:
            return False
        return answer.status_code < 500
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(address, port), PROBE_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True
