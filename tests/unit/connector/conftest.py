"""The SBE decoding tests (tests/unit/connector/sbe, and the source's SBE columns in
tests/unit/connector/source) run twice: with the C helper (connector/sbe/fixed_fields.c) and with the
numpy path it falls back to (``AERON_SPARK_SBE_NATIVE=0``); a module opts in with
``pytestmark = pytest.mark.usefixtures("sbe_decoding_path")``."""

import pytest

from aeron_spark.connector.sbe import native_fields


@pytest.fixture(params=["native", "numpy"])
def sbe_decoding_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "native":
        assert native_fields.built(), native_fields.NOT_BUILT
    monkeypatch.setenv(native_fields.SWITCH, "1" if request.param == "native" else "0")
    assert (native_fields.copier() is not None) == (request.param == "native")
    return request.param
