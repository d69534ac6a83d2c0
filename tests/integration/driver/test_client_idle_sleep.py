"""The client conductor's idle sleep: 1 ms unless the user chose one (Aeron's default is 16 ms,
which made every add or close wait ~30 ms; a bounded replay needs three of them)."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = ("import os, aeron_spark.driver_integration.client as c; "
         "print(os.environ[c.CLIENT_IDLE_SLEEP_ENV])")


def _probe(environment: dict[str, str]) -> str:
    result = subprocess.run([sys.executable, "-c", PROBE], env=environment, capture_output=True, text=True,
                            timeout=60, check=True)
    return result.stdout.strip()


def test_the_client_sleeps_one_millisecond_by_default_and_a_users_choice_wins():
    environment = {k: v for k, v in os.environ.items() if k != "AERON_CLIENT_IDLE_SLEEP_DURATION"}
    assert _probe(environment) == "1ms"
    assert _probe({**environment, "AERON_CLIENT_IDLE_SLEEP_DURATION": "16ms"}) == "16ms"

