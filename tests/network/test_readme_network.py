"""The README's network walkthrough runs verbatim against a netns server (only the address differs)."""
from __future__ import annotations

import subprocess

from tests.test_readme import DEFAULT_URL, block_after


def test_the_readme_network_walkthrough_runs(server):
    script = block_after("## Network isolation", "sh").replace(DEFAULT_URL, server.url)
    script = script.replace("curl -s", f"curl -sf -H 'Authorization: Bearer {server.token}'")
    done = subprocess.run(["bash", "-ec", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr + done.stdout
    assert '{"success":true,"data":{"mode":"block-all"}}' in done.stdout
    assert '"allowedCidrs":["192.0.2.0/24"]' in done.stdout and '"deniedCidrs":["203.0.113.0/24"]' in done.stdout
    assert "sandbox terminated successfully" in done.stdout
