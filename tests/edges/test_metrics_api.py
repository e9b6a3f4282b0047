"""Runtime metrics from a sandbox's cgroups, through the official Python SDK: memory and CPU rise
while a process allocates and spins; the catalog; gaps instead of zeros."""
from __future__ import annotations

import os
import shutil
import time
from datetime import datetime, timedelta, timezone

import pytest
import sandbox0
from sandbox0.apispec.models.sandbox_runtime_metric_name import SandboxRuntimeMetricName as Name
from sandbox0.sandbox_observability import SandboxObservabilityMetricOptions

from tests.conftest import make_http
from tests.helpers import TOKEN, create_session, err, ok
from tests.serverproc import ServerProcess

if os.geteuid() != 0 or shutil.which("bwrap") is None:
    pytest.skip("cgroup metrics need the hardened runtime (root, bubblewrap)", allow_module_level=True)

# Allocates 8 MiB about every 0.2 s up to 160 MiB while it spins, then holds it and keeps spinning.
HOG = ("import time\nheld = []\nend = time.time() + 60\n"
       "while time.time() < end:\n"
       "    if len(held) < 20: held.append(bytearray(8 << 20))\n"
       "    stop = time.time() + 0.2\n"
       "    while time.time() < stop: pass\n")


@pytest.fixture(scope="module")
def metrics_server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("metrics"), token=TOKEN, runtime="bwrap",
                       extra_args=["--metrics-interval", "1"]) as proc:
        yield proc


def values(response, metric: Name) -> list[float]:
    [series] = [s for s in response.series if s.metric == metric]
    return [p.value for segment in series.segments for p in segment.points]


def test_memory_and_cpu_rise_while_a_process_allocates_and_spins(metrics_server):
    sdk = sandbox0.Client(token=TOKEN, base_url=metrics_server.url, timeout=30.0)
    sb = sdk.sandboxes.claim("default")
    try:
        started = datetime.now(timezone.utc)
        time.sleep(3)  # an idle baseline first
        with make_http(metrics_server.url) as http:
            create_session(http, sb.id, {"command": ["python3", "-c", HOG]})
        time.sleep(8)
        options = SandboxObservabilityMetricOptions(
            start_time=started, metrics=[Name.SANDBOX_MEMORY_USAGE, Name.SANDBOX_CPU_USAGE, Name.SANDBOX_PROCESS_COUNT],
            step_seconds=1)
        answer = sb.list_metrics(options)
        memory, cpu = values(answer, Name.SANDBOX_MEMORY_USAGE), values(answer, Name.SANDBOX_CPU_USAGE)
        assert answer.step_seconds == 1 and answer.freshness.status.value == "fresh"
        assert len(memory) >= 8, memory
        assert max(memory) > memory[0] + 100 * 2**20, memory  # it took 160 MiB
        peak = memory.index(max(memory))
        assert memory[peak] >= max(memory[:max(1, peak)]), memory  # rising towards the peak
        assert max(cpu[3:]) > max(cpu[:2]) + 0.05, cpu  # spinning against the idle baseline
        assert max(values(answer, Name.SANDBOX_PROCESS_COUNT)) >= 1
    finally:
        sdk.sandboxes.delete(sb.id)
        sdk.close()


def test_the_catalog_and_the_defaults(metrics_server):
    sdk = sandbox0.Client(token=TOKEN, base_url=metrics_server.url, timeout=30.0)
    sb = sdk.sandboxes.claim("default")
    try:
        names = {d.name.value: (d.kind.value, d.unit.value, d.dimensions) for d in sb.get_metrics_catalog().metrics}
        assert names["sandbox.network.io"] == ("counter", "bytes", ["direction"])
        assert names["sandbox.memory.usage"] == ("gauge", "bytes", [])
        assert len(names) == 14
        time.sleep(2.5)
        answer = sb.list_metrics()  # the last hour: CPU and memory utilization and network I/O
        assert {s.metric.value for s in answer.series} >= {"sandbox.cpu.utilization", "sandbox.memory.utilization"}
        assert answer.partial is True and any(g.reason.value == "no_data" for g in answer.gaps)  # before the claim
        io = [s for s in answer.series if s.metric.value == "sandbox.network.io"]
        assert {s.dimensions.to_dict()["direction"] for s in io} == {"transmit", "receive"}
        assert all(s.unit.value == "bytes_per_second" and s.statistic.value == "rate" for s in io)
    finally:
        sdk.sandboxes.delete(sb.id)
        sdk.close()


def test_bad_metric_queries_are_400(metrics_server):
    with make_http(metrics_server.url) as http:
        sb = ok(http.post("/api/v1/sandboxes", json={"template": "default"}), 201)["sandbox_id"]
        try:
            path = f"/api/v1/sandboxes/{sb}/metrics"
            assert "unknown metric sandbox.disk" in err(http.get(path, params={"metrics": "sandbox.disk"}),
                                                        400, "bad_request")["message"]
            now = datetime.now(timezone.utc)
            for params in ({"statistic": "median"}, {"step_seconds": "0"}, {"max_points": "5000"},
                           {"start_time": now.isoformat(), "end_time": (now - timedelta(seconds=5)).isoformat()},
                           {"start_time": (now - timedelta(days=31)).isoformat()}):
                err(http.get(path, params=params), 400, "bad_request")
        finally:
            http.delete(f"/api/v1/sandboxes/{sb}")
