"""The ingress's cost: a request to a sandbox's service through the ingress (host form) against the
same request straight to the sandbox's address from the host, interleaved in the same run.

A ``cmd`` service in a bwrap sandbox with its own namespace serves a small JSON answer
(``/echo`` of tests/edges/sandbox_app.py) and a file (``/blob``); the baseline talks to
``10.200.x.2:PORT`` directly, which is what the ingress itself connects to.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx

from tests.conftest import make_http
from tests.helpers import TOKEN, claim_sandbox, create_session, ok, wait_exited
from tests.network.netlab import PYTHON, sandbox_address
from tests.serverproc import ServerProcess

from .common import MB, MIB, Report, percentile

APP = (Path(__file__).parent.parent / "edges" / "sandbox_app.py").read_bytes()
PORT = 8070


def ingress_cost(work: Path, requests: int, blob_bytes: int) -> Report:
    report = Report("ingress: a request through the ingress against one straight to the sandbox")
    through = report.figure("GET p50 through the ingress", "ms", baseline="GET p50 straight to the sandbox",
                            higher_is_better=False)
    direct = report.figure("GET p50 straight to the sandbox", "ms", higher_is_better=False)
    down = report.figure("download through the ingress", "MB/s", baseline="download straight from the sandbox")
    down_direct = report.figure("download straight from the sandbox", "MB/s")
    if os.geteuid() != 0 or not shutil.which("bwrap"):
        for figure in report.figures:
            figure.note = "needs root and bubblewrap (a namespace per sandbox)"
        return report
    server = ServerProcess(work / "data", token=TOKEN, runtime="bwrap", extra_env={"SESSIOND_NETWORK": "netns"})
    try:
        server.start()
        with make_http(server.url) as api:
            sb = claim_sandbox(api)
            ok(api.post(f"/api/v1/sandboxes/{sb}/files", params={"path": "/workspace/app.py"}, content=APP), 200)
            made = create_session(api, sb, {"command": ["sh", "-c", f"head -c {blob_bytes} /dev/zero > /workspace/blob"]})
            wait_exited(api, sb, made["id"])
            service = {"id": "app", "port": PORT, "ingress": {"public": True},
                       "runtime": {"type": "cmd", "command": [PYTHON, "/workspace/app.py", str(PORT), "bench"],
                                   "cwd": "/workspace"}}
            ok(api.put(f"/api/v1/sandboxes/{sb}/services", json={"services": [service]}), 200)
            host = {"Host": f"{sb}--p{PORT}.localhost:{server.port}"}
            targets = {"ingress": (f"{server.url}", host),
                       "direct": (f"http://{sandbox_address(server.data_dir, sb)}:{PORT}", {})}
            with httpx.Client(timeout=60) as client:
                assert client.get(targets["ingress"][0] + "/echo", headers=host).status_code == 200  # starts it
                times = {"ingress": [], "direct": []}
                for _ in range(requests):
                    for name, (base, headers) in targets.items():  # interleaved: the same load for both
                        started = time.perf_counter()
                        client.get(base + "/echo", headers=headers).raise_for_status()
                        times[name].append(time.perf_counter() - started)
                for _ in range(3):
                    for name, figure in (("ingress", down), ("direct", down_direct)):
                        base, headers = targets[name]
                        started = time.perf_counter()
                        size = len(client.get(base + "/blob", headers=headers).content)
                        figure.runs.append(size / (time.perf_counter() - started) / MB)
            through.runs = [1000 * percentile(times["ingress"], 50)]
            direct.runs = [1000 * percentile(times["direct"], 50)]
            report.notes.append(f"{requests} small GETs each, interleaved; a {blob_bytes // MIB} MiB download 3 times "
                                f"each; one keep-alive client for both")
    finally:
        server.stop()
    return report
