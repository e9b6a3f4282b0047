"""What the ingress checks before a request reaches a service, in the reference's order: the route
(404, 405), CORS (a preflight is answered here), auth (401), the rate limit (429 with
``Retry-After``), a paused sandbox (503, or woken when the route and the sandbox allow it), then the
``cmd`` session behind the service, gated on its health check (503 when it never answers).
Auth comes before waking: an unauthenticated request never resumes a sandbox.
"""
from __future__ import annotations

import asyncio
import time

from sanic import HTTPResponse, Request

from session_supervisor.domain.model import ingress_policy as policy
from session_supervisor.domain.model.errors import DomainError
from session_supervisor.domain.service_sessions import ServiceSessions

from .ingress import IngressTarget
from .ingress_proxy import Upstream, probe, refusal

READY_POLL_S = 0.2
READY_DEFAULT_S = 10.0
# A path-form answer shares the API's origin: it is rendered as an opaque origin, so a page a
# sandbox serves can never act as the console or read the API in the user's browser.
SANDBOXED_PAGE = ("Content-Security-Policy",
                  "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads")


class Refused(Exception):
    def __init__(self, response) -> None:
        super().__init__("refused")
        self.response = response


def _refuse(status: int, code: str, message: str, headers=()):
    raise Refused(refusal(status, code, message, headers))


class Ingress:
    """The ingress's state: rate-limit buckets, the ``cmd`` sessions it keeps, the attempts that
    passed their health check."""

    def __init__(self, container) -> None:
        self.container = container
        self.limits = policy.RateLimits()
        self.sessions = ServiceSessions()
        self.ready: dict[tuple[str, str], str] = {}  # (sandbox, service) -> attempt id seen healthy

    async def admit(self, request: Request, target: IngressTarget) -> Upstream:
        manager = self.container.manager
        owner = await manager.placement.locate(target.sandbox_id)  # None on one machine
        if owner:  # the API's forwarding does not cover the ingress: say where it runs
            _refuse(503, "unavailable", f"sandbox runs on another node: {owner}")
        try:
            sandbox = manager.registry.sandbox(target.sandbox_id)
        except DomainError:
            self._forget(target.sandbox_id)
            _refuse(404, "not_found", "sandbox not found")
        if self.container.networks.address(target.sandbox_id) is None and target.sandbox_id in manager.registry.running:
            _refuse(503, "unavailable", "service ingress needs a network namespace per sandbox; this server "
                                        "shares the host's network (--network host or --runtime host)")
        try:
            path = policy.normalize_path(target.raw_path)
        except policy.BadPathError as exc:
            _refuse(400, "bad_request", str(exc))
        method = request.method.upper()
        found = policy.match_route(sandbox.config.get("services") or [], target.port, path, method)
        if found is None:
            _refuse(404, "not_found", "route is not exposed")
        route = found.route
        origin = request.headers.get("origin")
        preflight = method == "OPTIONS" and route.get("cors") and origin and \
            request.headers.get("access-control-request-method")
        if not found.method_allowed and not preflight:
            _refuse(405, "forbidden", "method is not allowed")
        cors = policy.cors(route, method, origin, request.headers.get("access-control-request-method"))
        headers = list(cors.headers)
        if target.form == "path":
            headers.append(SANDBOXED_PAGE)
        if cors.answer == 204:
            raise Refused(_empty(204, headers))
        if cors.answer is not None:
            _refuse(cors.answer, "forbidden", cors.message, headers)
        denied = policy.credential_refusal(route, request.headers.get)
        if denied:
            _refuse(401, "unauthorized", denied, headers)
        if route.get("rate_limit"):
            limit = route["rate_limit"]
            wait = self.limits.take((sandbox.id, found.service["id"], route["id"]), limit["rps"], limit["burst"],
                                    time.monotonic())
            if wait:
                _refuse(429, "unavailable", "rate limit exceeded",
                        [*headers, ("Retry-After", str(policy.retry_after_seconds(wait)))])
        runtime = await self._running(target.sandbox_id, sandbox, route, headers)
        address = self.container.networks.address(target.sandbox_id)
        if address is None:
            _refuse(503, "unavailable", "sandbox network is not ready", headers)
        if (found.service.get("runtime") or {}).get("type") == "cmd":
            await self._ready(request, runtime, found.service, route, address, headers)
        upstream_path = policy.rewrite_path(path, route.get("path_prefix") or "/", route.get("rewrite_prefix"))
        return Upstream(address=address, port=target.port, path=policy.encode_path(upstream_path),
                        query=target.query, timeout_s=route.get("timeout_seconds") or None,
                        dropped_header=policy.consumed_header(route), answer_headers=headers)

    async def _running(self, sandbox_id: str, sandbox, route: dict, headers: list):
        manager = self.container.manager
        if sandbox_id not in manager.registry.running:
            if not sandbox.auto_resume:
                _refuse(503, "unavailable", "sandbox is not running and auto_resume is disabled", headers)
            if not route.get("resume"):
                _refuse(503, "unavailable", "sandbox is not running and resume is disabled", headers)
        if route.get("resume"):
            try:  # the runtime gate's own admission: resumes, waits out a pause being committed
                await manager.transitions.admit(sandbox_id, mutating=False, streaming=True)
            except DomainError as exc:
                code = "sandbox_resume_failed" if "resume failed" in exc.message else "unavailable"
                _refuse(503, code, exc.message, headers)
        runtime = manager.registry.running.get(sandbox_id)
        if runtime is None:
            _refuse(503, "unavailable", "sandbox is not running", headers)
        return runtime

    async def _ready(self, request: Request, runtime, service: dict, route: dict, address: str, headers: list):
        key = (runtime.sandbox_id, service["id"])
        try:
            session = await self.sessions.ensure(runtime, service)
        except DomainError as exc:
            _refuse(503, "unavailable", f"sandbox service runtime unavailable: {exc.message}", headers)
        if session.has_live_attempt and self.ready.get(key) == session.attempt_id:
            return
        deadline = time.monotonic() + (route.get("timeout_seconds") or READY_DEFAULT_S)
        health = (service.get("health_check") or {}).get("path")
        while True:
            session = runtime.store.sessions.get(session.id)
            if session is not None and session.has_live_attempt and \
                    await probe(request.app, address, service["port"], health):
                self.ready[key] = session.attempt_id
                return
            if session is None or time.monotonic() >= deadline:
                _refuse(503, "unavailable", "sandbox service runtime unavailable", headers)
            await asyncio.sleep(READY_POLL_S)

    def _forget(self, sandbox_id: str) -> None:
        self.limits.forget_sandbox(sandbox_id)
        self.sessions.forget_sandbox(sandbox_id)
        for key in [k for k in self.ready if k[0] == sandbox_id]:
            del self.ready[key]


def _empty(status: int, headers: list):
    return HTTPResponse(b"", status=status, headers=headers)
