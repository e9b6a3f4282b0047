"""Every WebSocket of the server closes with 1007 on a text frame that is not UTF-8 (RFC 6455, section 8.1).

Sanic decodes text frames in its frame assembler; an invalid one raises there, in a task of its
own, and the connection stayed open with the message lost (the client waited for a reply that
never came). Each connection's event processing is wrapped as the handler starts, so the decode
error fails the connection with 1007 ("invalid frame payload data") instead.
"""
from __future__ import annotations

import logging

from sanic import Sanic

log = logging.getLogger(__name__)

INVALID_PAYLOAD = 1007


def install_utf8_close(app: Sanic) -> None:
    @app.signal("websocket.handler.before")
    async def close_on_invalid_utf8(request, websocket) -> None:
        process = getattr(websocket, "process_events", None)
        if process is None or getattr(process, "utf8_checked", False):
            return

        async def checked(events) -> None:
            try:
                await process(events)
            except UnicodeDecodeError:
                log.debug("websocket %s: a text frame that is not UTF-8; closing with 1007", request.path)
                websocket.fail_connection(INVALID_PAYLOAD, "invalid UTF-8 in a text frame")

        checked.utf8_checked = True
        websocket.process_events = checked
