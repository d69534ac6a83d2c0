"""connector.connection_cache: one connection per key, re-opened when closed, kept alive between leases."""

from __future__ import annotations

import threading

from aeron_spark.connector.connection_cache import ConnectionCache


class FakeConnection:
    def __init__(self, name: str) -> None:
        self.name = name
        self.is_connected = True
        self.keep_alives = 0
        self.closed = False
        self.fail_keep_alive = False

    def keep_alive(self) -> None:
        if self.fail_keep_alive:
            raise ConnectionError("session gone")
        self.keep_alives += 1

    def close(self) -> None:
        self.closed = True


def cache() -> tuple[ConnectionCache, list[FakeConnection]]:
    opened: list[FakeConnection] = []

    def opener(key: str) -> FakeConnection:
        opened.append(FakeConnection(f"{key}{len(opened)}"))
        return opened[-1]

    return ConnectionCache(opener, keep_alive_interval_s=0), opened


def test_leases_reuse_the_connection_and_a_closed_one_is_replaced():
    connections, opened = cache()
    with connections.lease("a") as (first, reused):
        assert not reused
    with connections.lease("a") as (again, reused):
        assert again is first and reused
    first.is_connected = False
    with connections.lease("a") as (fresh, reused):
        assert fresh is not first and not reused and first.closed


def test_only_connections_no_one_holds_are_kept_alive_and_a_failing_one_is_dropped():
    connections, opened = cache()
    with connections.lease("idle"):
        pass
    handed, _ = connections.get("unmanaged")
    with connections.lease("busy") as (busy, _):
        assert connections.keep_idle_connections_alive() == 1
        assert opened[0].keep_alives == 1 and busy.keep_alives == 0 and handed.keep_alives == 0
    opened[0].fail_keep_alive = True
    assert connections.keep_idle_connections_alive() == 1  # "busy", now idle; "idle" failed
    assert opened[0].closed
    with connections.lease("idle") as (fresh, reused):
        assert fresh is not opened[0] and not reused


def test_a_lease_waits_for_a_keep_alive_in_progress():
    connections, opened = cache()
    with connections.lease("a"):
        pass
    entered, release = threading.Event(), threading.Event()

    def slow_keep_alive() -> None:
        entered.set()
        release.wait(5)

    opened[0].keep_alive = slow_keep_alive
    keeper = threading.Thread(target=connections.keep_idle_connections_alive)
    keeper.start()
    assert entered.wait(5)
    got: list = []
    leaser = threading.Thread(target=lambda: got.append(connections.lease("a").__enter__()))
    leaser.start()
    leaser.join(0.2)
    assert got == []  # still held by the keep-alive
    release.set()
    keeper.join(5)
    leaser.join(5)
    assert got and got[0][0] is opened[0]
