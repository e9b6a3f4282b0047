"""Who calls, and what they may do: the principal of a call, API keys, teams and role permissions.

The roles and permission names are the Sandbox0 reference's, so a key made with the SDKs'
``roles`` means here what it means there:

- ``admin``: everything of its team, and managing the team's API keys;
- ``developer``: create, read, write and delete sandboxes (sessions, contexts, files);
- ``builder``: templates (read) and registry pushes only; it sees no sandbox at all;
- ``viewer``: read sandboxes, journals, files, status, templates and volumes; no write of any kind.

Volumes (``sandboxvolume:*``) are the reference's too: ``admin`` and ``developer`` have all four,
``viewer`` reads.

The server's own token is the platform key: every permission, every team. A principal is
always scoped to one team except that platform key without a selected team.
"""
from __future__ import annotations

from dataclasses import dataclass

SANDBOX_CREATE = "sandbox:create"
SANDBOX_READ = "sandbox:read"
SANDBOX_WRITE = "sandbox:write"
SANDBOX_DELETE = "sandbox:delete"
TEMPLATE_CREATE = "template:create"
TEMPLATE_READ = "template:read"
TEMPLATE_WRITE = "template:write"
TEMPLATE_DELETE = "template:delete"
REGISTRY_WRITE = "registry:write"
APIKEY_MANAGE = "apikey:manage"
AUDIT_READ = "sandboxaudit:read"
CREDENTIALS_READ = "credentialsource:read"
CREDENTIALS_WRITE = "credentialsource:write"
CREDENTIALS_DELETE = "credentialsource:delete"
QUOTA_READ = "quota:read"
VOLUME_CREATE = "sandboxvolume:create"
VOLUME_READ = "sandboxvolume:read"
VOLUME_WRITE = "sandboxvolume:write"
VOLUME_DELETE = "sandboxvolume:delete"
_VOLUMES = (VOLUME_CREATE, VOLUME_READ, VOLUME_WRITE, VOLUME_DELETE)
USAGE_READ = "usage:read"
ALL = "*"
_CREDENTIALS = (CREDENTIALS_READ, CREDENTIALS_WRITE, CREDENTIALS_DELETE)

ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    "admin": frozenset((SANDBOX_CREATE, SANDBOX_READ, SANDBOX_WRITE, SANDBOX_DELETE, TEMPLATE_CREATE,
                        TEMPLATE_READ, TEMPLATE_WRITE, TEMPLATE_DELETE, REGISTRY_WRITE, APIKEY_MANAGE,
                        *_CREDENTIALS, QUOTA_READ, USAGE_READ, AUDIT_READ, *_VOLUMES)),
    "developer": frozenset((SANDBOX_CREATE, SANDBOX_READ, SANDBOX_WRITE, SANDBOX_DELETE, TEMPLATE_READ,
                            REGISTRY_WRITE, *_CREDENTIALS, QUOTA_READ, USAGE_READ, *_VOLUMES)),
    "builder": frozenset((TEMPLATE_READ, REGISTRY_WRITE)),
    "viewer": frozenset((SANDBOX_READ, TEMPLATE_READ, CREDENTIALS_READ, QUOTA_READ, USAGE_READ, VOLUME_READ)),
}
ROLES = tuple(ROLE_PERMISSIONS)
DEFAULT_ROLES = ("developer",)

SCOPE_TEAM, SCOPE_PLATFORM = "team", "platform"
# expires_in as the SDKs document it; "never" is a hundred years, as the reference stores it.
DAY_NS = 86_400 * 1_000_000_000
EXPIRES_IN = {"30d": 30 * DAY_NS, "90d": 90 * DAY_NS, "180d": 180 * DAY_NS, "365d": 365 * DAY_NS,
              "never": 36_500 * DAY_NS}
DEFAULT_EXPIRES_IN = "90d"
PLATFORM_KEY_ID = "platform"  # the server's own token as /api-keys/current names it


def permissions_of(roles) -> frozenset[str]:
    granted: set[str] = set()
    for role in roles:
        granted |= ROLE_PERMISSIONS.get(role, frozenset())
    return frozenset(granted)


@dataclass(frozen=True)
class Principal:
    """The caller of one request, as the domain sees it (never a header or a token)."""

    permissions: frozenset[str]
    team_id: str = ""  # "" only for the platform key with no team selected: every team
    key_id: str = ""
    roles: tuple[str, ...] = ()
    platform: bool = False
    expires_ns: int = 0  # 0: never (the server's own token)

    def can(self, permission: str) -> bool:
        return ALL in self.permissions or permission in self.permissions

    @property
    def all_teams(self) -> bool:
        return self.platform and not self.team_id

    def sees(self, team_id: str) -> bool:
        """Whether a resource of ``team_id`` ("": the platform's own) exists for this caller."""
        return self.all_teams or team_id == self.team_id

    def as_team(self, team_id: str) -> "Principal":
        """The platform key acting for one team (the reference's ``X-Team-ID``)."""
        return Principal(self.permissions, team_id, self.key_id, self.roles, self.platform, self.expires_ns)


PLATFORM = Principal(frozenset((ALL,)), key_id=PLATFORM_KEY_ID, platform=True)


@dataclass
class Team:
    id: str
    name: str
    slug: str
    home_region_id: str
    created_ns: int
    updated_ns: int


@dataclass
class ApiKey:
    """A stored key: its secret is never kept, only ``secret_hash`` and a short ``prefix``."""

    id: str
    team_id: str
    name: str
    scope: str
    roles: tuple[str, ...]
    created_by: str
    secret_hash: str
    prefix: str
    expires_ns: int
    created_ns: int
    updated_ns: int
    is_active: bool = True

    def principal(self) -> Principal:
        if self.scope == SCOPE_PLATFORM:
            return Principal(frozenset((ALL,)), "", self.id, (), True, self.expires_ns)
        return Principal(permissions_of(self.roles), self.team_id, self.id, self.roles, False, self.expires_ns)
