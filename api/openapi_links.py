"""OpenAPI links: which response feeds which call, so that a stateful client follows the flows.

A link says "take this value from that response and put it in this parameter of that
operation". Without links a fuzzer (schemathesis' stateful phase) draws random ids and
gets 404s; with them it claims a sandbox and then works on that sandbox, creates a
session and then writes to it, starts a context and then drives it, writes input and
then reads the events. Each flow below is one source response and the calls it enables;
a link is named after the operation it leads to (``replay_*`` repeats the same request,
which must be idempotent).
"""
from __future__ import annotations

SB = "/api/v1/sandboxes"
AERO = "/v1/sandboxes"
HTTP_METHODS = ("get", "put", "post", "delete", "patch")

SANDBOX_FROM_PATH = {"sandbox_id": "$request.path.sandbox_id"}
SESSION_FROM_PATH = {**SANDBOX_FROM_PATH, "session_id": "$request.path.session_id"}
# The fencing field the session calls accept: the attempt the client saw.
FENCED = {"requestBody": {"expected_attempt_id": "$response.body#/data/attempt/id"}}


def _operations(paths: dict) -> dict[str, tuple[str, str, dict]]:
    """operationId -> (path, method, operation)."""
    return {op["operationId"]: (path, method, op) for path, item in paths.items()
            for method, op in item.items() if method in HTTP_METHODS}


def _path_params(path: str) -> frozenset[str]:
    return frozenset(part[1:-1] for part in path.split("/") if part.startswith("{"))


def _targets(ops: dict, prefix: str, params: set[str]) -> list[str]:
    """Every operation under ``prefix`` whose path parameters are exactly ``params``."""
    return [op_id for op_id, (path, _, _) in ops.items()
            if path.startswith(prefix + "/{") and _path_params(path) == params]


def _link(target: str, parameters: dict, **extra) -> dict:
    return {"operationId": target, "parameters": parameters, **extra}


def flows(ops: dict) -> list[tuple[str, str, str, dict]]:
    """(source operationId, status, link name, link) for every flow of both APIs."""
    out = []

    def add(source: str, status: str, targets, parameters: dict, extra: dict | None = None):
        for target in targets:
            out.append((source, status, target, _link(target, parameters, **(extra or {}).get(target, {}))))

    # A claimed sandbox: every call on that sandbox.
    # Every call on it follows from the claim alone, so any interleaving of pause, resume,
    # refresh, updates, network changes and delete on one sandbox is reachable; a link
    # between two of those calls would make each of them a starting point for a fuzzer
    # (a POST with outgoing links), drawn with random ids.
    add("claim_sandbox", "201", _targets(ops, SB, {"sandbox_id"}),
        {"sandbox_id": "$response.body#/data/sandbox_id"})
    # A created session: every call on that session; input, signals and resizes fenced to
    # the attempt the create answered with.
    add("create_session", "201", _targets(ops, SB, {"sandbox_id", "session_id"}),
        {**SANDBOX_FROM_PATH, "session_id": "$response.body#/data/id"},
        {name: FENCED for name in ("write_session_input", "signal_session", "resize_session_terminal")})
    out.append(("create_session", "201", "replay_create_session", _link(
        "create_session", {**SANDBOX_FROM_PATH, "header.Idempotency-Key": "$request.header.Idempotency-Key"},
        requestBody="$request.body", **{"x-schemathesis": {"merge_body": False}})))
    # A new attempt: input and signals fenced to it.
    add("create_session_attempt", "201", ("write_session_input", "signal_session"), SESSION_FROM_PATH,
        {name: FENCED for name in ("write_session_input", "signal_session")})
    add("create_session_attempt", "201", ("list_session_attempts",), SESSION_FROM_PATH)
    # Input written: the journal that records it, and the same input again (deduplicated).
    add("write_session_input", "202", ("list_session_events", "list_session_history", "stream_session_events",
                                       "get_session"), SESSION_FROM_PATH)
    out.append(("write_session_input", "202", "replay_write_session_input", _link(
        "write_session_input", SESSION_FROM_PATH, requestBody="$request.body",
        **{"x-schemathesis": {"merge_body": False}})))
    # A started context: every call on that context.
    add("create_context", "201", _targets(ops, SB, {"sandbox_id", "context_id"}),
        {**SANDBOX_FROM_PATH, "context_id": "$response.body#/data/id"})
    # A written file: the calls on that path.
    add("write_file", "200", ("read_file", "stat_file", "delete_file"),
        {**SANDBOX_FROM_PATH, "path": "$request.query.path"})
    add("write_file", "200", ("move_file",), SANDBOX_FROM_PATH,
        {"move_file": {"requestBody": {"source": "$request.query.path"}}})
    # A created API key or team: the calls on it.
    add("create_api_key", "201", _targets(ops, "/api-keys", {"key_id"}), {"key_id": "$response.body#/data/id"})
    add("create_team", "201", _targets(ops, "/teams", {"team_id"}), {"team_id": "$response.body#/data/id"})
    # ... and the new team's keys, for the server's own token acting for that team.
    add("create_team", "201", ("create_api_key", "list_api_keys"), {"header.X-Team-ID": "$response.body#/data/id"})
    # The AeroLVM facade: a created sandbox and a started session.
    add("aero_create_sandbox", "201", _targets(ops, AERO, {"sandbox_id"}), {"sandbox_id": "$response.body#/id"})
    add("aero_create_session", "201", _targets(ops, AERO, {"sandbox_id", "session_id"}),
        {**SANDBOX_FROM_PATH, "session_id": "$response.body#/id"})
    return out


def add_links(paths: dict) -> None:
    """Attach every flow's links to its source response (the document's ``links`` objects)."""
    ops = _operations(paths)
    for source, status, name, link in flows(ops):
        response = ops[source][2]["responses"][status]
        response.setdefault("links", {})[name] = link
