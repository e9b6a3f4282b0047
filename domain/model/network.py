"""A sandbox's network policy (Sandbox0 ``SandboxNetworkPolicy``): validation and defaults.

The wire shape is the SDK's: ``{"mode": "allow-all" | "block-all", "egress": {"allowedCidrs",
"allowedPorts", "deniedCidrs", "deniedPorts", ...}, "credentialBindings": [...]}`` with ports
as ``{"port", "protocol"?, "endPort"?}``. The normalized policy is what the sandbox stores and
what ``GET …/network`` returns.

Only CIDR and port rules are enforced. A rule this server cannot enforce is refused when the
selected mode would enforce it (domain rules, traffic rules, protocol and credential rules, a
proxy, credential bindings): a request that depends on it must not get a weaker sandbox than it
asked for. Fields the selected mode ignores anyway (``deniedDomains`` under block-all,
``allowedDomains`` under allow-all) are stored as given.
"""
from __future__ import annotations

import ipaddress

ALLOW_ALL, BLOCK_ALL = "allow-all", "block-all"
MODES = (ALLOW_ALL, BLOCK_ALL)
PROTOCOLS = ("tcp", "udp")
MAX_RULES = 256  # per list: the rules become one nftables set each, kept small on purpose

# Template defaults: agents need their model API, so both templates start open (the host,
# other sandboxes and link-local metadata addresses stay closed whatever the policy says).
TEMPLATE_POLICIES = {"default": {"mode": ALLOW_ALL}, "coding-agent": {"mode": ALLOW_ALL}}

_CIDR_KEYS = {BLOCK_ALL: "allowedCidrs", ALLOW_ALL: "deniedCidrs"}
_PORT_KEYS = {BLOCK_ALL: "allowedPorts", ALLOW_ALL: "deniedPorts"}
_DOMAIN_KEYS = {BLOCK_ALL: "allowedDomains", ALLOW_ALL: "deniedDomains"}
_UNENFORCED = ("trafficRules", "protocolRules", "credentialRules", "proxy")


class NetworkPolicyError(ValueError):
    """The policy is malformed or asks for a rule this server does not enforce (400)."""


def template_policy(template: str) -> dict:
    return dict(TEMPLATE_POLICIES.get(template, {"mode": ALLOW_ALL}))


def effective_policy(config: dict, template: str) -> dict:
    """The stored policy, or the template's default for sandboxes claimed without one."""
    return config.get("network") or template_policy(template)


def normalize_policy(raw) -> dict:
    if not isinstance(raw, dict):
        raise NetworkPolicyError("network must be an object")
    mode = raw.get("mode")
    if mode not in MODES:
        raise NetworkPolicyError("network.mode must be 'allow-all' or 'block-all'")
    policy: dict = {"mode": mode}
    if raw.get("credentialBindings"):
        raise NetworkPolicyError("network.credentialBindings (credential injection) is not supported by this server")
    egress = raw.get("egress")
    if egress is not None:
        policy["egress"] = _normalize_egress(egress, mode)
    return policy


def _normalize_egress(egress, mode: str) -> dict:
    if not isinstance(egress, dict):
        raise NetworkPolicyError("network.egress must be an object")
    for key in _UNENFORCED:
        if egress.get(key):
            raise NetworkPolicyError(f"network.egress.{key} is not enforced by this server; "
                                     "use allowedCidrs/allowedPorts or deniedCidrs/deniedPorts")
    enforced_domains = _DOMAIN_KEYS[mode]
    if egress.get(enforced_domains):
        raise NetworkPolicyError(f"network.egress.{enforced_domains} (domain rules) is not enforced by this "
                                 f"server; use {_CIDR_KEYS[mode]} instead")
    out: dict = {}
    for key in ("allowedCidrs", "deniedCidrs"):
        if egress.get(key) is not None:
            out[key] = [_cidr(value, key) for value in _bounded_list(egress[key], key)]
    for key in ("allowedPorts", "deniedPorts"):
        if egress.get(key) is not None:
            out[key] = [_port(value, key) for value in _bounded_list(egress[key], key)]
    for key in ("allowedDomains", "deniedDomains"):  # stored only: the selected mode ignores them
        if egress.get(key) is not None:
            values = _bounded_list(egress[key], key)
            if not all(isinstance(v, str) for v in values):
                raise NetworkPolicyError(f"network.egress.{key} must be a list of strings")
            out[key] = values
    return out


def _bounded_list(value, key: str) -> list:
    if not isinstance(value, list):
        raise NetworkPolicyError(f"network.egress.{key} must be a list")
    if len(value) > MAX_RULES:
        raise NetworkPolicyError(f"network.egress.{key} has more than {MAX_RULES} entries")
    return value


def _cidr(value, key: str) -> str:
    if not isinstance(value, str):
        raise NetworkPolicyError(f"network.egress.{key} must be a list of CIDR strings")
    try:
        network = ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        raise NetworkPolicyError(f"network.egress.{key}: {value!r} is not a CIDR") from None
    return str(network)


def _port(value, key: str) -> dict:
    if not isinstance(value, dict):
        raise NetworkPolicyError(f"network.egress.{key} entries must be objects with a port")
    port, end = value.get("port"), value.get("endPort")
    if not _is_port(port) or (end is not None and (not _is_port(end) or end < port)):
        raise NetworkPolicyError(f"network.egress.{key}: ports must be 1-65535 (endPort >= port)")
    out: dict = {"port": port}
    protocol = value.get("protocol")
    if protocol is not None:
        if not isinstance(protocol, str) or protocol.lower() not in PROTOCOLS:
            raise NetworkPolicyError(f"network.egress.{key}: protocol must be 'tcp' or 'udp'")
        out["protocol"] = protocol.lower()
    if end is not None and end != port:
        out["endPort"] = end
    return out


def _is_port(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535
