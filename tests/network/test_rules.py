"""The generated nftables scripts are accepted by nft itself (``nft -c``: checked, not applied)."""
from __future__ import annotations

import subprocess

import pytest

from session_supervisor.infra import nft_rules

TABLE = "sessiond_rulecheck"
POLICIES = [
    {"mode": "allow-all"},
    {"mode": "block-all"},
    {"mode": "allow-all", "egress": {"deniedCidrs": ["10.9.0.0/16", "10.9.1.0/24", "2001:db8::/32"],
                                     "deniedPorts": [{"port": 25}, {"port": 20, "endPort": 30, "protocol": "tcp"}]}},
    {"mode": "block-all", "egress": {"allowedCidrs": ["192.0.2.0/24"], "allowedPorts": [{"port": 443}]}},
    {"mode": "block-all", "egress": {"allowedPorts": [{"port": 53, "protocol": "udp"}]}},
    {"mode": "block-all", "egress": {"allowedCidrs": ["2001:db8::/32"], "allowedPorts": [{"port": 443}]}},
]


@pytest.mark.parametrize("policy", POLICIES)
def test_nft_accepts_the_table_and_a_sandbox_chain_for_every_policy_shape(policy):
    script = (nft_rules.base_table(TABLE, 7)
              + nft_rules.attach_sandbox(TABLE, 7, "sbx7", "10.200.0.30", policy)
              + nft_rules.policy_rules(TABLE, 7, "10.200.0.30", policy))
    done = subprocess.run(["nft", "-c", "-f", "-"], input=script, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr + "\n" + script


def test_overlapping_cidrs_and_port_ranges_are_merged_before_nft_sees_them():
    rules = nft_rules.policy_rules(TABLE, 1, "10.200.0.6", POLICIES[2])
    assert "ip daddr { 10.9.0.0/16 } goto closed" in rules
    assert "tcp dport { 20-30 } goto closed" in rules and "udp dport { 25 } goto closed" in rules


def test_an_allow_list_of_only_ipv6_cidrs_opens_nothing_over_ipv4():
    rules = nft_rules.policy_rules(TABLE, 1, "10.200.0.6", POLICIES[5]).splitlines()
    opened = [rule for rule in rules if rule.endswith(" accept") and "established" not in rule]
    assert opened == [] and rules[-1].endswith("goto closed")


def test_resolvers_on_the_host_loopback_or_link_local_are_reported_unreachable(tmp_path):
    from session_supervisor.infra.netns import unreachable_resolvers
    conf = tmp_path / "resolv.conf"
    conf.write_text("nameserver 127.0.0.53\nnameserver 203.0.113.53\nnameserver 169.254.169.253\n"
                    "nameserver fe80::1%eth0\n# nameserver 127.0.0.1\nsearch example\n")
    assert unreachable_resolvers(str(conf)) == ["127.0.0.53", "169.254.169.253", "fe80::1"]


def test_nft_accepts_the_per_sandbox_flow_limits_and_a_policy_change_leaves_them_alone():
    limits = nft_rules.FlowLimits(conntrack_max=512, new_flows_per_second=200)
    attach = nft_rules.attach_sandbox(TABLE, 7, "sbx7", "10.200.0.30", POLICIES[0], limits)
    script = nft_rules.base_table(TABLE, 7) + attach + nft_rules.detach_sandbox(TABLE, 7, "sbx7")
    done = subprocess.run(["nft", "-c", "-f", "-"], input=script, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr + "\n" + script
    assert "ct state new ct count over 512 drop" in attach
    assert "limit rate over 200/second burst 200 packets drop" in attach
    assert "sbl_7" not in nft_rules.policy_rules(TABLE, 7, "10.200.0.30", POLICIES[1]).replace("jump sbl_7", "")
