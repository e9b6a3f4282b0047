"""A tenant's contexts cannot take the server's memory: a flooding exec, many retained contexts,
huge inputs. Each test prints the server's RSS (VmRSS of its process) at the start, at its peak
and after the sandbox is deleted."""
from __future__ import annotations

import concurrent.futures
import time

import orjson

from tests.helpers import claim_sandbox, ok

from .memory import MIB, PeakSampler, rss_bytes, settle_rss

GROWTH_LIMIT = 256 * MIB
RETURN_LIMIT = 64 * MIB
# What ``sandbox.run("python", code)`` sends: a REPL context, then the code to its exec (512 MiB of
# output: a gibibyte takes 24 s through the terminal here, close to the exec timeout of 30 s).
FLOOD = "import sys; _ = [sys.stdout.write('x' * (1 << 20)) for i in range(512)]"


def repl(http, sb: str) -> str:
    return ok(http.post(f"/api/v1/sandboxes/{sb}/contexts", json={"type": "repl", "repl": {"alias": "python"}}),
              201)["id"]


def figure(name: str, start: int, peak: int, after: int | None = None) -> None:
    tail = f", after delete {after / MIB:.0f} MiB ({(after - start) / MIB:+.0f})" if after is not None else ""
    print(f"\n{name}: server RSS start {start / MIB:.0f} MiB, peak {peak / MIB:.0f} MiB "
          f"(+{(peak - start) / MIB:.0f}){tail}")


def delete_and_settle(http, hardened, sb: str, start: int) -> int:
    assert http.delete(f"/api/v1/sandboxes/{sb}").status_code == 202
    return settle_rss(hardened.proc.pid, start + RETURN_LIMIT)


def test_an_exec_that_prints_512_mib_answers_a_bounded_body_with_a_truncation_flag(hardened, http):
    sb = claim_sandbox(http)
    ctx = repl(http, sb)
    ok(http.post(f"/api/v1/sandboxes/{sb}/contexts/{ctx}/exec", json={"data": "1 + 1"}), 200)  # warmed up
    pid = hardened.proc.pid
    start = rss_bytes(pid)
    began = time.monotonic()
    with PeakSampler(pid) as peak:
        resp = http.post(f"/api/v1/sandboxes/{sb}/contexts/{ctx}/exec", json={"data": FLOOD}, timeout=300)
    took = time.monotonic() - began
    data = ok(resp, 200)
    print(f"\nflood exec: {len(resp.content) / MIB:.1f} MiB body in {took:.1f} s, "
          f"{data.get('output_dropped_bytes', 0) / MIB:.0f} MiB dropped")
    assert data["output_truncated"] is True and data["output_dropped_bytes"] > 500 * MIB
    assert len(resp.content) <= 5 * MIB  # the exec's 4 MiB tail and its JSON
    assert data["output_raw"].startswith("_S0_> [sessiond: ") and data["output_raw"].rstrip().endswith("x")
    after = delete_and_settle(http, hardened, sb, start)
    figure("flood exec", start, peak.max, after)
    assert peak.max - start <= GROWTH_LIMIT
    assert after - start <= RETURN_LIMIT


def test_forty_contexts_of_16_mib_each_stay_within_the_sandboxs_output_bound(hardened, http):
    sb = claim_sandbox(http)
    pid = hardened.proc.pid
    start = rss_bytes(pid)
    big = ["/usr/bin/python3", "-c", "import sys; sys.stdout.write('y' * (16 << 20))"]
    with PeakSampler(pid) as peak:
        for _ in range(40):
            created = ok(http.post(f"/api/v1/sandboxes/{sb}/contexts",
                                   json={"type": "cmd", "cmd": {"command": big}, "wait_until_done": True}), 201)
            assert created["exit_code"] == 0 and created["output_truncated"] is True
        listed = http.get(f"/api/v1/sandboxes/{sb}/contexts")
    contexts = ok(listed, 200)["contexts"]
    print(f"\n40 x 16 MiB contexts: list {len(listed.content) / 1024:.0f} KiB for {len(contexts)} contexts")
    assert len(contexts) == 40 and len(listed.content) <= MIB
    assert all(c["output_truncated"] and len(c["stdout"]) <= 1024 for c in contexts)
    one = ok(http.get(f"/api/v1/sandboxes/{sb}/contexts/{contexts[-1]['id']}"), 200)
    assert one["stdout"].startswith("[sessiond: ") and one["output_dropped_bytes"] > 0  # the marker
    after = delete_and_settle(http, hardened, sb, start)
    figure("40 x 16 MiB contexts", start, peak.max, after)
    assert peak.max - start <= GROWTH_LIMIT
    assert after - start <= RETURN_LIMIT


def test_six_inputs_of_150_mib_to_a_context_get_429_and_cost_no_memory(hardened, http):
    sb = claim_sandbox(http)
    ctx = ok(http.post(f"/api/v1/sandboxes/{sb}/contexts",
                       json={"type": "cmd", "cmd": {"command": ["sleep", "600"]}}), 201)["id"]
    body = orjson.dumps({"data": "z" * (150 * MIB)})
    pid = hardened.proc.pid
    start = rss_bytes(pid)

    def send(_):
        return http.post(f"/api/v1/sandboxes/{sb}/contexts/{ctx}/input", content=body,
                         headers={"content-type": "application/json"}, timeout=300).status_code

    with PeakSampler(pid) as peak, concurrent.futures.ThreadPoolExecutor(6) as pool:
        codes = list(pool.map(send, range(6)))
    print(f"\n6 x 150 MiB context inputs: {codes}")
    assert codes == [429] * 6
    ok(http.post(f"/api/v1/sandboxes/{sb}/contexts/{ctx}/input", json={"data": "small"}), 200)  # still open
    after = delete_and_settle(http, hardened, sb, start)
    figure("6 x 150 MiB inputs", start, peak.max, after)
    assert peak.max - start <= GROWTH_LIMIT
    assert after - start <= RETURN_LIMIT
