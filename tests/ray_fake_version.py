"""A Ray ``worker_process_setup_hook`` for tests/test_dp.py: the worker reports the lutcore
version in ``LUTCORE_TEST_FAKE_VERSION`` (its runtime_env sets it), as a worker with another
install would."""
import os


def fake():
    import lutcore
    lutcore.__version__ = os.environ["LUTCORE_TEST_FAKE_VERSION"]
