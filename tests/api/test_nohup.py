"""A server started under ``nohup`` (with a signal blocked, too) still starts every session with
default dispositions and an empty signal mask: the inherited SIG_IGN of HUP and QUIT (and a
background shell's INT) must not reach sessions, or a PTY shell survives its hang-up."""
from __future__ import annotations

from tests.conftest import make_http
from tests.helpers import TOKEN, ok, output_bytes, all_events, wait_for
from tests.serverproc import ServerProcess

U = "/api/v1/sandboxes"


class NohupServer(ServerProcess):
    def command(self) -> list[str]:
        return ["env", "--ignore-signal=INT", "--block-signal=USR1", "nohup", *super().command()]


def test_sessions_of_a_server_under_nohup_have_no_ignored_and_no_blocked_signal(tmp_path):
    with NohupServer(tmp_path / "data", token=TOKEN) as server, make_http(server.url) as http:
        sb = ok(http.post(U, json={"template": "default"}), 201)["sandbox_id"]
        for pty in (False, True):
            spec = {"command": ["grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"]}
            if pty:
                spec["io"] = {"mode": "pty"}
            sid = ok(http.post(f"{U}/{sb}/sessions", json=spec), 201)["id"]
            wait_for(lambda: ok(http.get(f"{U}/{sb}/sessions/{sid}"), 200)["phase"] == "exited", timeout=20)
            text = output_bytes(all_events(http, sb, sid)).decode().replace("\r", "")
            fields = dict(line.split(":\t") for line in text.splitlines() if ":\t" in line)
            assert int(fields["SigIgn"], 16) == 0 and int(fields["SigBlk"], 16) == 0, (pty, text)
        ok(http.delete(f"{U}/{sb}"), 202)
