"""Where the archive is and a connected ``ArchiveClient``: what the source and the sink share to
reach it.

``archive.dir`` is resolved through the archive's mark file (``archive-mark.dat``: control
channel, control stream id, aeron dir; options given explicitly win), and a mark file that says
the archive stopped (or stopped updating) is a clear error at once, not a connect timeout. Every
failure to locate or connect is an ``ArchiveUnavailable`` naming where it looked.

On a cluster every Spark process has its own media driver (``aeron.driver``: the one running at
``aeron.dir``, else one embedded in the Python process) and the archive reaches it only over UDP:
the response channel the archive is told names this host's reachable address (``aeron.host``,
by default the address that routes to the archive's control endpoint) and the port the driver
bound, never ``localhost`` or port 0.

With ``archive.responseChannel=aeron:udp?control-mode=response|control=<archive host>:<port>`` (a
response channel, Aeron's ``control-mode=response``) the archive answers, and replays, over the
connections this process opens: nothing of this host need be reachable (NAT, firewalls), and no
``aeron.host`` is told (connector/replay_endpoint.py).

With ``archive.credentials`` / ``archive.credentialsFile`` (connector/credentials.py) the client
authenticates; an archive that refuses is an ``ArchiveAuthenticationRejected`` naming its
refusal (AUTHENTICATION_REJECTED) at once, never a timeout, and never quoting a secret.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from aeron_spark.archive.client import local_endpoints
from aeron_spark.archive.client.local_endpoints import default_response_channel
from aeron_spark.archive.client.response_routing import ArchiveError
from aeron_spark.archive.configuration import DEFAULT_CONTROL_STREAM_ID, IPC_CHANNEL
from aeron_spark.driver_integration.process_driver import DriverUnavailable, driver_dir_for_process

from aeron_spark.connector.credentials import (
    CREDENTIALS_ENCODING_OPTION,
    CREDENTIALS_FILE_OPTION,
    CREDENTIALS_OPTION,
    CredentialsUnavailable,
    PlainCredentials,
)
from aeron_spark.connector.options import ArchiveConnection

if TYPE_CHECKING:  # imported late at run time: executors may not need the client
    from aeron_spark.archive.client.archive_client import ArchiveClient
    from aeron_spark.archive.client.archive_location import ArchiveMarkInfo
    from aeron_spark.archive.client.secret_credentials import SecretCredentials

#: ArchiveErrorCode.AUTHENTICATION_REJECTED (Aeron's archive error code 10).
AUTHENTICATION_REJECTED = 10


class ArchiveUnavailable(RuntimeError):
    """The archive cannot be reached or located."""


class ArchiveAuthenticationRejected(ArchiveUnavailable):
    """The archive refused this client's credentials (or their absence)."""


def resolve_connection(connection: ArchiveConnection) -> ArchiveConnection:
    """Fill control channel / stream id / aeron dir from the archive's mark file when asked to."""
    if connection.archive_dir is None:
        return connection
    mark = read_mark_file_location(connection.archive_dir)
    if not mark.is_live():
        state = ("stopped cleanly" if mark.terminated else
                 f"has not been updated for {mark.activity_age_ms() / 1000:.1f} s or its process {mark.pid} is gone")
        raise ArchiveUnavailable(f"option archive.dir: no archive is running on {connection.archive_dir} "
                                 f"(its mark file {mark.path} says it {state}); start `aeron-archive serve "
                                 f"--dir {connection.archive_dir}` or point archive.dir at a running archive")
    if not mark.control_channel and not connection.control_channel:
        raise ArchiveUnavailable(f"the archive mark file in {connection.archive_dir} names no control channel; "
                                 "set archive.controlChannel")
    return dataclasses.replace(
        connection,
        control_channel=connection.control_channel or mark.control_channel,
        control_stream_id=connection.control_stream_id if connection.control_stream_id is not None
        else mark.control_stream_id,
        aeron_dir=connection.aeron_dir or mark.aeron_dir,
    )


def read_mark_file_location(path: str | os.PathLike[str]) -> ArchiveMarkInfo:
    """The archive's ArchiveMarkInfo (control channel, control stream id, aeron dir) from its mark file."""
    from aeron_spark.archive.client.archive_location import MarkFileError, read_archive_location
    try:
        return read_archive_location(path)
    except MarkFileError as error:
        raise ArchiveUnavailable(f"option archive.dir: {error}") from None
    except (OSError, ValueError) as error:
        raise ArchiveUnavailable(f"option archive.dir: cannot read the archive mark file {path}: {error}") from None


def local_hosts(connection: ArchiveConnection, control_channel: str) -> tuple[str, str]:
    """(address the archive reaches this process at, address to bind) for response and replay
    endpoints: ``aeron.host`` / ``aeron.bindAddress``, else the address routing to the archive."""
    try:
        return local_endpoints.local_hosts(control_channel, connection.host, connection.bind_address)
    except OSError as error:
        raise ArchiveUnavailable(
            f"option archive.controlChannel={control_channel}: cannot find a route to the archive's control "
            f"endpoint ({error}); set archive.controlChannel to an address this host can reach, or aeron.host "
            "to the address of this host the archive reaches") from None


def replay_hosts(connection: ArchiveConnection, client: ArchiveClient) -> tuple[str, str]:
    """(advertised, bind) hosts of this worker's replay endpoint for a client ``connect_client``
    connected: ``aeron.host`` / ``aeron.bindAddress``, else as for the response channel."""
    return local_hosts(resolve_connection(connection), client.control_channel)


def process_aeron_dir(connection: ArchiveConnection, aeron_dir: str | None) -> str:
    """The media driver directory this process uses (``aeron.driver``, ``aeron.dir``)."""
    try:
        return driver_dir_for_process(connection.driver_mode, aeron_dir)
    except DriverUnavailable as error:
        raise ArchiveUnavailable(f"option aeron.driver={connection.driver_mode}: {error}") from None


def connect_client(connection: ArchiveConnection) -> ArchiveClient:
    """An ``ArchiveClient`` connected as ``connection`` says (``archive.dir`` resolved through the
    mark file); ArchiveUnavailable naming where it looked when it cannot. Used by the source and
    the sink."""
    resolved = resolve_connection(connection)
    if not resolved.control_channel:
        raise ArchiveUnavailable("no archive control channel: set archive.controlChannel or archive.dir")
    aeron_dir = process_aeron_dir(connection, resolved.aeron_dir)
    advertised, bind = local_hosts(resolved, resolved.control_channel)
    # An explicit response channel is told as given (a port 0 resolved).
    response_channel = resolved.response_channel or default_response_channel(resolved.control_channel, bind)
    response_host = None if resolved.response_channel or response_channel.startswith(IPC_CHANNEL) else advertised
    # 0 is a valid stream id: only an unset one takes the default (and the error names the one used).
    control_stream_id = DEFAULT_CONTROL_STREAM_ID if resolved.control_stream_id is None else resolved.control_stream_id
    # Imported late: executors may not need it.
    from aeron_spark.archive.client.archive_client import ArchiveClient
    secret = _load_credentials(connection)
    try:
        return ArchiveClient.connect(
            control_channel=resolved.control_channel,
            control_stream_id=control_stream_id,
            response_channel=response_channel,
            response_stream_id=resolved.response_stream_id,
            aeron_dir=aeron_dir,
            timeout=resolved.timeout_ms / 1000.0,
            response_host=response_host,
            credentials=secret.connect_credentials() if secret else None,
            on_challenge=secret.on_challenge if secret else None,
        )
    except Exception as error:
        if isinstance(error, ArchiveError) and error.error_code == AUTHENTICATION_REJECTED:
            raise ArchiveAuthenticationRejected(_rejection_message(connection, secret, resolved.control_channel,
                                                                   error)) from None
        if _is_response_channel(response_channel):
            raise ArchiveUnavailable(
                f"cannot connect to the archive at option archive.controlChannel={resolved.control_channel} "
                f"stream {control_stream_id} (archive.controlStreamId) over the response channel "
                f"archive.responseChannel={response_channel} (control-mode=response: responses come back over the "
                f"connection this host opens), from the media driver {aeron_dir} of this process: {error}. This "
                f"host must reach the archive's control port and the port named by control= (UDP); the archive "
                f"needs no route to this host") from error
        told = (f"aeron.host={advertised} (bound at aeron.bindAddress={bind})" if response_host
                else f"archive.responseChannel={response_channel}")
        raise ArchiveUnavailable(
            f"cannot connect to the archive at option archive.controlChannel={resolved.control_channel} "
            f"stream {control_stream_id} (archive.controlStreamId), responses on stream {resolved.response_stream_id} "
            f"(archive.responseStreamId), from the media driver {aeron_dir} "
            f"of this process: {error}. The archive must reach this host's response endpoint over UDP at "
            f"{told}; check the control channel, the route between the hosts, and those options") from error


def _is_response_channel(channel: str) -> bool:
    from aeron_spark.archive.client.transport import is_response_channel
    return is_response_channel(channel)


def _load_credentials(connection: ArchiveConnection) -> SecretCredentials | PlainCredentials | None:
    if connection.credentials is None:
        return None
    try:
        return connection.credentials.load()
    except CredentialsUnavailable as error:
        raise ArchiveUnavailable(str(error)) from None


def _rejection_message(connection: ArchiveConnection, secret: SecretCredentials | PlainCredentials | None,
                       control_channel: str, error: ArchiveError) -> str:
    refusal = (f"the archive at archive.controlChannel={control_channel} refused the connection: "
               f"AUTHENTICATION_REJECTED ({error.archive_message or 'authentication rejected'})")
    if secret is None or connection.credentials is None:
        return (f"{refusal}. It requires authentication and none was given: set {CREDENTIALS_OPTION} "
                f"(principal:secret) or {CREDENTIALS_FILE_OPTION} (a file holding that line)")
    hint = ("; an archive comparing the credentials bytes (a Java archive with Aeron's SimpleAuthenticator) "
            f"needs {CREDENTIALS_ENCODING_OPTION}=plain" if connection.credentials.encoding == "challenge" else "")
    return (f"{refusal}, for principal {secret.principal!r} given by option {connection.credentials.describe()}: "
            f"an unknown principal or a wrong secret (the secret is not shown){hint}")
