"""The JVM module (pom.xml, jvm/src): built by tools/build-jvm on first use, so a fresh clone's
``./run-tests`` builds it (Maven; ~30 s once, then a stamp check of well under a second).

:func:`built_jvm_module` -> :class:`JvmModule`: our jar and the pinned aeron-all jar, the two jars a
Spark session needs on ``spark.jars`` for ``format("aeron-archive-jvm")``. A missing mvn/javac fails
the calling test with build-jvm's one line.
"""

from __future__ import annotations

import functools
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPOSITORY / "tools" / "build-jvm"
FORMAT = "aeron-archive-jvm"
# Java 17 + Aeron 1.5x in Spark's JVMs: Agrona reaches jdk.internal.misc.Unsafe and the CRC32
# internals (the same list as tests/interop/peer/modern_peer.py's MODERN_JVM_OPTIONS).
AERON_JVM_OPTIONS = ("--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED "
                     "--add-opens=java.base/java.util.zip=ALL-UNNAMED "
                     "--add-opens=java.base/java.nio=ALL-UNNAMED "
                     "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED")


@dataclass(frozen=True)
class JvmModule:
    jar: Path
    aeron_jar: Path

    @property
    def spark_jars(self) -> str:
        """The value of ``spark.jars``."""
        return f"{self.jar},{self.aeron_jar}"


_lock = threading.Lock()


def built_jvm_module(timeout: float = 900.0) -> JvmModule:
    with _lock:
        return _build(timeout)


@functools.cache
def _build(timeout: float) -> JvmModule:
    completed = subprocess.run(["bash", str(BUILD_SCRIPT), "--quiet"], cwd=REPOSITORY, capture_output=True,
                               text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    if completed.returncode != 0:
        lines = [line for line in completed.stderr.splitlines() if line.strip()]
        missing = [line for line in lines if "not found" in line and line.startswith("[build-jvm] error:")]
        pytest.fail(missing[0] if missing else f"tools/build-jvm failed ({completed.returncode}):\n"
                    + "\n".join(lines[-40:]), pytrace=False)
    jar, aeron_jar = completed.stdout.split()[-2:]
    return JvmModule(jar=Path(jar), aeron_jar=Path(aeron_jar))
