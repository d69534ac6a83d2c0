"""Demo: an embedded Aeron media driver, messages over IPC and UDP localhost, and the log maths.

For every message received it prints the stream position, term id and term offset that Aeron
reports, next to the values recomputed with ``aeron_spark.driver_integration.position``, and
checks that they agree. Run: ``python examples/driver_positions_demo.py`` (exits 0 when
everything agrees).
"""

from __future__ import annotations

import sys
import time

from aeron_spark.archive.cli.sidecar_process import free_udp_port
from aeron_spark.driver_integration import AeronClient, Header, aeron_version
from aeron_spark.driver_integration.frame import compute_fragmented_frame_length
from aeron_spark.driver_integration.position import (
    compute_position,
    compute_term_id_from_position,
    compute_term_offset_from_position,
    position_bits_to_shift,
)

TERM_LENGTH = 64 * 1024
MESSAGES = [b"hello", b"aeron " * 20, b"x" * 3000, b"bye"]


def run(client: AeronClient, channel: str, stream_id: int) -> bool:
    print(f"\n== {channel} (stream {stream_id})")
    subscription = client.add_subscription(channel, stream_id)
    publication = client.add_exclusive_publication(channel, stream_id)
    try:
        deadline = time.monotonic() + 5
        while subscription.image_by_session_id(publication.session_id) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no image on {channel}")
            time.sleep(0.001)
        bits = position_bits_to_shift(publication.term_buffer_length)
        initial = publication.initial_term_id
        print(f"session {publication.session_id}, initial term id {initial}, "
              f"term length {publication.term_buffer_length}, mtu {publication.mtu_length}")
        print(f"{'bytes':>6} {'position':>9} {'term id':>11} {'offset':>7} | "
              f"{'recomputed: position':>20} {'term id':>11} {'offset':>7}  agree")
        for message in MESSAGES:
            publication.offer_with_retry(message)
        all_agree = True
        received = 0

        def show(payload: memoryview, header: Header) -> None:
            nonlocal all_agree, received
            received += 1
            # Aeron's header: start of the message (term id, term offset) and the position after it.
            start = compute_position(header.term_id, header.term_offset, bits, initial)
            recomputed_end = start + compute_fragmented_frame_length(len(payload),
                                                                     publication.max_payload_length)
            term_id = compute_term_id_from_position(start, bits, initial)
            term_offset = compute_term_offset_from_position(start, bits)
            agree = (recomputed_end == header.position and term_id == header.term_id
                     and term_offset == header.term_offset)
            all_agree &= agree
            print(f"{len(payload):>6} {header.position:>9} {header.term_id:>11} {header.term_offset:>7} | "
                  f"{recomputed_end:>20} {term_id:>11} {term_offset:>7}  {'yes' if agree else 'NO'}")

        while received < len(MESSAGES):
            if time.monotonic() > deadline + 5:
                raise TimeoutError(f"only {received} of {len(MESSAGES)} messages on {channel}")
            subscription.poll(show, 10)
        return all_agree
    finally:
        publication.close()
        subscription.close()


def main() -> int:
    print(aeron_version())
    with AeronClient.with_embedded_driver(term_buffer_length=TERM_LENGTH,
                                          ipc_term_buffer_length=TERM_LENGTH) as client:
        print(f"embedded media driver in {client.driver.dir if client.driver else '?'}")
        ok = run(client, "aeron:ipc", 10)
        ok &= run(client, f"aeron:udp?endpoint=localhost:{free_udp_port()}", 20)
    print("\nall positions agree with position.py" if ok else "\nMISMATCH between Aeron and position.py")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
