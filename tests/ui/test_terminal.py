"""The terminal view on a PTY session: typing, resize, reload and a server restart."""
from __future__ import annotations

import re

from tests.helpers import create_session, wait_for

from .conftest import open_console, screenshot

BASH = ["bash", "--noprofile", "--norc"]


def bash_session(api, sandbox_id: str) -> str:
    spec = {"command": BASH, "env": {"PS1": "$ ", "HOME": "/tmp"}, "io": {"mode": "pty"}}
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
