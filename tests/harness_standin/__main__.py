"""A stand-in for the four coding-agent CLIs, for tests that cannot install them.

    python tests/harness_standin <codex|claude|opencode|pi> <the real argv after the binary…>

e.g. ``python tests/harness_standin codex app-server --stdio``. Stdlib only;
see harness-protocols.md §9 for what each stand-in reproduces.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import claude  # noqa: E402
import codex  # noqa: E402
import opencode  # noqa: E402
import pi  # noqa: E402

HARNESSES = {"codex": codex.main, "claude": claude.main, "claude-code": claude.main,
             "opencode": opencode.main, "pi": pi.main}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in HARNESSES:
        sys.stderr.write(f"usage: harness_standin <{'|'.join(HARNESSES)}> ARGV...\n")
        return 2
    run = HARNESSES[sys.argv[1]]
    return run(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
