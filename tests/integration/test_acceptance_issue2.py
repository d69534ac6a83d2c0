"""Acceptance of issue 2 (foundation and driver layer): the points no earlier test proves (see
docs/acceptance.md for the full map of points to tests).

Covered here: the editable install maps exactly the three code folders onto ``aeron_spark`` and
no bare ``archive``/``connector``/``driver_integration`` module is importable outside the checkout;
the README test command is idempotent and refuses a run that collects no tests, and ``.ci/run``
is exactly that command; every driver resource is a context manager whose second close is
harmless; images report their source identity (UDP address, ``aeron:ipc``) and join position.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
from aeron_spark.driver_integration import AeronClient, MediaDriver
from aeron_spark.driver_integration.errors import ResourceClosedError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
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


def test_readme_names_exactly_two_setup_commands_and_ci_runs_the_test_one():
    readme = (REPO / "README.md").read_text()
    quickstart = readme[readme.index("## Quickstart"):]
    block = quickstart[quickstart.index("```bash"):]
    block = block[:block.index("```", 3)]
    commands = [line.split("#")[0].strip() for line in block.splitlines()[1:] if line.strip()]
    assert commands == ["./run-demo", "./run-tests"]
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#")]
    assert ci[-1].strip() == "exec ./run-tests"


def test_readme_test_command_is_idempotent_and_refuses_a_run_without_tests():
    """On the set-up checkout a run reinstalls nothing, and a selection that collects no tests
    fails (exit 5, pytest's status passed through) with a message instead of passing."""
    started = time.monotonic()
    result = subprocess.run([str(REPO / "run-tests"), "tests/unit/driver_integration/test_position.py", "-q",
                             "-p", "no:cacheprovider", "-k", "no_test_is_called_this"],
                            cwd=REPO, env=clean_env(), capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 5, result.stdout + result.stderr
    assert "pytest collected no tests; a run without tests proves nothing" in result.stderr
    assert "[setup] installing" not in result.stderr  # already set up: nothing reinstalled
    assert time.monotonic() - started < 120


def test_every_resource_is_a_context_manager_and_closing_twice_is_harmless(tmp_path: Path):
    with MediaDriver(dir_delete_on_start=True) as driver:
        driver_dir = driver.dir
        with AeronClient(driver.dir, client_name="acceptance-resources") as client:
            with client.add_subscription("aeron:ipc", 4001) as subscription, \
                    client.add_exclusive_publication("aeron:ipc", 4001) as exclusive, \
                    client.add_publication("aeron:ipc", 4002) as concurrent, \
                    client.add_counter(4003, b"k", "acceptance counter") as counter:
                deadline = time.monotonic() + 10
                while (image := subscription.image_by_session_id(exclusive.session_id)) is None:
                    assert time.monotonic() < deadline, "no image"
                    time.sleep(0.002)
                with image:
                    assert image.source_identity == "aeron:ipc"
                    assert image.join_position == 0
                assert image.is_closed
                image.close()
                counter.value = 7
            for resource in (subscription, exclusive, concurrent, counter):
                assert resource.is_closed
                resource.close()  # a second close does nothing
            with pytest.raises(ResourceClosedError):
                exclusive.offer(b"after close")
        assert client.is_closed
        client.close()
    assert not os.path.exists(driver_dir)  # the embedded driver removed its directory
    driver.close()


def test_udp_image_reports_its_source_identity_and_join_position(aeron_client: AeronClient, free_udp_port: int):
    """The image of a UDP stream names the publisher's address as its source identity."""
    channel = f"aeron:udp?endpoint=localhost:{free_udp_port}"
    with aeron_client.add_exclusive_publication(channel, 4010) as publication:
        with aeron_client.add_subscription(channel, 4010) as first:
            deadline = time.monotonic() + 10
            while not publication.is_connected:
                assert time.monotonic() < deadline
                time.sleep(0.002)
            for index in range(10):
                publication.offer_with_retry(b"early message %d" % index, timeout=10)
            while first.image_by_session_id(publication.session_id) is None:
                time.sleep(0.002)
            first_image = first.image_by_session_id(publication.session_id)
            assert re.fullmatch(r"127\.0\.0\.1:\d+", first_image.source_identity), first_image.source_identity
            assert first_image.join_position == 0
            first_image.close()
