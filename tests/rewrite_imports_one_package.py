"""Rewrites a checkout from top-level ``api``/``domain``/``infra``/``scenarios`` imports to the one
``session_supervisor`` package (issue 14), so a branch made before that change can be brought over
mechanically before it is merged: ``python tests/rewrite_imports_one_package.py [REPO]``.

What it does, idempotently (a second run changes nothing):
- in ``*.py``: ``from X``/``import X`` statements and string literals that are a whole dotted
  module path (``"-m", "api"``, ``"infra.codec:OrjsonTranscoder"``, ``"domain.reconciler"``)
  get the ``session_supervisor.`` prefix, ``api.client`` becoming ``session_supervisor.client``;
- in ``*.md``: the same for import lines and ``python -m X`` commands.
The client stays in ``api/client/``; pyproject.toml maps it to ``session_supervisor.client``.
``pyproject.toml`` is not touched (its package map is written by hand once).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

PACKAGE = "session_supervisor"
TOP = r"(?:api|domain|infra|scenarios)"
SKIP_DIRS = {".venv", ".git", "node_modules", "__pycache__"}

IMPORT_LINE = re.compile(rf"^(\s*(?:from|import)\s+)({TOP}(?:\.\w+)*)\b", re.M)
# A dotted path ("domain.reconciler", "infra.codec:X"), or a bare name right after "-m" ("-m", "api"):
# a bare "api" elsewhere is a path component (ROOT / "api" / "ui") and stays.
MODULE_LITERAL = re.compile(
    rf"""(["'])({TOP}(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?|{TOP}:[A-Za-z_]\w*)\1"""
    rf"""|(?<=["']-m["'], )(["'])({TOP})\3""")
DASH_M = re.compile(rf"(-m\s+)({TOP}(?:\.\w+)*)\b")


def qualified(module: str) -> str:
    if module == "api.client" or module.startswith("api.client."):
        return PACKAGE + ".client" + module[len("api.client"):]
    return f"{PACKAGE}.{module}"


def rewrite_python(text: str) -> str:
    text = IMPORT_LINE.sub(lambda m: m.group(1) + qualified(m.group(2)), text)
    def literal(m: re.Match) -> str:
        quote, module = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        return quote + qualified(module) + quote
    return MODULE_LITERAL.sub(literal, text)


def rewrite_markdown(text: str) -> str:
    text = IMPORT_LINE.sub(lambda m: m.group(1) + qualified(m.group(2)), text)
    return DASH_M.sub(lambda m: m.group(1) + qualified(m.group(2)), text)


def files(root: Path, suffix: str):
    for path in sorted(root.rglob(f"*{suffix}")):
        if not SKIP_DIRS.intersection(path.relative_to(root).parts):
            yield path


def main(root: Path) -> int:
    changed = 0
    for suffix, rewrite in ((".py", rewrite_python), (".md", rewrite_markdown)):
        for path in files(root, suffix):
            if path.name == Path(__file__).name:
                continue
            before = path.read_text()
            after = rewrite(before)
            if after != before:
                path.write_text(after)
                changed += 1
    print(f"rewrote {changed} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
