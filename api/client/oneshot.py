"""``OneShotClient``: the request/response routes over the standard library, for ``sessionctl``.

A script calls ``sessionctl`` in loops, so one call must start fast (p50 < 150 ms,
``tests/bench/bench_cli.py``). httpx with httpcore costs 60-150 ms of imports before the
first byte, more than the rest of a call; ``http.client`` is already half-loaded by the
interpreter. The routes, envelopes and errors are the same objects as ``Client``'s
(``SandboxOps``/``SessionOps`` over ``Call`` and ``finish``): only the wire differs.
Streams (SSE, WebSockets) and the retrying input helper stay on ``Client``.
"""
from __future__ import annotations

import http.client
import socket
from urllib.parse import urlencode, urlsplit

from .errors import TransportError
from .local_server import base_url, resolve_token
from .operations import Call, SandboxOps, SessionOps, finish


class OneShotClient(SandboxOps, SessionOps):
    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0,
                 data_dir=None) -> None:
        self.url = base_url(url)
        token = resolve_token(token, self.url, data_dir)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        parts = urlsplit(self.url)
        self._prefix = parts.path
        if parts.scheme == "https":
            self._conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout)
        else:
            self._conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)

    def _run(self, call: Call):
        kwargs = call.request_kwargs()
        path = self._prefix + call.path + ("?" + urlencode(call.params) if call.params else "")
        where = f"{call.method} {self.url}{call.path}"
        try:
            self._conn.request(call.method, path, body=kwargs.get("content"),
                               headers={**self.headers, **(kwargs["headers"] or {})})
            response = self._conn.getresponse()
            content = response.read()
        except (ConnectionRefusedError, socket.gaierror) as exc:  # never reached the server
            raise TransportError(f"{where}: ConnectError: {exc}", ambiguous=False) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(f"{where}: {type(exc).__name__}: {exc}", ambiguous=True) from exc
        return finish(call, response.status, content)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "OneShotClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
