"""The command blocks of README.md and docs/*.md, and a server as the README's set-up starts it.

Every fenced ``sh``/``python``/``toml`` block carries a marker on the line before it:
``<!-- run: NAME -->`` (run exactly as printed by ``tests/test_docs_blocks.py``, or by the test
file named in parentheses) or ``<!-- not run: why -->``. No test rewrites a block before it runs
it: what a block needs (``.venv/bin`` on PATH, the token, a variable) the block says itself, and
a test only provides the environment the README describes: the set-up's server on port 8780
with its data dir ``~/.local/share/sessiond`` under a HOME of the test's own.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.serverproc import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = ("sh", "bash", "python", "toml")
SETUP_PORT = 8780
_FENCE = re.compile(r"(?:<!--\s*(?P<marker>.*?)\s*-->\n)?```(?P<lang>[\w-]*)\n(?P<text>.*?)```", re.S)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    marker: str
    lang: str
    text: str

    @property
    def name(self) -> str | None:
        """``run: NAME (...)`` -> NAME; None for a block that is not run."""
        match = re.match(r"run:\s*([\w.-]+)", self.marker)
        return match.group(1) if match else None

    @property
    def runner_file(self) -> str | None:
        """The test file a marker names, ``run: NAME (tests/x.py ...)``."""
        match = re.search(r"\((tests/[\w/]+\.py)", self.marker)
        return match.group(1) if match else None

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for path in DOC_FILES:
        text = path.read_text()
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start("lang")) + 1
            found.append(Block(path, line, match.group("marker") or "", match.group("lang"), match.group("text")))
    return found


def block(name: str) -> Block:
    named = [b for b in blocks() if b.name == name]
    assert len(named) == 1, f"expected one block named {name!r} in README.md and docs/, found {len(named)}"
    return named[0]


def docs_env(home: Path, **extra: str) -> dict[str, str]:
    """The caller's environment with HOME of its own and none of sessiond's own variables, so the
    blocks find the set-up's data dir and token where the README says they are."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIOND_", "SB_", "VIRTUAL_ENV"))}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return {**env, "HOME": str(home), **extra}


def run_block(b: Block, env: dict[str, str], *, cwd: Path = ROOT, timeout: float = 180,
              stdin: str | None = None) -> subprocess.CompletedProcess:
    """A shell block in bash (errors and unset variables stop it), a Python block in the
    environment's Python (the README runs them with ``.venv/bin/python``)."""
    if b.lang in ("sh", "bash"):
        argv = ["bash", "-euo", "pipefail", "-c", b.text]
    elif b.lang == "python":
        argv = [sys.executable, "-c", b.text]
    else:
        raise AssertionError(f"{b.where()}: a {b.lang} block is not a command")
    return subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout)


class SetUpServer(ServerProcess):
    """``.venv/bin/sessiond serve`` with no flags, as the set-up's command starts it: port 8780,
    the data dir ``~/.local/share/sessiond`` of ``home``, the token it generates there."""

    def __init__(self, home: Path, runtime: str = "bwrap") -> None:
        super().__init__(home / ".local" / "share" / "sessiond", token=None, runtime=runtime,
                         port=SETUP_PORT, extra_env={"HOME": str(home)})
        self.home = home

    def command(self) -> list[str]:
        return [str(Path(sys.executable).parent / "sessiond"), "serve"]
