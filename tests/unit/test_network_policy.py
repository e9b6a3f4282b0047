"""The network policy model: what is accepted, normalized, refused, and the template defaults."""
from __future__ import annotations

import pytest

from session_supervisor.domain.model.network import NetworkPolicyError, effective_policy, normalize_policy, template_policy


def test_the_sdks_wire_shape_is_normalized_and_kept():
    raw = {"mode": "block-all", "egress": {"allowedCidrs": [" 10.1.2.3/16 ", "192.0.2.7"],
                                           "allowedPorts": [{"port": 443, "protocol": "TCP"},
                                                            {"port": 53, "endPort": 53}]}}
    assert normalize_policy(raw) == {"mode": "block-all", "egress": {
        "allowedCidrs": ["10.1.0.0/16", "192.0.2.7/32"],
        "allowedPorts": [{"port": 443, "protocol": "tcp"}, {"port": 53}]}}


@pytest.mark.parametrize("raw, words", [
    (None, "object"), ({"mode": "open"}, "mode"), ({"mode": "allow-all", "egress": []}, "egress"),
    ({"mode": "allow-all", "egress": {"deniedCidrs": "10.0.0.0/8"}}, "list"),
    ({"mode": "allow-all", "egress": {"deniedCidrs": ["nope"]}}, "not a CIDR"),
    ({"mode": "allow-all", "egress": {"deniedPorts": [{"port": 0}]}}, "1-65535"),
    ({"mode": "allow-all", "egress": {"deniedPorts": [{"port": 90, "endPort": 80}]}}, "endPort"),
    ({"mode": "allow-all", "egress": {"deniedPorts": [{"port": True}]}}, "1-65535"),
    ({"mode": "allow-all", "egress": {"deniedPorts": [{"port": 80, "protocol": "sctp"}]}}, "protocol"),
    ({"mode": "allow-all", "egress": {"deniedDomains": ["example.com"]}}, "not enforced"),
    ({"mode": "block-all", "egress": {"allowedDomains": ["example.com"]}}, "not enforced"),
    ({"mode": "block-all", "egress": {"proxy": {"type": "http", "address": "x"}}}, "not enforced"),
    ({"mode": "allow-all", "credentialBindings": [{"ref": "k"}]}, "not supported"),
    ({"mode": "allow-all", "egress": {"deniedCidrs": ["10.0.0.0/8"] * 257}}, "more than"),
])
def test_malformed_or_unenforceable_policies_are_refused(raw, words):
    with pytest.raises(NetworkPolicyError, match=words):
        normalize_policy(raw)


def test_domain_rules_the_mode_ignores_are_stored_as_given():
    raw = {"mode": "block-all", "egress": {"deniedDomains": ["example.com"], "trafficRules": []}}
    assert normalize_policy(raw) == {"mode": "block-all", "egress": {"deniedDomains": ["example.com"]}}


def test_both_templates_default_to_allow_all_and_a_stored_policy_wins():
    assert template_policy("default") == template_policy("coding-agent") == {"mode": "allow-all"}
    assert effective_policy({}, "coding-agent") == {"mode": "allow-all"}
    assert effective_policy({"network": {"mode": "block-all"}}, "default") == {"mode": "block-all"}
