"""`ArchiveClient`: a blocking, typed client of an Aeron Archive (ours, or a real Java archive).

In the spirit of Aeron's ``AeronArchive``::

    with ArchiveClient.connect(control_channel="aeron:udp?endpoint=localhost:8010",
                               aeron_dir=driver_dir) as archive:
        subscription_id = archive.start_recording("aeron:ipc", 1001, SourceLocation.LOCAL)
        ...
        for descriptor in archive.list_recordings():
            print(descriptor.recording_id, descriptor.stop_position)
        with archive.replay(recording_id, 0, length, "aeron:ipc", 2001) as replay:
            for message in replay.messages():
                ...

Every call sends one request on the control channel and waits (``timeout`` seconds, default
10 s like Aeron's message timeout) for its answer on the response channel. Failures raise
`ArchiveError` (code, the archive's error code and message); timeouts raise
`ArchiveTimeoutError`, whose message says which request timed out, on which channel.

Protocols: ``"modern"`` connects with AuthConnectRequest (58) and sends schema-v13 layouts;
``"legacy"`` speaks Aeron 1.15.x (ConnectRequest v0 and version-0 layouts) for a real 1.15.1
archive; ``"auto"`` connects with a ConnectRequest (2) that both understand and then talks
1.15.x if the archive's answer carries no protocol version (a 1.15.x archive), modern otherwise.
Requests a 1.15.x archive does not have either fall back (``start_position`` via the descriptor,
``max_recorded_position`` via recording/stop position) or raise `ArchiveError`.

Response channels (``response_channel="aeron:udp?control-mode=response|control=<archive host>:<port>"``,
Aeron's ``control-mode=response``): every connection is opened by this client, so the archive
needs no route to it (a client behind NAT or a firewall that admits no inbound traffic). Replays
to a response channel (``replay_channel`` with ``control-mode=response``) go as Aeron's
AeronArchive sends them: a ReplayTokenRequest on the session, then the Replay/BoundedReplay with
the token over a request publication of its own whose ``response-correlation-id`` names the
replay subscription (`start_replay` needs that subscription's ``subscription_registration_id``;
`replay` subscribes itself).

Recording signals (START, STOP, EXTEND, DELETE, ...) arrive interleaved with responses; they are
queued, never dropped, and handed to ``on_recording_signal`` after each call completes, or taken
with `poll_for_recording_signals` / `await_recording_signal`; a replication's signals (their
correlation id is the replication id) with `poll_replication` / `await_replication`::

    replication_id = replica.replicate(recording_id, "aeron:udp?endpoint=source-host:8010")
    for signal in replica.await_replication(replication_id, until=("SYNC",)):
        print(signal.signal.name, signal.recording_id, signal.position)

**Thread safety:** like Aeron's AeronArchive, one client is used by one thread at a time (use
one client per thread). A call made while another call on the same client is waiting raises
RuntimeError.

`ArchiveClient` is the one facade of every request, as ``AeronArchive`` is; this module creates
connected clients. The class is assembled from a module per role: `client_session` (the control
session: handshake, sending and awaiting, signals, closing), `recording_requests` (listings,
positions, recording, maintenance), `replay_requests` and `replication_requests` (replicate from
another archive, stop it, follow its signals); the plumbing is in `transport`,
`response_routing`, `replay_subscription`, `archive_location` and `live_positions`. Defaults
(channels, stream ids, timeouts) are those of `aeron_spark.archive.configuration`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# Names imported "as" themselves are re-exported: the package, the connector and tests import them
# from here (this module held the whole client before its split by role).
from aeron_spark.archive.client.archive_location import MarkFileError, read_archive_location
from aeron_spark.archive.client.client_session import (
    PING_SILENCE_S as PING_SILENCE_S,
    PROTOCOLS as PROTOCOLS,
    ChallengeCallback,
    Protocol,
    SignalCallback,
    check_protocol_and_timeout,
)
from aeron_spark.archive.client.recording_requests import (
    LIST_PAGE_SIZE as LIST_PAGE_SIZE,
    ListingPage as ListingPage,
    RecordingRequests,
)
from aeron_spark.archive.client.replay_requests import ReplayRequests
from aeron_spark.archive.client.replay_subscription import ReplaySubscription as ReplaySubscription
from aeron_spark.archive.client.replication_requests import (
    REPLICATION_DONE as REPLICATION_DONE,
    ReplicationParams as ReplicationParams,
    ReplicationRequests,
)
from aeron_spark.archive.client.response_routing import ArchiveError
from aeron_spark.archive.client.response_routing import ArchiveTimeoutError as ArchiveTimeoutError
from aeron_spark.archive.client.transport import AeronControlTransport, default_aeron_dir
from aeron_spark.archive.codecs import (
    RecordingSignal as RecordingSignal,
    RecordingSignalEvent as RecordingSignalEvent,
    RecordingSubscriptionDescriptor as RecordingSubscriptionDescriptor,
    SourceLocation as SourceLocation,
)
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION as NULL_POSITION
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor as RecordingDescriptor
from aeron_spark.archive.configuration import (
    AERON_DRIVER_TIMEOUT_S as AERON_DRIVER_TIMEOUT_S,
    DEFAULT_CONTROL_CHANNEL,
    DEFAULT_CONTROL_STREAM_ID,
    DEFAULT_RESPONSE_CHANNEL,
    DEFAULT_RESPONSE_STREAM_ID,
    DEFAULT_TIMEOUT_S,
    IPC_CHANNEL,
)
from aeron_spark.driver_integration import AeronClient


class ArchiveClient(RecordingRequests, ReplayRequests, ReplicationRequests):
    """A connected control session with every request of the archive control protocol. Create
    with `connect` or `from_mark_file`; close it (or use it as a context manager) to send
    CloseSession and release its Aeron resources."""

    # ------------------------------------------------------------------------------ creation
    @classmethod
    def connect(cls, *, control_channel: str = DEFAULT_CONTROL_CHANNEL,
                control_stream_id: int = DEFAULT_CONTROL_STREAM_ID,
                response_channel: str = DEFAULT_RESPONSE_CHANNEL,
                response_stream_id: int = DEFAULT_RESPONSE_STREAM_ID,
                aeron_dir: str | None = None, aeron: AeronClient | None = None,
                timeout: float = DEFAULT_TIMEOUT_S, protocol: Protocol = "modern",
                credentials: bytes | None = None, on_challenge: ChallengeCallback | None = None,
                on_recording_signal: SignalCallback | None = None,
                response_host: str | None = None) -> ArchiveClient:
        """Connects to the archive listening on ``control_channel``/``control_stream_id``.

        ``aeron``: an AeronClient to use (not closed by this client). Otherwise one is created on
        ``aeron_dir`` (default: Aeron's default directory, ``$AERON_DIR`` or
        ``/dev/shm/aeron-<user>``) and closed with this client. A UDP ``response_channel`` with
        port 0 is told to the archive with the port the driver bound, and with its host replaced by
        ``response_host`` when given (the address the archive reaches this host at). Raises
        ArchiveTimeoutError when the archive cannot be reached.
        """
        check_protocol_and_timeout(protocol, timeout)
        owns_aeron = aeron is None
        if aeron is None:
            # Not just the request timeout: see AERON_DRIVER_TIMEOUT_S.
            aeron = AeronClient(aeron_dir or default_aeron_dir(), client_name="aeron-spark archive client",
                                timeout=max(timeout, AERON_DRIVER_TIMEOUT_S))
        try:
            transport = AeronControlTransport(
                aeron, control_channel=control_channel, control_stream_id=control_stream_id,
                response_channel=response_channel, response_stream_id=response_stream_id,
                timeout=timeout, response_host=response_host)
        except BaseException:
            if owns_aeron:
                aeron.close()
            raise
        return cls(transport, aeron=aeron, owns_aeron=owns_aeron, timeout=timeout,
                   protocol=protocol, credentials=credentials, on_challenge=on_challenge,
                   on_recording_signal=on_recording_signal)

    @classmethod
    def from_mark_file(cls, archive_dir: str | Path, **kw: Any) -> ArchiveClient:
        """Connects to the archive running on ``archive_dir``, found through its mark file: its
        local control channel (IPC, preferred) or its control channel, and its Aeron directory.
        Keyword arguments of `connect` override what the mark file says; with an ``aeron`` or
        ``aeron_dir`` on another driver than the archive's, the (UDP) control channel is used."""
        try:
            info = read_archive_location(archive_dir)
        except (MarkFileError, OSError) as error:
            raise ArchiveError(f"cannot find the archive of {archive_dir}: {error}") from None
        if not info.is_live():
            state = "stopped cleanly" if info.terminated else "not updated for " \
                f"{info.activity_age_ms() / 1000:.1f} s or its pid {info.pid} is gone"
            raise ArchiveError(f"no archive is running on {archive_dir}: its mark file {info.path} "
                               f"says it {state}")
        if "control_channel" not in kw:
            if info.local_control_channel and _same_driver(kw, info.aeron_dir):
                kw["control_channel"] = info.local_control_channel
                kw.setdefault("control_stream_id", info.local_control_stream_id)
            elif info.control_channel:
                kw["control_channel"] = info.control_channel
                kw.setdefault("control_stream_id", info.control_stream_id)
            else:
                raise ArchiveError(f"the mark file {info.path} names no control channel")
        if "response_channel" not in kw and kw["control_channel"].startswith(IPC_CHANNEL):
            kw["response_channel"] = IPC_CHANNEL
        if kw.get("aeron") is None and kw.get("aeron_dir") is None and info.aeron_dir:
            kw["aeron_dir"] = info.aeron_dir
        return cls.connect(**kw)

def _same_driver(connect_options: dict[str, Any], archive_aeron_dir: str | None) -> bool:
    """Whether the client would use the archive's own media driver (IPC reaches the archive)."""
    aeron = connect_options.get("aeron")
    chosen = aeron.aeron_dir if aeron is not None else connect_options.get("aeron_dir")
    if chosen is None or archive_aeron_dir is None:
        return True
    return os.path.realpath(chosen) == os.path.realpath(archive_aeron_dir)


