"""The JVM module's tests (format("aeron-archive-jvm")): the jar, built once per test session."""

from __future__ import annotations

import pytest

from tests.support.jvm_module import JvmModule, built_jvm_module


@pytest.fixture(scope="session")
def jvm_module() -> JvmModule:
    """Our jar and aeron-all's, built by tools/build-jvm if anything changed."""
    return built_jvm_module()
