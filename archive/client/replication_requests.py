"""`ReplicationRequests`: asking an archive (the *destination*) to replicate a recording from another
archive (the *source*), stopping a replication, and following one through its recording signals.

Replication runs inside the destination archive (Aeron's ``ReplicationSession``): it connects to
the source as a client, lists the source recording, records locally what the source replays to its
replication channel, follows an active source recording, and optionally merges into the live
stream. This client only starts it, stops it and reads the signals it sends, which carry the
replication id as their correlation id: REPLICATE (a new destination recording: its id), EXTEND
(the local recording started), SYNC (caught up with the source's stop position), MERGE (switched to
the live destination), REPLICATE_END (the replication ended, for any reason) and STOP (the local
recording stopped: its final position; the Java archive sends it after REPLICATE_END, once the
closed replication's recording has stopped, so read it with ``await_recording_signal(STOP,
correlation_id=replication_id)``). A failure
of the replication arrives as an ERROR response whose correlation id is the replication id; it is
raised as `ArchiveError` by `poll_replication` / `await_replication`.

A base of `ArchiveClient`; requests go through the `ArchiveSession`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from aeron_spark.archive import codecs
from aeron_spark.archive.client.client_session import ArchiveSession, idle_backoff
from aeron_spark.archive.client.response_routing import ArchiveError, ArchiveTimeoutError
from aeron_spark.archive.codecs import RecordingSignal, RecordingSignalEvent, semantic_version
from aeron_spark.archive.codecs.constants import NULL_VALUE, semantic_version_parts
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION
from aeron_spark.archive.configuration import DEFAULT_CONTROL_STREAM_ID

#: The archive protocol versions that brought ReplicateRequest2 (Aeron 1.33) and
#: TaggedReplicateRequest (Aeron 1.24); older archives get the request they know.
REPLICATE_REQUEST2_MIN_VERSION = semantic_version(1, 7, 0)
TAGGED_REPLICATE_MIN_VERSION = semantic_version(1, 3, 0)
#: The signals after which a plain replication has nothing more to say: the replica caught up
#: (SYNC) or the replication ended for whatever reason (REPLICATE_END, always its last signal).
REPLICATION_DONE: tuple[RecordingSignal, ...] = (RecordingSignal.SYNC, RecordingSignal.REPLICATE_END)


@dataclass(frozen=True)
class ReplicationParams:
    """The optional parts of a replicate request, with Aeron's defaults (``NULL_VALUE``: let the
    destination decide). Checked on creation: a bad value raises ValueError naming it."""

    dst_recording_id: int = NULL_VALUE  # a recording of the destination to extend; -1: a new one
    stop_position: int = NULL_POSITION  # where to stop; -1: follow the source for as long as it records
    live_destination: str | None = None  # the live stream's destination to merge into (MERGE)
    replication_channel: str | None = None  # None: the destination archive's configured one
    channel_tag_id: int = NULL_VALUE
    subscription_tag_id: int = NULL_VALUE
    file_io_max_length: int = NULL_VALUE  # the source replay's largest file read; -1: its default
    replication_session_id: int = NULL_VALUE  # the replica's session id; -1: the source recording's
    src_credentials: bytes | None = None  # sent in the destination's connect to the source
    src_response_channel: str | None = None  # the source answers the destination on a response channel

    def __post_init__(self) -> None:
        if self.dst_recording_id < NULL_VALUE:
            raise ValueError(f"dst_recording_id {self.dst_recording_id} is invalid: expected a recording "
                             f"id >= 0, or -1 for a new recording")
        if self.stop_position < NULL_POSITION:
            raise ValueError(f"stop_position {self.stop_position} is invalid: expected a position >= 0, "
                             f"or -1 to follow the source recording")
        if self.file_io_max_length != NULL_VALUE and self.file_io_max_length <= 0:
            raise ValueError(f"file_io_max_length {self.file_io_max_length} is invalid: expected a "
                             f"positive number of bytes, or -1 for the source archive's default")
        if self.live_destination is not None and self.src_response_channel is not None:
            # Aeron's archive refuses the pair too; said here before a request is spent on it.
            raise ValueError("live_destination and src_response_channel exclude each other: a "
                             "replication over a response channel cannot merge into a live stream")


class ReplicationRequests(ArchiveSession):
    """Replicate, stop a replication and follow its signals (see the module docstring)."""

    def replicate(self, src_recording_id: int, src_control_channel: str,
                  src_control_stream_id: int = DEFAULT_CONTROL_STREAM_ID, *,
                  dst_recording_id: int = NULL_VALUE, stop_position: int = NULL_POSITION,
                  live_destination: str | None = None, replication_channel: str | None = None,
                  channel_tag_id: int = NULL_VALUE, subscription_tag_id: int = NULL_VALUE,
                  file_io_max_length: int = NULL_VALUE, replication_session_id: int = NULL_VALUE,
                  src_credentials: bytes | None = None,
                  src_response_channel: str | None = None) -> int:
        """Asks the archive this client is connected to (the destination) to replicate
        ``src_recording_id`` from the archive at ``src_control_channel``/``src_control_stream_id``
        (ReplicateRequest2, as Aeron's ``AeronArchive.replicate`` with ``ReplicationParams``; an
        archive before Aeron 1.33 gets ReplicateRequest or TaggedReplicateRequest, and options
        only ReplicateRequest2 carries are refused naming them).
        Returns the replication id: the correlation id of the replication's signals, and what
        `stop_replication` takes. The replication itself runs in the destination; follow it with
        `await_replication` or `poll_replication`."""
        params = ReplicationParams(
            dst_recording_id=dst_recording_id, stop_position=stop_position, live_destination=live_destination,
            replication_channel=replication_channel, channel_tag_id=channel_tag_id,
            subscription_tag_id=subscription_tag_id, file_io_max_length=file_io_max_length,
            replication_session_id=replication_session_id, src_credentials=src_credentials,
            src_response_channel=src_response_channel)
        return self.replicate_with(src_recording_id, src_control_channel, src_control_stream_id, params)

    def replicate_with(self, src_recording_id: int, src_control_channel: str, src_control_stream_id: int,
                       params: ReplicationParams) -> int:
        """`replicate` with its options as one `ReplicationParams`."""
        if src_recording_id < 0:
            raise ValueError(f"src_recording_id {src_recording_id} is invalid: expected a recording id >= 0")
        if not src_control_channel.startswith("aeron:"):
            raise ValueError(f"src_control_channel {src_control_channel!r} is invalid: expected the source "
                             f"archive's control channel, an aeron: URI such as aeron:udp?endpoint=host:8010")
        self._require_modern("ReplicateRequest2")  # 1.15.x has no replication at all
        if 0 < self.archive_protocol_version < REPLICATE_REQUEST2_MIN_VERSION:
            return self._replicate_before_1_33(src_recording_id, src_control_channel, src_control_stream_id, params)
        return self._call(lambda s, c: codecs.ReplicateRequest2(
            s, c, src_recording_id, params.dst_recording_id, params.stop_position, params.channel_tag_id,
            params.subscription_tag_id, src_control_stream_id, params.file_io_max_length,
            params.replication_session_id, src_control_channel, params.live_destination or "",
            params.replication_channel or "", params.src_credentials or b"", params.src_response_channel or ""))

    def _replicate_before_1_33(self, src_recording_id: int, src_control_channel: str, src_control_stream_id: int,
                               params: ReplicationParams) -> int:
        """An archive older than ReplicateRequest2 gets Aeron's earlier requests, which carry only
        the destination recording, the live destination and (TaggedReplicateRequest) the tags."""
        newer = [name for name, value, default in (
            ("stop_position", params.stop_position, NULL_POSITION),
            ("replication_channel", params.replication_channel, None),
            ("file_io_max_length", params.file_io_max_length, NULL_VALUE),
            ("replication_session_id", params.replication_session_id, NULL_VALUE),
            ("src_credentials", params.src_credentials, None),
            ("src_response_channel", params.src_response_channel, None)) if value != default]
        version = _version_text(self.archive_protocol_version)
        if newer:
            raise ArchiveError(f"{', '.join(newer)} need(s) ReplicateRequest2 (Aeron 1.33+, protocol "
                               f"{_version_text(REPLICATE_REQUEST2_MIN_VERSION)}); the archive at "
                               f"{self.description} speaks protocol {version}", request="ReplicateRequest2")
        live = params.live_destination or ""
        if params.channel_tag_id == NULL_VALUE and params.subscription_tag_id == NULL_VALUE:
            return self._call(lambda s, c: codecs.ReplicateRequest(
                s, c, src_recording_id, params.dst_recording_id, src_control_stream_id, src_control_channel, live))
        if self.archive_protocol_version < TAGGED_REPLICATE_MIN_VERSION:
            raise ArchiveError(f"channel_tag_id and subscription_tag_id need TaggedReplicateRequest (Aeron 1.24+); "
                               f"the archive at {self.description} speaks protocol {version}",
                               request="TaggedReplicateRequest")
        return self._call(lambda s, c: codecs.TaggedReplicateRequest(
            s, c, src_recording_id, params.dst_recording_id, params.channel_tag_id, params.subscription_tag_id,
            src_control_stream_id, src_control_channel, live))

    def stop_replication(self, replication_id: int) -> None:
        """Stops a running replication (the destination then sends REPLICATE_END and stops its
        local recording: STOP, the replica's valid prefix, which a later replicate with
        ``dst_recording_id`` extends). An unknown or finished one raises ArchiveError with ``error_code``
        UNKNOWN_REPLICATION."""
        self._require_modern("StopReplicationRequest")
        self._call(lambda s, c: codecs.StopReplicationRequest(s, c, replication_id))

    def try_stop_replication(self, replication_id: int) -> bool:
        """`stop_replication`; False (instead of raising) when the replication had already ended."""
        try:
            self.stop_replication(replication_id)
        except ArchiveError as error:
            if error.error_code != codecs.ArchiveErrorCode.UNKNOWN_REPLICATION:
                raise
            return False
        return True

    def poll_replication(self, replication_id: int) -> list[RecordingSignalEvent]:
        """Reads what has arrived (without waiting) and takes the queued signals of this
        replication, in order (other signals stay queued). Raises ArchiveError when the
        destination reported the replication failed (its ERROR for the replication id: the source
        unreachable is error code REPLICATION_CONNECTION_FAILURE)."""
        self._require_open()
        while self._poll_once() > 0:
            pass
        return self._take_replication_signals(replication_id)

    def _take_replication_signals(self, replication_id: int, limit: int | None = None) -> list[RecordingSignalEvent]:
        """The queued signals of this replication (at most ``limit``), or raises its failure once
        none are left: signals sent before an error are handed over first."""
        taken: list[RecordingSignalEvent] = []
        while limit is None or len(taken) < limit:
            found = self._router.take_signal(lambda s: s.correlation_id == replication_id)
            if found is None:
                break
            taken.append(found)
        if not taken:
            self._raise_replication_failure(replication_id)
        return taken

    def _raise_replication_failure(self, replication_id: int) -> None:
        """Raises the ERROR the archive sent for this replication, if one has been read."""
        failure = self._router.take_error_response(replication_id)
        if failure is not None:
            raise ArchiveError.from_response(failure, f"replication {replication_id}")

    def await_replication(self, replication_id: int,
                          until: Iterable[RecordingSignal | str] = REPLICATION_DONE, *,
                          timeout: float | None = None) -> Iterator[RecordingSignalEvent]:
        """Yields the signals of replication ``replication_id`` as they arrive, in order, and
        returns after yielding one of ``until`` (signals or their names, default SYNC or
        REPLICATE_END) or REPLICATE_END (the replication is over; the STOP of its recording may
        still follow, see the module docstring). Signals after the one it returned at stay queued.
        ``timeout`` (default the client's): seconds allowed between two signals; ArchiveTimeoutError
        after that. A failed replication raises ArchiveError."""
        wanted = {_signal(name) for name in until} | {RecordingSignal.REPLICATE_END}
        wait = self.timeout if timeout is None else timeout
        if not wait > 0:
            raise ValueError(f"timeout {wait} is invalid: must be a positive number of seconds")
        deadline = time.monotonic() + wait
        idle = 0
        while True:
            self._require_open()
            while self._poll_once() > 0:
                pass
            # One at a time: what follows the awaited signal stays queued for the next reader.
            signals = self._take_replication_signals(replication_id, limit=1)
            for signal in signals:
                if signal.signal == RecordingSignal.REPLICATE_END:
                    # Its ERROR comes before it on the wire, so it has been read by now: a failed
                    # replication raises rather than ending as if it had succeeded.
                    self._raise_replication_failure(replication_id)
                yield signal
                if signal.signal in wanted:
                    return
            now = time.monotonic()
            if signals:
                deadline, idle = now + wait, 0
                continue
            if now > deadline:
                names = ", ".join(sorted(s.name for s in wanted))
                raise ArchiveTimeoutError(
                    f"no signal of replication {replication_id} within {wait} s from {self.description} "
                    f"(waiting for {names})", request="replication signal", correlation_id=replication_id)
            idle = idle_backoff(idle)


def _signal(value: RecordingSignal | str) -> RecordingSignal:
    """A signal from itself or its name, or ValueError naming the accepted names."""
    if isinstance(value, RecordingSignal):
        return value
    try:
        return RecordingSignal[str(value).upper()]
    except KeyError:
        raise ValueError(f"until {value!r} is invalid: expected recording signals among "
                         f"{[s.name for s in RecordingSignal]}") from None


def _version_text(version: int) -> str:
    return ".".join(str(part) for part in semantic_version_parts(version))
