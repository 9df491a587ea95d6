"""Where things are, for the tests in every folder below tests/ (conftest.py puts tests/
on sys.path): TESTS is tests/, ROOT the checkout."""
import os

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
