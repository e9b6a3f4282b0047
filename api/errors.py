"""The only table from domain errors to HTTP status and code, and the one handler."""
from __future__ import annotations

import logging

import orjson
from sanic import HTTPResponse, Request
from sanic.exceptions import SanicException

from session_supervisor.domain.model import errors as e

log = logging.getLogger(__name__)

# Most specific first: the first matching class wins.
STATUS: list[tuple[type, int, str]] = [
    (e.TemplateNotFoundError, 404, "not_found"),
    (e.ImageNotFoundError, 404, "not_found"),
    (e.TemplateExistsError, 409, "conflict"),
    (e.TemplateNotReadyError, 409, "template_not_ready"),
    (e.InvalidTemplateError, 400, "bad_request"),
    (e.TemplateForbiddenError, 403, "forbidden"),
    (e.SessionNotFoundError, 404, "session_not_found"),
    (e.SandboxNotFoundError, 404, "not_found"),
    (e.SnapshotNotFoundError, 404, "not_found"),
    (e.CursorExpiredError, 410, "event_cursor_expired"),
    (e.InputBufferFullError, 429, "input_buffer_full"),
    (e.InsufficientStorageError, 507, "insufficient_storage"),
    (e.SandboxConflictError, 409, "conflict"),
    (e.ConflictError, 409, "session_conflict"),
    (e.InvalidRequestError, 400, "invalid_request"),
    (e.SandboxResumeFailedError, 503, "sandbox_resume_failed"),
    (e.UnavailableError, 503, "unavailable"),
]

# Contexts and workspace files: the codes of the SDKs' reference (procd), checked first.
STATUS[:0] = [
    (e.ContextNotFoundError, 404, "context_not_found"),
    (e.ContextFinishedError, 410, "process_finished"),
    (e.ContextNotRunningError, 409, "process_not_running"),
    (e.ContextPtyUnavailableError, 409, "pty_unavailable"),
    (e.ExecTimeoutError, 408, "exec_timeout"),
    (e.PathOutsideSandboxError, 403, "permission_denied"),
    (e.FileNotFoundInSandboxError, 404, "file_not_found"),
    (e.PathExistsError, 409, "path_exists"),
    (e.NotADirectoryInSandboxError, 409, "path_not_directory"),
    (e.NotAFileInSandboxError, 409, "path_not_file"),
    (e.FileTooLargeError, 413, "file_too_large"),
]


# Volumes: the reference storage proxy's codes.
STATUS[:0] = [
    (e.VolumeNotFoundError, 404, "not_found"),
    (e.VolumeSnapshotNotFoundError, 404, "not_found"),
    (e.VolumeConflictError, 409, "conflict"),
    (e.VolumeRequestError, 400, "bad_request"),
    (e.VolumeQuotaError, 429, "quota_exceeded"),
]


# API keys and teams: the gateway's codes (checked before the session table's general classes).
STATUS[:0] = [
    (e.UnauthorizedError, 401, "unauthorized"),
    (e.ForbiddenError, 403, "forbidden"),
    (e.AccessRequestError, 400, "bad_request"),
    (e.ApiKeyNotFoundError, 404, "not_found"),
    (e.TeamNotFoundError, 404, "not_found"),
    (e.TeamNotEmptyError, 409, "conflict"),
]


class ApiError(Exception):
    """An error decided in the API layer itself (auth, bad JSON, unknown route)."""

    def __init__(self, status: int, code: str, message: str, details=None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details


def envelope(status: int, code: str, message: str, details=None, headers=None) -> HTTPResponse:
    error = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return HTTPResponse(orjson.dumps({"success": False, "error": error}), status=status,
                        headers=headers, content_type="application/json")


AEROLVM_PREFIX = "/v1/"


def aerolvm_error(status: int, message: str) -> HTTPResponse:
    """The AeroLVM facade's error shape: a bare {"error": "..."} object."""
    return HTTPResponse(orjson.dumps({"error": message}), status=status, content_type="application/json")


def classify(exc: BaseException, action: str) -> tuple[int, str, str, object]:
    if isinstance(exc, ApiError):
        return exc.status, exc.code, exc.message, exc.details
    if isinstance(exc, e.DomainError):
        for cls, status, code in STATUS:
            if isinstance(exc, cls):
                details = None
                if isinstance(exc, e.CursorExpiredError):
                    details = {"earliest": exc.earliest, "latest": exc.latest}
                elif isinstance(exc, (e.TeamNotEmptyError, e.VolumeConflictError)):
                    details = exc.details
                return status, code, exc.message, details
        return 500, f"{action}_failed", exc.message, None
    if isinstance(exc, SanicException):
        status = getattr(exc, "status_code", 500) or 500
        code = {404: "not_found", 405: "method_not_allowed", 400: "invalid_request",
                413: "payload_too_large", 426: "upgrade_required"}.get(status, "internal_error")
        return status, code, str(exc) or code, None
    log.error("unhandled error in %s", action, exc_info=exc)
    return 500, f"{action}_failed" if action else "internal_error", "internal error", None


def handle_error(request: Request, exc: BaseException) -> HTTPResponse:
    action = getattr(request.route, "ctx", None)
    action = getattr(action, "action", "") if action is not None else ""
    status, code, message, details = classify(exc, action)
    if request.path.startswith(AEROLVM_PREFIX):
        return aerolvm_error(status, message)
    retry = getattr(exc, "retry_after", None)  # a template still being created: the SDKs retry
    return envelope(status, code, message, details, headers={"Retry-After": str(retry)} if retry else None)
