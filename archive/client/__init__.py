"""The Python archive client: blocking, typed requests to our sidecar or a real Aeron Archive.

The public names live here; the modules below are the facade (``archive_client``, the class
assembled from ``client_session``, ``recording_requests`` and ``replay_requests``), response
routing, the transport, replay subscriptions and where an archive reaches this host
(``local_endpoints``).
"""

from aeron_spark.archive.client.archive_client import (
    DEFAULT_CONTROL_CHANNEL,
    DEFAULT_CONTROL_STREAM_ID,
    DEFAULT_RESPONSE_CHANNEL,
    DEFAULT_RESPONSE_STREAM_ID,
    DEFAULT_TIMEOUT_S,
    NULL_POSITION,
    ArchiveClient,
    ArchiveError,
    ArchiveTimeoutError,
    Protocol,
    RecordingSignal,
    RecordingSignalEvent,
    RecordingSubscriptionDescriptor,
    ReplaySubscription,
    SourceLocation,
)
from aeron_spark.archive.client.replay_merge import MergeState, ReplayMerge, ReplayMergeError
from aeron_spark.archive.client.replication_requests import REPLICATION_DONE, ReplicationParams
from aeron_spark.archive.client.secret_credentials import SecretCredentials, UnsupportedChallenge
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor

__all__ = [
    "DEFAULT_CONTROL_CHANNEL",
    "DEFAULT_CONTROL_STREAM_ID",
    "DEFAULT_RESPONSE_CHANNEL",
    "DEFAULT_RESPONSE_STREAM_ID",
    "DEFAULT_TIMEOUT_S",
    "MergeState",
    "NULL_POSITION",
    "REPLICATION_DONE",
    "ArchiveClient",
    "ArchiveError",
    "ArchiveTimeoutError",
    "Protocol",
    "RecordingDescriptor",
    "RecordingSignal",
    "RecordingSignalEvent",
    "RecordingSubscriptionDescriptor",
    "ReplayMerge",
    "ReplayMergeError",
    "ReplicationParams",
    "ReplaySubscription",
    "SecretCredentials",
    "SourceLocation",
    "UnsupportedChallenge",
]
