"""The console's other views in a real browser: sign-in, sandboxes, sessions, pipe log, history."""
from __future__ import annotations

import base64
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.helpers import TOKEN, create_session, get_session, ok, spath, wait_for

from .conftest import open_console, screenshot


def test_without_the_token_the_page_prompts_and_the_api_answers_401(page, ui_server):
    statuses = []
    page.on("response", lambda r: statuses.append((r.url, r.status)) if "/api/v1/" in r.url else None)
    page.goto(f"{ui_server.url}/ui/")
    page.wait_for_selector("#token-form")
    assert (f"{ui_server.url}/api/v1/sandboxes?limit=1", 401) in statuses, statuses

    page.fill("#token-input", "not-the-token")
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("#token-form >> text=the server refused this token")

    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("#sandboxes")
    assert statuses[-1][1] == 200, statuses


def test_a_direct_link_opened_without_the_token_asks_for_it_then_opens_that_session(page, ui_server, api, sandbox):
    sid = create_session(api, sandbox, {"command": ["sh", "-c", "echo linked; exec cat"]})["id"]
    page.goto(f"{ui_server.url}/ui/#/sandboxes/{sandbox}/sessions/{sid}")
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("#log .line.stdout .text >> text=linked")


def test_the_token_in_the_fragment_is_kept_out_of_the_address_bar_and_of_every_request(page, ui_server, sandbox):
    requested = []
    page.on("request", lambda r: requested.append(r.url))
    open_console(page, ui_server)
    page.wait_for_selector(f"#sandboxes tr[data-sandbox='{sandbox}']")
    assert "token" not in page.url
    assert requested and not [url for url in requested if TOKEN in url], requested


def test_the_sandbox_list_shows_status_generation_and_session_count(page, ui_server, api, sandbox):
    create_session(api, sandbox, {"command": ["sleep", "60"]})
    open_console(page, ui_server)
    row = page.locator(f"#sandboxes tr[data-sandbox='{sandbox}']")
    wait_for(lambda: row.locator("td.count").text_content() == "1", describe=row.text_content)
    cells = row.locator("td").all_text_contents()
    assert cells[1:4] == ["default", "running", "1"], cells


def test_sandboxes_are_claimed_paused_resumed_and_deleted_from_the_list(page, ui_server, api):
    open_console(page, ui_server)
    before = {sb["id"] for sb in ok(api.get("/api/v1/sandboxes"), 200)["sandboxes"]}
    page.click("#claim-form button[type=submit]")
    claimed = wait_for(lambda: {sb["id"] for sb in ok(api.get("/api/v1/sandboxes"), 200)["sandboxes"]} - before)
    sandbox = claimed.pop()
    row = page.locator(f"#sandboxes tr[data-sandbox='{sandbox}']")
    row.locator(".act-pause").click()
    wait_for(lambda: row.locator("td.status").text_content() == "paused", timeout=20, describe=row.text_content)
    assert row.locator("td.count").text_content() == "—"  # not asked: a session call would resume it
    assert ok(api.get(f"/api/v1/sandboxes/{sandbox}"), 200)["status"] == "paused"
    row.locator(".act-resume").click()
    wait_for(lambda: row.locator("td.status").text_content() == "running", timeout=20, describe=row.text_content)
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator(".act-delete").click()
    wait_for(lambda: api.get(f"/api/v1/sandboxes/{sandbox}").status_code == 404, timeout=20)
    wait_for(lambda: row.count() == 0, describe=lambda: page.locator("#sandboxes").text_content())


def test_sessions_are_created_and_driven_from_the_sessions_view(page, ui_server, api, sandbox):
    open_console(page, ui_server, f"#/sandboxes/{sandbox}")
    page.fill("#new-name", "from-the-browser")
    page.fill("#new-argv", '["sh", "-c", "exec sleep 60"]')
    page.select_option("#new-mode", "pipes")
    page.click("#create-form button[type=submit]")
    page.wait_for_selector("#log")
    sid = page.url.rsplit("/", 1)[1]
    assert get_session(api, sandbox, sid)["spec"]["name"] == "from-the-browser"

    page.goto(f"{ui_server.url}/ui/#/sandboxes/{sandbox}")
    row = page.locator(f"#sessions tr[data-session='{sid}']")
    row.locator(".act-replace-attempt").click()
    wait_for(lambda: row.locator("td.attempt").text_content() == "2", describe=row.text_content)
    row.locator(".act-stop").click()
    wait_for(lambda: row.locator("td.phase").text_content() == "stopped", describe=row.text_content)
    row.locator(".act-start").click()
    wait_for(lambda: row.locator("td.attempt").text_content() == "3", describe=row.text_content)
    row.locator("select.signal").select_option("KILL")
    row.locator(".act-signal").click()  # the list re-renders every 2 s; the choice survives
    wait_for(lambda: get_session(api, sandbox, sid)["attempt"].get("signal") == "KILL",
             describe=lambda: get_session(api, sandbox, sid))
    attempts = ok(api.get(spath(sandbox, sid, "/attempts")), 200)["attempts"]
    assert [a.get("reason") for a in attempts] == ["attempt_replaced", "desired_state_stopped", "killed"]


def test_a_pipe_session_log_shows_stdout_and_marked_stderr_and_takes_input(page, ui_server, api, sandbox):
    spec = {"command": ["sh", "-c", "echo to-stdout; echo to-stderr >&2; exec cat"]}
    sid = create_session(api, sandbox, spec)["id"]
    open_console(page, ui_server, f"#/sandboxes/{sandbox}/sessions/{sid}")
    page.wait_for_selector("#log .line.stdout .text >> text=to-stdout")
    stderr = page.wait_for_selector("#log .line.stderr .text >> text=to-stderr")
    assert stderr.evaluate("e => e.parentElement.querySelector('.tag').textContent") == "err"
    assert page.locator("#log .line.stderr >> text=to-stdout").count() == 0

    page.fill("#input-line", "typed-in-the-browser")
    page.press("#input-line", "Enter")
    page.wait_for_selector("#log .line.stdout .text >> text=typed-in-the-browser")
    page.click("#send-eof")
    page.wait_for_selector("#log .line.event >> text=attempt.exited (stopped, exit 0)")


def test_the_history_lists_every_attempt_of_a_session_restarted_twice_with_reasons(
        page, ui_server, api, sandbox, tmp_path):
    restart = {"policy": "on_failure", "max_restarts": 2, "initial_backoff_ms": 50, "max_backoff_ms": 100}
    spec = {"command": ["sh", "-c", "echo working; exit 3"], "lifecycle": {"restart": restart}}
    sid = create_session(api, sandbox, spec)["id"]
    wait_for(lambda: get_session(api, sandbox, sid)["phase"] == "failed", timeout=20,
             describe=lambda: get_session(api, sandbox, sid))
    attempts = ok(api.get(spath(sandbox, sid, "/attempts")), 200)["attempts"]
    assert get_session(api, sandbox, sid)["restart_count"] == 2 and len(attempts) == 3

    open_console(page, ui_server, f"#/sandboxes/{sandbox}/sessions/{sid}/history")
    items = page.locator("#timeline li.attempt")
    wait_for(lambda: items.count() == 3, describe=lambda: page.locator("#timeline").text_content())
    for item, attempt, started in zip(items.all(), attempts, ["created", "restart_policy", "restart_policy"]):
        text = item.text_content()
        assert item.get_attribute("data-attempt") == attempt["id"]
        assert f"Attempt #{attempt['number']}" in text and "generation 1" in text, text
        assert f"started: {started}" in text and "crashed, exit code 3" in text, text
        assert "attempt.starting" in text and "attempt.exited crashed" in text, text
    assert "session.backoff" in items.nth(0).text_content()
    assert "session.failed restart_limit_exceeded" in items.nth(2).text_content()
    screenshot(page, tmp_path, "history")


def test_the_history_offers_to_continue_from_the_retained_window_after_a_410(page, ui_server, api, sandbox):
    spec = {"command": ["head", "-c", "1500000", "/dev/zero"], "event_retention": {"max_bytes": 256 * 1024}}
    sid = create_session(api, sandbox, spec)["id"]
    wait_for(lambda: get_session(api, sandbox, sid)["phase"] == "exited", timeout=20)
    floor = earliest_retained(api, sandbox, sid)  # the background sweep may still raise it

    open_console(page, ui_server, f"#/sandboxes/{sandbox}/sessions/{sid}/history")
    page.wait_for_selector("#journal-events")  # the newest page first: it is retained
    page.click("#journal-oldest")  # from seq 1, which retention trimmed
    expired = page.wait_for_selector("#journal-expired").text_content()
    shown = int(re.search(r"the retained window is seq (\d+)–", expired).group(1))
    assert 1 < floor <= shown <= earliest_retained(api, sandbox, sid), expired
    page.click("#continue-from-earliest")
    window = page.wait_for_selector("#journal-window").text_content()
    assert re.fullmatch(rf"retained seq {shown}–\d+; showing seq {shown}–\d+", window), window
    page.wait_for_selector("#timeline li.attempt >> text=stopped, exit code 0")

    page.goto(f"{ui_server.url}/ui/#/sandboxes/{sandbox}/sessions/{sid}")  # its log starts at the window
    gap = page.wait_for_selector("#log .line.event >> text=were trimmed by retention").text_content()
    assert int(re.search(r"events up to seq (\d+) were trimmed", gap).group(1)) >= shown - 1, gap
    page.wait_for_selector("#log .line.event >> text=attempt.exited (stopped, exit 0)")


def earliest_retained(api, sandbox_id: str, session_id: str) -> int:
    return get_session(api, sandbox_id, session_id)["cursor"]["earliest"]


@pytest.fixture
def foreign_site():
    """Another origin on loopback: a blank page served by a server of the test's own."""
    class Blank(BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<!doctype html><title>elsewhere</title>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), Blank)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{site.server_address[1]}/"
    site.shutdown()
    site.server_close()
    thread.join(timeout=5)


OPEN_SOCKET = """async ([url, protocols]) => await new Promise((resolve) => {
  const ws = new WebSocket(url, protocols);
  ws.onopen = () => { resolve('open'); ws.close(); };
  ws.onclose = (closing) => resolve(`closed ${closing.code}`);
})"""


def test_a_websocket_opened_by_a_page_of_another_origin_is_refused(browser, ui_server, api, sandbox, foreign_site):
    sid = create_session(api, sandbox, {"command": ["cat"]})["id"]
    url = ui_server.url.replace("http://", "ws://") + spath(sandbox, sid, "/ws") + "?after=0"
    protocols = ["sessiond.v1", "sessiond.bearer." + base64.urlsafe_b64encode(TOKEN.encode()).decode().rstrip("=")]
    page = browser.new_page()
    messages = []
    page.on("console", lambda msg: messages.append(msg.text))
    page.goto(foreign_site)
    assert page.evaluate(OPEN_SOCKET, [url, protocols]) == "closed 1006"
    wait_for(lambda: [m for m in messages if "403" in m], describe=lambda: messages)

    page.goto(f"{ui_server.url}/ui/")  # the same socket from the console's own origin opens
    assert page.evaluate(OPEN_SOCKET, [url, protocols]) == "open"
    page.close()
