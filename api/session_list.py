"""The session list's JSON, kept per session and re-rendered only when the session changed.

A session's object changes only through its events (each one raises ``version``) and its
cursor; with 1,000 sessions, rendering every one (three RFC 3339 times, the spec, the
attempt) and dumping the whole list took 11-21 ms per call, most of it for sessions that
had not changed since the previous call.
"""
from __future__ import annotations

import weakref

import orjson
from sanic.response import HTTPResponse

from .schemas import render_session

# runtime -> {session id: ((version, cursor), json)}; a runtime that is gone takes its entries.
_CACHES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def session_list_response(runtime) -> HTTPResponse:
    """The same bytes as ``ok({"sessions": [render_session(...) ...]})``."""
    old = _CACHES.get(runtime, {})
    fresh = {}
    parts = []
    for live, session in runtime.shown_sessions():  # as committed
        key = (session.version, runtime.journal.cursor(live))
        hit = old.get(session.id)
        if hit is None or hit[0] != key:
            hit = (key, orjson.dumps(render_session(session, key[1])))
        fresh[session.id] = hit
        parts.append(hit[1])
    _CACHES[runtime] = fresh  # only the sessions that still exist
    body = b'{"success":true,"data":{"sessions":[' + b",".join(parts) + b"]}}"
    return HTTPResponse(body, status=200, content_type="application/json")
