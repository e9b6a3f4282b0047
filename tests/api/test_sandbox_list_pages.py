"""A page of the sandbox list: each team's own sandboxes, newest first, with the team's count, as
sandboxes come and go; the platform key sees every team's. Unfiltered pages are read from the
registry's per-team order; filtered ones from every record: both must agree."""
from __future__ import annotations

import httpx

from tests.helpers import TOKEN, ok
from tests.serverproc import ServerProcess

U = "/api/v1/sandboxes"


def client(url: str, team: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {TOKEN}", **({"X-Team-ID": team} if team else {})}
    return httpx.Client(base_url=url, headers=headers, timeout=30.0)


def pages(http: httpx.Client, limit: int, **params) -> tuple[list[str], list[int]]:
    """Every id, page by page, and the count each page gave."""
    ids, counts, offset = [], [], 0
    while True:
        page = ok(http.get(U, params={"limit": limit, "offset": offset, **params}), 200)
        ids += [sb["id"] for sb in page["sandboxes"]]
        counts.append(page["count"])
        if not page["has_more"]:
            return ids, counts
        offset += limit


def test_each_team_pages_through_its_own_sandboxes_newest_first_as_they_come_and_go(tmp_path):
    with ServerProcess(tmp_path / "data", token=TOKEN, runtime="host") as srv, client(srv.url) as admin:
        teams = [ok(admin.post("/teams", json={"name": n, "home_region_id": "local"}), 201)["id"]
                 for n in ("alpha", "beta")]
        made: dict[str, list[str]] = {team: [] for team in teams}
        for n in range(7):  # interleaved, so neither team's sandboxes are contiguous in the node's order
            team = teams[n % 2]
            with client(srv.url, team) as http:
                made[team].append(ok(http.post(U, json={"template": "default"}), 201)["sandbox_id"])
        with client(srv.url, teams[0]) as alpha:
            ok(alpha.delete(f"{U}/{made[teams[0]].pop(1)}"), 202)  # gone from its team's pages at once
        for team in teams:
            with client(srv.url, team) as http:
                newest_first = list(reversed(made[team]))
                for limit in (1, 2, 50):
                    ids, counts = pages(http, limit)
                    assert ids == newest_first and set(counts) == {len(newest_first)}, (team, limit)
                # A filter reads every record: the same sandboxes in the same order.
                assert pages(http, 2, paused="false")[0] == newest_first
                assert ok(http.get(U, params={"offset": 10}), 200) == {"sandboxes": [], "count": len(newest_first),
                                                                        "has_more": False}
        everyone, counts = pages(admin, 3)
        assert sorted(everyone) == sorted(made[teams[0]] + made[teams[1]]) and set(counts) == {6}
        assert everyone == pages(admin, 3, paused="false")[0]
