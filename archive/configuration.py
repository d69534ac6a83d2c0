"""Every default of the archive sidecar and of its client, defined once (like Aeron's
``Archive.Configuration`` and ``AeronArchive.Configuration``).

The CLI's argparse defaults and help texts, the service's option dataclasses and the client's
keyword defaults all read them from here, so a default changes in one place. Pure constants: this
module imports nothing of the project and does no I/O, so every archive layer (codecs included)
and the connector may import it.
"""

from __future__ import annotations

from typing import Final

KIB: Final = 1024
MIB: Final = 1024 * KIB
GIB: Final = 1024 * MIB

# -- channels and stream ids (Aeron's defaults: a client and an archive that both keep them meet)
#: Where the archive listens for control requests over UDP, and where a client sends them.
DEFAULT_CONTROL_CHANNEL: Final = "aeron:udp?endpoint=localhost:8010"
DEFAULT_CONTROL_STREAM_ID: Final = 10
#: The archive's local (same media driver) control channel.
DEFAULT_LOCAL_CONTROL_CHANNEL: Final = "aeron:ipc"
DEFAULT_LOCAL_CONTROL_STREAM_ID: Final = 11
DEFAULT_RECORDING_EVENTS_STREAM_ID: Final = 30
#: Where a client asks for responses: a free UDP port (the client tells the archive the one bound).
DEFAULT_RESPONSE_CHANNEL: Final = "aeron:udp?endpoint=localhost:0"
DEFAULT_RESPONSE_STREAM_ID: Final = 20
#: The channel a client uses for responses and replays when the archive is on its media driver.
IPC_CHANNEL: Final = "aeron:ipc"
#: Where the ``replay`` command asks for a replay when nothing else is given.
DEFAULT_REPLAY_STREAM_ID: Final = 2001

# -- client timeouts
#: How long a client waits for each answer (Aeron's message timeout, 10 s).
DEFAULT_TIMEOUT_S: Final = 10.0
#: The least driver timeout a client's Aeron connection gets: the C client treats a driver silent
#: for that long as dead (and its default error handler ends the process), so keep Aeron's 10 s.
AERON_DRIVER_TIMEOUT_S: Final = 10.0
#: How long a ReplayMerge may stay in one state without progress (Aeron's ReplayMerge, 5 s).
DEFAULT_REPLAY_MERGE_PROGRESS_TIMEOUT_S: Final = 5.0

# -- storage
#: Recording segment file length (Aeron's aeron.archive.segment.file.length, 128 MiB).
DEFAULT_SEGMENT_LENGTH: Final = 128 * MIB
MIN_SEGMENT_LENGTH: Final = 64 * KIB
MAX_SEGMENT_LENGTH: Final = 1 * GIB
#: The accepted file sync levels: 0 none, 1 fdatasync the data, 2 fsync data and metadata
#: (Aeron's aeron.archive.file.sync.level and aeron.archive.catalog.file.sync.level).
FILE_SYNC_LEVELS: Final = (0, 1, 2)
DEFAULT_FILE_SYNC: Final = 0
DEFAULT_CATALOG_FILE_SYNC: Final = 0
#: O_DIRECT segment writes are opt-in: buffered through the page cache by default, as Aeron.
DEFAULT_SEGMENT_DIRECT_IO: Final = False

# -- service limits and timeouts
#: How much a replay reads from a segment file at a time (Aeron's aeron.archive.replay.buffer.length).
DEFAULT_REPLAY_BUFFER_LENGTH: Final = 1 * MIB
#: The longest block a recording writes at once (Aeron's aeron.archive.file.io.max.length).
DEFAULT_FILE_IO_MAX_LENGTH: Final = 1 * MIB
DEFAULT_MAX_CONCURRENT_RECORDINGS: Final = 20
DEFAULT_MAX_CONCURRENT_REPLAYS: Final = 20
#: How long a control session, a recording or a replay may take to connect.
DEFAULT_CONNECT_TIMEOUT_MS: Final = 5_000
#: How often the archive checks its control sessions (and pings the clients that support it).
DEFAULT_SESSION_LIVENESS_CHECK_INTERVAL_MS: Final = 1_000
#: Control sessions without a request for this long are closed; 0 = never.
DEFAULT_SESSION_IDLE_TIMEOUT_MS: Final = 0
#: How long a finished replay's publication lingers so that a slow subscriber can drain it.
DEFAULT_REPLAY_LINGER_TIMEOUT_NS: Final = 5_000_000_000
#: What an archive agent does after a duty cycle without work.
DEFAULT_IDLE_STRATEGY: Final = "backoff"
#: How long a stopping archive waits for its active recordings to write their last blocks.
SHUTDOWN_RECORDINGS_TIMEOUT_S: Final = 10.0
#: How the conductor, recorder and replayer get threads (Aeron's aeron.archive.threading.mode):
#: dedicated, one thread each (Aeron's default); shared, one thread running the three duty cycles
#: with the conductor's idle strategy. Aeron's INVOKER (no thread: the embedding application calls
#: the duty cycle) has no use in a sidecar process and is refused.
THREADING_MODES: Final = ("dedicated", "shared")
DEFAULT_THREADING_MODE: Final = "dedicated"
#: StartRecording and ExtendRecording are refused with STORAGE_SPACE when the archive's file system
#: has this many usable bytes or fewer (Aeron's aeron.archive.low.storage.space.threshold). None:
#: the configured segment length. Aeron's default is the constant 128 MiB (its default segment
#: length) whatever the segment length; following the configured one keeps small-segment archives
#: on small disks usable, and is Aeron's value at the default segment length.
DEFAULT_LOW_STORAGE_THRESHOLD: Final[int | None] = None
#: Duty cycles longer than these count in the cycle-time-threshold-exceeded counters (type 104):
#: Aeron's aeron.archive.{conductor,recorder,replayer}.cycle.threshold, 100 ms each.
DEFAULT_CONDUCTOR_CYCLE_THRESHOLD_NS: Final = 100_000_000
DEFAULT_RECORDER_CYCLE_THRESHOLD_NS: Final = 100_000_000
DEFAULT_REPLAYER_CYCLE_THRESHOLD_NS: Final = 100_000_000

# -- replication into this archive (the archive is a client of the source archive)
#: Where the source archive replays to: the replicating archive binds a free port and tells the
#: source which one. A source on another host must reach it: give this host's address instead.
DEFAULT_REPLICATION_CHANNEL: Final = "aeron:udp?endpoint=localhost:0"
#: Where the source archive answers the replicating archive's control requests (same rule).
DEFAULT_REPLICATION_RESPONSE_CHANNEL: Final = "aeron:udp?endpoint=localhost:0"
#: How long a replication waits for each answer of the source archive and for the replay's Image
#: (Aeron's message timeout).
DEFAULT_REPLICATION_ACTION_TIMEOUT_MS: Final = 10_000
#: How long a finishing replication waits for its local recording to stop before REPLICATE_END.
DEFAULT_REPLICATION_STOP_TIMEOUT_MS: Final = 5_000
#: How often `aeron-archive replicate` prints its progress (bytes copied, position, rate).
DEFAULT_REPLICATE_PROGRESS_INTERVAL_S: Final = 1.0

# -- a sidecar run as a child process (cli.sidecar_process)
#: How long a started sidecar may take to print its ready line.
DEFAULT_SIDECAR_START_TIMEOUT_S: Final = 60.0
#: How long a stopping sidecar gets after SIGTERM before it is killed.
DEFAULT_SIDECAR_STOP_GRACE_S: Final = 15.0

# -- the client's media driver (the CLI's --aeron-driver, the connector's aeron.driver)
#: auto: a live driver at the Aeron directory if there is one, else one embedded in the process
#: (the accepted modes: driver_integration.process_driver.DRIVER_MODES).
DEFAULT_DRIVER_MODE: Final = "auto"


def byte_length_text(length: int) -> str:
    """``128m`` for 128 MiB, ``64k``, ``1g``: how help texts and the CLI's length options write lengths."""
    for unit, suffix in ((GIB, "g"), (MIB, "m"), (KIB, "k")):
        if length >= unit and length % unit == 0:
            return f"{length // unit}{suffix}"
    return str(length)
