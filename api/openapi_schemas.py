"""JSON Schemas (OpenAPI 3.1 / JSON Schema 2020-12) of both APIs, from the contracts.

The session spec, the resources, the small bodies (inputs, signals, resize), the WebSocket
frames; the sandbox bodies; the AeroLVM facade's shapes.
Response schemas say what the server sends (optional fields omitted, never
null); request schemas say what a valid request is.
"""
from __future__ import annotations

INT32 = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
INT64 = {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
SIGNED32 = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
UINT16 = {"type": "integer", "minimum": 0, "maximum": 65535}
STR = {"type": "string"}
BOOL = {"type": "boolean"}
TIME = {"type": "string", "format": "date-time"}
STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
BASE64 = {"type": "string", "contentEncoding": "base64"}
# What the server decodes (strict, padded): generators then send input it accepts.
STRICT_BASE64 = {**BASE64, "pattern": r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"}
NO_NUL = {"type": "string", "pattern": r"^[^\u0000]*$"}  # execve and paths would cut at a NUL
PROGRAM = {"type": "string", "pattern": r"^[^\u0000]*[^\s\u0000][^\u0000]*$"}  # argv[0]: not blank either


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(properties: dict, required: tuple = (), **extra) -> dict:
    schema = {"type": "object", "properties": properties, **extra}
    if required:
        schema["required"] = list(required)
    return schema


def enum(*values: str) -> dict:
    return {"type": "string", "enum": list(values)}


def array(items: dict, **extra) -> dict:
    return {"type": "array", "items": items, **extra}


def nullable(schema: dict) -> dict:
    return {"oneOf": [schema, {"type": "null"}]}


PHASES = enum("pending", "starting", "running", "paused", "stopping", "stopped", "exited", "backoff",
              "failed", "suspended")
SANDBOX_STATUS = enum("starting", "running", "paused", "terminating", "failed")

_TERMINAL = obj({"rows": UINT16, "cols": UINT16, "term": STR})
_RESTART = obj({"policy": enum("never", "on_failure", "always"), "max_restarts": INT32,
                "window_seconds": INT32, "initial_backoff_ms": INT32, "max_backoff_ms": INT32})
_LIFECYCLE = obj({"desired_state": enum("running", "stopped"), "restart": _RESTART,
                  "runtime_recovery": enum("restart", "stop"), "idle_timeout_seconds": INT64,
                  "max_lifetime_seconds": INT64, "stop_grace_period_seconds": INT32})
_READINESS = obj({"type": enum("process", "delay", "output"), "delay_ms": INT32, "output": STR,
                  "timeout_ms": INT32})
_RETENTION = obj({"max_bytes": INT64, "max_age_seconds": INT64})
_SPEC_FIELDS = {
    "name": STR,
    "command": array(NO_NUL, minItems=1, prefixItems=[PROGRAM]),
    "cwd": STR, "env": STR_MAP,
    "io": obj({"mode": enum("pipes", "pty"), "terminal": _TERMINAL}),
    "lifecycle": _LIFECYCLE, "readiness": _READINESS, "event_retention": _RETENTION,
}

SESSIONS = {
    "ErrorEnvelope": obj({"success": {"const": False}, "error": obj(
        {"code": STR, "message": STR, "details": {"description": "e.g. {earliest, latest} on a 410"}},
        ("code", "message"))}, ("success", "error")),
    "SessionSpec": obj(_SPEC_FIELDS, ("command",),
                       description="ExecutionSessionSpec; the server applies every default."),
    "NormalizedSessionSpec": obj(_SPEC_FIELDS, ("command", "io", "lifecycle", "readiness", "event_retention")),
    "Cursor": obj({"earliest": INT64, "latest": INT64}, ("earliest", "latest")),
    "Attempt": obj({"id": STR, "number": INT64, "runtime_generation": INT64, "pid": INT32,
                    "started_at": TIME, "finished_at": TIME, "exit_code": SIGNED32, "signal": STR,
                    "reason": STR}, ("id", "number", "runtime_generation")),
    "AttemptRecord": obj({"id": STR, "number": INT64, "runtime_generation": INT64, "start_reason": STR,
                          "pid": INT32, "started_at": TIME, "ready_at": TIME, "finished_at": TIME,
                          "exit_code": SIGNED32, "signal": STR, "reason": STR},
                         ("id", "number", "runtime_generation")),
    "Session": obj({"id": STR, "spec": ref("NormalizedSessionSpec"), "spec_version": INT64, "phase": PHASES,
                    "runtime_generation": INT64, "attempt": ref("Attempt"), "restart_count": INT32,
                    "cursor": ref("Cursor"), "created_at": TIME, "updated_at": TIME, "last_activity_at": TIME},
                   ("id", "spec", "spec_version", "phase", "runtime_generation", "restart_count", "cursor",
                    "created_at", "updated_at", "last_activity_at")),
    "Event": obj({"seq": INT64, "session_id": STR, "runtime_generation": INT64, "attempt_id": STR,
                  "type": STR, "stream": enum("stdout", "stderr", "pty"), "data_base64": BASE64,
                  "exit_code": SIGNED32, "signal": STR, "reason": STR, "occurred_at": TIME,
                  "input_id": STR, "bytes": INT64, "eof": BOOL, "rows": INT64, "cols": INT64},
                 ("seq", "session_id", "runtime_generation", "type", "occurred_at")),
    "EventPage": obj({"events": array(ref("Event")), "cursor": ref("Cursor")}, ("events", "cursor")),
    "SessionList": obj({"sessions": array(ref("Session"))}, ("sessions",)),
    "AttemptList": obj({"attempts": array(ref("AttemptRecord"))}, ("attempts",)),
    "DesiredStateRequest": obj({"state": enum("running", "stopped")}, ("state",)),
    "AttemptRequest": obj({"replace_current": BOOL}),
    # Some bytes, or the end of input: an input with neither is refused (400).
    "InputRequest": obj({"input_id": {"type": "string", "pattern": r"\S"}, "expected_attempt_id": STR,
                         "data_base64": STRICT_BASE64, "eof": BOOL}, ("input_id",),
                        anyOf=[{"required": ["data_base64"], "properties": {"data_base64": {"minLength": 4}}},
                               {"required": ["eof"], "properties": {"eof": {"const": True}}}]),
    "InputResponse": obj({"input_id": STR, "attempt_id": STR, "accepted": BOOL, "duplicate": BOOL},
                         ("input_id", "attempt_id", "accepted", "duplicate")),
    "SignalRequest": obj({"signal": {"type": "string", "description": "HUP INT QUIT KILL TERM USR1 USR2 "
                                     "STOP CONT WINCH (any case, optional SIG) or 1-64"},
                          "expected_attempt_id": STR}, ("signal",)),
    "SignalResponse": obj({"accepted": BOOL}, ("accepted",)),
    "ResizeRequest": obj({"rows": {**UINT16, "minimum": 1}, "cols": {**UINT16, "minimum": 1},
                          "expected_attempt_id": STR}, ("rows", "cols")),
    "ResizeResponse": obj({"resized": BOOL}),
    "DeleteSessionResponse": obj({"deleted": BOOL}),
    "WsClientMessage": {"oneOf": [
        obj({"type": {"const": "input"}, "input_id": STR, "expected_attempt_id": STR, "data_base64": BASE64,
             "eof": BOOL, "request_id": STR}, ("type", "input_id")),
        obj({"type": {"const": "signal"}, "signal": STR, "expected_attempt_id": STR, "request_id": STR},
            ("type", "signal")),
        obj({"type": {"const": "resize"}, "rows": UINT16, "cols": UINT16, "expected_attempt_id": STR,
             "request_id": STR}, ("type", "rows", "cols"))]},
    "WsServerMessage": {"oneOf": [
        obj({"type": {"const": "event"}, "event": ref("Event")}, ("type", "event")),
        obj({"type": {"const": "ack"}, "request_id": STR}, ("type",)),
        obj({"type": {"const": "error"}, "request_id": STR, "error": STR}, ("type", "error"))]},
}

MEMORY = {"type": "string", "pattern": r"^\s*[0-9]+(?:\.[0-9]+)?(?:Ki|Mi|Gi|Ti|k|K|M|G|T)?\s*$",
          "description": "a Kubernetes quantity from 128Mi to 16Gi"}
SANDBOXES = {
    "SandboxConfig": obj({"env_vars": STR_MAP, "resources": obj({"memory": MEMORY}), "ttl": INT32,
                          "hard_ttl": INT32, "network": ref("SandboxNetworkPolicy"), "webhook": {"type": "object"},
                          "auto_resume": BOOL, "services": array({"type": "object"})}),
    # The SDKs' snapshot_id is accepted and ignored (this server keeps no snapshots), so it is
    # not listed: a documented *_id field that no operation produces reads to link-following
    # tools (schemathesis) as a reference they can never satisfy, and they stop starting
    # their flows with a claim.
    "ClaimRequest": obj({"template": {"type": "string", "enum": ["default", "coding-agent"],
                                      "description": "case-insensitive; unknown templates get 404"},
                         "config": ref("SandboxConfig"),
                         "mounts": {"type": "array", "maxItems": 16, "items": {"$ref": "#/components/schemas/ClaimMount"},
                                    "description": "volumes of the caller's team, bound from the claim until the "
                                                   "sandbox is deleted (TypeScript and Go SDKs)"}}, ("template",),
                        description="snapshot_id (SDK) is accepted and ignored: no snapshots here"),
    # pod_name: what the Go SDK requires where Python requires runtime_id (the same value).
    # A disabled deadline is "0001-01-01T00:00:00Z", never null: Go refuses null or absent.
    "ClaimResponse": obj({"sandbox_id": STR, "status": SANDBOX_STATUS, "runtime_id": STR, "pod_name": STR,
                          "template": STR, "cluster_id": nullable(STR),
                          "bootstrap_mounts": array(ref("MountStatus"))},
                         ("sandbox_id", "status", "runtime_id", "pod_name", "template")),
    "Sandbox": obj({"id": STR, "template_id": STR, "team_id": STR, "status": SANDBOX_STATUS, "paused": BOOL,
                    "auto_resume": BOOL, "runtime_id": STR, "pod_name": STR, "runtime_generation": INT64,
                    "claimed_at": TIME, "created_at": TIME, "updated_at": TIME, "user_id": STR,
                    "expires_at": TIME, "hard_expires_at": TIME,
                    "config": obj({"network": ref("SandboxNetworkPolicy")}), "mounts": array(ref("ClaimMount"))},
                   ("id", "template_id", "team_id", "status", "paused", "auto_resume", "runtime_id", "pod_name",
                    "runtime_generation", "claimed_at", "created_at", "updated_at", "expires_at",
                    "hard_expires_at")),
    "SandboxSummary": obj({"id": STR, "template_id": STR, "status": SANDBOX_STATUS, "paused": BOOL,
                           "runtime_generation": INT64, "created_at": TIME, "updated_at": TIME,
                           "cluster_id": nullable(STR), "expires_at": TIME, "hard_expires_at": TIME},
                          ("id", "template_id", "status", "paused", "runtime_generation", "created_at",
                           "updated_at", "expires_at", "hard_expires_at")),
    "SandboxList": obj({"sandboxes": array(ref("SandboxSummary")), "count": INT64, "has_more": BOOL},
                       ("sandboxes", "count", "has_more")),
    "SandboxStatus": obj({"sandbox_id": STR, "template_id": STR, "team_id": STR, "user_id": STR,
                          "runtime_id": STR, "pod_name": STR, "status": SANDBOX_STATUS, "claimed_at": STR,
                          "created_at": STR, "expires_at": STR, "hard_expires_at": STR,
                          "resource_usage": obj({"workspace_bytes": INT64, "container_memory_usage": INT64,
                                                 "container_memory_limit": INT64, "pids": INT64})}),
    # Only CIDR and port rules are enforced; domain, traffic, protocol and credential rules are
    # refused (400) where the mode would enforce them (domain/model/network.py).
    "SandboxNetworkPolicy": obj({"mode": enum("allow-all", "block-all"), "egress": obj({
        "allowedCidrs": array(STR), "deniedCidrs": array(STR), "allowedPorts": array(ref("PortSpec")),
        "deniedPorts": array(ref("PortSpec")), "allowedDomains": array(STR), "deniedDomains": array(STR)}),
        "credentialBindings": array({"type": "object"})}, ("mode",)),
    "PortSpec": obj({"port": {"type": "integer", "minimum": 1, "maximum": 65535}, "protocol": enum("tcp", "udp"),
                     "endPort": {"type": "integer", "minimum": 1, "maximum": 65535}}, ("port",)),
    "UpdateSandboxRequest": obj({"config": ref("SandboxConfig")}, ("config",)),
    "MemoryRequest": obj({"memory": BOOL}),
    # Only the filesystem is checkpointed: a pause asking for memory gets 400.
    "PauseRequest": obj({"memory": {"const": False}}),
    "PauseResponse": obj({"sandbox_id": STR, "paused": BOOL, "status": SANDBOX_STATUS},
                         ("sandbox_id", "paused")),
    "ResumeResponse": obj({"sandbox_id": STR, "resumed": BOOL, "restored_memory": STR},
                          ("sandbox_id", "resumed")),
    "RefreshRequest": obj({"duration": INT32}),
    "RefreshResponse": obj({"sandbox_id": STR, "expires_at": TIME, "hard_expires_at": TIME},
                           ("sandbox_id", "expires_at", "hard_expires_at")),
    "DeleteSandboxResponse": obj({"message": STR}),
    "Health": obj({"status": enum("ok", "starting")}, ("status",)),
}

AEROLVM = {
    "AeroError": obj({"error": STR}, ("error",)),
    "AeroSandboxCreate": obj({"image": {"type": "string", "pattern": r"\S"}, "name": STR, "tags": STR_MAP,
                              "env": STR_MAP, "mounts": array({}), "platform_volumes": array({})}, ("image",)),
    "AeroSandbox": obj({"id": STR, "name": STR, "tags": STR_MAP, "image": STR, "status": STR, "env": STR_MAP,
                        "created_at": TIME, "updated_at": TIME}, ("id",)),
    "AeroSandboxList": array(ref("AeroSandbox")),
    "AeroSessionCreate": obj({"name": STR, "argv": array(NO_NUL, prefixItems=[PROGRAM]), "command": STR,
                              "workdir": STR, "workDir": STR, "env": STR_MAP, "pty": BOOL, "cols": UINT16,
                              "rows": UINT16}),
    "AeroSession": obj({"id": STR, "name": STR, "argv": array(STR), "workdir": STR, "pty": BOOL,
                        "status": enum("pending", "running", "exited", "killed", "failed"),
                        "exit_code": SIGNED32, "exit_signal": STR, "created_at": TIME, "started_at": TIME,
                        "exited_at": TIME, "recording": BOOL, "bytes": INT64, "attached": INT32},
                       ("id", "argv", "status")),
    "AeroSessionList": obj({"sessions": array(ref("AeroSession"))}, ("sessions",)),
    "AeroSignalRequest": obj({"signal": {"type": "string", "description": "INT TERM KILL HUP QUIT, …"}},
                             ("signal",)),
    "AeroResizeRequest": obj({"cols": UINT16, "rows": UINT16}, ("cols", "rows")),
    "AeroStatus": obj({"status": {"const": "ok"}}, ("status",)),
    "AeroAttachFrames": {"description": "Client: binary frames = stdin; text {type: resize|signal|close}. "
                         "Server: binary 0x01+stdout / 0x02+stderr; text {type: exit, code, signal?} or "
                         "{type: error, message}.", "type": "object"},
}

ALL = {**SESSIONS, **SANDBOXES, **AEROLVM}
