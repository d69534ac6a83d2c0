"""A plain (non-editable) `pip install .` into a fresh venv imports the aeron_spark namespace.

The fresh venv borrows the already-installed third-party dependencies from the test venv through
a path entry (so the test needs no network), but gets aeron_spark itself only from the wheel
that `pip install --no-deps .` builds.
"""

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def plain_install_python(tmp_path_factory) -> Path:
    env_dir = tmp_path_factory.mktemp("plain-install") / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    fresh_site = Path(subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    # A plain path entry: .pth files inside the borrowed directory (the editable finder) stay inactive.
    (fresh_site / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", str(REPO_ROOT)],
                   check=True, cwd=env_dir)
    return python


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
                            capture_output=True, env={**os.environ, "PYTHONPATH": ""})
    assert result.returncode == 0, result.stderr
    installed_file, bare = result.stdout.split()[0], result.stdout.strip().splitlines()[-1]
    assert "site-packages" in installed_file and str(REPO_ROOT) not in installed_file
    assert bare == "no bare archive"


def test_console_script_is_installed_in_the_test_venv():
    assert (Path(sys.executable).parent / "aeron-archive").exists()
