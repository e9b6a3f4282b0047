"""The dependency direction of architecture.md §3, checked on every import statement."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# package prefix -> module prefixes it must never import
FORBIDDEN = {
    "session_supervisor.domain.model": ("infra", "api", "sanic", "asyncio", "os", "time", "random", "ptyprocess",
                     "zstandard", "orjson", "eventsourcing.application", "eventsourcing.persistence",
                     "eventsourcing.sqlite", "session_supervisor.domain.supervisor", "session_supervisor.domain.service", "session_supervisor.domain.reconciler"),
    "domain": ("infra", "api", "sanic", "ptyprocess", "zstandard", "orjson"),
    "infra": ("api", "sanic"),
    "session_supervisor.api.routes": ("infra",),
    "session_supervisor.api.schemas": ("infra",),
    "session_supervisor.api.errors": ("infra",),
    "session_supervisor.api.sse": ("infra",),
    "session_supervisor.api.openapi": ("infra",),
    # The client is what users install to talk to a server: none of the server's internals.
    "session_supervisor.client": ("infra", "domain", "sanic", "session_supervisor.api.app", "session_supervisor.api.routes", "session_supervisor.api.schemas", "session_supervisor.api.errors", "session_supervisor.api.gate"),
}


def imports_of(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-node.level])
                names.append(f"{package}.{node.module}" if node.module else package)
            else:
                names.append(node.module or "")
    return names


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def violations() -> list[str]:
    found: set[str] = set()
    for path in sorted(ROOT.glob("[adi]*/**/*.py")):
        module = module_name(path)
        rules = [bad for prefix, bad in FORBIDDEN.items() if module == prefix or module.startswith(prefix + ".")]
        for name in imports_of(path):
            for bad_prefixes in rules:
                for bad in bad_prefixes:
                    if name == bad or name.startswith(bad + "."):
                        found.add(f"{module} imports {name}")
    return sorted(found)


def test_no_module_imports_against_the_dependency_direction():
    assert violations() == []


def test_the_layering_check_catches_a_domain_module_importing_infra(tmp_path, monkeypatch):
    fake_root = tmp_path
    (fake_root / "domain" / "model").mkdir(parents=True)
    (fake_root / "domain" / "model" / "bad.py").write_text("from infra.codec import compress\n")
    import sys
    monkeypatch.setattr(sys.modules[__name__], "ROOT", fake_root)
    assert violations() == ["domain.model.bad imports infra.codec"]
