"""A plain (non-editable) wheel of the project: what it contains, and that it installs and runs.

The wheel is built once per module with ``pip wheel --no-deps`` from a copy of the checkout
(without .venv, .git, build output and caches, so stale build directories cannot leak into it).
It must hold the code only: no Java interop peer, no Java sources, no test code. A fresh venv
gets aeron_spark only from that wheel; it borrows the already-installed third-party
dependencies from the test venv through a path entry (so the install needs no network).
"""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# Not copied into the build tree: environments, VCS data, build output, caches.
NOT_SOURCES = shutil.ignore_patterns(".venv", ".git", "build", "dist", ".cache", "__pycache__", "*.egg-info",
                                     ".pytest_cache", ".ruff_cache", ".hypothesis", "spark-warehouse")


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(REPO_ROOT, source, ignore=NOT_SOURCES, symlinks=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(work / "dist"),
                    str(source)], check=True, cwd=work)
    wheels = list((work / "dist").glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def plain_install_python(built_wheel: Path, tmp_path_factory) -> Path:
    env_dir = tmp_path_factory.mktemp("plain-install") / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    fresh_site = Path(subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    # A plain path entry: .pth files inside the borrowed directory (the editable finder) stay inactive.
    (fresh_site / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", str(built_wheel)],
                   check=True, cwd=env_dir)
    return python


def isolated_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": ""}


@pytest.mark.timeout(600)
def test_the_wheel_holds_no_java_no_interop_peer_and_no_tests(built_wheel: Path):
    with zipfile.ZipFile(built_wheel) as wheel:
        names = wheel.namelist()
    assert any(name.startswith("aeron_spark/archive/") for name in names), names
    offending = [name for name in names
                 if "java/" in name or name.endswith(".java") or "interop_peer" in name
                 or "fetch-java-peer" in name or name.startswith("tests/") or "/tests/" in name]
    assert offending == []


@pytest.mark.timeout(600)
def test_plain_install_imports_every_subpackage_from_the_installed_wheel(plain_install_python, tmp_path):
    script = (
        "import aeron_spark, aeron_spark.archive, aeron_spark.connector, aeron_spark.driver_integration\n"
        "import aeron_spark.archive.codecs.recording_descriptor\n"
        "print(aeron_spark.driver_integration.__file__)\n"
        "try:\n"
        "    import archive\n"
        "except ImportError:\n"
        "    print('no bare archive')\n"
    )
    result = subprocess.run([plain_install_python, "-c", script], cwd=tmp_path, text=True,
                            capture_output=True, env=isolated_env())
    assert result.returncode == 0, result.stderr
    installed_file, bare = result.stdout.split()[0], result.stdout.strip().splitlines()[-1]
    assert "site-packages" in installed_file and str(REPO_ROOT) not in installed_file
    assert bare == "no bare archive"


def subcommands_in_help(text: str) -> list[str]:
    """The subcommand names argparse lists in ``aeron-archive --help``: from a ``{a,b,...}``
    choices list if the help shows one, else the names indented under the positional arguments."""
    choices = re.search(r"\{([\w,-]+)\}", text)
    if choices:
        return choices.group(1).split(",")
    section = text.split("positional arguments:", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^ {4}([a-z][\w-]*)", section, re.M)


@pytest.mark.timeout(600)
def test_the_installed_console_script_shows_its_help_and_every_subcommands_help(plain_install_python, tmp_path):
    script = plain_install_python.parent / "aeron-archive"
    main_help = subprocess.run([script, "--help"], cwd=tmp_path, text=True, capture_output=True, env=isolated_env(),
                               timeout=120)
    assert main_help.returncode == 0, main_help.stderr
    commands = subcommands_in_help(main_help.stdout)
    assert commands, main_help.stdout
    for command in commands:
        helped = subprocess.run([script, command, "--help"], cwd=tmp_path, text=True, capture_output=True,
                                env=isolated_env(), timeout=120)
        assert helped.returncode == 0 and f"aeron-archive {command}" in helped.stdout, (command, helped.stderr)


def test_console_script_is_installed_in_the_test_venv():
    assert (Path(sys.executable).parent / "aeron-archive").exists()
