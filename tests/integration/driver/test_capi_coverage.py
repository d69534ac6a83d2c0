"""Every C function declared in _capi.py is really called by the driver tests.

A wrong cffi declaration corrupts memory only when it is called, so each one must be exercised.
This runs the other driver tests in a child pytest with AERON_SPARK_TRACE_CAPI set (``lib`` is
then a recording proxy) and compares the names called with the names declared.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aeron_spark.driver_integration import _capi

pytestmark = pytest.mark.timeout(240)

TESTS = Path(__file__).resolve().parents[2]


def test_every_declared_c_function_is_called_by_the_driver_tests(tmp_path):
    trace = tmp_path / "called.txt"
    env = dict(os.environ, AERON_SPARK_TRACE_CAPI=str(trace))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         str(TESTS / "integration" / "driver"), str(TESTS / "unit" / "driver_integration"),
         "--deselect", f"{Path(__file__).relative_to(TESTS.parent)}::"
                       "test_every_declared_c_function_is_called_by_the_driver_tests"],
        cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=220)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    called = set(trace.read_text().split())
    declared = set(_capi.declared_function_names())
    assert len(declared) > 80
    missing = sorted(declared - called)
    assert not missing, f"declared in _capi.py but never called by a test: {missing}"
