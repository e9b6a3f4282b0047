"""Frames both ways between an accepted WebSocket and one we opened upstream.

Used by the cluster's forwarding (a WebSocket accepted on one node, its sandbox on another)
and by a sandbox service's ingress (the upstream is the service inside the sandbox).
"""
from __future__ import annotations

import asyncio

from websockets.exceptions import ConnectionClosed


async def bridge(ws, upstream_ws) -> None:
    """Until either side closes; the upstream's close code goes across (1005/1006, which a
    server may not send, become 1011)."""
    to_upstream = asyncio.ensure_future(_pump(_client_frames(ws), upstream_ws.send))
    to_client = asyncio.ensure_future(_pump(_upstream_frames(upstream_ws), ws.send))
    try:
        await asyncio.wait((to_upstream, to_client), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (to_upstream, to_client):
            task.cancel()
        await asyncio.gather(to_upstream, to_client, return_exceptions=True)
        code, reason = upstream_ws.close_code or 1000, upstream_ws.close_reason or ""
        await upstream_ws.close()
        await ws.close(code if code not in (1005, 1006) else 1011, reason)


async def _client_frames(ws):
    while True:
        message = await ws.recv()
        if message is None:
            continue
        yield message


async def _upstream_frames(upstream_ws):
    try:
        async for message in upstream_ws:
            yield message
    except ConnectionClosed:
        return


async def _pump(messages, send) -> None:
    try:
        async for message in messages:
            await send(message)
    except (ConnectionClosed, asyncio.CancelledError):
        return
