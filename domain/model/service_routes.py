"""The routes of a service (``SandboxAppServiceRoute``: path prefix, methods, rewrite, auth, CORS,
rate limit, timeout), validated and normalized as the reference does, and the field checks the
services module shares with it."""
from __future__ import annotations

import re
from urllib.parse import urlsplit

from .errors import InvalidSpecError
from .spec import check_text

MAX_METHODS = 16
MAX_VALUES = 32  # origins, headers
MAX_TEXT = 4096  # paths, names, origins
AUTH_MODES = ("none", "bearer", "header")

_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_METHOD = re.compile(r"^[A-Z][A-Z0-9_-]*$")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an RFC 9110 header field name
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ServicesError(ValueError):
    """The services list is malformed (400 bad_request); the message names the field."""


def normalize_route(raw) -> dict:
    raw = object_field(raw, "route")
    out: dict = {"id": label_field(raw.get("id"), "id"), "resume": bool_field(raw.get("resume"), "resume", False),
                 "path_prefix": prefix_field(raw.get("path_prefix"), "path_prefix")}
    methods = _methods(raw.get("methods"), "methods")
    if methods:
        out["methods"] = methods
    if raw.get("rewrite_prefix") is not None:
        out["rewrite_prefix"] = prefix_field(raw["rewrite_prefix"], "rewrite_prefix")
    if raw.get("auth") is not None:
        out["auth"] = _auth(raw["auth"])
    if raw.get("cors") is not None:
        out["cors"] = _cors(raw["cors"])
    if raw.get("rate_limit") is not None:
        limit = object_field(raw["rate_limit"], "rate_limit")
        rps, burst = (int_field(limit.get(k), f"rate_limit.{k}") if limit.get(k) is not None else 0
                      for k in ("rps", "burst"))
        if rps <= 0:
            raise ServicesError("rate_limit.rps must be greater than 0")
        if burst <= 0:
            raise ServicesError("rate_limit.burst must be greater than 0")
        out["rate_limit"] = {"rps": rps, "burst": burst}
    if raw.get("timeout_seconds") is not None:
        timeout = int_field(raw["timeout_seconds"], "timeout_seconds")
        if timeout < 0:
            raise ServicesError("timeout_seconds must be greater than or equal to 0")
        if timeout:
            out["timeout_seconds"] = timeout
    return out


def _auth(raw) -> dict:
    raw = object_field(raw, "auth")
    mode = text_field(raw.get("mode") or "none", "auth.mode").strip().lower() or "none"
    if mode not in AUTH_MODES:
        raise ServicesError(f"unsupported auth.mode {mode!r}")
    if mode == "bearer":
        digest = text_field(raw.get("bearer_token_sha256") or "", "auth.bearer_token_sha256").strip().lower()
        if not digest:
            raise ServicesError("auth.bearer_token_sha256 is required for bearer auth")
        if not _HEX64.match(digest):
            raise ServicesError("auth.bearer_token_sha256 must be a hex encoded SHA-256 digest")
        return {"mode": mode, "bearer_token_sha256": digest}
    if mode == "header":
        name = text_field(raw.get("header_name") or "", "auth.header_name").strip()
        digest = text_field(raw.get("header_value_sha256") or "", "auth.header_value_sha256").strip().lower()
        if name and not _TOKEN.match(name):
            raise ServicesError("auth.header_name must be a valid HTTP header name")
        if not name or not digest:
            raise ServicesError("auth.header_name and auth.header_value_sha256 are required for header auth")
        if not _HEX64.match(digest):
            raise ServicesError("auth.header_value_sha256 must be a hex encoded SHA-256 digest")
        return {"mode": mode, "header_name": _canonical_header(name), "header_value_sha256": digest}
    return {"mode": "none"}


def _cors(raw) -> dict:
    raw = object_field(raw, "cors")
    out: dict = {}
    origins = list_field(raw.get("allowed_origins"), "cors.allowed_origins")
    if origins:
        out["allowed_origins"] = _dedupe([_origin(o) for o in origins])
    methods = _methods(raw.get("allowed_methods"), "cors.allowed_methods")
    if methods:
        out["allowed_methods"] = methods
    for key in ("allowed_headers", "expose_headers"):
        names = list_field(raw.get(key), f"cors.{key}")
        for name in names:
            if not isinstance(name, str) or not name.strip():
                raise ServicesError(f"cors.{key} cannot contain empty values")
            if not _TOKEN.match(name.strip()):
                raise ServicesError(f"cors.{key} contains invalid HTTP header name {name!r}")
        if names:
            out[key] = _dedupe([_canonical_header(n.strip()) for n in names])
    if raw.get("allow_credentials") is not None:
        out["allow_credentials"] = bool_field(raw["allow_credentials"], "cors.allow_credentials", False)
    if raw.get("max_age_seconds") is not None:
        age = int_field(raw["max_age_seconds"], "cors.max_age_seconds")
        if age < 0:
            raise ServicesError("cors.max_age_seconds must be greater than or equal to 0")
        out["max_age_seconds"] = age
    return out


def _origin(value) -> str:
    text = text_field(value, "cors.allowed_origins").strip()
    if text == "*":
        return text
    parts = urlsplit(text)
    if (not text or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text) or parts.scheme.lower() not in ("http", "https")
            or not parts.netloc or "@" in parts.netloc or parts.query or parts.fragment or parts.path not in ("", "/")):
        raise ServicesError(f"cors.allowed_origins contains invalid origin {value!r}")
    return f"{parts.scheme.lower()}://{parts.netloc}"


def _methods(raw, where: str) -> list[str]:
    values = list_field(raw, where, MAX_METHODS)
    out = []
    for value in values:
        method = text_field(value, where).strip().upper()
        if not method:
            raise ServicesError(f"{where} cannot contain empty values")
        if method != "*" and not _METHOD.match(method):
            raise ServicesError(f"invalid method {method!r}")
        out.append(method)
    return _dedupe(out)


def prefix_field(value, where: str) -> str:
    text = "" if value is None else text_field(value, where).strip()
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in text):
        raise ServicesError(f"{where} must not contain spaces or control characters")
    if not text:
        return "/"
    return text if text.startswith("/") else "/" + text


def _canonical_header(name: str) -> str:
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


def _dedupe(values: list[str]) -> list[str]:
    seen, out = set(), []
    for value in values:
        if value.lower() not in seen:
            seen.add(value.lower())
            out.append(value)
    return out


def object_field(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise ServicesError(f"{where} must be an object")
    return value


def list_field(value, where: str, limit: int = MAX_VALUES) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ServicesError(f"{where} must be an array")
    if len(value) > limit:
        raise ServicesError(f"{where} exceeds limit {limit}")
    return value


def label_field(value, where: str) -> str:
    if not isinstance(value, str):
        raise ServicesError(f"{where} must be a DNS label")
    label = value.strip().lower()
    if not _LABEL.match(label):
        raise ServicesError(f"{where} must be a DNS label")
    return label


def text_field(value, where: str) -> str:
    if not isinstance(value, str):
        raise ServicesError(f"{where} must be a string")
    try:
        check_text(value, where, MAX_TEXT)
    except InvalidSpecError as exc:
        raise ServicesError(exc.message) from None
    return value


def int_field(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ServicesError(f"{where} must be an integer")
    if not -2**31 <= value < 2**31:
        raise ServicesError(f"{where} must fit in 32 bits")
    return value


def bool_field(value, where: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ServicesError(f"{where} must be a boolean")
    return value
