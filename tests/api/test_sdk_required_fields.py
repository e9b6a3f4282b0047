"""The fields each official SDK requires in the sandbox responses, checked on the wire.

The Go SDK (sandbox0-ai/sdk-go@e05d7af) cannot be vendored into the tests, so its required
fields are written down here from the contract: ``pod_name`` in the claim response and in
every Sandbox (Python requires ``runtime_id`` instead: both are sent), and ``expires_at`` /
``hard_expires_at`` present and non-null (a disabled deadline is ``0001-01-01T00:00:00Z``,
the one value all three SDKs parse). Python's own parse of the same responses runs too.
"""
from __future__ import annotations

from datetime import datetime, timezone

from sandbox0.apispec.models.sandbox_update_config import SandboxUpdateConfig
from sandbox0.apispec.models.sandbox_update_request import SandboxUpdateRequest

from tests.helpers import ok

NO_DEADLINE = "0001-01-01T00:00:00Z"
GO_REQUIRED = {
    "claim": ("sandbox_id", "status", "runtime_id", "pod_name", "template"),
    "sandbox": ("id", "template_id", "team_id", "status", "paused", "auto_resume", "runtime_id", "pod_name",
                "runtime_generation", "claimed_at", "created_at", "updated_at", "expires_at", "hard_expires_at"),
    "summary": ("id", "template_id", "status", "paused", "runtime_generation", "created_at", "updated_at",
                "expires_at", "hard_expires_at"),
    "refresh": ("sandbox_id", "expires_at", "hard_expires_at"),
}
DEADLINES = ("expires_at", "hard_expires_at")


def rfc3339(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def check(shape: str, data: dict) -> None:
    missing = [k for k in GO_REQUIRED[shape] if data.get(k) is None]
    assert not missing, f"{shape} lacks what the Go SDK requires: {missing} in {data}"
    for key in DEADLINES:
        if key in GO_REQUIRED[shape]:
            assert rfc3339(data[key]).tzinfo is not None, (shape, key, data[key])


def test_claim_get_list_status_and_refresh_carry_every_field_the_go_sdk_requires(http):
    claim = ok(http.post("/api/v1/sandboxes", json={"template": "default"}), 201)
    check("claim", claim)
    sb = claim["sandbox_id"]
    try:
        assert claim["pod_name"] == claim["runtime_id"]
        got = ok(http.get(f"/api/v1/sandboxes/{sb}"), 200)
        check("sandbox", got)
        assert (got["expires_at"], got["hard_expires_at"]) == (NO_DEADLINE, NO_DEADLINE)  # disabled
        listed = ok(http.get("/api/v1/sandboxes", params={"limit": 200}), 200)["sandboxes"]
        for summary in listed:
            check("summary", summary)
        status = ok(http.get(f"/api/v1/sandboxes/{sb}/status"), 200)
        assert status["pod_name"] == got["pod_name"] and status["expires_at"] == NO_DEADLINE
        refreshed = ok(http.post(f"/api/v1/sandboxes/{sb}/refresh", json={}), 200)
        check("refresh", refreshed)
        updated = ok(http.put(f"/api/v1/sandboxes/{sb}", json={"config": {"ttl": 600, "hard_ttl": 900}}), 200)
        check("sandbox", updated)
        assert rfc3339(updated["expires_at"]) > datetime.now(timezone.utc)  # armed deadlines are real times
        paused = ok(http.post(f"/api/v1/sandboxes/{sb}/pause", json={}), 200)
        assert paused["paused"] is True
        while_paused = ok(http.get(f"/api/v1/sandboxes/{sb}"), 200)
        check("sandbox", while_paused)
        assert while_paused["pod_name"] == while_paused["runtime_id"] == ""
    finally:
        http.delete(f"/api/v1/sandboxes/{sb}")


def test_the_python_sdk_parses_a_disabled_deadline_and_an_armed_one(sdk):
    sb = sdk.sandboxes.claim("default")
    try:
        got = sdk.sandboxes.get(sb.id)
        assert got.expires_at == datetime(1, 1, 1, tzinfo=timezone.utc) == got.hard_expires_at
        assert got.additional_properties["pod_name"] == got.runtime_id
        refreshed = sdk.sandboxes.refresh(sb.id)
        assert refreshed.sandbox_id == sb.id and refreshed.expires_at.year >= 1
        updated = sdk.sandboxes.update(sb.id, SandboxUpdateRequest(config=SandboxUpdateConfig(ttl=600)))
        assert updated.expires_at > datetime.now(timezone.utc)
        assert sdk.sandboxes.list()  # the summaries parse too
    finally:
        sdk.sandboxes.delete(sb.id)
