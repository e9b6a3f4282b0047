"""Contexts and workspace files: the routes as ``Call``s (both clients), plus streaming helpers.

``WorkspaceOps`` is mixed into ``Client`` and ``AsyncClient``. ``upload``/``download`` stream a
file with the sync client without holding it in memory, and ``run_streaming`` runs a command
as a context and relays its output as it arrives (the context WebSocket); the CLI's
``sandbox cp`` and ``sandbox run`` use them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Callable

import orjson

from .models import FromApi, Listing, Message, build
from .operations import Call, finish, q, sandbox_path

CHUNK = 1 << 20


@dataclass
class Context(FromApi):
    id: str = ""
    type: str = ""
    running: bool = False
    alias: str | None = None
    cwd: str | None = None
    output_raw: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    exit_code: int | None = None
    state: str | None = None
    created_at: str = ""
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class ExecResult(FromApi):
    output_raw: str = ""
    stdout: str | None = None
    stderr: str | None = None
    exit_code: int | None = None
    state: str | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class FileInfo(FromApi):
    name: str = ""
    path: str = ""
    type: str = ""
    size: int = 0
    mode: str = ""
    mod_time: str = ""
    is_link: bool = False
    link_target: str | None = None
    raw: dict = field(default_factory=dict, repr=False)


def contexts_path(sandbox_id: str, context_id: str | None = None, tail: str = "") -> str:
    path = f"{sandbox_path(sandbox_id)}/contexts"
    return path + (f"/{q(context_id)}" if context_id is not None else "") + tail


def files_path(sandbox_id: str, tail: str = "") -> str:
    return f"{sandbox_path(sandbox_id)}/files{tail}"


def _entries(data) -> Listing:
    entries = data.get("entries") if isinstance(data, dict) else None
    return Listing([build(FileInfo, e) for e in entries or []], data if isinstance(data, dict) else {})


def _contexts(data) -> Listing:
    items = data.get("contexts") if isinstance(data, dict) else None
    return Listing([build(Context, c) for c in items or []], data if isinstance(data, dict) else {})


class WorkspaceOps:
    """The context routes and the file routes (README "Contexts and workspace files")."""

    def _run(self, call: Call):  # pragma: no cover - provided by the client classes
        raise NotImplementedError

    # ---- contexts -------------------------------------------------------------------------------
    def create_context(self, sandbox_id: str, request: dict):
        return self._run(Call("POST", contexts_path(sandbox_id), (201,), Context.from_api, body=request))

    def run_command(self, sandbox_id: str, command: list[str], *, cwd: str | None = None,
                    env: dict[str, str] | None = None):
        """A cmd context that the server waits for: output, exit code and state in one reply."""
        request: dict = {"type": "cmd", "cmd": {"command": list(command)}, "wait_until_done": True}
        if cwd:
            request["cwd"] = cwd
        if env:
            request["env_vars"] = env
        return self.create_context(sandbox_id, request)

    def list_contexts(self, sandbox_id: str):
        return self._run(Call("GET", contexts_path(sandbox_id), (200,), _contexts))

    def get_context(self, sandbox_id: str, context_id: str):
        return self._run(Call("GET", contexts_path(sandbox_id, context_id), (200,), Context.from_api))

    def delete_context(self, sandbox_id: str, context_id: str):
        return self._run(Call("DELETE", contexts_path(sandbox_id, context_id), (200,), Message.from_api))

    def restart_context(self, sandbox_id: str, context_id: str):
        return self._run(Call("POST", contexts_path(sandbox_id, context_id, "/restart"), (200,), Context.from_api))

    def context_exec(self, sandbox_id: str, context_id: str, data: str):
        return self._run(Call("POST", contexts_path(sandbox_id, context_id, "/exec"), (200,), ExecResult.from_api,
                              body={"data": data}))

    def context_input(self, sandbox_id: str, context_id: str, data: str):
        return self._run(Call("POST", contexts_path(sandbox_id, context_id, "/input"), (200,), Message.from_api,
                              body={"data": data}))

    def context_signal(self, sandbox_id: str, context_id: str, signal: str):
        return self._run(Call("POST", contexts_path(sandbox_id, context_id, "/signal"), (200,), Message.from_api,
                              body={"signal": signal}))

    def context_resize(self, sandbox_id: str, context_id: str, rows: int, cols: int):
        return self._run(Call("POST", contexts_path(sandbox_id, context_id, "/resize"), (200,), Message.from_api,
                              body={"rows": rows, "cols": cols}))

    # ---- files ----------------------------------------------------------------------------------
    def read_file(self, sandbox_id: str, path: str):
        return self._run(Call("GET", files_path(sandbox_id), (200,), params={"path": path}, envelope="bytes"))

    def write_file(self, sandbox_id: str, path: str, data: bytes):
        return self._run(Call("POST", files_path(sandbox_id), (200,), Message.from_api, params={"path": path},
                              content=bytes(data)))

    def make_dir(self, sandbox_id: str, path: str, *, recursive: bool = False):
        params = {"path": path, "mkdir": "true", "recursive": "true" if recursive else "false"}
        return self._run(Call("POST", files_path(sandbox_id), (201,), Message.from_api, params=params, content=b""))

    def stat_file(self, sandbox_id: str, path: str):
        return self._run(Call("GET", files_path(sandbox_id, "/stat"), (200,), FileInfo.from_api,
                              params={"path": path}))

    def list_files(self, sandbox_id: str, path: str):
        return self._run(Call("GET", files_path(sandbox_id, "/list"), (200,), _entries, params={"path": path}))

    def delete_file(self, sandbox_id: str, path: str):
        return self._run(Call("DELETE", files_path(sandbox_id), (200,), Message.from_api, params={"path": path}))

    def move_file(self, sandbox_id: str, source: str, destination: str):
        return self._run(Call("POST", files_path(sandbox_id, "/move"), (200,), Message.from_api,
                              body={"source": source, "destination": destination}))


# ---- streaming helpers (sync client) ----------------------------------------------------------------
def upload(client, sandbox_id: str, source: IO[bytes], path: str) -> Message:
    """Stream ``source`` into the sandbox file ``path`` (replaced atomically once complete)."""
    call = Call("POST", files_path(sandbox_id), (200,), Message.from_api, params={"path": path})

    def chunks():
        while chunk := source.read(CHUNK):
            yield chunk

    response = client._http.post(call.path, params=call.params, content=chunks(),
                                 headers={"Content-Type": "application/octet-stream"})
    return finish(call, response.status_code, response.content)


def download(client, sandbox_id: str, path: str, sink: IO[bytes]) -> int:
    """Stream the sandbox file ``path`` into ``sink``; returns the number of bytes."""
    call = Call("GET", files_path(sandbox_id), (200,), params={"path": path}, envelope="bytes")
    with client._http.stream("GET", call.path, params=call.params) as response:
        if response.status_code != 200:
            finish(call, response.status_code, response.read())
        size = 0
        for chunk in response.iter_bytes(CHUNK):
            sink.write(chunk)
            size += len(chunk)
    return size


def run_streaming(client, sandbox_id: str, command: list[str], on_output: Callable[[str, str], None], *,
                  cwd: str | None = None, env: dict[str, str] | None = None) -> tuple[int | None, str | None]:
    """Run ``command`` as a context; relay (source, text) as it arrives; return (exit_code, state)."""
    from websockets.sync.client import connect

    request: dict = {"type": "cmd", "cmd": {"command": list(command)}}
    if cwd:
        request["cwd"] = cwd
    if env:
        request["env_vars"] = env
    context = client.create_context(sandbox_id, request)
    from .ws import ws_url  # websockets is imported only by the calls that need it
    url = ws_url(client.url, contexts_path(sandbox_id, context.id, "/ws"))
    try:
        with connect(url, additional_headers=client.headers, open_timeout=10) as ws:
            for raw in ws:
                message = orjson.loads(raw)
                if message.get("type") == "output":
                    on_output(message.get("source", "stdout"), message.get("data", ""))
                elif message.get("type") == "done" and ("exit_code" in message or "state" in message):
                    return message.get("exit_code"), message.get("state")
        final = client.get_context(sandbox_id, context.id)  # closed without a done frame
        return final.exit_code, final.state
    finally:
        client.delete_context(sandbox_id, context.id)
