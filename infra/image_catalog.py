"""The image store as templates see it (``domain.ports.ImageCatalog``): domain errors, the image
config's defaults, and the builtin templates' builds (``sessiond template build``)."""
from __future__ import annotations

import json
from pathlib import Path

from .image_archive import ImageError
from .images import Image, ImageNotFoundError, ImageReferenceError, ImageStore


class ImageCatalog:
    """The store as templates see it (``domain.ports.ImageCatalog``): domain errors, image defaults."""

    def __init__(self, store: ImageStore) -> None:
        self.store = store

    def resolve(self, reference: str):
        from session_supervisor.domain.model.errors import ImageNotFoundError as NotThere, InvalidTemplateError
        try:
            return _info(self.store.resolve(reference))
        except ImageReferenceError as exc:
            raise InvalidTemplateError(str(exc)) from None
        except ImageNotFoundError as exc:
            raise NotThere(str(exc)) from None

    def lookup(self, reference: str):
        """An imported image by a pinned reference, or (a tag resolved once against what this store
        holds) the newest image imported under that name; None when the store has none."""
        reference = reference.strip()
        try:
            if "@" in reference:
                return _info(self.store.resolve(reference))
        except ImageError:
            return None
        names = {reference, reference.rsplit("/", 1)[-1]}
        for image in self.store.list():  # newest first
            if image.name in names or f"{image.name}:latest" in names:
                return _info(image)
        return None

    def built(self, template_id: str):
        """A builtin template's image, once ``sessiond template build`` published it, and the state
        of a build that runs or failed (``status.creation``)."""
        state = read_build_state(self.store.root, template_id)
        image = None
        if state and state.get("reference"):
            try:
                image = _info(self.store.resolve(state["reference"]))
            except ImageError:
                image = None
        creation = state.get("creation") if state else None
        if creation and creation.get("state") == "ready":
            creation = None  # a finished build shows like an image template: no creation status
        return image, creation


def _info(image: Image):
    from session_supervisor.domain.ports import ImageInfo
    env = {}
    for item in image.config.get("Env") or []:
        key, sep, value = item.partition("=")
        if sep:
            env[key] = value
    return ImageInfo(image.reference, image.digest, env, image.config.get("WorkingDir") or "")


def build_state_path(root: Path, template_id: str) -> Path:
    return Path(root) / ".builds" / f"{template_id}.json"


def read_build_state(root: Path, template_id: str) -> dict | None:
    try:
        return json.loads(build_state_path(root, template_id).read_text())
    except (OSError, ValueError):
        return None
