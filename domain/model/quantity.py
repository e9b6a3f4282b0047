"""Kubernetes quantities (``512Mi``, ``8Gi``, ``1.5G``) in bytes; the API has checked the form."""
from __future__ import annotations

import re

QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|K|M|G|T)?$")
UNIT = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
        "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def quantity_bytes(quantity: str | None) -> int | None:
    match = QUANTITY.match(quantity.strip()) if isinstance(quantity, str) else None
    if match is None:
        return None
    return int(float(match[1]) * UNIT[match[2]])
