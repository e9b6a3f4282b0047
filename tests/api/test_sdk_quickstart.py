"""The Sandbox0 quickstart, run through the official ``sandbox0==0.10.4`` SDK, unmodified."""
from __future__ import annotations

import base64
import time
import uuid

import pytest

from sandbox0 import SessionCreateOptions, SessionEventOptions
from sandbox0.apispec.models.execution_session_event_retention_spec import (
    ExecutionSessionEventRetentionSpec,
)
from sandbox0.apispec.models.execution_session_input_request import ExecutionSessionInputRequest
from sandbox0.apispec.models.execution_session_io_spec import ExecutionSessionIOSpec
from sandbox0.apispec.models.execution_session_lifecycle_spec import ExecutionSessionLifecycleSpec
from sandbox0.apispec.models.execution_session_phase import ExecutionSessionPhase
from sandbox0.apispec.models.execution_session_readiness_spec import ExecutionSessionReadinessSpec
from sandbox0.apispec.models.execution_session_restart_spec import ExecutionSessionRestartSpec
from sandbox0.apispec.models.execution_session_spec import ExecutionSessionSpec
from sandbox0.apispec.models.execution_session_terminal_spec import ExecutionSessionTerminalSpec
from sandbox0.apispec.types import Unset

STREAM_DEADLINE = 15.0


@pytest.fixture
def sandbox(sdk):
    sb = sdk.sandboxes.claim("default")
    yield sb
    sdk.sandboxes.delete(sb.id)


def collect_until_exit(stream, deadline_s=STREAM_DEADLINE):
    """Events from the SDK stream up to and including ``attempt.exited``.

    Each read is bounded by the client's read timeout; the whole wait by the deadline.
    """
    deadline = time.monotonic() + deadline_s
    seen = []
    for event in stream.iter_events():
        seen.append(event)
        if event.type_ == "attempt.exited":
            return seen
        assert time.monotonic() < deadline, f"no attempt.exited within {deadline_s}s: {seen}"
    raise AssertionError(f"stream ended before attempt.exited: {[e.type_ for e in seen]}")


def test_quickstart_echoes_input_and_reports_a_clean_exit(sandbox):
    spec = ExecutionSessionSpec(command=["/bin/cat"])
    session = sandbox.create_session(
        spec, SessionCreateOptions(idempotency_key=f"quickstart-{uuid.uuid4()}"))
    assert session.phase == ExecutionSessionPhase.RUNNING
    assert session.attempt.number == 1
    attempt_id = session.attempt.id

    with sandbox.watch_session_events(session.id) as stream:
        accepted = sandbox.write_session_input(session.id, ExecutionSessionInputRequest(
            input_id="hello-1", data_base64=base64.b64encode(b"hello\n").decode(),
            expected_attempt_id=attempt_id))
        assert (accepted.input_id, accepted.attempt_id) == ("hello-1", attempt_id)
        assert accepted.accepted is True and accepted.duplicate is False
        sandbox.write_session_input(session.id, ExecutionSessionInputRequest(
            input_id="eof-1", eof=True, expected_attempt_id=attempt_id))
        seen = collect_until_exit(stream)

    echoed = b"".join(base64.b64decode(e.data_base64) for e in seen if e.type_ == "output")
    assert echoed == b"hello\n"
    assert seen[0].seq == 1 and seen[0].type_ == "session.created"
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
    exited = seen[-1]
    assert exited.exit_code == 0 and exited.attempt_id == attempt_id

    after = sandbox.get_session(session.id)
    assert after.id == session.id
    assert after.phase == ExecutionSessionPhase.EXITED
    assert after.attempt.id == attempt_id and after.attempt.exit_code == 0
    assert isinstance(after.attempt.pid, Unset)


def test_creating_again_with_the_same_idempotency_key_returns_the_same_session(sandbox):
    key = f"quickstart-{uuid.uuid4()}"
    first = sandbox.create_session(
        ExecutionSessionSpec(command=["/bin/cat"]), SessionCreateOptions(idempotency_key=key))
    again = sandbox.create_session(
        ExecutionSessionSpec(command=["/bin/cat"]), SessionCreateOptions(idempotency_key=key))
    assert again.id == first.id
    assert again.attempt.id == first.attempt.id and again.spec_version == 1
    assert [s.id for s in sandbox.list_sessions()] == [first.id]


def test_sdk_default_constructed_models_replay_as_the_same_spec(sandbox):
    key = f"defaults-{uuid.uuid4()}"
    first = sandbox.create_session(
        ExecutionSessionSpec(command=["/bin/cat"]), SessionCreateOptions(idempotency_key=key))
    verbose = ExecutionSessionSpec(
        command=["/bin/cat"],
        io=ExecutionSessionIOSpec(terminal=ExecutionSessionTerminalSpec()),
        lifecycle=ExecutionSessionLifecycleSpec(restart=ExecutionSessionRestartSpec()),
        readiness=ExecutionSessionReadinessSpec(),
        event_retention=ExecutionSessionEventRetentionSpec())
    again = sandbox.create_session(verbose, SessionCreateOptions(idempotency_key=key))
    assert again.id == first.id


def test_sdk_pages_the_journal_it_streamed(sandbox):
    session = sandbox.create_session(ExecutionSessionSpec(command=["/bin/cat"]))
    sandbox.write_session_input(session.id, ExecutionSessionInputRequest(input_id="e", eof=True))
    with sandbox.watch_session_events(session.id) as stream:
        streamed = collect_until_exit(stream)
    page = sandbox.list_session_events(session.id, SessionEventOptions(after=0, limit=1000))
    assert [e.seq for e in page.events][: len(streamed)] == [e.seq for e in streamed]
    assert page.cursor.latest >= streamed[-1].seq and page.cursor.earliest == 1
    second = sandbox.list_session_events(session.id, SessionEventOptions(after=1, limit=1))
    assert [e.seq for e in second.events] == [2]
