"""OpenAPI entries for the template routes (the SDKs' ``apispec/api/templates``)."""
from __future__ import annotations

from .openapi_schemas import STR, STR_MAP, TIME, array, enum, obj, ref

TPL = "/api/v1/templates"
_ENV = obj({"name": STR, "value": STR}, ("name", "value"))
_CONTAINER = obj({"image": STR, "resources": obj({"memory": STR, "ephemeralStorage": STR}, ("memory",)),
                  "env": array(_ENV), "securityClass": enum("privileged")}, ("image", "resources"))
_CREATION = obj({"state": enum("creating", "ready", "failed"), "stage": enum("capturing", "publishing"),
                 "startedAt": TIME, "capturedAt": TIME, "completedAt": TIME, "reason": STR, "message": STR},
                ("state", "stage"))

SCHEMAS = {
    "SandboxTemplateSpec": obj({"mainContainer": _CONTAINER, "description": STR, "displayName": STR,
                                "tags": array(STR), "envVars": STR_MAP, "network": {"type": "object"},
                                "pool": obj({"minIdle": {"type": "integer"}, "maxIdle": {"type": "integer"}})},
                               ("mainContainer",)),
    "Template": obj({"template_id": STR, "scope": enum("team", "public"), "team_id": STR,
                     "spec": ref("SandboxTemplateSpec"), "created_at": TIME, "updated_at": TIME,
                     "status": obj({"creation": _CREATION})},
                    ("template_id", "scope", "spec", "created_at", "updated_at")),
    "TemplateList": obj({"templates": array(ref("Template")), "count": {"type": "integer"}},
                        ("templates", "count")),
    "TemplateCreateRequest": obj({"template_id": STR, "spec": ref("SandboxTemplateSpec")}, ("template_id", "spec")),
    "TemplateUpdateRequest": obj({"spec": ref("SandboxTemplateSpec")}, ("spec",)),
    "TemplateFromSandboxRequest": obj({"template_id": STR, "sandbox_id": STR, "spec_overrides": obj({
        "description": STR, "displayName": STR, "tags": array(STR),
        "pool": obj({"minIdle": {"type": "integer"}, "maxIdle": {"type": "integer"}})})},
        ("template_id", "sandbox_id")),
    "TemplateDeleted": obj({"message": STR}, ("message",)),
}


def template_paths(operation) -> dict:
    t = {"tag": "templates"}
    one = TPL + "/{template_id}"
    return {
        TPL: {"get": operation("list_templates", "Builtin and team templates", {200: ref("TemplateList")},
                               (401,), **t),
              "post": operation("create_template", "A template over an imported, digest-pinned image",
                                {201: ref("Template")}, (400, 401, 403, 404, 409), "TemplateCreateRequest", **t)},
        TPL + "/from-sandbox": {"post": operation(
            "create_template_from_sandbox", "A template whose claims start from a copy of a sandbox's disk (202 creating)",
            {202: ref("Template")}, (400, 401, 403, 404, 409, 503, 507), "TemplateFromSandboxRequest", **t)},
        one: {"get": operation("get_template", "One template", {200: ref("Template")}, (400, 401, 404), **t),
              "put": operation("update_template", "Replace a team template's spec", {200: ref("Template")},
                               (400, 401, 403, 404, 409), "TemplateUpdateRequest", **t),
              "delete": operation("delete_template", "Delete a team template", {200: ref("TemplateDeleted")},
                                  (400, 401, 404), **t)},
    }
