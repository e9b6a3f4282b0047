"""The input helper's policy: generated input ids, and which failures to retry.

An input is retried only with the *same* ``input_id`` and the same bytes: the
server dedupes by id and content, so a retry after an
ambiguous failure (the request may or may not have been applied) can never
deliver the bytes twice. It answers ``duplicate: true`` when the first try
had been accepted. If the attempt changed in between, the retry gets 409
``input id was already used with different content``, which tells the caller
the earlier try reached the previous attempt.

When a try was ambiguous and the helper is about to give up (retries spent, or
that 409), it reconciles against the journal first, as the recovery recipe asks:
an ``input.accepted`` event carrying this ``input_id`` proves the input was
accepted, and the result says so instead of raising.
"""
from __future__ import annotations

import uuid

from .errors import APIError, Conflict, RateLimited, TransportError, Unavailable
from .models import InputResult

RETRIES = 8
FIRST_DELAY_S = 0.1
MAX_DELAY_S = 2.0
RETRY_STATUSES = (502, 504, 507)  # 507: the server's disk is full; it resumes by itself
RECONCILE_EVENTS = 2000  # how far back from the latest seq a lost acceptance is looked for


def new_input_id() -> str:
    return "in-" + uuid.uuid4().hex


def should_retry(error: Exception) -> bool:
    """Transport failures (ambiguous or not), 503 barriers, 429 full buffers, gateway errors."""
    if isinstance(error, (TransportError, Unavailable, RateLimited)):
        return True
    return isinstance(error, APIError) and error.status in RETRY_STATUSES


def ambiguous(error: Exception) -> bool:
    """The server may have accepted the input although this try did not say so."""
    if isinstance(error, TransportError):
        return error.ambiguous
    return isinstance(error, APIError) and error.status >= 500


def worth_reconciling(error: Exception, earlier_ambiguous: bool) -> bool:
    """Giving up after an ambiguous try; or the retry met the id used "with different
    content", i.e. the earlier try reached an attempt that has since been replaced."""
    if not earlier_ambiguous:
        return False
    return isinstance(error, Conflict) or ambiguous(error) or should_retry(error)


def reconcile_window(earliest: int, latest: int) -> int:
    """The ``after`` cursor from which the journal is searched."""
    return max(earliest - 1, latest - RECONCILE_EVENTS, 0)


def receipt(events, input_id: str) -> InputResult | None:
    """The acceptance of ``input_id`` among these journal events, as an InputResult."""
    for event in events:
        if event.type == "input.accepted" and event.raw.get("input_id") == input_id:
            return InputResult(input_id=input_id, attempt_id=event.attempt_id or "", accepted=True,
                               duplicate=True, raw={"reconciled_from_seq": event.seq})
    return None


def delays(retries: int = RETRIES):
    delay = FIRST_DELAY_S
    for _ in range(retries):
        yield delay
        delay = min(MAX_DELAY_S, delay * 2)


def as_bytes(data: bytes | str | None) -> bytes:
    if data is None:
        return b""
    return data.encode() if isinstance(data, str) else bytes(data)
