"""What an image archive is, and whether its layers stay inside their root, before skopeo and umoci
take it.

skopeo reads the archive and umoci unpacks it; neither refuses a layer entry such as
``../../etc/x``: umoci clamps it into the rootfs (measured: ``../../escape`` landed at
``rootfs/escape``) and goes on. A layer that tries to climb out of its root is hostile or broken,
so the import refuses the whole image with one error instead. This module only reads entry names
and link targets of each layer (Python's ``tarfile`` over gzip, zstd or plain tar); unpacking,
whiteouts and ownership stay umoci's.
"""
from __future__ import annotations

import gzip
import json
import posixpath
import tarfile
from pathlib import Path

import zstandard


class ImageError(Exception):
    """An image could not be imported, found or removed (the message says why)."""


class ImageArchiveError(ImageError):
    """The file is not an image archive this store can import, or one of its layers is unsafe."""


def archive_transport(path: Path) -> str:
    """``oci-archive`` or ``docker-archive`` (skopeo's transports), from the archive's top entries."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ImageArchiveError(f"cannot read {path}: {exc.strerror}") from None
    if size == 0:
        raise ImageArchiveError(f"{path} is empty (0 bytes): not an image archive")
    names: set[str] = set()
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                names.add(posixpath.normpath(member.name.lstrip("./") or "."))
    except (tarfile.TarError, OSError, EOFError, zstandard.ZstdError) as exc:
        raise ImageArchiveError(f"{path} is not a tar archive ({exc})") from None
    if "oci-layout" in names and "index.json" in names:
        return "oci-archive"
    if "manifest.json" in names:
        return "docker-archive"
    raise ImageArchiveError(f"{path} is neither an OCI image archive (oci-layout, index.json) "
                            "nor a `docker save` archive (manifest.json)")


def check_layout_layers(layout: Path, manifest_digest: str) -> int:
    """Every layer of the image ``manifest_digest`` in the OCI layout ``layout``: each entry and
    each hard link must stay inside the root. Returns the layers' compressed size in bytes."""
    manifest = _read_json(layout, manifest_digest)
    total = 0
    for layer in manifest.get("layers") or []:
        digest = layer.get("digest", "")
        media = layer.get("mediaType", "")
        blob = _blob(layout, digest)
        total += blob.stat().st_size
        _check_layer(blob, media, digest)
    return total


def image_config(layout: Path, manifest_digest: str) -> dict:
    """The image's runtime defaults (``Env``, ``WorkingDir``, ``User``) from its config blob."""
    manifest = _read_json(layout, manifest_digest)
    config = _read_json(layout, (manifest.get("config") or {}).get("digest", ""))
    return config.get("config") or {}


def _blob(layout: Path, digest: str) -> Path:
    algo, _, hexpart = digest.partition(":")
    if algo != "sha256" or len(hexpart) != 64 or not all(c in "0123456789abcdef" for c in hexpart):
        raise ImageArchiveError(f"unsupported blob digest {digest!r}")
    return layout / "blobs" / "sha256" / hexpart


def _read_json(layout: Path, digest: str) -> dict:
    try:
        data = json.loads(_blob(layout, digest).read_bytes())
    except (OSError, ValueError) as exc:
        raise ImageArchiveError(f"blob {digest} is unreadable: {exc}") from None
    if not isinstance(data, dict):
        raise ImageArchiveError(f"blob {digest} is not a JSON object")
    return data


def _escapes(name: str) -> bool:
    parts = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return True
            parts.pop()
        else:
            parts.append(part)
    return False


def _check_layer(blob: Path, media: str, digest: str) -> None:
    try:
        with open(blob, "rb") as raw:
            if "zstd" in media:
                stream = zstandard.ZstdDecompressor().stream_reader(raw)
            elif "gzip" in media:
                stream = gzip.GzipFile(fileobj=raw)
            else:
                stream = raw
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                for member in tar:
                    if _escapes(member.name):
                        raise ImageArchiveError(
                            f"layer {digest[:19]} has an entry escaping the image root: {member.name!r}")
                    if member.islnk() and _escapes(member.linkname):
                        raise ImageArchiveError(
                            f"layer {digest[:19]} hard-links outside the image root: {member.linkname!r}")
    except ImageArchiveError:
        raise
    except (tarfile.TarError, OSError, EOFError, zstandard.ZstdError) as exc:
        raise ImageArchiveError(f"layer {digest[:19]} is corrupt: {exc}") from None
