"""The README's API keys block runs verbatim against a real server started as the README starts it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.test_readme import block_after, clean_env, localized, readme_server, sandboxes_left  # noqa: F401


def test_the_readme_api_keys_block_makes_a_team_key_that_claims_into_its_team(readme_server):
    script = localized(block_after("## API keys and teams", "sh"), readme_server)
    env = clean_env(readme_server)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # where pip put sessionctl
    done = subprocess.run(["bash", "-ec", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    listed = json.JSONDecoder().raw_decode(done.stdout)[0]["data"]["api_keys"]  # curl ends with no newline
    assert [(k["name"], k["roles"]) for k in listed] == [("ci", ["developer"])]
    assert listed[0]["key_value"].endswith("***")
    assert "sandbox terminated successfully" in done.stdout
    assert sandboxes_left(readme_server) == []
