"""The TypeScript SDK (``sandbox0@0.9.5``, unmodified) creates, waits for, lists, gets and claims a
template over an imported image; inside, ``/etc/os-release`` and Python are the image's."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.api.test_sdk_js import installed_sdk
from tests.helpers import TOKEN

SCRIPT = Path(__file__).parent / "sdk_js" / "templates.mjs"


def test_the_typescript_sdk_creates_waits_for_lists_gets_and_claims_a_template(image_server):
    assert shutil.which("node") and shutil.which("npm"), "node and npm are needed for the TypeScript SDK"
    env = dict(os.environ, SANDBOX0_TOKEN=TOKEN, SANDBOX0_BASE_URL=image_server.url,
               SANDBOX0_JS_ENTRY=str(installed_sdk()), IMAGE_REFERENCE=image_server.image_reference)
    run = subprocess.run(["node", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-3:-1] == ["VERSION_CODENAME=trixie", run.stdout.splitlines()[-2]]
    assert run.stdout.splitlines()[-2].startswith("Python 3.13.")
    assert run.stdout.splitlines()[-1] == "templates ok"
