"""The pure part of contexts: the create request as the SDKs send it, exec input and output, states."""
from __future__ import annotations

import pytest

from session_supervisor.domain.model.contexts import (
    READY_TOKEN,
    exec_input,
    final_state,
    normalize_exec_output,
    parse_create_context,
    parse_resize,
)
from session_supervisor.domain.model.errors import InvalidRequestError


def test_a_repl_request_gets_its_preset_a_terminal_and_the_ready_prompt():
    request = parse_create_context({"type": "repl", "repl": {"alias": "Python3"}, "env_vars": {" K ": "v"}})
    assert (request.type, request.alias, request.terminal) == ("repl", "python", (24, 80))
    assert request.env == {"K": "v"} and request.extra_env["PYTHONUNBUFFERED"] == "1"
    assert READY_TOKEN in " ".join(request.command)


def test_a_cmd_request_keeps_its_argv_and_runs_on_pipes_unless_a_pty_is_asked_for():
    request = parse_create_context({"type": "cmd", "cmd": {"command": ["sh", "-c", "x"]}, "wait_until_done": True,
                                    "ttl_sec": 5, "idle_timeout_sec": 2})
    assert (request.command, request.terminal, request.wait_until_done) == (["sh", "-c", "x"], None, True)
    assert (request.ttl_s, request.idle_timeout_s) == (5, 2)
    assert parse_create_context({"cmd": {"command": ["x"]}, "pty_size": {"rows": 5, "cols": 7}}).terminal == (5, 7)


@pytest.mark.parametrize("body", [
    {"type": "shell"}, {"type": "repl", "repl": {"alias": "cobol"}}, {"type": "cmd"},
    {"type": "cmd", "cmd": {"command": "ls"}}, {"type": "cmd", "cmd": {"command": ["a\0b"]}},
    {"type": "repl", "cmd": {"command": ["x"]}}, {"type": "cmd", "cmd": {"command": ["x"]}, "ttl_sec": -1},
    {"type": "cmd", "cmd": {"command": ["x"]}, "pty_size": {"rows": 0}}, {"type": "cmd", "cmd": {"command": ["x"]},
                                                                        "env_vars": {"A": 1}},
    {"type": "cmd", "cmd": {"command": ["x"]}, "wait_until_done": "yes"}, [], "x",
])
def test_bad_create_requests_are_invalid(body):
    with pytest.raises(InvalidRequestError):
        parse_create_context(body)


def test_exec_adds_a_newline_for_repls_only_and_output_starts_with_one_prompt():
    assert exec_input("repl", "print(1)") == "print(1)\n" and exec_input("repl", "x\n") == "x\n"
    assert exec_input("cmd", "raw") == "raw"
    assert normalize_exec_output("repl", "print(1)\r\n1\r\n" + READY_TOKEN) == READY_TOKEN + "print(1)\r\n1\r\n"
    assert normalize_exec_output("cmd", "out") == "out"


def test_final_states_follow_the_reference():
    assert final_state(0, None) == (0, "stopped")
    assert final_state(3, None) == (3, "crashed")
    assert final_state(-1, 9) == (-1, "killed") and final_state(137, None) == (137, "killed")


def test_resize_needs_positive_sizes():
    assert parse_resize({"rows": 40, "cols": 100}) == (40, 100)
    for body in ({"rows": 0, "cols": 1}, {"rows": True, "cols": 1}, {"rows": 1}):
        with pytest.raises(InvalidRequestError):
            parse_resize(body)
