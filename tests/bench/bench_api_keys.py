"""What a team's API key costs per request: ``python -m tests.bench.bench_api_keys [--calls N]``.

``GET /api/v1/sandboxes/{id}`` over keep-alive, interleaved call by call with the server's own
token (the baseline: compared in memory, no lookup) and a ``developer`` key of the sandbox's team
(looked up by its hash, then the team check). Once on one machine (keys in ``<data>/keys.sqlite``,
kept in memory) and, when PostgreSQL's binaries are there, once with ``--database-url`` (a private
cluster on a unix socket: every request with a key reads its row).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx

from tests.helpers import TOKEN, ok
from tests.pgcluster import PgCluster, find_bin_dir
from tests.serverproc import ServerProcess

from .common import percentile

WARMUP = 200


def measure(server: ServerProcess, calls: int) -> dict[str, list[float]]:
    admin_headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server.url, headers=admin_headers) as admin:
        team = ok(admin.post("/teams", json={"name": "bench", "home_region_id": "local"}), 201)["id"]
        key = ok(admin.post("/api-keys", headers={"X-Team-ID": team}, json={"name": "bench", "roles": ["developer"]}),
                 201)["key"]
    clients = {"server token": httpx.Client(base_url=server.url, headers=admin_headers),
               "team key": httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"})}
    sandbox = ok(clients["team key"].post("/api/v1/sandboxes", json={"template": "default"}), 201)["sandbox_id"]
    times: dict[str, list[float]] = {name: [] for name in clients}
    try:
        for _ in range(WARMUP + calls):
            for name, client in clients.items():
                started = time.perf_counter()
                response = client.get(f"/api/v1/sandboxes/{sandbox}")
                times[name].append(time.perf_counter() - started)
                assert response.status_code == 200, response.text
    finally:
        for client in clients.values():
            client.close()
    return {name: values[WARMUP:] for name, values in times.items()}


def report(label: str, times: dict[str, list[float]]) -> None:
    print(f"## {label}: GET /api/v1/sandboxes/{{id}}, {len(times['team key'])} calls each, interleaved")
    base = percentile(times["server token"], 50)
    for name, values in times.items():
        p50, p99 = percentile(values, 50), percentile(values, 99)
        print(f"  {name:13s} p50 {p50 * 1e3:6.3f} ms  p99 {p99 * 1e3:7.3f} ms  x{p50 / base:.2f} of the token's p50")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-keys-") as work:
        with ServerProcess(Path(work) / "one", token=TOKEN, runtime="host") as server:
            report("one machine (SQLite, keys in memory)", measure(server, args.calls))
        bin_dir = find_bin_dir()
        if bin_dir is None:
            print("## PostgreSQL: skipped (no server binaries)")
            return
        with PgCluster(bin_dir) as cluster:
            cluster.sql("CREATE DATABASE bench_keys")
            (Path(work) / "checkpoints").mkdir()
            with ServerProcess(Path(work) / "pg", token=TOKEN, runtime="host", extra_args=[
                    "--database-url", cluster.url("bench_keys"), "--checkpoint-dir", str(Path(work) / "checkpoints"),
                    "--node-id", "bench", "--advertise-url", "http://127.0.0.1:9"]) as server:
                report("--database-url (PostgreSQL, a read per request)", measure(server, args.calls))


if __name__ == "__main__":
    main()
