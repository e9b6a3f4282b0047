"""No function, method, class or variable without a use: vulture over the source and the tests.

Every name vulture cannot see used is either removed or listed, with its reason, in
``tests/dead_code_whitelist.py`` (hooks a library calls by name, wire fields, documented client
methods). Routes, listeners, scenario verbs and fixtures are registered by their decorators, so
functions under those decorators count as used.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("domain", "infra", "api", "scenarios", "tests")
WHITELIST = "tests/dead_code_whitelist.py"
REGISTERING_DECORATORS = ",".join((
    "@*.get", "@*.post", "@*.put", "@*.delete", "@*.patch", "@*.route", "@*.websocket",  # Sanic routes
    "@*.on_request", "@*.on_response", "@*.listener", "@*.signal",  # Sanic hooks
    "@*.before_server_start", "@*.after_server_start", "@*.before_server_stop", "@*.after_server_stop",
    "@verb",  # scenarios: a story names its verbs
    "@schemathesis.check", "@pytest.fixture",
))
PYTEST_NAMES = "pytestmark,pytest_*"  # read by pytest from a test module or conftest


def vulture(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vulture", *paths, "--min-confidence", "60",
         "--ignore-decorators", REGISTERING_DECORATORS, "--ignore-names", PYTEST_NAMES],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def test_every_function_and_variable_is_used_or_justified_in_the_whitelist():
    result = vulture(*PATHS, WHITELIST)
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr


def test_the_scan_finds_a_planted_function_that_nothing_calls(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("def helper():\n    return 1\n\n\ndef nobody_calls_this():\n    return helper()\n")
    result = vulture(*PATHS, WHITELIST, str(planted))
    assert result.returncode != 0
    assert "unused function 'nobody_calls_this'" in result.stdout and "'helper'" not in result.stdout
