"""``sessionctl`` start-up: wall time of ``sessionctl session get SB SID`` against a live server.

A script calls the CLI in loops, so the cost of one call is mostly interpreter start and
imports. Baselines in the same run, interleaved round-robin: a bare interpreter
(``python -c pass``), the same interpreter importing httpx (the HTTP stack every call
needs), and one GET of the session from an already-running client (the server's share).
The token comes from the server's token file, as on an operator's machine.

Bytecode is cached as on any machine (a warm-up call writes it; PYTHONPYCACHEPREFIX keeps
it out of the checkout): with PYTHONDONTWRITEBYTECODE=1, as some CI images set, every
call would compile our modules again, which measures the compiler, not the CLI.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from session_supervisor.client import Client
from tests.serverproc import ServerProcess

from .common import Report, percentile

TARGET_P50_MS = 150.0


def _wall(argv: list[str], env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def cli_startup(work: Path, calls: int) -> Report:
    report = Report(f"sessionctl session get: wall time of one call ({calls} calls each, interleaved)")
    work.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    sessionctl = str(Path(python).with_name("sessionctl"))
    with ServerProcess(work / "data", token=None, runtime="host") as server:
        env = {k: v for k, v in os.environ.items() if k not in ("SESSIOND_TOKEN", "PYTHONDONTWRITEBYTECODE")}
        env.update(SESSIOND_URL=server.url, SESSIOND_DATA_DIR=str(server.data_dir),
                   PYTHONPYCACHEPREFIX=str(work / "pycache"))
        with Client(server.url, server.token) as client:
            sb = client.claim_sandbox("default").sandbox_id
            sid = client.create_session(sb, {"command": ["/bin/cat"]}).id
            variants = {
                "python -c pass": [python, "-c", "pass"],
                "python -c 'import httpx'": [python, "-c", "import httpx"],
                "sessionctl session get": [sessionctl, "session", "get", sb, sid],
            }
            samples: dict[str, list[float]] = {name: [] for name in variants}
            samples["GET session, warm client"] = []
            for argv in variants.values():  # warm the page cache and write the bytecode once
                _wall(argv, env)
            for _ in range(calls):
                for name, argv in variants.items():
                    samples[name].append(_wall(argv, env))
                started = time.perf_counter()
                client.get_session(sb, sid)
                samples["GET session, warm client"].append(time.perf_counter() - started)
            client.delete_sandbox(sb)
    baselines = ("python -c pass p50", "python -c 'import httpx' p50")
    for q in (50, 90):
        for name, runs in samples.items():
            base = baselines if name == "sessionctl session get" and q == 50 else ()
            report.figure(f"{name} p{q}", "ms", baseline=base, higher_is_better=False).runs.append(
                percentile(runs, q) * 1000)
    p50 = percentile(samples["sessionctl session get"], 50) * 1000
    verdict = "met" if p50 < TARGET_P50_MS else "MISSED"
    report.notes.append(f"target: sessionctl session get p50 < {TARGET_P50_MS:.0f} ms: {verdict} "
                        f"({p50:.0f} ms)")
    return report
