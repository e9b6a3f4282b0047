"""Test images, made offline from Debian's packages and cached outside the repository.

The test image is Debian trixie (the host is bookworm), so ``/etc/os-release`` and the Python
version inside a sandbox say whose root filesystem it runs on: trixie's python3 is 3.13, the
host's 3.11. ``mmdebstrap --variant=essential`` plus ``python3`` (ctypes included: the escape probes use it), without docs, man pages,
locales and ``/dev``: about 30 MiB compressed. It is built once into
``/var/cache/sessiond-tests/`` (``SESSIOND_TEST_CACHE`` moves it) and reused by every later run.
"""
from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("SESSIOND_TEST_CACHE", "/var/cache/sessiond-tests"))
SUITE = "trixie"
IMAGE_FILE = f"debian-{SUITE}-python3.oci.tar"


def tools_missing() -> str | None:
    for tool in ("mmdebstrap", "umoci", "skopeo"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install {tool})"
    if os.geteuid() != 0:
        return "building and mounting images needs root"
    return None


def _locked(name: str):
    CACHE.mkdir(parents=True, exist_ok=True)
    lock = open(CACHE / f".{name}.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)  # two test processes never build the same file at once
    return lock


def oci_from_rootfs_tar(rootfs_tar: Path, out: Path, env: list[str], workdir: str = "/") -> None:
    """An OCI archive with one layer, the given rootfs tarball (umoci writes the layout)."""
    layout = out.with_suffix(".layout")
    shutil.rmtree(layout, ignore_errors=True)
    steps = [["umoci", "init", "--layout", str(layout)],
             ["umoci", "new", "--image", f"{layout}:latest"],
             ["umoci", "raw", "add-layer", "--image", f"{layout}:latest", str(rootfs_tar)],
             ["umoci", "config", "--image", f"{layout}:latest", f"--config.workingdir={workdir}",
              *[f"--config.env={item}" for item in env]],
             ["umoci", "gc", "--layout", str(layout)]]
    for step in steps:
        subprocess.run(step, check=True, capture_output=True)
    temp = out.with_name(f".{out.name}.tmp")
    subprocess.run(["tar", "-C", str(layout), "-cf", str(temp), "."], check=True)
    os.replace(temp, out)
    shutil.rmtree(layout, ignore_errors=True)


def debian_image() -> Path:
    """The cached Debian trixie OCI archive (built on first use: about 25 s)."""
    problem = tools_missing()
    if problem:
        pytest.skip(problem)
    out = CACHE / IMAGE_FILE
    if out.exists():
        return out
    with _locked(IMAGE_FILE):
        if out.exists():
            return out
        rootfs = CACHE / f".{SUITE}-rootfs.tar"
        subprocess.run(["mmdebstrap", "--quiet", "--variant=essential", "--include=python3",
                        "--skip=output/dev", *[f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("man", "locale", "doc")],
                        "--format=tar", SUITE, str(rootfs)], check=True, capture_output=True, timeout=900)
        try:
            oci_from_rootfs_tar(rootfs, out, ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                              "IMAGE_MARK=trixie-test"])
        finally:
            rootfs.unlink(missing_ok=True)
    return out


def docker_archive(tmp: Path) -> Path:
    """The test image as `docker save` would write it (skopeo converts it)."""
    out = tmp / "docker-save.tar"
    subprocess.run(["skopeo", "copy", "--quiet", f"oci-archive:{debian_image()}", f"docker-archive:{out}:trixie-test:1"],
                   check=True, capture_output=True)
    return out


def escaping_archive(tmp: Path) -> Path:
    """An OCI archive whose one layer holds ``../../escaped``."""
    layer = tmp / "escape-layer.tar"
    with tarfile.open(layer, "w") as tar:
        for name, data in (("etc/fine", b"ok\n"), ("../../escaped", b"out\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out = tmp / "escape.oci.tar"
    oci_from_rootfs_tar(layer, out, ["PATH=/usr/bin:/bin"])
    return out


def os_release(text: str) -> dict:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

