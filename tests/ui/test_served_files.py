"""The console's files as served and as packaged: a strict CSP, nothing outside api/ui/,
the vendored xterm.js exactly as pinned, and all of it inside a plain wheel."""
from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx

from tests.serverproc import REPO_ROOT

UI = REPO_ROOT / "api" / "ui"


def directives(csp: str) -> dict[str, str]:
    return {part.split()[0]: part.strip() for part in csp.split(";") if part.strip()}


def test_the_page_is_served_without_auth_under_a_strict_content_security_policy(server):
    with httpx.Client(base_url=server.url) as client:  # no token: the page itself holds no data
        assert client.get("/ui").status_code == 308
        first, second = client.get("/ui/"), client.get("/ui/")
    assert first.status_code == 200 and first.headers["content-type"].startswith("text/html")
    csp = directives(first.headers["content-security-policy"])
    assert csp["default-src"] == "default-src 'none'"
    assert csp["script-src"] == "script-src 'self'"
    assert csp["frame-ancestors"] == "frame-ancestors 'none'"
    assert "unsafe" not in first.headers["content-security-policy"]
    nonce = re.search(r"'nonce-([^']+)'", csp["style-src"]).group(1)
    assert f'<meta name="style-nonce" content="{nonce}">' in first.text
    assert nonce not in second.text  # a fresh nonce per load
    assert first.headers["x-content-type-options"] == "nosniff"


def test_only_the_shipped_console_files_are_served(server):
    with httpx.Client(base_url=server.url) as client:
        module = client.get("/ui/vendor/xterm/xterm.mjs")
        assert module.status_code == 200 and module.headers["content-type"].startswith("text/javascript")
        assert client.get("/ui/vendor/xterm/LICENSE").text.startswith("Copyright (c)")
        for path in ("/ui/vendor/refresh.sh", "/ui/../api/app.py", "/ui/%2e%2e/api/app.py",
                     "/ui/js/../../routes/ui.py", "/ui/nope.js", "/ui/index.html"):
            refused = client.get(path)  # httpx folds "..": that one reaches /api/ and its 401
            assert refused.status_code in (401, 404) and "import" not in refused.text, (path, refused.status_code)


def test_the_vendored_xterm_files_match_their_recorded_checksums_and_pins():
    vendor = UI / "vendor"
    for line in (vendor / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest, name
    pins = dict(line.split() for line in (vendor / "PINS").read_text().splitlines()
                if line.strip() and not line.startswith("#"))
    assert set(pins) == {"@xterm/xterm", "@xterm/addon-fit"}
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", version) for version in pins.values()), pins
    assert "sourceMappingURL" not in (vendor / "xterm" / "xterm.mjs").read_text()


def test_a_plain_wheel_ships_every_console_file(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(tmp_path), str(REPO_ROOT)],
                           capture_output=True, text=True, timeout=180)
    assert built.returncode == 0, built.stderr
    wheel = next(Path(tmp_path).glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"session_supervisor/api/ui/{p.relative_to(UI).as_posix()}" for p in UI.rglob("*") if p.is_file()}
    assert shipped and shipped <= names, sorted(shipped - names)


def test_the_bare_address_leads_to_the_console_and_it_has_a_favicon(server):
    with httpx.Client(base_url=server.url) as client:  # no token, as a browser's first visit
        root = client.get("/")
        assert root.status_code == 302 and root.headers["location"] == "/ui/"
        assert client.get("/", follow_redirects=True).text.count('id="main"') == 1
        icon = client.get("/favicon.ico", follow_redirects=True)
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
        assert icon.text.startswith("<svg") and str(icon.url).endswith("/ui/favicon.svg")
        page = client.get("/ui/").text
    assert '<link rel="icon" href="favicon.svg"' in page  # so the browser never asks for /favicon.ico
