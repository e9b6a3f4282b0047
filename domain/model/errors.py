"""The one domain error tree. ``api/errors.py`` maps each class to a status and code.

DomainError
├── NotFoundError: SessionNotFoundError, SandboxNotFoundError, SnapshotNotFoundError
├── ConflictError: SessionExistsError, AttemptMismatchError, SessionNotRunningError,
│                  InputIdReusedError, AttemptRunningError, PtyUnavailableError, SandboxConflictError
├── InvalidRequestError: InvalidSpecError
├── CursorExpiredError (carries earliest/latest)
├── InputBufferFullError
├── UnavailableError (lifecycle barrier, paused without auto_resume): SandboxResumeFailedError,
│                     StoreUnavailableError (the store refused a write for another reason)
├── VolumeNotFoundError, VolumeSnapshotNotFoundError (404), VolumeConflictError (409, with details),
│   VolumeRequestError (400 bad_request), VolumeQuotaError (429 quota_exceeded): sandbox volumes
├── InsufficientStorageError (ENOSPC, read-only store, too little space to checkpoint: 507)
├── UnencodableEventError (a value the store cannot encode reached it: a bug, 500)
├── UnauthorizedError, ForbiddenError; AccessRequestError (400), ApiKeyNotFoundError,
│   TeamNotFoundError, TeamNotEmptyError (409): API keys and teams
├── OperationFailedError (the process refused the operation: 500 <action>_failed)
└── PhaseTransitionError (a command would move a phase outside ALLOWED: a bug, 500)
"""
from __future__ import annotations


class DomainError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFoundError(DomainError):
    pass


class SessionNotFoundError(NotFoundError):
    def __init__(self, message: str = "session not found") -> None:
        super().__init__(message)


class SandboxNotFoundError(NotFoundError):
    def __init__(self, message: str = "sandbox not found") -> None:
        super().__init__(message)


class SnapshotNotFoundError(NotFoundError):
    def __init__(self, message: str = "rootfs snapshot not found") -> None:
        super().__init__(message)


class ConflictError(DomainError):
    pass


class SessionExistsError(ConflictError):
    """An idempotency key reused with another spec. The message keeps the reference's words
    first (clients match on them) and then names the key, which is what the caller must change."""

    def __init__(self, key: str = "", session_id: str = "", why: str = "with a different spec") -> None:
        detail = f": idempotency key {key!r} is bound to session {session_id} {why}" if key else ""
        super().__init__("session already exists" + detail)


class AttemptMismatchError(ConflictError):
    def __init__(self) -> None:
        super().__init__("session attempt mismatch")


class SessionNotRunningError(ConflictError):
    def __init__(self) -> None:
        super().__init__("session is not running")


class InputIdReusedError(ConflictError):
    def __init__(self) -> None:
        super().__init__("input id was already used with different content")


class AttemptRunningError(ConflictError):
    def __init__(self) -> None:
        super().__init__("session already has a running attempt")


class PtyUnavailableError(ConflictError):
    def __init__(self) -> None:
        super().__init__("pty not available")


class SandboxConflictError(ConflictError):
    pass


class InvalidRequestError(DomainError):
    pass


class InvalidSpecError(InvalidRequestError):
    pass


class CursorExpiredError(DomainError):
    def __init__(self, earliest: int, latest: int) -> None:
        super().__init__(f"event cursor expired; earliest available sequence is {earliest}")
        self.earliest = earliest
        self.latest = latest


class InputBufferFullError(DomainError):
    def __init__(self, message: str = "input buffer full") -> None:
        super().__init__(message)


class UnavailableError(DomainError):
    pass


class SandboxResumeFailedError(UnavailableError):
    """The checkpoint of a paused sandbox could not be restored (503 sandbox_resume_failed)."""


class StoreUnavailableError(UnavailableError):
    """This sandbox's store refused a write (not for lack of space); writes are retried."""


class InsufficientStorageError(DomainError):
    """The store's disk is full or read-only (507): nothing is dropped; writes resume by
    themselves once space is free."""


class UnencodableEventError(DomainError):
    """An event carried a value the store cannot encode; its aggregate was rolled back."""


class OperationFailedError(DomainError):
    pass


class PhaseTransitionError(DomainError):
    def __init__(self, source: str, target: str, event: str) -> None:
        super().__init__(f"phase transition {source} -> {target} ({event}) is not allowed")
        self.source, self.target = source, target


# ---- contexts and workspace files (their own codes, as the SDKs' reference names them) ----------
class ContextNotFoundError(NotFoundError):
    def __init__(self) -> None:
        super().__init__("context not found")


class ContextFinishedError(DomainError):
    """The context's process has exited: it takes no more input (410 process_finished)."""

    def __init__(self) -> None:
        super().__init__("process has finished")


class ContextNotRunningError(ConflictError):
    def __init__(self, message: str = "process is not running") -> None:
        super().__init__(message)


class ContextPtyUnavailableError(ConflictError):
    def __init__(self) -> None:
        super().__init__("pty not available: the context runs without a terminal")


class ExecTimeoutError(DomainError):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"execution timed out after {seconds:g} s")


class FileError(DomainError):
    """A workspace file operation refused; ``code`` is the reference's error code."""

    code = "operation_failed"


class PathOutsideSandboxError(FileError):
    """The path (or a symlink on the way) leads outside the sandbox's /workspace or /tmp."""

    code = "permission_denied"


class FileNotFoundInSandboxError(FileError, NotFoundError):
    code = "file_not_found"


class PathExistsError(FileError, ConflictError):
    code = "path_exists"


class NotADirectoryInSandboxError(FileError, ConflictError):
    code = "path_not_directory"


class NotAFileInSandboxError(FileError, ConflictError):
    code = "path_not_file"


class FileTooLargeError(FileError):
    code = "file_too_large"


# ---- templates and images -----------------------------------------------------------------------
class TemplateNotFoundError(NotFoundError):
    def __init__(self, message: str = "template not found") -> None:
        super().__init__(message)


class ImageNotFoundError(NotFoundError):
    """A digest-pinned image reference the image store does not hold."""


class TemplateExistsError(ConflictError):
    def __init__(self, message: str = "template already exists") -> None:
        super().__init__(message)


class TemplateNotReadyError(ConflictError):
    """Its creation is in progress (``retry_after``) or failed."""

    def __init__(self, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class InvalidTemplateError(InvalidRequestError):
    """A template spec or image reference the server refuses (400 bad_request)."""


class TemplateForbiddenError(DomainError):
    """A field only the platform may set (403 forbidden)."""


# ---- access: API keys, teams and what a principal may do (the gateway's codes) ------------------
class UnauthorizedError(DomainError):
    """No valid credential: an unknown, deactivated or expired key (401 unauthorized)."""


class ForbiddenError(DomainError):
    """A valid key whose roles do not allow the call (403 forbidden)."""

    def __init__(self, message: str = "insufficient permissions") -> None:
        super().__init__(message)


class AccessRequestError(InvalidRequestError):
    """A bad API key or team request (400 bad_request, as the gateway answers)."""


class ApiKeyNotFoundError(NotFoundError):
    def __init__(self) -> None:
        super().__init__("API key not found")


class TeamNotFoundError(NotFoundError):
    def __init__(self) -> None:
        super().__init__("team not found")


class TeamNotEmptyError(ConflictError):
    """A team that still owns sandboxes cannot be deleted; ``details`` names what blocks it."""

    def __init__(self, team_id: str, sandboxes: int) -> None:
        super().__init__("team has resources that must be removed before deletion")
        self.details = {"team_id": team_id, "blocking_resources": [{"category": "sandboxes", "count": sandboxes}]}


# ---- sandbox volumes (the reference storage proxy's codes) ----------------------------------------
class VolumeNotFoundError(NotFoundError):
    def __init__(self, message: str = "sandboxvolume not found") -> None:
        super().__init__(message)


class VolumeSnapshotNotFoundError(NotFoundError):
    def __init__(self, message: str = "snapshot not found") -> None:
        super().__init__(message)


class VolumeConflictError(ConflictError):
    """409 conflict; ``details`` as the reference sends them (active mounts and a hint)."""

    def __init__(self, message: str, details: dict | None = None) -> None:
        super().__init__(message)
        self.details = details


class VolumeRequestError(InvalidRequestError):
    """400 bad_request, as the reference's storage proxy answers."""


class VolumeQuotaError(DomainError):
    """429 quota_exceeded: the team's volume storage would pass its quota."""
