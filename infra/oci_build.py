"""An OCI image from a root filesystem directory: one layer, its runtime config, written by umoci."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .image_archive import ImageError


def _run(argv: list[str], timeout: float = 3600) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise ImageError(f"{' '.join(argv[:3])} failed: {result.stderr.strip()[-500:]}")


def layout_from_rootfs(rootfs: Path, layout: Path, env: dict[str, str], workdir: str = "/",
                       tag: str = "latest") -> Path:
    """``layout`` (an OCI layout directory, replaced) holding ``rootfs`` as one layer."""
    shutil.rmtree(layout, ignore_errors=True)
    layer = layout.with_name(layout.name + ".layer.tar")
    try:
        _run(["tar", "--numeric-owner", "--xattrs", "-C", str(rootfs), "-cf", str(layer), "."])
        _run(["umoci", "init", "--layout", str(layout)])
        _run(["umoci", "new", "--image", f"{layout}:{tag}"])
        _run(["umoci", "raw", "add-layer", "--image", f"{layout}:{tag}", str(layer)])
        _run(["umoci", "config", "--image", f"{layout}:{tag}", f"--config.workingdir={workdir}",
              *[f"--config.env={key}={value}" for key, value in env.items()]])
        _run(["umoci", "gc", "--layout", str(layout)])
    finally:
        layer.unlink(missing_ok=True)
    return layout
