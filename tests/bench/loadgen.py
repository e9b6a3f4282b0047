"""A lean HTTP/1.1 load generator: N keep-alive connections, one request at a time each.

The create benchmark drives 16 concurrent requests from the same 2-vCPU machine as the
server. Through httpx's AsyncClient that client burned about 4 ms of CPU per POST (its
connection pool rescans every connection and request on each hand-off, and httpcore retries
a failing ``import sniffio`` on every request), more than the server spent creating the
session: the figure measured the client. This one costs a few tens of µs per request, as a
load tool such as wrk would, and the benchmark also reports what the client used.
"""
from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str,
                 token: str) -> None:
        self._reader = reader
        self._writer = writer
        self._head = f"Host: {host}\r\nAuthorization: Bearer {token}\r\n"

    @classmethod
    async def open(cls, url: str, token: str) -> "Connection":
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        return cls(reader, writer, parts.netloc, token)

    async def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        payload = json.dumps(body).encode() if body is not None else b""
        head = (f"{method} {path} HTTP/1.1\r\n{self._head}Content-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n")
        self._writer.write(head.encode() + payload)
        status_line = await self._reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                raise ValueError("chunked responses are not supported here")
        return status, await self._reader.readexactly(length)

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()
