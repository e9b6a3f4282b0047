"""What the ingress decides for one request before it reaches a service (pure).

In the reference's order: the route (the public services on that port, the longest matching
``path_prefix`` wins; no match 404, a method it does not allow 405), CORS (a preflight is answered
here), auth (the SHA-256 of the presented credential against the stored digest), the rate limit
(a token bucket per sandbox and route; 429 with ``Retry-After``), then the rewrite of the path.
"""
from __future__ import annotations

import hashlib
import hmac
import math
import re
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import quote, unquote

# Encoded slashes, backslashes and NUL would let a path match one route here and mean another
# to the service behind it (which decodes them): refused rather than guessed.
_AMBIGUOUS = re.compile(r"%(2f|5c|00)", re.IGNORECASE)
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


class BadPathError(ValueError):
    """A request path the ingress will not route (400)."""


def normalize_path(raw: str) -> str:
    """The path as routes are matched and as the service receives it: percent-decoded, dot
    segments removed (so ``/a/../b`` is ``/b`` here and there), and encoded again."""
    if not raw.startswith("/") or "\\" in raw or _AMBIGUOUS.search(raw):
        raise BadPathError("invalid request path")
    decoded = unquote(raw, errors="strict")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in decoded):
        raise BadPathError("invalid request path")
    segments = decoded.split("/")[1:]
    out: list[str] = []
    for segment in segments:
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    if segments[-1] in (".", "..") and out and out[-1] != "":
        out.append("")  # "/a/b/.." is the directory "/a/"
    return "/" + "/".join(out)


def encode_path(path: str) -> str:
    return quote(path, safe=_PATH_SAFE)


@dataclass(frozen=True)
class RouteMatch:
    service: dict
    route: dict
    method_allowed: bool


def match_route(services: list[dict], port: int, path: str, method: str) -> RouteMatch | None:
    best, best_len = None, -1
    for service in services:
        if not service["ingress"]["public"] or service["port"] != port:
            continue
        for route in service["ingress"]["routes"]:
            prefix = route.get("path_prefix") or "/"
            if path_matches(path, prefix) and len(prefix) > best_len:
                best, best_len = (service, route), len(prefix)
    if best is None:
        return None
    return RouteMatch(best[0], best[1], method_allowed(best[1].get("methods"), method))


def path_matches(path: str, prefix: str) -> bool:
    """``/a`` matches ``/a`` and ``/a/…``, never ``/ab``."""
    if prefix in ("", "/") or path == prefix:
        return True
    return path.startswith(prefix.rstrip("/") + "/")


def method_allowed(methods: list[str] | None, method: str) -> bool:
    return not methods or any(m == "*" or m == method.upper() for m in methods)


def rewrite_path(path: str, prefix: str, rewrite_prefix: str | None) -> str:
    """``rewrite_prefix`` replaces the matched prefix; without one nothing is stripped."""
    if rewrite_prefix is None:
        return path
    prefix = prefix or "/"
    if prefix == "/":
        suffix = path[1:] if path.startswith("/") else path
    elif path == prefix or path.startswith(prefix.rstrip("/") + "/"):
        suffix = path[len(prefix.rstrip("/")):]
    else:
        return path
    if not suffix:
        return rewrite_prefix
    return rewrite_prefix.rstrip("/") + "/" + suffix.lstrip("/")


# ---- CORS ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CorsOutcome:
    headers: list[tuple[str, str]]  # added to the answer (preflight) or to the proxied response
    answer: int | None = None  # set: answer now with this status (204 preflight, 403, 405)
    message: str = ""


def cors(route: dict, method: str, origin: str | None, request_method: str | None) -> CorsOutcome:
    policy = route.get("cors")
    if policy is None or not origin:
        return CorsOutcome([])
    allowed = policy.get("allowed_origins") or []
    granted = next((o if o == "*" else origin for o in allowed if o == "*" or o.lower() == origin.lower()), None)
    preflight = method.upper() == "OPTIONS"
    if granted is None:
        return CorsOutcome([], 403, "origin is not allowed") if preflight else CorsOutcome([])
    headers = [("Access-Control-Allow-Origin", granted), ("Vary", "Origin")]
    if policy.get("allow_credentials"):
        headers.append(("Access-Control-Allow-Credentials", "true"))
    if policy.get("expose_headers"):
        headers.append(("Access-Control-Expose-Headers", ", ".join(policy["expose_headers"])))
    if not preflight:
        return CorsOutcome(headers)
    wanted = (request_method or "").strip().upper()
    methods = policy.get("allowed_methods") or route.get("methods")
    if wanted and not method_allowed(methods, wanted):
        return CorsOutcome([], 405, "method is not allowed")
    if methods:
        headers.append(("Access-Control-Allow-Methods", ", ".join(methods)))
    if policy.get("allowed_headers"):
        headers.append(("Access-Control-Allow-Headers", ", ".join(policy["allowed_headers"])))
    if policy.get("max_age_seconds"):
        headers.append(("Access-Control-Max-Age", str(policy["max_age_seconds"])))
    return CorsOutcome(headers, 204)


# ---- auth ------------------------------------------------------------------------------------------
def credential_refusal(route: dict, header) -> str | None:
    """None when the request may pass, else the 401's message. ``header(name)`` reads a header."""
    auth = route.get("auth") or {"mode": "none"}
    if auth["mode"] == "bearer":
        value = (header("authorization") or "").strip()
        if not value.startswith("Bearer "):
            return "missing bearer token"
        if not _digest_matches(value[len("Bearer "):].strip(), auth["bearer_token_sha256"]):
            return "invalid bearer token"
    elif auth["mode"] == "header":
        if not _digest_matches(header(auth["header_name"]) or "", auth["header_value_sha256"]):
            return "invalid header credential"
    return None


def consumed_header(route: dict) -> str | None:
    """The header that carried the route's credential: it is for the ingress, not the service."""
    auth = route.get("auth") or {}
    return {"bearer": "authorization", "header": (auth.get("header_name") or "").lower()}.get(auth.get("mode"))


def _digest_matches(value: str, expected_hex: str) -> bool:
    digest = hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()
    return hmac.compare_digest(digest, expected_hex)


# ---- rate limits -----------------------------------------------------------------------------------
class RateLimits:
    """Token buckets per (sandbox, route): ``burst`` tokens, refilled at ``rps`` a second.

    Bounded: the least recently used buckets are forgotten past ``max_buckets`` (a forgotten
    bucket starts full again, which only ever lets a request through that a full bucket would).
    """

    def __init__(self, max_buckets: int = 10_000) -> None:
        self.max_buckets = max_buckets
        self._buckets: OrderedDict[tuple, tuple[float, float]] = OrderedDict()  # key -> (tokens, at)

    def take(self, key: tuple, rps: int, burst: int, now: float) -> float:
        """0.0 when a token was taken, else the seconds until one is there."""
        tokens, at = self._buckets.pop(key, (float(burst), now))
        tokens = min(float(burst), tokens + max(0.0, now - at) * rps)
        wait = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / rps
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self.max_buckets:
            self._buckets.popitem(last=False)
        return wait

    def forget_sandbox(self, sandbox_id: str) -> None:
        for key in [k for k in self._buckets if k[0] == sandbox_id]:
            del self._buckets[key]


def retry_after_seconds(wait: float) -> int:
    return max(1, math.ceil(wait))
