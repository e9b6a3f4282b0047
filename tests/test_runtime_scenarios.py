"""The pause/resume/crash stories of ``scenarios/`` (issue 6), each run to its end.

Fake-runner stories take milliseconds; ``runner = "real"`` ones use real processes.
A failing story's transcript up to the failed step is in the assertion message.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from scenarios.runner import ScenarioFailed, load, run_file

STORIES = Path(__file__).resolve().parent.parent / "scenarios"
RUNTIME_STORIES = [
    "pause_resume_restart", "pause_resume_stop_policy", "pause_leaves_finished_sessions_alone",
    "paused_sandbox_survives_a_restart", "crash_is_a_runtime_replacement", "clean_shutdown_checkpoints",
    "auto_resume", "ttl_pauses_hard_ttl_deletes", "many_cycles_keep_the_history",
    "replace_runtime_while_paused", "pause_resume_real", "crash_real", "restart_server_real",
]


@pytest.mark.parametrize("name", RUNTIME_STORIES)
def test_the_story_holds(name, tmp_path):
    transcript: list[str] = []
    try:
        run_file(STORIES / f"{name}.toml", tmp_path, emit=transcript.append)
    except ScenarioFailed as exc:
        pytest.fail("\n".join([*transcript, str(exc)]), pytrace=False)


def test_the_stories_use_every_runtime_verb_and_both_runners():
    scenarios = [load(STORIES / f"{name}.toml") for name in RUNTIME_STORIES]
    verbs = {step["do"] for scenario in scenarios for step in scenario.steps}
    assert {"pause", "resume", "replace_runtime", "crash", "restart_server", "audit"} <= verbs
    assert {scenario.runner for scenario in scenarios} == {"fake", "real"}
