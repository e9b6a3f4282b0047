"""Every scenario story runs (scenarios/*.toml), and the runner rejects bad files before running."""
from __future__ import annotations

from pathlib import Path

import pytest

from session_supervisor.scenarios.runner import ScenarioError, load, run_file, validate
from session_supervisor.scenarios.verbs import VERBS

SCENARIOS = sorted((Path(__file__).resolve().parent.parent / "scenarios").glob("*.toml"))


def test_there_are_at_least_eight_stories_and_each_says_why():
    assert len(SCENARIOS) >= 8
    for path in SCENARIOS:
        assert len(load(path).why.split()) >= 8, f"{path.name} needs a real why"


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_the_story_holds(path, tmp_path):
    transcript: list[str] = []
    try:
        run_file(path, tmp_path, emit=transcript.append)
    except AssertionError as exc:
        pytest.fail(f"{exc}\n--- transcript ---\n" + "\n".join(transcript), pytrace=False)
    assert transcript[0].startswith(f"== {path.name}")


def story(*steps: dict, **top) -> dict:
    doc = {"title": "t", "why": "because", "session": {"command": ["x"]},
           "step": [{"do": "create"}, *steps]}
    doc.update(top)
    return doc


@pytest.mark.parametrize(("doc", "problem"), [
    (story({"do": "teleport"}), "unknown verb 'teleport'"),
    (story({"do": "expect", "phaze": "running"}), "unknown key 'phaze'"),
    (story({"do": "set_desired"}), "missing 'state'"),
    (story({"do": "exit", "code": "7"}), "'code' must be a int"),
    (story({"do": "exit", "code": True}), "'code' must be a int"),
    (story({"do": "advance", "ms": 5}, runner="real"), "advance needs runner = 'fake'"),
    (story({"do": "expect", "within": 5, "stdin": "x"}, runner="real"), "'stdin' needs runner = 'fake'"),
    (story({"do": "expect", "session": "ghost", "phase": "running"}), "session 'ghost' is used before it is created"),
    (story(colour="blue"), "unknown top-level key 'colour'"),
    (story(runner="docker"), "runner must be one of"),
    ({"title": "t", "step": [{"do": "create"}]}, "missing 'why'"),
    ({"title": "t", "why": "w", "step": []}, "at least one [[step]]"),
    (story({"verb": "create"}), "each step needs do"),
])
def test_validation_names_the_problem(doc, problem):
    problems = validate(doc)
    assert any(problem in p for p in problems), problems


def test_an_invalid_file_is_rejected_before_any_step_runs(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('title = "t"\nwhy = "w"\n[session]\ncommand = ["x"]\n'
                    '[[step]]\ndo = "create"\n[[step]]\ndo = "expect"\nphase = 1\n')
    data_dir = tmp_path / "data"
    with pytest.raises(ScenarioError, match="'phase' must be a str"):
        run_file(path, data_dir)
    assert not data_dir.exists()  # no server was ever built


def test_a_failing_expectation_reports_the_session_and_its_journal(tmp_path):
    path = tmp_path / "wrong.toml"
    path.write_text('title = "t"\nwhy = "w"\n[session]\ncommand = ["x"]\n'
                    '[[step]]\ndo = "create"\n[[step]]\ndo = "expect"\nphase = "failed"\n')
    with pytest.raises(AssertionError) as failure:
        run_file(path, tmp_path / "data", emit=lambda line: None)
    message = str(failure.value)
    assert "phase: expected 'failed', got 'running'" in message
    assert "#1 session.created" in message


def test_every_verb_documents_itself():
    assert all(verb.summary for verb in VERBS.values())
