"""lutcore._spin: torch's libgomp and numpy's OpenBLAS are told to spin briefly (GOMP_SPINCOUNT,
OPENBLAS_THREAD_TIMEOUT) when lutcore is imported first; a user's own setting is kept; a pool
loaded before lutcore is reported, not silently ignored."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code, **env):
    e = {k: v for k, v in os.environ.items()
         if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT")}
    e.update(env)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


PROBE = ("import os, lutcore; from lutcore import _spin; "
         "print(_spin.state['libgomp'], os.environ.get('GOMP_SPINCOUNT', '-'), "
         "_spin.state['OpenBLAS'], os.environ.get('OPENBLAS_THREAD_TIMEOUT', '-'))")


@pytest.mark.parametrize("first,env,want", [
    ("", {}, ["set", "10000", "set", "20"]),
    ("", {"GOMP_SPINCOUNT": "77", "OPENBLAS_THREAD_TIMEOUT": "25"}, ["user", "77", "user", "25"]),
    ("", {"OMP_WAIT_POLICY": "passive", "GOTO_THREAD_TIMEOUT": "4"}, ["user", "-", "user", "-"]),
    ("import torch; ", {}, ["late", "-", "late", "-"]),      # torch imports numpy
    ("import numpy; ", {}, ["set", "10000", "late", "-"]),
])
def test_spincount_set_only_when_it_can_work_and_is_not_the_users(first, env, want):
    assert _run(first + PROBE, **env) == want


def test_torch_after_lutcore_sees_it_and_show_config_says_so():
    out = _run("import lutcore, torch, os; print(os.environ['GOMP_SPINCOUNT']); lutcore.show_config()")
    assert out[0] == "10000" and "GOMP_SPINCOUNT=10000" in " ".join(out)
    late = " ".join(_run("import torch, lutcore; lutcore.show_config()"))
    assert "torch was imported before lutcore" in late
