"""The dependency direction of architecture.md §3, checked on every import statement.

The folders install as one package (pyproject.toml's package map): ``domain/`` is
``session_supervisor.domain`` and so on, and ``api/client/`` is its own package,
``session_supervisor.client`` (not ``session_supervisor.api.client``).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "session_supervisor"
FOLDERS = {"api": "api", "client": "api/client", "domain": "domain", "infra": "infra", "scenarios": "scenarios"}
CLIENT_FOLDER = ("api", "client")
SERVER = tuple(f"{PACKAGE}.{name}" for name in ("api", "domain", "infra", "scenarios"))
OLD_TOP_LEVEL = ("api", "domain", "infra", "scenarios", "client")  # never imported bare any more


def P(name: str) -> str:
    return f"{PACKAGE}.{name}"


# package prefix -> module prefixes it must never import
FORBIDDEN = {
    P("domain.model"): (P("infra"), P("api"), "sanic", "asyncio", "os", "time", "random", "ptyprocess",
                        "zstandard", "orjson", "eventsourcing.application", "eventsourcing.persistence",
                        "eventsourcing.sqlite", P("domain.sandbox_store"), P("domain.sandbox_runtime"),
                        P("domain.attempt_runner")),
    # The journal store is a port (domain.ports.JournalStore): no database, SQL or library
    # persistence module in the domain; only eventsourcing's aggregates and events.
    P("domain"): (P("infra"), P("api"), P("client"), "sanic", "ptyprocess", "zstandard", "orjson",
                  "sqlite3", "psycopg", "psycopg_pool", "eventsourcing.application", "eventsourcing.persistence",
                  "eventsourcing.sqlite", "eventsourcing.postgres"),
    P("infra"): (P("api"), P("client"), "sanic"),
    P("api"): (P("client"),),
    P("scenarios"): (P("client"),),
    P("api.routes"): (P("infra"),),
    P("api.schemas"): (P("infra"),),
    P("api.errors"): (P("infra"),),
    P("api.sse"): (P("infra"),),
    P("api.openapi"): (P("infra"),),
    # The client is what users install to talk to a server: nothing of the server at all.
    P("client"): (*SERVER, "sanic", "eventsourcing", "ptyprocess", "zstandard", "prometheus_client"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[:2] == CLIENT_FOLDER:
        parts = ("client", *parts[2:])
    return ".".join((PACKAGE, *parts))


def imports_of(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                package = ".".join(module_name(path).split(".")[:-node.level])
                names.append(f"{package}.{node.module}" if node.module else package)
            else:
                names.append(node.module or "")
    return names


def sources():
    for name, folder in FOLDERS.items():
        for path in sorted((ROOT / folder).glob("**/*.py")):
            if name != "client" and path.relative_to(ROOT).parts[:2] == CLIENT_FOLDER:
                continue  # the client's own package, walked under its own name
            yield path


def violations() -> list[str]:
    found: set[str] = set()
    for path in sources():
        module = module_name(path)
        rules = [bad for prefix, bad in FORBIDDEN.items() if module == prefix or module.startswith(prefix + ".")]
        for name in imports_of(path):
            if name.split(".")[0] in OLD_TOP_LEVEL:
                found.add(f"{module} imports {name} (a bare top-level name)")
            for bad_prefixes in rules:
                for bad in bad_prefixes:
                    if name == bad or name.startswith(bad + "."):
                        found.add(f"{module} imports {name}")
    return sorted(found)


CONTEXT_NAMES = {"ctx", "context", "service", "host", "owner", "runtime"}


def untyped_contexts() -> list[str]:
    """Parameters in domain/ that hand over a collaborator without saying which one.

    Every ``__init__`` parameter must be annotated (not ``Any``), and so must any parameter
    named like a context object (``ctx``, ``service`` ...): an untyped ``ctx`` hides an
    import cycle from the check above.
    """
    found = []
    for path in sorted((ROOT / "domain").glob("**/*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                if arg.arg in ("self", "cls"):
                    continue
                annotation = ast.unparse(arg.annotation) if arg.annotation else ""
                untyped = annotation in ("", "Any", "typing.Any", "object")
                if untyped and (node.name == "__init__" or arg.arg in CONTEXT_NAMES):
                    found.append(f"{module_name(path)}:{node.lineno} {node.name}({arg.arg})")
    return sorted(found)


def test_no_module_imports_against_the_dependency_direction():
    assert violations() == []


def test_no_domain_collaborator_is_passed_as_an_untyped_context():
    assert untyped_contexts() == []


def test_the_layering_check_catches_a_domain_module_importing_infra(tmp_path, monkeypatch):
    (tmp_path / "domain" / "model").mkdir(parents=True)
    (tmp_path / "domain" / "model" / "bad.py").write_text(
        "from session_supervisor.infra.codec import compress\nfrom ...api import app\n")
    (tmp_path / "api" / "client").mkdir(parents=True)
    (tmp_path / "api" / "client" / "leak.py").write_text("from session_supervisor.domain.model import ids\n")
    (tmp_path / "api" / "back.py").write_text("from ..client import Client\nimport infra.codec\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert violations() == [
        "session_supervisor.api.back imports infra.codec (a bare top-level name)",
        "session_supervisor.api.back imports session_supervisor.client",
        "session_supervisor.client.leak imports session_supervisor.domain.model",
        "session_supervisor.domain.model.bad imports session_supervisor.api",
        "session_supervisor.domain.model.bad imports session_supervisor.infra.codec",
    ]


def test_the_context_check_catches_an_untyped_ctx_in_the_domain(tmp_path, monkeypatch):
    (tmp_path / "domain").mkdir()
    (tmp_path / "domain" / "bad.py").write_text(
        "from typing import Any\n"
        "class Runner:\n    def __init__(self, ctx, clock: 'Clock') -> None: ...\n"
        "def sweep(service: Any, now: int) -> None: ...\n"
        "def fine(service: 'ExpiryHost', n=1) -> None: ...\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert untyped_contexts() == ["session_supervisor.domain.bad:3 __init__(ctx)",
                                  "session_supervisor.domain.bad:4 sweep(service)"]


def test_the_client_and_the_server_agree_on_where_a_local_server_keeps_its_token(monkeypatch, tmp_path):
    from session_supervisor.api import data_dir as server
    from session_supervisor.client import local_server as client

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert server.TOKEN_FILE_NAME == client.TOKEN_FILE_NAME
    assert server.default_data_dir() == client.default_data_dir() == tmp_path / "sessiond"
    for host in ("localhost", "LOCALHOST.", "[::1]", "127.0.0.2", "app.localhost", "ip6-localhost",
                 "10.0.0.1", "example.com", "localhost.example.com", "", "::ffff:127.0.0.1"):
        assert server.is_loopback_host(host) == client.is_loopback_host(host), host
