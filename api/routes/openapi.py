"""GET /api/v1/openapi.json: the OpenAPI 3.1 document of both APIs (bearer auth applies)."""
from __future__ import annotations

import orjson
from sanic import Blueprint, HTTPResponse, Request

from ..openapi import document

bp = Blueprint("openapi")


@bp.get("/api/v1/openapi.json", ctx_action="openapi")
async def openapi_json(request: Request):
    """200 the document (not enveloped: it is a file, not an API resource)."""
    return HTTPResponse(orjson.dumps(document()), content_type="application/json")
