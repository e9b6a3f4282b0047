"""The composition root: builds every adapter and the domain services around them.

Nothing here runs at import time; ``Container.start`` is called once the event loop
exists (Sanic's before_server_start).
"""
from __future__ import annotations

import asyncio
import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import Callable

from domain.commits import CommitPipeline
from domain.hub import Hub
from domain.sandboxes import SandboxManager
from domain.supervisor import live_record

from .checkpoint import Checkpoints
from .clock import SystemClock
from .pipe_runner import PipeRunner
from .pty_runner import PtyRunner
from .reaper import reap_leftover
from .confined_fs import ConfinedFS
from .runtime import detect_runtime, sandbox_tmp_dir
from .sandbox_dirs import SandboxDirectories
from .settings import Settings
from .writer import WriterThread

log = logging.getLogger(__name__)

# What the daemon passes down to every process (contract §8: daemon env < sandbox < spec).
BASE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ")


@dataclass
class Container:
    settings: Settings
    hub: Hub = field(default_factory=Hub)
    clock: SystemClock = field(default_factory=SystemClock)
    writer: WriterThread | None = None
    pipeline: CommitPipeline | None = None
    manager: SandboxManager | None = None
    # Adapters left as None are the real ones; scenarios and tests pass fakes (infra.fakes).
    pipe_runner: object | None = None
    pty_runner: object | None = None
    reap: Callable[[int, int], object] | None = None
    new_uuid_hex: Callable[[], str] | None = None
    dirs: SandboxDirectories | None = None

    def __post_init__(self) -> None:
        self.runtime = detect_runtime(self.settings.runtime)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.writer = WriterThread(loop)
        self.pipeline = CommitPipeline(self.writer, self.clock.now_ns, self._on_committed)
        base_env = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
        base_env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin")
        dirs = self.dirs = SandboxDirectories(self.settings.data_dir)
        self.manager = SandboxManager(
            files=dirs, pipeline=self.pipeline, hub=self.hub, checkpoints=Checkpoints(dirs),
            pipe_runner=self.pipe_runner or PipeRunner(), pty_runner=self.pty_runner or PtyRunner(),
            runtime=self.runtime, clock=self.clock,
            new_uuid_hex=self.new_uuid_hex or (lambda: uuid.uuid4().hex), base_env=base_env,
            reap=self.reap or reap_leftover)
        await self.manager.start()

    def sandbox_fs(self, sandbox_id: str) -> ConfinedFS:
        """The file API's view of one sandbox: its /workspace, and its /tmp when that is on disk
        (bwrap binds it; under the host runtime /tmp is the host's, so it is not offered)."""
        workspace = self.dirs.workspace(sandbox_id)
        areas = {"/workspace": workspace}
        tmp = sandbox_tmp_dir(workspace) if self.runtime.name != "host" else None
        if tmp is not None:
            areas["/tmp"] = tmp
        return ConfinedFS(areas)

    def _on_committed(self, supervisor, aggregate, events: list) -> None:
        sessions = supervisor.sessions
        if aggregate.id not in sessions:
            return
        supervisor.committed_seq[aggregate.id] = events[-1].originator_version
        if self.hub.has_subscribers(aggregate.id):
            self.hub.publish(aggregate.id, [live_record(aggregate.id, event) for event in events])
        if supervisor.on_commit is not None:
            supervisor.on_commit(aggregate)

    async def stop(self) -> None:
        if self.manager is not None:
            await self.manager.shutdown()
        if self.writer is not None:
            await asyncio.to_thread(self.writer.close)
