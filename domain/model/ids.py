"""Identifier shapes shared with the reference: ``ses-`` / ``att-`` + 12 chars of a UUIDv4.

Randomness comes in from the caller (a uuid4 hex string), so the model stays pure.
"""
from __future__ import annotations

import re

_SANDBOX_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def _twelve(uuid_hex: str) -> str:
    # The reference takes the first 12 chars of the dashed UUID string: 8 hex, '-', 3 hex.
    return f"{uuid_hex[:8]}-{uuid_hex[8:11]}"


def session_id_from(uuid_hex: str) -> str:
    return "ses-" + _twelve(uuid_hex)


def attempt_id_from(uuid_hex: str) -> str:
    return "att-" + _twelve(uuid_hex)


def sandbox_id_from(uuid_hex: str) -> str:
    return "sb-" + uuid_hex[:16]


def is_sandbox_id(value: str) -> bool:
    return bool(_SANDBOX_ID.match(value))
