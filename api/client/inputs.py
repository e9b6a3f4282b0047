"""The input helper's policy: generated input ids, and which failures to retry.

An input is retried only with the *same* ``input_id`` and the same bytes: the
server dedupes by id and content (contract §6.9), so a retry after an
ambiguous failure (the request may or may not have been applied) can never
deliver the bytes twice. It answers ``duplicate: true`` when the first try
had been accepted. If the attempt changed in between, the retry gets 409
``input id was already used with different content``, which tells the caller
the earlier try reached the previous attempt.
"""
from __future__ import annotations

import uuid

from .errors import APIError, RateLimited, TransportError, Unavailable

RETRIES = 8
FIRST_DELAY_S = 0.1
MAX_DELAY_S = 2.0
RETRY_STATUSES = (502, 504)


def new_input_id() -> str:
    return "in-" + uuid.uuid4().hex


def should_retry(error: Exception) -> bool:
    """Transport failures (ambiguous or not), 503 barriers, 429 full buffers, gateway errors."""
    if isinstance(error, (TransportError, Unavailable, RateLimited)):
        return True
    return isinstance(error, APIError) and error.status in RETRY_STATUSES


def delays(retries: int = RETRIES):
    delay = FIRST_DELAY_S
    for _ in range(retries):
        yield delay
        delay = min(MAX_DELAY_S, delay * 2)


def as_bytes(data: bytes | str | None) -> bytes:
    if data is None:
        return b""
    return data.encode() if isinstance(data, str) else bytes(data)
