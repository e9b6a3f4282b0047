"""Calls the rootfs snapshot tests share: claim, run a command, write and read a file, snapshot."""
from __future__ import annotations

import os

import httpx

from tests.helpers import ok

SB = "/api/v1/sandboxes"


def claim(http: httpx.Client, template: str = "default", snapshot_id: str | None = None, **config) -> str:
    body = {"template": template, **({"config": config} if config else {})}
    if snapshot_id:
        body["snapshot_id"] = snapshot_id
    return ok(http.post(SB, json=body), 201)["sandbox_id"]


def run(http: httpx.Client, sb: str, script: str) -> str:
    """``sh -c script`` in the sandbox, waited for; its output (the command must succeed)."""
    data = ok(http.post(f"{SB}/{sb}/contexts", json={"type": "cmd", "cmd": {"command": ["sh", "-c", script]},
                                                       "wait_until_done": True}), 201)
    assert data.get("exit_code") == 0, data
    return data.get("stdout", data.get("output_raw", ""))


def write(http: httpx.Client, sb: str, path: str, content: bytes) -> None:
    ok(http.post(f"{SB}/{sb}/files", params={"path": path}, content=content), 200)


def read(http: httpx.Client, sb: str, path: str) -> bytes:
    resp = http.get(f"{SB}/{sb}/files", params={"path": path})
    assert resp.status_code == 200, resp.text
    return resp.content


def snapshot(http: httpx.Client, sb: str, **body) -> dict:
    return ok(http.post(f"{SB}/{sb}/snapshots", json=body or None), 201)


def pool_used(data_dir) -> int:
    """Bytes the disk pool's filesystem has in use (blocks shared by reflinks counted once)."""
    stats = os.statvfs(os.path.join(data_dir, "disk-pool"))
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize
