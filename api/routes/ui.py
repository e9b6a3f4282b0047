"""The browser console under ``/ui/``: static files shipped in the package (api/ui/).

No auth here: the page holds no data and asks for the token itself; every call it makes
goes to the authenticated API. Every response carries a strict Content-Security-Policy:
scripts only from this server (no inline script, no eval), no frames, no foreign
connections. xterm.js creates ``<style>`` elements at run time, so the page gets a fresh
style nonce per load (``csp-shim.js`` stamps it on them) instead of ``'unsafe-inline'``.
"""
from __future__ import annotations

import secrets
from functools import lru_cache
from pathlib import Path

from sanic import Blueprint, HTTPResponse, Request
from sanic.response import redirect

from ..errors import envelope

console = Blueprint("ui", url_prefix="/ui")
root = Blueprint("ui_root")  # what a browser asks of the bare address

UI_DIR = Path(__file__).resolve().parent.parent / "ui"
INDEX = "index.html"
NONCE_SLOT = "__STYLE_NONCE__"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".mjs": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
                 ".svg": "image/svg+xml", ".txt": "text/plain; charset=utf-8", "": "text/plain; charset=utf-8"}
SERVED_SUFFIXES = frozenset(CONTENT_TYPES) - {""}


def content_security_policy(style_nonce: str) -> str:
    # connect-src 'self' also covers ws:// and wss:// to this host (CSP level 3).
    return ("default-src 'none'; script-src 'self'; "
            f"style-src 'self' 'nonce-{style_nonce}'; style-src-attr 'none'; "
            "img-src 'self' data:; font-src 'self'; connect-src 'self'; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


@lru_cache(maxsize=1)
def shipped_files() -> dict[str, bytes]:
    """Relative path → bytes of every servable file; a lookup here cannot leave UI_DIR."""
    files = {}
    for path in sorted(UI_DIR.rglob("*")):
        if path.is_file() and (path.suffix in SERVED_SUFFIXES or path.name.startswith("LICENSE")):
            files[path.relative_to(UI_DIR).as_posix()] = path.read_bytes()
    return files


def _headers(style_nonce: str) -> dict[str, str]:
    return {"Content-Security-Policy": content_security_policy(style_nonce),
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY", "Cache-Control": "no-cache"}


@console.get("", ctx_action="console", strict_slashes=True)
async def console_root(request: Request):
    return redirect("/ui/", status=308)


@console.get("/", ctx_action="console", strict_slashes=True)
async def console_index(request: Request):
    nonce = secrets.token_urlsafe(18)
    page = shipped_files()[INDEX].replace(NONCE_SLOT.encode(), nonce.encode())
    return HTTPResponse(page, headers=_headers(nonce), content_type=CONTENT_TYPES[".html"])


@console.get("/<path:path>", ctx_action="console")
async def console_file(request: Request, path: str):
    body = shipped_files().get(path)
    if body is None or path == INDEX:
        return envelope(404, "not_found", "no such console file")
    suffix = Path(path).suffix
    return HTTPResponse(body, headers=_headers(secrets.token_urlsafe(18)),
                        content_type=CONTENT_TYPES.get(suffix, CONTENT_TYPES[""]))


@root.get("/", ctx_action="console")
async def server_root(request: Request):
    """The address the server prints is what people open: the console is what they want."""
    return redirect("/ui/", status=302)


@root.get("/favicon.ico", ctx_action="console")
async def favicon(request: Request):
    return redirect("/ui/favicon.svg", status=301)


bp = Blueprint.group(console, root)
