"""The client commands' media driver and address options (--aeron-driver, --response-host,
--bind-address), without an archive: what they make the commands connect with."""

from __future__ import annotations

import io

import pytest

from aeron_spark.archive.cli import client_commands
from aeron_spark.archive.cli import main as cli
from aeron_spark.archive.cli.output import EXIT_USAGE
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveTimeoutError
from aeron_spark.archive.configuration import DEFAULT_DRIVER_MODE

CONTROL = "aeron:udp?endpoint=127.0.0.1:9"


def run_tool(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return cli.main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Records how `recordings` would connect (then fails it with a timeout); the driver choice is
    recorded instead of starting a driver."""
    calls: list[dict] = []

    def fake_connect(**kw):
        calls.append(kw)
        raise ArchiveTimeoutError("no response to AuthConnectRequest correlationId=1 within 0.5 s from X")

    def fake_driver_dir(mode: str, aeron_dir: str | None) -> str:
        calls.append({"driver_mode": mode, "driver_aeron_dir": aeron_dir})
        return f"/dev/shm/chosen-by-{mode}"

    monkeypatch.setattr(ArchiveClient, "connect", staticmethod(fake_connect))
    monkeypatch.setattr(client_commands, "driver_dir_for_process", fake_driver_dir)
    return calls


def test_a_udp_control_channel_without_a_driver_option_uses_auto_and_tells_the_routed_address(connections) -> None:
    code, _, err = run_tool("recordings", "--control-channel", CONTROL, "--timeout", "0.5")
    assert code == client_commands.EXIT_TIMEOUT
    assert f"option --control-channel {CONTROL}" in err
    [driver, connect] = connections
    assert driver == {"driver_mode": DEFAULT_DRIVER_MODE, "driver_aeron_dir": None}
    assert connect["aeron_dir"] == f"/dev/shm/chosen-by-{DEFAULT_DRIVER_MODE}"
    assert connect["response_channel"] == "aeron:udp?endpoint=127.0.0.1:0"
    assert connect["response_host"] == "127.0.0.1"  # the address that routes to the archive


def test_response_host_and_bind_address_name_the_told_and_the_bound_address(connections) -> None:
    run_tool("recordings", "--control-channel", CONTROL, "--response-host", "203.0.113.7",
             "--bind-address", "0.0.0.0", "--aeron-driver", "embedded")
    [driver, connect] = connections
    assert driver["driver_mode"] == "embedded"
    assert connect["response_channel"] == "aeron:udp?endpoint=0.0.0.0:0"
    assert connect["response_host"] == "203.0.113.7"


def test_an_explicit_aeron_dir_is_used_as_given_unless_a_driver_mode_is_asked(connections) -> None:
    run_tool("recordings", "--control-channel", CONTROL, "--aeron-dir", "/dev/shm/mine")
    [connect] = connections
    assert connect["aeron_dir"] == "/dev/shm/mine"
    connections.clear()
    run_tool("recordings", "--control-channel", CONTROL, "--aeron-dir", "/dev/shm/mine", "--aeron-driver", "auto")
    [driver, connect] = connections
    assert driver == {"driver_mode": "auto", "driver_aeron_dir": "/dev/shm/mine"}


def test_an_ipc_control_channel_keeps_the_driver_at_the_aeron_dir(connections) -> None:
    run_tool("recordings", "--control-channel", "aeron:ipc")
    [connect] = connections
    assert "aeron_dir" not in connect and connect["response_channel"] == "aeron:ipc"


def test_external_without_a_running_driver_is_a_usage_error_naming_the_option(connections, tmp_path) -> None:
    code, _, err = run_tool("recordings", "--control-channel", CONTROL, "--aeron-driver", "external",
                            "--aeron-dir", str(tmp_path / "none"))
    assert code == EXIT_USAGE and connections == []
    assert f"--aeron-driver external: no live media driver in {tmp_path / 'none'}" in err


def test_a_bad_driver_mode_names_the_accepted_values(connections) -> None:
    code, _, err = run_tool("recordings", "--aeron-driver", "shared")
    assert code == EXIT_USAGE and "--aeron-driver" in err
    assert "'auto', 'embedded', 'external'" in err and connections == []


def test_an_unroutable_control_endpoint_names_the_options(connections, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_route(host: str, port: int) -> str:
        raise OSError(f"no local address routes to {host}:{port}")
    monkeypatch.setattr("aeron_spark.archive.client.local_endpoints.address_toward", no_route)
    code, _, err = run_tool("recordings", "--control-channel", "aeron:udp?endpoint=192.0.2.1:8010")
    assert code == EXIT_USAGE
    assert "--control-channel aeron:udp?endpoint=192.0.2.1:8010" in err and "--response-host" in err
