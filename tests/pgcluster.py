"""A private, throwaway PostgreSQL cluster for tests and benchmarks.

``initdb`` into a fresh directory under /tmp, then one ``postgres`` server listening on a unix
socket in that directory only (``listen_addresses=''``): no TCP port, nothing another process on
the machine could reach by accident, and several clusters (two worktrees' test runs) never clash.

PostgreSQL refuses to run as root, so under root every server binary runs as the ``postgres``
user (the Debian package creates it; ``nobody`` otherwise) through ``setpriv``, which the
hardened runtime already needs. The directory is made in /tmp itself, not under pytest's
``tmp_path`` (``/tmp/pytest-of-root`` is 0700: the server user could not reach its socket).

``setpriv --pdeathsig`` ties the server to the process that started it: a test run that is
killed takes its cluster down with it, and the next run removes the directory left behind
(``owner.pid`` names a process that is gone). Every wait is bounded.
"""
from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

PREFIX = "sessiond-pg-"
PORT = 5432  # names the socket file only (.s.PGSQL.5432): there is no TCP listener
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
SUPERUSER = "postgres"
# Throwaway data: no fsync makes CREATE DATABASE and every test commit cheap. Benchmarks pass
# durable=True and get the server's defaults (fsync, synchronous_commit on).
FAST_SETTINGS = {"fsync": "off", "full_page_writes": "off", "synchronous_commit": "off"}


def find_bin_dir() -> Path | None:
    """The directory of ``initdb`` and ``postgres``: PATH first, then Debian's versioned dirs
    (newest first); None when PostgreSQL's server binaries are not installed."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("postgres"):
        return Path(on_path).resolve().parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return Path(found[-1]).parent if found else None


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: None means ourselves (we are not root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists")


def remove_stale_clusters(base: Path) -> None:
    """Directories of earlier runs whose owning process is gone (their server died with it)."""
    for path in base.glob(PREFIX + "*"):
        try:
            pid = int((path / "owner.pid").read_text())
        except (OSError, ValueError):
            continue  # being set up right now by another run, or not ours
        if not Path(f"/proc/{pid}").exists():
            shutil.rmtree(path, ignore_errors=True)


class PgCluster:
    def __init__(self, bin_dir: Path, *, durable: bool = False, settings: dict | None = None) -> None:
        self.bin_dir = bin_dir
        self.settings = ({} if durable else dict(FAST_SETTINGS)) | (settings or {})
        self.dir: Path | None = None
        self.process: subprocess.Popen | None = None
        self._user = _server_user()

    # ---- what tests use ------------------------------------------------------------------
    @property
    def socket_dir(self) -> str:
        assert self.dir is not None
        return str(self.dir)

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URL to one database; the socket directory goes in ``host=``."""
        return f"postgresql://{SUPERUSER}@/{dbname}?host={self.socket_dir}&port={PORT}"

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host={self.socket_dir} port={PORT} user={SUPERUSER} dbname={dbname}"

    def sql(self, statement: str, dbname: str = "postgres") -> list[tuple]:
        """Run one statement in autocommit (CREATE/DROP DATABASE cannot run in a transaction)."""
        import psycopg

        with psycopg.connect(self.conninfo(dbname), autocommit=True, connect_timeout=10) as conn:
            cursor = conn.execute(statement)
            return cursor.fetchall() if cursor.description else []

    # ---- life cycle ------------------------------------------------------------------------
    def _as_server_user(self, argv: list[str]) -> list[str]:
        if self._user is None:
            return argv
        return ["setpriv", f"--reuid={self._user.pw_uid}", f"--regid={self._user.pw_gid}",
                "--clear-groups", "--pdeathsig=SIGQUIT", "--", *argv]

    def start(self) -> None:
        base = Path("/tmp")
        remove_stale_clusters(base)
        self.dir = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))
        (self.dir / "owner.pid").write_text(str(os.getpid()))
        data = self.dir / "data"
        if self._user is not None:
            os.chown(self.dir, self._user.pw_uid, self._user.pw_gid)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
        initdb = subprocess.run(
            self._as_server_user([str(self.bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER,
                                  "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"]),
            cwd=self.dir, env=env, capture_output=True, text=True, timeout=START_TIMEOUT_S)
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed ({initdb.returncode}): {initdb.stderr[-2000:]}")
        options = {"listen_addresses": "", "unix_socket_directories": str(self.dir), "port": str(PORT),
                   "max_connections": "100", "shared_buffers": "64MB"} | self.settings
        argv = [str(self.bin_dir / "postgres"), "-D", str(data)]
        for key, value in options.items():
            argv += ["-c", f"{key}={value}"]
        self._log = open(self.dir / "server.log", "ab")
        self.process = subprocess.Popen(self._as_server_user(argv), cwd=self.dir, env=env,
                                        stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                                        start_new_session=True)
        self._wait_ready()

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.process.returncode}: {self.log_tail()}")
            try:
                psycopg.connect(self.conninfo(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"postgres not ready after {START_TIMEOUT_S}s: {self.log_tail()}")
                time.sleep(0.05)

    def log_tail(self, size: int = 2000) -> str:
        try:
            return (self.dir / "server.log").read_bytes()[-size:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """Fast shutdown (SIGINT: clients are disconnected), SIGKILL past the bound; then the
        directory goes."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(STOP_TIMEOUT_S)
        self.process = None
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> "PgCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
