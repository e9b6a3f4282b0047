"""Run the benchmark suite: ``python -m tests.bench`` (full) or ``--smoke`` (seconds, CI).

Each benchmark prints its figures with the baselines measured in the same run and the
ratios between them. ``--only pipe,pty,echo,sessions,replay,restart,cli,run,netns,start,image,volume,fairness,rss,store,ingress,rootfs,claim,pause,density,cluster``
picks some;
``--json FILE`` also writes every run's numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from . import (bench_claim, bench_cli, bench_cluster, bench_density, bench_echo, bench_faults, bench_image_start,
               bench_ingest, bench_ingress, bench_netns, bench_pause, bench_pty, bench_replay, bench_restart,
               bench_rootfs, bench_run, bench_sandbox_start, bench_sessions, bench_volume_bind)
from .common import MIB


@dataclass(frozen=True)
class Sizes:
    pipe_bytes: int
    pty_bytes: int
    runs: int
    echo_count: int
    echo_warmup: int
    sessions: int
    replay_bytes: int
    restart_sessions: int
    restart_short: int
    restart_long: int
    cli_calls: int
    start_rounds: int
    install: bool  # may pip-install supervisor into the bench cache
    extras: bool  # incompressible ingest, full-replay restart
    netns_starts: int = 5  # sandbox starts per network mode
    image_starts: int = 5  # claims per template (default, an image template)
    volume_binds: int = 5  # claims with and without a volume at /workspace
    # The raw PTY reader swings between ~55 and ~105 MB/s from one run to the next on the
    # 2-vCPU VM: a median of 3 made the ratio anything from 0.5x to 1.4x.
    pty_runs: int = 1
    pipe_runs: int = 1  # interleaved rounds of the pipe rows: supervisord alone swings 800-1,200 MB/s
    random_bytes: int = 4 * MIB  # the incompressible pipe input (cat of a file of random bytes)
    pty_line_bytes: int = 1 * MIB  # the PTY's one-long-line workload
    unknown_ids: int = 20_000
    storm_bytes: int = 1024 * MIB
    store_bytes: int = 400 * MIB
    cluster_pipe_bytes: int = 256 * MIB
    cluster_long: int = 20_000  # events of the long journal resumed on the other node
    cluster_short: int = 20
    run_rounds: int = 10  # sessionctl run against the SDK
    ingress_requests: int = 1000
    ingress_blob: int = 256 * MIB
    rootfs_fill: int = 1024 * MIB  # the full sandbox's workspace for the fork and snapshot figures
    rootfs_rounds: int = 10
    claim_rounds: int = 3  # claim -> first output event, per variant
    density: int = 10  # live sandboxes, each with a session
    pause_rounds: int = 3  # pause/resume cycles of a sandbox with a PTY shell


FULL = Sizes(pipe_bytes=1024 * MIB, pty_bytes=64 * MIB, runs=3, echo_count=1000, echo_warmup=100,
             sessions=1000, replay_bytes=64 * MIB, restart_sessions=1000, restart_short=16,
             restart_long=1024, cli_calls=100, start_rounds=200, install=True, extras=True, netns_starts=100,
             pty_runs=9, pipe_runs=5, random_bytes=256 * MIB, pty_line_bytes=32 * MIB, image_starts=50,
             volume_binds=30, claim_rounds=60, density=1000, pause_rounds=30)
SMOKE = Sizes(pipe_bytes=16 * MIB, pty_bytes=2 * MIB, runs=1, echo_count=30, echo_warmup=5,
              sessions=20, replay_bytes=2 * MIB, restart_sessions=10, restart_short=4,
              restart_long=64, cli_calls=5, start_rounds=5, install=False, extras=False, netns_starts=3,
              unknown_ids=500, storm_bytes=96 * MIB, store_bytes=16 * MIB, cluster_pipe_bytes=8 * MIB,
              cluster_long=200, cluster_short=10, run_rounds=1, ingress_requests=20, ingress_blob=4 * MIB,
              image_starts=3, volume_binds=2, rootfs_fill=16 * MIB, rootfs_rounds=1, density=4)

BENCHMARKS = {
    "pipe": lambda w, s: bench_ingest.pipe_ingest(w, s.pipe_bytes, s.random_bytes, s.pipe_runs, s.install),
    "pty": lambda w, s: bench_pty.pty_ingest(w, s.pty_bytes, s.pty_line_bytes, s.pty_runs),
    "echo": lambda w, s: bench_echo.echo_latency(w, s.echo_count, s.echo_warmup),
    "sessions": lambda w, s: bench_sessions.many_sessions(w, s.sessions),
    "replay": lambda w, s: bench_replay.replay(w, s.replay_bytes, s.runs),
    "restart": lambda w, s: bench_restart.restart_cost(w, s.restart_sessions, s.restart_short,
                                                       s.restart_long, s.runs, s.extras),
    "cli": lambda w, s: bench_cli.cli_startup(w, s.cli_calls),
    "run": lambda w, s: bench_run.run_vs_sdk(w, s.run_rounds),
    "netns": lambda w, s: bench_netns.start_time(w, s.netns_starts),
    "start": lambda w, s: bench_sandbox_start.sandbox_start(w, s.start_rounds),
    "image": lambda w, s: bench_image_start.image_start(w, s.image_starts),
    "volume": lambda w, s: bench_volume_bind.volume_bind(w, s.volume_binds),
    "fairness": lambda w, s: bench_faults.fairness(w, s.echo_count, s.echo_warmup),
    "rss": lambda w, s: bench_faults.rss(w, s.unknown_ids, s.storm_bytes),
    "store": lambda w, s: bench_faults.store_size(w, s.store_bytes),
    "ingress": lambda w, s: bench_ingress.ingress_cost(w, s.ingress_requests, s.ingress_blob),
    "rootfs": lambda w, s: bench_rootfs.rootfs_copies(w, s.rootfs_fill, s.rootfs_rounds),
    "claim": lambda w, s: bench_claim.claim_to_output(w, s.claim_rounds),
    "pause": lambda w, s: bench_pause.pause_resume(w, s.pause_rounds),
    "density": lambda w, s: bench_density.density(w, s.density),
    "cluster": lambda w, s: bench_cluster.cluster_bench(w, s.cluster_pipe_bytes, s.runs, s.echo_count,
                                                        s.echo_warmup, s.cluster_long, s.cluster_short),
}


def raise_fd_limit() -> None:
    """1,000 live sessions need a few thousand descriptors in the server (it inherits this)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run(names: list[str], sizes: Sizes, work: Path, echo=print, keep_going: bool = False) -> list:
    raise_fd_limit()
    reports = []
    for name in names:
        started = time.perf_counter()
        load = os.getloadavg()[0]
        try:
            report = BENCHMARKS[name](work / name, sizes)
        except Exception:
            if not keep_going:
                raise
            echo(f"## {name}: FAILED\n{traceback.format_exc()}")
            continue
        report.notes.append(f"took {time.perf_counter() - started:.0f} s; load average "
                            f"{load:.1f} before, {os.getloadavg()[0]:.1f} after ({os.cpu_count()} CPUs)")
        reports.append(report)
        echo("\n".join(report.lines()) + "\n")
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one run each (CI)")
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated subset")
    parser.add_argument("--json", type=Path, help="write all figures here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    sizes = SMOKE if args.smoke else FULL
    work = Path(tempfile.mkdtemp(prefix="sessiond-bench-"))
    print(f"# sessiond benchmarks ({'smoke' if args.smoke else 'full'}) on {platform.node()}: "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, work dir {work}\n")
    try:
        reports = run(names, sizes, work, keep_going=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps([r.as_dict() for r in reports], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
