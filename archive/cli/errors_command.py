"""`aeron-archive errors`: the archive's and its media driver's distinct error logs, as Aeron's
``ArchiveTool errors`` prints them.

The archive's log is the DistinctErrorLog after the mark file header; the driver's is the one in
``<aeronDirectory>/cnc.dat`` (the directory the mark file names), found after the cnc metadata
(two cache lines) and the to-driver, to-clients, counters metadata and counters values buffers,
whose lengths the metadata holds. Each observation prints as Aeron's
``CommonContext.printErrorLog``: a blank line, ``<count> observations from <first> to <last> for:``
with ``yyyy-MM-dd HH:mm:ss.SSS+zzzz`` local times, the error text; then ``<n> distinct errors
observed.`` (or ``0 distinct errors observed`` for an empty log).

Read-only, whether or not the archive runs. Exit codes: 0 ok, 2 no mark file. A missing or
unreadable ``cnc.dat`` (driver stopped and its directory deleted) is reported on the driver's line,
not an error: Aeron's tool fails there, after printing the archive's log.
"""

from __future__ import annotations

import argparse
import datetime
import struct
from pathlib import Path

from aeron_spark.archive.cli.output import EXIT_OK, Output
from aeron_spark.archive.storage import mark_file

CNC_FILE_NAME = "cnc.dat"
_CNC_METADATA_LENGTH = 128  # CncFileDescriptor.META_DATA_LENGTH: two 64-byte cache lines
# cncVersion, toDriverBufferLength, toClientsBufferLength, countersMetaDataBufferLength,
# countersValuesBufferLength, errorLogBufferLength
_CNC_LENGTHS = struct.Struct("<iiiiii")


def errors(args: argparse.Namespace, output: Output) -> int:
    info = mark_file.read_mark_file(args.dir)
    output.line("Archive error log:")
    _print_error_log(mark_file.read_error_log(args.dir), output)
    output.line()
    output.line(f"Aeron driver error log (directory: {info.aeron_directory}):")
    try:
        observations = read_driver_error_log(Path(info.aeron_directory))
    except (OSError, ValueError) as error:
        output.line(f"cannot read the driver's error log: {error}")
        return EXIT_OK
    _print_error_log(observations, output)
    return EXIT_OK


def read_driver_error_log(aeron_directory: Path) -> list[mark_file.ErrorObservation]:
    """The distinct errors in ``aeron_directory/cnc.dat``."""
    path = aeron_directory / CNC_FILE_NAME
    with open(path, "rb") as f:
        metadata = f.read(_CNC_METADATA_LENGTH)
        if len(metadata) < _CNC_LENGTHS.size:
            raise ValueError(f"{path}: {len(metadata)} bytes is too short for the cnc metadata")
        (_version, to_driver, to_clients, counters_metadata, counters_values,
         error_log_length) = _CNC_LENGTHS.unpack_from(metadata, 0)
        f.seek(_CNC_METADATA_LENGTH + to_driver + to_clients + counters_metadata + counters_values)
        return mark_file.decode_error_log(f.read(error_log_length))


def _print_error_log(observations: list[mark_file.ErrorObservation], output: Output) -> None:
    if not observations:
        output.line()
        output.line("0 distinct errors observed")
        return
    for observation in observations:
        output.line()
        output.line(f"{observation.observation_count} observations from "
                    f"{_java_date(observation.first_observation_timestamp)} to "
                    f"{_java_date(observation.last_observation_timestamp)} for:")
        output.line(observation.error)
    output.line()
    output.line(f"{len(observations)} distinct errors observed.")


def _java_date(epoch_ms: int) -> str:
    """Java's ``SimpleDateFormat("yyyy-MM-dd HH:mm:ss.SSSZ")`` in the local time zone."""
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000).astimezone()
    return f"{moment:%Y-%m-%d %H:%M:%S}.{epoch_ms % 1000:03d}{moment:%z}"
