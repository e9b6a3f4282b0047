"""Every way a session or a sandbox ends leaves nothing of it in any object of the server.

Deleting a session (``LiveSession.close``), deleting a sandbox, a shutdown, a failed claim and a
hand-over to another node (``SandboxRegistry.retire``) are each followed by a walk of the whole
object graph from the server's composition root: every registry, map, queue and callback of
our own objects, looking for the session's or sandbox's id and for its objects (aggregate,
``LiveSession``, runtime). A hit names the path to it, so a new map that forgets to let go fails
here. The fakes' own history (the scripted runner keeps every process it started) is not part
of the server and is not walked.
"""
from __future__ import annotations

import asyncio
import functools
from collections import deque
from types import MappingProxyType

from session_supervisor.domain.live_session import LiveSession
from session_supervisor.domain.model.commands import DeleteSession
from session_supervisor.domain.model.errors import UnavailableError
from session_supervisor.domain.ports import Whereabouts
from tests.service.worlds import create, in_world

OURS = "session_supervisor."
NOT_THE_SERVER = ("session_supervisor.infra.fakes", "session_supervisor.scenarios")
CONTAINERS = (dict, list, tuple, set, frozenset, deque)


def _children(obj):
    """(name, child) pairs of an object the walk looks into."""
    if isinstance(obj, (dict, MappingProxyType)):
        for key, value in list(obj.items()):
            yield f"[key {key!r}]", key
            yield f"[{key!r}]", value
        return
    if isinstance(obj, CONTAINERS):
        for index, value in enumerate(list(obj)):
            yield f"[{index}]", value
        return
    if isinstance(obj, functools.partial):
        yield ".func", obj.func
        for index, value in enumerate(obj.args):
            yield f".args[{index}]", value
        return
    if hasattr(obj, "__self__") and hasattr(obj, "__func__"):  # a bound method
        yield ".__self__", obj.__self__
        return
    if isinstance(obj, asyncio.Task):  # a task still pending holds what its coroutine's frame holds
        frame = None if obj.done() else getattr(obj.get_coro(), "cr_frame", None)
        for name, value in (frame.f_locals.items() if frame is not None else ()):
            yield f"<task {obj.get_name()}>.{name}", value
        return
    module = type(obj).__module__ or ""
    if not module.startswith(OURS) or module.startswith(NOT_THE_SERVER):
        return
    names = list(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        names.extend(slot for slot in getattr(cls, "__slots__", ()) if slot not in ("__weakref__", "__dict__"))
    for name in names:
        try:
            yield f".{name}", getattr(obj, name)
        except AttributeError:
            continue


def leftovers(root, ids: set[str], objects: list) -> list[str]:
    """Paths from ``root`` to any of ``ids`` (as strings) or ``objects`` (by identity)."""
    wanted = {id(obj) for obj in objects}
    seen, found = set(), []
    queue = deque([("container", root)])
    while queue:
        path, obj = queue.popleft()
        if isinstance(obj, str):
            if obj in ids:
                found.append(path)
            continue
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if id(obj) in wanted:
            found.append(path)
            continue
        for name, child in _children(obj):
            queue.append((path + name, child))
    return found


def session_remains(world, session) -> list[str]:
    live = world.runtime.store.live.get(session.id)
    return leftovers(world.container, {session.id}, [session, *([live] if live else [])])


def test_a_deleted_session_leaves_nothing_of_it_anywhere(tmp_path):
    async def body(world):
        kept = await create(world, "kept")
        session = await create(world, "gone", lifecycle={"restart": {"policy": "always"}, "idle_timeout_seconds": 60})
        live = world.runtime.store.live[session.id]
        subscriber = world.runtime.hub.subscribe(session.id)
        world.process("gone").exit(1)
        await world.settle()
        assert live.restart_timer is not None  # a restart armed: one more thing to let go of
        objects = [session, live]
        assert leftovers(world.container, {session.id}, objects)  # the walk does find it while it lives
        await world.runtime.handle(DeleteSession(session.id))
        await world.settle()
        assert subscriber.closed_reason == "deleted"
        assert leftovers(world.container, {session.id}, objects) == []
        assert world.runtime.session(kept.id) is kept and session_remains(world, kept)
    in_world(tmp_path, body)


def test_a_deleted_sandbox_leaves_nothing_of_it_anywhere(tmp_path):
    async def body(world):
        sessions = [await create(world, f"s{n}") for n in range(3)]
        runtime = world.runtime
        objects = [runtime, *sessions, *runtime.store.live.values()]
        ids = {world.sandbox_id, *(s.id for s in sessions)}
        await world.manager.transitions.delete(world.sandbox_id)
        await world.manager.transitions.settle(10)  # the tear-down after the answer
        assert leftovers(world.container, ids, objects) == []
    in_world(tmp_path, body)


def test_a_shutdown_leaves_no_runtime_and_no_session_object(tmp_path):
    async def body(world):
        sessions = [await create(world, f"s{n}") for n in range(3)]
        runtime = world.runtime
        objects = [runtime, *sessions, *runtime.store.live.values()]
        await world.manager.shutdown()
        # The sandbox itself stays known (paused, to come back at the next start); nothing runs.
        assert world.manager.registry.parked[world.sandbox_id].status == "paused"
        assert leftovers(world.container, {s.id for s in sessions}, objects) == []
        assert len(runtime.tasks) == 0
    in_world(tmp_path, body)


def test_a_claim_that_fails_half_way_leaves_nothing_of_the_sandbox_it_began(tmp_path):
    async def body(world):
        began = []

        async def no_network(sandbox_id, policy):
            began.append(sandbox_id)
            raise OSError("no veth today")
        world.manager.networks.attach = no_network
        try:
            await world.manager.claim("default", {})
        except UnavailableError:
            pass
        else:
            raise AssertionError("the claim should have failed")
        assert began and leftovers(world.container, set(began), []) == []
        assert not (world.data_dir / "sandboxes" / began[0]).exists()
    in_world(tmp_path, body)


class LostLease:
    """Another node took the sandbox over: the next renewal says this node lost it."""

    clustered = True

    def __init__(self, sandbox_id: str) -> None:
        self.sandbox_id = sandbox_id

    def renew(self) -> list[str]:
        return [self.sandbox_id]

    def orphans(self) -> list[str]:
        return []

    def whereabouts(self, sandbox_id: str) -> Whereabouts:
        return Whereabouts(exists=True, owner_url="http://another-node")


def test_a_sandbox_handed_over_to_another_node_leaves_nothing_of_it_here(tmp_path):
    async def body(world):
        sessions = [await create(world, f"s{n}") for n in range(2)]
        runtime = world.runtime
        objects = [runtime, *sessions, *runtime.store.live.values()]
        placement = world.manager.placement
        placement.ownership = LostLease(world.sandbox_id)
        await placement._keep_leases()
        await asyncio.sleep(0)
        assert not world.manager.registry.knows(world.sandbox_id)
        assert leftovers(world.container, {world.sandbox_id, *(s.id for s in sessions)}, objects) == []
        assert (world.data_dir / "sandboxes" / world.sandbox_id).exists()  # the other node's now
    in_world(tmp_path, body)


def test_the_walk_finds_what_a_forgotten_map_still_holds(tmp_path):
    async def body(world):
        session = await create(world, "a")
        world.runtime.forgotten = {"by id": {session.id: 1}, "cb": functools.partial(print, LiveSession)}
        world.runtime.forgotten["object"] = [session]
        found = leftovers(world.container, {session.id}, [session])
        assert "container.manager.registry._running[{!r}].forgotten['by id'][key {!r}]".format(
            world.sandbox_id, session.id) in found
        assert "container.manager.registry._running[{!r}].forgotten['object'][0]".format(world.sandbox_id) in found
    in_world(tmp_path, body)
