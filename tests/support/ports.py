"""Ports and channels for tests: the one free-port helper (shared with the examples through
``aeron_spark.archive.cli.sidecar_process``) and a UDP channel built on it."""

from __future__ import annotations

from aeron_spark.archive.cli.sidecar_process import free_udp_port

__all__ = ["free_udp_port", "udp_channel"]


def udp_channel(port: int | None = None, host: str = "localhost") -> str:
    """``aeron:udp?endpoint=host:port``; a free port when none is given."""
    return f"aeron:udp?endpoint={host}:{free_udp_port() if port is None else port}"
