"""The console signed in with a team's API key (instead of the server's token), in a real browser:
it lists only that team's sandboxes, claims into that team, and a session's log arrives over the
WebSocket that carries the key as its bearer subprotocol."""
from __future__ import annotations

from tests.conftest import make_http, release_sandbox
from tests.helpers import claim_sandbox, create_session, ok, wait_for

from .conftest import open_console


def team_key(api, name: str, role: str = "developer") -> tuple[str, str]:
    team = ok(api.post("/teams", json={"name": name, "home_region_id": "local"}), 201)["id"]
    key = ok(api.post("/api-keys", headers={"X-Team-ID": team}, json={"name": f"{name}-console", "roles": [role]}),
             201)["key"]
    return team, key


def test_the_console_works_with_a_team_key_and_shows_only_its_team(page, ui_server, api):
    team, key = team_key(api, "console-alpha")
    _other_team, other_key = team_key(api, "console-beta")
    with make_http(ui_server.url, key) as mine, make_http(ui_server.url, other_key) as theirs:
        own = claim_sandbox(mine)
        foreign = claim_sandbox(theirs)
        platform = claim_sandbox(api)
        try:
            sid = create_session(mine, own, {"command": ["sh", "-c", "echo from the team; exec cat"]})["id"]
            open_console(page, ui_server, token=key)
            page.wait_for_selector(f"#sandboxes tr[data-sandbox='{own}']")
            ids = set(page.locator("#sandboxes tr[data-sandbox]").evaluate_all(
                "rows => rows.map(r => r.dataset.sandbox)"))
            assert own in ids and foreign not in ids and platform not in ids

            page.click("#claim-form button[type=submit]")
            claimed = wait_for(lambda: {sb["id"] for sb in ok(mine.get("/api/v1/sandboxes"), 200)["sandboxes"]} - {own})
            new = claimed.pop()
            assert ok(api.get(f"/api/v1/sandboxes/{new}"), 200)["team_id"] == team
            release_sandbox(mine, new)

            page.goto(f"{ui_server.url}/ui/#/sandboxes/{own}/sessions/{sid}")
            page.wait_for_selector("#log .line.stdout .text >> text=from the team")
        finally:
            for client, sandbox in ((mine, own), (theirs, foreign), (api, platform)):
                release_sandbox(client, sandbox)
