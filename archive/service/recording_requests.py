"""Recording requests: StartRecording, ExtendRecording, the StopRecording family, and the Images.

StartRecording adds a subscription on the stripped channel (``aeron-spy:`` for UDP with
sourceLocation LOCAL); each Image on it becomes a new catalog entry, a ``rec-pos`` counter and a
`RecordingSession` handed to the `Recorder`; the requesting session gets the START signal, then
STOP when the recorder reports the session stopped (the catalog gets the stop position first).
ExtendRecording does the same for an existing stopped recording (EXTEND signal; an Image whose
join position or log parameters do not continue the recording gets ERROR INVALID_EXTENSION).
A subscription closes once its recordings have stopped (the recorder may poll their Images on its
own thread until then): after a stop request, or at once with autoStop.

`RecordingRequests` keeps the recording subscriptions and the active recordings; the other
handlers ask it for live positions and whether a recording is active. It runs on the conductor's
thread only; the Image callback and the recorder's listener reach it through the conductor's
event queue (`conductor_events`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from aeron_spark.archive.codecs import ArchiveErrorCode, RecordingSignal, SourceLocation, recording_position
from aeron_spark.archive.codecs.messages import (
    ExtendRecordingRequest,
    ExtendRecordingRequest2,
    StartRecordingRequest,
    StartRecordingRequest2,
    StopRecordingByIdentityRequest,
    StopRecordingRequest,
    StopRecordingSubscriptionRequest,
)
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor
from aeron_spark.archive.service.aeron_port import AeronPort, Subscription
from aeron_spark.archive.service.conductor_events import RecordingImageAvailable
from aeron_spark.archive.service.conductor_settings import ConductorSettings
from aeron_spark.archive.service.connecting_sessions import Discards, PendingResource
from aeron_spark.archive.service.control_demuxer import driver_refusal
from aeron_spark.archive.service.control_session import ControlSession
from aeron_spark.archive.service.recording_events_publisher import RecordingEventsPublisher
from aeron_spark.archive.service.recording_session import BlockWriter, RecordedImage, RecordingListener, RecordingSession
from aeron_spark.archive.service.request_ports import RecorderPort, RecordingImage
from aeron_spark.archive.service.request_errors import ArchiveRequestError, known_recording
from aeron_spark.archive.storage.catalog import Catalog, UnknownRecordingError
from aeron_spark.driver_integration import channel_uri
from aeron_spark.driver_integration.channel_params import check_channel_params
from aeron_spark.driver_integration.errors import AeronError

log = logging.getLogger(__name__)

StartRecording = StartRecordingRequest | StartRecordingRequest2
ExtendRecording = ExtendRecordingRequest | ExtendRecordingRequest2


class PendingSubscription(PendingResource[Subscription], Protocol):
    """A subscription the driver is still adding (driver_integration's ``PendingSubscription``):
    its registration id (the subscription id) is known at once."""

    registration_id: int


@dataclass(eq=False)
class RecordingSubscription:
    """A subscription created by StartRecording or ExtendRecording."""

    subscription: Subscription | None  # None while the media driver is still adding it (``pending``)
    subscription_id: int
    key: str
    channel: str  # as the client sent it
    subscribed_channel: str  # stripped, with aeron-spy: for LOCAL UDP
    stripped_channel: str
    stream_id: int
    auto_stop: bool
    control_session: ControlSession
    correlation_id: int
    extend_recording_id: int | None = None
    recordings: set[int] = field(default_factory=set)
    closing: bool = False
    #: the add the driver is still carrying out, and whether the request still waits for its answer
    pending: PendingResource[Subscription] | None = None
    unanswered: bool = False


@dataclass(frozen=True, slots=True)
class ActiveRecording:
    session: RecordingSession
    subscription: RecordingSubscription
    descriptor: RecordingDescriptor
    extension: bool


class RecordingRequests:
    """See the module docstring. ``listener`` receives the recorder's callbacks (the conductor,
    which enqueues them); ``enqueue`` queues an event for the conductor (any thread)."""

    def __init__(self, *, aeron: AeronPort, catalog: Catalog, settings: ConductorSettings,
                 recorder: RecorderPort, listener: RecordingListener,
                 enqueue: Callable[[RecordingImageAvailable], None],
                 events: RecordingEventsPublisher) -> None:
        self.aeron = aeron
        self.catalog = catalog
        self.settings = settings
        self.recorder = recorder
        self.listener = listener
        self._enqueue = enqueue
        self.events = events
        self._subscriptions_by_key: dict[str, RecordingSubscription] = {}
        self._subscriptions_by_id: dict[int, RecordingSubscription] = {}
        self._active: dict[int, ActiveRecording] = {}
        self._pending: list[RecordingSubscription] = []  # subscriptions the driver is still adding
        self._discards = Discards()
        #: told of a subscription the driver refused after its request's handler returned
        self.report_failure: Callable[[str, int, Exception, str], None] | None = None

    # ------------------------------------------------------------------ what other handlers ask

    def is_active(self, recording_id: int) -> bool:
        return recording_id in self._active

    def live_position(self, recording_id: int) -> int | None:
        """The recorded position of an active recording, None when it is not being recorded."""
        active = self._active.get(recording_id)
        return None if active is None else active.session.recorded_position

    def position_counter_id(self, recording_id: int) -> int | None:
        """The ``rec-pos`` counter id of an active recording (a replay follows it)."""
        active = self._active.get(recording_id)
        return None if active is None else active.session.counter_id

    def open_subscriptions(self) -> list[RecordingSubscription]:
        """The recording subscriptions not being closed, oldest first."""
        return [e for e in self._subscriptions_by_id.values() if not e.closing]

    def image_of(self, recording_id: int) -> RecordedImage | None:
        """The Image an active recording records (a replication's live merge watches its transports)."""
        active = self._active.get(recording_id)
        return None if active is None else active.session.image

    def is_subscription_open(self, subscription_id: int) -> bool:
        entry = self._subscriptions_by_id.get(subscription_id)
        return entry is not None and not entry.closing

    def stop_subscription_by_id(self, subscription_id: int) -> None:
        """Stops a subscription's recordings (a replication ending); unknown ids are ignored."""
        entry = self._subscriptions_by_id.get(subscription_id)
        if entry is not None and not entry.closing:
            self._stop_subscription_recordings(entry)

    @property
    def active_recording_ids(self) -> list[int]:
        return sorted(self._active)

    @property
    def has_active_recordings(self) -> bool:
        return bool(self._active)

    # ------------------------------------------------------------------ requests

    def start_recording(self, session: ControlSession, message: StartRecording, *, auto_stop: bool) -> None:
        self._check_recording_capacity()
        self._add_recording_subscription(session, message, auto_stop=auto_stop, extend_recording_id=None,
                                         without_waiting=True)

    def extend_recording(self, session: ControlSession, message: ExtendRecording, *, auto_stop: bool) -> None:
        self.open_extension(session, message, auto_stop=auto_stop, without_waiting=True)

    def open_extension(self, session: ControlSession, message: ExtendRecording, *,
                       auto_stop: bool, without_waiting: bool = False) -> RecordingSubscription:
        """ExtendRecording, returning its subscription (a replication follows it, and needs the
        subscription itself: it waits for the driver; a client's request does not)."""
        descriptor = known_recording(self.catalog, message.recording_id)
        if message.recording_id in self._active or descriptor.is_active:
            raise ArchiveRequestError(ArchiveErrorCode.ACTIVE_RECORDING,
                                      f"cannot extend active recording {message.recording_id}")
        if descriptor.stream_id != message.stream_id:
            raise ArchiveRequestError(
                ArchiveErrorCode.UNKNOWN_RECORDING,
                f"cannot extend recording {message.recording_id} with streamId="
                f"{message.stream_id} != existing streamId={descriptor.stream_id}")
        self._check_recording_capacity()
        return self._add_recording_subscription(session, message, auto_stop=auto_stop,
                                                extend_recording_id=message.recording_id,
                                                without_waiting=without_waiting)

    def stop_recording(self, session: ControlSession, message: StopRecordingRequest) -> None:
        try:
            key = channel_uri.recording_key(message.stream_id, message.channel)
        except ValueError as error:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC,
                                      f"invalid channel {message.channel!r}: {error}") from None
        entry = self._subscriptions_by_key.get(key)
        if entry is None:
            raise ArchiveRequestError(
                ArchiveErrorCode.UNKNOWN_SUBSCRIPTION,
                f"no recording found for streamId={message.stream_id} channel={message.channel}")
        self._stop_subscription_recordings(entry)
        session.send_ok(message.correlation_id, 0)

    def stop_recording_subscription(self, session: ControlSession,
                                    message: StopRecordingSubscriptionRequest) -> None:
        entry = self._subscriptions_by_id.get(message.subscription_id)
        if entry is None or entry.closing:
            raise ArchiveRequestError(ArchiveErrorCode.UNKNOWN_SUBSCRIPTION,
                                      f"no recording subscription found for subscriptionId="
                                      f"{message.subscription_id}")
        self._stop_subscription_recordings(entry)
        session.send_ok(message.correlation_id, 0)

    def stop_recording_by_identity(self, session: ControlSession,
                                   message: StopRecordingByIdentityRequest) -> None:
        known_recording(self.catalog, message.recording_id)
        active = self._active.get(message.recording_id)
        if active is None:
            session.send_ok(message.correlation_id, 0)
            return
        entry = active.subscription
        if entry.recordings == {message.recording_id}:
            self._stop_subscription_recordings(entry)
        else:
            self.recorder.stop_recording(message.recording_id)
        session.send_ok(message.correlation_id, 1)

    def _check_recording_capacity(self) -> None:
        if len(self._active) >= self.settings.max_concurrent_recordings:
            raise ArchiveRequestError(
                ArchiveErrorCode.MAX_RECORDINGS,
                f"max concurrent recordings reached {self.settings.max_concurrent_recordings}")
        from aeron_spark.archive.storage.segment import low_storage_space

        threshold = self.settings.low_storage_threshold
        low = low_storage_space(self.settings.archive_dir,
                                self.settings.segment_file_length if threshold is None else threshold)
        if low is not None:  # refused before OK, as Aeron: no recording that cannot be written
            raise ArchiveRequestError(ArchiveErrorCode.STORAGE_SPACE, low)

    def _add_recording_subscription(self, session: ControlSession,
                                    message: StartRecording | ExtendRecording, *, auto_stop: bool,
                                    extend_recording_id: int | None,
                                    without_waiting: bool = False) -> RecordingSubscription:
        """The recording subscription of a Start/ExtendRecording, the request answered OK with its
        id. ``without_waiting`` (and an Aeron port that can): asked of the driver without waiting,
        answered when it is there (`poll_pending`); otherwise added at once and answered now."""
        channel = message.channel
        stream_id = message.stream_id
        try:
            check_channel_params(channel_uri.parse(channel))
            stripped = channel_uri.strip_channel(channel)
            key = channel_uri.recording_key(stream_id, channel)
            subscribed = channel_uri.recording_subscription_channel(
                channel, local=int(message.source_location) == SourceLocation.LOCAL)
        except ValueError as error:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC, f"invalid channel {channel!r}: {error}") from None
        if key in self._subscriptions_by_key:
            raise ArchiveRequestError(
                ArchiveErrorCode.ACTIVE_SUBSCRIPTION,
                f"recording exists for streamId={stream_id} channel={channel}")
        # Images may be announced (client thread) before add_subscription returns the id.
        holder: dict[str, int] = {}
        enqueue = self._enqueue

        def on_image(image: RecordingImage) -> None:
            enqueue(RecordingImageAvailable(holder, image))

        async_add = getattr(self.aeron, "async_add_subscription", None) if without_waiting else None
        subscription: Subscription | None = None
        pending: PendingSubscription | None = None
        if async_add is not None:
            pending = async_add(subscribed, stream_id, on_available_image=on_image)
            subscription_id = pending.registration_id
        else:
            subscription = self.aeron.add_subscription(subscribed, stream_id, on_available_image=on_image)
            subscription_id = subscription.registration_id
        holder["id"] = subscription_id
        entry = RecordingSubscription(
            subscription=subscription, subscription_id=subscription_id, key=key, channel=channel,
            subscribed_channel=subscribed, stripped_channel=stripped, stream_id=stream_id,
            auto_stop=auto_stop, control_session=session, correlation_id=message.correlation_id,
            extend_recording_id=extend_recording_id, pending=pending, unanswered=pending is not None)
        self._subscriptions_by_key[key] = entry
        self._subscriptions_by_id[subscription_id] = entry
        if pending is not None:
            self._pending.append(entry)
            self._poll(entry)  # a subscription the driver already has is answered at once
        else:
            session.send_ok(message.correlation_id, subscription_id)
        log.info("recording subscription %d: %s stream %d (%s%s)", subscription_id, subscribed,
                 stream_id, "extend %d" % extend_recording_id if extend_recording_id is not None
                 else "new recordings", ", autoStop" if auto_stop else "")
        return entry

    # ------------------------------------------------------------------ images and the recorder

    def on_image(self, subscription_id: int, image: RecordingImage) -> None:
        """An Image of a recording subscription: a new recording, or the extension."""
        entry = self._subscriptions_by_id.get(subscription_id)
        if entry is None or entry.closing:
            return
        control = entry.control_session
        if entry.extend_recording_id is not None:
            self._start_extension(entry, entry.extend_recording_id, image)
            return
        from aeron_spark.archive.storage.segment import SegmentWriter, recording_segment_length

        segment_length = recording_segment_length(self.settings.segment_file_length,
                                                  image.term_buffer_length)
        try:
            recording_id = self.catalog.add_recording(
                start_position=image.join_position, initial_term_id=image.initial_term_id,
                segment_file_length=segment_length, term_buffer_length=image.term_buffer_length,
                mtu_length=image.mtu_length, session_id=image.session_id, stream_id=entry.stream_id,
                stripped_channel=entry.stripped_channel, original_channel=entry.channel,
                source_identity=image.source_identity)
        except OSError as error:  # the client was answered OK: it must hear of the failure
            self._refuse_image(entry, error)
            return
        descriptor = self._stored(recording_id)
        settings = self.settings

        def writer_factory() -> SegmentWriter:
            return SegmentWriter(settings.archive_dir, recording_id, image.join_position,
                                 image.term_buffer_length, segment_length,
                                 file_sync=settings.file_sync, checksum=settings.checksum)

        self._launch_recording(entry, image, descriptor, writer_factory, extension=False)
        control.send_signal(entry.correlation_id, recording_id, entry.subscription_id,
                            image.join_position, RecordingSignal.START)

    def _refuse_image(self, entry: RecordingSubscription, error: OSError) -> None:
        """A recording that could not be created (catalog write failed): ERROR to its client
        (STORAGE_SPACE when the disk is full); an autoStop subscription with nothing to record closes."""
        from aeron_spark.archive.storage.segment import is_storage_space_error

        code = ArchiveErrorCode.STORAGE_SPACE if is_storage_space_error(error) else ArchiveErrorCode.GENERIC
        message = f"recording not created for subscriptionId={entry.subscription_id}: catalog write failed: {error}"
        log.error("%s", message)
        entry.control_session.send_error(entry.correlation_id, message, code)
        if entry.auto_stop and not entry.recordings:
            self._close_recording_subscription(entry)

    def _stored(self, recording_id: int) -> RecordingDescriptor:
        """The descriptor of a recording this handler has just added or extended."""
        descriptor = self.catalog.descriptor(recording_id)
        if descriptor is None:
            raise UnknownRecordingError(recording_id, "gone from the catalog right after it was written")
        return descriptor

    def _start_extension(self, entry: RecordingSubscription, recording_id: int, image: RecordingImage) -> None:
        control = entry.control_session
        descriptor = self.catalog.descriptor(recording_id)
        problem = None
        if descriptor is None:
            problem = f"recording {recording_id} no longer exists"
        elif recording_id in self._active:
            problem = f"recording {recording_id} is already being extended"
        elif image.join_position != descriptor.stop_position:
            problem = (f"cannot extend recording {recording_id} image joinPosition="
                       f"{image.join_position} != stopPosition={descriptor.stop_position}")
        elif image.initial_term_id != descriptor.initial_term_id:
            problem = (f"cannot extend recording {recording_id} image initialTermId="
                       f"{image.initial_term_id} != initialTermId={descriptor.initial_term_id}")
        elif image.term_buffer_length != descriptor.term_buffer_length:
            problem = (f"cannot extend recording {recording_id} image termBufferLength="
                       f"{image.term_buffer_length} != termBufferLength={descriptor.term_buffer_length}")
        elif image.mtu_length != descriptor.mtu_length:
            problem = (f"cannot extend recording {recording_id} image mtuLength="
                       f"{image.mtu_length} != mtuLength={descriptor.mtu_length}")
        if problem is not None:
            log.warning("%s", problem)
            control.send_error(entry.correlation_id, problem, ArchiveErrorCode.INVALID_EXTENSION)
            return
        from aeron_spark.archive.storage.segment import SegmentWriter

        self.catalog.extend(recording_id, control_session_id=control.control_session_id,
                            correlation_id=entry.correlation_id, session_id=image.session_id)
        extended = self._stored(recording_id)
        settings = self.settings
        start = extended.start_position

        def writer_factory() -> SegmentWriter:
            return SegmentWriter(settings.archive_dir, recording_id, start, extended.term_buffer_length,
                                 extended.segment_file_length, file_sync=settings.file_sync,
                                 checksum=settings.checksum, position=image.join_position)

        self._launch_recording(entry, image, extended, writer_factory, extension=True)
        control.send_signal(entry.correlation_id, recording_id, entry.subscription_id,
                            image.join_position, RecordingSignal.EXTEND)

    def _launch_recording(self, entry: RecordingSubscription, image: RecordingImage,
                          descriptor: RecordingDescriptor, writer_factory: Callable[[], BlockWriter], *,
                          extension: bool) -> None:
        counter = recording_position.allocate(
            self.aeron, archive_id=self.settings.archive_id, recording_id=descriptor.recording_id,
            session_id=image.session_id, stream_id=entry.stream_id,
            stripped_channel=entry.stripped_channel, source_identity=image.source_identity)
        counter.value = image.join_position
        session = RecordingSession(
            recording_id=descriptor.recording_id, image=image, writer_factory=writer_factory,
            position_counter=counter, correlation_id=entry.correlation_id, owner=entry,
            file_io_max_length=self.settings.replay_buffer_length, listener=self.listener)
        entry.recordings.add(descriptor.recording_id)
        self._active[descriptor.recording_id] = ActiveRecording(session, entry, descriptor, extension)
        self.recorder.add_session(session)
        log.info("recording %d %s: session %d stream %d from position %d (%s)",
                 descriptor.recording_id, "extended" if extension else "started", image.session_id,
                 entry.stream_id, image.join_position, image.source_identity)

    def on_recording_started(self, session: RecordingSession) -> None:
        active = self._active.get(session.recording_id)
        if active is None:
            return
        self.events.recording_started(
            session.recording_id, session.join_position, active.descriptor.session_id
            if not active.extension else session.image.session_id, active.descriptor.stream_id,
            active.subscription.channel, active.descriptor.source_identity)

    def on_recording_stopped(self, session: RecordingSession) -> None:
        """The catalog gets the stop position, then the owner STOP (and ERROR if it failed)."""
        active = self._active.pop(session.recording_id, None)
        stop_position = session.stop_position if session.stop_position is not None else session.recorded_position
        try:
            self.catalog.recording_stopped(session.recording_id, stop_position)
        finally:
            session.close()
        self.events.forget_progress(session.recording_id)
        log.info("recording %d stopped at %d (%s)", session.recording_id, stop_position,
                 session.stop_reason or "stopped")
        if active is None:
            return
        entry = active.subscription
        control = entry.control_session
        if session.error is not None:
            control.send_error(entry.correlation_id, session.error.message, session.error.code)
        control.send_signal(entry.correlation_id, session.recording_id, entry.subscription_id,
                            stop_position, RecordingSignal.STOP)
        self.events.recording_stopped(session.recording_id, session.join_position, stop_position)
        entry.recordings.discard(session.recording_id)
        if not entry.recordings and (entry.closing or entry.auto_stop):
            self._close_recording_subscription(entry)

    # ------------------------------------------------------------------ stopping and closing

    def stop_all_recordings(self) -> None:
        """Asks the recorder to stop everything; the stop positions arrive as events."""
        for entry in list(self._subscriptions_by_id.values()):
            self._stop_subscription_recordings(entry)

    def _stop_subscription_recordings(self, entry: RecordingSubscription) -> None:
        """Stops the subscription's recordings; the subscription closes once they have stopped
        (the recorder may be polling its images on another thread until then)."""
        self._subscriptions_by_key.pop(entry.key, None)
        entry.closing = True
        if entry.recordings:
            for recording_id in list(entry.recordings):
                self.recorder.stop_recording(recording_id)
        else:
            self._close_recording_subscription(entry)

    def _close_recording_subscription(self, entry: RecordingSubscription) -> None:
        self._subscriptions_by_key.pop(entry.key, None)
        self._subscriptions_by_id.pop(entry.subscription_id, None)
        entry.closing = True
        if entry.pending is not None:  # closed when the driver's answer arrives
            self._pending.remove(entry)
            self._discards.add(entry.pending)
            entry.pending = None
            self._answer(entry)
        elif entry.subscription is not None:
            try:
                entry.subscription.close()
            except Exception:  # noqa: BLE001
                log.exception("closing recording subscription %d failed", entry.subscription_id)
        log.info("recording subscription %d closed", entry.subscription_id)

    # ------------------------------------------------------------------ subscriptions being added

    def poll_pending(self) -> int:
        """The conductor's duty-cycle step: answers each Start/ExtendRecording whose subscription
        the driver has added (OK with its id) or refused (ERROR); returns how many settled."""
        settled = self._discards.reap() if len(self._discards) else 0
        if not self._pending:
            return settled
        return settled + sum(self._poll(entry) for entry in list(self._pending))

    def _poll(self, entry: RecordingSubscription) -> int:
        assert entry.pending is not None
        try:
            subscription = entry.pending.poll()
        except Exception as error:  # noqa: BLE001 - the driver refused the client's channel
            self._pending.remove(entry)
            entry.pending = None
            self._subscriptions_by_key.pop(entry.key, None)
            self._subscriptions_by_id.pop(entry.subscription_id, None)
            entry.closing = True
            refusal = driver_refusal(error) if isinstance(error, AeronError) else f"{type(error).__name__}: {error}"
            name = "ExtendRecordingRequest" if entry.extend_recording_id is not None else "StartRecordingRequest"
            text = f"{name}: media driver refused: {refusal}"
            if self.report_failure is not None:
                self.report_failure(name, entry.correlation_id, error, text)
            if entry.unanswered:
                entry.unanswered = False
                entry.control_session.send_error(entry.correlation_id, text)
            return 1
        if subscription is None:
            return 0
        self._pending.remove(entry)
        entry.pending = None
        entry.subscription = subscription
        self._answer(entry)
        return 1

    @staticmethod
    def _answer(entry: RecordingSubscription) -> None:
        if entry.unanswered:
            entry.unanswered = False
            entry.control_session.send_ok(entry.correlation_id, entry.subscription_id)

    def close(self) -> None:
        """Closes every recording subscription (the archive is shutting down)."""
        for entry in list(self._subscriptions_by_id.values()):
            self._close_recording_subscription(entry)
