"""The document's OpenAPI links: each names a real operation and real parameters, the flows
link their source to every call they enable, and schemathesis reads them as transitions
that start from a claim (tests/client/test_openapi_stateful.py runs them against a server)."""
from __future__ import annotations

import copy
import re

import pytest

from session_supervisor.api.openapi import document

HTTP_METHODS = {"get", "put", "post", "delete", "patch"}


def operations() -> dict[str, tuple[str, dict]]:
    return {op["operationId"]: (path, op) for path, item in document()["paths"].items()
            for method, op in item.items() if method in HTTP_METHODS}


def links() -> list[tuple[str, str, str, dict]]:
    """(source operationId, status, link name, link) for every link of the document."""
    return [(op["operationId"], status, name, link) for _, op in operations().values()
            for status, response in op["responses"].items() for name, link in response.get("links", {}).items()]


def path_params(path: str) -> set[str]:
    return set(re.findall(r"\{([^}]+)\}", path))


def targets(source: str, status: str) -> set[str]:
    return {link["operationId"] for s, st, _, link in links() if s == source and st == status}


def test_every_link_names_an_operation_and_fills_each_of_its_path_parameters():
    ops = operations()
    assert len(links()) >= 50
    for source, status, name, link in links():
        assert status in ops[source][1]["responses"], (source, status)
        path, target = ops[link["operationId"]]
        declared = path_params(path) | {p["name"] for p in target.get("parameters", [])}
        given = {key.split(".", 1)[-1] for key in link["parameters"]}
        assert given <= declared, (source, name, given - declared)
        assert path_params(path) <= given, f"{source} -> {name} leaves {path_params(path) - given} to chance"


@pytest.mark.parametrize("source,status,prefix,params", [
    ("claim_sandbox", "201", "/api/v1/sandboxes/", {"sandbox_id"}),
    ("create_session", "201", "/api/v1/sandboxes/", {"sandbox_id", "session_id"}),
    ("create_context", "201", "/api/v1/sandboxes/", {"sandbox_id", "context_id"}),
    ("aero_create_sandbox", "201", "/v1/sandboxes/", {"sandbox_id"}),
    ("aero_create_session", "201", "/v1/sandboxes/", {"sandbox_id", "session_id"}),
    ("create_api_key", "201", "/api-keys/", {"key_id"}),
    ("create_team", "201", "/teams/", {"team_id"}),
])
def test_a_created_resource_links_to_every_call_on_it(source, status, prefix, params):
    enabled = {op_id for op_id, (path, _) in operations().items()
               if path.startswith(prefix) and path_params(path) == params}
    assert enabled and enabled <= targets(source, status), sorted(enabled - targets(source, status))


def test_written_input_links_to_the_journal_that_records_it():
    assert {"list_session_events", "stream_session_events", "list_session_history"} <= \
        targets("write_session_input", "202")


def test_schemathesis_reads_every_link_as_a_transition_and_starts_with_a_claim():
    schemathesis = pytest.importorskip("schemathesis")
    from schemathesis.config import SchemathesisConfig
    from schemathesis.specs.openapi.stateful import classify_root_transitions, collect_transitions

    config = SchemathesisConfig.from_dict({"phases": {"stateful": {"inference": {"algorithms": []}}}})
    schema = schemathesis.openapi.from_dict(copy.deepcopy(document()), config=config)
    ops = [result.ok() for result in schema.get_all_operations()]
    transitions = collect_transitions(ops)  # raises on a link it cannot resolve
    assert sum(len(t.outgoing) for t in transitions.operations.values()) == len(links())
    # A documented *_id request field no operation produces would make the claim a fallback
    # entry point, never used while others exist: no flow would start with a real sandbox.
    roots = classify_root_transitions(ops, transitions, schema.analysis.dependency_graph)
    assert "POST /api/v1/sandboxes" in roots.reliable
    assert "POST /v1/sandboxes" in roots.reliable
