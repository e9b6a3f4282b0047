"""SandboxContexts: the contexts of one sandbox (processes without a durable journal).

A context is started exactly as a session attempt is (the host's ``launch_process``,
i.e. the same runtime and isolation, then the pipe or PTY runner), but nothing is
recorded: its output goes to a bounded memory buffer and to live subscribers (the
context WebSocket, an exec waiting for its prompt). Contexts end with the runtime
(``end_all`` and ``finish``, from the runtime's release), on delete, and by their lifetime rules:
``ttl_sec`` since creation, ``idle_timeout_sec`` since the last activity, and
``FINISHED_TTL_S`` after the process exited.
"""
from __future__ import annotations

import asyncio
import codecs
import errno
import logging
import signal as signals

from .context_output import EXEC_OUTPUT_LIMIT, ExecOutput, ExecTail, dropped_marker, enforce_sandbox_limit
from .context_state import EXIT, Context, Subscriber, process_ended, process_started
from .model.contexts import (
    READY_TOKEN,
    ContextRequest,
    exec_input,
    final_state,
    normalize_exec_output,
)
from .model.errors import (
    ContextFinishedError,
    ContextNotFoundError,
    ContextNotRunningError,
    ContextPtyUnavailableError,
    ExecTimeoutError,
    InsufficientStorageError,
    OperationFailedError,
    UnavailableError,
)
from .ports import ContextHost, StartFailedError, TerminalSize

log = logging.getLogger(__name__)

EXEC_TIMEOUT_S = 30.0     # the reference's exec timeout (408 exec_timeout)
PROMPT_QUIET_S = 0.05     # after a prompt, output must pause this long for an exec to be done
READY_TIMEOUT_S = 30.0    # a REPL that never prints its prompt fails the exec
FINISHED_TTL_S = 600      # a finished context is kept this long for its output and status
STOP_GRACE_S = 2.0
KILL_WAIT_S = 5.0
SWEEP_S = 1.0


class SandboxContexts:
    def __init__(self, host: ContextHost) -> None:
        self.host = host
        self.contexts: dict[str, Context] = {}
        self._sweeper: asyncio.Task | None = None
        self._closed = False

    # ---- queries ------------------------------------------------------------------------------
    def get(self, context_id: str) -> Context:
        context = self.contexts.get(context_id)
        if context is None:
            raise ContextNotFoundError()
        return context

    def list(self) -> list[Context]:
        return sorted(self.contexts.values(), key=lambda c: (c.created_ns, c.id))

    # ---- lifecycle ----------------------------------------------------------------------------
    async def create(self, request: ContextRequest) -> tuple[Context, "ExecOutput"]:
        """Start the process; with ``wait_until_done`` also wait for it (cmd) or its first exec (repl)."""
        now = self.host.clock.now_ns()
        context_id = "ctx-" + self.host.new_uuid_hex()[:16]
        terminal = TerminalSize(*request.terminal) if request.terminal else None
        context = Context(context_id, request, now, now, terminal)
        if self._closed:
            raise UnavailableError("sandbox runtime is not available")
        await self._start(context)
        if self._closed:  # the runtime was released while the process started: it must not outlive it
            await self._end(context)
            raise UnavailableError("sandbox runtime is not available")
        self.contexts[context_id] = context
        self._ensure_sweeper()
        output = ExecOutput("")
        if request.wait_until_done:
            if request.type == "cmd":
                await context.exited.wait()
                output = ExecOutput(context.raw_output(), context.output.dropped)
            elif request.input:
                output = await self.exec(context_id, request.input, timeout_s=None)
        return context, output

    async def _start(self, context: Context) -> None:
        request, host = context.request, self.host
        env = dict(request.extra_env)
        env.update(request.env)
        # Each start of a context is its own "attempt" for the runtime (its env file, its
        # memory cgroup and OOM count), so concurrent contexts never share them.
        context.launch_id = f"{context.id}-{host.new_uuid_hex()[:8]}"
        context.started_ns = host.clock.now_ns()
        try:
            launch = host.launch_process(request.command, request.cwd, env, context.terminal,
                                            attempt_id=context.launch_id)
        except OSError as exc:  # its launch files could not be written: a full disk is 507
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise InsufficientStorageError(f"context process could not start: {exc}") from None
            raise OperationFailedError(f"context process could not start: {exc}") from None
        runner = host.pty_runner if launch.terminal else host.pipe_runner
        try:
            context.handle = await runner.start(launch, lambda source, data: self._on_output(context, source, data))
        except StartFailedError as exc:
            raise OperationFailedError(f"context process could not start: {exc}") from None
        if self._closed:  # the runtime ended while the process started: it must not outlive it
            context.handle.discard()
            raise UnavailableError("sandbox runtime is not available")
        if request.type != "repl":
            context.ready.set()
        context.watcher = self.host.tasks.spawn(self._watch(context), f"exit watcher of context {context.id}")
        host.hub.process_event(host.sandbox_id, "process.started", process_started(context))

    async def restart(self, context_id: str) -> Context:
        context = self.get(context_id)
        await self._end(context)
        fresh = Context(context.id, context.request, context.created_ns, self.host.clock.now_ns(),
                        context.terminal)
        await self._start(fresh)
        if self._closed or self.contexts.get(context_id) is not context:  # released or deleted meanwhile
            await self._end(fresh)
            raise ContextNotFoundError()
        self.contexts[context_id] = fresh
        return fresh

    async def delete(self, context_id: str) -> None:
        context = self.get(context_id)
        del self.contexts[context_id]
        await self._end(context)

    def end_all(self) -> list[Context]:
        """The runtime is going away (pause, delete, shutdown): no context may start or survive.
        Every running one is SIGKILLed with its group now; the runtime's release kills what is
        left through the cgroup and waits for all of them together (``finish``)."""
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        contexts, self.contexts = list(self.contexts.values()), {}
        for context in contexts:
            if context.running:
                context.handle.send_signal(signals.SIGKILL)
                context.handle.send_signal(signals.SIGCONT)
        return contexts

    async def finish(self, contexts: list[Context], timeout_s: float) -> None:
        """After ``end_all`` and the runtime's kill: their watchers done, within ``timeout_s``."""
        watchers = [c.watcher for c in contexts if c.watcher is not None]
        if watchers:
            await asyncio.wait(watchers, timeout=timeout_s)

    async def _end(self, context: Context) -> None:
        """TERM to the group, a short grace, KILL; always wait for the process to be reaped."""
        if context.running:
            context.handle.send_signal(signals.SIGTERM)
            context.handle.send_signal(signals.SIGCONT)
            if not await self._exited_within(context, STOP_GRACE_S):
                context.handle.send_signal(signals.SIGKILL)
                if not await self._exited_within(context, KILL_WAIT_S):
                    log.error("context %s did not end after SIGKILL", context.id)
        if context.watcher is not None:
            await asyncio.gather(context.watcher, return_exceptions=True)

    async def _exited_within(self, context: Context, seconds: float) -> bool:
        return await _first_of(context.exited.wait(), self.host.clock.sleep(seconds)) == 0

    # ---- process interaction ------------------------------------------------------------------
    async def write(self, context_id: str, data: str) -> None:
        context = self.get(context_id)
        await self._write(context, data)

    def refuse_when_full(self, context_id: str, size: int) -> None:
        """429 before a body of ``size`` bytes is read (``Context.refuse_input``)."""
        self.get(context_id).refuse_input(size)

    async def _write(self, context: Context, data: str) -> None:
        if context.exited.is_set():
            raise ContextFinishedError()
        if context.handle is None:
            raise ContextNotRunningError()
        raw = data.encode()
        context.refuse_input(len(raw), writing=True)
        self._touch(context)
        context.input_queued += len(raw)
        context.input_writes += 1
        try:
            await context.handle.write(raw)
        except (OSError, RuntimeError) as exc:
            raise ContextNotRunningError(f"process is not running: {exc}") from None
        finally:
            context.input_queued -= len(raw)
            context.input_writes -= 1

    async def exec(self, context_id: str, data: str, timeout_s: float | None = EXEC_TIMEOUT_S) -> "ExecOutput":
        """Submit input and return what it printed: up to the next prompt (REPL) or the exit;
        past ``EXEC_OUTPUT_LIMIT`` only its end, with the count of what was cut."""
        context = self.get(context_id)
        if context.exited.is_set():
            raise ContextFinishedError()
        async with context.exec_lock:  # one exec at a time, or their outputs would interleave
            if await _first_of(context.ready.wait(), context.exited.wait(),
                               self.host.clock.sleep(READY_TIMEOUT_S)) == 2:
                raise ExecTimeoutError(READY_TIMEOUT_S)
            collector = ExecTail(EXEC_OUTPUT_LIMIT)
            if context.exited.is_set():
                collector.push(EXIT)
            else:
                context.subscribers.add(collector)
            try:
                await self._write(context, exec_input(context.request.type, data))
                await self._collect(collector, timeout_s)
            finally:
                context.subscribers.discard(collector)
        output = collector.text()
        if collector.dropped:  # the marker goes after the prompt the reference's shape starts with
            output = dropped_marker(collector.dropped) + output
        return ExecOutput(normalize_exec_output(context.request.type, output), collector.dropped)

    async def _collect(self, collector: ExecTail, timeout_s: float | None) -> None:
        clock = self.host.clock
        deadline_ns = clock.now_ns() + int(timeout_s * 1e9) if timeout_s else None
        while not collector.ended:
            if collector.prompt:  # done as soon as output pauses for PROMPT_QUIET_S
                wait_s = PROMPT_QUIET_S
            elif deadline_ns is not None:
                wait_s = max(0.0, (deadline_ns - clock.now_ns()) / 1e9)
            else:
                wait_s = None
            collector.changed.clear()
            changed = collector.changed.wait()
            if wait_s is None:
                await changed
            elif await _first_of(changed, clock.sleep(wait_s)) == 1:
                if collector.prompt:
                    return
                raise ExecTimeoutError(timeout_s)

    def resize(self, context_id: str, rows: int, cols: int) -> None:
        context = self.get(context_id)
        if context.terminal is None:
            raise ContextPtyUnavailableError()
        if not context.running:
            raise ContextNotRunningError()
        try:
            context.handle.resize(rows, cols)
        except OSError:  # the terminal closed as the process ended: it is not running now
            raise ContextNotRunningError() from None
        context.terminal = TerminalSize(rows, cols)
        self._touch(context)

    def signal(self, context_id: str, signum: int) -> None:
        context = self.get(context_id)
        if not context.running:
            raise ContextNotRunningError()
        context.handle.send_signal(signum)
        self._touch(context)

    # ---- output -------------------------------------------------------------------------------
    def subscribe(self, context_id: str) -> tuple[Context, list[tuple[str, str]], Subscriber]:
        """Everything retained so far and a live subscription, with no gap and no repeat."""
        context = self.get(context_id)
        return context, context.output.items(), self.subscribe_live(context)

    def subscribe_live(self, context: Context) -> Subscriber:
        subscriber = Subscriber()
        if context.exited.is_set():
            subscriber.push(EXIT)
        else:
            context.subscribers.add(subscriber)
        return subscriber

    def _on_output(self, context: Context, source: str, data: bytes) -> None:
        decoder = context.decoders.get(source)
        if decoder is None:
            decoder = context.decoders[source] = codecs.getincrementaldecoder("utf-8")("replace")
        self._publish(context, source, decoder.decode(data), len(data))

    def _publish(self, context: Context, source: str, text: str, nbytes: int = 0) -> None:
        if not text:
            return
        self._touch(context)
        context.output.add(source, text, nbytes or len(text), self.host.clock.now_ns())
        # The sandbox's bound: contexts still starting are not in ``self.contexts`` yet.
        logs = [c.output for c in self.contexts.values() if c is not context]
        enforce_sandbox_limit([context.output, *logs])
        prompt = False
        if context.request.type == "repl":
            window = context.prompt_tail + text
            prompt = READY_TOKEN in window
            context.prompt_tail = window[-(len(READY_TOKEN) - 1):]
            if prompt:
                context.ready.set()
        for subscriber in list(context.subscribers):
            subscriber.push(("output", source, text, prompt))

    async def _watch(self, context: Context) -> None:
        status = self.host.translate_exit(await context.handle.wait_exited(), context.launch_id)
        for source, decoder in context.decoders.items():
            self._publish(context, source, decoder.decode(b"", final=True))
        context.exit_code, context.state = final_state(status.exit_code, status.signal)
        context.finished_ns = self.host.clock.now_ns()
        context.exited.set()
        for subscriber in list(context.subscribers):
            subscriber.push(EXIT)
        context.subscribers.clear()
        kind = "process.exited" if context.state == "stopped" else "process.crashed"
        self.host.hub.process_event(self.host.sandbox_id, kind, process_ended(context))

    def _touch(self, context: Context) -> None:
        context.last_activity_ns = self.host.clock.now_ns()

    # ---- lifetime rules -----------------------------------------------------------------------
    def _ensure_sweeper(self) -> None:
        if self._sweeper is None and not self._closed:
            self._sweeper = self.host.tasks.every(SWEEP_S, self._sweep, "the context sweep", self.host.clock.sleep)

    async def _sweep(self) -> None:
        for context_id in self.due(self.host.clock.now_ns()):
            try:
                await self.delete(context_id)
            except ContextNotFoundError:
                pass

    def due(self, now_ns: int) -> list[str]:
        """Contexts past their ttl, idle timeout, or finished for longer than FINISHED_TTL_S."""
        return [context.id for context in self.list() if context.is_due(now_ns, FINISHED_TTL_S)]


async def _first_of(*awaitables) -> int:
    """Run the awaitables until one finishes; return its index and cancel the rest."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        return min(tasks.index(t) for t in done)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
