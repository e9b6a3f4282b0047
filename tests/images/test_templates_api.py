"""The templates API as the official Python SDK calls it, and its refusals in the envelope."""
from __future__ import annotations

import pytest
import sandbox0
from sandbox0.apispec.models.container_spec import ContainerSpec
from sandbox0.apispec.models.env_var import EnvVar
from sandbox0.apispec.models.resource_quota import ResourceQuota
from sandbox0.apispec.models.sandbox_template_spec import SandboxTemplateSpec
from sandbox0.apispec.models.template_create_request import TemplateCreateRequest
from sandbox0.apispec.models.template_update_request import TemplateUpdateRequest

from tests.helpers import TOKEN


def spec(image: str, memory: str = "1Gi", **extra) -> SandboxTemplateSpec:
    return SandboxTemplateSpec(main_container=ContainerSpec(
        image=image, resources=ResourceQuota(memory=memory), env=[EnvVar(name="FROM_TEMPLATE", value="1")]),
        display_name="Trixie", **extra)


@pytest.fixture
def client(image_server):
    c = sandbox0.Client(token=TOKEN, base_url=image_server.url, timeout=30.0)
    yield c
    c.close()


def test_the_python_sdk_creates_lists_gets_updates_and_deletes_a_template(client, image_server):
    ref = image_server.image_reference
    created = client.create_template(TemplateCreateRequest(template_id="Py-Trixie", spec=spec(ref)))
    try:
        assert created.template_id == "py-trixie" and created.scope == "team"
        assert created.spec.main_container.image == ref
        assert client.wait_template_ready("py-trixie", timeout_sec=10).template_id == "py-trixie"
        ids = [t.template_id for t in client.list_templates()]
        assert {"default", "coding-agent", "py-trixie"} <= set(ids)
        got = client.get_template("py-trixie")
        assert got.spec.main_container.resources.memory == "1Gi"
        updated = client.update_template("py-trixie", TemplateUpdateRequest(spec=spec(ref, memory="2Gi")))
        assert updated.spec.main_container.resources.memory == "2Gi"
    finally:
        client.delete_template("py-trixie")
    assert "py-trixie" not in [t.template_id for t in client.list_templates()]


def test_the_builtin_templates_are_listed_and_read_only(image_http):
    listed = image_http.get("/api/v1/templates").json()["data"]
    builtins = {t["template_id"]: t for t in listed["templates"] if t["scope"] == "public"}
    assert set(builtins) == {"default", "coding-agent"} and listed["count"] == len(listed["templates"])
    assert builtins["default"]["spec"]["mainContainer"]["resources"]["ephemeralStorage"] == "8Gi"
    assert image_http.delete("/api/v1/templates/default").status_code == 404
    body = {"spec": {"mainContainer": {"image": "x@sha256:" + "0" * 64, "resources": {"memory": "1Gi"}}}}
    assert image_http.put("/api/v1/templates/default", json=body).status_code == 404


def bad_create(http, template_id: str, image: str, **resources):
    body = {"template_id": template_id,
            "spec": {"mainContainer": {"image": image, "resources": {"memory": "1Gi", **resources}}}}
    reply = http.post("/api/v1/templates", json=body)
    assert reply.json()["success"] is False and set(reply.json()["error"]) >= {"code", "message"}
    return reply.status_code, reply.json()["error"]


def test_a_mutable_tag_an_unknown_digest_and_bad_fields_are_refused_clearly(image_http, image_server):
    status, error = bad_create(image_http, "tagged", "debian:trixie")
    assert (status, error["code"]) == (400, "bad_request") and "not pinned by digest" in error["message"]
    status, error = bad_create(image_http, "unknown", "debian@sha256:" + "ab" * 32)
    assert (status, error["code"]) == (404, "not_found") and "not in the image store" in error["message"]
    status, error = bad_create(image_http, "cpu", image_server.image_reference, cpu="2")
    assert status == 400 and "cpu is not supported" in error["message"]
    status, error = bad_create(image_http, "small", image_server.image_reference, ephemeralStorage="10Mi")
    assert status == 400 and "between 300Mi and 1Ti" in error["message"]
    status, error = bad_create(image_http, "bad/id", image_server.image_reference)
    assert status == 400
    ids = [t["template_id"] for t in image_http.get("/api/v1/templates").json()["data"]["templates"]]
    assert not {"tagged", "unknown", "cpu", "small"} & set(ids)


def test_a_second_create_of_the_same_id_is_a_conflict(image_http, image_server):
    body = {"template_id": "twice", "spec": {"mainContainer": {
        "image": image_server.image_reference, "resources": {"memory": "1Gi"}}}}
    assert image_http.post("/api/v1/templates", json=body).status_code == 201
    try:
        again = image_http.post("/api/v1/templates", json=body)
        assert (again.status_code, again.json()["error"]["code"]) == (409, "conflict")
    finally:
        image_http.delete("/api/v1/templates/twice")


def test_claiming_an_unknown_template_is_not_found(image_http):
    reply = image_http.post("/api/v1/sandboxes", json={"template": "no-such-template"})
    assert reply.status_code == 404 and reply.json()["error"]["code"] == "not_found"


def test_coding_agent_before_its_build_runs_on_the_host_and_says_so(image_http, image_server):
    template = image_http.get("/api/v1/templates/coding-agent").json()["data"]
    assert template["spec"]["mainContainer"]["image"] == "" and "status" not in template
    sandbox_id = image_http.post("/api/v1/sandboxes", json={"template": "coding-agent"}).json()["data"]["sandbox_id"]
    try:
        out = image_http.post(f"/api/v1/sandboxes/{sandbox_id}/contexts", json={
            "type": "cmd", "cmd": {"command": ["sh", "-c", "grep CODENAME /etc/os-release; echo $HOME"]},
            "wait_until_done": True}).json()["data"]["stdout"]
        assert out == "VERSION_CODENAME=bookworm\n/workspace\n"
        log = image_server.log_path.read_text()
        assert f"sandbox {sandbox_id}: template 'coding-agent' has no image yet" in log
    finally:
        image_http.delete(f"/api/v1/sandboxes/{sandbox_id}")


def test_a_teams_templates_are_its_own(image_server):
    """Team alpha's template is listed, read and claimed by alpha only; beta sees the builtins."""
    import httpx

    from tests.helpers import ok

    def http_for(token, team=None):
        headers = {"Authorization": f"Bearer {token}", **({"X-Team-ID": team} if team else {})}
        return httpx.Client(base_url=image_server.url, headers=headers, timeout=30.0)

    keys = {}
    with http_for(TOKEN) as admin:
        for name in ("alpha", "beta"):
            team = ok(admin.post("/teams", json={"name": f"tpl-{name}", "home_region_id": "local"}), 201)["id"]
            with http_for(TOKEN, team) as as_team:
                keys[name] = ok(as_team.post("/api-keys", json={"name": name, "roles": ["admin"]}), 201)["key"]
    body = {"template_id": "team-only", "spec": {"mainContainer": {
        "image": image_server.image_reference, "resources": {"memory": "1Gi"}}}}
    with http_for(keys["alpha"]) as alpha, http_for(keys["beta"]) as beta:
        ok(alpha.post("/api/v1/templates", json=body), 201)
        try:
            assert "team-only" in [t["template_id"] for t in ok(alpha.get("/api/v1/templates"), 200)["templates"]]
            assert "team-only" not in [t["template_id"] for t in ok(beta.get("/api/v1/templates"), 200)["templates"]]
            assert beta.get("/api/v1/templates/team-only").status_code == 404
            assert beta.post("/api/v1/sandboxes", json={"template": "team-only"}).status_code == 404
            assert beta.delete("/api/v1/templates/team-only").status_code == 404
            sandbox = ok(alpha.post("/api/v1/sandboxes", json={"template": "team-only"}), 201)["sandbox_id"]
            ok(alpha.delete(f"/api/v1/sandboxes/{sandbox}"), 202)
        finally:
            alpha.delete("/api/v1/templates/team-only")
