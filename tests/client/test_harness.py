"""``HarnessDriver`` with the stand-in harness: handshake, conversation, automatic recovery, deadlines.

The sessions use the presets with the stand-in as the executable, HOME in a
temporary directory (the server runs the ``host`` runtime here) and
FAKE_HARNESS_TRACE=1, so each attempt's stderr in the journal shows which
native requests reached it.
"""
from __future__ import annotations

import pytest

from session_supervisor.client.harness import HarnessDriver, HarnessError, HarnessTimeout, harness_spec
from session_supervisor.client.harness_state import LineBuffer
from tests.client.conftest import standin

TURN_OK = {"FAKE_HARNESS_TURN": "ok", "FAKE_HARNESS_TRACE": "1"}


def harness_session(client, sandbox, harness, home, env=None):
    spec = harness_spec(harness, executable=standin(harness), home=str(home), env={**TURN_OK, **(env or {})})
    return client.create_session(sandbox, spec)


def traces(client, sandbox, session_id, attempt_id) -> list[str]:
    """The native verbs the given attempt received, from its stderr in the journal."""
    text = b"".join(e.data for e in client.iter_events(sandbox, session_id, follow=False, skip_gap=True)
                    if e.type == "output" and e.stream == "stderr" and e.attempt_id == attempt_id)
    return [line.split(" ", 2)[1] + " " + line.split(" ", 2)[2] for line in text.decode().splitlines()
            if line.startswith("trace ")]


def open_with_content(driver, harness):
    """Open a conversation and give it one exchange, so the harness has persisted it."""
    if harness == "claude-code":
        return driver.open_conversation(prompt="hello")
    native_id = driver.open_conversation()
    if harness == "codex":
        driver.call("turn/start", {"threadId": native_id, "input": [{"type": "text", "text": "hi"}]})
        driver.wait_notification(lambda r: r.get("method") == "turn/completed", timeout=15)
    elif harness == "pi":
        driver.call("prompt", {"message": "hi"})
        driver.wait_notification(lambda r: r.get("type") == "agent_settled", timeout=15)
    return native_id


def resumed_id(driver, harness, native_id):
    """One ordinary call on the new attempt; returns the native id the harness reports back."""
    if harness == "codex":
        return driver.call("thread/read", {"threadId": native_id}, timeout=20)["thread"]["id"]
    if harness == "opencode":
        result = driver.call("session/prompt", {"sessionId": native_id,
                                                "prompt": [{"type": "text", "text": "again"}]}, timeout=20)
        assert result["stopReason"] == "end_turn"
        return native_id
    if harness == "claude-code":
        return driver.call("user", {"content": "again"}, timeout=20)["session_id"]
    state = driver.call("get_state", {}, timeout=20)
    assert state["messageCount"] == 2, state  # the resumed file's history
    return state["sessionId"]


RESUME_VERB = {"codex": "thread/resume", "opencode": "session/load"}


@pytest.mark.parametrize("harness", ["codex", "claude-code", "opencode", "pi"])
def test_after_the_attempt_is_replaced_the_next_call_succeeds_on_the_same_native_conversation(
        client, sandbox, tmp_path, harness):
    session = harness_session(client, sandbox, harness, tmp_path / "home")
    with HarnessDriver(client, sandbox, session.id, harness, state_path=tmp_path / "state.json") as driver:
        native_id = open_with_content(driver, harness)
        assert native_id
        first_attempt = driver.state.attempt_id

        replaced = client.create_attempt(sandbox, session.id, replace_current=True)
        assert replaced.attempt_id != first_attempt

        assert resumed_id(driver, harness, native_id) == native_id
        current = client.get_session(sandbox, session.id).attempt_id
        assert driver.state.attempt_id == current != first_attempt
        assert driver.recoveries == 1
    verbs = [t.split(" ")[0] for t in traces(client, sandbox, session.id, current)]
    assert verbs[0] in ("initialize", "control:initialize", "get_state"), verbs  # a fresh handshake
    if harness in RESUME_VERB:
        assert RESUME_VERB[harness] in verbs and native_id in " ".join(traces(client, sandbox, session.id, current))
    else:  # claude and pi resume through their argv
        assert native_id in " ".join(client.get_session(sandbox, session.id).spec["command"])


def test_the_driver_state_survives_a_restart_of_the_client_process(client, sandbox, tmp_path):
    session = harness_session(client, sandbox, "codex", tmp_path / "home")
    state = tmp_path / "state.json"
    with HarnessDriver(client, sandbox, session.id, "codex", state_path=state) as first:
        thread = open_with_content(first, "codex")
        seq = first.state.last_seq
    with HarnessDriver(client, sandbox, session.id, "codex", state_path=state) as second:
        assert second.state.last_seq >= seq and second.native["thread_id"] == thread
        assert second.call("thread/read", {"threadId": thread})["thread"]["id"] == thread
        attempt = second.state.attempt_id
    assert [t.split(" ")[0] for t in traces(client, sandbox, session.id, attempt)].count("initialize") == 1

    client.create_attempt(sandbox, session.id, replace_current=True)  # while no client is running
    with HarnessDriver(client, sandbox, session.id, "codex", state_path=state) as third:
        assert third.call("thread/read", {"threadId": thread})["thread"]["id"] == thread
        assert third.state.attempt_id != attempt


def test_a_call_past_its_deadline_sends_the_harness_own_cancel(client, sandbox, tmp_path):
    session = harness_session(client, sandbox, "opencode", tmp_path / "home", {"FAKE_HARNESS_TURN": "hang"})
    with HarnessDriver(client, sandbox, session.id, "opencode") as driver:
        native = driver.open_conversation()
        with pytest.raises(HarnessTimeout):
            driver.call("session/prompt", {"sessionId": native, "prompt": [{"type": "text", "text": "x"}]},
                        timeout=0.5)
        late = driver.wait_notification(lambda r: "result" in r, timeout=15)
        assert late["result"]["stopReason"] == "end_turn"  # the cancelled prompt, answered after cancel
        attempt = driver.state.attempt_id
    assert "session/cancel" in [t.split(" ")[0] for t in traces(client, sandbox, session.id, attempt)]


def test_codex_turn_deadline_interrupts_the_turn(client, sandbox, tmp_path):
    session = harness_session(client, sandbox, "codex", tmp_path / "home", {"FAKE_HARNESS_TURN": "hang"})
    with HarnessDriver(client, sandbox, session.id, "codex") as driver:
        thread = driver.open_conversation()
        turn = driver.call("turn/start", {"threadId": thread, "input": [{"type": "text", "text": "x"}]})
        assert turn["turn"]["status"] == "inProgress"
        driver.wait_notification(lambda r: r.get("method") == "turn/started", timeout=15)
        with pytest.raises(HarnessTimeout):
            driver.wait_notification(lambda r: r.get("method") == "turn/completed", timeout=0.5)
        done = driver.wait_notification(lambda r: r.get("method") == "turn/completed", timeout=15)
        assert done["params"]["turn"]["status"] == "interrupted"


def test_stdout_is_framed_by_line_feeds_never_per_chunk():
    buffer = LineBuffer()
    assert buffer.feed("att-1", b'{"a":') == []
    assert buffer.feed("att-1", b'1}\r\n{"b"') == [b'{"a":1}']
    assert buffer.feed("att-1", b":2}\n\n") == [b'{"b":2}', b""]
    assert buffer.feed("att-2", b'}\n') == [b"}"]  # a new attempt drops the old partial line
    assert buffer.feed("att-2", b'{"c":3}') == [] and buffer.pending == b'{"c":3}'


def test_the_presets_follow_the_harness_protocols():
    codex = harness_spec("codex")
    assert codex["command"] == ["codex", "app-server", "--stdio"]
    assert codex["cwd"] == "/workspace" and codex["env"]["HOME"] == "/workspace"
    assert codex["io"] == {"mode": "pipes"} and codex["readiness"] == {"type": "process"}
    assert codex["lifecycle"] == {"restart": {"policy": "on_failure"}, "runtime_recovery": "restart"}
    claude = harness_spec("claude-code", extra_args=["--model", "x"])["command"]
    assert claude[-3:] == ["--allowedTools", "Bash", "Edit"] and "--verbose" in claude and "--model" in claude
    assert harness_spec("opencode")["command"] == ["opencode", "acp", "--cwd", "/workspace"]
    assert harness_spec("pi")["command"] == ["pi", "--mode", "rpc"]


def test_a_new_runtime_generation_after_pause_and_resume_is_recovered_the_same_way(client, sandbox, tmp_path):
    session = harness_session(client, sandbox, "codex", tmp_path / "home")
    with HarnessDriver(client, sandbox, session.id, "codex") as driver:
        thread = open_with_content(driver, "codex")
        assert driver.state.runtime_generation == 1
        client.pause_sandbox(sandbox)
        assert client.resume_sandbox(sandbox).resumed
        assert driver.call("thread/read", {"threadId": thread}, timeout=30)["thread"]["id"] == thread
        assert driver.state.runtime_generation == 2
        assert driver.state.attempt_id == client.get_session(sandbox, session.id).attempt_id


def test_a_driver_used_without_with_or_start_starts_its_event_stream_by_itself(client, sandbox, tmp_path):
    session = harness_session(client, sandbox, "pi", tmp_path / "home")
    driver = HarnessDriver(client, sandbox, session.id, "pi")  # neither `with` nor start()
    try:
        state = driver.call("get_state", {}, timeout=20)
        assert state["sessionId"]
    finally:
        driver.close()


def test_a_closed_driver_refuses_at_once_instead_of_waiting_for_its_deadline(client, sandbox, tmp_path):
    session = harness_session(client, sandbox, "pi", tmp_path / "home")
    driver = HarnessDriver(client, sandbox, session.id, "pi")
    driver.close()
    with pytest.raises(HarnessError, match="closed"):
        driver.call("get_state", {}, timeout=60)
