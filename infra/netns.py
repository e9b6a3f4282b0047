"""One network namespace per sandbox, on a veth pair to the host, filtered by nftables.

Each sandbox gets a named namespace (``ip netns``, so ``/run/netns/<name>`` is the handle its
sessions join) holding ``lo`` and ``eth0``, the inner end of a veth pair. The host end
(``sbx<slot>``) and ``eth0`` share the slot's /30 of 10.200.0.0/16: host ``.1``, sandbox
``.2``, the default route via the host. What the sandbox may reach is decided on the host by
the rules of ``infra.nft_rules``; nothing inside the namespace is trusted.

Several servers may share a machine (tests do): each has its own table and namespace prefix,
named after a hash of its data dir, and slots are taken under a host-wide lock, a slot being
free when no ``sbx<slot>`` interface exists. Everything a server creates carries its tag
(namespace names, the host interface's alias), so a server started over the leftovers of a
crashed one removes them before anything else runs.
"""
from __future__ import annotations

import asyncio
import ctypes
import fcntl
import ipaddress
import json
import logging
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import nft_rules
from .instance import instance_tag

if TYPE_CHECKING:
    from .warm_stock import WarmStock

log = logging.getLogger(__name__)

NETNS_DIR = "/run/netns"
LOCK_PATH = "/run/sessiond-netns.lock"
IFACE_PREFIX = "sbx"
GONE_INFIX = "gone-"  # a namespace given up by its sandbox, being removed
WARM_INFIX = "warm-"  # sessiond-<tag>-warm-<hex>: a namespace made ahead, before its sandbox is known
SLOTS = 2 ** 14  # /30s in 10.200.0.0/16
_BASE = int(ipaddress.ip_address("10.200.0.0"))
_TIMEOUT_S = 30


class NetworkSetupError(RuntimeError):
    """A namespace, veth pair or nftables change could not be made."""


@dataclass(frozen=True)
class SandboxNet:
    name: str   # the namespace (``/run/netns/<name>``)
    slot: int
    iface: str  # host end of the veth pair

    @property
    def path(self) -> str:
        return os.path.join(NETNS_DIR, self.name)

    @property
    def host_address(self) -> str:
        return str(ipaddress.ip_address(_BASE + 4 * self.slot + 1))

    @property
    def address(self) -> str:
        return str(ipaddress.ip_address(_BASE + 4 * self.slot + 2))


def netns_available() -> str | None:
    """None when namespaces and nftables can be used here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns, nftables)"
    missing = [tool for tool in ("ip", "nft", "nsenter") if shutil.which(tool) is None]
    if missing:
        return "missing " + ", ".join(missing) + " (apt-get install iproute2 nftables util-linux)"
    # A container may forbid either even to root: try both (nft -c checks without applying).
    probe = f"sessiond-probe-{os.getpid()}"
    try:
        _run(["ip", "netns", "add", probe])
        _run(["ip", "netns", "del", probe])
        _run(["nft", "-c", "-f", "-"], nft_rules.base_table("sessiond_probe", 1))
    except NetworkSetupError as exc:
        _run(["ip", "netns", "del", probe], check=False)
        return str(exc)
    return None


class NetnsNetworks:
    """The ``SandboxNetworks`` port: per-sandbox namespaces with host-side nftables rules."""

    def __init__(self, data_dir: str, limits: nft_rules.FlowLimits = nft_rules.FlowLimits()) -> None:
        self.limits = limits  # per sandbox: its conntrack entries and new flows a second
        self.tag = instance_tag(data_dir)
        self.table = f"sessiond_{self.tag}"
        self.prefix = f"sessiond-{self.tag}-"
        self.group = nft_rules.sandbox_group(self.tag)  # the interface group of its host ends
        self.nets: dict[str, SandboxNet] = {}
        self.warm: WarmStock | None = None  # whole networks made ahead (infra.warm_pool); None: none kept

    # ---- server lifetime ------------------------------------------------------------------
    async def start(self) -> None:
        await asyncio.to_thread(self._start)

    def _start(self) -> None:
        self._remove_leftovers()
        _run(["nft", "-f", "-"], nft_rules.base_table(self.table, self.group))
        # The host routes for its sandboxes (the sandboxes' rules decide what is forwarded).
        with open("/proc/sys/net/ipv4/ip_forward", "w") as knob:
            knob.write("1")
        unreachable = unreachable_resolvers()
        if unreachable:
            log.warning("DNS will not work inside sandboxes: /etc/resolv.conf names %s, which no sandbox "
                        "may reach (the host, loopback or link-local); name an outside resolver there",
                        ", ".join(unreachable))

    async def close(self) -> None:
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        for sandbox_id in list(self.nets):
            self._detach(sandbox_id)
        _run(["nft", "-f", "-"], nft_rules.delete_table(self.table), check=False)

    def _remove_leftovers(self) -> None:
        """Host ends first: deleting one destroys its pair even if a process still holds the
        namespace, so a leftover process of a crashed server is left with loopback only."""
        ifaces = [iface for iface in _host_ifaces()
                  if _read(f"/sys/class/net/{iface}/ifalias") == self.prefix.rstrip("-")]
        for iface in ifaces:
            _run(["ip", "link", "del", iface], check=False)
        names = [name for name in _netns_names() if name.startswith(self.prefix)]
        for name in names:
            _run(["ip", "netns", "del", name], check=False)
        if ifaces or names:
            log.info("removed %d network namespace(s) and %d veth pair(s) left by an earlier server "
                     "over this data dir", len(names), len(ifaces))

    # ---- one sandbox ----------------------------------------------------------------------
    def netns_path(self, sandbox_id: str) -> str | None:
        """The namespace a sandbox's sessions join (the runtime's join hook reads this)."""
        net = self.nets.get(sandbox_id)
        return net.path if net else None

    def address(self, sandbox_id: str) -> str | None:
        """The sandbox's end of its veth pair: the ingress connects there from the host."""
        net = self.nets.get(sandbox_id)
        return net.address if net else None

    def traffic(self, sandbox_id: str) -> dict[str, int] | None:
        """The sandbox's bytes and errors, from its host end's counters (what the host end
        receives, the sandbox transmitted)."""
        net = self.nets.get(sandbox_id)
        if net is None:
            return None
        base = f"/sys/class/net/{net.iface}/statistics/"
        counters = {}
        for ours, theirs in (("transmit", "rx"), ("receive", "tx")):
            for kind in ("bytes", "errors"):
                text = _read(base + f"{theirs}_{kind}")
                if not text.isdigit():
                    return None
                counters[f"{ours}_{kind}"] = int(text)
        return counters

    async def attach(self, sandbox_id: str, policy: dict) -> str:
        return await asyncio.to_thread(self._attach, sandbox_id, policy)

    async def apply(self, sandbox_id: str, policy: dict) -> None:
        net = self.nets.get(sandbox_id)
        if net is not None:
            await asyncio.to_thread(
                _run, ["nft", "-f", "-"], nft_rules.policy_rules(self.table, net.slot, net.address, policy))

    async def detach(self, sandbox_id: str) -> None:
        await asyncio.to_thread(self._detach, sandbox_id)

    async def release(self, sandbox_id: str) -> SandboxNet | None:
        """The sandbox's name given up now, its namespace renamed aside (``…-gone-…``): the next
        runtime's ``attach`` makes its own under that name while this one is ``destroy``ed. A
        server killed in between removes it at its next start (it has this server's prefix)."""
        return await asyncio.to_thread(self._release, sandbox_id)

    async def destroy(self, released: SandboxNet) -> None:
        await asyncio.to_thread(self._destroy, released)

    def _release(self, sandbox_id: str) -> SandboxNet | None:
        net = self.nets.pop(sandbox_id, None)
        if net is None:
            return None
        aside = f"{self.prefix}{GONE_INFIX}{secrets.token_hex(8)}"
        try:
            rename_netns(net.name, aside)
        except OSError:
            self._destroy(net)
            return None
        return SandboxNet(aside, net.slot, net.iface)

    def _attach(self, sandbox_id: str, policy: dict) -> str:
        if sandbox_id in self.nets:
            self._detach(sandbox_id)
        name = self.prefix + sandbox_id
        if os.path.exists(os.path.join(NETNS_DIR, name)):  # a leftover of an earlier runtime
            _run(["ip", "netns", "del", name], check=False)
        net = self._take_warm(name, policy) or self._create(name, policy)
        self.nets[sandbox_id] = net
        return net.path

    def _create(self, name: str, policy: dict) -> SandboxNet:
        """The namespace ``name``, its veth pair and addresses, and its chains with ``policy``."""
        with open(LOCK_PATH, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # other servers on this host pick slots too
            slot = _free_slot()
            net = SandboxNet(name, slot, f"{IFACE_PREFIX}{slot}")
            try:
                _run(["ip", "-batch", "-"],
                     f"netns add {name}\n"
                     f"link add {net.iface} type veth peer name eth0 netns {name}\n"
                     f"link set {net.iface} alias {self.prefix.rstrip('-')}\n"
                     f"link set {net.iface} group {self.group}\n"
                     f"addr add {net.host_address}/30 dev {net.iface}\n"
                     f"link set {net.iface} up\n")
            except NetworkSetupError:
                _run(["ip", "link", "del", net.iface], check=False)
                _run(["ip", "netns", "del", name], check=False)
                raise
        try:
            _disable_ipv6(net.iface)
            _run(["nft", "-f", "-"], nft_rules.attach_sandbox(self.table, net.slot, net.iface, net.address, policy,
                                                              self.limits))
            _run(["ip", "-n", name, "-batch", "-"],
                 "link set lo up\n"
                 f"addr add {net.address}/30 dev eth0\n"
                 "link set eth0 up\n"
                 f"route add default via {net.host_address}\n")
        except BaseException:
            self._destroy(net)
            raise
        return net

    def _detach(self, sandbox_id: str) -> None:
        net = self.nets.pop(sandbox_id, None)
        if net is not None:
            self._destroy(net)

    def _destroy(self, net: SandboxNet) -> None:
        _run(["nft", "-f", "-"], nft_rules.detach_sandbox(self.table, net.slot, net.iface), check=False)
        _run(["ip", "link", "del", net.iface], check=False)
        _run(["ip", "netns", "del", net.name], check=False)

    # ---- the warm pool's networks (infra.warm_pool) -----------------------------------------
    def make_warm(self, policy_key: str) -> SandboxNet:
        """A whole sandbox network for a sandbox not claimed yet (its namespace named
        ``sessiond-<tag>-warm-…``), with the policy a template gives its sandboxes."""
        return self._create(f"{self.prefix}{WARM_INFIX}{secrets.token_hex(8)}", json.loads(policy_key))

    def destroy_warm(self, net: SandboxNet) -> None:
        self._destroy(net)

    def _take_warm(self, name: str, policy: dict) -> SandboxNet | None:
        """A warm network, its namespace renamed to the sandbox's; another template's has its
        policy replaced (one nft transaction), which is still far less than a new one."""
        if self.warm is None:
            return None
        key = policy_key(policy)
        got = self.warm.take(key, any_shape=True)
        if got is None:
            return None
        warm, made_for = got
        try:
            if made_for != key:
                _run(["nft", "-f", "-"], nft_rules.policy_rules(self.table, warm.slot, warm.address, policy))
            rename_netns(warm.name, name)
        except BaseException:
            self._destroy(warm)
            raise
        return SandboxNet(name, warm.slot, warm.iface)


def policy_key(policy: dict) -> str:
    """One string per distinct policy: the warm stock's shape."""
    return json.dumps(policy, sort_keys=True, separators=(",", ":"))


def rename_netns(old: str, new: str) -> None:
    """``ip netns`` has no rename: the namespace's handle is a bind mount of it on a file in
    /run/netns, so bind it on the new name and take the old one away (no process holds it yet)."""
    old_path, new_path = os.path.join(NETNS_DIR, old), os.path.join(NETNS_DIR, new)
    os.close(os.open(new_path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0))
    try:
        _mount(old_path, new_path)
    except OSError:
        os.unlink(new_path)
        raise
    _umount(old_path)
    os.unlink(old_path)


_MS_BIND = 4096
_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str, target: str) -> None:
    if _libc.mount(source.encode(), target.encode(), None, _MS_BIND, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"bind {source} on {target}: {os.strerror(err)}")


def _umount(target: str) -> None:
    if _libc.umount2(target.encode(), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {target}: {os.strerror(err)}")


def remove_everything(data_dir: str) -> None:
    """What a server over ``data_dir`` may have left on this host: namespaces, veth pairs and
    its table (the tests' clean-up after a server they killed)."""
    networks = NetnsNetworks(data_dir)
    networks._remove_leftovers()
    _run(["nft", "-f", "-"], nft_rules.delete_table(networks.table), check=False)


def unreachable_resolvers(resolv_conf: str = "/etc/resolv.conf") -> list[str]:
    """Sandboxes use the host's resolv.conf (bwrap shows them the host's /etc), so its
    nameservers must be outside servers: the host itself, loopback and link-local are closed."""
    local = _host_addresses()
    out = []
    for line in _read(resolv_conf).splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                address = ipaddress.ip_address(parts[1].split("%")[0])
            except ValueError:
                continue
            if (address.is_loopback or address.is_link_local or str(address) in local
                    or address in ipaddress.ip_network(nft_rules.SANDBOX_RANGE)):
                out.append(str(address))
    return out


def _host_addresses() -> set[str]:
    done = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    return {line.split()[3].split("/")[0] for line in done.stdout.splitlines() if len(line.split()) > 3}


def _free_slot() -> int:
    used = {int(name[len(IFACE_PREFIX):]) for name in _host_ifaces()}
    for slot in range(SLOTS):
        if slot not in used:
            return slot
    raise NetworkSetupError("no free sandbox network slot (10.200.0.0/16 is full)")


def _host_ifaces() -> list[str]:
    return [name for name in os.listdir("/sys/class/net")
            if name.startswith(IFACE_PREFIX) and name[len(IFACE_PREFIX):].isdigit()]


def _netns_names() -> list[str]:
    try:
        return os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []


def _disable_ipv6(iface: str) -> None:
    try:
        with open(f"/proc/sys/net/ipv6/conf/{iface}/disable_ipv6", "w") as knob:
            knob.write("1")
    except FileNotFoundError:  # IPv6 disabled on this host
        pass


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _run(argv: list[str], stdin: str = "", check: bool = True) -> None:
    try:
        done = subprocess.run(argv, input=stdin.encode(), capture_output=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkSetupError(f"{argv[0]} failed: {exc}") from exc
    if done.returncode != 0 and check:
        detail = done.stderr.decode(errors="replace").strip()
        raise NetworkSetupError(f"{' '.join(argv)} exited {done.returncode}: {detail}")
    if done.returncode != 0:
        log.debug("%s exited %s: %s", argv, done.returncode, done.stderr.decode(errors="replace").strip())
