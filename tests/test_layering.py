"""The dependency direction of architecture.md §3, checked on every import statement.

The folders install as one package (pyproject.toml's package map): ``domain/`` is
``session_supervisor.domain`` and so on, and ``api/client/`` is its own package,
``session_supervisor.client`` (not ``session_supervisor.api.client``).
"""
from __future__ import annotations

import ast
import re
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


REGISTRY_TABLES = {"running", "parked", "_running", "_parked"}
REGISTRY_MODULE = Path("domain") / "sandbox_registry.py"
MUTATORS = {"pop", "popitem", "clear", "update", "setdefault", "__setitem__", "__delitem__"}


def _table(node: ast.AST) -> str | None:
    """``running`` for ``x.running`` / ``x._running`` (the registry's tables), else None."""
    if isinstance(node, ast.Attribute) and node.attr in REGISTRY_TABLES:
        return node.attr
    return None


def registry_writes() -> list[str]:
    """Places outside the registry that change which sandboxes run or are parked: an item
    stored or deleted, a mutating method called, or the table itself replaced."""
    found = []
    for name, folder in FOLDERS.items():
        for path in sorted((ROOT / folder).glob("**/*.py")):
            if path.relative_to(ROOT) == REGISTRY_MODULE:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                targets = []
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                    targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in targets:
                    table = _table(target.value) if isinstance(target, ast.Subscript) else _table(target)
                    if table is not None and not (isinstance(target, ast.Attribute) and _is_self(target.value)
                                                  and path.relative_to(ROOT) == REGISTRY_MODULE):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} writes .{table}")
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr in MUTATORS and _table(node.func.value) is not None:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} calls .{_table(node.func.value)}.{node.func.attr}")
    return sorted(set(found))


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _annotation_names(annotation: ast.AST | None) -> set[str]:
    """Class names an annotation mentions (``Owner``, ``"Owner"``, ``Owner | None``)."""
    if annotation is None:
        return set()
    text = annotation.value if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str) \
        else ast.unparse(annotation)
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def _kept(init: ast.FunctionDef) -> set[str]:
    """Parameters an ``__init__`` keeps (``self.x = param``)."""
    return {node.value.id for node in ast.walk(init) if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Name)
            and any(isinstance(t, ast.Attribute) and _is_self(t.value) for t in node.targets)}


def owners_handed_down() -> list[str]:
    """Domain objects that keep the object that constructs them: a parameter of a class's
    ``__init__``, stored on the new object, typed as a class that calls that constructor. A part
    gets a narrow port (a Protocol of what it needs), the collaborators themselves or a callback,
    never its owner (a value built from its owner, which keeps nothing of it, is fine)."""
    inits: dict[str, tuple[str, set[str]]] = {}  # class -> (where, names its kept params are typed as)
    constructs: dict[str, set[str]] = {}  # class -> classes it calls
    for path in sorted((ROOT / "domain").glob("**/*.py")):
        for cls in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(cls, ast.ClassDef):
                continue
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                    kept = _kept(node)
                    params = (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)
                    names = set().union(*(_annotation_names(arg.annotation) for arg in params if arg.arg in kept))
                    inits[cls.name] = (f"{path.relative_to(ROOT)}:{node.lineno}", names)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    constructs.setdefault(cls.name, set()).add(node.func.id)
    found = []
    for owner, parts in constructs.items():
        for part in sorted(parts):
            if part in inits and owner in inits[part][1]:
                found.append(f"{inits[part][0]} {part} receives its owner {owner}")
    return sorted(found)


def test_no_module_imports_against_the_dependency_direction():
    assert violations() == []


def test_no_domain_collaborator_is_passed_as_an_untyped_context():
    assert untyped_contexts() == []


def test_only_the_registry_changes_which_sandboxes_run_or_are_parked():
    assert registry_writes() == []


def test_no_domain_object_receives_the_object_that_constructs_it():
    assert owners_handed_down() == []


def test_the_registry_check_catches_writes_to_its_tables_from_elsewhere(tmp_path, monkeypatch):
    (tmp_path / "domain").mkdir()
    (tmp_path / "domain" / "sandbox_registry.py").write_text(
        "class SandboxRegistry:\n    def park(self, sb):\n        self._parked[sb.id] = sb\n")
    (tmp_path / "domain" / "pause.py").write_text(
        "def pause(manager, sb):\n"
        "    del manager.registry.running[sb.id]\n"
        "    manager.registry.parked[sb.id] = sb\n"
        "    manager.registry.running.pop(sb.id, None)\n"
        "    manager.registry._parked.setdefault(sb.id, sb)\n"
        "    manager.registry.running = {}\n"
        "    return sb.id in manager.registry.running and manager.registry.parked.get(sb.id)\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert registry_writes() == ["domain/pause.py:2 writes .running", "domain/pause.py:3 writes .parked",
                                 "domain/pause.py:4 calls .running.pop", "domain/pause.py:5 calls ._parked.setdefault",
                                 "domain/pause.py:6 writes .running"]


def test_the_owner_check_catches_a_part_that_receives_its_owner(tmp_path, monkeypatch):
    (tmp_path / "domain").mkdir()
    (tmp_path / "domain" / "parts.py").write_text(
        "class Runtime:\n"
        "    def __init__(self, host: 'AttemptHost') -> None:\n"
        "        self.io = SessionIO(self)\n        self.attempts = Attempts(self)\n        self.view = View(self)\n"
        "class SessionIO:\n    def __init__(self, runtime: 'Runtime | None') -> None:\n        self.runtime = runtime\n"
        "class Attempts:\n    def __init__(self, host: 'AttemptHost') -> None:\n        self.host = host\n"
        "class View:\n    def __init__(self, runtime: 'Runtime') -> None:\n        self.n = len(runtime.sessions)\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert owners_handed_down() == ["domain/parts.py:7 SessionIO receives its owner Runtime"]


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
