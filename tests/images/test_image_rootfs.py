"""Sandboxes on an image's root filesystem: the image's system inside, a writable layer of their
own, nothing written reaching the image or another sandbox, and the layer kept across a pause."""
from __future__ import annotations

import uuid

import pytest
import sandbox0

from tests.helpers import TOKEN, wait_for

from .fixtures import os_release


def run(http, sandbox_id: str, script: str) -> str:
    reply = http.post(f"/api/v1/sandboxes/{sandbox_id}/contexts", json={
        "type": "cmd", "cmd": {"command": ["sh", "-c", script]}, "wait_until_done": True})
    assert reply.status_code == 201, reply.text
    data = reply.json()["data"]
    assert data["exit_code"] == 0, data
    return data.get("stdout", "")


@pytest.fixture(scope="module")
def template(image_server):
    import httpx
    with httpx.Client(base_url=image_server.url, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        name = f"rootfs-{uuid.uuid4().hex[:6]}"
        body = {"template_id": name, "spec": {"mainContainer": {
            "image": image_server.image_reference, "resources": {"memory": "512Mi"},
            "env": [{"name": "FROM_TEMPLATE", "value": "yes"}]}}}
        assert http.post("/api/v1/templates", json=body).status_code == 201
        yield name
        http.delete(f"/api/v1/templates/{name}")


def test_the_python_sdk_claims_a_template_and_runs_on_the_images_system(image_server, template):
    client = sandbox0.Client(token=TOKEN, base_url=image_server.url, timeout=30.0)
    sandbox = client.sandboxes.claim(template)
    try:
        result = sandbox.cmd("sh -c 'cat /etc/os-release; python3 --version; echo env=$FROM_TEMPLATE:$IMAGE_MARK'")
        release = os_release(result.stdout)
        assert release["VERSION_CODENAME"] == "trixie"  # the host is bookworm
        assert "Python 3.13." in result.stdout and "env=yes:trixie-test" in result.stdout
    finally:
        client.sandboxes.delete(sandbox.id)
        client.close()


def test_two_sandboxes_write_their_own_layers_and_the_image_stays_as_imported(image_http, image_server, template):
    from pathlib import Path
    rootfs = Path(image_server.data_dir) / "images" / image_server.image_reference.split(":")[-1] / "rootfs"
    first = image_http.post("/api/v1/sandboxes", json={"template": template}).json()["data"]["sandbox_id"]
    second = image_http.post("/api/v1/sandboxes", json={"template": template}).json()["data"]["sandbox_id"]
    try:
        run(image_http, first, "echo first > /etc/written-by-a && echo a >> /usr/share/marker && rm /etc/hostname")
        run(image_http, second, "echo second > /etc/written-by-b")
        assert run(image_http, second, "ls /etc/written-by-a /usr/share/marker 2>&1 || true").count("No such file") == 2
        assert run(image_http, second, "test -e /etc/hostname && echo present") == "present\n"
        assert not (rootfs / "etc" / "written-by-a").exists() and not (rootfs / "usr/share/marker").exists()
        assert (rootfs / "etc" / "hostname").exists()
        for sandbox_id in (first, second):
            assert image_http.post(f"/api/v1/sandboxes/{sandbox_id}/pause").status_code == 200
            assert image_http.post(f"/api/v1/sandboxes/{sandbox_id}/resume").status_code == 200
        assert run(image_http, first, "cat /etc/written-by-a /usr/share/marker; test -e /etc/hostname || echo gone") \
            == "first\na\ngone\n"
        assert run(image_http, second, "cat /etc/written-by-b; ls /etc/written-by-a 2>/dev/null || echo none") \
            == "second\nnone\n"
    finally:
        for sandbox_id in (first, second):
            image_http.delete(f"/api/v1/sandboxes/{sandbox_id}")


def test_the_image_itself_cannot_be_written_from_inside(image_http, template, image_server):
    sandbox_id = image_http.post("/api/v1/sandboxes", json={"template": template}).json()["data"]["sandbox_id"]
    try:
        out = run(image_http, sandbox_id, "grep -c ' / ' /proc/self/mountinfo; mount -o remount,rw / 2>&1 || "
                                          "echo refused; cat /proc/self/uid_map")
        assert "refused" in out
        assert out.split()[-3:-1] == ["0", out.split()[-2]] and out.split()[-1] == "1"  # one uid, mapped to root
    finally:
        image_http.delete(f"/api/v1/sandboxes/{sandbox_id}")
    wait_for(lambda: not (image_server.data_dir / "sandboxes" / sandbox_id).exists())  # unmounted, removed (after the 202)


def test_a_default_sandbox_next_to_them_still_runs_on_the_hosts_system(image_http):
    sandbox_id = image_http.post("/api/v1/sandboxes", json={"template": "default"}).json()["data"]["sandbox_id"]
    try:
        assert "bookworm" in run(image_http, sandbox_id, "cat /etc/os-release")
    finally:
        image_http.delete(f"/api/v1/sandboxes/{sandbox_id}")


def test_the_aerolvm_facade_runs_an_imported_image_it_names_and_records_any_other(image_server, image_http):
    made = image_http.post("/v1/sandboxes", json={"image": image_server.image_reference})
    assert made.status_code == 201, made.text
    on_image = made.json()["id"]
    by_name = image_http.post("/v1/sandboxes", json={"image": "trixie"}).json()["id"]
    other = image_http.post("/v1/sandboxes", json={"image": "ghcr.io/aerol-ai/ubuntu:22.04"}).json()["id"]
    try:
        assert "trixie" in run(image_http, on_image, "cat /etc/os-release")
        assert "trixie" in run(image_http, by_name, "cat /etc/os-release")
        assert "bookworm" in run(image_http, other, "cat /etc/os-release")  # recorded, host system
        assert image_http.get(f"/v1/sandboxes/{other}").json()["image"] == "ghcr.io/aerol-ai/ubuntu:22.04"
    finally:
        for sandbox_id in (on_image, by_name, other):
            image_http.delete(f"/v1/sandboxes/{sandbox_id}")
