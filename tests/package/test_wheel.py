"""Packaging: `python -m build` makes an sdist and a wheel (the wheel built from
the sdist, so the sdist is complete), and the wheel installs and works in a
fresh virtual environment, away from this source tree.  The wheel holds the
package's extensions and none of the SIMDe test twins (tests/simde_twins.py builds
those for the tests), and nothing is compiled for the build machine's CPU."""
from _paths import ROOT  # noqa: F401
import os
import re
import subprocess
import sys
import tarfile
import venv
import zipfile



SMOKE = r"""
import os, sys, numpy as np, lutcore
assert 'site-packages' in lutcore.__file__, lutcore.__file__
lutcore.show_config()
a = np.arange(-6, 6, dtype=np.int8).reshape(3, 4); b = np.arange(8, dtype=np.int8).reshape(4, 2)
assert np.array_equal(lutcore.lut_gemm(a, b), a.astype(np.int32) @ b.astype(np.int32))
print("SMOKE OK")
"""


def test_sdist_and_wheel_install_in_fresh_venv(tmp_path):
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), ROOT],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    names = sorted(os.listdir(dist))
    assert any(n.endswith(".tar.gz") for n in names), names
    wheels = [n for n in names if n.endswith(".whl")]
    assert wheels, names
    assert "-march=native" not in r.stdout + r.stderr
    with zipfile.ZipFile(dist / wheels[0]) as z:
        files = z.namelist()
    native = sorted(re.sub(r"\..*", "", f.rsplit("/", 1)[1]) for f in files
                    if f.startswith("lutcore/_native/") and f.endswith((".so", ".pyd")))
    from lutcore._native import MODULES             # every native module the package uses, and no other
    assert native == sorted(MODULES), native
    assert not [f for f in files if "simde" in f.lower()], [f for f in files if "simde" in f.lower()]
    sdist = [n for n in names if n.endswith(".tar.gz")][0]
    with tarfile.open(dist / sdist) as t:   # the sdist keeps the twins' sources (its tests build them)
        assert any(m.name.endswith("lutcore/_native/_simde.pyx") for m in t.getmembers())
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = str(env_dir / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "-q", str(dist / wheels[0])],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = subprocess.run([py, "-c", SMOKE], capture_output=True, text=True, cwd=str(tmp_path))
    assert "SMOKE OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    # the console script is installed too
    r = subprocess.run([str(env_dir / "bin" / "lutcore"), "units", "--verify"],
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0 and "exact" in r.stdout, r.stdout + r.stderr
