"""Sandbox webhooks (``config.webhook``), pure: the config, the delivery body and its
signature, which record events become deliveries, and the retry schedule.

The body is the bytes that are signed: ``{"event_id","event_type","timestamp","sandbox_id",
"team_id","payload"}`` in that order; ``X-Sandbox0-Signature`` is the lowercase hex HMAC-SHA256 of
those bytes with the sandbox's secret, sent only when the secret is not empty.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import posixpath
import uuid
from typing import Iterable
from urllib.parse import urlsplit

from .sandbox import Claimed, PausedSandbox, RuntimeStarted

MAX_URL = 2048
MAX_SECRET = 1024
TEAM = "local"
_IDS = uuid.UUID("0c7d2a6e-8f5b-4c1e-9a3d-5b6e7f8a9b0c")
RETRY_WINDOW_S = 24 * 3600
BACKOFF_FIRST_S, BACKOFF_MAX_S, JITTER_S = 0.5, 30.0, 0.25


class WebhookConfigError(ValueError):
    """config.webhook is malformed (400 bad_request)."""


def normalize_webhook(raw) -> dict | None:
    """``{url, secret?, watch_dir?}`` (None: no webhook). ``watch_dir`` is a sandbox path under
    /workspace (the only tree whose changes are watched)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise WebhookConfigError("webhook must be an object")
    url = raw.get("url")
    if url is None or url == "":
        return None
    if not isinstance(url, str) or len(url) > MAX_URL:
        raise WebhookConfigError(f"webhook.url must be a string of at most {MAX_URL} characters")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise WebhookConfigError("webhook.url must be an http or https URL without credentials")
    try:
        parts.port
    except ValueError:
        raise WebhookConfigError("webhook.url has an invalid port") from None
    out = {"url": url.strip()}
    secret = raw.get("secret")
    if secret is not None:
        if not isinstance(secret, str) or len(secret) > MAX_SECRET:
            raise WebhookConfigError(f"webhook.secret must be a string of at most {MAX_SECRET} characters")
        if secret:
            out["secret"] = secret
    watch = raw.get("watch_dir")
    if watch is not None and watch != "":
        if not isinstance(watch, str) or "\x00" in watch:
            raise WebhookConfigError("webhook.watch_dir must be a path")
        path = posixpath.normpath(watch if watch.startswith("/") else "/workspace/" + watch)
        if path != "/workspace" and not path.startswith("/workspace/"):
            raise WebhookConfigError("webhook.watch_dir must be under /workspace")
        out["watch_dir"] = path
    return out


def event_id(sandbox_id: str, name: str) -> str:
    return "evt_" + str(uuid.uuid5(_IDS, f"{sandbox_id}/{name}"))


def deleted_event_id(sandbox_id: str) -> str:
    return f"evt_sandbox_deleted_{sandbox_id}"


def body(event: str, kind: str, timestamp: str, sandbox_id: str, payload: dict, team_id: str = "") -> bytes:
    document = {"event_id": event, "event_type": kind, "timestamp": timestamp, "sandbox_id": sandbox_id,
                "team_id": team_id or TEAM, "payload": payload}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, raw: bytes) -> str:
    return hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()


def record_deliveries(sandbox_id: str, rows: Iterable, after_seq: int, http_port: int) -> list[tuple]:
    """``(seq, event_id, event_type, occurred_ns, payload)`` for the sandbox record's rows past
    ``after_seq``: ready once (the claim), paused, and resumed (a new runtime after a pause; one
    after a crash is not a resume). Read from the first row: a resume is known by what came before."""
    out, status = [], "running"
    for row in rows:
        delivery = None
        if row.topic == Claimed.TOPIC:
            delivery = ("sandbox.ready", {"http_port": http_port, "sandbox_id": sandbox_id}, "ready")
        elif row.topic == PausedSandbox.TOPIC:
            status = "paused"
            delivery = ("sandbox.paused", {"resource_usage": {}}, f"{row.seq}")
        elif row.topic == RuntimeStarted.TOPIC:
            if status == "paused":
                delivery = ("sandbox.resumed", {"resumed": True}, f"{row.seq}")
            status = "running"
        if delivery is not None and row.seq > after_seq:
            kind, payload, name = delivery
            out.append((row.seq, event_id(sandbox_id, name), kind, row.occurred_ns, payload))
    return out


def retry_delay(attempts: int, jitter: float) -> float:
    """Exponential from 500 ms (``attempts`` failures so far), capped, plus up to 250 ms of jitter."""
    return min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** max(0, attempts - 1)) + jitter * JITTER_S


def retryable(status: int | None, kind: str) -> bool:
    """A transport error (None), 429 and 5xx are tried again; ``sandbox.deleted`` also 408 and 425."""
    if status is None or status == 429 or status >= 500:
        return True
    return kind == "sandbox.deleted" and status in (408, 425)
