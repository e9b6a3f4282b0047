"""``python -m scenarios FILE…``: validate every file, then run each and print its transcript."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .runner import ScenarioError, ScenarioFailed, load, run_file
from .verbs import VERBS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scenarios", description=__doc__)
    parser.add_argument("files", nargs="*", type=Path, help="scenario TOML files")
    parser.add_argument("--verbs", action="store_true", help="list the verbs and their keys")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.verbs:
        for name, verb in sorted(VERBS.items()):
            keys = [f"{k}*" for k in verb.required] + sorted(verb.optional)
            print(f"{name:18} {verb.summary}\n{'':18} keys: {', '.join(keys) or '-'}; runner: {'/'.join(verb.modes)}")
        return 0
    if not args.files:
        parser.error("give at least one scenario file (or --verbs)")
    try:
        for path in args.files:  # all files are validated before any runs
            load(path)
    except ScenarioError as exc:
        print(exc, file=sys.stderr)
        return 2
    failed = 0
    for path in args.files:
        try:
            run_file(path)
            print(f"== PASSED {path}\n")
        except ScenarioFailed as exc:
            failed += 1
            print(f"== FAILED {path}\n{exc}\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
