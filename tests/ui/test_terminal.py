"""The terminal view on a PTY session: typing, resize, reload and a server restart."""
from __future__ import annotations

import re

from tests.helpers import create_session, ok, spath, wait_for

from .conftest import open_console, screenshot

BASH = ["bash", "--noprofile", "--norc"]


def bash_session(api, sandbox_id: str) -> str:
    spec = {"command": BASH, "env": {"PS1": "$ ", "HOME": "/tmp"}, "io": {"mode": "pty"},
            "lifecycle": {"stop_grace_period_seconds": 1}}  # an interactive bash ignores SIGTERM
    return create_session(api, sandbox_id, spec)["id"]


def rows(page) -> list[str]:
    return page.eval_on_selector_all("#terminal .xterm-rows > div", "divs => divs.map(d => d.textContent)")


def type_line(page, text: str) -> None:
    page.locator("#terminal").click()
    page.keyboard.type(text)
    page.keyboard.press("Enter")


def wait_row(page, pattern: str, timeout=15):
    regex = re.compile(pattern)
    return wait_for(lambda: [r for r in rows(page) if regex.fullmatch(r.strip())], timeout=timeout,
                    describe=lambda: "\n".join(rows(page)))


def test_typing_in_the_terminal_shows_the_output_in_its_rows(page, ui_server, api, sandbox, tmp_path):
    sid = bash_session(api, sandbox)
    open_console(page, ui_server, f"#/sandboxes/{sandbox}/sessions/{sid}")
    page.wait_for_selector("#term-status[data-state=live]")
    type_line(page, "echo hello-browser")
    assert len(wait_row(page, "hello-browser")) == 1
    screenshot(page, tmp_path, "terminal")


def size(page) -> tuple[int, int]:
    element = page.locator("#term-size")
    return int(element.get_attribute("data-rows")), int(element.get_attribute("data-cols"))


def test_resizing_the_viewport_resizes_the_pty_that_stty_reports(page, ui_server, api, sandbox):
    sid = bash_session(api, sandbox)
    open_console(page, ui_server, f"#/sandboxes/{sandbox}/sessions/{sid}")
    page.wait_for_selector("#term-status[data-state=live]")
    before = size(page)
    type_line(page, "stty size")
    wait_row(page, f"{before[0]} {before[1]}")

    page.set_viewport_size({"width": 760, "height": 480})
    after = wait_for(lambda: size(page) != before and size(page), describe=lambda: size(page))
    assert after[0] < before[0] and after[1] < before[1], (before, after)
    type_line(page, "stty size")
    wait_row(page, f"{after[0]} {after[1]}")


def test_a_reload_replays_the_earlier_output_once_and_typing_still_works(page, ui_server, api, sandbox):
    sid = bash_session(api, sandbox)
    open_console(page, ui_server, f"#/sandboxes/{sandbox}/sessions/{sid}")
    page.wait_for_selector("#term-status[data-state=live]")
    type_line(page, "echo hello-browser")
    wait_row(page, "hello-browser")

    page.reload()
    page.wait_for_selector("#term-status[data-state=live]")
    wait_row(page, r"\$ echo hello-browser")
    assert len(wait_row(page, "hello-browser")) == 1, rows(page)
    assert len(wait_row(page, r"\$ echo hello-browser")) == 1, rows(page)
    type_line(page, "echo after-reload")
    assert len(wait_row(page, "after-reload")) == 1


def test_the_terminal_reconnects_across_a_server_restart_without_duplicate_lines(
        page, ui_server, api, sandbox, tmp_path):
    sid = bash_session(api, sandbox)
    open_console(page, ui_server, f"#/sandboxes/{sandbox}/sessions/{sid}")
    page.wait_for_selector("#term-status[data-state=live]")
    type_line(page, "echo hello-browser")
    wait_row(page, "hello-browser")

    ui_server.kill()  # a crash: the runtime is replaced and the session recovers a new attempt
    page.wait_for_selector("#term-status[data-state=reconnecting]")
    ui_server.restart()
    page.wait_for_selector("#term-status[data-state=live]", timeout=30_000)
    banner = page.locator("#banner .banner-text")
    wait_for(lambda: re.search(r"attempt #2 \(att-\S+, runtime_recovered\); runtime generation 1 → 2",
                               banner.text_content()), describe=banner.text_content)

    wait_row(page, r"\$")  # the recovered bash's prompt, on a line of its own
    type_line(page, "echo after-restart")
    assert len(wait_row(page, "after-restart")) == 1, rows(page)
    assert len(wait_row(page, "hello-browser")) == 1, rows(page)
    assert len(wait_row(page, r"\$ echo hello-browser")) == 1, rows(page)
    screenshot(page, tmp_path, "terminal-after-restart")


def test_a_new_attempt_raises_the_banner_and_gets_the_input_and_the_window_size(page, ui_server, api, sandbox):
    sid = bash_session(api, sandbox)
    open_console(page, ui_server, f"#/sandboxes/{sandbox}/sessions/{sid}")
    page.wait_for_selector("#term-status[data-state=live]")
    wait_row(page, r"\$")
    assert page.locator("#banner").text_content() == ""  # the first load's history is not news

    ok(api.post(spath(sandbox, sid, "/attempts"), json={"replace_current": True}), 201)
    banner = page.locator("#banner .banner-text")
    wait_for(lambda: re.search(r"attempt #2 \(att-\S+, attempt_created\); runtime generation 1\.",
                               banner.text_content() if banner.count() else ""),
             describe=lambda: page.locator("#banner").text_content())
    rows_now, cols_now = size(page)
    assert (rows_now, cols_now) != (24, 80)
    type_line(page, "stty size")  # the new PTY starts at the spec's 24x80; the console resized it
    wait_row(page, f"{rows_now} {cols_now}")
