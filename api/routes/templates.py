"""Template routes (environments contract, templates): list, get, create, update, delete.

A template created here names an image the store holds, pinned by digest; it is claimable at once
(201 without ``status.creation``). ``from-sandbox`` captures a sandbox's disk as a hidden rootfs
snapshot in the background (202 ``creating``; domain/template_capture.py).
"""
from __future__ import annotations

from sanic import Blueprint, Request

from session_supervisor.domain.model.ids import is_sandbox_id

from ..auth import principal_of
from ..errors import ApiError
from ..schemas import ok, parse_json
from ..template_wire import bad, parse_spec, render_template, template_id_of

bp = Blueprint("templates", url_prefix="/api/v1/templates")


def templates(request: Request):
    return request.app.ctx.container.templates


def team(request: Request) -> str:
    """Whose templates: the caller's team (the platform key without a team has its own scope)."""
    principal = getattr(request.ctx, "principal", None)
    return principal.team_id if principal is not None else ""


def _body(request: Request) -> dict:
    try:
        body = parse_json(request)
    except ApiError as exc:
        raise bad(exc.message) from None
    if not isinstance(body, dict):
        raise bad("invalid request body: expected a JSON object")
    return body


@bp.get("", ctx_action="list_templates", strict_slashes=False)
async def list_templates(request: Request):
    """200 {templates, count}."""
    items = [render_template(t) for t in templates(request).list(team(request))]
    return ok({"templates": items, "count": len(items)})


@bp.get("/<template_id>", ctx_action="get_template")
async def get_template(request: Request, template_id: str):
    """200 Template; 400 invalid id; 404 not_found."""
    return ok(render_template(templates(request).get(template_id_of(template_id), team(request))))


@bp.post("", ctx_action="create_template", strict_slashes=False)
async def create_template(request: Request):
    """201 Template; 400 bad_request (spec, unpinned image); 403 privileged field; 404 unknown image;
    409 conflict (exists)."""
    body = _body(request)
    template_id = template_id_of(body.get("template_id"))
    spec = parse_spec(body.get("spec"))
    return ok(render_template(templates(request).create(template_id, spec, team(request))), 201)


FROM_SANDBOX_KEYS = {"template_id", "sandbox_id", "spec_overrides"}
OVERRIDES = {"description", "displayName", "tags", "pool"}


@bp.post("/from-sandbox", ctx_action="create_template_from_sandbox")
async def create_from_sandbox(request: Request):
    """202 Template (``status.creation`` creating/capturing), ``Location``, ``Retry-After``; 400; 404
    source sandbox not found (also another team's); 409 (exists, key reused, source failed); 503."""
    body = _body(request)
    unknown = sorted(set(body) - FROM_SANDBOX_KEYS)
    if unknown:
        raise bad(f"unknown field {unknown[0]}")
    template_id = template_id_of(body.get("template_id"))
    sandbox_id = body.get("sandbox_id")
    if not isinstance(sandbox_id, str) or not is_sandbox_id(sandbox_id.strip()):
        raise bad("invalid sandbox_id")
    overrides = body.get("spec_overrides") or {}
    if not isinstance(overrides, dict) or set(overrides) - OVERRIDES:
        raise bad("spec_overrides may only set description, displayName, tags and pool")
    if overrides:  # checked as a spec would be
        checked = parse_spec({"mainContainer": {"image": "x", "resources": {"memory": "1Gi"}}, **overrides})
        overrides = {k: checked[k] for k in overrides if k in checked}
    key = request.headers.get("Idempotency-Key", "")
    if len(key) > 255:
        raise bad("Idempotency-Key must be at most 255 characters")
    template = await request.app.ctx.container.captures.create(
        template_id, sandbox_id.strip(), overrides, team(request), principal_of(request), key)
    headers = {"Location": f"/api/v1/templates/{template.template_id}"}
    if (template.creation or {}).get("state") == "creating":
        headers["Retry-After"] = "1"
    response = ok(render_template(template), 202)
    response.headers.update(headers)
    return response


@bp.put("/<template_id>", ctx_action="update_template")
async def update_template(request: Request, template_id: str):
    """200 Template (full replacement of its spec); 400; 404; 409 template_not_ready."""
    body = _body(request)
    spec = parse_spec(body.get("spec"))
    return ok(render_template(templates(request).update(template_id_of(template_id), spec, team(request))))


@bp.delete("/<template_id>", ctx_action="delete_template")
async def delete_template(request: Request, template_id: str):
    """200 {message}; 404 not_found. Sandboxes claimed from it keep running as they are."""
    await request.app.ctx.container.captures.delete_template(template_id_of(template_id), team(request))
    return ok({"message": "template deleted"})
