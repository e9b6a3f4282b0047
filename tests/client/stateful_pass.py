"""One bounded run of schemathesis' stateful phase against a real server, summarised.

The run follows the OpenAPI links of ``GET /api/v1/openapi.json`` (api/openapi_links.py):
claim a sandbox and work on it, create a session and drive it, start a context, write
input and read the events. ``run`` returns what the engine reported: the links it
selected and covered (the figures its CLI prints as "N covered / M selected"), every
5xx with its request, and every error the engine reports (a call that did not answer
in time, mostly).

Only the links the document declares are followed: schemathesis' own inference (it
guesses links from field names) is off, so the figures measure the document. Half of
the bodies of a few create calls come from schema-scoped hooks, where a schema cannot
say what works (a program that exists and reads its input, a context that ends at once,
a platform API key); every other value is generated.
"""
from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass, field

import schemathesis
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import events, from_schema

from session_supervisor.api.openapi import document

# A 503 the contracts define as the answer to a state the client made (a paused sandbox
# without auto_resume, a lifecycle transition in progress): documented, not a server error.
DOCUMENTED_503 = ("sandbox is not running and auto_resume is disabled", "sandbox lifecycle barrier is active",
                  "sandbox is waking up", "sandbox is busy",
                  # The contract's 503 for a server that cannot rebase (a rootfs here is a whole disk).
                  "rootfs rebase is not supported by this server")
# A context whose command or cwd the sandbox does not have: the reference's documented 500
# create_failed (as in tests/client/test_openapi_fuzz.py).
DOCUMENTED_CONTEXT_500 = ('"code":"create_failed","message":"context process could not start: exec: ',
                          '"code":"create_failed","message":"context process could not start: chdir ')
# The sessions contract's own 500s for a state the client made: input after its eof closed
# stdin ("500 write_session_input_failed, e.g. process not running when writing after EOF
# already closed stdin") and a new attempt, desired state running or replaced spec whose
# process cannot start ("500 update_session_failed (e.g. ... process failed to start)").
DOCUMENTED_SESSION_500 = (r'"code":"write_session_input_failed","message":"process not running',
                          r'"code":"(update_session|set_session_desired_state|create_session_attempt)_failed",'
                          r'"message":"(exec: |chdir )')
# Programs that exist in every sandbox and live until their input ends, so input,
# signals and events have a running attempt to act on. Both end on SIGTERM (a shell loop
# blocked in ``read`` does not, and every stop would wait out its grace period).
LIVE_COMMANDS = (["/bin/cat"], ["/bin/sed", "-u", "s/^/> /"])
# Contexts that start and end at once: every context call has a real context to act on
# (input and exec then get the documented 410), and a pause has nothing to wait for.
SHORT_CONTEXTS = ({"type": "cmd", "cmd": {"command": ["/bin/echo", "hello"]}},
                  {"cmd": {"command": ["/bin/true"]}, "wait_until_done": True})


@dataclass
class ServerError:
    method: str
    path: str
    body: object
    status: int
    response: str

    def __str__(self) -> str:
        return f"{self.method} {self.path} body={str(self.body)[:200]} -> {self.status} {self.response[:300]}"


@dataclass
class Summary:
    seconds: float = 0.0
    scenarios: int = 0
    selected: int = 0
    total: int = 0
    covered: set[str] = field(default_factory=set)
    server_errors: list[ServerError] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    stop_reason: str = ""

    @property
    def coverage(self) -> float:
        return len(self.covered) / self.selected if self.selected else 0.0

    def __str__(self) -> str:
        return (f"stateful phase: {self.scenarios} scenarios in {self.seconds:.0f} s ({self.stop_reason}); "
                f"links {len(self.covered)} covered / {self.selected} selected / {self.total} total "
                f"({self.coverage:.0%}); {len(self.server_errors)} server errors; "
                f"{len(self.unanswered)} calls without an answer")


def config(base_url: str, token: str, scenarios: int, seed: int) -> SchemathesisConfig:
    """A fixed number of scenarios (``max-time`` would repeat the phase until the time is spent)."""
    return SchemathesisConfig.from_dict({
        "seed": seed, "base-url": base_url, "workers": 1,
        # Nothing carried over from an earlier run (schemathesis' cache, Hypothesis' example
        # database): the same seed gives the same requests.
        "cache": {"enabled": False}, "generation": {"database": "none"},
        "headers": {"Authorization": f"Bearer {token}"},
        # A pause that waits for processes may take seconds; one that never answers is a finding.
        "request-timeout": 15,
        # An event stream replays, then stays open: a few events are enough to check it.
        "max-stream-events": 3,
        "phases": {"examples": {"enabled": False}, "coverage": {"enabled": False},
                   "fuzzing": {"enabled": False},
                   "stateful": {"enabled": True, "max-steps": 20, "inference": {"algorithms": []},
                                "generation": {"max-examples": scenarios}}},
        # Only server errors fail the run here; conformance is the stateless fuzz test's job.
        "checks": {"enabled": False, "not_a_server_error": {"enabled": True}},
        "operations": [{"include-operation-id": "stream_session_events", "request-timeout": 3}],
    })


def add_hooks(schema) -> None:
    """Half of the bodies of these operations are realistic ones instead of generated ones."""
    realistic = {
        # A short grace period: a stop of a process the run sent SIGSTOP waits all of it.
        "create_session": st.sampled_from(LIVE_COMMANDS).map(
            lambda argv: {"command": argv, "lifecycle": {"stop_grace_period_seconds": 1}}),
        "aero_create_session": st.sampled_from(LIVE_COMMANDS).map(lambda argv: {"argv": argv}),
        "create_context": st.sampled_from(SHORT_CONTEXTS),
        # The server's own token makes platform keys; a team key needs the team's X-Team-ID.
        "create_api_key": st.just({"name": "stateful", "scope": "platform"}),
        "claim_sandbox": st.fixed_dictionaries(
            {"template": st.sampled_from(["default", "coding-agent"])},
            optional={"config": st.fixed_dictionaries({}, optional={"auto_resume": st.booleans(),
                                                                     "ttl": st.integers(60, 3600)})}),
    }
    for operation_id, bodies in realistic.items():
        schema.hook("before_generate_body").apply_to(operation_id=operation_id)(_mixed_with(bodies))


def _mixed_with(bodies: st.SearchStrategy):
    def before_generate_body(context, strategy):
        return st.one_of(strategy, bodies)
    return before_generate_body


def operation_ids(*tags: str, also: tuple[str, ...] = ()) -> list[str]:
    """The operations of the document with one of ``tags``, and ``also``."""
    return [op["operationId"] for item in document()["paths"].values() for method, op in item.items()
            if method != "parameters" and (set(op.get("tags", ())) & set(tags) or op["operationId"] in also)]


def run(base_url: str, token: str, *, operations: list[str], scenarios: int, seed: int,
        deadline_s: float) -> Summary:
    """``scenarios`` scenarios over ``operations`` (and the links between them), cut short
    (``stop_reason`` says so) after ``deadline_s`` seconds."""
    schema = schemathesis.openapi.from_dict(copy.deepcopy(document()), config=config(base_url, token,
                                                                                     scenarios, seed))
    # An exclusion, not ``include``: the per-operation entry of the config is an inclusion
    # of its own, and inclusions add up.
    wanted = set(operations)
    schema = schema.exclude(func=lambda ctx: ctx.operation.definition.raw.get("operationId") not in wanted)
    add_hooks(schema)
    summary = Summary()
    started = time.monotonic()
    stream = from_schema(schema).execute()
    stopped = False
    for event in stream:
        if not stopped and time.monotonic() - started > deadline_s:
            stream.stop()  # the scenario under way ends, then the engine finishes
            stopped = True
        if isinstance(event, events.PhaseStarted) and event.payload is not None:
            summary.selected = max(summary.selected, event.payload.transitions_selected)
            summary.total = max(summary.total, event.payload.transitions_total)
        elif isinstance(event, events.ScenarioFinished):
            _record(summary, event.recorder)
        elif isinstance(event, events.NonFatalError):
            summary.unanswered.append(f"{event.label}: {str(event.value)[:200]}")
        elif isinstance(event, events.FatalError):
            raise event.exception
        elif isinstance(event, events.EngineFinished):
            summary.stop_reason = str(event.stop_reason)
    summary.seconds = time.monotonic() - started
    return summary


def _record(summary: Summary, recorder) -> None:
    summary.scenarios += 1
    for node in recorder.cases.values():
        if node.transition is not None and node.is_transition_applied:
            summary.covered.add(node.transition.id)
    for case_id, interaction in recorder.interactions.items():
        response = interaction.response
        if response is None or response.status_code < 500:
            continue
        text = response.content.decode(errors="replace") if response.content else ""
        case = recorder.cases[case_id].value
        if response.status_code == 503 and any(message in text for message in DOCUMENTED_503):
            continue
        if response.status_code == 500 and case.operation.path.endswith("/contexts") \
                and any(message in text for message in DOCUMENTED_CONTEXT_500):
            continue
        if response.status_code == 500 and "/sessions/" in case.operation.path \
                and any(re.search(pattern, text) for pattern in DOCUMENTED_SESSION_500):
            continue
        summary.server_errors.append(ServerError(case.method, case.formatted_path, case.body,
                                                 response.status_code, text))


def tracebacks(log: str) -> list[str]:
    """ERROR lines and tracebacks of a server log, one string each."""
    return [block.strip() for block in re.split(r"\n(?=\d{4}-\d{2}-\d{2} )", log)
            if " ERROR " in block.split("\n", 1)[0] or "Traceback" in block]
