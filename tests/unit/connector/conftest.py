import os
import sys

# The synthetic log and the fake archive live next to the tests.
sys.path.insert(0, os.path.dirname(__file__))
