"""A Ray ``worker_process_setup_hook`` for tests/train/test_dp.py: the worker reports the lutcore
version in ``LUTCORE_TEST_FAKE_VERSION`` (its runtime_env sets it), as a worker with another
install would.  It imports the driver's lutcore (``LUTCORE_TEST_ROOT``, put first on the
path: the hook runs before the worker takes the driver's sys.path) and changes its version."""
import os
import sys


def fake():
    sys.path.insert(0, os.environ["LUTCORE_TEST_ROOT"])
    import lutcore
    lutcore.__version__ = os.environ["LUTCORE_TEST_FAKE_VERSION"]
