"""``sessionctl volume create|list|get|delete`` and ``sandbox claim --volume``: docs/volumes.md's
recipe block run as printed, then the verbs' output forms and exit codes."""
from __future__ import annotations

import json
import re

from tests.client.test_cli import cli_env, sessionctl
from tests.docs_blocks import block, run_block

from .conftest import needs_root

pytestmark = needs_root


def test_the_docs_recipe_keeps_a_repository_in_a_volume_across_two_sandboxes(hardened_server):
    # As printed, in bash as the docs' blocks run; the server is this module's, named by SESSIOND_URL.
    done = run_block(block("volume-cli"), cli_env(hardened_server), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "kept" in lines, done.stdout
    header = next(line for line in lines if line.startswith("ID "))
    assert header.split() == ["ID", "ACCESS", "SIZE", "USED", "BOUND", "TO", "CREATED"], header
    row = lines[lines.index(header) + 1].split()
    assert row[1:3] == ["RWO", "1.0GiB"] and row[4].startswith("sb-"), row  # bound to the second sandbox
    assert f"refused: {row[4]} still binds it" in lines, done.stdout
    refusal = [line for line in done.stderr.splitlines() if line.startswith("sessionctl:")]
    assert len(refusal) == 1 and "volume has active mounts" in refusal[0], done.stderr
    assert lines[-1] == f"volume {row[0]} deleted", done.stdout
    listed = sessionctl(hardened_server, "volume", "list", "-q")
    assert listed.returncode == 0 and listed.stdout == "", listed


def test_the_volume_verbs_print_json_and_exit_with_the_clis_codes(volume_server):
    made = sessionctl(volume_server, "-o", "json", "volume", "create", "--size", "32Mi", "--access-mode", "rox")
    assert made.returncode == 0, made.stderr
    volume = json.loads(made.stdout)
    assert volume["access_mode"] == "ROX" and volume["size_bytes"] == 32 * 2**20 and volume["mounted_by"] == []
    try:
        shown = sessionctl(volume_server, "volume", "get", volume["id"])
        assert shown.returncode == 0 and re.search(r"^access mode\s+ROX$", shown.stdout, re.M), shown.stdout
        assert re.search(r"^size\s+32.0MiB$", shown.stdout, re.M), shown.stdout
        assert sessionctl(volume_server, "volume", "list", "-q").stdout.split() == [volume["id"]]
        missing = sessionctl(volume_server, "volume", "get", "6f1c2b8e-1111-4222-8333-444455556666")
        assert missing.returncode == 3 and missing.stderr.count("\n") == 1, missing
        tiny = sessionctl(volume_server, "volume", "create", "--size", "1Ki")
        assert tiny.returncode == 5 and "size" in tiny.stderr and tiny.stderr.count("\n") == 1, tiny
        over = sessionctl(volume_server, "volume", "create", "--size", "1Ti")
        assert over.returncode == 9 and "quota_exceeded" in over.stderr, over
        claimed = sessionctl(volume_server, "sandbox", "claim", "--volume", f"{volume['id']}:/workspace/", "-q")
        assert claimed.returncode == 5 and "clean" in claimed.stderr, claimed  # the server's 400, one line
    finally:
        gone = sessionctl(volume_server, "volume", "delete", volume["id"])
    assert gone.returncode == 0 and gone.stdout == f"volume {volume['id']} deleted\n", gone
    again = sessionctl(volume_server, "volume", "delete", volume["id"])  # idempotent, as the API
    assert again.returncode == 0, again
