"""A rootfs snapshot: an immutable copy of a sandbox's disk (its workspace, /tmp excluded, and an
image sandbox's writable layer), owned by the sandbox's team and kept until deleted or expired,
whatever becomes of the sandbox."""
from __future__ import annotations

import secrets
import string
from dataclasses import asdict, dataclass, field

ID_PREFIX = "rootfs-snapshot-"
_ALPHABET = string.ascii_lowercase + string.digits
USER, TEMPLATE = "user", "template"  # listed under its sandbox / hidden, the image of a template


def new_snapshot_id() -> str:
    """The reference's shape: ``rootfs-snapshot-`` and ten of ``[a-z0-9]``."""
    return ID_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(10))


def is_snapshot_id(value: object) -> bool:
    return (isinstance(value, str) and value.startswith(ID_PREFIX) and len(value) == len(ID_PREFIX) + 10
            and all(c in _ALPHABET for c in value[len(ID_PREFIX):]))


@dataclass
class RootfsSnapshot:
    id: str
    sandbox_id: str          # the source (it may be gone since)
    team_id: str
    created_ns: int
    name: str = ""
    description: str = ""
    expires_ns: int = 0      # 0: kept until deleted
    kind: str = USER
    size_bytes: int = 0      # its disk's allocated bytes when taken: what it counts against the team's quota
    template: str = ""       # the source's template and its part of the config (image, env, disk size)
    rootfs: dict = field(default_factory=dict)

    def expired(self, now_ns: int) -> bool:
        return bool(self.expires_ns) and now_ns >= self.expires_ns

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RootfsSnapshot":
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)
