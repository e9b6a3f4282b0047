"""Sandbox networks over time: one per runtime, its policy persisted in the sandbox's config.

A sandbox's network is created when its runtime starts (claim, resume, a server start) and
removed when the runtime goes (pause, delete, shutdown). The policy lives in ``config.network``
of the Sandbox record, so it survives pause/resume and restarts. A change is enforced before it
is recorded: a failed change leaves the old policy both enforced and stored.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from .model.errors import UnavailableError
from .model.network import effective_policy
from .model.sandbox import Sandbox
from .ports import SandboxNetworks
from .task_owner import TaskOwner

if TYPE_CHECKING:
    from .sandbox_runtime import SandboxRuntime

log = logging.getLogger(__name__)


class NoNetworks:
    """Sessions share the host's network; policies are stored but not enforced."""

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def netns_path(self, sandbox_id: str) -> None:
        return None

    def address(self, sandbox_id: str) -> None:
        return None  # the host's own ports: never reached through a sandbox's routes

    def traffic(self, sandbox_id: str) -> None:
        return None  # the host's own interfaces: nothing of it is the sandbox's alone

    async def attach(self, sandbox_id: str, policy: dict) -> None:
        return None

    async def apply(self, sandbox_id: str, policy: dict) -> None:
        pass

    async def detach(self, sandbox_id: str) -> None:
        pass

    async def release(self, sandbox_id: str) -> None:
        return None

    async def destroy(self, released: object) -> None:
        pass


class SandboxNetworking:
    """The manager's view of its sandboxes' networks: attach at a runtime's start, detach at its
    end, apply a change to a running one (``is_running``: has an open runtime).

    Removing a namespace, its veth pair and its rules takes tens of milliseconds of ``ip`` and
    ``nft``, and nothing waits for it once the runtime's processes are gone: a pause gives the
    sandbox's namespace name up (``release``: renamed aside, under a millisecond) and answers,
    and the rest is destroyed after the answer (``detach_later``); a resume right after makes its
    own network meanwhile. A server killed in between removes every namespace of its data dir
    at its next start."""

    def __init__(self, networks: SandboxNetworks, is_running: Callable[[str], bool]) -> None:
        self.networks = networks
        self.is_running = is_running
        self._tasks = TaskOwner("sandbox networks")

    @staticmethod
    def policy_of(sandbox: Sandbox) -> dict:
        return effective_policy(sandbox.config, sandbox.template)

    async def attach(self, runtime: SandboxRuntime) -> None:
        """Before any attempt of the runtime starts: its sessions join this network."""
        sandbox = runtime.store.sandbox
        try:
            # The launcher looks the namespace up at each launch (infra.bubblewrap).
            await self.networks.attach(sandbox.id, self.policy_of(sandbox))
        except Exception as exc:
            log.exception("sandbox %s: its network could not be created", sandbox.id)
            raise UnavailableError("sandbox network could not be created") from exc

    async def detach(self, sandbox_id: str) -> None:
        try:
            await self.networks.detach(sandbox_id)
        except Exception:  # the next server start removes what is left (infra.netns)
            log.exception("sandbox %s: its network could not be removed", sandbox_id)

    async def detach_later(self, sandbox_id: str) -> None:
        """The network of a runtime whose processes are gone: its name released now, the rest
        destroyed without anyone waiting for it."""
        try:
            released = await self.networks.release(sandbox_id)
        except Exception:  # the next server start removes what is left (infra.netns)
            log.exception("sandbox %s: its network could not be released", sandbox_id)
            return
        if released is not None:
            self._tasks.spawn(self._destroy(sandbox_id, released), f"network removal of {sandbox_id}")

    async def _destroy(self, sandbox_id: str, released: object) -> None:
        try:
            await self.networks.destroy(released)
        except Exception:
            log.exception("sandbox %s: its network could not be removed", sandbox_id)

    async def settle(self) -> None:
        """Shutdown: every removal begun is ended (before the networks themselves close)."""
        await self._tasks.wait(30.0)
        await self._tasks.close()

    async def apply(self, sandbox_id: str, policy: dict) -> None:
        if not self.is_running(sandbox_id):  # paused: the next runtime starts with the stored policy
            return
        try:
            await self.networks.apply(sandbox_id, policy)
        except Exception as exc:
            log.exception("sandbox %s: network policy could not be applied", sandbox_id)
            raise UnavailableError("network policy could not be applied; the previous one stays") from exc
