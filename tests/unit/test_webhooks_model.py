"""Webhook config, bodies, signatures and retries (pure), and where deliveries may go."""
from __future__ import annotations

import pytest
from sandbox0 import verify_webhook_signature

from session_supervisor.domain.model import webhooks as wh
from session_supervisor.domain.model.sandbox import Claimed, PausedSandbox, RuntimeStarted
from session_supervisor.domain.ports import StoredRow
from session_supervisor.infra.webhook_targets import refusal


def test_the_config_is_normalized_and_watch_dir_stays_in_the_workspace():
    assert wh.normalize_webhook({"url": " https://hooks.example/x ", "secret": "s", "watch_dir": "src/../app"}) == \
        {"url": "https://hooks.example/x", "secret": "s", "watch_dir": "/workspace/app"}
    assert wh.normalize_webhook({"url": ""}) is None and wh.normalize_webhook(None) is None
    for bad in ({"url": "file:///etc/passwd"}, {"url": "http://a:b@x/"}, {"url": "http://x:99999/"},
                {"url": "http://x/", "watch_dir": "/workspace/../etc"}, {"url": "http://x/", "secret": 3}, "x"):
        with pytest.raises(wh.WebhookConfigError):
            wh.normalize_webhook(bad)


def test_the_body_is_signed_as_the_sdk_verifies_it():
    raw = wh.body("evt_1", "sandbox.ready", "2026-01-01T00:00:00Z", "sb-1", {"http_port": 1})
    assert raw.startswith(b'{"event_id":"evt_1","event_type":"sandbox.ready","timestamp"')
    assert verify_webhook_signature("k", raw, wh.signature("k", raw))
    assert not verify_webhook_signature("k", raw + b" ", wh.signature("k", raw))


def row(seq, topic, **state):
    return StoredRow(seq, topic, state, seq * 1000)


def test_the_record_says_ready_once_paused_and_resumed_but_not_a_crash_restart():
    rows = [row(1, Claimed.TOPIC), row(2, RuntimeStarted.TOPIC), row(3, PausedSandbox.TOPIC, by_user=True),
            row(4, RuntimeStarted.TOPIC)]
    owed = wh.record_deliveries("sb-1", rows, 0, 8780)
    assert [(seq, kind) for seq, _, kind, _, _ in owed] == [(1, "sandbox.ready"), (3, "sandbox.paused"),
                                                           (4, "sandbox.resumed")]
    assert [kind for _, _, kind, _, _ in wh.record_deliveries("sb-1", rows, 3, 8780)] == ["sandbox.resumed"]
    assert owed[0][1] == wh.record_deliveries("sb-1", rows, 0, 8780)[0][1]  # the same id every time


def test_retries_back_off_from_half_a_second_with_a_cap():
    assert wh.retry_delay(1, 0.0) == 0.5 and wh.retry_delay(2, 0.0) == 1.0 and wh.retry_delay(20, 1.0) == 30.25
    assert wh.retryable(None, "x") and wh.retryable(503, "x") and wh.retryable(429, "x")
    assert not wh.retryable(404, "x") and not wh.retryable(408, "x") and wh.retryable(408, "sandbox.deleted")


@pytest.mark.parametrize("address, allow_local, refused", [
    ("127.0.0.1", False, "a loopback address"), ("::1", False, "a loopback address"),
    ("::ffff:127.0.0.1", False, "a loopback address"), ("169.254.169.254", False, "a link-local address"),
    ("192.0.2.10", False, "an address of this server"), ("203.0.113.9", False, None),
    ("127.0.0.1", True, None), ("10.200.3.2", True, "a sandbox's address"), ("0.0.0.0", True, "not a unicast address"),
    ("224.0.0.1", True, "not a unicast address"),
])
def test_where_a_webhook_may_go(address, allow_local, refused):
    assert refusal(address, allow_local, {"192.0.2.10"}) == refused
