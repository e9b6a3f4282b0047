"""supervisord 4.3 as a baseline: installed from PyPI into a cache dir at run time.

It runs ``supervisord -n`` with an XML-RPC port on loopback, starts the same child as
ours, and a run ends once its log holds every byte (users-and-baselines.md §4.3), timed
by the log file's size with no XML-RPC call during the run. Nothing is installed into the project's environment:
pip puts the package under ``$XDG_CACHE_HOME/sessiond-bench``.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import xmlrpc.client
from pathlib import Path

from tests.serverproc import free_port

VERSION = "4.3.0"
INSTALL_TIMEOUT_S = 300


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sessiond-bench" / f"supervisor-{VERSION}"


def ensure_installed(install: bool) -> tuple[Path | None, str]:
    """(path to put on PYTHONPATH, "") or (None, why not)."""
    target = cache_dir()
    if (target / "supervisor" / "supervisord.py").exists():
        return target, ""
    if not install:
        return None, f"supervisor {VERSION} not installed (run the full benchmark once to install it)"
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                               "--target", str(target), f"supervisor=={VERSION}"],
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"pip install supervisor=={VERSION} failed: {exc}"
    if done.returncode != 0 or not (target / "supervisor" / "supervisord.py").exists():
        return None, f"pip install supervisor=={VERSION} failed: {done.stderr.strip()[-300:]}"
    return target, ""


CONFIG = """\
[supervisord]
nodaemon=true
logfile={dir}/supervisord.log
pidfile={dir}/supervisord.pid
childlogdir={dir}
[inet_http_server]
port=127.0.0.1:{port}
[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface
[program:ingest]
command={command}
autostart=false
autorestart=false
startsecs=0
stdout_logfile={dir}/ingest.log
stdout_logfile_maxbytes={maxbytes}
stdout_logfile_backups=10
"""


class Supervisord:
    """One supervisord with one program; ``run()`` captures it once and returns seconds."""

    def __init__(self, path: Path, work: Path, command: str, maxbytes: str = "0") -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.work = work
        self.rotates = maxbytes != "0"
        self.port = free_port()
        conf = work / "supervisord.conf"
        conf.write_text(CONFIG.format(dir=work, port=self.port, command=command, maxbytes=maxbytes))
        env = dict(os.environ, PYTHONPATH=str(path))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from supervisor.supervisord import main; main()", "-n", "-c", str(conf)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
        self.rpc = xmlrpc.client.ServerProxy(f"http://127.0.0.1:{self.port}/RPC2")
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.rpc.supervisor.getState()["statename"] == "RUNNING":
                    break
            except (OSError, xmlrpc.client.Error):
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("supervisord did not start")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.work.glob("ingest.log*"))

    def run(self, expected: int, timeout: float = 600) -> float:
        """Seconds from the start until the log holds ``expected`` bytes.

        Timed by the log file's size alone: supervisord serves XML-RPC on the same thread
        that captures the child's output, so polling it during the run would slow the very
        thing measured (224 vs 684 MB/s in one run). The state is checked after the clock
        stops, so the next run starts from an exited program."""
        # The program has exited, so its log is closed: supervisord opens a fresh one at
        # the next spawn (clearProcessLogs on a stopped program leaves the old file's size).
        for old in self.work.glob("ingest.log*"):
            old.unlink()
        log = self.work / "ingest.log"
        started = time.perf_counter()
        self.rpc.supervisor.startProcess("ingest", False)
        deadline = time.monotonic() + timeout
        while self._logged(log) < expected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"supervisord: {self.log_bytes()} bytes logged of {expected}")
            time.sleep(0.002)
        elapsed = time.perf_counter() - started
        while self.rpc.supervisor.getProcessInfo("ingest")["statename"] not in ("EXITED", "STOPPED", "FATAL"):
            if time.monotonic() > deadline:
                raise TimeoutError("supervisord: the program did not exit")
            time.sleep(0.01)
        return elapsed

    def _logged(self, log: Path) -> int:
        if self.rotates:
            return self.log_bytes()
        try:
            return os.stat(log).st_size  # one file: a stat, not a directory scan
        except FileNotFoundError:
            return 0

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
