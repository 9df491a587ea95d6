"""Build lutcore's native extensions.

Design: every hot kernel lives in a C header under include/lutcore/ and is
wrapped by a thin Cython module under lutcore/_native/.  SIMD bodies for AVX2
and AVX-512 are compiled with per-function ``target`` attributes and chosen at
run time from the CPU's features, so one binary runs on any x86-64 (and the
portable C bodies run everywhere else).  The build is never tuned to the
build machine's CPU and never relaxes IEEE semantics; -ffp-contract=off keeps
float results identical across paths.

OpenMP is used when the compiler supports it; LUTCORE_NO_OPENMP=1 forces a
serial build.  ``lutcore.show_config()`` reports which one you got.
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def _compiler_accepts_openmp():
    if os.environ.get("LUTCORE_NO_OPENMP", "0") not in ("", "0"):
        return False, "disabled by LUTCORE_NO_OPENMP"
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cc = cc.split()
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as f:
            f.write("#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
        flags = ["-fopenmp"]
        if sys.platform == "darwin":
            flags = ["-Xpreprocessor", "-fopenmp", "-lomp"]
        cmd = cc + flags + [src, "-o", os.path.join(tmp, "t")]
        extra = os.environ.get("CFLAGS", "").split() + os.environ.get("LDFLAGS", "").split()
        r = subprocess.run(cmd + extra, capture_output=True)
        return r.returncode == 0, ("" if r.returncode == 0 else r.stderr.decode(errors="replace")[-300:])
    except OSError as e:
        return False, str(e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


HAVE_OMP, why = _compiler_accepts_openmp()
if not HAVE_OMP:
    print(f"lutcore: building WITHOUT OpenMP (serial kernels): {why}", file=sys.stderr)

cflags = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-std=c11", "-Wno-unused-function"]
if sys.platform == "win32":
    cflags = ["/O2", "/fp:precise"]
ldflags = []
if HAVE_OMP:
    if sys.platform == "darwin":
        cflags += ["-Xpreprocessor", "-fopenmp"]
        ldflags += ["-lomp"]
    elif sys.platform == "win32":
        cflags += ["/openmp"]
    else:
        cflags += ["-fopenmp"]
        ldflags += ["-fopenmp"]

macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("LUTCORE_HAVE_OPENMP", "1" if HAVE_OMP else "0")]

MODULES = ["_cpu", "gemm", "elementwise", "mamba", "optim", "sgemm", "decode", "alloc", "im2col"]
exts = [
    Extension(
        f"lutcore._native.{name}",
        [f"lutcore/_native/{name}.pyx"],
        include_dirs=[os.path.join(HERE, "include"), np.get_include()],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
        define_macros=macros,
    )
    for name in MODULES
]

setup(
    ext_modules=cythonize(
        exts,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
        compile_time_env={"HAVE_OPENMP": HAVE_OMP},
    ),
)
