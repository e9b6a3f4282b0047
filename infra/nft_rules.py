"""The host's nftables rules for sandbox networks, as ``nft -f -`` scripts (pure text).

One ``inet`` table per server (named after its data dir). Traffic from a sandbox enters the
host on the host end of its veth pair, so every rule keys on that interface, or on the interface
group all of this server's host ends are in:

- ``input`` (anything addressed to the host itself: every host address, loopback included,
  so the API too): closed for every sandbox interface, whatever the policy says, except the
  replies of connections the host opened into the sandbox (the ingress to its services): a
  packet in conntrack's reply direction of a connection the host started. Nothing the sandbox
  starts reaches the host.
- ``forward``: a verdict map sends each sandbox interface to its own chain ``sb_<slot>``,
  which drops spoofed source addresses, always closes the sandbox range (other sandboxes),
  link-local metadata addresses and loopback (one named set for all), then applies the policy.
  Replies into a sandbox pass (conntrack); nothing outside may open a connection into one.
- ``postrouting``: allowed traffic leaves through NAT (masquerade).

Every ``nft`` run reads back what its commands touch: adding an element read the elements of
every set of the table, one netlink dump each, and each sandbox chain had an anonymous set of its
own (the always-closed destinations): 80 ms a claim with 1,000 sandboxes, against 20 with ten.
So sandboxes share one named set, and the host ends are matched by their group, not by a set.

Connections already established when a policy changes are kept (conntrack accepts them
before the policy runs); the policy decides new connections.

Kernel tables: the host's conntrack table (``nf_conntrack_max``, 262,144 here) is shared by
every sandbox and by the host itself, and one sandbox sending UDP to 20,000 ports added 14,335
entries in 0.2 s. So each sandbox's new flows go through its own ``sbl_<slot>`` chain first: a
rate limit (``limit rate over N/second``) and a cap on its tracked connections (``ct count over
N``: nftables' connlimit, which counts the connections that passed the rule and forgets them as
conntrack does). Both drop what is over (a dropped first packet never becomes an entry). That
chain is made with the sandbox and never flushed by a policy change, so changing the policy
does not reset the count.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

SANDBOX_RANGE = "10.200.0.0/16"
# Never reachable from a sandbox: other sandboxes (and the host ends of their veths), link-local
# metadata services, loopback and other non-routable destinations.
ALWAYS_CLOSED_V4 = (SANDBOX_RANGE, "169.254.0.0/16", "127.0.0.0/8", "0.0.0.0/8", "224.0.0.0/3")


def base_table(table: str, group: int) -> str:
    """Replace the table atomically: leftovers of a crashed server go with the old one. ``group``:
    the interface group every host end of this server's veth pairs is in (``sandbox_group``)."""
    return f"""\
table inet {table} {{}}
delete table inet {table}
table inet {table} {{
    map egress {{ type ifname : verdict; }}
    set always_closed {{ type ipv4_addr; flags interval; elements = {_set(ALWAYS_CLOSED_V4)}; }}
    chain closed {{
        meta l4proto tcp reject with tcp reset
        reject with icmpx admin-prohibited
    }}
    chain input {{
        type filter hook input priority filter - 10; policy accept;
        iifgroup {group} ct direction reply ct state established accept
        iifgroup {group} goto closed
    }}
    chain forward {{
        type filter hook forward priority filter - 10; policy accept;
        iifname vmap @egress
        iifgroup {group} goto closed
        oifgroup {group} ct state established,related accept
        oifgroup {group} drop
    }}
    chain postrouting {{
        type nat hook postrouting priority srcnat; policy accept;
        iifgroup {group} oifgroup != {group} masquerade
    }}
}}
"""


def sandbox_group(tag: str) -> int:
    """The interface group of a server's sandboxes, from its tag: rules match the group, where a
    set of every sandbox's interface had to be read back whole by nft at each claim."""
    return int(tag, 16) % (2 ** 31 - 2) + 1


def delete_table(table: str) -> str:
    return f"table inet {table} {{}}\ndelete table inet {table}\n"


@dataclass(frozen=True)
class FlowLimits:
    """Per sandbox: tracked connections at most, and new flows a second (0: no rate limit)."""

    conntrack_max: int = 4096
    new_flows_per_second: int = 1000


def sandbox_chain(slot: int) -> str:
    return f"sb_{slot}"


def limits_chain(slot: int) -> str:
    return f"sbl_{slot}"


def limit_rules(table: str, slot: int, limits: FlowLimits) -> str:
    head = f"inet {table} {limits_chain(slot)}"
    lines = [f"add chain {head}", f"flush chain {head}"]
    if limits.new_flows_per_second:
        rate = limits.new_flows_per_second
        lines.append(f"add rule {head} ct state new limit rate over {rate}/second burst {rate} packets drop")
    if limits.conntrack_max:
        lines.append(f"add rule {head} ct state new ct count over {limits.conntrack_max} drop")
    return "\n".join(lines) + "\n"


def attach_sandbox(table: str, slot: int, iface: str, address: str, policy: dict,
                   limits: FlowLimits = FlowLimits()) -> str:
    """Create (or replace) the sandbox's chains and hook its interface in, in one transaction."""
    return (limit_rules(table, slot, limits)
            + policy_rules(table, slot, address, policy)
            + f'add element inet {table} egress {{ "{iface}" : goto {sandbox_chain(slot)} }}\n')


def detach_sandbox(table: str, slot: int, iface: str) -> str:
    chain, limits = sandbox_chain(slot), limits_chain(slot)
    return (f'delete element inet {table} egress {{ "{iface}" }}\n'
            f"flush chain inet {table} {chain}\ndelete chain inet {table} {chain}\n"
            f"flush chain inet {table} {limits}\ndelete chain inet {table} {limits}\n")


def policy_rules(table: str, slot: int, address: str, policy: dict) -> str:
    """The sandbox's chain, flushed and refilled atomically (a live policy change)."""
    chain = sandbox_chain(slot)
    head = f"inet {table} {chain}"
    lines = [f"add chain {head}", f"flush chain {head}",
             f"add rule {head} ip saddr != {address} drop",
             f"add rule {head} meta nfproto ipv6 goto closed",  # IPv4 only (link-local v6 stays local)
             f"add rule {head} ct state established,related accept",
             f"add rule {head} jump {limits_chain(slot)}",  # new flows: rate and count (limit_rules)
             f"add rule {head} ip daddr @always_closed goto closed"]
    egress = policy.get("egress") or {}
    if policy["mode"] == "allow-all":
        lines += [f"add rule {head} {match} goto closed"
                  for match in _matches(egress.get("deniedCidrs"), egress.get("deniedPorts"), either=True)]
        lines.append(f"add rule {head} accept")
    else:
        lines += [f"add rule {head} {match} accept"
                  for match in _matches(egress.get("allowedCidrs"), egress.get("allowedPorts"), either=False)]
    lines.append(f"add rule {head} goto closed")
    return "\n".join(lines) + "\n"


def _matches(cidrs: list | None, ports: list | None, *, either: bool) -> list[str]:
    """Rule matches for a CIDR list and a port list.

    Denied (``either``): a destination in the CIDRs *or* on the ports is closed. Allowed:
    with both lists a destination must be in the CIDRs *and* on one of the ports; with one
    list, that list alone decides. IPv6 CIDRs match nothing: sandboxes have IPv4 egress only.
    """
    v4 = _collapse(cidrs or [])
    by_proto = _ports_by_protocol(ports or [])
    daddr = [f"ip daddr {_set(v4)}"] if v4 else []
    dports = [f"{proto} dport {_set(ranges)}" for proto, ranges in by_proto.items()]
    if either:
        return daddr + dports
    if not cidrs:
        return dports
    if not by_proto:
        return daddr
    return [f"{daddr[0]} {match}" for match in dports] if daddr else []


def _collapse(cidrs: list[str]) -> list[str]:
    """Overlapping prefixes merged: an nftables interval set refuses overlaps."""
    v4 = [ipaddress.ip_network(c) for c in cidrs if ":" not in c]
    return [str(net) for net in ipaddress.collapse_addresses(v4)]


def _ports_by_protocol(ports: list[dict]) -> dict[str, list[str]]:
    ranges: dict[str, list[tuple[int, int]]] = {}
    for spec in ports:
        for proto in [spec["protocol"]] if spec.get("protocol") else ["tcp", "udp"]:
            ranges.setdefault(proto, []).append((spec["port"], spec.get("endPort") or spec["port"]))
    return {proto: [f"{lo}-{hi}" if hi > lo else str(lo) for lo, hi in _merge(spans)]
            for proto, spans in ranges.items()}


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _set(items) -> str:
    return "{ " + ", ".join(items) + " }"
