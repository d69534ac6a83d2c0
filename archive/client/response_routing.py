"""Sans-IO core of the archive client: errors, what a request waits for, and response routing.

`ResponseRouter.on_message(bytes)` takes every message that arrives on the client's control
response stream and decides what it is for:

* a response (ControlResponse, Challenge, RecordingDescriptor, RecordingSubscriptionDescriptor)
  carrying the correlation id the current `Expectation` waits for goes to that expectation;
* a RecordingSignalEvent of this control session is queued in `signals` (never dropped, also
  while a request is being waited for: signals arrive interleaved with responses);
* an ERROR response of this session to an earlier request (e.g. a replay that failed after its
  OK) is queued in `error_responses`;
* everything else is skipped: other sessions' messages (a shared IPC response stream), the
  connect OKs a modern archive re-sends every 200 ms, Ping (106), templates this client does not
  know, and undecodable bytes (counted, the last problem kept for timeout messages).

Nothing here raises from `on_message`: an expectation that ends in an archive error keeps the
`ArchiveError` and the I/O layer raises it from `Expectation.result()`. Completion rules follow
Aeron's RecordingDescriptorPoller and RecordingSubscriptionDescriptorPoller (a listing ends after
``count`` descriptors or on RECORDING_UNKNOWN / SUBSCRIPTION_UNKNOWN with its correlation id) and
AeronArchive.AsyncConnect (connect answered by OK, ERROR or Challenge with the connect's
correlation id).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Generic, TypeVar

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import (
    ArchiveErrorCode,
    Challenge,
    CodecError,
    ControlResponse,
    ControlResponseCode,
    Ping,
    RecordingDescriptorMessage,
    RecordingSignalEvent,
    RecordingSubscriptionDescriptor,
    UnknownTemplateError,
)
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor

#: How many unmatched ERROR responses are kept for `poll_for_error_response` (oldest dropped).
MAX_KEPT_ERROR_RESPONSES = 64

KnownCode = TypeVar("KnownCode", bound=IntEnum)
#: What a completed request gives its caller (a relevant id, descriptors, a connect answer...).
Value = TypeVar("Value", covariant=True)


class ArchiveError(Exception):
    """Any failure of an archive client call.

    ``code``: the ControlResponse code that ended the request (ERROR, RECORDING_UNKNOWN, ...), or
    None when the failure was not an archive response (timeout, unsupported request, transport).
    ``error_code``: the archive's error code (ControlResponse.relevantId, an `ArchiveErrorCode`
    when known; for a rejected connect Aeron puts the control session id there), else None.
    ``archive_message``: the archive's own error text ("" if none).
    ``correlation_id`` and ``request`` name the request that failed, when there was one.
    """

    def __init__(self, message: str, *, code: ControlResponseCode | int | None = None,
                 error_code: ArchiveErrorCode | int | None = None, archive_message: str = "",
                 correlation_id: int | None = None, request: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.error_code = error_code
        self.archive_message = archive_message
        self.correlation_id = correlation_id
        self.request = request

    @classmethod
    def from_response(cls, response: ControlResponse, request: str) -> ArchiveError:
        code = _enum_or_int(ControlResponseCode, response.code)
        error_code = _enum_or_int(ArchiveErrorCode, response.relevant_id)
        code_name = getattr(code, "name", str(code))
        if code == ControlResponseCode.ERROR:
            error_name = getattr(error_code, "name", str(error_code))
            detail = f"error code {error_name} ({response.relevant_id})"
        else:
            detail = f"relevantId {response.relevant_id}"
        message = (f"archive answered {request} correlationId={response.correlation_id} with "
                   f"{code_name}, {detail}: {response.error_message or '(no message)'}")
        return cls(message, code=code, error_code=error_code,
                   archive_message=response.error_message,
                   correlation_id=response.correlation_id, request=request)


class ArchiveTimeoutError(ArchiveError):
    """An archive client call did not complete in time; the message says what timed out."""


def _enum_or_int(enum_type: type[KnownCode], value: int) -> KnownCode | int:
    try:
        return enum_type(value)
    except ValueError:
        return value


# ---------------------------------------------------------------------------------------------
# What a request waits for
# ---------------------------------------------------------------------------------------------

@dataclass
class Expectation(Generic[Value]):
    """One outstanding request. Subclasses decide which messages complete it and its value."""

    request: str
    correlation_ids: frozenset[int]
    done: bool = False
    error: ArchiveError | None = None

    def on_control_response(self, response: ControlResponse) -> None:
        raise NotImplementedError

    def on_descriptor(self, message: RecordingDescriptorMessage) -> None:
        """A descriptor with one of our correlation ids that this request did not ask for."""

    def on_subscription_descriptor(self, message: RecordingSubscriptionDescriptor) -> None:
        """As `on_descriptor`."""

    def on_challenge(self, challenge: Challenge) -> None:
        """A challenge with one of our correlation ids (only connect expects one)."""

    def fail(self, error: ArchiveError) -> None:
        self.error = error
        self.done = True

    def progress(self) -> str:
        """What has arrived so far, for timeout messages ("" when nothing is worth saying)."""
        return ""

    def value(self) -> Value:
        raise NotImplementedError

    def result(self) -> Value:
        if self.error is not None:
            raise self.error
        if not self.done:
            raise RuntimeError(f"{self.request} has not completed")
        return self.value()


@dataclass
class AwaitResponse(Expectation[int]):
    """A request answered by one ControlResponse: OK gives relevantId, anything else fails."""

    relevant_id: int | None = None
    response: ControlResponse | None = None

    def on_control_response(self, response: ControlResponse) -> None:
        self.response = response
        if response.code == ControlResponseCode.OK:
            self.relevant_id = response.relevant_id
            self.done = True
        else:
            self.fail(ArchiveError.from_response(response, self.request))

    def value(self) -> int:
        assert self.relevant_id is not None
        return self.relevant_id


@dataclass
class CollectDescriptors(Expectation[Value]):
    """ListRecordings / ListRecordingsForUri / ListRecording: ``count`` descriptors or
    RECORDING_UNKNOWN; ERROR fails; other codes are ignored (as Aeron's pollers do). Subclasses
    say what the collected descriptors give."""

    count: int = 0
    descriptors: list[RecordingDescriptor] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.count <= 0:
            self.done = True  # the archive sends nothing useful for a count <= 0

    def on_descriptor(self, message: RecordingDescriptorMessage) -> None:
        if self.done:
            return
        self.descriptors.append(message.to_descriptor())
        if len(self.descriptors) >= self.count:
            self.done = True

    def on_control_response(self, response: ControlResponse) -> None:
        if response.code == ControlResponseCode.RECORDING_UNKNOWN:
            self.done = True
        elif response.code == ControlResponseCode.ERROR:
            self.fail(ArchiveError.from_response(response, self.request))

    def progress(self) -> str:
        return f"{len(self.descriptors)} of {self.count} descriptors received"


@dataclass
class AwaitDescriptors(CollectDescriptors[list[RecordingDescriptor]]):
    """A listing whose value is the descriptors received."""

    def value(self) -> list[RecordingDescriptor]:
        return list(self.descriptors)


@dataclass
class AwaitSubscriptionDescriptors(Expectation[list[RecordingSubscriptionDescriptor]]):
    """ListRecordingSubscriptions: ``count`` descriptors or SUBSCRIPTION_UNKNOWN."""

    count: int = 0
    descriptors: list[RecordingSubscriptionDescriptor] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.count <= 0:
            self.done = True

    def on_subscription_descriptor(self, message: RecordingSubscriptionDescriptor) -> None:
        if self.done:
            return
        self.descriptors.append(message)
        if len(self.descriptors) >= self.count:
            self.done = True

    def on_control_response(self, response: ControlResponse) -> None:
        if response.code == ControlResponseCode.SUBSCRIPTION_UNKNOWN:
            self.done = True
        elif response.code == ControlResponseCode.ERROR:
            self.fail(ArchiveError.from_response(response, self.request))

    def progress(self) -> str:
        return f"{len(self.descriptors)} of {self.count} subscription descriptors received"

    def value(self) -> list[RecordingSubscriptionDescriptor]:
        return list(self.descriptors)


@dataclass
class AwaitConnect(Expectation[ControlResponse | Challenge]):
    """A connect (or challenge response): ends with the OK, the ERROR or a Challenge.

    ``value()`` is the OK `ControlResponse` or the `Challenge` to answer. An ERROR keeps the
    control session id it names in ``rejected_session_id`` so the caller can close it.
    """

    answer: ControlResponse | Challenge | None = None
    rejected_session_id: int | None = None

    def on_control_response(self, response: ControlResponse) -> None:
        if response.code == ControlResponseCode.OK:
            self.answer = response
            self.done = True
        else:
            self.rejected_session_id = response.control_session_id
            self.answer = response
            self.fail(ArchiveError.from_response(response, self.request))

    def on_challenge(self, challenge: Challenge) -> None:
        self.answer = challenge
        self.done = True

    def value(self) -> ControlResponse | Challenge:
        assert self.answer is not None
        return self.answer


# ---------------------------------------------------------------------------------------------
# Routing
# ---------------------------------------------------------------------------------------------

class ResponseRouter:
    """Routes decoded response-stream messages to the current expectation and the queues."""

    def __init__(self, control_session_id: int | None = None) -> None:
        self.control_session_id = control_session_id
        self.current: Expectation[object] | None = None
        self.signals: collections.deque[RecordingSignalEvent] = collections.deque()
        self.error_responses: collections.deque[ControlResponse] = collections.deque(
            maxlen=MAX_KEPT_ERROR_RESPONSES)
        self.skipped_messages = 0
        self.pings_received = 0
        self.undecodable_messages = 0
        self.last_decode_problem: str | None = None

    def begin(self, expectation: Expectation[Value]) -> Expectation[Value]:
        if self.current is not None and not self.current.done:
            raise RuntimeError(
                f"{expectation.request} started while {self.current.request} is still waiting: "
                f"an ArchiveClient is used by one thread at a time")
        self.current = expectation
        return expectation

    def end(self) -> None:
        self.current = None

    # -- input ---------------------------------------------------------------------------------
    def on_message(self, data: bytes | memoryview, header: object = None) -> None:
        """One whole message from the response subscription (``header`` is ignored, so the
        method is a valid ``Subscription.poll`` handler). Never raises for bad bytes."""
        try:
            message = codecs.decode(data)
        except UnknownTemplateError:
            self.skipped_messages += 1
            return
        except CodecError as error:
            self.undecodable_messages += 1
            self.last_decode_problem = str(error)
            return
        self.on_decoded(message)

    def on_decoded(self, message: object) -> None:
        if isinstance(message, Ping):
            self.pings_received += 1  # the archive pings: its silence then means the session is gone
            self.skipped_messages += 1
            return
        expectation = self.current if self.current is not None and not self.current.done else None
        if isinstance(message, (ControlResponse, Challenge)):
            if expectation is not None and message.correlation_id in expectation.correlation_ids and \
                    self._may_be_ours(message.control_session_id, expectation):
                if isinstance(message, ControlResponse):
                    expectation.on_control_response(message)
                else:
                    expectation.on_challenge(message)
                return
            if isinstance(message, ControlResponse) and self._is_ours(message.control_session_id) \
                    and message.code == ControlResponseCode.ERROR:
                self.error_responses.append(message)
                return
        elif isinstance(message, RecordingSignalEvent):
            if self._is_ours(message.control_session_id):
                self.signals.append(message)
                return
        elif isinstance(message, (RecordingDescriptorMessage, RecordingSubscriptionDescriptor)) \
                and expectation is not None and message.correlation_id in expectation.correlation_ids \
                and self._is_ours(message.control_session_id):
            if isinstance(message, RecordingDescriptorMessage):
                expectation.on_descriptor(message)
            else:
                expectation.on_subscription_descriptor(message)
            return
        self.skipped_messages += 1

    def _is_ours(self, control_session_id: int) -> bool:
        return self.control_session_id is not None and control_session_id == self.control_session_id

    def _may_be_ours(self, control_session_id: int, expectation: Expectation[object]) -> bool:
        # Before the session is known only the connect's correlation id identifies its answer.
        if isinstance(expectation, AwaitConnect) and self.control_session_id is None:
            return True
        return self._is_ours(control_session_id)

    # -- queues --------------------------------------------------------------------------------
    def take_signals(self) -> list[RecordingSignalEvent]:
        taken = list(self.signals)
        self.signals.clear()
        return taken

    def take_signal(self, predicate: Callable[[RecordingSignalEvent], bool]) -> RecordingSignalEvent | None:
        """Removes and returns the oldest queued signal satisfying ``predicate`` (others stay)."""
        for index, signal in enumerate(self.signals):
            if predicate(signal):
                del self.signals[index]
                return signal
        return None

    def take_error_response(self, correlation_id: int | None = None) -> ControlResponse | None:
        """The oldest kept ERROR response (of ``correlation_id`` when given), removed."""
        for index, response in enumerate(self.error_responses):
            if correlation_id is None or response.correlation_id == correlation_id:
                del self.error_responses[index]
                return response
        return None

    def decode_problems(self) -> str:
        if not self.undecodable_messages:
            return ""
        return (f"; {self.undecodable_messages} undecodable response message(s) were skipped, "
                f"the last: {self.last_decode_problem}")
