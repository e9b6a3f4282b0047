"""Sandbox routes: claim, list, get, status, update, delete,
pause, resume and refresh. Pause is synchronous: it answers once the checkpoint is
committed and the runtime released (the SDK allows it; pause_and_wait then ends
after one GET)."""
from __future__ import annotations

import re

from sanic import Blueprint, Request

from session_supervisor.domain.model.access import VOLUME_WRITE
from session_supervisor.domain.model.errors import ForbiddenError, InvalidSpecError
from session_supervisor.domain.model.network import NetworkPolicyError, normalize_policy
from session_supervisor.domain.model.services import ServicesError, check_resume_allowed
from session_supervisor.domain.model.spec import MAX_SECONDS, check_env
from session_supervisor.domain.model.volumes import WORKSPACE, VolumeRequestError, parse_mounts

from ..auth import principal_of
from ..errors import ApiError
from ..schemas import ok, parse_json, render_claim, render_sandbox
from ..webhook_config import claim_webhook
from .services import parse_services
from ..template_wire import disk_quantity

bp = Blueprint("sandboxes", url_prefix="/api/v1/sandboxes")


def manager(request: Request):
    return request.app.ctx.container.manager


def _bad(message: str) -> ApiError:
    return ApiError(400, "bad_request", message)


def parse_claim(body) -> tuple[str, dict]:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise _bad("invalid request body: expected a JSON object")
    template = body.get("template")
    if template is not None and not isinstance(template, str):
        raise _bad("template must be a string")
    template = (template or "").strip().lower()
    if not template:
        raise _bad("template is required")
    if "/" in template or len(template) > 255:
        raise _bad("template is invalid")
    return template, parse_config(body.get("config"))


def parse_config(config) -> dict:
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise _bad("config must be an object")
    out: dict = {}
    for key in ("ttl", "hard_ttl"):
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(f"{key} must be an integer")
        if value < 0:
            raise _bad(f"{key} must be non-negative")
        if value > MAX_SECONDS:  # a deadline now + ttl must fit the clock's int64 nanoseconds
            raise _bad(f"{key} must be at most {MAX_SECONDS}")
        out[key] = value
    if out.get("ttl", 0) > 0 and out.get("hard_ttl", 0) > 0 and out["ttl"] > out["hard_ttl"]:
        raise _bad("ttl must be less than or equal to hard_ttl")
    if config.get("auto_resume") is not None:
        if not isinstance(config["auto_resume"], bool):
            raise _bad("auto_resume must be a boolean")
        out["auto_resume"] = config["auto_resume"]
    env = config.get("env_vars")
    if env is not None:
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise _bad("env_vars must be an object of strings")
        try:
            check_env(env, "env_vars")
        except InvalidSpecError as exc:
            raise _bad(exc.message) from None
        out["env_vars"] = env
    if config.get("network") is not None:
        out["network"] = parse_network(config["network"])
    if config.get("services") is not None:  # the Python SDK's config round trip sends []
        auto_resume = config.get("auto_resume")
        out["services"] = parse_services(config["services"], True if auto_resume is None else bool(auto_resume))
    resources = config.get("resources")
    if resources is not None:
        if not isinstance(resources, dict):
            raise _bad("resources must be an object")
        if resources.get("memory") is not None:
            out["resources"] = {"memory": parse_memory(resources["memory"])}
    return out


def check_services_resume(config: dict) -> None:
    """Services that wake the sandbox need ``auto_resume``, whichever of the two an update changes."""
    try:
        check_resume_allowed(config.get("services") or [], bool(config.get("auto_resume", True)))
    except ServicesError as exc:
        raise _bad(str(exc)) from None


def claim_disk_bytes(body) -> int | None:
    """``config.resources.ephemeral_storage`` of a claim (an extension: the template's otherwise)."""
    resources = ((body or {}).get("config") or {}).get("resources") or {}
    value = resources.get("ephemeral_storage") if isinstance(resources, dict) else None
    return None if value is None else disk_quantity(value, "config.resources.ephemeral_storage")


def claim_snapshot(body) -> str:
    """``snapshot_id`` of a claim: its disk starts as a copy of that rootfs snapshot ("" for none)."""
    value = (body or {}).get("snapshot_id")
    if value in (None, ""):
        return ""
    if not isinstance(value, str):
        raise _bad("snapshot_id must be a string")
    return value.strip()


def parse_network(policy) -> dict:
    try:
        return normalize_policy(policy)
    except NetworkPolicyError as exc:
        raise _bad(str(exc)) from None


_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|K|M|G|T)?$")
_UNIT = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
         "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
MIN_MEMORY, MAX_MEMORY = 128 * 2**20, 16 * 2**30


def parse_memory(value) -> str:
    """A Kubernetes quantity between 128Mi and 16Gi, the reference's bounds."""
    match = _QUANTITY.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise _bad("invalid memory quantity")
    if not MIN_MEMORY <= float(match[1]) * _UNIT[match[2]] <= MAX_MEMORY:
        raise _bad("memory must be between 128Mi and 16Gi")
    return value.strip()


def _object(request: Request) -> dict:
    """The JSON body as an object ({} when empty); this API says bad_request, not invalid_request."""
    try:
        body = parse_json(request)
    except ApiError as exc:
        raise _bad(exc.message) from None
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise _bad("invalid request body: expected a JSON object")
    return body


def _memory_flag(body: dict) -> bool:
    memory = body.get("memory")
    if memory is not None and not isinstance(memory, bool):
        raise _bad("memory must be a boolean")
    return bool(memory)


@bp.post("", ctx_action="claim_sandbox", strict_slashes=False)
async def claim(request: Request):
    """201 ClaimResponse; 400 bad_request (template required or invalid config)."""
    body = parse_json(request)
    template, config = parse_claim(body)
    webhook = await claim_webhook(request, body.get("config"))
    if webhook is not None:
        config["webhook"] = webhook
    mounts = claim_mounts(request, body)
    sandbox = await manager(request).claim(template, config, owner=principal_of(request),
                                           disk_bytes=claim_disk_bytes(body), mounts=mounts,
                                           snapshot_id=claim_snapshot(body))
    return ok(render_claim(sandbox), 201)


def claim_mounts(request: Request, body) -> list[dict]:
    """The claim's ``mounts`` (TypeScript and Go SDKs): volumes of the caller's team, bound from now
    on (``domain.volumes``); binding one is a volume write. 400 for a mount point the runtime cannot
    make (without bubblewrap only /workspace)."""
    mounts = parse_mounts((body or {}).get("mounts"))
    if mounts and not principal_of(request).can(VOLUME_WRITE):
        raise ForbiddenError()
    if request.app.ctx.container.launcher.name == "host":
        for mount in mounts:
            if mount["mount_point"] != WORKSPACE:
                raise VolumeRequestError(f"mount point {mount['mount_point']!r}: the host runtime can only "
                                         "mount a volume at /workspace")
    return mounts


@bp.get("", ctx_action="list_sandboxes", strict_slashes=False)
async def list_sandboxes(request: Request):
    """200 {"sandboxes", "count", "has_more"}; 400 bad_request for bad paging."""
    limit, offset = _paging(request)
    status = request.args.get("status")
    template = request.args.get("template_id")
    paused = request.args.get("paused")
    if paused is not None and paused not in ("true", "false"):
        raise _bad("invalid paused parameter")
    # Only the page is rendered; unfiltered, only the page is read (the registry keeps each team's
    # sandboxes in order): a page costs the same with a thousand sandboxes as with ten.
    paged = None if status or template or paused is not None else \
        manager(request).page(principal_of(request), offset, limit)
    if paged is not None:
        shown, count = paged
    else:
        items = await manager(request).list_all(visible_to=principal_of(request))
        if status:
            items = [sb for sb in items if sb.status == status]
        if template:
            items = [sb for sb in items if sb.template == template]
        if paused is not None:
            items = [sb for sb in items if (sb.status == "paused") == (paused == "true")]
        shown, count = items[offset:offset + limit], len(items)
    page = [render_sandbox(sb) for sb in shown]
    summaries = [{k: sb[k] for k in ("id", "template_id", "status", "paused", "runtime_generation",
                                     "created_at", "updated_at", "expires_at", "hard_expires_at") if k in sb}
                 for sb in page]
    return ok({"sandboxes": summaries, "count": count, "has_more": offset + limit < count})


def _paging(request: Request) -> tuple[int, int]:
    try:
        limit = int(request.args.get("limit", "50"))
        offset = int(request.args.get("offset", "0"))
    except ValueError:
        raise _bad("limit and offset must be integers") from None
    if not 1 <= limit <= 200 or offset < 0:
        raise _bad("limit must be 1-200 and offset non-negative")
    return limit, offset


@bp.get("/<sandbox_id>", ctx_action="get_sandbox")
async def get_sandbox(request: Request, sandbox_id: str):
    """200 Sandbox; 404 not_found."""
    return ok(render_sandbox(manager(request).registry.sandbox(sandbox_id)))


@bp.get("/<sandbox_id>/status", ctx_action="get_sandbox_status")
async def sandbox_status(request: Request, sandbox_id: str):
    """200 SandboxStatus (+ resource_usage: workspace_bytes, memory, pids); 404 not_found."""
    sandbox = render_sandbox(manager(request).registry.sandbox(sandbox_id))
    status = {k: sandbox[k] for k in ("template_id", "team_id", "runtime_id", "pod_name", "status",
                                      "claimed_at", "created_at", "expires_at", "hard_expires_at")}
    status = {"sandbox_id": sandbox["id"], **status}
    status["resource_usage"] = usage = await manager(request).usage(sandbox_id)
    dirs = request.app.ctx.container.dirs
    if "disk_limit_bytes" not in usage and dirs is not None:  # no disk of its own: say why
        usage["disk_quota"] = dirs.quota_note or "this sandbox was made before disk quotas"
    return ok(status)


@bp.put("/<sandbox_id>", ctx_action="update_sandbox")
async def update_sandbox(request: Request, sandbox_id: str):
    """200 Sandbox (partial merge of config); 400 bad_request; 404 not_found; 503 unavailable."""
    body = _object(request)
    current = manager(request).registry.sandbox(sandbox_id)
    if not isinstance(body.get("config"), dict):
        raise _bad("config is required")
    changes = parse_config(body["config"])
    merged = {**current.config, **changes}
    if merged.get("ttl", 0) > 0 and merged.get("hard_ttl", 0) > 0 and merged["ttl"] > merged["hard_ttl"]:
        raise _bad("ttl must be less than or equal to hard_ttl")
    check_services_resume(merged)
    return ok(render_sandbox(await manager(request).transitions.update(sandbox_id, changes)))


@bp.get("/<sandbox_id>/network", ctx_action="get_sandbox_network")
async def get_network(request: Request, sandbox_id: str):
    """200 SandboxNetworkPolicy; 404 not_found."""
    return ok(manager(request).network.policy_of(manager(request).registry.sandbox(sandbox_id)))


@bp.put("/<sandbox_id>/network", ctx_action="update_sandbox_network")
async def update_network(request: Request, sandbox_id: str):
    """200 SandboxNetworkPolicy, enforced for new connections before it answers; 400
    bad_request (malformed, or a rule this server does not enforce); 404; 503 unavailable."""
    manager(request).registry.sandbox(sandbox_id)
    policy = parse_network(_object(request))
    await manager(request).transitions.update(sandbox_id, {"network": policy})
    return ok(manager(request).network.policy_of(manager(request).registry.sandbox(sandbox_id)))


@bp.post("/<sandbox_id>/pause", ctx_action="pause_sandbox")
async def pause_sandbox(request: Request, sandbox_id: str):
    """200 {sandbox_id, paused, status}; 400 memory pause; 404 not_found; 503 unavailable."""
    manager(request).registry.sandbox(sandbox_id)
    if _memory_flag(_object(request)):  # only the filesystem is checkpointed, never memory
        raise _bad("memory pause is not supported: only the filesystem is checkpointed")
    sandbox = await manager(request).transitions.pause(sandbox_id)
    return ok({"sandbox_id": sandbox_id, "paused": sandbox.status == "paused", "status": sandbox.status})


@bp.post("/<sandbox_id>/resume", ctx_action="resume_sandbox")
async def resume_sandbox(request: Request, sandbox_id: str):
    """200 {sandbox_id, resumed}; 404 not_found (also past hard_ttl); 503 sandbox_resume_failed."""
    manager(request).registry.sandbox(sandbox_id)
    _memory_flag(_object(request))  # memory: true falls back to the checkpointed filesystem
    await manager(request).transitions.resume(sandbox_id)
    return ok({"sandbox_id": sandbox_id, "resumed": True})


@bp.post("/<sandbox_id>/refresh", ctx_action="refresh_sandbox")
async def refresh_sandbox(request: Request, sandbox_id: str):
    """200 {sandbox_id, expires_at?, hard_expires_at?}; 400 negative duration; 404 not_found."""
    manager(request).registry.sandbox(sandbox_id)
    duration = _object(request).get("duration")
    if duration is None:
        duration = 0
    if isinstance(duration, bool) or not isinstance(duration, int) or duration < 0:
        raise _bad("duration must be a non-negative integer")
    if duration > MAX_SECONDS:
        raise _bad(f"duration must be at most {MAX_SECONDS}")
    rendered = render_sandbox(await manager(request).transitions.refresh(sandbox_id, duration))
    return ok({"sandbox_id": sandbox_id, "expires_at": rendered["expires_at"],
               "hard_expires_at": rendered["hard_expires_at"]})


@bp.delete("/<sandbox_id>", ctx_action="delete_sandbox")
async def delete_sandbox(request: Request, sandbox_id: str):
    """202 {"message"}; 404 not_found."""
    await manager(request).transitions.delete(sandbox_id)
    webhooks = request.app.ctx.container.webhooks
    if webhooks is not None:  # sandbox.deleted now (the webhooks' sweep would in a second anyway)
        await webhooks.deleted(sandbox_id)
    request.app.ctx.container.release_memory()  # its contexts' output goes back to the system
    return ok({"message": "sandbox terminated successfully"}, 202)
