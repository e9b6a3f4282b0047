"""The console never undoes a pause: viewing a paused or pausing sandbox shows it as such,
with a resume button, and makes no session call (each one would resume it). Also what the
sandbox page shows (resource usage, network policy), the journal's events, ISO 8601 times
and a 400 px window."""
from __future__ import annotations

import re
import threading

from tests.helpers import create_session, ok, spath, wait_for

from .conftest import open_console, screenshot

GRACE_S = 4  # a stop that takes this long holds the pause's barrier open: the window we look in
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def sandbox_record(api, sandbox):
    return ok(api.get(f"/api/v1/sandboxes/{sandbox}"), 200)


def test_opening_the_sessions_page_during_a_pause_leaves_it_paused_with_the_same_generation(
        page, ui_server, api, sandbox, tmp_path):
    stubborn = create_session(api, sandbox, {"command": ["sh", "-c", "trap '' TERM; exec sleep 300"],
                                             "lifecycle": {"stop_grace_period_seconds": GRACE_S}})["id"]
    create_session(api, sandbox, {"command": ["sleep", "300"]})
    generation = sandbox_record(api, sandbox)["runtime_generation"]
    session_calls = []
    page.on("request", lambda r: session_calls.append(r.url) if f"/sandboxes/{sandbox}/sessions" in r.url else None)

    open_console(page, ui_server)
    row = page.locator(f"#sandboxes tr[data-sandbox='{sandbox}']")
    row.wait_for()
    stopping = threading.Thread(target=lambda: api.put(spath(sandbox, stubborn, "/desired-state"),
                                                       json={"state": "stopped"}, timeout=30))
    stopping.start()  # in flight: the pause waits for it (its barrier drains calls first)
    try:
        wait_for(lambda: ok(api.get(spath(sandbox, stubborn)), 200)["phase"] == "stopping")
        row.locator(".act-pause").click()
        page.wait_for_selector("#notice >> text=/pausing .* s/")  # progress, while it lasts
        session_calls.clear()
        page.goto(f"{ui_server.url}/ui/#/sandboxes/{sandbox}")  # within the pause
        page.wait_for_selector("#asleep[data-status='pausing']")
        assert sandbox_record(api, sandbox)["status"] == "running"  # still pausing, server side
    finally:
        stopping.join(30)
    wait_for(lambda: sandbox_record(api, sandbox)["status"] == "paused", timeout=30)
    page.wait_for_selector("#asleep[data-status='paused'] #resume-sandbox")
    page.wait_for_selector("#notice >> text=/pause .*: done in/")
    page.wait_for_timeout(4500)  # two more refreshes of the page: none of them may wake it
    record = sandbox_record(api, sandbox)
    assert (record["status"], record["runtime_generation"]) == ("paused", generation), record
    assert session_calls == [], session_calls
    assert page.locator("#info-status").text_content() == f"paused, generation {generation}"
    screenshot(page, tmp_path, "paused-sandbox")

    page.goto(f"{ui_server.url}/ui/#/sandboxes/{sandbox}/sessions/{stubborn}")  # a session's own page
    page.wait_for_selector("#asleep[data-status='paused']")
    page.goto(f"{ui_server.url}/ui/#/sandboxes/{sandbox}/sessions/{stubborn}/history")
    page.wait_for_selector("#asleep[data-status='paused']")
    page.wait_for_timeout(2500)
    assert sandbox_record(api, sandbox)["runtime_generation"] == generation and session_calls == []

    page.click("#resume-sandbox")  # resuming is the user's own choice
    page.wait_for_selector("#timeline li.attempt")  # the history mounts once it runs again
    assert sandbox_record(api, sandbox)["runtime_generation"] == generation + 1


def test_the_sandbox_page_shows_resource_usage_and_the_network_policy(page, ui_server, api, sandbox):
    create_session(api, sandbox, {"command": ["sleep", "300"]})
    open_console(page, ui_server, f"#/sandboxes/{sandbox}")
    page.wait_for_selector(f"#sessions tr td.phase.running")
    assert re.fullmatch(r"\d+\.\d MiB", page.locator("#info-workspace").text_content())
    assert page.locator("#info-network").text_content().startswith(
        ok(api.get(f"/api/v1/sandboxes/{sandbox}/network"), 200)["mode"])
    assert page.locator("#info-status").text_content() == "running, generation 1"


def test_the_history_lists_the_journal_events_newest_page_first_with_iso_times(page, ui_server, api, sandbox):
    script = "for i in $(seq 1 60); do echo line-$i; sleep 0.02; done"  # one output event a line
    sid = create_session(api, sandbox, {"command": ["sh", "-c", script]})["id"]
    wait_for(lambda: ok(api.get(spath(sandbox, sid)), 200)["phase"] == "exited", timeout=20)
    open_console(page, ui_server, f"#/sandboxes/{sandbox}/sessions/{sid}/history")
    page.wait_for_selector("#journal-events tr.attempt-exited")  # the newest page holds the exit
    rows = page.locator("#journal-events tbody tr")
    assert rows.count() == 50
    seqs = [int(s) for s in page.locator("#journal-events td.seq").all_text_contents()]
    latest = ok(api.get(spath(sandbox, sid)), 200)["cursor"]["latest"]
    assert seqs == list(range(latest - 49, latest + 1))
    assert 'stdout "line-60\\n"' in page.locator("#journal-events").text_content()
    assert all(ISO.match(t) for t in page.locator("#journal-events td.when").all_text_contents())
    page.click("#journal-older")
    page.wait_for_selector("#journal-events tr.session-created")
    assert int(page.locator("#journal-events td.seq").first.text_content()) == 1
    times = page.locator("#timeline .times").first.text_content()
    assert re.search(r"start \d{4}-\d\d-\d\dT[\d:.]+Z", times), times


def test_a_400_pixel_window_fits_the_header_and_the_pages(page, ui_server, api, sandbox, tmp_path):
    sid = create_session(api, sandbox, {"command": ["sleep", "300"], "name": "a-rather-long-session-name"})["id"]
    page.set_viewport_size({"width": 400, "height": 800})
    for route, ready in (("#/", "#sandboxes"), (f"#/sandboxes/{sandbox}", "#sessions td.phase.running"),
                         (f"#/sandboxes/{sandbox}/sessions/{sid}/history", "#journal-events")):
        open_console(page, ui_server, route)
        page.wait_for_selector(ready)
        widths = page.evaluate("""() => ({page: document.documentElement.scrollWidth,
            header: document.getElementById('top').scrollWidth, headerBox: document.getElementById('top').clientWidth})""")
        assert widths["page"] <= 400 and widths["header"] <= widths["headerBox"], (route, widths)
    screenshot(page, tmp_path, "narrow-history")
