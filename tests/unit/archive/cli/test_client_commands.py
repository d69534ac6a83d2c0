"""The client CLI's argument handling and the transport helpers, without an archive."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from aeron_spark.archive.cli import client_commands
from aeron_spark.archive.cli import main as cli
from aeron_spark.archive.cli.output import EXIT_USAGE
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError, ArchiveTimeoutError
from aeron_spark.archive.client.transport import default_aeron_dir, endpoint_host, with_endpoint_host
from aeron_spark.archive.client.replay_subscription import replay_image_session_id
from aeron_spark.driver_integration.channel_uri import ChannelUri


def run_tool(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return cli.main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict]]:
    """Records how the commands would connect, and fails the connection with a timeout."""
    calls: list[tuple[str, dict]] = []

    def fake_connect(**kw):
        calls.append(("connect", kw))
        raise ArchiveTimeoutError("no response to ConnectRequest correlationId=1 within 0.5 s from X")

    def fake_from_mark_file(archive_dir, **kw):
        calls.append(("from_mark_file", dict(kw, archive_dir=archive_dir)))
        raise ArchiveError("the archive said no", code=1, error_code=5)

    monkeypatch.setattr(ArchiveClient, "connect", staticmethod(fake_connect))
    monkeypatch.setattr(ArchiveClient, "from_mark_file", staticmethod(fake_from_mark_file))
    return calls


def test_connection_options_reach_connect(connections) -> None:
    code, out, err = run_tool("recordings", "--control-channel", "aeron:udp?endpoint=h:9",
                              "--control-stream-id", "7", "--response-channel",
                              "aeron:udp?endpoint=h:8", "--response-stream-id", "21",
                              "--aeron-dir", "/dev/shm/x", "--legacy", "--timeout", "0.5")
    assert code == client_commands.EXIT_TIMEOUT and out == ""
    assert "within 0.5 s" in err
    [(kind, kw)] = connections
    assert kind == "connect"
    assert kw == {"control_channel": "aeron:udp?endpoint=h:9", "control_stream_id": 7,
                  "response_channel": "aeron:udp?endpoint=h:8", "response_stream_id": 21,
                  "aeron_dir": "/dev/shm/x", "protocol": "legacy", "timeout": 0.5}


def test_an_ipc_control_channel_gets_an_ipc_response_channel(connections) -> None:
    run_tool("replay", "3", "--control-channel", "aeron:ipc", "--control-stream-id", "11")
    [(_, kw)] = connections
    assert kw["response_channel"] == "aeron:ipc" and kw["protocol"] == "modern"


def test_dir_uses_the_mark_file_and_archive_errors_exit_1(connections, tmp_path: Path) -> None:
    code, _, err = run_tool("recordings", "--dir", str(tmp_path))
    assert code == client_commands.EXIT_ARCHIVE_ERROR and "the archive said no" in err
    [(kind, kw)] = connections
    assert kind == "from_mark_file" and kw["archive_dir"] == tmp_path
    assert "control_channel" not in kw  # the mark file decides unless given


@pytest.mark.parametrize(("argv", "message"), [
    (["replay", "1", "--follow", "--length", "3"], "--follow and --length exclude each other"),
    (["replay", "1", "--length", "-4"], "--length -4 is invalid"),
    (["recordings", "--count", "-1"], "--count -1 is invalid"),
    (["recordings", "--channel-fragment", "ipc"], "--channel-fragment needs --stream-id"),
])
def test_bad_usage_exits_2_with_the_reason(connections, argv: list[str], message: str) -> None:
    code, _, err = run_tool(*argv)
    assert code == EXIT_USAGE and message in err and connections == []


def test_argument_types_are_checked(connections) -> None:
    code, _, err = run_tool("replay", "seven")
    assert code == EXIT_USAGE and "expected an integer, got 'seven'" in err
    code, _, err = run_tool("recordings", "--timeout", "0")
    assert code == EXIT_USAGE and "expected a positive number of seconds" in err


def test_stat_needs_an_existing_aeron_dir(tmp_path: Path) -> None:
    code, _, err = run_tool("stat", "--aeron-dir", str(tmp_path / "missing"))
    assert code == EXIT_USAGE and "does not exist (is the media driver running?)" in err


def test_the_told_response_channel_names_the_reachable_host() -> None:
    told = ChannelUri.parse(with_endpoint_host("aeron:udp?endpoint=0.0.0.0:40123|term-length=64k", "10.1.2.3"))
    assert told.get("endpoint") == "10.1.2.3:40123" and told.get("term-length") == "64k"
    assert with_endpoint_host("aeron:udp?endpoint=localhost:7", "::1") == "aeron:udp?endpoint=[::1]:7"
    assert endpoint_host("aeron:udp?endpoint=[::1]:7") == "::1"
    for unchanged in ("aeron:ipc", "aeron:udp?control=localhost:9|control-mode=dynamic"):
        assert with_endpoint_host(unchanged, "10.1.2.3") == unchanged and endpoint_host(unchanged) is None
    assert with_endpoint_host("aeron:udp?endpoint=localhost:8020", None) == "aeron:udp?endpoint=localhost:8020"


def test_default_aeron_dir_follows_aeron_dir_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AERON_DIR", "/dev/shm/custom")
    assert default_aeron_dir() == "/dev/shm/custom"
    monkeypatch.delenv("AERON_DIR")
    assert Path(default_aeron_dir()).name.startswith("aeron-")


def test_replay_image_session_id_is_the_signed_low_32_bits() -> None:
    assert replay_image_session_id((5 << 32) | 1234) == 1234
    assert replay_image_session_id((1 << 32) | 0xFFFF_FFFF) == -1
    assert replay_image_session_id(0x8000_0000) == -(1 << 31)
