"""The hand-written cffi declarations match Aeron 1.53's aeronc.h layouts (values measured with
gcc against the real header) and resolve in pyaeron's extension module."""

from __future__ import annotations

import pytest

from aeron_spark.driver_integration import _capi, aeron_version
from aeron_spark.driver_integration._capi import ffi

# (struct, size, {field: offset}) from offsetof/sizeof on the real aeronc.h (x86-64).
LAYOUTS = [
    ("aeron_header_values_frame_t", 32, {"frame_length": 0, "flags": 5, "type": 6, "term_offset": 8,
                                         "session_id": 12, "stream_id": 16, "term_id": 20,
                                         "reserved_value": 24}),
    ("aeron_header_values_t", 44, {"initial_term_id": 32, "position_bits_to_shift": 36}),  # pack(4)
    ("aeron_buffer_claim_t", 24, {"frame_header": 0, "data": 8, "length": 16}),
    ("aeron_publication_constants_t", 88, {"registration_id": 16, "max_possible_position": 24,
                                           "max_payload_length": 56, "stream_id": 64, "session_id": 68,
                                           "initial_term_id": 72, "channel_status_indicator_id": 80}),
    ("aeron_subscription_constants_t", 40, {"registration_id": 24, "stream_id": 32,
                                            "channel_status_indicator_id": 36}),
    ("aeron_image_constants_t", 72, {"correlation_id": 16, "join_position": 24, "mtu_length": 48,
                                     "session_id": 56, "initial_term_id": 60, "subscriber_position_id": 64}),
    ("aeron_counter_constants_t", 24, {"registration_id": 8, "counter_id": 16}),
    ("aeron_counters_reader_buffers_t", 32, {"values": 0, "metadata": 8, "values_length": 16,
                                             "metadata_length": 24}),
]


@pytest.mark.parametrize(("struct", "size", "offsets"), LAYOUTS, ids=[layout[0] for layout in LAYOUTS])
def test_struct_layouts_match_the_header(struct, size, offsets):
    assert ffi.sizeof(struct) == size
    for field, offset in offsets.items():
        assert ffi.offsetof(struct, field) == offset, field


def test_every_declared_function_resolves_in_the_library():
    names = _capi.declared_function_names()
    assert len(names) == len(set(names)) > 80
    for name in names:
        assert callable(getattr(_capi._real_lib, name)), name


def test_version_is_the_1_53_c_client():
    assert aeron_version().startswith("aeron version=1.53.")


def test_threading_mode_enum_values():
    assert (_capi.lib.AERON_THREADING_MODE_DEDICATED, _capi.lib.AERON_THREADING_MODE_SHARED_NETWORK,
            _capi.lib.AERON_THREADING_MODE_SHARED) == (0, 1, 2)
