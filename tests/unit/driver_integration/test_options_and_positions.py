"""Option validation and initial-position channel parameters (no driver needed)."""

from __future__ import annotations

import pytest

from aeron_spark.driver_integration import InitialPosition, MediaDriverOptions, OfferResult
from aeron_spark.driver_integration.media_driver import default_base_directory
from aeron_spark.driver_integration.position import compute_position


def test_defaults_are_valid():
    options = MediaDriverOptions()
    assert options.threading_mode == "shared_network" and options.dir is None
    assert default_base_directory() in ("/dev/shm", __import__("tempfile").gettempdir())


@pytest.mark.parametrize(("name", "value", "message"), [
    ("term_buffer_length", 1000, "term_buffer_length 1000 is invalid: must be a power of two from 65536"),
    ("term_buffer_length", 32 * 1024, "power of two from 65536"),
    ("ipc_term_buffer_length", 2 * 1024 ** 3, "ipc_term_buffer_length .*1 GiB"),
    ("mtu_length", 1000, "mtu_length 1000 is invalid: must be a multiple of 32 from 64 to 65504"),
    ("ipc_mtu_length", 65536, "ipc_mtu_length 65536 is invalid"),
    ("client_liveness_timeout_ns", 0, "client_liveness_timeout_ns 0 is invalid: must be a positive"),
    ("driver_timeout_ms", -5, "driver_timeout_ms -5 is invalid"),
    ("threading_mode", "invoker", "threading_mode 'invoker' is invalid: accepted values are 'dedicated'"),
])
def test_invalid_values_name_the_option_and_accepted_values(name, value, message):
    with pytest.raises(ValueError, match=message):
        MediaDriverOptions(**{name: value})


def test_wrong_types_and_unknown_options():
    with pytest.raises(TypeError, match="term_buffer_length must be an int"):
        MediaDriverOptions(term_buffer_length="64k")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="spies_simulate_connection must be True, False or None"):
        MediaDriverOptions(spies_simulate_connection=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown media driver option.*term_length.*accepted options are"):
        MediaDriverOptions().with_overrides(term_length=65536)
    assert MediaDriverOptions().with_overrides(mtu_length=4096).mtu_length == 4096


def test_initial_position_channel_params_follow_the_log_maths():
    bits, initial = 16, -5
    position = compute_position(initial + 3, 4096, bits, initial)
    where = InitialPosition(position=position, initial_term_id=initial, term_length=1 << bits, mtu=8192)
    assert where.channel_params() == {"init-term-id": "-5", "term-id": "-2", "term-offset": "4096",
                                      "term-length": "65536", "mtu": "8192"}
    assert where.apply_to("aeron:ipc") == (
        "aeron:ipc?init-term-id=-5|term-id=-2|term-offset=4096|term-length=65536|mtu=8192")
    assert where.apply_to("aeron:udp?endpoint=localhost:1").startswith(
        "aeron:udp?endpoint=localhost:1|init-term-id=-5|")


def test_initial_position_term_id_wraps_like_aeron():
    where = InitialPosition(position=2 << 16, initial_term_id=2**31 - 1, term_length=1 << 16)
    assert where.channel_params()["term-id"] == str(-(2**31) + 1)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"position": 33, "initial_term_id": 0, "term_length": 65536}, "multiple of the frame alignment 32"),
    ({"position": -32, "initial_term_id": 0, "term_length": 65536}, "must be >= 0"),
    ({"position": 0, "initial_term_id": 0, "term_length": 100_000}, "power of two"),
    ({"position": 0, "initial_term_id": 0, "term_length": 65536, "mtu": 100}, "mtu 100 is invalid"),
])
def test_initial_position_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        InitialPosition(**kwargs)


def test_offer_result_codes_are_aerons():
    assert [int(code) for code in OfferResult] == [-1, -2, -3, -4, -5, -6]
    assert {code for code in OfferResult if code.is_retryable} == {
        OfferResult.NOT_CONNECTED, OfferResult.BACK_PRESSURED, OfferResult.ADMIN_ACTION}
