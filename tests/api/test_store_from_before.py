"""A data dir written by the release before the one-package install loads and resumes.

The fixture ``tests/fixtures/store_before_one_package`` was written by commit 505aa46 (top-level
``api``/``domain`` packages) with ``tests/fixtures/make_store_before_one_package.py``. Stored events
carry explicit topics (``supervisor.Session.Created`` ...), never Python paths, so renaming the
import package must not change what a journal replays to.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import httpx

from tests.helpers import all_events, b64, ok, output_bytes, spath, wait_for
from tests.serverproc import ServerProcess

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "store_before_one_package"
TOKEN = "fixture-token"


def test_a_store_written_before_the_one_package_install_loads_and_resumes(tmp_path):
    data_dir = tmp_path / "data"
    shutil.copytree(FIXTURE, data_dir)
    sb, sid = (data_dir / "IDS").read_text().split()
    # The release left these two directories empty, and git keeps no empty directory.
    (data_dir / "sandboxes" / sb / "workspace").mkdir(exist_ok=True)
    (data_dir / "sandboxes" / sb / "tmp").mkdir(mode=0o1777, exist_ok=True)
    with ServerProcess(data_dir, token=TOKEN, runtime="host") as srv, \
            httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        before = all_events(http, sb, sid)
        types = [e["type"] for e in before]
        assert types[0] == "session.created" and "input.accepted" in types
        assert types[-1] == "attempt.exited", types
        # Over 1 KiB the chunk was stored zstd-compressed; both kinds decode to the bytes written.
        assert output_bytes(before) == b"x" * 3000 + b"\ngot:hello\n"
        assert [e["seq"] for e in before] == list(range(1, len(before) + 1))

        attempt = ok(http.post(spath(sb, sid, "/attempts"), json={}), 201)["attempt"]["id"]
        ok(http.post(spath(sb, sid, "/inputs"), json={
            "input_id": "in-2", "data_base64": b64(b"again\n"), "expected_attempt_id": attempt}), 202)
        resumed = wait_for(lambda: (evs := all_events(http, sb, sid))[-1]["type"] == "attempt.exited"
                           and len(evs) > len(before) and evs, timeout=15)
        assert resumed[:len(before)] == before
        assert [e["seq"] for e in resumed] == list(range(1, len(resumed) + 1))
        assert [e["type"] for e in resumed[len(before):]].count("attempt.started") == 1
        assert output_bytes(resumed[len(before):]) == b"x" * 3000 + b"\ngot:again\n"
