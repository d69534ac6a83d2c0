"""`ReplayRequests`: starting, awaiting and stopping replays, also over response channels
(``control-mode=response``: a ReplayTokenRequest on the session, then the replay request over a
publication of its own, as Aeron's AeronArchive sends it). A base of `ArchiveClient`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from typing import cast

from aeron_spark.archive import codecs
from aeron_spark.archive.client.client_session import ArchiveSession, RequestBuilder, idle_backoff
from aeron_spark.archive.client.replay_merge import (
    DEFAULT_PROGRESS_TIMEOUT_S,
    DEFAULT_REPLAY_CHANNEL,
    DEFAULT_REPLAY_DESTINATION,
    MULTI_DESTINATION_CHANNEL,
    MergeArchive,
    MergeState,
    ReplayMerge,
)
from aeron_spark.archive.client.replay_subscription import ReplaySubscription, replay_image_session_id
from aeron_spark.archive.client.response_routing import ArchiveError, ArchiveTimeoutError
from aeron_spark.archive.client.transport import RequestPublication, is_response_channel, subscribe_resolved
from aeron_spark.driver_integration import Image, Subscription

#: Builds a replay request from (controlSessionId, correlationId, replayToken).
ReplayRequestBuilder = Callable[[int, int, int], codecs.ControlMessage]
#: How many replays' correlation ids are kept to match their later errors (old replays are long done).
KEPT_REPLAY_CORRELATIONS = 1024


class ReplayRequests(ArchiveSession):
    """Replay requests (see the module docstring)."""

    # ------------------------------------------------------------------------------ replay
    def start_replay(self, recording_id: int, position: int, length: int, replay_channel: str,
                     replay_stream_id: int, *, file_io_max_length: int | None = None,
                     subscription_registration_id: int | None = None) -> int:
        """Starts a replay; returns the replaySessionId (its low 32 bits are the replay image's
        session id). ``position`` -1 means from the start; ``length`` -1 follows a live recording
        (REPLAY_ALL_AND_FOLLOW), -2 stops at the current end (REPLAY_ALL_AND_STOP). A response
        ``replay_channel`` (``control-mode=response``) needs the registration id of the
        subscription the replay goes to (Aeron's ``ReplayParams.subscriptionRegistrationId``)."""
        io_max = -1 if file_io_max_length is None else file_io_max_length
        if io_max != -1:
            self._require_modern("ReplayRequest with file_io_max_length")
        build = lambda s, c, token: codecs.ReplayRequest(  # noqa: E731
            s, c, recording_id, position, length, replay_stream_id, io_max, token, replay_channel)
        return self._send_replay_request(recording_id, replay_channel, build, subscription_registration_id)

    def start_bounded_replay(self, recording_id: int, position: int, length: int,
                             limit_counter_id: int, replay_channel: str, replay_stream_id: int, *,
                             file_io_max_length: int | None = None,
                             subscription_registration_id: int | None = None) -> int:
        """As `start_replay`, never replaying past the value of counter ``limit_counter_id``."""
        self._require_modern("BoundedReplayRequest")
        io_max = -1 if file_io_max_length is None else file_io_max_length
        build = lambda s, c, token: codecs.BoundedReplayRequest(  # noqa: E731
            s, c, recording_id, position, length, limit_counter_id, replay_stream_id, io_max,
            token, replay_channel)
        return self._send_replay_request(recording_id, replay_channel, build, subscription_registration_id)

    def _send_replay_request(self, recording_id: int, replay_channel: str,
                             build: ReplayRequestBuilder,
                             subscription_registration_id: int | None) -> int:
        """Sends ``build(controlSessionId, correlationId, replayToken)``: with a token over a request
        publication of its own to a response ``replay_channel``, else on the session; the
        replaySessionId."""
        if is_response_channel(replay_channel):
            session_id, publication = self._start_replay_over_response_channel(
                recording_id, build, subscription_registration_id)
            publication.close()
            return session_id
        return self._start_replay(lambda s, c: build(s, c, codecs.NULL_VALUE))

    def _start_replay(self, build: RequestBuilder, *,
                      offer: Callable[[bytes], int] | None = None) -> int:
        correlation: list[int] = []

        def remembering(session_id: int, correlation_id: int) -> codecs.ControlMessage:
            correlation.append(correlation_id)
            return build(session_id, correlation_id)
        replay_session_id = self._call(remembering, offer=offer)
        self._replay_correlations[replay_session_id] = correlation[0]
        if len(self._replay_correlations) > KEPT_REPLAY_CORRELATIONS:  # keep the newest
            self._replay_correlations.pop(next(iter(self._replay_correlations)))
        return replay_session_id

    def _start_replay_over_response_channel(
            self, recording_id: int, build: ReplayRequestBuilder,
            subscription_registration_id: int | None) -> tuple[int, RequestPublication]:
        """Aeron's replay over a response channel: a replay token from the session, then the
        request carrying it over a request publication of its own whose
        ``response-correlation-id`` names the replay subscription; the archive answers on this
        session. Returns (replaySessionId, that publication: the caller closes it)."""
        self._require_modern("a replay over a response channel (ReplayTokenRequest)")
        if subscription_registration_id is None:
            raise ArchiveError("a replay to a response channel (control-mode=response) needs "
                               "subscription_registration_id: the registration id of the subscription "
                               "the replay goes to", request="ReplayRequest")
        token = self._call(lambda s, c: codecs.ReplayTokenRequest(s, c, recording_id))
        publication = self._transport.open_request_publication(subscription_registration_id)
        try:
            replay_session_id = self._start_replay(lambda s, c: build(s, c, token), offer=publication.offer)
        except BaseException:
            publication.close()
            raise
        return replay_session_id, publication

    def stop_replay(self, replay_session_id: int) -> None:
        self._replay_correlations.pop(replay_session_id, None)
        self._call(lambda s, c: codecs.StopReplayRequest(s, c, replay_session_id))

    def stop_all_replays(self, recording_id: int = -1) -> None:
        """Stops every replay of ``recording_id`` (-1: of all recordings), of every session."""
        self._require_modern("StopAllReplaysRequest")
        self._call(lambda s, c: codecs.StopAllReplaysRequest(s, c, recording_id))

    @contextlib.contextmanager
    def replay(self, recording_id: int, position: int, length: int, replay_channel: str,
               replay_stream_id: int, *, file_io_max_length: int | None = None,
               timeout: float | None = None, advertised_host: str | None = None) -> Iterator[ReplaySubscription]:
        """Subscribes to ``replay_channel``, starts the replay and yields a `ReplaySubscription`
        holding the subscription and the replay Image (found by the low 32 bits of the replay
        session id). Leaving the block stops the replay and closes the subscription. A response
        ``replay_channel`` (``control-mode=response``) is replayed over the connection this client
        opens (see the module docstring). ``advertised_host`` replaces a UDP ``replay_channel``'s
        host in the channel the archive is told (bind one address, be reached at another)."""
        self._require_open()
        response_mode = is_response_channel(replay_channel)
        if response_mode:
            subscription, channel = self.aeron.add_subscription(replay_channel, replay_stream_id), replay_channel
        else:
            subscription, channel = subscribe_resolved(self.aeron, replay_channel, replay_stream_id,
                                                       self.timeout, advertised_host)
        replay_session_id: int | None = None
        replay: ReplaySubscription | None = None
        request_publication: RequestPublication | None = None
        try:
            if response_mode:
                io_max = -1 if file_io_max_length is None else file_io_max_length
                replay_session_id, request_publication = self._start_replay_over_response_channel(
                    recording_id, lambda s, c, token: codecs.ReplayRequest(
                        s, c, recording_id, position, length, replay_stream_id, io_max, token, channel),
                    subscription.registration_id)
            else:
                replay_session_id = self.start_replay(recording_id, position, length, channel,
                                                      replay_stream_id,
                                                      file_io_max_length=file_io_max_length)
            image = self._await_replay_image(subscription, replay_session_id, channel,
                                             replay_stream_id, timeout)
            if request_publication is not None:  # the replay is connected: its request is done
                request_publication.close()
                request_publication = None
            end = position + length if position >= 0 and length >= 0 else None
            replay = ReplaySubscription(
                subscription=subscription, image=image, recording_id=recording_id,
                replay_session_id=replay_session_id, end_position=end,
                check_errors=lambda: self.check_replay_error(replay_session_id))
            yield replay
        finally:
            if request_publication is not None:
                request_publication.close()
            if replay is not None:
                replay.close()
            if replay_session_id is not None and not self._closed:
                with contextlib.suppress(ArchiveError):
                    # The archive may have ended it already (1.15.x then answers UNKNOWN_REPLAY).
                    self.stop_replay(replay_session_id)
            subscription.close()

    def _await_replay_image(self, subscription: Subscription, replay_session_id: int, channel: str,
                            stream_id: int, timeout: float | None) -> Image:
        session_id = replay_image_session_id(replay_session_id)
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        idle = 0
        while True:
            image = subscription.image_by_session_id(session_id)
            if image is not None:
                return image
            self.check_replay_error(replay_session_id)
            if time.monotonic() > deadline:
                raise ArchiveTimeoutError(
                    f"the replay image of replaySessionId={replay_session_id} (session id "
                    f"{session_id}) did not appear on {channel} stream {stream_id} within {wait} s "
                    f"(can the archive at {self.description} reach that channel?)",
                    request="ReplayRequest")
            idle = idle_backoff(idle)

    def check_replay_error(self, replay_session_id: int) -> None:
        """Raises the ArchiveError the archive sent later for this replay (e.g. it failed after
        its OK), if any; polls the response channel once."""
        correlation_id = self._replay_correlations.get(replay_session_id)
        if correlation_id is None or self._closed:
            return
        self._poll_once()
        response = self._router.take_error_response(correlation_id)
        if response is not None:
            raise ArchiveError.from_response(response, "ReplayRequest")

    # ------------------------------------------------------------------------------ replay merge
    def replay_merge(self, recording_id: int, *, live_destination: str, stream_id: int | None = None,
                     subscription: Subscription | None = None, start_position: int | None = None,
                     replay_channel: str = DEFAULT_REPLAY_CHANNEL,
                     replay_destination: str = DEFAULT_REPLAY_DESTINATION,
                     progress_timeout_s: float = DEFAULT_PROGRESS_TIMEOUT_S,
                     state_timeouts_s: Mapping[MergeState, float] | None = None) -> ReplayMerge:
        """A `ReplayMerge` of ``recording_id`` into its live stream (see `replay_merge` module):
        poll it until ``is_merged``, then keep polling it for the live stream; close it when done.

        ``subscription``: a multi-destination subscription of yours (``control-mode=manual``), left
        open by the merge; by default one on ``aeron:udp?control-mode=manual`` and ``stream_id`` (the
        live stream's) is made on this client's Aeron and closed with the merge. While it runs the
        merge sends its requests on this client: make no other call on it meanwhile."""
        self._require_open()
        owns = subscription is None
        if subscription is None:
            if stream_id is None:
                raise ValueError("replay_merge needs stream_id (the live stream's) or a subscription")
            subscription = self.aeron.add_subscription(MULTI_DESTINATION_CHANNEL, stream_id)
        elif stream_id is not None and stream_id != subscription.stream_id:
            raise ValueError(f"stream_id {stream_id} differs from the subscription's stream "
                             f"{subscription.stream_id}: the replay goes to the subscription's stream")
        try:
            # ArchiveClient, which this is a base of, also has RecordingRequests' positions and listing.
            archive = cast(MergeArchive, self)
            return ReplayMerge(archive, subscription, recording_id=recording_id, live_destination=live_destination,
                               start_position=start_position, replay_channel=replay_channel,
                               replay_destination=replay_destination, progress_timeout_s=progress_timeout_s,
                               state_timeouts_s=state_timeouts_s, owns_subscription=owns)
        except BaseException:
            if owns and not subscription.is_closed:
                subscription.close()
            raise
