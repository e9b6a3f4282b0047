"""``/teams``: create, list, get, update and delete teams, in the SDKs' ``Team`` shape.

This server has no users, so a team has no members or owner: the member routes of the reference
are not served. The platform key creates and deletes teams; a team's keys see only their team."""
from __future__ import annotations

from sanic import Blueprint, Request

from session_supervisor.domain.model.access import PLATFORM
from session_supervisor.domain.model.timefmt import rfc3339

from ..auth import principal_of
from ..schemas import ok
from .api_keys import body_object

bp = Blueprint("teams", url_prefix="/teams")


def keys(request: Request):
    return request.app.ctx.container.keys


def render_team(team) -> dict:
    return {"id": team.id, "name": team.name, "slug": team.slug, "home_region_id": team.home_region_id,
            "created_at": rfc3339(team.created_ns), "updated_at": rfc3339(team.updated_ns)}


@bp.get("", ctx_action="list_teams", strict_slashes=False)
async def list_teams(request: Request):
    """200 {"teams": [Team]}: every team for the platform key, a team key's own otherwise."""
    return ok({"teams": [render_team(team) for team in await keys(request).list_teams(principal_of(request))]})


@bp.post("", ctx_action="create_team", strict_slashes=False)
async def create_team(request: Request):
    """201 Team; 400 bad_request (no name, bad slug); 403 (only the platform key)."""
    body = body_object(request)
    team = await keys(request).create_team(principal_of(request), body.get("name"), body.get("slug"),
                                           body.get("home_region_id"))
    return ok(render_team(team), 201)


@bp.get("/<team_id>", ctx_action="get_team")
async def get_team(request: Request, team_id: str):
    """200 Team; 400 invalid team id; 404 unknown (or another team)."""
    return ok(render_team(await keys(request).team(principal_of(request), team_id)))


@bp.put("/<team_id>", ctx_action="update_team")
async def update_team(request: Request, team_id: str):
    """200 Team (name, slug); 400; 403 (not the team's admin); 404."""
    team = await keys(request).update_team(principal_of(request), team_id, body_object(request))
    return ok(render_team(team))


@bp.delete("/<team_id>", ctx_action="delete_team")
async def delete_team(request: Request, team_id: str):
    """200 {"message"} (its keys go too); 409 conflict while it owns sandboxes; 403; 404."""
    manager = request.app.ctx.container.manager

    async def sandboxes_of(team: str) -> int:
        return len(await manager.list_all(visible_to=PLATFORM.as_team(team)))

    await keys(request).delete_team(principal_of(request), team_id, sandboxes_of)
    return ok({"message": "team deleted"})
