"""Every template round-trips at every schema version that has it (hypothesis-generated values)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import MESSAGE_SPECS, SCHEMA_VERSION
from tests.support.codec_strategies import encodable_versions, messages

ALL_TEMPLATES = sorted(MESSAGE_SPECS)
SPEC_IDS = [MESSAGE_SPECS[t].name for t in ALL_TEMPLATES]


def test_every_template_the_brief_lists_is_in_the_schema():
    requests = {2, 58, 60, 3, 61, 4, 63, 5, 14, 65, 6, 18, 7, 19, 8, 9, 10, 11, 64, 12, 15, 52, 67,
                13, 104, 17, 16, 53, 54, 55, 56, 57, 50, 62, 66, 51, 68, 105, 107}
    responses_and_events = {1, 59, 22, 23, 24, 106, 101, 102, 103}
    assert set(MESSAGE_SPECS) == requests | responses_and_events
    assert set(codecs.REQUEST_TEMPLATE_IDS) == requests
    assert codecs.MESSAGE_TYPES[6] is codecs.ReplayRequest


@pytest.mark.parametrize("template_id", ALL_TEMPLATES, ids=SPEC_IDS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip_at_every_version(template_id, data):
    spec = MESSAGE_SPECS[template_id]
    version = data.draw(st.sampled_from(encodable_versions(spec)), label="version")
    message = data.draw(messages(spec, version), label="message")
    encoded = codecs.encode(message, version=version)
    assert codecs.encoded_length(message, version=version) == len(encoded)
    header = codecs.decode_header(encoded)
    assert header == (codecs.block_length_for(template_id, version), template_id, 101, version)
    assert codecs.decode(encoded) == message


@pytest.mark.parametrize("template_id", ALL_TEMPLATES, ids=SPEC_IDS)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_modern_round_trip_through_a_memoryview_at_an_offset(template_id, data):
    spec = MESSAGE_SPECS[template_id]
    if SCHEMA_VERSION not in encodable_versions(spec):
        pytest.fail(f"{spec.name} must be encodable at the default version")
    message = data.draw(messages(spec, SCHEMA_VERSION))
    prefix = data.draw(st.binary(max_size=16))
    encoded = codecs.encode(message)
    framed = memoryview(prefix + encoded + b"\xee" * 3)
    assert codecs.decode(framed, len(prefix), len(encoded)) == message
