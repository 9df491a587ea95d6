"""A Ray ``worker_process_setup_hook`` for tests/pipeline/test_ray_stall.py: the worker sleeps
``LUTCORE_TEST_START_DELAY`` seconds (its runtime_env sets it) before it builds anything,
as a worker on a loaded machine is slow to start.  (A hook per actor must be named by
its module path, and this module imports nothing heavy.)"""
import os
import time


def sleep():
    time.sleep(float(os.environ.get("LUTCORE_TEST_START_DELAY", "0")))
