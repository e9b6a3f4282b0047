"""Claim to a command's first output event, as an SDK's client sees it.

An httpx client on loopback (what the official Python SDK uses) against a server on the hardened
runtime with a network namespace per sandbox: POST the claim, POST a session running ``echo
ready``, open its SSE stream from the start and read until the first ``output`` event. The clock
runs from the claim's request to that event. The sandbox is deleted after each sample, outside
the clock.

Baseline in the same run, interleaved round by round: the floor, ``unshare --net`` + bubblewrap
running the same ``echo`` directly (a fresh network namespace, new user and pid namespaces, the
host's system read-only), timed from the spawn to its first byte.

Variants: the server with its warm pool (the default size) and with ``--warm-pool 0``; with
``SESSIOND_BENCH_BASE_PYTHON`` set to another checkout's interpreter, that checkout's server too
(the code before a change, measured in the same rounds).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx

from session_supervisor.infra.bubblewrap import _system_binds
from tests.helpers import TOKEN, ok
from tests.serverproc import ServerProcess

from .common import Report, percentile

U = "/api/v1/sandboxes"
ECHO = {"command": ["echo", "ready"]}
SLEEP = {"command": ["sleep", "600"]}
SETTLE_S = 0.1  # between samples: the pool refills (and a delete's work ends) as between real claims


class OtherCheckout(ServerProcess):
    """The same server from another checkout (its own interpreter and installed package)."""

    def __init__(self, python: str, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.python = python

    def command(self) -> list[str]:
        argv = super().command()
        return [self.python, *argv[1:]]


def floor_argv() -> list[str]:
    return ["unshare", "--net", "--", shutil.which("bwrap") or "bwrap", *_system_binds(),
            "--proc", "/proc", "--dev", "/dev", "--unshare-user", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--die-with-parent", "--", "echo", "ready"]


def floor_once(argv: list[str]) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    first = proc.stdout.read(1)
    elapsed = time.perf_counter() - started
    proc.stdout.read()
    proc.wait(timeout=30)
    if first != b"r":
        raise RuntimeError(f"the floor's command printed {first!r}")
    return elapsed


def claim_once(http: httpx.Client) -> tuple[float, float, float, float]:
    """Seconds from the claim's request to its 201, to the session's 201, to the first output event;
    and the delete's, from its request to its 202, of the sandbox with a process still running."""
    started = time.perf_counter()
    sandbox = ok(http.post(U, json={"template": "default"}), 201, allow_nulls=True)["sandbox_id"]
    claimed = time.perf_counter()
    sid = ok(http.post(f"{U}/{sandbox}/sessions", json=ECHO), 201)["id"]
    created = time.perf_counter()
    with http.stream("GET", f"{U}/{sandbox}/sessions/{sid}/events/stream", params={"after": 0}) as stream:
        for line in stream.iter_lines():
            if line == "event: output":
                break
            if time.perf_counter() - started > 60:
                raise TimeoutError(f"no output from {sandbox} within 60 s")
    seen = time.perf_counter()
    ok(http.post(f"{U}/{sandbox}/sessions", json=SLEEP), 201)  # outside the clock: something to end
    deleting = time.perf_counter()
    ok(http.delete(f"{U}/{sandbox}"), 202)
    return claimed - started, created - started, seen - started, time.perf_counter() - deleting


def servers(work: Path) -> dict[str, ServerProcess]:
    env = {"SESSIOND_NETWORK": "netns"}
    out: dict[str, ServerProcess] = {
        "pool": ServerProcess(work / "pool", token=TOKEN, runtime="bwrap", extra_env=env),
        "no pool": ServerProcess(work / "no-pool", token=TOKEN, runtime="bwrap", extra_env=env,
                                 extra_args=["--warm-pool", "0"]),
    }
    base = os.environ.get("SESSIOND_BENCH_BASE_PYTHON")
    if base:
        out["before"] = OtherCheckout(base, work / "before", token=TOKEN, runtime="bwrap", extra_env=env)
    return out


def claim_to_output(work: Path, rounds: int) -> Report:
    report = Report("claim -> first output event (httpx, SSE, hardened runtime, network namespace)")
    floor = report.figure("floor: unshare --net + bwrap echo, p50", "ms", higher_is_better=False)
    if os.geteuid() != 0 or not shutil.which("bwrap"):
        floor.note = "needs root and bubblewrap"
        return report
    procs = servers(work)
    figures = {}
    for name in procs:
        baselines = [floor.name] + (["claim -> output p50, before"] if name != "before" and "before" in procs else [])
        figures[name] = {
            "first": report.figure(f"claim -> output p50, {name}", "ms", baseline=baselines, higher_is_better=False),
            "p90": report.figure(f"claim -> output p90, {name}", "ms", higher_is_better=False),
            "claim": report.figure(f"  claim's 201 p50, {name}", "ms", higher_is_better=False),
            "create": report.figure(f"  + session's 201 p50, {name}", "ms", higher_is_better=False),
            "delete": report.figure(f"delete (a process running) until its 202, p50, {name}", "ms",
                                    higher_is_better=False),
        }
    samples: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in procs}
    floors: list[float] = []
    argv = floor_argv()
    clients: dict[str, httpx.Client] = {}
    try:
        for name, proc in procs.items():
            proc.start()
            clients[name] = httpx.Client(base_url=proc.url, headers={"Authorization": f"Bearer {TOKEN}"},
                                         timeout=60.0)
        for name, http in clients.items():  # warm-up: page cache, first cgroups, the connection
            claim_once(http)
        floor_once(argv)
        for _ in range(rounds):
            time.sleep(SETTLE_S)
            floors.append(floor_once(argv))
            for name, http in clients.items():
                time.sleep(SETTLE_S)
                samples[name].append(claim_once(http))
    finally:
        for http in clients.values():
            http.close()
        for proc in procs.values():
            proc.stop()
    floor.runs = [1000 * percentile(floors, 50)]
    for name, figs in figures.items():
        got = samples[name]
        figs["first"].runs = [1000 * percentile([s[2] for s in got], 50)]
        figs["p90"].runs = [1000 * percentile([s[2] for s in got], 90)]
        figs["claim"].runs = [1000 * percentile([s[0] for s in got], 50)]
        figs["create"].runs = [1000 * percentile([s[1] for s in got], 50)]
        figs["delete"].runs = [1000 * percentile([s[3] for s in got], 50)]
    report.notes.append(f"{rounds} rounds, the variants and the floor interleaved, {SETTLE_S * 1000:.0f} ms "
                        f"between samples")
    return report
