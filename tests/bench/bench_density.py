"""Density: many live sandboxes on one node, each with a running session.

One server on the hardened runtime with a network namespace (and a disk) per sandbox, its warm
pool at the default size. Sandboxes are claimed one after the other, each with a ``cat`` session
(its process alive, waiting for input), as an agent platform fills a node; the clock runs from
the claim's request to the session's 201. What must stay flat as the count grows, measured with
a few sandboxes live and again with all of them (the baseline is the same call at the start):

- claim+create: the last tenth of the claims against the first tenth (the issue's "last 100 vs
  first 100" at 1,000);
- GET of a sandbox, a page of the sandbox list (50), GET of a session, and a session's echo (an
  input POSTed to a ``cat``, until its output arrives on an open SSE stream), p50 each;
- the server's memory: RSS grown per live sandbox;
- the floor, ``unshare --net`` + bwrap ``echo`` (bench_claim), which the kernel's own per-namespace
  and per-mount costs can slow down as the host fills.

The machine's load average is printed with the figures: two other engineers' runs share it.
"""
from __future__ import annotations

import base64
import os
import random
import shutil
import subprocess
import threading
import time
from pathlib import Path

import httpx

from tests.helpers import TOKEN, ok
from tests.serverproc import ServerProcess

from .bench_claim import OtherCheckout, floor_argv, floor_once
from .common import KIB, Report, cpu_seconds, percentile, rss_kib

U = "/api/v1/sandboxes"
CAT = {"command": ["cat"]}
PROBES = {"GET sandbox": 60, "GET list page": 30, "GET session": 60, "echo": 40, "floor": 20}
IDLE_S = 5.0  # the server's own CPU while no call comes: its timers and sweeps


def _client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120.0)


def _claim_and_create(http: httpx.Client) -> tuple[str, str, float]:
    started = time.perf_counter()
    sandbox = ok(http.post(U, json={"template": "default"}), 201, allow_nulls=True)["sandbox_id"]
    sid = ok(http.post(f"{U}/{sandbox}/sessions", json=CAT), 201)["id"]
    return sandbox, sid, time.perf_counter() - started


def _echo(http: httpx.Client, sandbox: str, sid: str, n: int) -> float:
    """An input to ``cat`` until its echo is on the SSE stream (opened first, from now on)."""
    path = f"{U}/{sandbox}/sessions/{sid}"
    latest = ok(http.get(path), 200)["cursor"]["latest"]
    marker = f"echo-{n}\n".encode()
    with http.stream("GET", f"{path}/events/stream", params={"after": latest}) as stream:
        started = time.perf_counter()
        ok(http.post(f"{path}/inputs", json={"input_id": f"probe-{n}",
                                             "data_base64": base64.b64encode(marker).decode()}), 202)
        for line in stream.iter_lines():
            if line == "event: output":
                return time.perf_counter() - started
            if time.perf_counter() - started > 30:
                raise TimeoutError("no echo within 30 s")
    raise RuntimeError("the stream ended before the echo")


def _get_session(http: httpx.Client, live: tuple[str, str]) -> None:
    ok(http.get(f"{U}/{live[0]}/sessions/{live[1]}"), 200)


def _calls(http: httpx.Client, live: list[tuple[str, str]], probe: tuple[str, str], label: str) -> dict:
    rng = random.Random(len(live))
    argv = floor_argv()
    return {
        "GET sandbox": lambda i: ok(http.get(f"{U}/{rng.choice(live)[0]}"), 200),
        "GET list page": lambda i: ok(http.get(U, params={"limit": 50}), 200),
        "GET session": lambda i: _get_session(http, rng.choice(live)),
        "echo": lambda i: _echo(http, probe[0], probe[1], hash((label, i))),
        "floor": lambda i: floor_once(argv),
    }


def _probe(http: httpx.Client, live: list[tuple[str, str]], probe: tuple[str, str], label: str,
           ref: httpx.Client, ref_live: list[tuple[str, str]]) -> dict:
    """p50 of each call on the filled server and, alternating with it, on the reference one."""
    ours, theirs = _calls(http, live, probe, label), _calls(ref, ref_live, ref_live[0], label)
    out = {}
    for name, count in PROBES.items():
        samples: dict[str, list[float]] = {"ours": [], "ref": []}
        for i in range(count):
            for side, calls in (("ours", ours), ("ref", theirs)):
                began = time.perf_counter()
                got = calls[name](i)
                samples[side].append(got if isinstance(got, float) else time.perf_counter() - began)
        out[name] = percentile(samples["ours"], 50)
        out[f"{name} ref"] = percentile(samples["ref"], 50)
    return out


def _idle_cpu(pid: int) -> float:
    """Milliseconds of CPU a second the server spends while nobody calls it."""
    before = cpu_seconds(pid)
    time.sleep(IDLE_S)
    return 1000 * (cpu_seconds(pid) - before) / IDLE_S


def _fill(server: ServerProcess, count: int, reference: ServerProcess) -> dict:
    """Claim ``count`` sandboxes with a session each on a started ``server``; what was measured.
    After each claim the same claim is timed on ``reference`` (its sandbox deleted at once), so the
    machine's load in each round is measured with it: the VM's other work swings a claim 2-3x."""
    tenth = max(1, count // 10)
    times: list[float] = []
    ref_times: list[float] = []
    out: dict = {"loads": []}
    with _client(server.url) as http, _client(reference.url) as ref:
        ref_live = [_claim_and_create(ref)[:2]]  # the reference's own probe sandbox

        def claim_both() -> tuple[str, str]:
            sandbox, sid, took = _claim_and_create(http)
            times.append(took)
            other, _, ref_took = _claim_and_create(ref)
            ref_times.append(ref_took)
            ref.delete(f"{U}/{other}")
            return sandbox, sid

        probe = _claim_and_create(http)[:2]  # the echo's own sandbox, live from the start
        live = [probe]
        time.sleep(2)  # the pool refilled, the server settled: the memory baseline
        out["rss_start"] = rss_kib(server.proc.pid)
        for _ in range(min(tenth, 10)):
            live.append(claim_both())
        out["loads"].append(os.getloadavg()[0])
        out["idle few"] = _idle_cpu(server.proc.pid)
        out["few"] = _probe(http, live, probe, "few", ref, ref_live)
        while len(times) < count:
            live.append(claim_both())
        time.sleep(2)
        out["rss_end"] = rss_kib(server.proc.pid)
        out["loads"].append(os.getloadavg()[0])
        out["idle many"] = _idle_cpu(server.proc.pid)
        out["many"] = _probe(http, live, probe, "many", ref, ref_live)
        out["loads"].append(os.getloadavg()[0])
        _delete_all(server.url, [sandbox for sandbox, _ in live])
    out["first"] = percentile(times[:tenth], 50)
    out["last"] = percentile(times[-tenth:], 50)
    out["ref first"] = percentile(ref_times[:tenth], 50)
    out["ref last"] = percentile(ref_times[-tenth:], 50)
    out["growth"] = (out["last"] / out["ref last"]) / (out["first"] / out["ref first"])
    return out


def _delete_all(url: str, sandboxes: list[str]) -> None:
    """Deleted before the stop: a stop checkpoints every sandbox still running, which for a
    thousand takes longer than the stop waits before it kills the server."""
    def worker(chunk: list[str]) -> None:
        with _client(url) as http:
            for sandbox in chunk:
                http.delete(f"{U}/{sandbox}")
    threads = [threading.Thread(target=worker, args=(sandboxes[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)


def unmount_below(root: Path) -> int:
    """What a server killed at its stop left mounted under ``root`` (its sandboxes' disks)."""
    prefix = str(Path(root).resolve()) + "/"
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f if line.split()[4].startswith(prefix)]
    for point in sorted(points, reverse=True):
        subprocess.run(["umount", "--lazy", point], capture_output=True, timeout=60, check=False)
    return len(points)


def density(work: Path, count: int) -> Report:
    """With ``SESSIOND_BENCH_BASE_PYTHON`` (another checkout's interpreter) that checkout's server
    is filled first, then this one's, each on a data dir of its own, one after the other."""
    report = Report(f"density: {count} live sandboxes, each with a running session (hardened, netns)")
    tenth = max(1, count // 10)
    env = {"SESSIOND_NETWORK": "netns"}
    variants = {"": lambda d: ServerProcess(d, token=TOKEN, runtime="bwrap", start_timeout=120, extra_env=env)}
    base = os.environ.get("SESSIOND_BENCH_BASE_PYTHON")
    if base:
        variants = {", before": lambda d: OtherCheckout(base, d, token=TOKEN, runtime="bwrap", start_timeout=120,
                                                         extra_env=env), ", after": variants[""]}
    figures = {}
    for suffix in variants:
        other = ", before" if suffix == ", after" else None
        def fig(name: str, unit: str, baseline: str | None = None) -> object:
            bases = [b for b in ((baseline + suffix) if baseline else None, (name + other) if other else None) if b]
            return report.figure(name + suffix, unit, baseline=bases, higher_is_better=False)
        figures[suffix] = {
            "first": fig(f"claim+create p50, first {tenth}", "ms"),
            "last": fig(f"claim+create p50, last {tenth}", "ms", f"claim+create p50, first {tenth}"),
            "ref first": fig(f"  the same on a server with none, in the first {tenth} rounds", "ms"),
            "ref last": fig(f"  the same on a server with none, in the last {tenth} rounds", "ms"),
            "growth": fig("claim+create last/first, each against the server with none", "x"),
            "memory": fig("server memory per live sandbox", "KiB"),
            "idle few": fig("server CPU while idle, few live", "ms/s"),
            "idle many": fig(f"server CPU while idle, {count} live", "ms/s", "server CPU while idle, few live"),
            **{f"{name} few": fig(f"{name} p50, few live", "ms") for name in PROBES},
            **{f"{name} many": fig(f"{name} p50, {count} live", "ms", f"{name} p50, few live") for name in PROBES},
            **{f"{name} growth": fig(f"{name}: {count} live/few, each against the server with none", "x")
               for name in PROBES},
        }
    if os.geteuid() != 0 or not shutil.which("bwrap"):
        for figure in (f for figs in figures.values() for f in figs.values()):
            figure.note = "needs root and bubblewrap"
        return report
    for suffix, make in variants.items():
        name = suffix.replace(", ", "-")
        server, reference = make(work / f"data{name}"), make(work / f"reference{name}")
        try:
            server.start()
            reference.start()
            got = _fill(server, count, reference)
        finally:
            for proc in (server, reference):
                proc.stop()
                left = unmount_below(proc.data_dir)
                if left:
                    report.notes.append(f"{suffix.strip(', ') or 'this checkout'}: {left} mount(s) left by the stop, "
                                        "removed")
        figs = figures[suffix]
        for key in ("first", "last", "ref first", "ref last"):
            figs[key].runs = [1000 * got[key]]
        figs["growth"].runs = [got["growth"]]
        figs["memory"].runs = [(got["rss_end"] - got["rss_start"]) / count]
        figs["idle few"].runs = [got["idle few"]]
        figs["idle many"].runs = [got["idle many"]]
        for name in PROBES:
            few, many = got["few"], got["many"]
            figs[f"{name} few"].runs = [1000 * few[name]]
            figs[f"{name} many"].runs = [1000 * many[name]]
            figs[f"{name} growth"].runs = [(many[name] / many[f"{name} ref"]) / (few[name] / few[f"{name} ref"])]
        report.notes.append(f"{suffix.strip(', ') or 'this checkout'}: load average "
                            f"{', '.join(f'{x:.1f}' for x in got['loads'])} at the two probes and the end; server "
                            f"RSS {got['rss_start'] / KIB:.0f} MiB at the start, {got['rss_end'] / KIB:.0f} MiB at the end")
    report.notes.append(f"{count} sandboxes claimed one after another, each with a cat session; probes with "
                        f"{min(tenth, 10) + 1} and with {count + 1} live")
    return report
