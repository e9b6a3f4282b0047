"""``sessionctl sandbox expose|logs|events`` against a real server with a namespace per sandbox."""
from __future__ import annotations

import subprocess
import time

import httpx

from tests.client.test_cli import cli_env, sessionctl
from tests.helpers import create_session, ok, wait_exited, wait_for


def test_expose_prints_a_url_that_serves_the_command(server, http, sandboxes):
    sb = sandboxes()
    ok(http.post(f"/api/v1/sandboxes/{sb}/files", params={"path": "/workspace/index.html"}, content=b"exposed!"), 200)
    done = sessionctl(server, "sandbox", "expose", sb, "8093", "--", "python3", "-m", "http.server", "8093")
    assert done.returncode == 0, done.stderr
    url = done.stdout.strip()
    assert url == f"http://{sb}--p8093.localhost:{server.port}"
    answer = httpx.get(f"{server.url}/", headers={"Host": url.split("//", 1)[1]}, timeout=30)
    assert answer.status_code == 200 and answer.text == "exposed!"
    path_form = sessionctl(server, "sandbox", "expose", sb, "8093", "--path-form", "--", "python3", "-m",
                           "http.server", "8093").stdout.strip()
    assert httpx.get(path_form, timeout=30).text == "exposed!"
    services = ok(http.get(f"/api/v1/sandboxes/{sb}/services"), 200)["services"]
    assert [s["id"] for s in services] == ["p8093"]  # exposing again replaced, not duplicated


def test_logs_and_events_print_a_line_each_and_follow_streams(server, http, sandboxes):
    sb = sandboxes()
    sid = create_session(http, sb, {"command": ["sh", "-c", "echo first; echo second >&2"]})["id"]
    wait_exited(http, sb, sid)
    logs = sessionctl(server, "sandbox", "logs", sb)
    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.splitlines()
    assert lines[0].endswith(f"{sid} first") and lines[1].endswith(f"{sid} [stderr] second"), lines
    events = sessionctl(server, "sandbox", "events", sb, "--type", "lifecycle").stdout.splitlines()
    assert "sandbox.claimed" in events[0], events
    follower = subprocess.Popen(["sessionctl", "sandbox", "logs", sb, "--follow"], env=cli_env(server),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        create_session(http, sb, {"command": ["sh", "-c", "echo followed"]})
        seen = []
        wait_for(lambda: seen.append(follower.stdout.readline()) or "followed" in seen[-1], timeout=20)
    finally:
        follower.terminate()
        follower.wait(10)
