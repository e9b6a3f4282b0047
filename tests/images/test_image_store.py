"""The offline image store through ``sessiond image``: import (OCI and `docker save` archives),
list, rm, and the archives it must refuse without leaving anything behind."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .fixtures import docker_archive, escaping_archive, debian_image

SESSIOND = [sys.executable, "-m", "session_supervisor.api"]


def sessiond(*args: str, data_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*SESSIOND, *args, "--data-dir", str(data_dir)], capture_output=True, text=True,
                          timeout=300)


def store_entries(data_dir: Path) -> list[str]:
    root = data_dir / "images"
    return sorted(os.listdir(root)) if root.exists() else []


def test_an_oci_archive_is_imported_once_and_listed_by_its_digest_pinned_reference(tmp_path):
    archive = debian_image()
    first = sessiond("image", "import", str(archive), "--name", "trixie", data_dir=tmp_path)
    assert first.returncode == 0, first.stderr
    reference = first.stdout.strip()
    name, _, digest = reference.partition("@")
    assert name == "trixie" and digest.startswith("sha256:") and len(digest) == 71
    assert "unpacking" in first.stderr  # progress is shown
    rootfs = tmp_path / "images" / digest[7:] / "rootfs"
    assert "trixie" in (rootfs / "etc" / "os-release").read_text()
    again = sessiond("image", "import", str(archive), "--name", "trixie", data_dir=tmp_path)
    assert again.stdout.strip() == reference and store_entries(tmp_path) == [digest[7:]]
    listed = sessiond("image", "list", data_dir=tmp_path)
    assert listed.stdout.split()[0] == reference


def test_a_docker_save_archive_is_imported_too(tmp_path):
    result = sessiond("image", "import", str(docker_archive(tmp_path)), data_dir=tmp_path / "data")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("docker-save@sha256:")


def test_rm_removes_the_image_and_its_rootfs(tmp_path):
    reference = sessiond("image", "import", str(debian_image()), data_dir=tmp_path).stdout.strip()
    removed = sessiond("image", "rm", reference, data_dir=tmp_path)
    assert removed.returncode == 0 and removed.stdout.strip() == reference
    assert store_entries(tmp_path) == []
    gone = sessiond("image", "rm", reference, data_dir=tmp_path)
    assert gone.returncode == 1 and "not in the image store" in gone.stderr


@pytest.mark.parametrize("kind", ["empty", "corrupt", "not-an-image", "escaping"])
def test_a_bad_archive_gives_one_clear_error_and_leaves_nothing_behind(tmp_path, kind):
    bad = tmp_path / f"{kind}.tar"
    if kind == "empty":
        bad.write_bytes(b"")
        expected = "is empty (0 bytes)"
    elif kind == "corrupt":
        bad.write_bytes(debian_image().read_bytes()[:200_000])
        expected = "corrupt"
    elif kind == "not-an-image":
        subprocess.run(["tar", "-C", str(Path(__file__).parent), "-cf", str(bad), "__init__.py"], check=True)
        expected = "neither an OCI image archive"
    else:
        bad = escaping_archive(tmp_path)
        expected = "escaping the image root: '../../escaped'"
    data = tmp_path / "data"
    result = sessiond("image", "import", str(bad), data_dir=data)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert expected in lines[-1] and "Traceback" not in result.stderr
    assert store_entries(data) == []  # no staging directory, no half image
    assert not (tmp_path / "escaped").exists() and not (data / "escaped").exists()
