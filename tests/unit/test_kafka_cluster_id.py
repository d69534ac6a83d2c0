"""The Kafka fixture's cluster ids (tests/support/kafka_broker.py): Kafka's Uuid form, and never one
that kafka-storage's argument parser would read as an option (a flaky fixture failure once)."""

from __future__ import annotations

import base64

from tests.support.kafka_broker import random_cluster_id


def test_cluster_ids_are_kafka_uuids_that_never_start_with_a_dash() -> None:
    ids = [random_cluster_id() for _ in range(5_000)]
    assert not any(cluster_id.startswith("-") for cluster_id in ids)
    assert all(len(base64.urlsafe_b64decode(cluster_id + "==")) == 16 for cluster_id in ids)
    assert len(set(ids)) == len(ids)
