"""Every port of the domain, in one place: what it needs from the outside world (process
runners, a clock, the isolation of a sandbox, its files, its network, the commit writer, the
journal store's maintenance, checkpoints) and the narrow views its own parts get of each other
(an attempt runner's host, an expiry sweep's host, a context's host) instead of a whole runtime.

Adapters live in ``infra`` (PipeRunner, PtyRunner, SystemClock, BubblewrapLauncher, ...) and fakes in
``infra.fakes``. A runner knows nothing about sessions, policies or phases: it
starts one argv and reports what the process does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Awaitable, Callable, ContextManager, Iterable, NamedTuple, Protocol

if TYPE_CHECKING:  # annotations only: the ports name domain types without importing their modules
    from .attempt_runner import AttemptRunner
    from .commits import CommitPipeline
    from .expiry_sweep import ExpirySweep
    from .hub import Hub
    from .live_session import LiveSession
    from .model.access import ApiKey, Team
    from .model.session import Session
    from .model.volumes import Volume, VolumeSnapshot
    from .sandbox_store import SandboxStore
    from .task_owner import TaskOwner

# stream is "stdout", "stderr" or "pty"; called on the event loop thread.
OutputCallback = Callable[[str, bytes], None]


@dataclass(frozen=True)
class TerminalSize:
    rows: int
    cols: int


@dataclass(frozen=True)
class Launch:
    """Everything needed to start one OS process (already wrapped by the runtime)."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    terminal: TerminalSize | None = None  # None: pipes; set: a PTY of that size
    # Real pids of processes to consider part of the attempt (e.g. bwrap children)
    # are found through the process group, so nothing else is needed here.
    extra: dict[str, str] = field(default_factory=dict)
    # The sandbox reports whether its command and cwd exist there before it execs (the runner
    # waits for that; infra.start_check), and what the runtime made for this launch is given
    # back through ``on_start_failed`` when the start fails.
    start_report: bool = False
    on_start_failed: Callable[[], None] | None = None


@dataclass(frozen=True)
class ExitStatus:
    """How a process ended. ``signal`` is the signal number when it died by one."""

    exit_code: int | None
    signal: int | None = None
    reason: str = ""  # set by the runtime when it knows better, e.g. "oom_killed"


class StartFailedError(Exception):
    """The process could not be started (bad argv, bad cwd, exec failure)."""


class AttemptHandle(Protocol):
    pid: int
    start_time: int  # /proc/<pid>/stat starttime (clock ticks), 0 if unknown

    def pause_output(self) -> None: ...   # back-pressure: stop reading output
    def resume_output(self) -> None: ...

    async def write(self, data: bytes) -> None: ...      # waits for the pipe to drain
    async def close_input(self) -> None: ...             # EOF (pipes) / hang-up (pty)
    def send_signal(self, signum: int) -> None: ...      # to the whole process group
    def resize(self, rows: int, cols: int) -> None: ...  # pty only; raises otherwise
    async def wait_exited(self) -> ExitStatus: ...       # resolves after all output was delivered
    def discard(self) -> None: ...  # not wanted after all: killed, its ends closed, reaped when it goes


class ProcessRunner(Protocol):
    async def start(self, launch: Launch, on_output: OutputCallback) -> AttemptHandle: ...


class Clock(Protocol):
    def now_ns(self) -> int: ...
    def sleep(self, seconds: float) -> Awaitable[None]: ...


class SandboxNetworks(Protocol):
    """One network per running sandbox runtime (infra.netns). ``attach`` returns the namespace
    path its sessions join (None: they share the host's network); ``apply`` changes the
    policy of a running sandbox for new connections; ``address`` is where the host reaches the
    sandbox (None without a namespace of its own: then nothing of it is exposed)."""

    async def start(self) -> None: ...
    async def close(self) -> None: ...
    def netns_path(self, sandbox_id: str) -> str | None: ...
    def address(self, sandbox_id: str) -> str | None: ...  # its own address, where the ingress connects
    def traffic(self, sandbox_id: str) -> dict[str, int] | None: ...  # bytes and errors it sent and received
    async def attach(self, sandbox_id: str, policy: dict) -> str | None: ...
    async def apply(self, sandbox_id: str, policy: dict) -> None: ...
    async def detach(self, sandbox_id: str) -> None: ...
    # Detach in two steps: the sandbox's name free for its next runtime now, the rest later.
    async def release(self, sandbox_id: str) -> object | None: ...
    async def destroy(self, released: object) -> None: ...


class SandboxIsolation(Protocol):
    """One sandbox's isolation, bound to its workspace (infra.bubblewrap's ``BoundLauncher``)."""

    name: str

    def launch(self, workspace_dir: str, argv: list[str], cwd: str, env: dict[str, str],
               terminal: TerminalSize | None, attempt_id: str = "") -> Launch: ...
    def translate_exit(self, status: ExitStatus, attempt_id: str = "") -> ExitStatus: ...
    def usage(self) -> dict[str, int]: ...
    def stats(self) -> dict[str, int]: ...  # usage plus cpu_ns and memory_working_set (the metrics)
    def freeze(self, frozen: bool) -> None: ...
    def kill_all(self) -> None: ...   # SIGKILL every task of the sandbox, frozen or not (sync)
    def release(self) -> None: ...


class Isolator(Protocol):
    """Makes a sandbox's isolation (infra.bubblewrap's ``HostLauncher`` / ``BubblewrapLauncher``)."""

    def isolate(self, sandbox_id: str, workspace_dir: str, config: dict) -> SandboxIsolation: ...


class SandboxFiles(Protocol):
    def admit(self) -> None: ...  # raises InsufficientStorageError when a new sandbox has no room
    # ``rootfs``: the template's part of the config (its disk size); its disk is mounted once made.
    # ``source``: a disk image (a snapshot's) the new disk copies; ``adopt``: it becomes the disk.
    def create(self, sandbox_id: str, rootfs: dict | None = None, source: object | None = None,
               adopt: bool = False) -> None: ...
    def prepare(self, sandbox_id: str, rootfs: dict | None) -> None: ...  # its disk mounted (a new runtime)
    def close(self) -> None: ...  # server stop: what create/prepare mounted is unmounted
    def workspace(self, sandbox_id: str) -> str: ...
    def list_ids(self) -> list[str]: ...  # every sandbox directory, complete or not
    def remove(self, sandbox_id: str) -> None: ...
    def usage(self, sandbox_id: str) -> dict[str, int]: ...
    # Whole disks, for rootfs snapshots and forks (infra.sandbox_images; sync: run in a thread).
    def snapshots_unavailable(self) -> str | None: ...  # why not (no disk per sandbox), or None
    def admit_copy(self, what: str) -> None: ...  # 507 when a new copy of a disk has no room
    def staging(self, sandbox_id: str) -> object: ...  # a temporary image for a sandbox not made yet
    def sync(self, sandbox_id: str) -> None: ...  # its dirty data written back, while it runs
    def capture(self, sandbox_id: str, target: object) -> bool: ...  # a consistent copy (frozen fs)
    def replace_disk(self, sandbox_id: str, source: object, foreign: bool) -> None: ...  # a restore
    def disk_allocated(self, sandbox_id: str) -> int: ...
    def discard(self, image: object) -> None: ...  # a staging image that is not used after all


class RootfsSnapshotStore(Protocol):
    """Snapshot images and their records (infra.rootfs_snapshot_store): each is made under a
    temporary name and published whole, so a crash leaves it complete or absent (sync calls)."""

    def begin(self, snapshot_id: str) -> object: ...  # where its image is to be written
    def publish(self, snapshot_id: str, record: dict) -> None: ...
    def abandon(self, snapshot_id: str) -> None: ...
    def records(self) -> list[dict]: ...
    def record(self, snapshot_id: str) -> dict | None: ...
    def image(self, snapshot_id: str) -> object: ...
    def delete(self, snapshot_id: str) -> bool: ...


class Checkpoints(Protocol):
    def fetch(self, sandbox_id: str, newest_here: bool) -> None: ...  # the last checkpointed workspace, here
    def seal(self, sandbox_id: str, store: SandboxStore) -> None: ...
    def write_manifest(self, sandbox_id: str, manifest: dict) -> None: ...
    def read_manifest(self, sandbox_id: str) -> dict | None: ...
    def discard_manifest(self, sandbox_id: str) -> None: ...
    def remove(self, sandbox_id: str) -> None: ...  # the sandbox is deleted: its checkpoint too


class CommitSink(Protocol):
    """The single writer thread (infra.writer)."""

    def submit(self, tick: list, done: Callable[[list], None]) -> None: ...
    def run_in_writer(self, fn: Callable[[], object],
                      done: Callable[[object, BaseException | None], None]) -> None: ...


class Pausable(Protocol):
    def pause_output(self) -> None: ...
    def resume_output(self) -> None: ...


class StoredRow(NamedTuple):
    """One stored event as the journal store reads it back: its seq (the aggregate version),
    its topic, its fields (bytes stay bytes) and when it happened. A tuple: replay builds one
    per event, and a dataclass's ``__init__`` cost a tenth of a replayed event."""

    seq: int
    topic: str
    state: dict
    occurred_ns: int


# An event as journal pages and SSE replay send it: (seq, public type, its public record as JSON).
PublicJson = tuple[int, str, bytes]


class RawRows(NamedTuple):
    """Stored events as a journal store holds them, for the API to render (``api/journal_wire.py``)
    without a ``StoredRow`` per event: the replay path."""

    rows: list[tuple[int, str, bytes]]  # (seq, topic, stored state), ascending
    last: int  # the seq of the last row read (0: none), also when a row's record was gone
    decode: Callable[[bytes], dict]  # the store's codec: stored state -> its fields


@dataclass
class CommitOutcome:
    """A journal store's answer to one commit: committed, refused as a whole (``store_error``:
    the batch is kept and retried), or committed except the aggregates in ``rolled_back``
    (id -> their stored copy, None when nothing of them was stored) whose events it could not
    encode (``poison_error``)."""

    store_error: BaseException | None = None
    rolled_back: dict = field(default_factory=dict)
    poison_error: BaseException | None = None


class JournalStore(Protocol):
    """One sandbox's journal: the stored events and snapshots of its aggregates (one store per sandbox, one stream per session).

    ``infra.event_store.SqliteJournal`` keeps it in one SQLite file in the sandbox's state dir;
    a PostgreSQL store keeps it in the database. The domain never sees SQL, rows or the codec:
    it commits domain events, loads aggregates, and reads ``StoredRow``s (or, for pages and
    replay, ``RawRows`` it hands to the API unopened). Calls block: the
    commit and the maintenance calls run on the writer thread, reads in worker threads.
    """

    def load(self) -> list: ...  # every aggregate, from its latest snapshot plus the tail
    def stored_copy(self, originator_id: str) -> object | None: ...
    def commit(self, events: list, snapshots: list) -> CommitOutcome: ...  # never raises
    def read_rows(self, originator_id: str, gt: int, lte: int, limit: int,
                  topics: frozenset[str] | None = None, desc: bool = False) -> list[StoredRow]: ...
    # The same rows, not decoded (the replay path: rendered by the API straight from them).
    def read_raw(self, originator_id: str, gt: int, lte: int, limit: int,
                 topics: frozenset[str] | None = None) -> RawRows: ...
    def trim_events(self, originator_id: str, gt: int, lte: int, keep_topics: Iterable[str], limit: int,
                    snapshots_before: int = 0) -> int: ...
    def reclaim_space(self, keep_bytes: int, max_bytes: int) -> int: ...  # free space handed back (bytes)
    def delete_stream(self, originator_id: str) -> None: ...
    def free_bytes(self) -> int | None: ...  # room left for it (None: not on a local filesystem)
    def seal(self) -> None: ...  # the pause hook's checkpoint: close, compacted and complete
    def close(self) -> None: ...


class JournalStores(Protocol):
    """Where sandboxes' journals live (``infra.event_store.SqliteJournals``: a file in each
    sandbox's state dir)."""

    def list_ids(self) -> list[str]: ...  # sandboxes that have a journal
    def open(self, sandbox_id: str) -> JournalStore: ...  # created when it does not exist yet
    def record(self, sandbox_id: str) -> object | None: ...  # its stored Sandbox record (None: gone)
    def forget(self, sandbox_id: str) -> None: ...  # no start loads it again, durably (the rest may stay)
    def remove(self, sandbox_id: str) -> None: ...  # everything of it


@dataclass(frozen=True)
class Whereabouts:
    """Where a sandbox runs, as the ownership registry says now."""

    exists: bool
    owner_url: str | None = None  # another node runs it (a live lease): calls go there
    last_owner_here: bool = False  # this node held it last (its workspace here is the newest)


class SandboxOwnership(Protocol):
    """Which node runs each sandbox (``infra.cluster``: a lease per sandbox in PostgreSQL, fenced by
    an epoch that goes up on every takeover; ``networks.SoleOwner`` on one machine). Calls block."""

    clustered: bool

    def whereabouts(self, sandbox_id: str) -> Whereabouts: ...
    def acquire(self, sandbox_id: str) -> bool: ...  # now ours (it was free, expired or ours); False: another node's
    def release(self, sandbox_id: str, keep_running: bool) -> None: ...  # paused: any node may take it
    def forget(self, sandbox_id: str) -> None: ...  # deleted
    def renew(self) -> list[str]: ...  # renew every lease held; returns the sandboxes whose lease was lost
    def fresh(self, sandbox_id: str) -> bool: ...  # renewed recently enough to start a process
    def held_before(self) -> list[str]: ...  # what this node held when it last ran (start-up)
    def orphans(self) -> list[str]: ...  # meant to run, but nobody holds them (a dead node's)


class ContextHost(Protocol):
    """What contexts need from their sandbox's runtime: the session path's launch and runners, the
    hub their process starts and ends are told to (webhooks), and the runtime's task owner."""

    sandbox_id: str
    pipe_runner: ProcessRunner
    pty_runner: ProcessRunner
    clock: Clock
    hub: Hub
    tasks: TaskOwner

    def launch_process(self, argv: list[str], cwd: str, env_overrides: dict[str, str],
                       terminal: TerminalSize | None, term: str = ..., attempt_id: str = "") -> Launch: ...
    def translate_exit(self, status: ExitStatus, attempt_id: str = "") -> ExitStatus: ...
    def new_uuid_hex(self) -> str: ...


class ExpiryHost(Protocol):
    """What the expiry sweep needs: its sandbox's live sessions, its clock and task owner, and the
    expiry call (``SessionLifecycle.expire_session``)."""

    clock: Clock
    store: SandboxStore
    tasks: TaskOwner

    async def expire_session(self, session_id: str) -> bool: ...


class AttemptHost(Protocol):
    """What the attempt runner (``AttemptRunner``) needs from its sandbox's runtime: the store it
    records into, each session's one object (which holds its attempt and restart timer), the
    commit pipeline, the runners, the launch, and the runtime's task owner."""

    store: SandboxStore
    pipeline: CommitPipeline
    pipe_runner: ProcessRunner
    pty_runner: ProcessRunner
    clock: Clock
    tasks: TaskOwner

    @property
    def generation(self) -> int: ...
    @property
    def ended(self) -> bool: ...  # its runtime is being torn down: no process may start
    def new_attempt_id(self) -> str: ...
    def check_fence(self) -> None: ...  # raises unless this node may start processes for the sandbox
    def list_sessions(self) -> list[Session]: ...
    def live_session(self, session_id: str) -> LiveSession | None: ...  # where its attempt and timer live
    def live_sessions(self) -> list[LiveSession]: ...
    def launch_for(self, session: Session) -> Launch: ...
    def translate_exit(self, status: ExitStatus, attempt_id: str = "") -> ExitStatus: ...


class SessionHost(Protocol):
    """What the session calls (``SessionLifecycle``, ``SessionIO``) need from their sandbox's
    runtime: its store and pipeline, its attempt runner and expiry sweep, and each session's one
    object (``live``; ``retire_session`` pops and closes it)."""

    sandbox_id: str
    store: SandboxStore
    pipeline: CommitPipeline
    clock: Clock
    attempts: AttemptRunner
    expiry: ExpirySweep

    @property
    def generation(self) -> int: ...
    def new_uuid_hex(self) -> str: ...
    def live(self, session_id: str) -> LiveSession: ...  # SessionNotFoundError when unknown or deleting
    def session(self, session_id: str) -> Session: ...
    def retire_session(self, session_id: str) -> None: ...


# ---- templates and images (domain/templates.py) ------------------------------------------------
@dataclass(frozen=True)
class ImageInfo:
    """What a claim needs of an imported image: its identity and its runtime defaults."""

    reference: str              # NAME@sha256:DIGEST
    digest: str
    env: dict[str, str] = field(default_factory=dict)   # the image config's Env
    working_dir: str = ""


class ImageCatalog(Protocol):
    """The image store, as templates see it (``infra.images``). ``resolve`` raises
    ``InvalidTemplateError`` for an unpinned reference, ``ImageNotFoundError`` for an unknown one."""

    def resolve(self, reference: str) -> ImageInfo: ...
    def lookup(self, reference: str) -> ImageInfo | None: ...  # by digest, or a name/tag imported here
    def built(self, template_id: str) -> tuple[ImageInfo | None, dict | None]: ...  # a builtin's image, build state


class TemplateStore(Protocol):
    """The team templates (``infra.template_store``: one JSON file, in the shared dir with more nodes)."""

    def load(self) -> dict[str, dict]: ...           # template_id -> stored record
    def put(self, template_id: str, record: dict, create: bool) -> bool: ...  # False: exists (create) / gone (update)
    def delete(self, template_id: str) -> bool: ...


class KeyStore(Protocol):
    """Teams and API keys, one store per server (infra.key_store: SQLite in the data dir, or
    PostgreSQL with more than one node). Blocking: the domain calls it from a thread, except
    ``key_by_hash`` when ``memory_reads`` says the store answers it from memory (it is the only
    writer, so its copy cannot go stale). Deleting a team deletes its keys in the same transaction."""

    memory_reads: bool

    def create_team(self, team: Team) -> None: ...
    def teams(self) -> list[Team]: ...
    def team(self, team_id: str) -> Team | None: ...
    def update_team(self, team: Team) -> bool: ...
    def delete_team(self, team_id: str) -> bool: ...
    def add_key(self, key: ApiKey) -> None: ...
    def keys(self, team_id: str | None) -> list[ApiKey]: ...  # None: every key
    def key(self, key_id: str) -> ApiKey | None: ...
    def key_by_hash(self, secret_hash: str) -> ApiKey | None: ...
    def deactivate_key(self, key_id: str, at_ns: int) -> bool: ...
    def delete_key(self, key_id: str) -> bool: ...
    def close(self) -> None: ...


class VolumeStore(Protocol):
    """Volumes and their snapshots, records and disks (``infra.volume_store``; in the shared
    checkpoint dir with more than one node). Blocking: the domain calls it from a thread. ``lock``
    orders every change of the records, on every node; reads take no lock. A disk is made or copied
    aside and placed together with its record in one rename, so a crash leaves it whole or absent.
    ``freeze`` holds the source's writes while it is copied (``VolumeMounts.frozen``)."""

    def lock(self) -> ContextManager[None]: ...
    def volumes(self) -> list[Volume]: ...
    def volume(self, volume_id: str) -> Volume | None: ...
    def save(self, volume: Volume) -> None: ...  # its record (under ``lock``)
    # A new volume: an empty disk, or a copy of a volume's (``source_volume``) or a snapshot's
    # (``source_snapshot``: (volume id, snapshot id)); ``check`` runs under ``lock`` right before
    # it is placed (the quota) and may raise.
    def create(self, volume: Volume, check: Callable[[], None], *, source_volume: str = "",
               source_snapshot: tuple[str, str] | None = None,
               freeze: Callable[[str], ContextManager[None]] | None = None) -> None: ...
    def remove(self, volume_id: str) -> None: ...  # under ``lock``: gone at once, its files after
    def snapshots(self, volume_id: str) -> list[VolumeSnapshot]: ...
    def create_snapshot(self, snapshot: VolumeSnapshot, check: Callable[[int], None],
                        freeze: Callable[[str], ContextManager[None]]) -> VolumeSnapshot: ...
    def remove_snapshot(self, volume_id: str, snapshot_id: str) -> None: ...  # under ``lock``
    def restore(self, volume_id: str, snapshot_id: str) -> None: ...  # its disk becomes the snapshot's
    def allocated(self, volume_id: str) -> int: ...  # bytes its disk takes on the filesystem now


class VolumeMounts(Protocol):
    """This node's mounts of volume disks (``infra.volume_mounts``), for the file API and the
    sandboxes that bind them. Blocking."""

    def attach(self, volume_id: str) -> str: ...   # mounted here (counted); the host path of its root
    def detach(self, volume_id: str) -> None: ...
    def frozen(self, volume_id: str) -> ContextManager[None]: ...  # writes held (when mounted here)
    def release(self, volume_id: str) -> None: ...  # unmounted here before a delete or a restore


class VolumeBindings(Protocol):
    """Volumes bound to a sandbox at claim, as the sandbox manager sees them (``domain.volumes``)."""

    async def bind(self, sandbox_id: str, team_id: str, mounts: list[dict]) -> list[dict]: ...
    async def unbind(self, sandbox_id: str) -> None: ...
    async def reconcile(self, sandboxes: set[str]) -> None: ...  # bindings of other ids dropped
