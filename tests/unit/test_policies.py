"""Pure decisions of domain/model/policies.py: restart, backoff, duration strings, expiry."""
from __future__ import annotations

import pytest

from session_supervisor.domain.model.policies import (
    RESTART_LIMIT_EXCEEDED,
    backoff_ms,
    decide_restart,
    expiry_due,
    go_duration,
    wants_restart,
)
from session_supervisor.domain.model.spec import normalize_spec

S = 1_000_000_000


def restart(**overrides) -> dict:
    return normalize_spec({"command": ["x"], "lifecycle": {"restart": overrides}})["lifecycle"]["restart"]


@pytest.mark.parametrize(("policy", "code", "expected"), [
    ("never", 1, False), ("never", 0, False),
    ("on_failure", 0, False), ("on_failure", 7, True), ("on_failure", -1, True),
    ("always", 0, True), ("always", 1, True),
])
def test_the_policy_decides_which_exits_restart(policy, code, expected):
    assert wants_restart(policy, code) is expected


def test_defaults_give_250ms_500ms_1s_2s_4s_then_the_limit():
    rules, window, now, delays = restart(policy="on_failure"), [], 0, []
    for _ in range(6):
        decision = decide_restart(rules, 1, window, now)
        if not decision.restart:
            assert decision.reason == RESTART_LIMIT_EXCEEDED
            break
        delays.append(go_duration(decision.delay_ms))
        window = list(decision.window_ns)
        now += decision.delay_ms * 1_000_000
    assert delays == ["250ms", "500ms", "1s", "2s", "4s"]
    assert len(window) == 5


def test_backoff_doubles_up_to_the_cap():
    rules = restart(initial_backoff_ms=250, max_backoff_ms=5000, max_restarts=10)
    assert [backoff_ms(rules, k) for k in range(1, 9)] == [250, 500, 1000, 2000, 4000, 5000, 5000, 5000]


def test_restarts_older_than_the_window_leave_it():
    rules = restart(policy="always", max_restarts=2, window_seconds=60)
    old = [0, 1 * S]
    assert not decide_restart(rules, 0, old, 60 * S).restart  # both exactly 60 s or less ago
    later = decide_restart(rules, 0, old, 61 * S + 1)
    assert later.restart and later.window_ns == (61 * S + 1,) and later.delay_ms == 250


def test_a_restart_exactly_window_seconds_ago_still_counts():
    rules = restart(policy="always", max_restarts=1, window_seconds=60)
    assert decide_restart(rules, 0, [0], 60 * S).reason == RESTART_LIMIT_EXCEEDED
    assert decide_restart(rules, 0, [0], 60 * S + 1).restart


@pytest.mark.parametrize(("ms", "text"), [
    (250, "250ms"), (500, "500ms"), (1000, "1s"), (1500, "1.5s"), (2000, "2s"), (5000, "5s"),
    (60_000, "1m0s"), (90_000, "1m30s"), (3_600_000, "1h0m0s"),
])
def test_delays_read_like_go_durations(ms, text):
    assert go_duration(ms) == text


def lifecycle(**values) -> dict:
    return normalize_spec({"command": ["x"], "lifecycle": values})["lifecycle"]


def test_max_lifetime_counts_from_creation_whatever_the_activity():
    rules = lifecycle(max_lifetime_seconds=2)
    assert not expiry_due(rules, 0, 2 * S, 2 * S - 1)
    assert expiry_due(rules, 0, 2 * S, 2 * S)


def test_idle_timeout_counts_from_the_last_activity():
    rules = lifecycle(idle_timeout_seconds=5)
    assert not expiry_due(rules, 0, 3 * S, 8 * S - 1)
    assert expiry_due(rules, 0, 3 * S, 8 * S)


def test_zero_timeouts_never_expire():
    assert not expiry_due(lifecycle(), 0, 0, 10**6 * S)
