"""The editable install maps exactly the three code folders onto ``aeron_spark`` (the ``package-dir``
map), and no bare ``archive``/``connector``/``driver_integration`` module is importable outside
the checkout; Python >= 3.12."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[3]
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
CODE_FOLDERS = ("archive", "connector", "driver_integration")


def clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH, so only the installed packages are importable."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_editable_install_maps_exactly_the_three_code_folders_and_no_bare_names(tmp_path: Path):
    script = (
        "import importlib, json, pkgutil, sys\n"
        "import aeron_spark\n"
        "found = {}\n"
        f"for name in {CODE_FOLDERS!r}:\n"
        "    found[name] = importlib.import_module('aeron_spark.' + name).__file__\n"
        "bare = []\n"
        f"for name in {CODE_FOLDERS!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "        bare.append(name)\n"
        "    except ImportError:\n"
        "        pass\n"
        "subpackages = sorted(m.name for m in pkgutil.iter_modules(aeron_spark.__path__) if m.ispkg)\n"
        "print(json.dumps({'files': found, 'bare': bare, 'subpackages': subpackages,\n"
        "                  'version': list(sys.version_info[:2])}))\n"
    )
    result = subprocess.run([str(VENV_PYTHON), "-c", script], cwd=tmp_path, env=clean_env(),
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for name in CODE_FOLDERS:
        assert Path(report["files"][name]) == REPO / name / "__init__.py"
    assert report["bare"] == []
    assert report["subpackages"] == []  # src/aeron_spark holds no code of its own
    assert tuple(report["version"]) >= (3, 12)
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["requires-python"].startswith(">=3.12")
    mapped = {package for package in pyproject["tool"]["setuptools"]["package-dir"]
              if package.startswith("aeron_spark.")}
    assert mapped == {f"aeron_spark.{name}" for name in CODE_FOLDERS}
    for folder in (*CODE_FOLDERS, "examples", "tests"):
        assert (REPO / folder).is_dir(), folder
    assert (REPO / "build.gradle").is_file()
