"""Templates: what a claim names, and what it turns into (an image, env, memory, disk, network).

Two builtins are public and read-only: ``default`` (the host's own system, read-only; nothing to
set up) and ``coding-agent`` (the image ``sessiond template build coding-agent`` made, or, until it
is built, the host's system as before: the claim says so). Team templates are created through the
API from an imported image, pinned by digest, and stored by a ``TemplateStore``. A claim copies
what it needs of its template into the sandbox's config (``config["rootfs"]``), so a later update
or delete of the template never changes a sandbox that exists.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from .model.errors import TemplateExistsError, TemplateNotFoundError, TemplateNotReadyError
from .model.network import template_policy
from .model.quantity import quantity_bytes
from .ports import ImageCatalog, ImageInfo, TemplateStore

log = logging.getLogger(__name__)

DEFAULT_DISK_BYTES = 8 * 2**30  # ephemeral_storage when neither the template nor the claim says
CODING_AGENT_ENV = {"HOME": "/workspace", "DISABLE_AUTOUPDATER": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
                    "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
BUILTIN_ENV = {"default": {}, "coding-agent": CODING_AGENT_ENV}
_BUILTIN_DESCRIPTIONS = {
    "default": "The host's own system, read-only, with a private /workspace and /tmp.",
    "coding-agent": "Debian with Node.js and the codex, claude, opencode and pi CLIs "
                    "(`sessiond template build coding-agent`); the host's system until it is built.",
}


@dataclass
class Template:
    template_id: str
    scope: str                     # "public" (builtins) or "team"
    spec: dict                     # the wire spec, camelCase, as stored
    created_ns: int
    updated_ns: int
    creation: dict | None = None   # status.creation while a build runs or after it failed
    image: ImageInfo | None = None
    builtin: bool = False
    team_id: str = ""
    snapshot_id: str = ""          # made from a sandbox: the hidden rootfs snapshot claims copy
    source: dict = field(default_factory=dict)  # made from a sandbox: its id and the request's key


@dataclass
class ClaimPlan:
    """The template's part of a new sandbox's config."""

    config: dict
    note: str = ""   # said in the claim's log line (e.g. coding-agent not built yet)
    rootfs: dict = field(default_factory=dict)


class Templates:
    def __init__(self, store: TemplateStore, images: ImageCatalog, clock_ns: Callable[[], int]) -> None:
        self.store = store
        self.images = images
        self.clock_ns = clock_ns
        self.started_ns = clock_ns()

    # ---- reading --------------------------------------------------------------------------------
    # A team sees its own templates and the public ones; ``team`` "" is the platform key's own scope.
    def list(self, team: str = "") -> list[Template]:
        own = self._team(team)
        builtins = [self._builtin(name) for name in BUILTIN_ENV if name not in own]
        return builtins + sorted(own.values(), key=lambda t: t.template_id)

    def get(self, template_id: str, team: str = "") -> Template:
        own = self._team(team)
        if template_id in own:  # a team template shadows a public one
            return own[template_id]
        if template_id in BUILTIN_ENV:
            return self._builtin(template_id)
        raise TemplateNotFoundError()

    def own(self, template_id: str, team: str) -> Template | None:
        """The team's own template of that id (not a public one), or None."""
        return self._team(team).get(template_id)

    def _team(self, team: str) -> dict[str, Template]:
        out = {}
        for key, record in self.store.load().items():
            owner, _, template_id = key.rpartition("/")
            if owner != team:
                continue
            image = None
            try:
                image = self.images.resolve(record["spec"]["mainContainer"]["image"])
            except Exception:  # removed from the image store since: shown, refused at claim
                pass
            out[template_id] = Template(template_id, "team", record["spec"], record["created_ns"],
                                        record["updated_ns"], record.get("creation"), image, team_id=team,
                                        snapshot_id=record.get("snapshot_id", ""), source=record.get("source") or {})
        return out

    def _builtin(self, name: str) -> Template:
        image, creation = self.images.built(name) if name != "default" else (None, None)
        env = BUILTIN_ENV[name]
        spec = {"mainContainer": {"image": image.reference if image else "",
                                  "resources": {"memory": "2Gi", "ephemeralStorage": "8Gi"},
                                  "env": [{"name": k, "value": v} for k, v in env.items()]},
                "displayName": name, "description": _BUILTIN_DESCRIPTIONS[name],
                "network": template_policy(name), "envVars": dict(env)}
        return Template(name, "public", spec, self.started_ns, self.started_ns, creation, image, builtin=True)

    # ---- writing --------------------------------------------------------------------------------
    def create(self, template_id: str, spec: dict, team: str = "") -> Template:
        self.images.resolve(spec["mainContainer"]["image"])  # 400 unpinned, 404 unknown
        now = self.clock_ns()
        record = {"spec": spec, "created_ns": now, "updated_ns": now}
        if not self.store.put(f"{team}/{template_id}", record, create=True):
            raise TemplateExistsError()
        return self.get(template_id, team)

    def update(self, template_id: str, spec: dict, team: str = "") -> Template:
        current = self._team(team).get(template_id)
        if current is None:  # only the caller's own scope: a public template is not updatable
            raise TemplateNotFoundError()
        self._ready(current)
        self.images.resolve(spec["mainContainer"]["image"])
        record = {"spec": spec, "created_ns": current.created_ns, "updated_ns": self.clock_ns()}
        if not self.store.put(f"{team}/{template_id}", record, create=False):
            raise TemplateNotFoundError()
        return self.get(template_id, team)

    def delete(self, template_id: str, team: str = "") -> str:
        """Removed; returns the hidden snapshot a template made from a sandbox held ("" for none)."""
        current = self._team(team).get(template_id)
        if not self.store.delete(f"{team}/{template_id}"):
            raise TemplateNotFoundError()
        return current.snapshot_id if current is not None else ""

    # ---- templates made from a sandbox (domain/template_capture.py) ------------------------------
    def create_captured(self, template_id: str, spec: dict, team: str, creation: dict, snapshot_id: str,
                        source: dict) -> Template:
        """A template whose rootfs is a hidden snapshot still being taken (``creation`` says how far)."""
        now = self.clock_ns()
        record = {"spec": spec, "created_ns": now, "updated_ns": now, "creation": creation,
                  "snapshot_id": snapshot_id, "source": source}
        if not self.store.put(f"{team}/{template_id}", record, create=True):
            raise TemplateExistsError()
        return self.get(template_id, team)

    def set_creation(self, template_id: str, team: str, snapshot_id: str, creation: dict) -> bool:
        """The capture's progress; False when the template is gone or is another one by now."""
        current = self._team(team).get(template_id)
        if current is None or current.snapshot_id != snapshot_id:
            return False
        record = {"spec": current.spec, "created_ns": current.created_ns, "updated_ns": self.clock_ns(),
                  "creation": creation, "snapshot_id": snapshot_id, "source": current.source}
        return self.store.put(f"{team}/{template_id}", record, create=False)

    def captured(self) -> list[tuple[str, Template]]:
        """Every template made from a sandbox, with its team (start-up: captures a crash cut off)."""
        out = []
        for key, record in self.store.load().items():
            team, _, template_id = key.rpartition("/")
            if record.get("snapshot_id"):
                out.append((team, self._team(team)[template_id]))
        return out

    @staticmethod
    def _ready(template: Template) -> None:
        state = (template.creation or {}).get("state")
        if state == "creating":
            raise TemplateNotReadyError("template creation is still in progress", retry_after=1)
        if state == "failed":
            raise TemplateNotReadyError("template creation failed; delete and recreate the template")

    # ---- claims ---------------------------------------------------------------------------------
    def plan_claim(self, template_id: str, config: dict, disk_bytes: int | None = None,
                   image: str = "", team: str = "") -> ClaimPlan:
        """The new sandbox's config: the template's defaults under what the claim asked for.
        ``image``: an image reference that replaces the template's (the AeroLVM facade's ``image``),
        used when the store holds it, else recorded only, as before images existed."""
        template = self.get(template_id, team)
        if image:
            found = self.images.lookup(image)
            if found is not None:
                template = Template(template.template_id, template.scope, template.spec, template.created_ns,
                                    template.updated_ns, None, found, builtin=False)
        note = ""
        if template.builtin and template.image is None and template_id != "default":
            note = f"template {template_id!r} has no image yet (sessiond template build {template_id}): " \
                   "the sandbox runs on the host's system"
        elif not template.builtin:
            self._ready(template)
            # A template made from a sandbox of the host's system ("default") has no image.
            if template.image is None and (template.spec.get("mainContainer") or {}).get("image"):
                raise TemplateNotReadyError(
                    f"the image of template {template_id!r} is no longer in the image store")
        main = template.spec.get("mainContainer") or {}
        env: dict[str, str] = {}
        if template.image is not None:
            env.update(template.image.env)
        env.update({item["name"]: item["value"] for item in main.get("env") or []})
        env.update(template.spec.get("envVars") or {})
        resources = main.get("resources") or {}
        out = {"network": template.spec.get("network") or template_policy(template_id), **config}
        if "resources" not in config and resources.get("memory") and not template.builtin:
            out["resources"] = {"memory": resources["memory"]}
        wanted = disk_bytes or quantity_bytes(resources.get("ephemeralStorage")) or DEFAULT_DISK_BYTES
        rootfs = {"image": template.image.digest if template.image else "",
                  "reference": template.image.reference if template.image else "",
                  "env": env, "disk_bytes": wanted,
                  "workdir": (template.image.working_dir if template.image else "") or ""}
        if template.snapshot_id:  # its disk starts as a copy of the sandbox it was made from
            rootfs["template_snapshot_id"] = template.snapshot_id
        out["rootfs"] = rootfs
        return ClaimPlan(out, note, rootfs)


class NoTeamTemplates:
    """A template store with nothing in it, for a manager built without one (tests, scenarios)."""

    def load(self) -> dict[str, dict]:
        return {}

    def put(self, template_id: str, record: dict, create: bool) -> bool:
        return False

    def delete(self, template_id: str) -> bool:
        return False


class NoImages:
    """No image store: only the builtins on the host's system."""

    def resolve(self, reference: str) -> ImageInfo:
        from .model.errors import ImageNotFoundError
        raise ImageNotFoundError(f"image {reference!r} is not in the image store")

    def lookup(self, reference: str) -> ImageInfo | None:
        return None

    def built(self, template_id: str):
        return None, None
