"""Shared helpers for black-box tests against a real server over HTTP.

``ok``/``err`` check the envelopes and put the request and response into every
assertion message, so a failure reads as a bug report.
"""
from __future__ import annotations

import base64
import contextlib
import json
import queue
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import orjson
from dateutil.parser import isoparse

from session_supervisor.api.journal_wire import json_rows

TOKEN = "test-token"
SESSION_ID_RE = re.compile(r"^ses-[0-9a-f]{8}-[0-9a-f]{3}$")
ATTEMPT_ID_RE = re.compile(r"^att-[0-9a-f]{8}-[0-9a-f]{3}$")
# RFC 3339 UTC, up to 9 fractional digits (Go RFC3339Nano).
TIMESTAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")


# -- waiting -------------------------------------------------------------------
def wait_for(predicate, timeout=10, interval=0.02, describe=None):
    """Poll ``predicate`` until truthy (returned) or raise AssertionError at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            detail = ""
            if describe is not None:
                try:
                    detail = "\n" + str(describe())
                except Exception as exc:  # describing must never hide the timeout
                    detail = f"\n(describe failed: {exc!r})"
            raise AssertionError(f"condition not met within {timeout}s{detail}")
        time.sleep(interval)


# -- envelopes -----------------------------------------------------------------
def show(resp: httpx.Response) -> str:
    req = resp.request
    body = req.content[:300].decode(errors="replace") if req.content else ""
    return (f"{req.method} {req.url.raw_path.decode()} {body}\n"
            f"-> {resp.status_code} {resp.headers.get('content-type', '')} {resp.text[:800]}")


def json_body(resp: httpx.Response):
    try:
        return resp.json()
    except ValueError:
        raise AssertionError(f"response is not JSON\n{show(resp)}") from None


def find_nulls(value, path="$"):
    """Paths of every JSON null inside ``value``."""
    if value is None:
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in find_nulls(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in find_nulls(v, f"{path}[{i}]")]
    return []


def ok(resp: httpx.Response, status: int, allow_nulls=False):
    """Assert a success envelope with ``status``; return ``data``."""
    assert resp.status_code == status, f"expected {status}\n{show(resp)}"
    assert resp.headers.get("content-type", "").startswith("application/json"), show(resp)
    body = json_body(resp)
    assert isinstance(body, dict) and body.get("success") is True and "data" in body, show(resp)
    if not allow_nulls:
        assert not find_nulls(body), f"null values at {find_nulls(body)}\n{show(resp)}"
    return body["data"]


def err(resp: httpx.Response, status: int, code: str | None = None) -> dict:
    """Assert an error envelope with ``status`` (and ``code``); return ``error``."""
    assert resp.status_code == status, f"expected {status} {code or ''}\n{show(resp)}"
    body = json_body(resp)
    assert isinstance(body, dict) and body.get("success") is False, show(resp)
    error = body.get("error")
    assert isinstance(error, dict), show(resp)
    assert isinstance(error.get("code"), str) and error["code"], show(resp)
    assert isinstance(error.get("message"), str) and error["message"], show(resp)
    assert not find_nulls(body), f"null values at {find_nulls(body)}\n{show(resp)}"
    if code is not None:
        assert error["code"] == code, f"expected code {code}\n{show(resp)}"
    return error


# -- paths and calls -----------------------------------------------------------
def spath(sb: str, sid: str | None = None, tail: str = "") -> str:
    path = f"/api/v1/sandboxes/{sb}/sessions"
    if sid is not None:
        path += f"/{sid}"
    return path + tail


def b64(data) -> str:
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode()


def claim_sandbox(http: httpx.Client, template="default") -> str:
    data = ok(http.post("/api/v1/sandboxes", json={"template": template}), 201,
              allow_nulls=True)
    return data["sandbox_id"]


def listed_sandbox_ids(http: httpx.Client) -> set[str]:
    """The id of every sandbox the list shows, page by page."""
    ids: set[str] = set()
    while True:
        page = ok(http.get("/api/v1/sandboxes", params={"limit": 200, "offset": len(ids)}), 200)
        ids |= {s["id"] for s in page["sandboxes"]}
        if not page["has_more"]:
            return ids


def create_session(http, sb, spec, key=None, status=201) -> dict:
    headers = {"Idempotency-Key": key} if key else {}
    return ok(http.post(spath(sb), json=spec, headers=headers), status)


def get_session(http, sb, sid) -> dict:
    return ok(http.get(spath(sb, sid)), 200)


def write_input(http, sb, sid, input_id, data=None, eof=False, status=202, **extra):
    body = {"input_id": input_id, "eof": eof, **extra}
    if data is not None:
        body["data_base64"] = b64(data)
    return ok(http.post(spath(sb, sid, "/inputs"), json=body), status)


def events(http, sb, sid, after=0, limit=None) -> list[dict]:
    params = {"after": after}
    if limit is not None:
        params["limit"] = limit
    return ok(http.get(spath(sb, sid, "/events"), params=params), 200)["events"]


def all_events(http, sb, sid) -> list[dict]:
    """The whole retained journal, paging until the cursor's latest seq."""
    out, after = [], 0
    while True:
        page = ok(http.get(spath(sb, sid, "/events"), params={"after": after}), 200)
        out += page["events"]
        if not page["events"] or page["events"][-1]["seq"] >= page["cursor"]["latest"]:
            return out
        after = page["events"][-1]["seq"]


def journal_tail(http, sb, sid, n=25) -> str:
    try:
        evs = all_events(http, sb, sid)
    except Exception as exc:
        return f"(journal unavailable: {exc})"
    lines = [f"journal of {sid} (last {n} of {len(evs)}):"]
    for e in evs[-n:]:
        extra = {k: v for k, v in e.items()
                 if k not in ("session_id", "occurred_at", "seq", "type")}
        if "data_base64" in extra:
            extra["data"] = base64.b64decode(extra.pop("data_base64"))[:120]
        lines.append(f"  {e['seq']:>4} {e['type']:<22} {extra}")
    return "\n".join(lines)


def output_bytes(evs) -> bytes:
    return b"".join(base64.b64decode(e["data_base64"]) for e in evs if e["type"] == "output")


def wait_event(http, sb, sid, match, timeout=10) -> dict:
    """Wait until the journal holds an event for which ``match(event)`` is true."""
    def found():
        return next((e for e in all_events(http, sb, sid) if match(e)), None)
    return wait_for(found, timeout=timeout, describe=lambda: journal_tail(http, sb, sid))


def wait_exited(http, sb, sid, timeout=10) -> dict:
    return wait_event(http, sb, sid, lambda e: e["type"] == "attempt.exited", timeout)


def run_to_exit(http, sb, argv, timeout=15) -> tuple[dict, bytes]:
    """Create a session for ``argv``; return (its attempt.exited event, all output)."""
    sid = create_session(http, sb, {"command": argv})["id"]
    exited = wait_exited(http, sb, sid, timeout)
    return exited, output_bytes(all_events(http, sb, sid))


def assert_timestamp(value, where=""):
    assert isinstance(value, str) and TIMESTAMP_RE.match(value), f"bad timestamp {value!r} {where}"
    assert isoparse(value).utcoffset().total_seconds() == 0, f"not UTC {value!r} {where}"


# -- SSE -----------------------------------------------------------------------
class SSEReader:
    """Reads a raw SSE stream in a thread; frames arrive as dicts on a queue.

    A frame is ``{"id": str|None, "event": str|None, "data": str|None,
    "comments": [...]}``. ``self.response`` is set once the headers arrive.
    """

    def __init__(self, base_url, path, params=None, headers=None, token=TOKEN):
        self.frames: queue.Queue = queue.Queue()
        self.response: httpx.Response | None = None
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._client = httpx.Client(base_url=base_url, timeout=httpx.Timeout(30.0, read=None),
                                    headers={"Authorization": f"Bearer {token}"})
        hdrs = {"Accept": "text/event-stream", **(headers or {})}
        self._request = self._client.build_request("GET", path, params=params, headers=hdrs)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or self.error is not None:
            problem = "no status line and headers within 10s" if self.error is None else repr(self.error)
            self.close()
            raise AssertionError(f"SSE GET {path} {params or ''}: {problem}")

    def _run(self):
        try:
            self.response = self._client.send(self._request, stream=True)
            self._ready.set()
            frame = {"id": None, "event": None, "data": None, "comments": []}
            for raw in self.response.iter_lines():
                line = raw.rstrip("\r")
                if line == "":
                    if frame["id"] or frame["event"] or frame["data"] is not None:
                        self.frames.put(frame)
                    frame = {"id": None, "event": None, "data": None, "comments": []}
                elif line.startswith(":"):
                    frame["comments"].append(line)
                else:
                    name, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if name == "data" and frame["data"] is not None:
                        value = frame["data"] + "\n" + value
                    frame[name] = value
        except BaseException as exc:  # closed by us, or the server went away
            self.error = exc
        finally:
            self._ready.set()
            self.frames.put(None)

    def next_frame(self, timeout=10) -> dict | None:
        """The next frame, or None when the stream ended."""
        try:
            return self.frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no SSE frame within {timeout}s") from None

    def read_until(self, predicate, timeout=10) -> list[dict]:
        """Frames up to and including the first whose event JSON matches."""
        deadline = time.monotonic() + timeout
        got = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"SSE: no matching frame within {timeout}s; got {got[-10:]}")
            frame = self.next_frame(remaining)
            if frame is None:
                raise AssertionError(f"SSE stream ended before a match; got {got[-10:]}")
            got.append(frame)
            if frame["data"] is not None and predicate(json.loads(frame["data"])):
                return got

    def close(self):
        if self.response is not None:
            # close() alone does not wake a recv() blocked in the reader thread.
            stream = self.response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.response.close()
        self._client.close()
        self._thread.join(2)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def process_state(pid: int) -> str | None:
    """The state letter from /proc/<pid>/stat, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()[0].decode()



@contextlib.contextmanager
def tmpfs(mount: Path, size: str):
    """A tmpfs of ``size`` (e.g. "40m") mounted on ``mount`` (made here) for the block's time:
    a disk a test can fill (root only, as CI runs)."""
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def workspace_dir(data_dir, sandbox_id: str) -> Path:
    """A sandbox's workspace on the host: on its own disk when it has one (infra/sandbox_dirs.py)."""
    base = Path(data_dir) / "sandboxes" / sandbox_id
    return base / "disk" / "workspace" if (base / "disk").is_dir() else base / "workspace"


# -- journals read in-process ----------------------------------------------------------
def read_records(store, session_id: str, after: int, upto: int, limit: int, lifecycle_only: bool = False) -> list[dict]:
    """The public records of a store's events in (after, upto], as the API renders them (sync)."""
    return [orjson.loads(json) for _seq, _kind, json in
            json_rows(session_id, store.read_raw(session_id, after, upto, limit, lifecycle_only))[0]]


def read_public_json(journal, session_id: str, after: int, upto: int, limit: int):
    """A journal store's page as the API sends it: ``(events as JSON, seq of the last row read)``."""
    return json_rows(session_id, journal.read_raw(session_id, after, upto, limit))
