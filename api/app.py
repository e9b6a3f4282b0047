"""create_app: the Sanic application around a Container (no module-level app)."""
from __future__ import annotations

import orjson
from sanic import Sanic

from .access import install_access_policy
from .auth import install_auth
from .browser import install_origin_check
from .errors import handle_error
from .gate import install_runtime_gate
from .ingress import install_ingress
from .metrics import install_metrics
from .proxy import install_forwarding
from .routes import (aerolvm, api_keys, audit, contexts, files, health, journal, metrics_routes, observability,
                     rootfs, sandboxes, services, sessions, teams, templates, ui, volume_files, volumes, ws)
from .routes import openapi as openapi_route
from .ws_frames import install_utf8_close


def create_app(container, *, name: str = "sessiond") -> Sanic:
    # Logging is ours (api/operator_log.py): Sanic's own handlers would print every line twice.
    app = Sanic(name, dumps=orjson.dumps, configure_logging=False)
    app.config.REQUEST_MAX_SIZE = 256 * 1024 * 1024
    app.config.RESPONSE_TIMEOUT = 24 * 3600  # SSE and WebSocket streams live long
    app.config.REQUEST_TIMEOUT = 120
    app.config.KEEP_ALIVE_TIMEOUT = 75
    app.config.GRACEFUL_SHUTDOWN_TIMEOUT = 5.0
    app.config.WEBSOCKET_MAX_SIZE = 256 * 1024 * 1024  # WebSocket inputs, as large as HTTP bodies
    app.ctx.container = container
    install_ingress(app)  # a sandbox's public routes: routed before any API middleware sees them
    install_origin_check(app)  # browsers: no foreign Origin on the API or its WebSockets
    install_auth(app, container.settings.token)
    install_forwarding(app)  # after auth, before the gate: a sandbox another node runs is served there
    install_access_policy(app)  # after both: the owner node decides; before the gate: nothing refused wakes
    install_runtime_gate(app)  # after auth: only an authenticated call may wake a sandbox
    for module in (health, sandboxes, services, observability, metrics_routes, sessions, journal, audit, ws, aerolvm,
                   contexts, files, templates, ui, api_keys, teams, volumes, volume_files, rootfs):
        app.blueprint(module.bp)
    app.blueprint(openapi_route.bp)  # GET /api/v1/openapi.json
    install_metrics(app, container)  # GET /metrics, behind auth
    install_utf8_close(app)  # a text frame that is not UTF-8 closes its WebSocket with 1007
    app.error_handler.add(Exception, handle_error)

    @app.before_server_start
    async def start_container(app):
        await container.start()

    @app.before_server_stop
    async def end_streams(app):
        # Streams end with the server (SSE closes, WebSockets get 1001) instead of holding
        # the graceful-shutdown window open.
        container.hub.close_all("shutdown")

    @app.after_server_stop
    async def stop_container(app):
        await container.stop()
        client = getattr(app.ctx, "ingress_client", None)
        if client is not None:
            await client.aclose()

    return app
