"""RuntimeFactory: what a node makes for a sandbox: its store opened, its runtime built over it, a
new runtime generation over existing state, and its files removed.

It holds the ports a runtime is made of (journals, files, isolation, runners, the commit pipeline,
the hub, the clock) so that the registry, the transitions and the claim receive this one
collaborator instead of the manager that composes them.
"""
from __future__ import annotations

import logging
from typing import Callable

from .commits import CommitPipeline
from .hub import Hub
from .ports import Checkpoints, Clock, Isolator, JournalStores, ProcessRunner, SandboxFiles
from .sandbox_runtime import SandboxRuntime
from .sandbox_store import SandboxStore
from .templates import BUILTIN_ENV

log = logging.getLogger(__name__)


class UnclaimedStore(RuntimeError):
    """A store with no sandbox record: a server died between creating it and the claim's commit."""


class RuntimeFactory:
    def __init__(self, *, files: SandboxFiles, journals: JournalStores, checkpoints: Checkpoints | None,
                 pipeline: CommitPipeline, hub: Hub, pipe_runner: ProcessRunner, pty_runner: ProcessRunner,
                 isolator: Isolator, clock: Clock, new_uuid_hex: Callable[[], str], base_env: dict[str, str],
                 reap: Callable[[int, int], object], fence: Callable[[str], None] | None) -> None:
        self.files = files
        self.journals = journals
        self.checkpoints = checkpoints  # None: pause is unavailable (503)
        self.pipeline = pipeline
        self.hub = hub
        self.pipe_runner = pipe_runner
        self.pty_runner = pty_runner
        self.isolator = isolator
        self.clock = clock
        self.new_uuid_hex = new_uuid_hex
        self.base_env = base_env
        self.reap = reap  # kills what an old generation left behind (pid + start time)
        self.fence = fence  # more than one node: no process starts without a fresh lease

    # ---- stores (sync: run in a thread) --------------------------------------------------------------
    def open_store(self, sandbox_id: str) -> SandboxStore:
        """The sandbox's journal, opened (created when new), with nothing loaded yet."""
        return SandboxStore(self.journals.open(sandbox_id))

    def open_loaded(self, sandbox_id: str) -> SandboxStore:
        """The sandbox's store with every aggregate loaded; UnclaimedStore without a record."""
        store = self.open_store(sandbox_id)
        try:
            store.load(sandbox_id)
        except BaseException:
            store.close()
            raise
        if store.sandbox is None:
            store.close()
            raise UnclaimedStore(f"store of {sandbox_id} has no sandbox record")
        return store

    def stored_record(self, sandbox_id: str):
        try:
            return self.journals.record(sandbox_id)
        except Exception:  # the record itself is what cannot be read
            return None

    def forget_journal(self, sandbox_id: str) -> None:
        """The journal removed: from now on no start brings the sandbox back (its directory left
        without a journal is removed like an unfinished claim's)."""
        self.journals.forget(sandbox_id)

    def remove_files(self, sandbox_id: str) -> None:
        self.journals.remove(sandbox_id)
        if self.checkpoints is not None:
            self.checkpoints.remove(sandbox_id)
        self.files.remove(sandbox_id)

    # ---- runtimes -------------------------------------------------------------------------------------
    def build(self, sandbox_id: str, store: SandboxStore) -> SandboxRuntime:
        """A runtime over the loaded store: its disk mounted, its isolation made, its sweeps on."""
        sandbox = store.sandbox
        rootfs = sandbox.config.get("rootfs")  # what the template gave it at claim (domain/templates.py)
        env = dict(rootfs["env"] if rootfs else BUILTIN_ENV.get(sandbox.template, {}))
        env.update(sandbox.config.get("env_vars") or {})
        self.files.prepare(sandbox_id, rootfs)  # its disk mounted, when it has one
        workspace = self.files.workspace(sandbox_id)
        isolation = self.isolator.isolate(sandbox_id, workspace, sandbox.config)
        runtime = SandboxRuntime(sandbox_id=sandbox_id, store=store, pipeline=self.pipeline,
                                 hub=self.hub, pipe_runner=self.pipe_runner, pty_runner=self.pty_runner,
                                 isolation=isolation, workspace=workspace,
                                 clock=self.clock, new_uuid_hex=self.new_uuid_hex, sandbox_env=env,
                                 base_env=self.base_env, fence=self.fence)
        runtime.start()  # its sweeps end with the runtime
        return runtime

    async def replace(self, runtime: SandboxRuntime) -> None:
        """A new runtime generation over existing state: reap, then recover each session."""
        store = runtime.store
        sandbox = store.sandbox
        now = self.clock.now_ns()
        generation = sandbox.start_new_runtime(now)
        self.pipeline.stage(store, sandbox)
        for session in runtime.list_sessions():
            self._reap_attempt(session)
            action = session.recover(generation, now)
            self.pipeline.stage(store, session)
            if action == "restart":
                await runtime.attempts.start_attempt(session, "runtime_recovered")
        await self.pipeline.flush(store)

    def reap_leftovers(self, store: SandboxStore) -> None:
        """Processes an old generation left running (a crash between a pause's manifest and its release)."""
        for session in store.sessions.values():
            self._reap_attempt(session)

    def _reap_attempt(self, session) -> None:
        """An attempt the old generation left unfinished: its process, if it is still that one, dies."""
        attempt = session.current_attempt
        if attempt is not None and attempt.live and attempt.pid:
            self.reap(attempt.pid, attempt.start_time)
