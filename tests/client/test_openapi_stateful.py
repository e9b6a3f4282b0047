"""Schemathesis' stateful phase follows the document's links against a real server, bounded.

Four passes, one per family of flows, so that each pass's links compete only with their
own: sessions (claim, create, attempts, input, events, with pause and resume of their
sandboxes), sandboxes and their workspaces (claim, pause, resume, refresh, updates, network,
delete, contexts, files), the AeroLVM facade, and API keys and teams. Each pass is a fixed
number of scenarios from a fixed seed, cut short at its deadline, so that the module stays
under two and a half minutes on two cores (about 110 s; the sessions pass has the most links and needs its minute on a loaded machine).

It checks that every pass covers at least 80% of the links it selects, that no call gets a
5xx (the contracts' 503 for a paused sandbox or a lifecycle transition in progress is an
answer, not an error), and that every call answers. Known server bugs fixed outside the
API layer are expected failures by name, and only while they are the only ones.
"""
from __future__ import annotations

import re
import shutil
import time

import pytest

pytest.importorskip("schemathesis")

from tests.client.stateful_pass import operation_ids, run, tracebacks  # noqa: E402
from tests.helpers import TOKEN  # noqa: E402
from tests.serverproc import ServerProcess  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="the stateful run needs bubblewrap"),
              pytest.mark.timeout(240)]

SEED = 20231
MIN_COVERAGE = 0.8
# name -> (operations, scenarios, deadline in seconds)
PASSES = {
    "sessions": (operation_ids("sessions", also=("claim_sandbox", "pause_sandbox", "resume_sandbox")), 80, 60),
    "sandboxes": (operation_ids("sandboxes", "contexts", "files"), 70, 25),
    "aerolvm": (operation_ids("aerolvm"), 20, 12),
    "access": (operation_ids("access"), 15, 8),
}
# Bugs the stateful run found that are fixed outside the API layer: (name, what the failure
# reads as). Each is an expected failure only while it is the only kind of failure.
KNOWN_SERVER_ERRORS: tuple = ()  # each one the stateful run found is fixed (see git log)
KNOWN_UNANSWERED: tuple = ()
# An exec waits up to 30 s for the REPL's prompt before its documented 408: longer than a call may take here.
SLOW_BY_DESIGN = r"^POST /api/v1/sandboxes/\{sandbox_id\}/contexts/\{context_id\}/exec: .*timed out"


@pytest.fixture(scope="module")
def passes(tmp_path_factory):
    server = ServerProcess(tmp_path_factory.mktemp("stateful-data"), token=TOKEN, runtime="bwrap")
    server.start()
    started = time.monotonic()
    try:
        results = {name: run(server.url, TOKEN, operations=ops, scenarios=scenarios, seed=SEED,
                             deadline_s=deadline)
                   for name, (ops, scenarios, deadline) in PASSES.items()}
    finally:
        stopping = time.monotonic()
        server.stop()
    log = server.log_path.read_text(errors="replace")
    print(f"passes {stopping - started:.0f} s, server stop {time.monotonic() - stopping:.0f} s")
    for name, summary in results.items():
        print(f"{name}: {summary}")
    return results, log


def _report(found: list[str], known: tuple, log: str) -> None:
    """Fail on anything not known; expect the failure (by name) while only known ones occur."""
    if not found:
        return
    names = {name for text in found for name, pattern in known if re.search(pattern, text, re.S)}
    unknown = [text for text in found if not any(re.search(pattern, text, re.S) for _, pattern in known)]
    detail = "\n".join(found[:20]) + "\n--- server log errors ---\n" + "\n".join(tracebacks(log)[:10])
    if unknown:
        pytest.fail(f"{len(unknown)} unexpected:\n" + "\n".join(unknown[:20]) + "\n" + detail)
    pytest.xfail("known server bugs: " + "; ".join(sorted(names)) + "\n" + detail)


@pytest.mark.parametrize("name", list(PASSES))
def test_the_stateful_phase_follows_at_least_80_percent_of_the_links_it_selects(passes, name):
    summary = passes[0][name]
    assert summary.selected > 0, f"{name}: no links selected, so no stateful testing: {summary}"
    assert summary.coverage >= MIN_COVERAGE, f"{name}: {summary}\ncovered: {sorted(summary.covered)}"


def test_no_call_of_the_stateful_phase_gets_a_server_error(passes):
    results, log = passes
    _report([str(error) for summary in results.values() for error in summary.server_errors],
            KNOWN_SERVER_ERRORS, log)


def test_every_call_of_the_stateful_phase_answers_within_its_timeout(passes):
    results, log = passes
    _report([text for summary in results.values() for text in summary.unanswered
             if not re.search(SLOW_BY_DESIGN, text)], KNOWN_UNANSWERED, log)
