"""The archive client's sans-IO response routing, fed with encoded bytes (no Aeron)."""

from __future__ import annotations

import struct

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.client.response_routing import (
    ArchiveError,
    AwaitConnect,
    AwaitDescriptors,
    AwaitResponse,
    AwaitSubscriptionDescriptors,
    ResponseRouter,
)
from aeron_spark.archive.codecs import (
    ArchiveErrorCode,
    RecordingSignal,
)
from aeron_spark.archive.codecs import (
    ControlResponseCode as Code,
)

SESSION = 4242
OTHER_SESSION = 99


def response(correlation_id: int, code: int = Code.OK, relevant_id: int = 0, message: str = "",
             session: int = SESSION, version: int = 13) -> bytes:
    return codecs.encode(codecs.ControlResponse(
        session, correlation_id, relevant_id, code,
        codecs.PROTOCOL_SEMANTIC_VERSION if version else 0, message), version=version)


def descriptor(correlation_id: int, recording_id: int, session: int = SESSION) -> bytes:
    return codecs.encode(codecs.RecordingDescriptorMessage(
        session, correlation_id, recording_id, 1000, 2000, 0, 4096, 7, 1 << 27, 1 << 16, 1408,
        12, 1001, "aeron:ipc", "aeron:ipc?alias=x", "aeron:ipc"))


def signal(correlation_id: int, recording_id: int, kind: RecordingSignal,
           session: int = SESSION) -> bytes:
    return codecs.encode(codecs.RecordingSignalEvent(
        session, correlation_id, recording_id, 55, 0, kind))


def ping(session: int = SESSION) -> bytes:
    return codecs.encode(codecs.Ping(session))


def router_waiting(expectation) -> ResponseRouter:
    router = ResponseRouter(SESSION)
    router.begin(expectation)
    return router


def test_ok_response_completes_with_its_relevant_id() -> None:
    expectation = AwaitResponse("StartRecordingRequest", frozenset({7}))
    router = router_waiting(expectation)
    router.on_message(response(6, relevant_id=1))   # an earlier request's late answer
    assert not expectation.done
    router.on_message(response(7, relevant_id=321))
    assert expectation.done and expectation.result() == 321


def test_error_response_raises_archive_error_with_code_error_code_and_message() -> None:
    expectation = AwaitResponse("StopPositionRequest", frozenset({8}))
    router = router_waiting(expectation)
    router.on_message(response(8, Code.ERROR, ArchiveErrorCode.UNKNOWN_RECORDING,
                               "unknown recording id: 99"))
    with pytest.raises(ArchiveError) as raised:
        expectation.result()
    error = raised.value
    assert (error.code, error.error_code) == (Code.ERROR, ArchiveErrorCode.UNKNOWN_RECORDING)
    assert error.archive_message == "unknown recording id: 99"
    assert error.correlation_id == 8 and error.request == "StopPositionRequest"
    assert "StopPositionRequest correlationId=8" in str(error)
    assert "UNKNOWN_RECORDING (5): unknown recording id: 99" in str(error)


def test_unknown_error_codes_stay_plain_ints() -> None:
    expectation = AwaitResponse("X", frozenset({1}))
    router_waiting(expectation).on_message(response(1, Code.ERROR, 77, "future code"))
    assert expectation.error is not None and expectation.error.error_code == 77


def test_listing_ends_after_count_descriptors() -> None:
    expectation = AwaitDescriptors("ListRecordingsRequest", frozenset({3}), count=2)
    router = router_waiting(expectation)
    router.on_message(descriptor(3, 10))
    assert not expectation.done
    router.on_message(descriptor(3, 11))
    assert expectation.done
    router.on_message(descriptor(3, 12))  # more than asked for: ignored
    assert [d.recording_id for d in expectation.result()] == [10, 11]


def test_listing_ends_early_on_recording_unknown() -> None:
    expectation = AwaitDescriptors("ListRecordingsRequest", frozenset({3}), count=100)
    router = router_waiting(expectation)
    router.on_message(descriptor(3, 0))
    router.on_message(response(3, Code.RECORDING_UNKNOWN, 1))
    assert expectation.done and len(expectation.result()) == 1


def test_listing_ignores_other_correlations_other_sessions_and_ok() -> None:
    expectation = AwaitDescriptors("ListRecordingsRequest", frozenset({3}), count=1)
    router = router_waiting(expectation)
    router.on_message(descriptor(2, 5))                       # an older listing
    router.on_message(descriptor(3, 6, session=OTHER_SESSION))  # shared IPC response stream
    router.on_message(response(3, Code.OK))                   # Aeron's pollers ignore it too
    assert not expectation.done
    router.on_message(descriptor(3, 7))
    assert [d.recording_id for d in expectation.result()] == [7]


def test_listing_error_raises() -> None:
    expectation = AwaitDescriptors("ListRecordingsRequest", frozenset({3}), count=5)
    router = router_waiting(expectation)
    router.on_message(response(3, Code.ERROR, ArchiveErrorCode.ACTIVE_LISTING, "active listing"))
    with pytest.raises(ArchiveError, match="active listing"):
        expectation.result()


def test_zero_count_listing_is_complete_without_messages() -> None:
    assert AwaitDescriptors("ListRecordingsRequest", frozenset({3}), count=0).result() == []


def test_signals_are_queued_while_a_listing_waits_and_never_dropped() -> None:
    expectation = AwaitDescriptors("ListRecordingsRequest", frozenset({3}), count=2)
    router = router_waiting(expectation)
    router.on_message(signal(1, 0, RecordingSignal.START))
    router.on_message(descriptor(3, 0))
    router.on_message(signal(1, 0, RecordingSignal.STOP))
    router.on_message(signal(1, 0, RecordingSignal.START, session=OTHER_SESSION))
    router.on_message(descriptor(3, 1))
    assert expectation.done
    router.end()
    router.on_message(signal(9, 1, RecordingSignal.DELETE))  # also with nothing waiting
    assert [s.signal for s in router.take_signals()] == [
        RecordingSignal.START, RecordingSignal.STOP, RecordingSignal.DELETE]
    assert router.take_signals() == []


def test_take_signal_removes_only_the_first_match() -> None:
    router = ResponseRouter(SESSION)
    for kind in (RecordingSignal.START, RecordingSignal.STOP, RecordingSignal.START):
        router.on_message(signal(1, 0, kind))
    taken = router.take_signal(lambda s: s.signal == RecordingSignal.STOP)
    assert taken is not None and taken.signal == RecordingSignal.STOP
    assert [s.signal for s in router.signals] == [RecordingSignal.START, RecordingSignal.START]
    assert router.take_signal(lambda s: s.signal == RecordingSignal.DELETE) is None


def test_ping_unknown_templates_and_garbage_are_skipped() -> None:
    expectation = AwaitResponse("X", frozenset({1}))
    router = router_waiting(expectation)
    router.on_message(ping())
    router.on_message(struct.pack("<HHHH", 8, 999, 101, 13) + bytes(8))  # unknown template
    router.on_message(b"\x01\x02")                                       # too short to decode
    router.on_message(codecs.encode(codecs.RecordingStarted(1, 0, 2, 3, "aeron:ipc", "src")))
    assert not expectation.done
    assert router.undecodable_messages == 1 and "undecodable" in router.decode_problems()
    router.on_message(response(1, relevant_id=5))
    assert expectation.result() == 5


def test_repeated_connect_ok_is_ignored_after_connecting() -> None:
    router = ResponseRouter(SESSION)
    expectation = AwaitResponse("ArchiveIdRequest", frozenset({2}))
    router.begin(expectation)
    router.on_message(response(1, relevant_id=SESSION))  # the archive re-sends the connect OK
    assert not expectation.done and not router.error_responses
    router.on_message(response(2, relevant_id=77))
    assert expectation.result() == 77


def test_late_errors_of_this_session_are_kept_for_later() -> None:
    router = ResponseRouter(SESSION)
    router.on_message(response(5, Code.ERROR, ArchiveErrorCode.GENERIC, "replay failed: segment gone"))
    router.on_message(response(6, Code.ERROR, 0, "someone else's", session=OTHER_SESSION))
    assert router.take_error_response(correlation_id=4) is None
    kept = router.take_error_response(correlation_id=5)
    assert kept is not None and kept.error_message == "replay failed: segment gone"
    assert router.take_error_response() is None


def test_subscription_listing_ends_on_subscription_unknown() -> None:
    expectation = AwaitSubscriptionDescriptors("ListRecordingSubscriptionsRequest", frozenset({4}),
                                               count=10)
    router = router_waiting(expectation)
    router.on_message(codecs.encode(codecs.RecordingSubscriptionDescriptor(
        SESSION, 4, 555, 1001, "aeron:ipc")))
    router.on_message(response(4, Code.SUBSCRIPTION_UNKNOWN))
    [only] = expectation.result()
    assert (only.subscription_id, only.stream_id, only.stripped_channel) == (555, 1001, "aeron:ipc")


def test_connect_is_matched_by_correlation_id_before_the_session_is_known() -> None:
    router = ResponseRouter()
    expectation = AwaitConnect("ConnectRequest", frozenset({1}))
    router.begin(expectation)
    router.on_message(response(0, relevant_id=1, session=5))  # another client's connect
    assert not expectation.done
    router.on_message(response(1, relevant_id=SESSION))
    answer = expectation.result()
    assert answer.control_session_id == SESSION and answer.version == codecs.PROTOCOL_SEMANTIC_VERSION


def test_connect_challenge_and_rejection() -> None:
    router = ResponseRouter()
    challenged = AwaitConnect("AuthConnectRequest", frozenset({1}))
    router.begin(challenged)
    router.on_message(codecs.encode(codecs.Challenge(SESSION, 1, 0, b"nonce")))
    assert challenged.result().encoded_challenge == b"nonce"
    router.end()
    rejected = AwaitConnect("ChallengeResponse", frozenset({2}))
    router.begin(rejected)
    router.on_message(response(2, Code.ERROR, ArchiveErrorCode.AUTHENTICATION_REJECTED,
                               "authentication rejected"))
    assert rejected.rejected_session_id == SESSION
    with pytest.raises(ArchiveError) as raised:
        rejected.result()
    assert raised.value.error_code == ArchiveErrorCode.AUTHENTICATION_REJECTED


def test_legacy_1_15_control_response_bytes_decode_with_version_0() -> None:
    data = response(1, relevant_id=SESSION, version=0)
    assert struct.unpack_from("<HHHH", data) == (28, 1, 101, 0)  # 1.15.1 blockLength 28
    router = ResponseRouter()
    expectation = AwaitConnect("ConnectRequest", frozenset({1}))
    router.begin(expectation)
    router.on_message(data)
    assert expectation.result().version == 0


def test_a_second_request_while_one_waits_is_refused() -> None:
    router = router_waiting(AwaitResponse("First", frozenset({1})))
    with pytest.raises(RuntimeError, match="one thread at a time"):
        router.begin(AwaitResponse("Second", frozenset({2})))
