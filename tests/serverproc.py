"""A real ``sessiond`` server in a subprocess, for black-box acceptance tests.

The server is started as ``python -m api serve`` from the repository root, on a
loopback port, with its output in ``<data_dir>/server.log``. Every wait here is
bounded; a server that does not become healthy raises with the log tail.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 20.0
STOP_GRACE = 15.0
LOG_NAME = "server.log"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerError(RuntimeError):
    pass


class ServerProcess:
    def __init__(self, data_dir, token=None, runtime="host", port=None, extra_env=None,
                 start_timeout=START_TIMEOUT, no_auth=False, extra_args=()):
        """``token=None`` starts it as an operator would: the server generates ``<data>/token``
        (read into ``self.token`` once it is up) unless ``no_auth`` passes ``--no-auth``."""
        self.data_dir = Path(data_dir)
        self.token = token
        self.explicit_token = token  # passed as --token; None: the server's generated one
        self.no_auth = no_auth
        self.extra_args = list(extra_args)
        self.runtime = runtime
        self.port = port
        self.extra_env = dict(extra_env or {})
        self.start_timeout = start_timeout  # benchmarks load long journals before /healthz
        self.proc: subprocess.Popen | None = None
        self._log = None

    # -- addresses -----------------------------------------------------------
    @property
    def url(self) -> str:
        if self.port is None:
            raise ServerError("server has no port yet; call start() first")
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_NAME

    def command(self) -> list[str]:
        argv = [sys.executable, "-m", "session_supervisor.api", "serve",
                "--host", "127.0.0.1", "--port", str(self.port),
                "--data-dir", str(self.data_dir), "--runtime", self.runtime]
        if self.explicit_token:
            argv += ["--token", self.explicit_token]
        if self.no_auth:
            argv.append("--no-auth")
        return argv + self.extra_args

    @property
    def token_file(self) -> Path:
        return self.data_dir / "token"


    # -- lifecycle -----------------------------------------------------------
    def start(self) -> "ServerProcess":
        if self.running:
            raise ServerError("server already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.port is None:
            self.port = free_port()
        env = os.environ.copy()
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.extra_env)
        self._log = open(self.log_path, "ab")
        self._log.write(f"\n=== start {' '.join(self.command())}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(
            self.command(), cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_healthy()
        except BaseException:
            self.kill()
            raise
        if self.token is None and not self.no_auth:
            self.token = self.token_file.read_text().strip()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last_error = "no attempt"
        with httpx.Client(timeout=2.0) as client:
            while True:
                code = self.proc.poll()
                if code is not None:
                    raise ServerError(
                        f"server exited with {code} before becoming healthy\n{self.log_tail()}")
                try:
                    resp = client.get(f"{self.url}/healthz")
                    if resp.status_code == 200:
                        return
                    last_error = f"GET /healthz -> {resp.status_code} {resp.text[:200]}"
                except httpx.HTTPError as exc:
                    last_error = repr(exc)
                if time.monotonic() >= deadline:
                    raise ServerError(
                        f"server not healthy within {self.start_timeout}s ({last_error})\n"
                        f"{self.log_tail()}")
                time.sleep(0.05)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the server process (a crash) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=STOP_GRACE)
        self._close_log()

    def stop(self) -> int | None:
        """SIGTERM, wait up to 15 s, then SIGKILL. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait(timeout=STOP_GRACE)
        self._close_log()
        if self.runtime != "host":
            forget_host_network(self.data_dir)
            forget_sandbox_cgroups(self.data_dir)
        return self.proc.returncode

    def restart(self) -> "ServerProcess":
        """Start again on the same port and data dir (after kill() or stop())."""
        if self.running:
            self.stop()
        return self.start()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no server log: {exc})"
        return "--- server log tail ---\n" + "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def forget_host_network(data_dir) -> None:
    """Remove what a server over ``data_dir`` may have left on the host (network namespaces,
    veth pairs, its nftables table): a server killed by a test leaves them, and only a later
    server on the same data dir would clean them up."""
    if os.geteuid() != 0:
        return
    from session_supervisor.infra.netns import NetworkSetupError, remove_everything
    try:
        remove_everything(str(Path(data_dir).resolve()))
    except (NetworkSetupError, OSError):
        pass  # no iproute2/nftables here: the server used none either


def forget_sandbox_cgroups(data_dir) -> None:
    """End what a server over ``data_dir`` left in its sandboxes' cgroups: a server killed during
    a pause leaves them frozen, and a frozen process outlives every SIGKILL. A later server on
    the same data dir would end them (``Cgroups.create``); a test's data dir has no later server."""
    sandboxes = Path(data_dir) / "sandboxes"
    if os.geteuid() != 0 or not sandboxes.is_dir():
        return
    from session_supervisor.infra.cgroups import Cgroups, group_name
    cgroups = Cgroups.detect(group_name(str(data_dir)))
    cgroups.sweep({sandbox.name for sandbox in sandboxes.iterdir()})
    for base in set(cgroups.bases.values()):
        try:
            os.rmdir(base)
        except OSError:
            pass


def kill_servers_over(data_dir) -> None:
    """SIGKILL every ``sessiond serve`` whose command line names ``data_dir``: servers a test
    started in the background (a shell walkthrough) outlive a test that timed out."""
    needle = str(data_dir).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:  # the process title (``sessiond serve ...``) replaces argv: one string, spaces
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"sessiond" in cmdline and b" serve " in cmdline and needle in cmdline:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                pass
