"""``pip install .`` puts one top-level package into site-packages, not ``api``/``domain``/...

A real, non-editable install of a copy of the source tree into a clean virtualenv (no pip of
its own, so its site-packages starts empty): dependencies are not installed (``--no-deps``)
because what is checked is the layout, and the stdlib-only client module proves the installed
copy is the one imported.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "api", "domain", "infra", "scenarios")  # api/ holds api/client/


def test_pip_install_puts_exactly_one_top_level_package_and_its_scripts(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # Built with this interpreter's setuptools (no download), installed as `pip install .` would.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path / "wheels"), str(src)], check=True, timeout=300, cwd=tmp_path)
    wheel, = (tmp_path / "wheels").glob("session_supervisor-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    str(wheel)], check=True, timeout=300, cwd=tmp_path)

    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    top_level = sorted(p.name for p in site.iterdir() if p.name != "__pycache__")
    assert top_level == ["session_supervisor", "session_supervisor-0.1.0.dist-info"]
    assert sorted(p.name for p in (site / "session_supervisor").iterdir()) == [
        "api", "client", "domain", "infra", "scenarios"]
    assert not (site / "session_supervisor" / "api" / "client").exists()  # installed once, as .client
    assert (env_dir / "bin" / "sessiond").exists() and (env_dir / "bin" / "sessionctl").exists()

    def run(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)

    for name in ("api", "domain", "infra", "scenarios", "client"):
        assert "ModuleNotFoundError" in run(f"import {name}").stderr, name
    found = run("import session_supervisor.client.local_server as m; print(m.__file__)")
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).is_relative_to(site)
    # The console ui files travel with the package (the server serves them from there).
    assert (site / "session_supervisor" / "api" / "ui" / "index.html").is_file()
