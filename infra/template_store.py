"""Team templates in one JSON file (``<data dir>/templates.json``; in the shared checkpoint dir with
more than one node, so every node sees the same templates), rewritten atomically under a lock.

A handful of small records changed by hand: one file read per call is cheaper than a table, and
``flock`` on a file next to it orders writers on one machine and on a shared filesystem alike.
"""
from __future__ import annotations

import fcntl
import json
from contextlib import contextmanager
from pathlib import Path

from .checkpoint import write_atomic


class JsonTemplateStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @contextmanager
    def _locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _read(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return data.get("templates", {}) if isinstance(data, dict) else {}

    def _write(self, templates: dict) -> None:
        write_atomic(self.path, json.dumps({"templates": templates}, indent=1, sort_keys=True).encode())

    def load(self) -> dict[str, dict]:
        return self._read()

    def put(self, template_id: str, record: dict, create: bool) -> bool:
        with self._locked():
            templates = self._read()
            if (template_id in templates) == create:
                return False
            templates[template_id] = record
            self._write(templates)
            return True

    def delete(self, template_id: str) -> bool:
        with self._locked():
            templates = self._read()
            if templates.pop(template_id, None) is None:
                return False
            self._write(templates)
            return True
