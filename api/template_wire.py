"""Templates on the wire: the create/update bodies checked and normalised, and the ``Template``
rendered as every SDK parses it (top level snake_case, ``spec`` camelCase, ``mainContainer`` with
``image`` and ``resources.memory`` always present: Python 0.10.4 needs both)."""
from __future__ import annotations

import re

from session_supervisor.domain.model.errors import InvalidSpecError
from session_supervisor.domain.model.network import NetworkPolicyError, normalize_policy
from session_supervisor.domain.model.quantity import QUANTITY, UNIT
from session_supervisor.domain.model.spec import check_env
from session_supervisor.domain.model.timefmt import rfc3339

from .errors import ApiError

MIN_MEMORY, MAX_MEMORY = 128 * 2**20, 16 * 2**30
MIN_DISK, MAX_DISK = 300 * 2**20, 2**40
_TEMPLATE_ID = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_PRIVILEGED = ("pod", "clusterId")
_PRIVILEGED_CONTAINER = ("securityContext", "imagePullPolicy")
_REFUSED = ("lifecycle", "public", "allowedTeams")
_KNOWN_SPEC = {"mainContainer", "description", "displayName", "tags", "envVars", "network", "pool",
               "ephemeralMounts", "volumeMounts", *_PRIVILEGED, *_REFUSED}


def bad(message: str) -> ApiError:
    return ApiError(400, "bad_request", message)


def template_id_of(value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise bad("template_id is required")
    template_id = value.strip().lower()
    if "/" in template_id or len(template_id) > 255:
        raise bad("template_id is invalid")
    if not _TEMPLATE_ID.match(template_id):
        raise bad("template_id cannot generate claimable sandbox names: use 1-63 lowercase letters, digits "
                  "and '-', starting and ending with a letter or digit")
    return template_id


def quantity(value, field: str, low: int, high: int, align: int = 1) -> tuple[str, int]:
    match = QUANTITY.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise bad(f"{field} must be a quantity such as 512Mi or 8Gi")
    size = float(match[1]) * UNIT[match[2]]
    if size != int(size) or int(size) % align:
        raise bad(f"{field} must be a whole number of bytes, a multiple of {align}")
    if not low <= size <= high:
        raise bad(f"{field} must be between {_human(low)} and {_human(high)}")
    return value.strip(), int(size)


def disk_quantity(value, field: str) -> int:
    return quantity(value, field, MIN_DISK, MAX_DISK, 4096)[1]


def _human(size: int) -> str:
    for unit, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size} bytes"


def parse_spec(spec) -> dict:
    """The normalised spec (what is stored and rendered back) or a 400/403."""
    if not isinstance(spec, dict):
        raise bad("spec is required and must be an object")
    for key in _PRIVILEGED:
        if spec.get(key) not in (None, "", {}, []):
            raise ApiError(403, "forbidden", f"spec.{key} can only be set by the platform")
    for key in _REFUSED:
        if key in spec:
            raise bad(f"spec.{key} is not supported")
    unknown = sorted(set(spec) - _KNOWN_SPEC)
    if unknown:
        raise bad(f"unknown field spec.{unknown[0]}")
    main = spec.get("mainContainer")
    if not isinstance(main, dict):
        raise bad("spec.mainContainer is required")
    for key in _PRIVILEGED_CONTAINER:
        if main.get(key) not in (None, "", {}):
            raise ApiError(403, "forbidden", f"spec.mainContainer.{key} can only be set by the platform")
    image = main.get("image")
    if not isinstance(image, str) or not image.strip():
        raise bad("spec.mainContainer.image is required")
    resources = main.get("resources")
    if not isinstance(resources, dict):
        raise bad("spec.mainContainer.resources is required")
    if "cpu" in resources:
        raise bad("spec.mainContainer.resources.cpu is not supported; set memory only")
    memory, _ = quantity(resources.get("memory"), "spec.mainContainer.resources.memory", MIN_MEMORY, MAX_MEMORY)
    out_resources = {"memory": memory}
    if resources.get("ephemeralStorage") not in (None, "", "0"):
        disk_quantity(resources["ephemeralStorage"], "spec.mainContainer.resources.ephemeralStorage")
        out_resources["ephemeralStorage"] = resources["ephemeralStorage"].strip()
    else:
        out_resources["ephemeralStorage"] = "8Gi"
    out_main = {"image": image.strip(), "resources": out_resources, "env": _env_list(main.get("env"))}
    if main.get("securityClass") not in (None, "privileged"):
        raise bad("spec.mainContainer.securityClass must be 'privileged'")
    out: dict = {"mainContainer": out_main}
    for key, limit in (("description", 8192), ("displayName", 256)):
        if spec.get(key) is not None:
            if not isinstance(spec[key], str) or len(spec[key]) > limit:
                raise bad(f"spec.{key} must be a string of at most {limit} characters")
            out[key] = spec[key]
    if spec.get("tags") is not None:
        tags = spec["tags"]
        if not isinstance(tags, list) or not all(isinstance(t, str) and len(t) <= 128 for t in tags):
            raise bad("spec.tags must be a list of strings of at most 128 characters")
        out["tags"] = tags
    env_vars = spec.get("envVars")
    if env_vars is not None:
        if not isinstance(env_vars, dict) or not all(isinstance(v, str) for v in env_vars.values()):
            raise bad("spec.envVars must be an object of strings")
        _check_env(env_vars, "spec.envVars")
        out["envVars"] = env_vars
    if spec.get("network") is not None:
        try:
            out["network"] = normalize_policy(spec["network"])
        except NetworkPolicyError as exc:
            raise bad(f"spec.network: {exc}") from None
    if spec.get("pool") is not None:
        out["pool"] = _pool(spec["pool"])
    for key in ("ephemeralMounts", "volumeMounts"):
        if spec.get(key):  # a mount the sandbox would silently lack: refused rather than ignored
            raise bad(f"spec.{key} is not supported by this server")
    return out


def _env_list(env) -> list[dict]:
    if env is None:
        return []
    if not isinstance(env, list) or not all(isinstance(item, dict) and isinstance(item.get("name"), str)
                                            and isinstance(item.get("value"), str) for item in env):
        raise bad("spec.mainContainer.env must be a list of {name, value} strings")
    out = [{"name": item["name"], "value": item["value"]} for item in env]
    _check_env({item["name"]: item["value"] for item in out}, "spec.mainContainer.env")
    return out


def _check_env(env: dict, field: str) -> None:
    try:
        check_env(env, field)
    except InvalidSpecError as exc:
        raise bad(exc.message) from None


def _pool(pool) -> dict:
    if not isinstance(pool, dict):
        raise bad("spec.pool must be an object")
    values = {}
    for key in ("minIdle", "maxIdle"):
        value = pool.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad(f"spec.pool.{key} must be a non-negative integer")
        values[key] = value
    if values["maxIdle"] < values["minIdle"]:
        raise bad("spec.pool.maxIdle must be at least spec.pool.minIdle")
    return values


def render_template(template) -> dict:
    out = {"template_id": template.template_id, "scope": template.scope, "team_id": template.team_id or "local",
           "spec": template.spec, "created_at": rfc3339(template.created_ns),
           "updated_at": rfc3339(template.updated_ns)}
    if template.creation:
        out["status"] = {"creation": template.creation}
    return out
