"""The image store: OCI images imported offline, each unpacked once into a read-only rootfs.

Layout (``<data dir>/images``, or ``<checkpoint dir>/images`` with more than one node, so every
node finds the same images)::

    images/<manifest digest hex>/oci/       the image as an OCI layout (skopeo's copy)
    images/<manifest digest hex>/rootfs/    its layers unpacked by umoci, never written again
    images/<manifest digest hex>/image.json name, digest, size, config (Env, WorkingDir), time

Why skopeo and umoci (Debian's ``skopeo``, ``umoci``): skopeo reads both an OCI archive and a
``docker save`` archive (and a registry, for ``pull``) into one OCI layout, keeping the blobs and
so the manifest digest; umoci applies the layers in order with OCI whiteouts, ownership and
modes, which a hand-written tar walker would have to get right again. What neither does is refuse
a layer entry that climbs out of its root (``image_archive``), so that is checked in between.

An import works in a staging directory next to the store and is renamed into place only once
skopeo, the check and umoci all succeeded: a failed import leaves nothing behind, and readers
never see half an image. The canonical reference is ``NAME@sha256:<manifest digest>``; the name
is informational, the digest is the identity (the same image imported twice is stored once).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .image_archive import ImageArchiveError, ImageError, archive_transport, check_layout_layers, image_config
from .mount_scope import outside_own_bind

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._/:-]{0,254}$")
_TAG = "image"  # the one tag inside each image's own layout


class ImageNotFoundError(ImageError):
    pass


class ImageReferenceError(ImageError):
    """Not a digest-pinned reference (a mutable tag, or no digest at all)."""


@dataclass(frozen=True)
class Image:
    name: str
    digest: str         # sha256:<64 hex> of the manifest
    size: int           # compressed layers, bytes
    config: dict        # Env, WorkingDir, User, ... of the image config
    imported_at: float
    rootfs: Path

    @property
    def reference(self) -> str:
        return f"{self.name}@{self.digest}"


def parse_reference(reference: str) -> tuple[str, str]:
    """``NAME@sha256:HEX`` -> (name, digest). A tag or a bare name is refused: a template must name
    exactly the bytes it runs, and a tag can move."""
    if not isinstance(reference, str) or not reference.strip():
        raise ImageReferenceError("image reference is empty")
    name, at, digest = reference.strip().rpartition("@")
    if not at:
        raise ImageReferenceError(
            f"image {reference!r} is not pinned by digest: use NAME@sha256:DIGEST as `sessiond image list` "
            "prints it (mutable tags are rejected)")
    if not _DIGEST.match(digest):
        raise ImageReferenceError(f"image {reference!r}: the digest must be sha256: and 64 lowercase hex digits")
    return name, digest


class ImageStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    # ---- reading --------------------------------------------------------------------------------
    def list(self) -> list[Image]:
        images = []
        if not self.root.is_dir():
            return images
        for entry in sorted(self.root.iterdir()):
            if entry.name.startswith("."):
                continue
            image = self._load(entry)
            if image is not None:
                images.append(image)
        return sorted(images, key=lambda image: (-image.imported_at, image.digest))

    def get(self, digest: str) -> Image:
        if not _DIGEST.match(digest or ""):
            raise ImageNotFoundError(f"no image {digest!r} in the image store")
        image = self._load(self.root / digest.split(":", 1)[1])
        if image is None:
            raise ImageNotFoundError(f"image {digest} is not in the image store (import it with "
                                     "`sessiond image import FILE`)")
        return image

    def resolve(self, reference: str) -> Image:
        """The imported image a pinned reference names (ImageReferenceError, ImageNotFoundError)."""
        _, digest = parse_reference(reference)
        return self.get(digest)

    def _load(self, entry: Path) -> Image | None:
        try:
            meta = json.loads((entry / "image.json").read_text())
        except (OSError, ValueError):
            return None
        return Image(meta["name"], meta["digest"], meta.get("size", 0), meta.get("config") or {},
                     meta.get("imported_at", 0.0), entry / "rootfs")

    # ---- writing --------------------------------------------------------------------------------
    def import_archive(self, path: Path, name: str | None = None, progress=None) -> Image:
        """An OCI archive or a ``docker save`` archive (blocking)."""
        path = Path(path)
        transport = archive_transport(path)
        return self._import(f"{transport}:{path}", name or _default_name(path), progress)

    def pull(self, reference: str, name: str | None = None, progress=None) -> Image:
        """From a registry (``docker://`` is implied), where one is reachable."""
        source = reference if "://" in reference else f"docker://{reference}"
        path = source.split("://", 1)[1].split("@", 1)[0]   # registry/repo[:tag]
        repo, _, tag = path.rpartition(":")
        default = repo if repo and "/" not in tag else path   # a port (host:5000/x) is not a tag
        return self._import(source, name or default, progress)

    def adopt(self, layout: Path, rootfs: Path, name: str) -> Image:
        """An image this host built itself (``sessiond template build``): its OCI layout and its
        already unpacked rootfs, hard-linked into the store when on the same filesystem (copied
        otherwise). Its layers are not re-checked: they were made here from packages, not received."""
        digest = _manifest_digest(Path(layout))
        existing = self._load(self.root / digest.split(":", 1)[1])
        if existing is not None:
            return existing
        self.root.mkdir(parents=True, exist_ok=True)
        staging = self.root / f".adopt-{os.getpid()}-{time.monotonic_ns()}"
        staging.mkdir(mode=0o755)
        try:
            for source, target in ((layout, "oci"), (rootfs, "rootfs")):
                if not self._link_tree(Path(source), staging / target):
                    _run(["cp", "-a", str(source), str(staging / target)], "cp")
            size = sum(p.stat().st_size for p in (staging / "oci" / "blobs" / "sha256").iterdir())
            meta = {"name": name, "digest": digest, "size": size, "config": image_config(staging / "oci", digest),
                    "imported_at": time.time()}
            (staging / "image.json").write_text(json.dumps(meta, indent=1))
            os.rename(staging, self.root / digest.split(":", 1)[1])
            return self.get(digest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _link_tree(self, source: Path, target: Path) -> bool:
        """``source`` hard-linked at ``target``; False (nothing left) when it cannot be. A running
        server's data dir is a bind of itself (``infra.mount_scope``), which link(2) will not
        cross even on one filesystem: then the links are made where that bind is taken away."""
        argv = ["cp", "-al", str(source), str(target)]
        for attempt in (argv, outside_own_bind(self.root.parent, argv)):
            if attempt is not None and subprocess.run(attempt, capture_output=True).returncode == 0:
                return True
            shutil.rmtree(target, ignore_errors=True)
        return False

    def remove(self, digest_or_reference: str) -> Image:
        digest = digest_or_reference
        if "@" in digest_or_reference:
            _, digest = parse_reference(digest_or_reference)
        image = self.get(digest)
        doomed = self.root / f".removing-{digest.split(':', 1)[1]}-{os.getpid()}"
        os.replace(image.rootfs.parent, doomed)  # gone for readers at once
        shutil.rmtree(doomed, ignore_errors=True)
        return image

    def _import(self, source: str, name: str, progress) -> Image:
        name = name.strip().lower()
        if not _NAME.match(name):
            raise ImageError(f"image name {name!r} is invalid (lowercase letters, digits, . _ / : -)")
        say = progress or (lambda message: None)
        self.root.mkdir(parents=True, exist_ok=True)
        staging = self.root / f".import-{os.getpid()}-{time.monotonic_ns()}"
        staging.mkdir(mode=0o700)
        try:
            started = time.monotonic()
            say(f"reading {source}")
            _run(["skopeo", "copy", "--quiet", source, f"oci:{staging / 'oci'}:{_TAG}"], "skopeo copy")
            digest = _manifest_digest(staging / "oci")
            size = check_layout_layers(staging / "oci", digest)
            config = image_config(staging / "oci", digest)
            final = self.root / digest.split(":", 1)[1]
            existing = self._load(final)
            if existing is not None:
                say(f"{existing.reference} is already in the store")
                return existing
            say(f"unpacking {digest[:19]} ({size / 2**20:.1f} MiB of layers)")
            _run(["umoci", "unpack", "--image", f"{staging / 'oci'}:{_TAG}", str(staging / "bundle")], "umoci unpack")
            os.replace(staging / "bundle" / "rootfs", staging / "rootfs")
            shutil.rmtree(staging / "bundle")  # umoci's runtime config and mtree: not used
            os.chmod(staging, 0o755)  # the sandboxes' mounts read the rootfs below it
            meta = {"name": name, "digest": digest, "size": size, "config": config, "imported_at": time.time(),
                    "import_seconds": round(time.monotonic() - started, 3)}
            (staging / "image.json").write_text(json.dumps(meta, indent=1))
            try:
                os.rename(staging, final)
            except OSError:  # imported meanwhile by someone else: theirs stands
                if self._load(final) is None:
                    raise
            return self.get(digest)
        except ImageArchiveError as exc:
            raise ImageError(str(exc)) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _default_name(path: Path) -> str:
    stem = path.name
    for suffix in (".tar.gz", ".tgz", ".tar.zst", ".tar", ".oci"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).strip("-.") or "image"


def _manifest_digest(layout: Path) -> str:
    index = json.loads((layout / "index.json").read_text())
    manifests = index.get("manifests") or []
    if len(manifests) != 1:
        raise ImageError(f"expected one image in the archive, found {len(manifests)}")
    digest = manifests[0].get("digest", "")
    if not _DIGEST.match(digest):
        raise ImageError(f"unsupported manifest digest {digest!r}")
    return digest


def _run(argv: list[str], what: str) -> None:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    except FileNotFoundError:
        package = argv[0]
        raise ImageError(f"{argv[0]} is not installed (apt-get install {package})") from None
    if result.returncode != 0:
        lines = [line for line in (result.stderr or result.stdout).strip().splitlines() if line.strip()]
        detail = lines[-1] if lines else f"exit code {result.returncode}"
        raise ImageError(f"{what} failed: {detail}")


def store_root(data_dir: Path, checkpoint_dir: Path | None = None) -> Path:
    """Where the images live: the shared checkpoint directory with more than one node (every node
    runs the same images), else the data dir."""
    return Path(checkpoint_dir or data_dir) / "images"

