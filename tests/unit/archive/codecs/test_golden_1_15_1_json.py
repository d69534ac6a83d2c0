"""Our schema-101 codecs against the exact bytes of Aeron Archive 1.15.1 (golden_1_15_1.json).

The golden file is produced from the real 1.15.1 jar by the interop peer's ``golden`` command
(test_java_archive_selfcheck.py checks that it still is); these tests need no Java.
"""

from __future__ import annotations

import enum
import json
import re
from pathlib import Path
from typing import Any

import pytest

from aeron_spark.archive import codecs

# The interop peer writes the golden file beside its tests; reading it needs no Java.
GOLDEN_FILE = Path(__file__).parents[3] / "interop" / "golden_1_15_1.json"
GOLDEN: list[dict[str, Any]] = json.loads(GOLDEN_FILE.read_text())["messages"]
COMPLETE = [m for m in GOLDEN if m["length"] >= 8 + m["header"]["blockLength"]]
HEADER_ONLY = [m for m in GOLDEN if m["length"] < 8 + m["header"]["blockLength"]]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _plain(value: Any) -> Any:
    return value.name if isinstance(value, enum.Enum) else value


def _id(message: dict[str, Any]) -> str:
    return f"{message['name']}-{message['fields'].get('correlationId', message['fields'].get('recordingId', ''))}"


def test_golden_file_covers_the_requests_a_1_15_1_client_sends_first() -> None:
    names = {m["name"] for m in GOLDEN}
    assert {"ConnectRequest", "StartRecordingRequest", "ReplayRequest", "ListRecordingsRequest"} <= names
    assert all(m["header"]["schemaId"] == 101 and m["header"]["version"] == 0 for m in GOLDEN)


@pytest.mark.parametrize("golden", COMPLETE, ids=_id)
def test_decoding_1_15_1_bytes_gives_the_values_the_java_side_encoded(golden: dict[str, Any]) -> None:
    message = codecs.decode(bytes.fromhex(golden["hex"]))

    assert type(message) is codecs.MESSAGE_TYPES[golden["header"]["templateId"]]
    decoded = {key: _plain(getattr(message, _snake(key))) for key in golden["fields"]}
    assert decoded == golden["fields"]


@pytest.mark.parametrize("golden", COMPLETE, ids=_id)
def test_encoding_with_version_0_reproduces_the_1_15_1_bytes(golden: dict[str, Any]) -> None:
    wire = bytes.fromhex(golden["hex"])
    encoded = codecs.encode(codecs.decode(wire), version=0)

    if "note" in golden:
        # 1.15.1 stopReplay bug: the Java client appends the tail of its previous ReplayRequest.
        assert encoded == wire[:8 + golden["header"]["blockLength"]]
    else:
        assert encoded == wire


@pytest.mark.parametrize("golden", HEADER_ONLY, ids=_id)
def test_a_1_15_1_stop_replay_without_its_body_is_a_clear_codec_error(golden: dict[str, Any]) -> None:
    """A 1.15.1 client that never sent a ReplayRequest sends StopReplay as a bare 8-byte header."""
    with pytest.raises(codecs.CodecError):
        codecs.decode(bytes.fromhex(golden["hex"]))
